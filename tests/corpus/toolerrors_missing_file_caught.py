# expect: ok
results = {}
for path in ["notes/ideas.md", "notes/missing.md"]:
    try:
        results[path] = len(read_file(path).splitlines())
    except ToolError as e:
        results[path] = e.code
__result__ = results
