# ruff: noqa: F821
# Expect failures: load every JSON file under "data/", keep going when one is missing, unreadable
# or malformed, and report each problem with the reason the model needs to fix it.
# Tools used: list_files, read_file. A ToolError carries .code, .message and .suggested_value.

loaded, problems = {}, []
try:
    paths = list_files("data", pattern="*.json", recursive=True)
except ToolError as e:
    paths = []
    problems.append({"path": "data", "code": e.code, "message": e.message})

for path in paths:
    try:
        loaded[path] = json.loads(read_file(path, max_lines=5000))
    except ToolError as e:  # the tool refused: FILE_TOO_LARGE, BINARY_FILE, ...
        problems.append({"path": path, "code": e.code, "message": e.message})
    except ValueError as e:  # json.loads: not valid JSON
        problems.append({"path": path, "code": "INVALID_JSON", "message": str(e)})

__result__ = {
    "loaded": sorted(loaded),
    "keys": {path: sorted(value)[:10] for path, value in loaded.items() if isinstance(value, dict)},
    "problems": problems,
}
