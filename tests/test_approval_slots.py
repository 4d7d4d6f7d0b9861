"""A run waiting for a person holds no run slot: unanswered approvals of one principal never make another's calls
``SERVER_BUSY``, and the runs a principal has waiting are capped (SECURITY.md, "Approvals").

Through a real `attp serve` over HTTP with ``max_workers = 2`` and two tokens, on both protocol eras: the
handshake era's ``elicitation/create`` in the middle of the call, and 2026-07-28's ``input_required`` rounds (the
SDK client's elicitation callback answers both; here it never does).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.abc
import pytest
from harness import SERVE_FLAGS, Served, serving_http
from harness import execute as run
from mcp_types import ElicitRequestParams, ElicitResult

from attp_server.run.admission import PAUSED_PER_PRINCIPAL

pytestmark = [pytest.mark.anyio, pytest.mark.process]

TOKENS = {"alice": "token-of-alice-81d2e4f0", "bob": "token-of-bob-3a7c9e15"}
ENV = {
    "ATTP_AUTH_TOKENS": json.dumps(TOKENS),
    "ATTP_MAX_WORKERS": "2",
    "ATTP_QUEUE_TIMEOUT_S": "1",
    "ATTP_APPROVAL_TIMEOUT_S": "120",
}
WRITE = 'write_file("asked.txt", "x")\n__result__ = "written"'


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving_http(tmp_path_factory.mktemp("slots-ws"), *SERVE_FLAGS, "--approval", "destructive", env=ENV) as s:
        yield s


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


class Away:
    """A person who never answers: counts the questions put to them."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.asked += 1
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_unanswered_approvals_hold_no_run_slot(served: Served, mode: str) -> None:
    away = Away()
    waiting = PAUSED_PER_PRINCIPAL
    refused: dict[str, Any] = {}
    async with anyio.create_task_group() as tasks:
        clients = []
        for _ in range(waiting):  # one client each: a handshake-era session runs at most max_workers at once
            client = served.client(headers=bearer("alice"), mode=mode, elicitation_callback=away)
            clients.append(await tasks_client(tasks, client))
        ended: list[dict[str, Any]] = []

        async def alices(client: Any) -> None:
            ended.append(await run(client, WRITE))

        for client in clients:
            tasks.start_soon(alices, client)
        with anyio.fail_after(30):
            while away.asked < 2 and not ended:  # as many as max_workers: every slot's run waits for alice
                await anyio.sleep(0.05)
        async with served.client(headers=bearer("bob"), mode=mode) as bob:  # bob's calls still run, at once
            for _ in range(3):
                began = time.monotonic()
                data = await run(bob, "__result__ = 1 + 1")
                assert data["status"] == "ok" and data["result"] == 2, data["error"]
                assert time.monotonic() - began < 1.0  # not after queue_timeout_s: no wait for a slot
        with anyio.fail_after(30):
            while away.asked < waiting and not ended:
                await anyio.sleep(0.05)
        assert (away.asked, ended) == (waiting, []), "runs waiting for the user held the slots of the others"
        # One more of alice's runs would wait for her too: refused, without asking her.
        async with served.client(headers=bearer("alice"), mode=mode, elicitation_callback=away) as extra:
            with anyio.fail_after(30):
                refused.update(await run(extra, WRITE))
        tasks.cancel_scope.cancel()
    assert refused["status"] == "error" and refused["error"]["code"] == "SERVER_BUSY", refused
    assert "waiting for the user" in refused["error"]["message"], refused["error"]
    assert away.asked == waiting


async def tasks_client(tasks: anyio.abc.TaskGroup, client: Any) -> Any:
    """Enter `client` in a task of `tasks` (left when the group is cancelled); the client, once connected."""
    entered: list[Any] = []
    ready = anyio.Event()

    async def hold() -> None:
        async with client as connected:
            entered.append(connected)
            ready.set()
            await anyio.sleep_forever()

    tasks.start_soon(hold)
    await ready.wait()
    return entered[0]
