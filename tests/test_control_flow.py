"""Control flow the evaluator must get right (regressions from the red-team review): loops, else, finally."""

from __future__ import annotations

import pytest
from harness import run_code

from attp_server.run.runtime import Runtime

pytestmark = pytest.mark.anyio

CASES = {
    "while-continue": (
        "i = 0\nn = 0\nwhile i < 5:\n    i += 1\n    if i % 2:\n        continue\n    n += 1\n__result__ = [i, n]",
        [5, 2],
    ),
    "for-else-continue": (
        "log = []\nfor x in [1, 2]:\n    continue\nelse:\n    log.append('else')\n__result__ = log",
        ["else"],
    ),
    "for-else-break": ("log = []\nfor x in [1, 2]:\n    break\nelse:\n    log.append('else')\n__result__ = log", []),
    "while-else": ("i = 0\nwhile i < 2:\n    i += 1\nelse:\n    i = 10\n__result__ = i", 10),
    "finally-return": (
        "log = []\ndef f():\n    try:\n        return 1\n    finally:\n        log.append('fin')\n__result__ = [f(), log]",
        [1, ["fin"]],
    ),
    "finally-break": (
        "log = []\nfor i in range(3):\n    try:\n        break\n    finally:\n        log.append(i)\n__result__ = log",
        [0],
    ),
    "finally-continue": (
        "log = []\nfor i in range(2):\n    try:\n        continue\n    finally:\n        log.append(i)\n__result__ = log",
        [0, 1],
    ),
    "subscript-target-continue": ("d = {}\nfor d['k'] in [1, 2, 3]:\n    continue\n__result__ = d", {"k": 3}),
    "return-in-loop": (
        "def f():\n    for i in range(10):\n        if i == 3:\n            return i\n    return -1\n__result__ = f()",
        3,
    ),
    "nested-loops": (
        "out = []\nfor i in range(3):\n    for j in range(3):\n        if j == 1:\n            break\n        out.append((i, j))\n__result__ = out",
        [[0, 0], [1, 0], [2, 0]],
    ),
    "return-in-while": (
        "def f():\n    i = 0\n    while True:\n        i += 1\n        if i > 4:\n            return i\n__result__ = f()",
        5,
    ),
}


@pytest.mark.parametrize(("code", "expected"), [pytest.param(*v, id=k) for k, v in CASES.items()])
async def test_control_flow(runtime: Runtime, code: str, expected: object) -> None:
    data = await run_code(runtime, code)
    assert data["status"] == "ok", data["error"]
    assert data["result"] == expected
