"""A fresh red team against the guards of the compiled ``python`` engine (issue 36), through the real path (runtime,
worker pool, tools) with the red-team suite's detectors (`test_redteam`): the cases are `redteam_guards_fresh`.

Besides containment: what a program's text shows of a CPython object (a function, a generator, an iterator) never
holds its address, in the result, the output or the error.
"""

from __future__ import annotations

import json
import re

import pytest
from redteam_cases import Case
from redteam_guards_fresh import CASES, CONTROLS, SHOWN

from tests.security import test_redteam as redteam
from tests.security.test_redteam import Target, _run

pytestmark = pytest.mark.anyio

canary, target = redteam.canary, redteam.target  # the red-team suite's server, canary and detectors

ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in CASES])
async def test_fresh_attack_is_contained(target: Target, case: Case, capfd: pytest.CaptureFixture[str]) -> None:
    await redteam.test_attack_is_contained(target, case, capfd)


@pytest.mark.parametrize(("code"), [pytest.param(code, id=cid) for cid, code in SHOWN])
async def test_no_address_in_what_a_program_shows(target: Target, code: str) -> None:
    data = await _run(target, code)
    found = ADDRESS.search(json.dumps(data))
    assert found is None, f"an address in the answer: {data}"


@pytest.mark.parametrize(("code", "expected"), [pytest.param(code, exp, id=cid) for cid, code, exp in CONTROLS])
async def test_fresh_controls_still_compute(target: Target, code: str, expected: object) -> None:
    data = await _run(target, code)
    assert data["status"] == "ok", data["error"]
    assert data["result"] == expected


def test_every_fresh_case_is_named_once() -> None:
    ids = [case.id for case in CASES] + [cid for cid, _ in SHOWN] + [cid for cid, _, _ in CONTROLS]
    assert len(set(ids)) == len(ids)
