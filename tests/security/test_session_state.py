"""Kept session state as attack surface, through the real path (worker, server re-check, next worker).

Each case: a first program tries to leave something dangerous for its session's next call; the
second program shows what came through. What must hold: only plain data and ``def`` statements
cross between runs, nothing is re-run that calls a tool, each run's own objects (``random``, tool
stubs) are fresh, and nothing of one session reaches another (SECURITY.md points 3 and 7).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness import running

from attp_server.run.runtime import CallContext, ExecuteRequest, Runtime
from attp_server.sessions.registry import Caller

pytestmark = pytest.mark.anyio


async def run(runtime: Runtime, code: str, session: str = "attacker") -> dict[str, Any]:
    result = await runtime.execute(ExecuteRequest(code=code), CallContext(caller=Caller(session=session)))
    return result.model_dump(mode="json")


CASES = [
    pytest.param(
        "def leak(p=write_file('planted.txt', 'x')):\n    return p",
        "__result__ = leak()",
        "default values call a function",
        id="tool-call-in-a-default-re-run-on-restore",
    ),
    pytest.param(
        "def outer():\n    secret = 'cell'\n    def inner():\n        return secret\n    return inner\ngrab = outer()",
        "__result__ = grab()",
        "function made at run time",
        id="closure-cells-carried-over",
    ),
    pytest.param(
        "err = None\ntry:\n    1 / 0\nexcept ZeroDivisionError as e:\n    err = e",
        "__result__ = err",
        "str(e)",
        id="exception-object-carried-over",
    ),
    pytest.param(
        "loop = []\nloop.append(loop)",
        "__result__ = loop",
        "levels deep",
        id="self-containing-structure",
    ),
    pytest.param(
        "deep = []\nfor i in range(300):\n    deep = [deep]",
        "__result__ = deep",
        "levels deep",
        id="nesting-past-the-limit",
    ),
    pytest.param(
        "huge = 10 ** 5000",
        "__result__ = huge",
        "integer too long",
        id="integer-past-the-text-limit",
    ),
    pytest.param(
        "m = re.match('a', 'a')",
        "__result__ = m",
        "not plain data",
        id="match-object-carried-over",
    ),
]


@pytest.mark.parametrize(("plant", "probe", "reason"), CASES)
async def test_only_plain_data_and_defs_cross_between_runs(
    runtime: Runtime, plant: str, probe: str, reason: str
) -> None:
    planted = await run(runtime, plant)
    assert reason in (planted["hint"] or ""), planted
    probed = await run(runtime, probe)
    assert probed["status"] == "error" and probed["error"]["code"] == "NAME_NOT_FOUND", probed
    assert [c["tool"] for c in probed["calls"]] == []


async def test_a_kept_tool_reference_is_this_runs_own_stub(runtime: Runtime) -> None:
    await run(runtime, "reader = read_file\nroll = random.random\nwrite_file('mine.txt', 'ok')")
    data = await run(runtime, "__result__ = [reader('mine.txt'), 0 <= roll() < 1]")
    assert data["result"] == ["ok", True], data
    assert [c["tool"] for c in data["calls"]] == ["read_file"]


async def test_a_kept_def_is_checked_again_like_the_program(runtime: Runtime) -> None:
    """A def the sandbox would refuse never gets kept: the program that defines it never runs."""
    data = await run(runtime, "def peek(x):\n    return x.__class__\n__result__ = 1")
    assert data["error"]["code"] == "FORBIDDEN"
    assert (await run(runtime, "__result__ = peek(1)"))["error"]["code"] == "NAME_NOT_FOUND"


async def test_state_at_the_cap_is_restored_every_call_and_stays_bounded(runtime: Runtime) -> None:
    half = runtime.settings.max_state_bytes // 2 - 100
    await run(runtime, f"blob = 'x' * {half}")
    for _ in range(3):  # each call tries to double it; the cap keeps what fits and names the rest
        data = await run(runtime, "more = blob + blob\n__result__ = len(more)")
        assert data["result"] == 2 * half, data
        assert "more (too big" in data["hint"]
    assert (await run(runtime, "__result__ = len(blob)"))["result"] == half


async def test_another_session_cannot_reach_the_kept_state(runtime: Runtime) -> None:
    await run(runtime, "token = 'only-mine'\ndef mine():\n    return token", session="victim")
    for probe in ("__result__ = token", "__result__ = mine()", "__result__ = [k for k in tools() if 'mine' in k]"):
        data = await run(runtime, probe, session="attacker")
        assert "only-mine" not in str(data["result"]), data


async def test_kept_functions_count_against_the_cap(workspace: Path) -> None:
    """Regression: kept defs were kept whatever their size, so one session's state grew past max_state_bytes by every
    call's new defs (each restored, re-checked and parsed again in the server on every later call)."""
    body = "    text = '" + "y" * 1500 + "'\n    return len(text)\n"
    async with running(workspace, max_state_bytes=4000) as runtime:
        for call in range(3):
            code = "".join(f"def f{call}_{i}():\n{body}" for i in range(4)) + "__result__ = 1"
            data = await run(runtime, code)
            assert "too big" in (data["hint"] or ""), data
        data = await run(runtime, "__result__ = f0_0() + f0_1()")
        assert data["result"] == 3000, data
        assert runtime.sessions is not None
        session = await runtime.sessions.open(Caller(session="attacker"), None)
        try:
            assert session.kept is not None
            assert session.kept.size <= 4000, session.kept.size
            assert sum(len(source) for source in session.kept.functions.values()) <= 4000
        finally:
            await runtime.sessions.finish(session)
