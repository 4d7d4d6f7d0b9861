# expect: error FORBIDDEN
__result__ = open("notes/todo.md").read()
