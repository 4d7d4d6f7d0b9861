# expect: ok
todos = []
for path in list_files("notes", "*.md"):
    for number, line in enumerate(read_file(path).splitlines(), 1):
        if "TODO" in line:
            todos.append({"file": path, "line": number, "text": line.split("TODO:", 1)[1].strip()})
__result__ = todos
