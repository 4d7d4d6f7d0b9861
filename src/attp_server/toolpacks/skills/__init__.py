"""The ``skills`` toolpack: open the skills library's how-to guides and their attached files."""

from __future__ import annotations

from attp_server.model.skills import SkillLibrary, default_skills_dirs
from attp_server.toolpack import ToolFunction, Toolpack, ToolpackContext
from attp_server.toolpacks.skills.tools import SkillTools

__all__ = ["SkillTools", "build", "toolpack"]


def build(ctx: ToolpackContext) -> list[ToolFunction]:
    """Load the library once (the `skills_dirs` setting, else the bundled one) and bind the tools to it."""
    return SkillTools(SkillLibrary.load(list(ctx.skills_dirs) or default_skills_dirs())).tools()


toolpack = Toolpack(
    name="skills",
    description="How-to guides (skills) with templates and examples: list them, open one, read its files.",
    build=build,
    read_only=True,
)
