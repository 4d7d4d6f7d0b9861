# expect: ok
sources = {path: read_file(path) for path in list_files("src", "*.py")}
defined = {}
for path, text in sources.items():
    for name in re.findall(r"^def (\w+)\(", text, re.M):
        defined[name] = path
everything = "\n".join(sources.values())
unused = sorted(name for name in defined if len(re.findall(r"\b" + name + r"\b", everything)) == 1)
__result__ = {"defined": len(defined), "unused": unused}
