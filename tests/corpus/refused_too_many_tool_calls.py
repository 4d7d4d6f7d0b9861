# expect: error TOOL_CALL_LIMIT
for i in range(1000):
    read_file("notes/ideas.md")
