"""Who may reach what, as configured: the ``[access.NAME]`` tables (SPEC §17).

A rule names whom it applies to (``principals``: signed-in principals by their principal claim, or the names of
`auth_tokens`; ``groups``: the groups claim's values) and what they reach (``tools``: globs of ``pack.tool``,
``files.*``, ``github.search_*``, ``*``), and optionally what else holds for them: ``engines``, ``approval``,
``rate_limit_per_minute``, ``isolation``. When any rule exists, a principal reaches the union of the ``tools`` of
the rules that match it and nothing else; a principal no rule matches reaches no tool. The rules are data here;
`attp_server.access` applies them.

    [access.engineering]
    groups = ["engineering"]
    tools = ["files.*", "github.*"]

    [access.support]
    groups = ["support"]
    tools = ["files.read_file", "files.list_dir", "jira.*"]
    approval = "destructive"
    rate_limit_per_minute = 60
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from attp_server.sandbox.engines import EngineName

Approval = Literal["never", "destructive", "always"]
Isolation = Literal["shared", "session", "tenant"]
Engine = EngineName

MAX_NAMES = 1000
"""Most principals, groups or tool patterns one rule lists."""


class AccessRule(BaseModel):
    """One ``[access.NAME]`` table: whom it applies to, and what they reach."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    principals: list[str] = Field(
        default_factory=list,
        max_length=MAX_NAMES,
        description="Principals it applies to: values of oauth_principal_claim, or names of auth_tokens.",
    )
    groups: list[str] = Field(
        default_factory=list, max_length=MAX_NAMES, description="Groups (values of oauth_groups_claim) it applies to."
    )
    tools: list[str] = Field(
        default_factory=list,
        max_length=MAX_NAMES,
        description='What they reach: globs of pack.tool ("files.*", "github.search_*", "*").',
    )
    engines: list[Engine] | None = Field(
        None, description="The languages their programs may use (default: any the server offers)."
    )
    approval: Approval | None = Field(None, description="The approval mode for their calls (default: approval's).")
    rate_limit_per_minute: PositiveInt | None = Field(
        None, description="Their tool calls per minute (default: rate_limit_per_minute's)."
    )
    isolation: Isolation | None = Field(
        None,
        description="Whose files and memory their calls see: shared, session or tenant (default: isolation's).",
    )

    @field_validator("principals", "groups")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not name.strip() or len(name) > 200:
                raise ValueError(f"{name[:40]!r} is not a name: 1-200 characters, not blank")
        return names

    @field_validator("tools")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            if pattern != "*" and "." not in pattern:
                raise ValueError(
                    f"tool pattern {pattern[:60]!r} names no pack: write pack.tool, with globs "
                    '("files.*", "github.search_*", or "*" for everything)'
                )
        return patterns

    @model_validator(mode="after")
    def _applies_to_someone(self) -> AccessRule:
        if not self.principals and not self.groups:
            raise ValueError("a rule applies to someone: give principals = [...] or groups = [...]")
        return self
