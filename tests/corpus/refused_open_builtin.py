# expect: error FORBIDDEN
with open("notes/todo.md") as f:
    __result__ = f.read()
