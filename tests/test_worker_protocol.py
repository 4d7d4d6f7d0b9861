"""The worker protocol declares its messages and the error fields once (sandbox/process/protocol.py); every side
that lists error fields uses that list, and a program reads each field of a tool's error."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_type_hints

import anyio
import pytest
from harness import run_code, running

from attp_server.errors import ErrorInfo
from attp_server.sandbox.policy import EXCEPTION_ATTRIBUTES
from attp_server.sandbox.process import pool as pool_module
from attp_server.sandbox.process import protocol
from attp_server.sandbox.process.pool import Job, WorkerPool
from attp_server.sandbox.process.protocol import ToolReply
from attp_server.sandbox.process.tools import ToolError

pytestmark = pytest.mark.anyio


def test_the_error_fields_are_the_fields_of_error_info() -> None:
    assert tuple(ErrorInfo.model_fields) == protocol.ERROR_FIELDS
    assert set(protocol.ErrorReport.__required_keys__) == {
        name for name, field in ErrorInfo.model_fields.items() if field.is_required()
    }


def test_a_tool_error_carries_every_field_but_the_location() -> None:
    assert set(protocol.TOOL_ERROR_FIELDS) == set(protocol.ERROR_FIELDS) - set(protocol.LOCATION_FIELDS)
    assert set(protocol.LOCATION_FIELDS) <= set(protocol.ERROR_FIELDS)


def test_a_program_may_read_every_field_of_a_tool_error() -> None:
    assert EXCEPTION_ATTRIBUTES[ToolError] == {"args", *protocol.TOOL_ERROR_FIELDS}
    error = ToolError.from_reply({"code": "X", "message": "m", "received": "-1", "expected": "1 or more"})
    assert {name: getattr(error, name) for name in protocol.TOOL_ERROR_FIELDS} == {
        "code": "X",
        "message": "m",
        "tool_name": None,
        "parameter_name": None,
        "received": "-1",
        "expected": "1 or more",
        "suggested_value": None,
        "solution": None,
    }


def test_the_run_message_holds_what_a_job_sends() -> None:
    job = Job(
        code="1",
        tools=["files.read_file"],
        namespaces={"files": ["read_file"]},
        timeout_s=1,
        max_output_bytes=1,
        max_result_bytes=1,
        max_tool_calls=1,
        modules=["json"],
        keep=True,
        state={},
        warm_up=True,
    )
    message = job.message()
    assert set(message) == set(get_type_hints(protocol.RunMessage))
    assert set(message["limits"]) == set(get_type_hints(protocol.Limits))


async def test_received_and_expected_reach_the_program_through_the_worker(tmp_path: Path) -> None:
    async with running(tmp_path) as runtime:
        caught = await run_code(
            runtime,
            "try:\n    read_file('a.txt', max_lines=0)\nexcept ToolError as e:\n"
            "    __result__ = [e.code, e.parameter_name, e.received, e.expected]",
        )
        uncaught = await run_code(runtime, "read_file('a.txt', max_lines=0)")
    assert caught["status"] == "ok", caught
    assert caught["result"][:3] == ["INVALID_ARGUMENT", "max_lines", "0"]
    assert caught["result"][3].startswith("an integer from 1 to ")
    error = uncaught["error"]
    assert (error["code"], error["parameter_name"], error["received"]) == ("INVALID_ARGUMENT", "max_lines", "0")
    assert error["expected"].startswith("an integer from 1 to ")


# ---------------------------------------------------------------- the pool decides reuse (fallen workers)


def fallen_job(code: str) -> Job:
    return Job(code=code, tools=[], namespaces={}, timeout_s=5, max_output_bytes=1000, max_result_bytes=10_000,
               max_tool_calls=5)  # fmt: skip


async def no_calls(name: str, args: list[Any], kwargs: dict[str, Any]) -> ToolReply:
    raise AssertionError(f"no tool call expected, got {name}")


PID = "import os\n__result__ = os.getpid()"


async def test_the_pool_keeps_a_worker_for_its_owner_alone_and_counts_its_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pool_module, "MAX_RUNS_PER_WORKER", 3)
    async with WorkerPool(size=1, max_workers=2, memory_mb=256, fallen=True) as pool:
        first = [(await pool.run(fallen_job(PID), no_calls, owner="alice"))["result"] for _ in range(4)]
        bob = (await pool.run(fallen_job(PID), no_calls, owner="bob"))["result"]
    assert first[0] == first[1] == first[2], "a worker kept for its owner serves its next runs"
    assert first[3] != first[2], "the pool counts runs: the fourth is another worker's, whatever the worker says"
    assert bob not in first


@pytest.mark.parametrize(
    ("retire", "reused"), [("True", False), ("'no'", False), ("None", False), ("False", True)], ids=str
)
async def test_a_worker_may_only_ask_to_retire_sooner(retire: str, reused: bool) -> None:
    code = f"import os\nchannel.send({{'op': 'done', 'status': 'ok', 'result': os.getpid(), 'retire': {retire}}})"
    async with WorkerPool(size=0, max_workers=1, memory_mb=256, fallen=True) as pool:
        first = await pool.run(fallen_job(code), no_calls, owner="alice")
        second = await pool.run(fallen_job(PID), no_calls, owner="alice")
    if retire in ("'no'", "None"):
        assert first["status"] == "error" and "sandbox process sent" in first["error"]["message"], first
    assert (second["result"] == first.get("result")) is reused


async def test_a_new_worker_warms_up_on_its_own_engine_and_a_one_run_engine_still_serves_one_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each new worker runs the server's own program on the pool's engine before anybody's (a cpython worker's first
    touches were otherwise paid by the caller, 1 ms at rest); the worker does not retire for it, but says it retires
    after the one owner's run it then serves (and the server would kill it anyway: the engine table decides)."""
    sent: list[tuple[str, int, dict[str, Any]]] = []
    send, receive = pool_module.WorkerProcess.send, pool_module.WorkerProcess.receive

    async def sending(worker: pool_module.WorkerProcess, message: Any) -> None:
        sent.append(("to", worker.pid, dict(message)))
        await send(worker, message)

    async def receiving(worker: pool_module.WorkerProcess, limits: Any) -> dict[str, Any]:
        message = await receive(worker, limits)
        sent.append(("from", worker.pid, message))
        return message

    monkeypatch.setattr(pool_module.WorkerProcess, "send", sending)
    monkeypatch.setattr(pool_module.WorkerProcess, "receive", receiving)
    code = "import os\n__result__ = [os.getpid(), sorted(name for name in dir() if name in ('step', 'value'))]"
    async with WorkerPool(size=1, max_workers=1, memory_mb=1024, engine="cpython") as pool:
        first = await pool.run(Job(code, [], {}, 20, 1000, 1000, 1, engine="cpython"), no_calls, owner="alice")
        second = await pool.run(Job(code, [], {}, 20, 1000, 1000, 1, engine="cpython"), no_calls, owner="alice")
    pid = first["result"][0]  # the first worker's messages, whatever the next worker's warm-up did meanwhile
    runs = [message for way, of, message in sent if of == pid and way == "to" and message["op"] == "run"]
    dones = [message for way, of, message in sent if of == pid and way == "from" and message["op"] == "done"]
    assert [(run["engine"], bool(run.get("warm_up"))) for run in runs] == [("cpython", True), ("cpython", False)]
    assert (dones[0]["status"], dones[0]["retire"]) == ("ok", False), "the warm-up ran, and used up nothing"
    assert (dones[1]["status"], dones[1]["retire"]) == ("ok", True), "the owner's run is the worker's one run"
    assert first["result"][1] == [], "nothing of the warm-up's program is in the owner's"
    assert second["result"][0] != first["result"][0], "a cpython worker serves one run, warm-up or not"


