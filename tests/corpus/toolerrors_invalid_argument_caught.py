# expect: ok
try:
    read_file("notes/ideas.md", max_lines="ten")
    outcome = "read"
except ToolError as e:
    outcome = {"code": e.code, "parameter": e.parameter_name}
__result__ = outcome
