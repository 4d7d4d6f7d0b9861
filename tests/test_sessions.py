"""Session state: what a program leaves is there in the next call of its session, and nowhere else.

The encoding (`attp_server.sandbox.process.keep`) and the server's re-check (`attp_server.sessions.kept_state`) are
tested as functions; everything else through the runtime with a real worker. The transports are in
test_sessions_served.py.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import running

from attp_server.run.runtime import CallContext, ExecuteRequest, Runtime
from attp_server.sandbox.process import pool as pool_module
from attp_server.sandbox.process.keep import (
    Collected,
    NotKept,
    check_encoded,
    decode,
    encode,
    measure,
    references,
    unchanged,
)
from attp_server.sandbox.stdlib import exact
from attp_server.sandbox.stdlib.namespaces import static_namespaces
from attp_server.sessions.kept_state import accept
from attp_server.sessions.registry import Caller
from attp_server.store.handles import Record

pytestmark = pytest.mark.anyio

BASE = dict(static_namespaces())
REFS = references(BASE)


def resolve(ref: str) -> Any:
    name, _, member = ref.partition(".")
    space = BASE[name]
    return space.members[member] if member else space


# ---------------------------------------------------------------- the JSON-plus encoding

ROUND_TRIPS = [
    pytest.param(None, id="none"),
    pytest.param([1, "two", 3.5, True], id="list"),
    pytest.param((1, (2, 3)), id="nested-tuple"),
    pytest.param({1, 2, 3}, id="set"),
    pytest.param(frozenset({"a"}), id="frozenset"),
    pytest.param({(1, 2): "pair", "k": [1, {"x": None}]}, id="dict-with-tuple-key"),
    pytest.param({"tuple": [1]}, id="dict-that-looks-like-a-tag"),
    pytest.param(float("inf"), id="infinity"),
    pytest.param(b"\x00bytes", id="bytes"),
    pytest.param(dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))), id="datetime"),
    pytest.param(dt.date(2024, 1, 2), id="date"),
    pytest.param(dt.timedelta(days=1, seconds=5), id="timedelta"),
    pytest.param(2**200, id="big-int"),
    pytest.param(decimal.Decimal("-12.340"), id="decimal"),
    pytest.param(exact.Fraction(-22, 7), id="fraction"),
]


@pytest.mark.parametrize("value", ROUND_TRIPS)
def test_plain_values_round_trip(value: Any) -> None:
    encoded = encode(value, REFS, 10_000)
    check_encoded(encoded)
    back = decode(encoded, resolve)
    assert back == value and type(back) is type(value)


def test_a_kept_number_is_no_bigger_than_a_program_may_build() -> None:
    """A decimal or a fraction comes back through the modules' own checks (a replica's store is read back too)."""
    assert str(decode({"decimal": "19.90"}, resolve)) == "19.90"
    for tampered in ({"decimal": "1e999999"}, {"decimal": "many"}, {"fraction": [1, 0]}, {"fraction": [2**40000, 3]}):
        with pytest.raises(ValueError):
            decode(tampered, resolve)


def test_nan_pattern_and_references_round_trip() -> None:
    assert str(decode(encode(float("nan"), REFS, 100), resolve)) == "nan"
    pattern = re.compile(r"a+b", re.IGNORECASE)
    assert decode(encode(pattern, REFS, 100), resolve).pattern == pattern.pattern
    dumps = BASE["json"].members["dumps"]
    assert encode(dumps, REFS, 100) == {"ref": "json.dumps"}
    assert decode({"ref": "json.dumps"}, resolve) is dumps


NOT_KEPT = [
    pytest.param(re.match("a", "a"), "Match", id="match-object"),
    pytest.param(ValueError("x"), "str(e)", id="exception"),
    pytest.param(lambda: 1, "a top-level def is kept", id="function-made-at-run-time"),
    pytest.param("x" * 200, "too big", id="over-the-budget"),
]


@pytest.mark.parametrize(("value", "reason"), NOT_KEPT)
def test_what_is_not_plain_data_says_why(value: Any, reason: str) -> None:
    with pytest.raises(NotKept, match=re.escape(reason)):
        encode(value, REFS, 100)


def test_a_structure_that_contains_itself_is_not_kept() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(NotKept, match="levels deep"):
        encode(loop, REFS, 10_000)


def test_a_lone_surrogate_cannot_be_stored() -> None:
    with pytest.raises(NotKept, match="surrogate"):
        measure(encode("\ud800", REFS, 100))


MALFORMED = [
    pytest.param({"tuple": [1], "set": [2]}, id="two-tags"),
    pytest.param({"object": 1}, id="unknown-tag"),
    pytest.param({"dict": [[1]]}, id="dict-entry-not-a-pair"),
    pytest.param({"float": "1e9"}, id="float-not-special"),
    pytest.param({"ref": "json.__class__"}, id="ref-to-a-dunder"),
    pytest.param({"ref": "a.b.c"}, id="ref-too-deep"),
    pytest.param({"timedelta": [1, 2]}, id="timedelta-short"),
    pytest.param({"pattern": [{"str": "a"}, 0]}, id="pattern-source-bad"),
]


@pytest.mark.parametrize("data", MALFORMED)
def test_the_server_refuses_malformed_encodings(data: Any) -> None:
    with pytest.raises(ValueError):
        check_encoded(data)


# ---------------------------------------------------------------- the server's re-check of a worker's report


def report(values: dict[str, Any] | None = None, functions: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"values": values or {}, "functions": functions or {}, "dropped": []}


HOSTILE_REPORTS = [
    pytest.param(report(values={"__builtins__": 1}), "__builtins__", None, id="dunder-name"),
    pytest.param(report(values={"x y": 1}), "x y", None, id="not-an-identifier"),
    pytest.param(report(values={"x": {"object": 1}}), "x", "could not be stored", id="malformed-value"),
    pytest.param(report(functions={"f": "def f():\n    return ().__class__"}), "f", "not allowed", id="forbidden"),
    pytest.param(report(functions={"f": "def g():\n    pass"}), "f", "could not be stored", id="def-of-another"),
    pytest.param(report(functions={"f": "def f(): pass\ndef h(): pass"}), "f", "could not", id="two-defs"),
    pytest.param(report(functions={"f": "@d\ndef f(): pass"}), "f", "decorated", id="decorated"),
    pytest.param(report(functions={"f": "def f(a=write_file('x', 'y')): pass"}), "f", "default", id="default-calls"),
    pytest.param(report(functions={"f": "x = 1"}), "f", "could not be stored", id="not-a-def"),
]


@pytest.mark.parametrize(("raw", "name", "reason"), HOSTILE_REPORTS)
def test_a_workers_report_is_checked_again(raw: dict[str, Any], name: str, reason: str | None) -> None:
    accepted = accept(raw, max_bytes=10_000)
    assert accepted is not None
    assert name not in accepted.state.names()
    if reason is not None:
        assert reason in accepted.dropped[name]


def test_a_report_over_the_cap_keeps_what_fits_and_names_the_rest() -> None:
    accepted = accept(report(values={"small": "s", "big": "b" * 500}), max_bytes=100)
    assert accepted is not None
    assert accepted.state.names() == {"small"}
    assert "too big" in accepted.dropped["big"]


@pytest.mark.parametrize("raw", [None, [], {"values": []}, {"values": {}, "functions": {}}])
def test_a_report_of_the_wrong_shape_keeps_nothing(raw: Any) -> None:
    assert accept(raw, max_bytes=100) is None


# ---------------------------------------------------------------- sessions


async def test_a_transport_session_is_found_by_its_id_and_its_tenant(runtime: Runtime) -> None:
    sessions = runtime.sessions
    assert sessions is not None
    first = await sessions.open(Caller(session="s1", tenant="alice"), None)
    await sessions.finish(first)
    again = await sessions.open(Caller(session="s1", tenant="alice"), None)
    await sessions.finish(again)
    other = await sessions.open(Caller(session="s1", tenant="bob"), None)  # another holder: another session
    await sessions.finish(other)
    assert first.key == again.key != other.key
    assert first.handle is not None and "s1" not in first.handle and "s1" not in first.key
    fresh = await sessions.open(Caller(session=None), None)  # no transport session: a new handle, not yet stored
    assert fresh.handle is not None and not fresh.stored


async def test_an_idle_session_ends_but_not_while_a_call_holds_it(runtime: Runtime) -> None:
    sessions = runtime.sessions
    assert sessions is not None
    now = [sessions.clock()]
    sessions.clock = lambda: now[0]
    busy = await sessions.open(Caller(session="busy"), None)
    idle = await sessions.open(Caller(session="idle"), None)
    await sessions.finish(idle)
    now[0] += runtime.settings.session_idle_s + 1
    assert busy.lease is not None
    assert await sessions.store.handles.renew(busy.key, busy.lease, now=now[0])  # what its running call does
    ended = await sessions.store.handles.expire(now=now[0], idle_s=sessions.idle_s, max_age_s=1e9)
    assert ended == [idle.key]  # the busy one holds its lease
    await sessions.finish(busy)
    now[0] += runtime.settings.session_idle_s + 1
    assert await sessions.store.handles.expire(now=now[0], idle_s=sessions.idle_s, max_age_s=1e9) == [busy.key]


# ---------------------------------------------------------------- through the runtime (a real worker)


async def run(runtime: Runtime, code: str | None, session: str | None = "A", **request: Any) -> dict[str, Any]:
    caller = Caller(session=session) if session is not None else None
    result = await runtime.execute(ExecuteRequest(code=code, **request), CallContext(caller=caller))
    return result.model_dump(mode="json")


async def test_a_call_renews_its_lease_while_it_runs_and_stops_when_it_ends(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = runtime.sessions
    assert sessions is not None
    monkeypatch.setattr(sessions.store.handles, "lease_s", 0.3)  # renewed every 0.1 s
    renewed: list[float] = []
    renew = sessions.store.handles.renew

    async def counted(key: str, lease: str, *, now: float) -> bool:
        renewed.append(now)
        return await renew(key, lease, now=now)

    monkeypatch.setattr(sessions.store.handles, "renew", counted)
    session = await sessions.open(Caller(session="long"), None)
    async with sessions.held(session):
        await anyio.sleep(0.55)
    assert 3 <= len(renewed) <= 6, renewed
    await sessions.finish(session)
    await anyio.sleep(0.3)
    assert len(renewed) <= 6, renewed


async def test_a_call_cancelled_just_after_taking_its_session_gives_the_session_back(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A client that goes away while its call reads the session's state must not leave the session taken in the
    # store until the lease runs out: the next call on it would wait (or be refused busy) for nothing.
    sessions = runtime.sessions
    assert sessions is not None
    assert (await run(runtime, "x = 1", session="cut"))["status"] == "ok"
    read = sessions._read

    async def stuck(key: str, text: str, size: int) -> Any:
        await anyio.sleep_forever()

    monkeypatch.setattr(sessions, "_read", stuck)
    with anyio.move_on_after(0.3) as scope:
        await sessions.open(Caller(session="cut"), None)
    assert scope.cancelled_caught
    monkeypatch.setattr(sessions, "_read", read)
    key = sessions.implicit_key(Caller(session="cut"))
    assert key is not None
    got = await sessions.store.handles.claim(
        key, Caller().principal, "f" * 16, now=sessions.clock(), idle_s=sessions.idle_s, max_age_s=1e9,
        create=None, instance=sessions.instance, approvals=False,
    )  # fmt: skip
    assert isinstance(got, Record), got  # free at once, not Busy until the lease ran out


async def test_variables_and_functions_are_there_in_the_next_call(runtime: Runtime) -> None:
    first = await run(
        runtime,
        "rows = [('a', 1), ('b', 2)]\ntags = {'x', 'y'}\nindex = {(1, 2): 'pair'}\npat = re.compile('b+')\n"
        "dumps = json.dumps\ndef total(xs):\n    return sum(n for name, n in xs) + offset\noffset = 10\n__result__ = 1",
    )
    assert first["status"] == "ok" and first["hint"] is None, first
    second = await run(
        runtime, "__result__ = [total(rows), rows[0], sorted(tags), index[(1, 2)], pat.findall('abbb'), dumps(1)]"
    )
    assert second["result"] == [13, ["a", 1], ["x", "y"], "pair", ["bbb"], "1"], second
    again = await run(runtime, "rows.append(('c', 3))\n__result__ = total(rows)")
    assert again["result"] == 16


async def test_a_value_python_calls_equal_but_of_another_type_is_kept_as_the_new_one(runtime: Runtime) -> None:
    """An unchanged state is neither reported by the worker nor written: "unchanged" compares JSON, not Python's
    ``==`` (which calls ``1``, ``1.0`` and ``True`` equal)."""
    await run(runtime, "x = 1\ny = 1.0")
    await run(runtime, "x = 1.0\ny = 1")  # the same size too
    data = await run(runtime, "__result__ = [isinstance(x, float), isinstance(y, float)]")
    assert data["result"] == [True, False], data["error"]


def test_a_worker_reports_a_state_as_unchanged_only_when_it_is_the_same_json() -> None:
    given = {"values": {"x": 1, "t": {"tuple": [1, 2]}}, "functions": {"f": "def f():\n    return 1"}}
    same = Collected(values={"t": {"tuple": [1, 2]}, "x": 1}, functions={"f": "def f():\n    return 1"})
    assert unchanged(same, given)
    assert not unchanged(Collected(values={**same.values, "x": 1.0}, functions=same.functions), given)
    assert not unchanged(Collected(values={**same.values, "x": True}, functions=same.functions), given)
    assert not unchanged(Collected(values=same.values, functions={}), given)
    assert not unchanged(Collected(values=same.values, functions=same.functions, dropped={"g": "why"}), given)
    assert unchanged(Collected(), None) and not unchanged(same, None)


async def test_reset_clears_the_kept_state_first(runtime: Runtime) -> None:
    await run(runtime, "x = 1")
    data = await run(runtime, "__result__ = x", reset=True)
    assert data["error"]["code"] == "NAME_NOT_FOUND"


async def test_a_kept_function_passes_the_static_check(runtime: Runtime) -> None:
    await run(runtime, "def double(n):\n    return 2 * n")
    data = await run(runtime, "__result__ = double(21)")
    assert data["result"] == 42, data


async def test_another_session_and_a_sessionless_call_see_nothing(runtime: Runtime) -> None:
    await run(runtime, "secret = 'for A only'\ndef only_a():\n    return secret", session="A")
    for session in ("B", None):
        data = await run(runtime, "__result__ = secret", session=session)
        assert data["error"]["code"] == "NAME_NOT_FOUND"
        data = await run(runtime, "__result__ = only_a()", session=session)
        assert data["error"]["code"] == "NAME_NOT_FOUND"
    assert (await run(runtime, "__result__ = only_a()", session="A"))["result"] == "for A only"


async def test_the_same_program_in_two_sessions_runs_each_sessions_own_kept_function(workspace: Path) -> None:
    """A worker keeps programs it checked (`attp_server.sandbox.process.checked`); the kept definitions a session's
    run puts ahead of the program must not stay in the kept tree, where the other session would run them."""
    async with running(workspace, workers=1, max_workers=1) as runtime:
        await run(runtime, "def owner():\n    return 'A'", session="A")
        await run(runtime, "def owner():\n    return 'B'", session="B")
        for _ in range(3):
            for session in ("A", "B"):
                data = await run(runtime, "__result__ = owner()", session=session)
                assert data["result"] == session, data
        # Checked with A's and B's kept names, the program is checked again without them: refused before it runs.
        data = await run(runtime, "__result__ = owner()", session=None)
        assert "is not a tool or function available here" in data["error"]["message"], data


async def test_a_session_with_many_kept_names_does_not_fill_a_shared_worker_with_copies_of_them(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checked programs a worker keeps were keyed by the set of the session's kept names: each call decodes
    the state afresh, so every short program a session sent left its own copy of those names in the worker's
    cache (up to `MAX_ENTRIES`, 32), and the memory of a worker other sessions share filled up.

    Measured on the worker (VmSize, /proc; CPython 3.11, the dev extras, starlark included): it starts at
    about 36 MB; 6,000 kept names of about 400 characters (2.5 MB of state) cost about 3.1 MB a copy. With the
    bug, 30 copies would be about 93 MB, nearly the whole limit of 96 MB: the worker runs out of memory at the
    16th of A's programs (every run so far). Keyed by a digest, it peaks at about 65 MB through the same calls
    and at 72 MB with the final list (400,000 ints), 24 MB under the limit. The old version (75,000 names, 24
    programs, 256 MB) could not fail: its calls took more than `LONG_RUN_S` (0.5 s), so its worker was
    demoted and replaced every few calls, and the cache went with it before it held more than a few copies."""
    # Only the memory limit may end this worker: a call slow on a busy machine is not demoted (and replaced).
    monkeypatch.setattr(pool_module, "LONG_RUN_S", 60.0)
    pad = "_" * 400
    limits: dict[str, Any] = {"memory_mb": 96, "max_code_chars": 1_000_000, "max_state_bytes": 4 * 1024 * 1024}
    # No fresh worker kept ready: the one idle worker is the one kept for this caller, which serves every call.
    async with running(workspace, workers=0, max_workers=1, **limits) as runtime:
        for start in range(0, 6000, 1500):  # 4 calls of 1,500 names
            names = ",".join(f"v{i}{pad}" for i in range(start, start + 1500))
            data = await run(runtime, f"{names} = [0] * 1500\n__result__ = 1", session="A")
            assert data["status"] == "ok" and data["hint"] is None, data["error"]
        [worker] = runtime.pool.worker_pids()
        for k in range(30):  # 30 distinct short programs: all kept (MAX_ENTRIES 32, MAX_TOTAL_CHARS 32,000)
            data = await run(runtime, f"__result__ = {k}", session="A")
            assert data["result"] == k, (k, data["error"])
            assert runtime.pool.worker_pids() == [worker], "the worker was replaced: its cache proves nothing"
        data = await run(runtime, "x = list(range(400_000))\n__result__ = len(x)", session=None)
        assert data["status"] == "ok", data["error"]
        assert runtime.pool.worker_pids() == [worker]


