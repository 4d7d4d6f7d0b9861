"""MCP sessions as the runtime sees them: who is calling, and what the server keeps for them between calls.

The MCP face names the caller (`Caller`): the transport's session id when the protocol has one (one
stdio connection, a Streamable HTTP ``Mcp-Session-Id``, an SSE ``session_id``) and the name of the
token it presented. `Sessions` turns that into a `Session`, found again by a keyed digest of both,
so the same session id presented with another tenant's token is another session, and nothing the
client sends is ever used as a name or a path. A session holds the variables its programs keep
(`attp_server.sessions.kept_state`), the tools the user allowed for the rest of it, and, under
``isolation = "session"``, the name of its own folder. It ends `session_idle_s` after its last call
(stdio's single session lasts as long as the connection); `Sessions.expire` returns the sessions
that ended so their folders can be removed.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from attp_server.sessions.kept_state import KeptState

STDIO_SESSION = "stdio"
"""The session id of a stdio connection: one process serves one client."""

SESSIONS_AT_FULL_STATE = 64
"""All sessions together keep at most this many times `max_state_bytes`; past it, the sessions used
longest ago lose their kept state (and are told so on their next call)."""

EVICTED = (
    "The variables kept from this session's earlier calls were dropped: the server holds a bounded amount of "
    "session state for all its sessions, and this session's was used longest ago."
)


@dataclass(frozen=True)
class Caller:
    """Who is calling, as the MCP face tells it. None of it is trusted as a name or a path."""

    session: str | None = None
    """The transport's session id; None when the request has no session (2026-07-28 Streamable HTTP, the CLI)."""
    tenant: str | None = None
    """The name of the token the request carried (a name from `auth_tokens`, or "default" for `auth_token`)."""
    label: str = "-"
    """A short, non-secret label for the log line."""


@dataclass(eq=False)
class Session:
    """What the server keeps for one MCP session between its calls."""

    id: str
    """A digest of the caller's session id and tenant: safe as a folder name, and not the session id itself."""
    tenant: str | None
    lasting: bool = False
    """Never ends by idleness (stdio: the session is the connection)."""
    kept: KeptState | None = None
    """The variables and functions its programs left (`session_state`)."""
    approved: set[tuple[str, str]] = field(default_factory=set)
    """(pack, tool) pairs the user allowed for the rest of the session (approvals)."""
    last_used: float = 0.0
    busy: int = 0
    """Calls in flight: a busy session never expires."""
    evicted: bool = False
    """Its kept state was dropped to make room; its next call is told so."""


class Sessions:
    """Every live session of this server process, by the digest of its caller."""

    def __init__(self, idle_s: float, max_total_bytes: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_s = idle_s
        self.max_total_bytes = max_total_bytes
        self.clock = clock
        self._secret = os.urandom(32)
        self._live: dict[str, Session] = {}
        self.kept_bytes = 0
        """Size of every live session's kept state together."""

    def __len__(self) -> int:
        return len(self._live)

    def digest(self, caller: Caller) -> str | None:
        """The session's id: a keyed digest (the key never leaves this process), so it cannot be guessed."""
        if caller.session is None:
            return None
        text = f"{caller.tenant or ''}\0{caller.session}".encode("utf-8", "replace")
        return hmac.new(self._secret, text, hashlib.sha256).hexdigest()[:32]

    def open(self, caller: Caller) -> Session | None:
        """The caller's session, created on its first call; None for a request without a session."""
        key = self.digest(caller)
        if key is None:
            return None
        session = self._live.get(key)
        if session is None:
            session = Session(id=key, tenant=caller.tenant, lasting=caller.session == STDIO_SESSION)
            self._live[key] = session
        session.last_used = self.clock()
        return session

    @contextmanager
    def using(self, session: Session | None) -> Iterator[None]:
        """Mark a call in flight on `session` (it cannot expire meanwhile)."""
        if session is None:
            yield
            return
        session.busy += 1
        try:
            yield
        finally:
            session.busy -= 1
            session.last_used = self.clock()

    def keep(self, session: Session, kept: KeptState | None) -> None:
        """Set the session's kept state; past `max_total_bytes` in all, the least recently used lose theirs."""
        self.kept_bytes += (kept.size if kept else 0) - (session.kept.size if session.kept else 0)
        session.kept = kept
        if self.kept_bytes <= self.max_total_bytes:
            return
        for other in sorted(self._live.values(), key=lambda s: s.last_used):
            if other is not session and other.kept is not None and not other.busy:
                self.kept_bytes -= other.kept.size
                other.kept, other.evicted = None, True
                if self.kept_bytes <= self.max_total_bytes:
                    return

    def expire(self) -> list[Session]:
        """Forget every session idle for `idle_s` (none in flight, not lasting); return them."""
        cutoff = self.clock() - self.idle_s
        ended = [s for s in self._live.values() if not s.lasting and not s.busy and s.last_used <= cutoff]
        for session in ended:
            self.keep(session, None)
            del self._live[session.id]
        return ended

    def close_all(self) -> list[Session]:
        """Forget every session (the server is stopping); return them."""
        ended, self._live, self.kept_bytes = list(self._live.values()), {}, 0
        return ended
