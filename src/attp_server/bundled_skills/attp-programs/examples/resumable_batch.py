# ruff: noqa: F821
# Big jobs over several calls: each call handles the next BATCH files and saves its progress in a
# checkpoint file, so the job survives the per-call limits (time, tool calls). Call the same
# program again until "remaining" is 0; "results" then holds the whole answer.
# Tools used: list_files, read_file, write_file.

CHECKPOINT = "progress/line_counts.json"
BATCH = 50

try:
    state = json.loads(read_file(CHECKPOINT))
except ToolError as e:
    if e.code != "FILE_NOT_FOUND":
        raise
    state = {"results": {}, "started": datetime.now().isoformat()}

todo = [p for p in list_files(".", pattern="*.txt", recursive=True) if p not in state["results"]]
for path in todo[:BATCH]:
    state["results"][path] = len(read_file(path, max_lines=5000).splitlines())

write_file(CHECKPOINT, json.dumps(state, indent=1))
__result__ = {
    "done": len(state["results"]),
    "remaining": max(len(todo) - BATCH, 0),
    "results": state["results"] if len(todo) <= BATCH else None,
}
