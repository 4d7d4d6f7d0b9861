"""A small toolpack the tests enable beside `files`: sync and async tools, failures, rich return values."""

from __future__ import annotations

import datetime as dt
import pathlib

import anyio

from attp_server import ToolError, Toolpack


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.

    Returns:
        The sum.
    """
    return a + b


async def slow_echo(text: str, delay: float = 0.0) -> str:
    """Return the text after sleeping `delay` seconds (an async tool).

    Args:
        text: What to echo.
        delay: Seconds to wait first.

    Returns:
        The same text.
    """
    await anyio.sleep(delay)
    return text


def records(n: int = 3) -> list[dict[str, object]]:
    """Return n small records.

    Args:
        n: How many records.

    Returns:
        Records with id, name and score.
    """
    return [{"id": i, "name": f"item-{i}", "score": i * 1.5} for i in range(n)]


def refuse(code: str = "NOT_ALLOWED") -> None:
    """Always fail with a ToolError carrying `code`.

    Args:
        code: The error code to raise.
    """
    raise ToolError(code, f"refused on purpose with {code}", suggested_value="something else", solution="do not")


def crash() -> None:
    """Always fail with an unexpected exception."""
    raise RuntimeError("the tool broke")


def rich() -> dict[str, object]:
    """Return rich Python objects that must arrive in the sandbox as plain JSON data."""
    return {"path": pathlib.Path("/tmp/x"), "when": dt.datetime(2024, 1, 2, 3, 4, 5), "items": (1, 2)}


toolpack = Toolpack(
    name="demo",
    description="Test tools: arithmetic, an async echo, failures and rich values.",
    tools=[add, slow_echo, records, refuse, crash, rich],
    read_only=True,
)
