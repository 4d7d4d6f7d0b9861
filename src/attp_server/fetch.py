"""One HTTP request whose whole answer is bounded in time and in bytes: what sign-in (the issuer's metadata, keys
and introspection) and the upstreams that see the person (their authorization servers, token exchange) fetch.

`bounded_fetch` gives up when the answer has not all arrived within `timeout_s` (however slowly it drips: the
bound is on the whole exchange, not on each read) or grows past `max_bytes` (refused unread past that, the
connection dropped); either way, and when the server cannot be reached, it raises `FetchError` naming the host
and path (never the query, which may carry a secret) and why. It runs on the event loop as I/O and never blocks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2


class FetchError(Exception):
    """A fetch that failed, took too long or answered too much; the message says which."""


def where(url: str) -> str:
    """The scheme, host and path of `url`, for a message (no query, no user info)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"[:200]


async def bounded_fetch(
    client: httpx2.AsyncClient,
    method: str,
    url: str,
    *,
    timeout_s: float,
    max_bytes: int,
    data: Mapping[str, str] | None = None,
    json_body: Any = None,
    auth: tuple[str, str] | None = None,
) -> tuple[int, bytes]:
    """The status and body of one request (see the module). Raises `FetchError`."""
    body = b""
    with anyio.move_on_after(timeout_s) as bounded:
        try:
            async with client.stream(method, url, data=data, json=json_body, auth=auth) as response:
                length = response.headers.get("content-length", "")
                if length.isdigit() and int(length) > max_bytes:
                    raise FetchError(
                        f"{where(url)} answered {int(length):,} bytes, more than the {max_bytes:,} accepted"
                    )
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > max_bytes:
                        raise FetchError(f"{where(url)} answered more than the {max_bytes:,} bytes accepted")
                status = response.status_code
        except httpx2.HTTPError as exc:
            raise FetchError(f"{where(url)} could not be reached ({type(exc).__name__})") from None
    if bounded.cancelled_caught:
        raise FetchError(f"{where(url)} did not answer within {timeout_s:g} s")
    return status, body
