# ruff: noqa: F821
# Unsure which tool does what? Ask the server from inside the program instead of guessing:
# tools("word") searches the enabled tools, help("name") returns one tool's full description,
# list_skills() lists the how-to guides (open one with use_skill(name)).

matches = tools("file")
__result__ = {
    "file_tools": [t["signature"] for t in matches],
    "edit_file_help": help("edit_file"),
    "skills": [s["name"] + ": " + s["description"] for s in list_skills()],
}
