# expect: ok
try:
    create_detail_page("Note", "x", "y", "sys-0")
    outcome = "created"
except ToolError as e:
    outcome = {"code": e.code, "suggested": e.suggested_value}
__result__ = outcome
