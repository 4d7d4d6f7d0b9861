"""Red team against the guards of the compiled ``python`` engine (issue 36), through the real path (runtime, worker
pool, tools), with the red-team suite's detectors (`test_redteam`): the cases are `redteam_guards`.

Besides the cases, what a case's detectors cannot see: that the deadline is the run's own (no kill), that no tool
call runs once the deadline has passed, that the rewrite's names stay out of the session's kept state, and that a
program's CPython objects (a generator, a function, a traceback) never reach the result.
"""

from __future__ import annotations

from typing import Any

import pytest
from redteam_cases import Case
from redteam_guards import CASES, CONTROLS

from tests.security import test_redteam as redteam
from tests.security.test_redteam import Target, _run

pytestmark = pytest.mark.anyio

canary, target = redteam.canary, redteam.target  # the red-team suite's server, canary and detectors


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in CASES])
async def test_guarded_path_is_contained(target: Target, case: Case, capfd: pytest.CaptureFixture[str]) -> None:
    await redteam.test_attack_is_contained(target, case, capfd)


@pytest.mark.parametrize(("code", "expected"), [pytest.param(code, exp, id=cid) for cid, code, exp in CONTROLS])
async def test_guarded_controls_still_compute(target: Target, code: str, expected: object) -> None:
    data = await _run(target, code)
    assert data["status"] == "ok", data["error"]
    assert data["result"] == expected


def test_every_case_is_named_once() -> None:
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize(
    "code",
    [
        "while True:\n    pass",
        "try:\n    while True:\n        pass\nexcept:\n    pass",
        "def f():\n    try:\n        while True:\n            pass\n    finally:\n        return 1\n__result__ = f()",
        "for i in range(10 ** 9):\n    try:\n        while True:\n            pass\n    finally:\n        continue",
    ],
    ids=["loop", "bare-except", "finally-return", "finally-continue"],
)
async def test_the_deadline_is_the_runs_own(target: Target, code: str) -> None:
    """A Python loop ends at its deadline by the worker's own alarm, however it tries to catch it: the pool's kill
    (the fallback for a C call that never looks at signals) is not needed."""
    kills = target.runtime.pool.kills
    data = await _run(target, code)
    assert data["error"]["code"] == "TIMEOUT", data["error"]
    assert target.runtime.pool.kills == kills


async def test_no_tool_call_runs_after_the_deadline(target: Target) -> None:
    """A ``finally`` block, an ``except`` clause's own expression: nothing of the program runs once the run is ending."""
    programs = [
        "try:\n    while True:\n        pass\nfinally:\n    write_file('after.txt', 'x')",
        "try:\n    while True:\n        pass\nexcept (write_file('after.txt', 'x') or Exception):\n    pass",
    ]
    for code in programs:
        data = await _run(target, code)
        assert data["error"]["code"] == "TIMEOUT", data["error"]
        assert data["calls"] == [], data["calls"]
        assert not (target.workspace / "after.txt").exists()


@pytest.mark.parametrize(
    "code",
    [
        "g = (x for x in [1])\n__result__ = [g]",
        "def f():\n    pass\n__result__ = {'f': f}",
        "try:\n    1 / 0\nexcept Exception as e:\n    __result__ = e",
        "m = map(str, [1])\n__result__ = m",
    ],
    ids=["generator", "function", "exception", "iterator"],
)
async def test_cpython_objects_never_reach_the_result(target: Target, code: str) -> None:
    data: dict[str, Any] = await _run(target, code)
    assert data["status"] == "error" and data["error"]["code"] == "RESULT_NOT_SERIALIZABLE", data
    assert " at 0x" not in str(data["error"]), data["error"]


async def test_a_program_frames_and_errors_point_at_its_own_lines(target: Target) -> None:
    """Errors from inside the rewritten code (a guard, a temporary) name the program's line and column."""
    code = "x = 1\nrows = [{'a': 1}]\ny = [r['b'].upper() for r in rows]"
    data = await _run(target, code)
    assert data["error"]["code"] == "RUNTIME_ERROR" and data["error"]["line"] == 3, data["error"]
    assert data["error"]["source_line"] == "y = [r['b'].upper() for r in rows]"
    data = await _run(target, "def f(g):\n    return g.gi_frame\nf(x for x in [1])")
    assert data["error"]["code"] == "FORBIDDEN" and data["error"]["line"] == 2, data["error"]
