"""What a face hands the runtime: the inputs of `attp_execute` and who is asking."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from attp_server.sandbox.engines import EngineName
from attp_server.sessions.approvals import Ask
from attp_server.sessions.registry import Caller

Engine = EngineName


@dataclass(frozen=True)
class ExecuteRequest:
    """The inputs of `attp_execute`: exactly one of `code` / `envelope`."""

    code: str | None = None
    envelope: str | None = None
    target: str | None = None
    thought: str | None = None
    engine: str | None = None
    """The engine the program asks for (one of the server's `Settings.offered_engines`, else the run is refused
    with an error naming them); None means the `engine` setting. TAM blocks always run as Python."""
    reset: bool = False
    """Clear the session's kept variables and functions before the program runs."""
    session: str | None = None
    """The handle of the session this call continues (an earlier result's ``session``); None starts a new one,
    or continues the transport's own session on a handshake-era connection."""


OpenUrl = Callable[[str, str], Awaitable[bool]]
"""Asks the person to open a link (message, URL): True once they agreed."""

Progress = Callable[[float, str], Awaitable[None]]
"""Told after each tool call of a run (how many calls are done, and a message naming the tool), and while
a long call reports its own progress (calls done plus the fraction of this one)."""


@dataclass(frozen=True)
class CallContext:
    """Who asked, for the log line, and where progress goes (MCP progress notifications)."""

    call_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    session: str = "-"
    progress: Progress | None = None
    caller: Caller | None = None
    """Whose session this call belongs to (None: no session, e.g. the CLI)."""
    ask: Ask | None = None
    """How to ask the user to approve a tool call (MCP elicitation); None when nobody can be asked."""
    open_url: OpenUrl | None = None
    """How to ask the user to open a link (URL-mode elicitation: connecting their own account to an upstream
    server); None when the client cannot be asked."""
