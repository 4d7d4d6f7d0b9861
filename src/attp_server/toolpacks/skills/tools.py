"""The three skill tools. Their docstrings are what the model reads, so they are written for it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from attp_server.errors import short_repr, suggest
from attp_server.model.skills import SkillError, SkillLibrary, SkillNotFound
from attp_server.toolpack import ToolError, ToolFunction


@contextmanager
def _as_tool_errors(**received: str) -> Iterator[None]:
    """Turn the library's errors into ToolErrors that name the argument to change."""
    try:
        yield
    except SkillError as exc:
        parameter = "name" if isinstance(exc, SkillNotFound) else "path"
        expected = None
        if isinstance(exc, SkillNotFound):
            expected = "one of: " + ", ".join(exc.known) if exc.known else "a skill name (the library is empty)"
        raise ToolError(
            exc.code,
            exc.message,
            parameter_name=parameter,
            received=short_repr(received.get(parameter, "")),
            expected=expected,
            suggested_value=exc.suggestion,
            solution=exc.solution,
        ) from None


class SkillTools:
    """The tools, bound to one loaded library."""

    def __init__(self, library: SkillLibrary) -> None:
        self.library = library

    def tools(self) -> list[ToolFunction]:
        return [self.use_skill, self.list_skills, self.read_skill_file]

    def use_skill(self, name: str) -> dict[str, Any]:
        """Open a skill: a how-to guide for a kind of task, with its attached templates and examples.

        Open the matching skill before a task it covers and follow it; then read the attached
        files you need with read_skill_file(name, path).

        Args:
            name: The skill's name as list_skills() shows it, e.g. "attp-programs".

        Returns:
            {"name": str, "title": str, "description": str, "category": str or None,
            "content": the whole SKILL.md guide (Markdown text),
            "files": attached file paths relative to the skill, e.g. ["templates/pack_template.py"]}.

        Raises:
            ToolError: SKILL_NOT_FOUND (suggested_value holds the closest skill name).

        Example:
            skill = use_skill("toolpack-authoring")
            __result__ = {"guide": skill["content"], "files": skill["files"]}
        """
        with _as_tool_errors(name=name):
            skill = self.library.get(name)
            content = skill.content()
        return {**skill.summary(), "content": content}

    def list_skills(self, category: str | None = None) -> list[dict[str, Any]]:
        """List the skills in the library, optionally only those of one category.

        Args:
            category: Only skills of this category (e.g. "attp"); None lists every skill.

        Returns:
            A list of {"name", "title", "description", "category"}, sorted by name.
            Call use_skill(name) to open one.

        Raises:
            ToolError: CATEGORY_NOT_FOUND (suggested_value holds the closest category).

        Example:
            __result__ = [s["name"] + ": " + s["description"] for s in list_skills()]
        """
        skills = self.library.skills()
        if category is not None:
            categories = self.library.categories()
            wanted = category.strip().lower()
            if wanted not in {c.lower() for c in categories}:
                raise ToolError(
                    "CATEGORY_NOT_FOUND",
                    f"No skill has category {category!r}. Categories: {', '.join(categories) or 'none'}.",
                    parameter_name="category",
                    received=short_repr(category),
                    expected="one of: " + ", ".join(categories) if categories else "None (no skill has a category)",
                    suggested_value=suggest(category, categories),
                    solution="Call list_skills() without a category to see every skill.",
                )
            skills = [s for s in skills if (s.category or "").lower() == wanted]
        return [
            {"name": s.name, "title": s.title, "description": s.description, "category": s.category} for s in skills
        ]

    def read_skill_file(self, name: str, path: str) -> str:
        """Read a text file attached to a skill: a template, an example or an SOP.

        Args:
            name: The skill's name, e.g. "toolpack-authoring".
            path: The file's path relative to the skill, exactly as listed in use_skill(name)["files"],
                e.g. "templates/pack_template.py".

        Returns:
            The file's full text.

        Raises:
            ToolError: SKILL_NOT_FOUND, SKILL_FILE_NOT_FOUND (suggested_value holds the closest file),
                PATH_OUTSIDE_SKILL (absolute path or '..'), BINARY_FILE (not UTF-8 text), FILE_TOO_LARGE.

        Example:
            template = read_skill_file("toolpack-authoring", "templates/pack_template.py")
            write_file("mypack/__init__.py", template)
        """
        with _as_tool_errors(name=name, path=path):
            return self.library.read_file(name, path)
