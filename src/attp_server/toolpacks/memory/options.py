"""Settings of the memory toolpack (``[toolpacks.memory]`` in the configuration, or ``ATTP_MEMORY__<OPTION>``).

The segments listed here are created on the first start and reconciled on every later one: their
name, type, description, permission and order follow the configuration, their pages are left alone.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SegmentType = Literal["system", "user", "tool", "custom"]
Permission = Literal["read_only", "read_write", "system_managed"]

DEFAULT_PERMISSION: dict[str, Permission] = {
    "system": "read_only",
    "user": "read_write",
    "tool": "read_write",
    "custom": "read_write",
}
"""Memci's defaults: a system segment is read-only for the model unless configured otherwise."""

SEGMENT_ID_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
"""No dash: page indexes are ``<segment>-<n>``, so a dash in the id would make them ambiguous to read."""


class SeedPage(BaseModel):
    """A page created with its segment: a detail page when ``detail`` is given, else a contents page."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="The page's name.")
    description: str = Field("", description="One line saying what the page holds.")
    detail: str | None = Field(None, description="The text of a detail page.")
    pages: list[SeedPage] = Field(default_factory=list, description="The children of a contents page.")
    hidden: bool = Field(False, description="Create the page hidden (folded) instead of expanded.")

    @model_validator(mode="after")
    def _detail_or_children(self) -> Self:
        if self.detail is not None and self.pages:
            raise ValueError(f"seed page {self.name!r} has both detail and pages; a page is one or the other")
        return self


class SegmentSpec(BaseModel):
    """One segment of the page tree, as the operator configures it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=SEGMENT_ID_PATTERN, description="Short id; page indexes are '<id>-<n>'.")
    name: str = Field(min_length=1, description="Name of the segment and of its root page.")
    type: SegmentType = Field("custom", description="system, user, tool or custom.")
    description: str = Field("", description="What the segment is for (also the root page's description).")
    permission: Permission | None = Field(
        None, description="read_only, read_write or system_managed; default: read_only for system, else read_write."
    )
    pages: list[SeedPage] = Field(
        default_factory=list, description="Pages created under the root when the segment is first created."
    )

    @property
    def effective_permission(self) -> Permission:
        return self.permission or DEFAULT_PERMISSION[self.type]


def _default_segments() -> list[SegmentSpec]:
    return [
        SegmentSpec(
            id="sys",
            name="System",
            type="system",
            description="Standing instructions and facts from the operator; you can read them but not change them.",
            permission="read_only",
        ),
        SegmentSpec(
            id="usr",
            name="User",
            type="user",
            description="Your own notes about the user and the work; organise them as you like.",
            permission="read_write",
        ),
    ]


class MemoryOptions(BaseModel):
    """Settings of the memory toolpack."""

    model_config = ConfigDict(extra="forbid")

    segments: list[SegmentSpec] = Field(
        default_factory=_default_segments,
        description="The segments, in display order. Environment: a JSON list in ATTP_MEMORY__SEGMENTS.",
    )
    busy_timeout_s: float = Field(
        5.0, gt=0, le=60, description="How long a tool call waits for another process's write to finish."
    )
    max_name_chars: int = Field(200, ge=1, description="Longest page name.")
    max_description_chars: int = Field(2_000, ge=1, description="Longest page description.")
    max_detail_chars: int = Field(200_000, ge=1, description="Longest detail text of one page.")

    @field_validator("segments", mode="before")
    @classmethod
    def _segments_from_json(cls, value: Any) -> Any:
        # Environment variables arrive as text.
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"segments must be a JSON list of segment tables: {exc}") from exc
        return value

    @field_validator("segments")
    @classmethod
    def _unique_ids(cls, segments: list[SegmentSpec]) -> list[SegmentSpec]:
        if not segments:
            raise ValueError("at least one segment is needed")
        seen: set[str] = set()
        for segment in segments:
            if segment.id in seen:
                raise ValueError(f"segment id {segment.id!r} is listed twice")
            seen.add(segment.id)
        return segments
