# expect: ok
try:
    read_file("data/sales.csv")
except ToolError as e:
    info = {"code": e.code, "tool": e.tool_name, "parameter": e.parameter_name, "message_ok": "does not exist" in e.message, "str_ok": str(e) == e.message, "has_solution": bool(e.solution)}
__result__ = info
