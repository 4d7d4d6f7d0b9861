# ruff: noqa: F821
# Change many files in one call, safely: first run with DRY_RUN = True to see what would change,
# then run again with DRY_RUN = False. Only files that contain OLD are rewritten.
# Tools used: list_files, read_file, write_file.

OLD, NEW = "colour", "color"
PATTERN = "*.md"
DRY_RUN = True

plan = []
for path in list_files(".", pattern=PATTERN, recursive=True):
    text = read_file(path, max_lines=5000)
    count = text.count(OLD)
    if count == 0:
        continue
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if OLD in line]
    plan.append({"path": path, "replacements": count, "lines": lines[:10]})
    if not DRY_RUN:
        write_file(path, text.replace(OLD, NEW))

__result__ = {
    "dry_run": DRY_RUN,
    "files": len(plan),
    "replacements": sum(p["replacements"] for p in plan),
    "plan": plan,
}
