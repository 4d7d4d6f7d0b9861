# expect: ok
total = 0
for i in range(60):
    total += len(read_file("notes/ideas.md"))
__result__ = "done" if total > 0 else "none"
