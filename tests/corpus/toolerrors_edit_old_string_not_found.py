# expect: ok
try:
    edit_file("config.toml", old_string="port = 9999", new_string="port = 1")
    outcome = "edited"
except ToolError as e:
    outcome = e.code
__result__ = outcome
