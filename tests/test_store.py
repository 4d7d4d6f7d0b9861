"""The store on both backends: an SQLite file, and a real PostgreSQL server (Debian's binaries, a fresh cluster).

Each test gets an empty database; the same assertions hold on both, through the same `Store` the server uses.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from postgres import fresh_database

from attp_server.errors import AttpError
from attp_server.settings import Settings
from attp_server.store import Store, StoreError, open_backend, open_store
from attp_server.store.backend import SMALL_BYTES
from attp_server.store.handles import KIND_HANDLE, KIND_LASTING, LEASE_S, Busy, Expired, Missing, Record
from attp_server.store.schema import HANDLES, migrate
from attp_server.store.secret import load_secret
from attp_server.store.sqlite import CHECKPOINT_EVERY, SQLiteBackend

pytestmark = pytest.mark.anyio
DAY = 86400.0


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
        return
    with fresh_database(request.getfixturevalue("postgres")) as url:
        yield url


@pytest.fixture
async def store(database_url: str | None, tmp_path: Path) -> AsyncIterator[Store]:
    settings = Settings(db_path=tmp_path / "data" / "memory.sqlite3", database_url=database_url)
    async with open_store(settings) as opened:
        yield opened


async def claim(store: Store, key: str, principal: str = "alice", lease: str = "l1", now: float = 1000.0, **kw: float):
    return await store.handles.claim(key, principal, lease, now=now, idle_s=kw.get("idle_s", 600), max_age_s=DAY)


async def test_a_handle_is_claimed_written_when_its_run_ends_and_read_back(store: Store) -> None:
    await store.handles.create("k1", "alice", kind=KIND_HANDLE, now=1000.0, state='{"x": 1}', state_bytes=8)
    got = await claim(store, "k1", now=1001.0)
    assert isinstance(got, Record)
    assert (got.state, got.state_bytes, got.evicted, got.approved) == ('{"x": 1}', 8, False, frozenset())
    assert await store.handles.finish("k1", "l1", now=1002.0, state='{"x": 2}', state_bytes=8, write_state=True,
                                      approved=["files.write_file"])  # fmt: skip
    again = await claim(store, "k1", lease="l2", now=1003.0)
    assert isinstance(again, Record) and again.state == '{"x": 2}' and again.approved == {"files.write_file"}


async def test_a_second_call_on_a_held_handle_is_told_busy_until_the_first_ends(store: Store) -> None:
    await store.handles.create("k1", "alice", kind=KIND_HANDLE, now=1000.0)
    assert isinstance(await claim(store, "k1", lease="a", now=1001.0), Record)
    busy = await claim(store, "k1", lease="b", now=1002.0)
    assert isinstance(busy, Busy) and busy.until == 1001.0 + LEASE_S
    # the holder's lease is the only one that can write
    assert not await store.handles.finish("k1", "b", now=1003.0, state="{}", state_bytes=2, write_state=True)
    assert await store.handles.finish("k1", "a", now=1003.0, state=None, state_bytes=0, write_state=False)
    assert isinstance(await claim(store, "k1", lease="b", now=1004.0), Record)


async def test_a_lease_not_renewed_runs_out_and_the_next_call_takes_the_last_written_state(store: Store) -> None:
    await store.handles.create("k1", "alice", kind=KIND_HANDLE, now=1000.0, state='{"kept": 1}', state_bytes=11)
    assert isinstance(await claim(store, "k1", lease="dead", now=1001.0), Record)  # a replica that then died
    assert isinstance(await claim(store, "k1", lease="b", now=1001.0 + LEASE_S / 2), Busy)
    assert await store.handles.renew("k1", "dead", now=1005.0)
    taken = await claim(store, "k1", lease="b", now=1006.0 + LEASE_S)
    assert isinstance(taken, Record) and taken.state == '{"kept": 1}'
    assert not await store.handles.renew("k1", "dead", now=1007.0 + LEASE_S)  # lost, and told so


async def test_claims_racing_for_one_handle_let_exactly_one_through(store: Store) -> None:
    await store.handles.create("k1", "alice", kind=KIND_HANDLE, now=1000.0)
    results: list[object] = []

    async def one(lease: str) -> None:
        results.append(await claim(store, "k1", lease=lease, now=1001.0))

    async with anyio.create_task_group() as tasks:
        for n in range(8):
            tasks.start_soon(one, f"l{n}")
    assert sum(isinstance(r, Record) for r in results) == 1
    assert sum(isinstance(r, Busy) for r in results) == 7


async def test_another_principals_handle_is_missing_and_left_untouched(store: Store) -> None:
    await store.handles.create("k1", "alice", kind=KIND_HANDLE, now=1000.0, state='{"secret": 1}', state_bytes=13)
    assert isinstance(await claim(store, "k1", principal="mallory", now=1001.0), Missing)
    assert isinstance(await claim(store, "unknown", now=1001.0), Missing)
    assert not await store.handles.finish("k1", "l1", now=1001.0, state="{}", state_bytes=2, write_state=True)
    mine = await claim(store, "k1", now=1002.0)
    assert isinstance(mine, Record) and mine.state == '{"secret": 1}'


async def test_an_idle_or_old_handle_is_expired_by_whoever_notices_first(store: Store) -> None:
    await store.handles.create("idle", "alice", kind=KIND_HANDLE, now=1000.0)
    await store.handles.create("fresh", "alice", kind=KIND_HANDLE, now=1500.0)
    assert isinstance(await claim(store, "idle", now=1000.0 + 601, idle_s=600), Expired)
    assert isinstance(await claim(store, "idle", now=1000.0 + 602, idle_s=600), Missing)  # removed
    old = await store.handles.claim("fresh", "alice", "l", now=1600.0, idle_s=600, max_age_s=50)
    assert isinstance(old, Expired)
    await store.handles.create("a", "alice", kind=KIND_HANDLE, now=1000.0)
    await store.handles.create("b", "alice", kind=KIND_HANDLE, now=2000.0)
    assert await store.handles.expire(now=2100.0, idle_s=600, max_age_s=DAY) == ["a"]
    assert await store.handles.expire(now=2100.0, idle_s=600, max_age_s=DAY) == []  # idempotent


async def test_past_the_cap_a_principals_handles_used_longest_ago_end(store: Store) -> None:
    for n in range(5):
        await store.handles.create(f"k{n}", "alice", kind=KIND_HANDLE, now=1000.0 + n)
    await store.handles.create("bob", "bob", kind=KIND_HANDLE, now=900.0)
    assert sorted(await store.handles.over_cap("alice", 3, now=1010.0)) == ["k0", "k1"]
    assert await store.handles.over_cap("alice", 3, now=1010.0) == []
    assert isinstance(await claim(store, "bob", principal="bob", now=1011.0), Record)


async def test_past_the_total_bound_the_state_used_longest_ago_is_dropped_and_marked(store: Store) -> None:
    for n in range(4):
        await store.handles.create(f"k{n}", "alice", kind=KIND_HANDLE, now=1000.0 + n, state="x" * 100, state_bytes=100)
    assert await store.handles.trim_state(250, now=1010.0) == 2
    first = await claim(store, "k0", now=1011.0)
    assert isinstance(first, Record) and first.state is None and first.evicted
    await store.handles.finish("k0", "l1", now=1012.0, state=None, state_bytes=0, write_state=True)
    assert (await store.handles.stats()) == {"handles": 4, "state_bytes": 200}
    last = await claim(store, "k3", lease="l9", now=1013.0)
    assert isinstance(last, Record) and last.state == "x" * 100 and not last.evicted


async def test_past_the_total_bound_only_principals_past_their_share_lose_state(store: Store) -> None:
    """Each principal that keeps state has an equal share; bob's one old session outlives alice's newer ones."""
    await store.handles.create("bob", "bob", kind=KIND_HANDLE, now=900.0, state="b" * 100, state_bytes=100)
    for n in range(5):
        await store.handles.create(f"k{n}", "alice", kind=KIND_HANDLE, now=1000.0 + n, state="x" * 100, state_bytes=100)
    assert await store.handles.trim_state(400, now=1010.0) == 2  # alice's share is 200, but bob needs only 100
    kept = {key: isinstance(r := await claim(store, key, principal=p, lease=key, now=1011.0), Record) and not r.evicted
            for key, p in [("bob", "bob"), *((f"k{n}", "alice") for n in range(5))]}  # fmt: skip
    assert kept == {"bob": True, "k0": False, "k1": False, "k2": True, "k3": True, "k4": True}


async def test_implicit_handles_come_into_being_with_their_first_call_and_end_with_their_process(store: Store) -> None:
    got = await store.handles.claim("conn", "anonymous", "l", now=1000.0, idle_s=600, max_age_s=DAY,
                                    create=KIND_LASTING, instance="proc-1")  # fmt: skip
    assert isinstance(got, Record) and got.kind == KIND_LASTING and got.state is None
    await store.handles.finish("conn", "l", now=1000.0, state='{"x": 1}', state_bytes=8, write_state=True)
    await store.handles.touch_instance("proc-1", now=5000.0)  # the process is alive: not idle
    assert await store.handles.expire(now=5100.0, idle_s=600, max_age_s=DAY) == []
    assert await store.handles.present(["conn", "gone"]) == {"conn"}
    assert await store.handles.end_instance("proc-1") == ["conn"]


async def test_migrations_are_idempotent_and_may_race(database_url: str | None, tmp_path: Path) -> None:
    backends = [await open_backend(database_url, tmp_path) for _ in range(3)]
    try:
        async with anyio.create_task_group() as tasks:
            for backend in backends:
                tasks.start_soon(migrate, backend, "handles", HANDLES)
        await migrate(backends[0], "handles", HANDLES)
        rows = await backends[0].execute("SELECT version FROM attp_schema WHERE part = ?", "handles")
        assert rows == [(len(HANDLES),)]
    finally:
        for backend in backends:
            await backend.close()


@pytest.mark.parametrize("small", [False, True])
async def test_a_failed_statement_rolls_the_whole_transaction_back(store: Store, small: bool) -> None:
    with pytest.raises(StoreError, match="failed"):
        await store.backend.transaction(
            [
                ("INSERT INTO attp_handles (key, principal, kind, created, last_used) VALUES (?, ?, ?, ?, ?)",
                 ("k", "p", KIND_HANDLE, 1.0, 1.0)),
                ("INSERT INTO no_such_table VALUES (?)", (1,)),
            ],
            small=small,
        )  # fmt: skip
    assert await store.handles.present(["k"]) == set()
    await store.backend.execute("SELECT 1", small=small)  # and the connection is usable again


async def test_a_state_too_large_for_the_event_loop_is_read_and_written_whole(store: Store) -> None:
    big = json.dumps({"values": {"s": "é" * (2 * SMALL_BYTES)}, "functions": {}}, ensure_ascii=False)
    await store.handles.create("k1", "alice", kind=KIND_HANDLE, now=1000.0, state=big, state_bytes=len(big))
    got = await claim(store, "k1", now=1001.0)
    assert isinstance(got, Record) and got.state == big
    bigger = big.replace("é", "ü")
    assert await store.handles.finish("k1", "l1", now=1002.0, state=bigger, state_bytes=len(bigger), write_state=True)
    again = await claim(store, "k1", lease="l2", now=1003.0)
    assert isinstance(again, Record) and again.state == bigger


async def test_sqlite_runs_a_small_transaction_on_a_thread_while_another_writer_holds_the_file(tmp_path: Path) -> None:
    """On the event loop a small transaction never waits: when another connection (here another process's, in
    effect) is writing, it is rolled back untouched and waits on a thread, while the loop goes on."""
    path = tmp_path / "state.sqlite3"
    backend = SQLiteBackend(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        await backend.execute("CREATE TABLE t (k INTEGER)")
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO t VALUES (1)")
        done = anyio.Event()

        async def insert() -> None:
            await backend.transaction(
                [("INSERT INTO t VALUES (?)", (2,)), ("INSERT INTO t VALUES (?)", (3,))], small=True
            )
            done.set()

        with anyio.fail_after(5):  # a loop blocked on the file would never get here before the busy timeout
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(insert)
                await anyio.sleep(0.3)
                assert not done.is_set()
                other.execute("COMMIT")
        assert await backend.execute("SELECT k FROM t ORDER BY k", small=True) == [(1,), (2,), (3,)]
    finally:
        other.close()
        await backend.close()


async def test_sqlite_commits_on_the_event_loop_are_checkpointed_so_the_log_stays_small(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    backend = SQLiteBackend(path)
    try:
        await backend.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
        log = path.with_name(path.name + "-wal")
        sizes = []
        for n in range(5 * CHECKPOINT_EVERY):  # three pages of log each: it would grow by as much every time
            await backend.execute("INSERT INTO t VALUES (?, ?)", n, "x" * 3000, small=True)
            if n % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1:
                sizes.append(log.stat().st_size)
        assert sizes[-1] < 1.2 * sizes[0], sizes
        assert (await backend.execute("SELECT COUNT(*) FROM t"))[0][0] == 5 * CHECKPOINT_EVERY
    finally:
        await backend.close()


async def test_a_database_that_cannot_be_reached_is_a_startup_error_naming_it_without_its_password(
    tmp_path: Path,
) -> None:
    from harness import free_port

    url = f"postgresql://attp:hunter2@127.0.0.1:{free_port()}/nothing?connect_timeout=1"
    settings = Settings(db_path=tmp_path / "memory.sqlite3", database_url=url, database_timeout_s=1)
    with pytest.raises(AttpError) as raised:
        async with open_store(settings):
            pass
    assert "cannot connect to the store" in str(raised.value) and "within 1 s" in str(raised.value)
    assert "hunter2" not in str(raised.value)
    with pytest.raises(AttpError, match="database_url must be"):
        async with open_store(Settings(db_path=tmp_path / "m.sqlite3", database_url="mysql://x")):
            pass


def test_the_secret_is_generated_once_for_the_owner_only_and_derives_stable_digests(tmp_path: Path) -> None:
    path = tmp_path / "data" / "secret.key"
    first = load_secret(path, generate=True)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = load_secret(path, generate=True)
    assert first.digest("folder", "h") == again.digest("folder", "h") != again.digest("handle", "h")
    assert "hunter" not in repr(first)
    with pytest.raises(AttpError, match="does not exist"):
        load_secret(tmp_path / "absent", generate=False)
    (tmp_path / "short").write_bytes(b"abc")
    with pytest.raises(AttpError, match="at least 16"):
        load_secret(tmp_path / "short", generate=False)


def test_the_secret_file_appears_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Replicas (or two servers on one data folder) starting at the same moment: one that looked while another was
    writing found an empty secret.key and refused to start. Whenever the secret is being written, the file is
    absent or whole."""
    path = tmp_path / "data" / "secret.key"
    seen: list[bytes | None] = []
    opened = os.fdopen

    class Watched:
        def __init__(self, handle: Any) -> None:
            self.handle = handle

        def __enter__(self) -> Watched:
            self.handle.__enter__()
            return self

        def __exit__(self, *exc: Any) -> None:
            self.handle.__exit__(*exc)

        def write(self, data: bytes) -> int:
            seen.append(path.read_bytes() if path.exists() else None)  # what another process would read now
            return int(self.handle.write(data))

        def __getattr__(self, name: str) -> Any:
            return getattr(self.handle, name)

    monkeypatch.setattr("attp_server.store.secret.os.fdopen", lambda *a, **k: Watched(opened(*a, **k)))
    load_secret(path, generate=True)
    assert seen == [None]
    assert len(path.read_bytes().strip()) == 64
    assert sorted(p.name for p in path.parent.iterdir()) == ["secret.key"]  # nothing staged is left behind


def test_processes_that_start_at_once_share_one_whole_secret(tmp_path: Path) -> None:
    """Replicas (or two servers on one data folder) starting at the same moment: each reads the one secret, whole
    (one that read the file between another's create and write found it empty and refused to start)."""
    path = tmp_path / "data" / "secret.key"
    go = tmp_path / "go"
    racer = (
        "import sys, time, pathlib\n"
        "from attp_server.store.secret import load_secret\n"
        "go = pathlib.Path(sys.argv[2])\n"
        "while not go.exists(): time.sleep(0.0005)\n"
        "print(load_secret(pathlib.Path(sys.argv[1]), generate=True).digest('folder', 'h'))\n"
    )
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", racer, str(path), str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(16)
    ]
    time.sleep(1.0)  # every racer waiting
    go.touch()
    answers = [racer.communicate(timeout=60) for racer in racers]
    assert [racer.returncode for racer in racers] == [0] * 16, [err.decode()[-300:] for _, err in answers]
    assert len({out for out, _ in answers}) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["secret.key"]  # nothing staged is left behind