async def test_what_is_not_kept_is_named_in_the_hint(workspace: Path) -> None:
    async with running(workspace, max_state_bytes=2000) as runtime:
        data = await run(
            runtime,
            "small = 'fits'\nbig = 'x' * 5000\nm = re.match('a', 'a')\nsquare = lambda n: n * n\n"
            "def uses_big():\n    return len(big)\n__result__ = 'done'",
        )
        assert data["status"] == "ok"
        hint = data["hint"]
        assert hint.startswith("Not kept for the next call: "), hint
        assert "\n" not in hint, hint
        for name, why in [("big", "too big"), ("m", "not plain data"), ("square", "def"), ("uses_big", "uses big")]:
            assert re.search(rf"(: |; ){name} \([^()]*{re.escape(why)}", hint), (name, hint)
        assert "small" not in hint
        after = await run(runtime, "__result__ = small")
        assert after["result"] == "fits"


async def test_money_in_decimals_is_kept_between_calls(workspace: Path) -> None:
    async with running(workspace) as runtime:
        first = await run(
            runtime,
            "total = decimal.Decimal('19.99') + decimal.Decimal('0.01')\nshare = fractions.Fraction(1, 3)\n__result__ = 1",
        )
        assert first["status"] == "ok" and not first["hint"], first
        later = await run(runtime, "__result__ = [str(total * 2), str(share * 3), isinstance(total, decimal.Decimal)]")
        assert later["result"] == ["40.00", "1", True], later


