"""What the model reads about an engine's language: one `Language` per engine, in that engine's folder.

`attp_server.model.catalog` (the tool description, ``help()``) and `attp_server.model.prompt` (the system
prompt) put these texts together; nothing there names an engine. Runs in the server (and in the worker, with
the table); imports nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PromptParts:
    """An engine's sections of the system prompt, in one of its languages (English, Chinese)."""

    rules: str
    """The code rules' lines about the language (each starting ``- ``)."""
    errors: str
    """How a failed tool call shows in a program, and how to handle it."""


@dataclass(frozen=True)
class Language:
    """An engine's language as the model reads it."""

    name: str
    """Its name in "write a short ... program" (Python, Starlark)."""
    summary: str
    """One phrase for the list of engines a call may pick: what it is and what it lacks."""
    rules: tuple[str, ...]
    """The tool description's lines about the language (each starting ``- ``)."""
    prompt: Mapping[str, PromptParts]
    """The system prompt's parts, by prompt language (``en``, ``zh``)."""
    imports: bool = True
    """``import json`` binds a curated module (False: nothing can be imported)."""
    modules: tuple[str, ...] | None = None
    """The modules it always has (None: those the ``modules`` setting enables)."""
    solutions: Mapping[str, str] = field(default_factory=dict)
    """Error code -> the solution a result gets on this engine, where it differs from the general one."""
    suffix: str = ".py"
    """The file extension of its programs (``attp exec prog.star``)."""
