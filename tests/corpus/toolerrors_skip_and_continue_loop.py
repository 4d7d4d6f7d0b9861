# expect: ok
paths = ["notes/todo.md", "nope.txt", "notes/ideas.md", "also/nope.txt"]
ok, failed = [], []
for p in paths:
    try:
        read_file(p)
        ok.append(p)
    except ToolError as e:
        failed.append(f"{p}: {e.code}")
print("\n".join(failed))
__result__ = {"ok": ok, "failed": len(failed)}