async def test_a_def_is_dropped_only_for_the_globals_it_really_reads(workspace: Path) -> None:
    """``def pat(s)`` was dropped because a global ``s`` was not kept: its own parameters and locals, and those of
    the functions and comprehensions inside it, are not the program's globals."""
    async with running(workspace) as runtime:
        program = (
            "s = iter([1])\nrows = iter([2])\n"
            "def pat(s):\n    rows = [r.strip() for r in s.split(',')]\n    return '|'.join(rows)\n"
            "def peek():\n    return next(rows)\n__result__ = pat(' a, b ')"
        )
        data = await run(runtime, program)
        assert data["result"] == "a|b", data
        assert "peek (it uses rows, which is not kept)" in data["hint"], data["hint"]
        assert "pat (" not in data["hint"], data["hint"]
        assert (await run(runtime, "__result__ = pat('x,y')"))["result"] == "x|y"


async def test_a_def_dropped_for_the_name_it_uses_leaves_its_room_to_the_values(workspace: Path) -> None:
    """Defs were given their room before the ones that use a name not kept were dropped, so a 1,200-byte def
    that could never be kept pushed out a 1,200-byte value, named as too big for max_state_bytes = 2,000."""
    async with running(workspace, max_state_bytes=2000) as runtime:
        padding = "x" * 1200
        data = await run(
            runtime,
            f"it = iter([1])\ndef first():\n    return next(it), '{padding}'\nvalue = 'y' * 1200\n__result__ = 1",
        )
        assert data["status"] == "ok", data
        assert "first (it uses it" in data["hint"], data["hint"]
        assert "value" not in data["hint"], data["hint"]
        assert (await run(runtime, "__result__ = len(value)"))["result"] == 1200


