# expect: ok
def read_any(path):
    try:
        return read_file(path)
    except ToolError as e:
        if e.suggested_value:
            return read_file(e.suggested_value)
        raise

try:
    text = read_any("notes/meetng.md")
    outcome = text.splitlines()[0]
except ToolError as e:
    outcome = e.code
__result__ = outcome
