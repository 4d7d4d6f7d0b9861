# expect: error NAME_NOT_FOUND
# message: read_file
__result__ = reed_file("notes/todo.md")