async def test_a_restored_def_cannot_call_a_tool_again(runtime: Runtime) -> None:
    data = await run(runtime, "def f(n=add(1, 2)):\n    return n\n__result__ = f()")
    assert data["result"] == 3
    assert "default values call a function" in data["hint"]
    again = await run(runtime, "__result__ = 1")
    assert [c["tool"] for c in again["calls"]] == []


async def test_a_runtime_error_keeps_what_was_assigned_before_it(runtime: Runtime) -> None:
    data = await run(runtime, "loaded = records(2)\nloaded[5]")
    assert data["error"]["code"] == "RUNTIME_ERROR"
    assert (await run(runtime, "__result__ = len(loaded)"))["result"] == 2


async def test_a_stopped_run_leaves_the_state_as_it_was(workspace: Path) -> None:
    async with running(workspace, timeout_s=1.0) as runtime:  # the loop burns a core until the deadline: keep it short
        await run(runtime, "x = 1")
        data = await run(runtime, "x = 2\nwhile True:\n    pass")
        assert data["error"]["code"] == "TIMEOUT"
        assert (await run(runtime, "__result__ = x"))["result"] == 1


async def test_a_killed_worker_says_the_state_is_unchanged(workspace: Path) -> None:
    async with running(workspace, timeout_s=1.0) as runtime:
        await run(runtime, "x = 1")
        data = await run(runtime, "x = 2\nsum(range(10**12))")  # one C call: only the pool's kill ends it
        assert data["error"]["code"] == "TIMEOUT"
        assert "kept from earlier calls are as they were" in data["hint"]
        assert (await run(runtime, "__result__ = x"))["result"] == 1


