"""Several replicas behind a real proxy: a real PostgreSQL server, HAProxy (deploy/haproxy.cfg) and three
`attp serve --transport http` processes sharing one database_url, one secret_file and one workspace.

What an operator running attp-server on two or three machines relies on, seen through the SDK's own
client in its default mode (protocol 2026-07-28, no protocol session): a handle's kept state follows
the calls whichever replica serves them; memory pages written through one replica are read through
another; an approval asked by one replica is answered on another; a replica SIGKILLed under the load
of 16 clients fails only the calls that were running on it and loses no kept state; and everything
is still there after every replica has been restarted. Each response names the replica that served
it (HAProxy's X-Attp-Replica), so the tests check that the calls really did land on different ones.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import SERVE_FLAGS
from harness import execute as run
from postgres import Postgres, fresh_database
from replicas import Cluster, recording_client, running_cluster, running_nginx

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(600)]

REPLICAS = 3
CLIENTS = 16
LEASE_S = 5
ENV = {"ATTP_QUEUE_TIMEOUT_S": "30", "ATTP_SESSION_LEASE_S": str(LEASE_S)}
"""A call on a handle that a killed replica held waits for that lease to run out (`session_lease_s`: 5 s here,
renewed every 5/3 s while a call runs, rather than the default 15 s); 16 clients on two replicas queue
meanwhile: let them wait."""


def replica_flags(root: Path, url: str, *more: str) -> list[str]:
    """One command line for every replica: the shared database, secret and workspace; a data folder of its own."""
    return [
        *SERVE_FLAGS, "--toolpack", "memory",
        "--workspace", str(root / "shared-workspace"),
        "--database-url", url,
        "--secret-file", str(root / "shared-secret.key"),
        "--db-path", str(root / "replica-data" / "memory.sqlite3"),
        "--timeout-s", "5",
        *more,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def database(postgres: Postgres) -> Iterator[str]:
    with fresh_database(postgres) as url:
        yield url


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, database: str) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("replicas")
    (root / "shared-workspace").mkdir()
    (root / "shared-secret.key").write_bytes(b"replicas-share-this-secret-" + b"x" * 32)
    with running_cluster(root / "cluster", REPLICAS, replica_flags(root, database), ENV) as running:
        yield running


async def served(cluster: Cluster, client: Any, code: str, **arguments: Any) -> tuple[dict[str, Any], str]:
    """Run `code` through the proxy; the result and the replica that served the call."""
    before = len(cluster.served_by)
    out = await run(client, code, **arguments)
    answered = cluster.served_by[before:]
    assert answered, "no response came through the proxy"
    return out, answered[-1]


async def test_a_handle_keeps_its_state_across_replicas(cluster: Cluster) -> None:
    async with cluster.client() as client:
        first, by = await served(cluster, client, "total = 1\ndef bump(n):\n    return total + n")
        handle = first["session"]
        assert first["status"] == "ok" and handle, first
        seen = {by}
        for n in range(2, 8):
            out, by = await served(cluster, client, "total = bump(1)\n__result__ = total", session=handle)
            assert (out["status"], out["result"], out["session"]) == ("ok", n, handle), out
            seen.add(by)
    assert seen == {r.name for r in cluster.replicas}, f"the calls did not visit every replica: {seen}"


async def test_memory_pages_written_through_one_replica_are_read_through_another(cluster: Cluster) -> None:
    async with cluster.client() as client:
        made, writer = await served(
            cluster, client, "__result__ = create_detail_page('Replicas', 'shared', 'written once', 'usr-0')"
        )
        assert made["status"] == "ok", made
        index = made["result"]
        readers = set()
        for _ in range(REPLICAS):
            read, reader = await served(cluster, client, f"__result__ = get_page({index!r})['detail']")
            assert read["result"] == "written once", read
            readers.add(reader)
            found, reader = await served(cluster, client, "__result__ = [h['index'] for h in find_page('written')]")
            assert index in found["result"], found
            readers.add(reader)
    assert readers - {writer}, "every read landed on the replica that wrote"


def innermost(exc: BaseException) -> str:
    """The error under the SDK client's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


async def test_nginx_conf_balances_2026_calls_and_keeps_a_handshake_session_on_its_replica(
    cluster: Cluster, tmp_path: Path
) -> None:
    """deploy/nginx.conf in front of the same replicas: round robin for 2026-07-28, one replica per
    handshake-era client (its protocol session lives there)."""
    with running_nginx(tmp_path / "nginx", cluster.replicas) as url:
        modern: list[str] = []
        async with recording_client(url, modern) as client:
            handle = (await run(client, "n = 1"))["session"]
            for expected in range(2, 8):
                out = await run(client, "n = n + 1\n__result__ = n", session=handle)
                assert (out["status"], out["result"]) == ("ok", expected), out
        assert set(modern) == {f"127.0.0.1:{r.port}" for r in cluster.replicas}, modern
        legacy: list[str] = []
        async with recording_client(url, legacy, mode="legacy") as client:
            assert (await run(client, "m = 20"))["status"] == "ok"
            for expected in range(21, 25):  # no handle passed: the transport session keeps m
                assert (await run(client, "m = m + 1\n__result__ = m"))["result"] == expected
        assert len(set(legacy)) == 1, legacy


@dataclass
class Call:
    client: int
    started: float
    ended: float
    ok: bool
    item: int
    detail: str = ""


