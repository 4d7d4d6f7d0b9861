"""The HTTP face's bounds on connections, before any request is read: how many, and how long a request head may take.

Uvicorn (0.55, with h11) bounds neither: a connection that sends nothing, or half a request head, is held until the
client goes away, and its ``limit_concurrency`` counts only requests whose head has arrived. 1,100 half-sent
requests took every descriptor of a server limited to 1,024, before any token was checked (issue 33). So each
connection here is uvicorn's own h11 protocol with two more rules:

* **`header_timeout_s`**: from the moment a connection opens, or a keep-alive connection has answered its last
  request, its next request head must arrive within this time, or the connection is closed.
* **`max_connections`**: past it, a new connection makes room by closing the connection that has been waiting
  longest for a request head (a slow or half-sent one); connections serving a request (a running call, an SSE
  stream) are never closed for it, and when every one is busy the new connection is the one closed. A client
  that sends its request at once is served even while the waiting ones are all an attacker's.

The bound is also kept within the descriptors the process may open (`effective_limit`). Connections refused or
closed here are counted (`ConnectionBound.closed`) and reported in ``/healthz``.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)

RESERVED_DESCRIPTORS = 256
"""Descriptors kept for everything but connections: workers' pipes, the store, upstream servers, shell commands."""
MIN_CONNECTIONS = 16


def effective_limit(max_connections: int) -> int:
    """`max_connections`, lowered to what the process's descriptor limit (``ulimit -n``) leaves for connections."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft - RESERVED_DESCRIPTORS >= max_connections:
        return max_connections
    lowered = max(MIN_CONNECTIONS, soft - RESERVED_DESCRIPTORS)
    logger.warning(
        "max_connections = %d does not fit this process's %d file descriptors (ulimit -n) with %d kept for the "
        "server's own files: at most %d connections are kept open; raise ulimit -n to allow more",
        max_connections,
        soft,
        RESERVED_DESCRIPTORS,
        lowered,
    )
    return lowered


class ConnectionBound:
    """What every connection of one server shares: the limits, and the connections waiting for a request head,
    oldest first."""

    def __init__(self, max_connections: int, header_timeout_s: float) -> None:
        self.limit = effective_limit(max_connections)
        self.header_timeout_s = header_timeout_s
        self.waiting: dict[BoundedH11Protocol, None] = {}
        self.closed = {"header_timeout": 0, "max_connections": 0}

    def protocol(self) -> type[BoundedH11Protocol]:
        """The protocol class to give uvicorn (``Config(http=...)``), bound to these limits."""
        return type("BoundedH11Protocol", (BoundedH11Protocol,), {"bound": self})

    def stats(self) -> dict[str, Any]:
        return {
            "max_connections": self.limit,
            "header_timeout_s": self.header_timeout_s,
            "waiting_for_headers": len(self.waiting),
            "closed": dict(self.closed),
        }


class BoundedH11Protocol(H11Protocol):
    """Uvicorn's h11 protocol under a `ConnectionBound` (see the module docstring)."""

    bound: ConnectionBound
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._wait_for_head()
        if len(self.connections) > self.bound.limit:
            oldest = next(iter(self.bound.waiting), self)  # the one waiting longest: maybe this one
            oldest._close("max_connections")

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the head has arrived (or the connection is done)
            self._stop_waiting()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.our_state is h11.IDLE and self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._wait_for_head()  # kept alive: the next request's head is due in time too

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _wait_for_head(self) -> None:
        self._stop_waiting()
        self.bound.waiting[self] = None
        self._head_timer = self.loop.call_later(self.bound.header_timeout_s, self._close, "header_timeout")

    def _stop_waiting(self) -> None:
        self.bound.waiting.pop(self, None)
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _close(self, why: str) -> None:
        self._stop_waiting()
        self.bound.closed[why] += 1
        if not self.transport.is_closing():
            self.transport.close()