async def test_a_run_that_leaves_a_worker_ready_replaces_its_own_after_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Making a worker (a fork, its lockdown, its warm-up) takes the cores for milliseconds: while another is ready for
    the next run, the one a run took is replaced when the run ends, not while it runs; the last one ready is
    replaced at once."""
    events: list[str] = []
    refill = WorkerPool._refill

    def recorded(pool: WorkerPool) -> None:
        events.append("refill")
        refill(pool)

    monkeypatch.setattr(WorkerPool, "_refill", recorded)
    job = Job("__result__ = 1", [], {}, 20, 1000, 1000, 1)
    async with WorkerPool(size=2, max_workers=2, memory_mb=256) as pool:
        for owner in ("alice", "bob"):
            events.append(f"{owner} starts")
            await pool.run(job, no_calls, lambda: events.append("running"), owner=owner)
            events.append(f"{owner} ends")
    assert events == [
        "alice starts", "running", "refill", "alice ends",  # another was ready: replaced after the run
        "bob starts", "refill", "running", "refill", "bob ends",  # the last ready one: at once
    ], events  # fmt: skip


ENDINGS = {
    "answered": ("__result__ = 1", 5.0, {"ok"}),
    "timed out": ("while True:\n    pass", 0.5, {"TIMEOUT"}),
    "died": ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", 5.0, {"MEMORY_LIMIT", "INTERNAL_ERROR"}),
    "broke the protocol": (
        "import gc\ngc.unfreeze()\nchannel = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel')\n"
        "channel.writer.write(b'garbage\\n')\nchannel.writer.flush()\nwhile True:\n    pass",
        5.0,
        {"INTERNAL_ERROR"},
    ),
}


async def test_however_a_run_ends_its_worker_is_replaced() -> None:
    """Answered, timed out, died, broke the protocol or cancelled by its client: a run's one-run worker is gone after
    it and the pool is back to its ready workers (the replacement is made at the run's end now, not at its start)."""

    async def settled(pool: WorkerPool) -> dict[str, int]:
        with anyio.fail_after(30):
            while pool.stats()["starting"] or pool.stats()["idle"] < pool.size:
                await anyio.sleep(0.02)
        return {key: pool.stats()[key] for key in ("idle", "busy", "starting")}

    async with WorkerPool(size=2, max_workers=2, memory_mb=1024, engine="cpython") as pool:
        for ending, (code, timeout_s, expected) in ENDINGS.items():
            before = set(pool.worker_pids())
            done = await pool.run(Job(code, [], {}, timeout_s, 1000, 1000, 1, engine="cpython"), no_calls, owner="a")
            error = done.get("error")
            assert (error["code"] if error else done["status"]) in expected, (ending, done)
            assert await settled(pool) == {"idle": 2, "busy": 0, "starting": 0}, ending
            assert len(before - set(pool.worker_pids())) == 1, f"{ending}: the worker it took is not among the ready"
        with anyio.move_on_after(0.3):
            await pool.run(
                Job("while True:\n    pass", [], {}, 5, 1000, 1000, 1, engine="cpython"), no_calls, owner="b"
            )
        assert await settled(pool) == {"idle": 2, "busy": 0, "starting": 0}, "cancelled"


async def test_a_run_that_ends_while_its_pool_closes_ends_with_a_report_and_leaves_no_worker() -> None:
    """The pool closes (the server stopping) while a run is on a worker: the run still ends with a report (its answer,
    or its worker stopped with the pool), never an exception, and its worker is neither kept nor replaced, since
    nothing would be left to reap them."""
    pool = WorkerPool(size=2, max_workers=2, memory_mb=256)
    outcome: dict[str, Any] = {}
    running = anyio.Event()
    job = Job("total = 0\nfor i in range(100000):\n    total += i\n__result__ = 1", [], {}, 20, 1000, 1000, 1)

    async def one_run() -> None:
        try:
            outcome["done"] = await pool.run(job, no_calls, running.set, owner="a")
        except Exception as exc:  # (a closed task group once raised here)
            outcome["raised"] = exc

    async with anyio.create_task_group() as tasks:
        await pool.__aenter__()
        tasks.start_soon(one_run)
        await running.wait()
        await pool.__aexit__(None, None, None)
    assert "done" in outcome and outcome["done"]["op"] == "done", outcome
    assert pool.stats() | {"idle": 0, "busy": 0, "starting": 0} == pool.stats()
    assert pool.worker_pids() == []


async def test_an_honest_worker_refuses_a_call_the_server_would_refuse(tmp_path: Path) -> None:
    """A tool call past what the server reads (`protocol.MAX_CALL_VALUES`) is the program's INVALID_ARGUMENT, said
    by its worker before anything is sent, never a killed worker."""
    async with running(tmp_path, timeout_s=20, memory_mb=512) as runtime:
        data = await run_code(runtime, f"write_file('a.csv', 'a,' * {protocol.MAX_CALL_VALUES})")
        fits = await run_code(runtime, "write_file('b.csv', 'a,' * 1000)\n__result__ = read_file('b.csv')[:4]")
    assert data["error"]["code"] == "INVALID_ARGUMENT", data["error"]
    assert "a tool call carries at most 2,000,000" in data["error"]["message"]
    assert fits["result"] == "a,a,"