async def test_an_error_inside_a_kept_function_points_at_no_line_of_the_program(runtime: Runtime) -> None:
    await run(runtime, "def broken():\n    return 1 / 0")
    data = await run(runtime, "y = 1\n__result__ = broken()")
    assert data["error"]["code"] == "RUNTIME_ERROR"
    assert data["error"]["line"] is None and data["error"]["source_line"] is None, data["error"]


async def test_state_off_keeps_nothing(workspace: Path) -> None:
    async with running(workspace, session_state=False) as runtime:
        await run(runtime, "x = 1")
        assert (await run(runtime, "__result__ = x"))["error"]["code"] == "NAME_NOT_FOUND"


async def test_tam_chains_neither_read_nor_change_the_state(runtime: Runtime) -> None:
    await run(runtime, "x = 1")
    tam = "<|[REQUEST_TOOL]|>\ncommand:「始」add「末」\na:「始」1「末」\nb:「始」2「末」\n<|[END_TOOL]|>"
    data = await run(runtime, None, envelope=tam)
    assert data["status"] == "ok", data
    assert (await run(runtime, "__result__ = x"))["result"] == 1


async def test_an_idle_session_loses_its_state(workspace: Path) -> None:
    async with running(workspace) as runtime:
        await run(runtime, "x = 1")
        assert runtime.sessions is not None
        now = runtime.sessions.clock() + runtime.settings.session_idle_s + 1
        runtime.sessions.clock = lambda: now
        await runtime.end_idle_sessions()
        assert (await run(runtime, "__result__ = x"))["error"]["code"] == "NAME_NOT_FOUND"


