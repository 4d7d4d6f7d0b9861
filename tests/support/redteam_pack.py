"""The red-team suite's toolpack: an async tool, a tool holding a secret credential, and rich return values."""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import os
import pathlib

import anyio

from attp_server import Toolpack

CREDENTIAL = "cred-7f3a9c-DO-NOT-LEAK"
"""A tool's secret. A program must never see it: it lives in the server process only."""


async def fetch_later(text: str, delay: float = 0.0) -> str:
    """Return `text` after an async sleep.

    Args:
        text: Anything.
        delay: Seconds to wait.
    """
    await anyio.sleep(delay)
    return text


def vault_status() -> dict[str, object]:
    """Report whether the vault is reachable (uses a credential the program must never see)."""
    return {"reachable": bool(CREDENTIAL), "user": "svc"}


def rich_values() -> dict[str, object]:
    """Return rich Python objects, which must reach the program as plain JSON data only."""
    return {
        "path": pathlib.Path(os.getcwd()),
        "when": dt.datetime(2024, 1, 2, tzinfo=dt.UTC),
        "amount": decimal.Decimal("1.50"),
        "tags": {"b", "a"},
        "pair": (1, 2),
    }


def callable_value() -> object:
    """Return a callable holding bound arguments (must be refused at the boundary, never passed in)."""
    return functools.partial(print, CREDENTIAL)


toolpack = Toolpack(
    name="redteam",
    description="Targets for the red-team suite.",
    tools=[fetch_later, vault_status, rich_values, callable_value],
    read_only=True,
)
