"""Rate limits per principal (`rate_limit_per_minute`): how many tool calls one token's holder may make a minute.

A principal is the name of the token a request carried (a name from `auth_tokens`, "default" for
`auth_token`), or `ANONYMOUS` without one (stdio, loopback HTTP without tokens, the CLI). Each has a
token bucket holding at most its limit, refilled at limit/60 per second: a burst of up to a minute's
calls at once, then a steady rate. A call past it is refused with ``RATE_LIMITED``, saying when the
next call would be allowed. What counts is a call of a tool (built-in or upstream); ``help()`` and
``tools()`` do not.

The buckets live in this process: with several replicas behind a load balancer each counts its own
calls (docs/operations.md says why and what to set). Memory is bounded: principals are the configured
token names and `ANONYMOUS`, one bucket each.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from attp_server.errors import ErrorCode, ErrorInfo
from attp_server.settings import DEFAULT_TENANT, Settings

ANONYMOUS = "anonymous"
"""The principal of a call without a token."""

PER_MINUTE = 60.0


def principal_of(tenant: str | None) -> str:
    """The principal a call is counted against: its token's name, or `ANONYMOUS`."""
    return tenant if tenant else ANONYMOUS


def known_principals(settings: Settings) -> frozenset[str]:
    """Every principal name this server can see: the token names, "default" for `auth_token`, `ANONYMOUS`."""
    names = {ANONYMOUS, *settings.auth_tokens}
    if settings.auth_token is not None:
        names.add(DEFAULT_TENANT)
    return frozenset(names)


@dataclass
class _Bucket:
    limit: int
    tokens: float
    updated: float


class RateLimits:
    """The `rate_limit_per_minute` setting, applied to one tool call at a time."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.monotonic) -> None:
        configured = settings.rate_limit_per_minute
        if isinstance(configured, dict):
            self.limits = {name: n for name, n in configured.items() if name != "default"}
            self.default: int | None = configured.get("default")
        else:
            self.limits, self.default = {}, configured
        self.principals = known_principals(settings)
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.limits) or self.default is not None

    def unknown_names(self) -> list[str]:
        """Names of the table that no token has (a typo: their limit never applies)."""
        return sorted(set(self.limits) - self.principals)

    def limit_for(self, principal: str) -> int | None:
        return self.limits.get(principal, self.default)

    def take(self, principal: str, tool: str) -> ErrorInfo | None:
        """Count one call of `tool` by `principal`: None when it may run, else the ``RATE_LIMITED`` error."""
        limit = self.limit_for(principal)
        if limit is None:
            return None
        now = self.clock()
        bucket = self._buckets.get(principal)
        if bucket is None:
            bucket = self._buckets[principal] = _Bucket(limit, float(limit), now)
        rate = limit / PER_MINUTE
        bucket.tokens = min(float(limit), bucket.tokens + (now - bucket.updated) * rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        wait = math.ceil((1.0 - bucket.tokens) / rate)
        return ErrorInfo(
            code=ErrorCode.RATE_LIMITED,
            message=f"{tool}() was not run: the tool calls of {principal!r} are limited to {limit} a minute "
            f"(rate_limit_per_minute); the next call is allowed in {wait} s. Nothing was done.",
            tool_name=tool,
            solution=f"Retry in {wait} s, or do the task with fewer tool calls (parallel() counts each item).",
        )