async def test_past_the_servers_total_the_least_recently_used_session_loses_its_state(workspace: Path) -> None:
    # room for two of these sessions, not three
    async with running(workspace, max_state_bytes=2000, max_total_state_bytes=2500) as runtime:
        assert runtime.sessions is not None
        for session in ("A", "B", "C"):
            data = await run(runtime, "blob = 'x' * 1000", session=session)
            assert data["status"] == "ok", data
        await runtime.end_idle_sessions()  # any replica's sweep keeps the store within the bound
        assert (await runtime.sessions.store.handles.stats())["state_bytes"] <= 2500
        oldest = await run(runtime, "__result__ = blob", session="A")
        assert oldest["error"]["code"] == "NAME_NOT_FOUND"
        assert oldest["hint"].startswith("The variables kept from this session's earlier calls were dropped")
        assert (await run(runtime, "__result__ = len(blob)", session="C"))["result"] == 1000


# ---------------------------------------------------------------- handles: bounds and expiry


async def test_past_the_cap_a_principals_oldest_handle_ends_and_its_next_call_is_told(workspace: Path) -> None:
    async with running(workspace, max_sessions_per_principal=2) as runtime:
        context = CallContext(caller=Caller(tenant="alice"))
        handles = []
        for n in range(3):
            result = await runtime.execute(ExecuteRequest(code=f"n = {n}"), context)
            handles.append(result.session)
        oldest = await runtime.execute(ExecuteRequest(code="__result__ = n", session=handles[0]), context)
        assert oldest.error is not None and oldest.error.code == "SESSION_NOT_FOUND"
        assert "make room" in oldest.error.message
        newest = await runtime.execute(ExecuteRequest(code="__result__ = n", session=handles[2]), context)
        assert newest.result == 2
        bob = CallContext(caller=Caller(tenant="bob"))  # another principal's cap is its own
        assert (await runtime.execute(ExecuteRequest(code="n = 9"), bob)).session is not None
        assert (await runtime.execute(ExecuteRequest(code="__result__ = n", session=handles[1]), context)).result == 1


async def test_an_expired_handle_is_refused_and_its_folder_removed_by_the_sweep(workspace: Path) -> None:
    async with running(workspace, isolation="session") as runtime:
        assert runtime.sessions is not None
        context = CallContext(caller=Caller())
        made = await runtime.execute(ExecuteRequest(code="write_file('mine.txt', 'x')\nkeep = 1"), context)
        assert made.status == "ok" and made.session is not None, made
        folders = list((workspace / "sessions").iterdir())
        assert len(folders) == 1 and (folders[0] / "mine.txt").is_file()
        later = runtime.sessions.clock() + runtime.settings.session_idle_s + 1
        runtime.sessions.clock = lambda: later
        await runtime.end_idle_sessions()  # any replica's sweep
        await runtime.end_idle_sessions()  # twice: nothing left to do, no error
        assert not folders[0].exists()
        gone = await runtime.execute(ExecuteRequest(code="__result__ = keep", session=made.session), context)
        assert gone.error is not None and gone.error.code == "SESSION_NOT_FOUND"