async def test_a_replica_killed_under_load_fails_only_its_running_calls_and_loses_no_state(cluster: Cluster) -> None:
    """16 clients, each with its own handle, append numbers one call at a time; a replica is SIGKILLed mid-way."""
    victim = cluster.replicas[1]
    calls: list[Call] = []
    handles: dict[int, str] = {}
    killed_at: list[float] = []
    rounds = 12

    async def client_loop(n: int) -> None:
        async with cluster.client() as client:
            handles[n] = (await run(client, "items = []"))["session"]
        done = 0
        while done < rounds:
            started, item = time.monotonic(), n * 1000 + done
            try:
                async with cluster.client() as client:
                    while done < rounds:
                        started, item = time.monotonic(), n * 1000 + done
                        code = f"slow_echo('x', delay=0.3)\nitems = items + [{item}]\n__result__ = len(items)"
                        out = await run(client, code, session=handles[n])
                        calls.append(Call(n, started, time.monotonic(), out["status"] == "ok", item, str(out["error"])))
                        done += 1
            except Exception as exc:
                # The call running on the killed replica: its connection broke, and the SDK client ends with it;
                # the model's application connects again and goes on.
                calls.append(Call(n, started, time.monotonic(), False, item, innermost(exc)))
                done += 1

    async def killer() -> None:
        while sum(1 for c in calls if c.ok) < CLIENTS * 3:  # the load is running on every replica
            await anyio.sleep(0.05)
        killed_at.append(time.monotonic())
        await anyio.to_thread.run_sync(victim.kill)
        killed_at.append(time.monotonic())  # SIGKILL sent, and the process reaped: it has stopped accepting

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(killer)
        for n in range(CLIENTS):
            tasks.start_soon(client_loop, n)
    kill, dead = killed_at
    failed = [c for c in calls if not c.ok]
    assert len(calls) == CLIENTS * rounds
    report = [(c.client, c.item, round(c.started - kill, 3), round(c.ended - kill, 3), c.detail) for c in failed]
    report.append(("dead after", round(dead - kill, 3)))
    for call in failed:  # every failed call was sent before the replica was gone, and ended after the kill
        assert call.started < dead and call.ended > kill, report
    assert len(failed) <= CLIENTS, failed  # at most one in flight per client
    async with cluster.client() as client:
        for n, handle in handles.items():
            kept = (await run(client, "__result__ = items", session=handle))["result"]
            succeeded = [c.item for c in calls if c.client == n and c.ok]
            lost_runs = {c.item for c in calls if c.client == n and not c.ok}
            assert set(succeeded) <= set(kept), f"client {n} lost kept state: {succeeded} vs {kept}"
            assert set(kept) - set(succeeded) <= lost_runs, f"client {n} kept what it never ran: {kept}"
            assert kept == sorted(kept)
    cluster.wait_status({victim.name: "DOWN"})
    await anyio.to_thread.run_sync(victim.start)
    await anyio.to_thread.run_sync(victim.wait_healthy)
    await anyio.to_thread.run_sync(cluster.wait_status, {r.name: "UP" for r in cluster.replicas})


async def test_everything_is_still_there_after_every_replica_restarted(cluster: Cluster) -> None:
    async with cluster.client() as client:
        made = await run(client, "kept = ['before']\n__result__ = create_detail_page('Restart', '', 'kept', 'usr-0')")
        handle, index = made["session"], made["result"]
        assert made["status"] == "ok" and handle, made
    for replica in cluster.replicas:
        await anyio.to_thread.run_sync(replica.stop)
    await anyio.to_thread.run_sync(cluster.wait_status, {r.name: "DOWN" for r in cluster.replicas})
    for replica in cluster.replicas:
        await anyio.to_thread.run_sync(replica.start)
    for replica in cluster.replicas:
        await anyio.to_thread.run_sync(replica.wait_healthy)
    await anyio.to_thread.run_sync(cluster.wait_status, {r.name: "UP" for r in cluster.replicas})
    async with cluster.client() as client:
        seen = set()
        for _ in range(REPLICAS):
            out, by = await served(
                cluster, client, f"__result__ = [kept, get_page({index!r})['detail']]", session=handle
            )
            assert out["result"] == [["before"], "kept"], out
            seen.add(by)
    assert len(seen) > 1


@pytest.fixture(scope="module")
def approving_cluster(tmp_path_factory: pytest.TempPathFactory, postgres: Postgres) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("approvals")
    (root / "shared-workspace").mkdir()
    (root / "shared-secret.key").write_bytes(b"another-shared-secret-" + b"y" * 32)
    with fresh_database(postgres) as url:
        flags = replica_flags(root, url, "--approval", "destructive")
        with running_cluster(root / "cluster", 2, flags, ENV) as running:  # asked on one, answered on the other
            yield running


async def test_an_approval_asked_by_one_replica_is_answered_on_another(approving_cluster: Cluster) -> None:
    questions: list[str] = []

    async def person(context: Any, params: Any) -> Any:
        from mcp_types import ElicitResult

        questions.append(params.message)
        return ElicitResult(action="accept", content={"allow_for_session": False})

    cluster = approving_cluster
    workspace = Path(cluster.replicas[0].args[cluster.replicas[0].args.index("--workspace") + 1])
    async with cluster.client(elicitation_callback=person) as client:
        before = len(cluster.served_by)
        out = await run(client, "write_file('approved.txt', 'yes')\n__result__ = read_file('approved.txt')")
        rounds = cluster.served_by[before:]
    assert out["status"] == "ok" and out["result"] == "yes", (out["error"], rounds)
    assert len(questions) == 1 and "write_file" in questions[0], questions
    assert len(rounds) >= 2 and rounds[-1] != rounds[-2], f"asked and answered on one replica: {rounds}"
    assert (workspace / "approved.txt").read_text() == "yes"
