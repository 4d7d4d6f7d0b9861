"""Rate limits per principal (`rate_limit_per_minute`): how many tool calls one token's holder may make a minute.

A principal is the signed-in principal of a request (sign-in), the name of the token it carried (a name from
`auth_tokens`, "default" for `auth_token`), or `ANONYMOUS` without one (stdio, loopback HTTP without tokens, the
CLI); its access rules may give it a limit of its own (`Grant.rate_limit_per_minute`). Each has a
token bucket holding at most its limit, refilled at limit/60 per second: a burst of up to a minute's
calls at once, then a steady rate. A call past it is refused with ``RATE_LIMITED``, saying when the
next call would be allowed. What counts is a call of a tool (built-in or upstream); ``help()`` and
``tools()`` do not.

The buckets live in this process: with several replicas behind a load balancer each counts its own
calls (docs/operations.md says why and what to set). Memory is bounded: one bucket per principal, at most
`MAX_BUCKETS` (the one used longest ago is dropped first).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from attp_server.errors import ErrorCode, ErrorInfo
from attp_server.settings import DEFAULT_TENANT, Settings

ANONYMOUS = "anonymous"
"""The principal of a call without a token."""

PER_MINUTE = 60.0
MAX_BUCKETS = 100_000
"""Principals whose buckets are kept (signed-in principals are as many as the people who sign in)."""


def principal_of(tenant: str | None) -> str:
    """The principal a call is counted against: its token's name, or `ANONYMOUS`."""
    return tenant if tenant else ANONYMOUS


def known_principals(settings: Settings) -> frozenset[str]:
    """Every principal name this server's configuration names: the token names, "default" for `auth_token`,
    `ANONYMOUS`, and the principals the access rules name (a signed-in principal they do not name is not known:
    its metrics label is "other")."""
    names = {ANONYMOUS, *settings.auth_tokens, *(name for rule in settings.access.values() for name in rule.principals)}
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
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return bool(self.limits) or self.default is not None

    def unknown_names(self) -> list[str]:
        """Names of the table that no token has (a typo: their limit never applies)."""
        return sorted(set(self.limits) - self.principals)

    def limit_for(self, principal: str) -> int | None:
        return self.limits.get(principal, self.default)

    def take(self, principal: str, tool: str, granted: int | None = None) -> ErrorInfo | None:
        """Count one call of `tool` by `principal`: None when it may run, else the ``RATE_LIMITED`` error.
        `granted`: the limit the principal's access rules give it, which the table's entry for its name overrides."""
        limit = self.limits.get(principal, granted if granted is not None else self.default)
        if limit is None:
            return None
        now = self.clock()
        bucket = self._buckets.get(principal)
        if bucket is None:
            bucket = self._buckets[principal] = _Bucket(limit, float(limit), now)
            if len(self._buckets) > MAX_BUCKETS:  # the one used longest ago starts afresh if it comes back
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(principal)
            bucket.limit = limit
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
