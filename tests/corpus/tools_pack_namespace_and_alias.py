# expect: ok
a = files.read_file("notes/ideas.md")
b = file_reader("notes/ideas.md")
__result__ = {"same": a == b, "first": a.splitlines()[0]}
