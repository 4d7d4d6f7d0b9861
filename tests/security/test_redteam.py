"""Red-team suite: hostile programs through the real path (runtime -> worker process -> tools), with real detectors.

An escape is detected, not argued: a file appearing outside the workspace, a planted secret (file,
server environment variable, tool credential) in the result or output, a connection to the loopback
canary, a change of server state, bytes on the server's stdout, an internal object's repr in the
result, or a run outliving ``timeout_s + 1 s``. Each case also states the escape it is after.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import make_settings
from redteam_cases import CASES, CONTROLS, Case
from redteam_modules import MODULE_CASES, MODULE_CONTROLS
from redteam_pack import CREDENTIAL

from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime

pytestmark = pytest.mark.anyio

TIMEOUT_S = 0.5
FILE_SECRET = "file-secret-4b1d-DO-NOT-LEAK"
ENV_SECRET = "env-secret-93e2-DO-NOT-LEAK"
LEAK_MARKERS = ("<module ", "<frame ", "<code object", "__builtins__", " at 0x", "<function ", "<bound method")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class Canary:
    """A loopback listener that records every connection made to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=2)
        self.sock.close()


@dataclass
class Target:
    runtime: Runtime
    workspace: Path
    canary_dir: Path
    canary: Canary
    fingerprint: str = ""
    outside_files: set[str] = field(default_factory=set)


def _outside_files(canary_dir: Path) -> set[str]:
    return {str(p.relative_to(canary_dir)) for p in canary_dir.rglob("*")}


def _fingerprint(runtime: Runtime) -> str:
    registry = runtime.registry
    state = {
        "tools": sorted(registry.tools),
        "aliases": sorted(registry.aliases.items()),
        "packs": sorted(registry.packs),
        "settings": runtime.settings.model_dump(mode="json"),
        "description": runtime.catalog.description,
    }
    return json.dumps(state, sort_keys=True)


@pytest.fixture(scope="module")
def canary() -> Iterator[Canary]:
    listener = Canary()
    yield listener
    listener.close()


@pytest.fixture(scope="module")
async def target(tmp_path_factory: pytest.TempPathFactory, canary: Canary) -> AsyncIterator[Target]:
    async with _target(tmp_path_factory, canary, "python") as found:
        yield found


@pytest.fixture(scope="module")
async def asteval_target(tmp_path_factory: pytest.TempPathFactory, canary: Canary) -> AsyncIterator[Target]:
    async with _target(tmp_path_factory, canary, "asteval") as found:
        yield found


@contextlib.asynccontextmanager
async def _target(tmp_path_factory: pytest.TempPathFactory, canary: Canary, engine: str) -> AsyncIterator[Target]:
    root = tmp_path_factory.mktemp(f"redteam-{engine}")
    workspace, canary_dir = root / "ws", root / "canary"
    workspace.mkdir()
    canary_dir.mkdir()
    (canary_dir / "secret.txt").write_text(FILE_SECRET)
    (workspace / "inside-link").symlink_to(canary_dir / "secret.txt")
    os.environ["ATTP_REDTEAM_ENV_SECRET"] = ENV_SECRET
    settings = make_settings(
        workspace,
        toolpacks=["files", "redteam_pack:toolpack"],
        timeout_s=TIMEOUT_S,
        workers=2,
        max_tool_calls=50,
        engine=engine,
    )
    try:
        async with open_runtime(settings) as runtime:
            found = Target(runtime, workspace, canary_dir, canary)
            found.fingerprint = _fingerprint(runtime)
            found.outside_files = _outside_files(canary_dir)
            yield found
    finally:
        os.environ.pop("ATTP_REDTEAM_ENV_SECRET", None)


async def _run(target: Target, code: str) -> dict[str, Any]:
    program = code.replace("{CANARY}", str(target.canary_dir)).replace("{PORT}", str(target.canary.port))
    with anyio.fail_after(TIMEOUT_S + 1.0):  # a run outliving timeout_s + 1 s is a hang
        result = await target.runtime.execute(ExecuteRequest(code=program))
    return result.model_dump(mode="json")


def _assert_no_escape(target: Target, data: dict[str, Any], captured_out: str) -> None:
    text = json.dumps(data)
    for secret in (FILE_SECRET, ENV_SECRET, CREDENTIAL):
        assert secret not in text, f"secret leaked: {secret}"
    for marker in LEAK_MARKERS:
        assert marker not in json.dumps(data.get("result")), f"internal object in the result: {marker}"
    assert _outside_files(target.canary_dir) == target.outside_files, "a file changed outside the workspace"
    assert target.canary.connections == 0, "the program reached the loopback canary"
    assert _fingerprint(target.runtime) == target.fingerprint, "server state changed"
    assert captured_out == "", "bytes reached the server's stdout"


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in [*CASES, *MODULE_CASES]])
async def test_attack_is_contained(target: Target, case: Case, capfd: pytest.CaptureFixture[str]) -> None:
    data = await _run(target, case.code)
    _assert_no_escape(target, data, capfd.readouterr().out)
    if case.expect is not None:
        assert data["status"] == "error", f"{case.escape}: expected a refusal, got {data['result']!r}"
        assert data["error"]["code"] in case.expect, data["error"]
    after = await _run(target, "__result__ = 'alive'")
    assert after["result"] == "alive", "the next call must work"


ASTEVAL_REACHES: dict[str, str] = {
    "RestrictedPython-CVE-2024-47532-attributeerror-obj": "asteval reads a missing attribute as None: no error",
    "def-comprehension-dunder": "asteval allows names starting with __",
    "def-procedure-attrs": "a function's non-dunder attributes (its name)",
    "evaluator-kwargs-dunder": "a keyword named __class__ in a dict",
    "exception-with-traceback-method": "an exception's methods",
    "probe-exc-with-traceback": "an exception's bound method",
    "issue12-bytearray-join": "no size check on bytes: 15 MB, within the worker's memory limit",
    "issue12-bytearray-percent-width": "no format-width check on bytes: 10 MB, within the worker's memory limit",
    "modules-counter-update-lists": "no size check on Counter arithmetic: within the worker's memory limit",
    "modules-counter-class-patch": "a curated class patched: the worker never runs another program",
    "modules-typing-register": "an ABC registration (process state): the worker never runs another program",
    "state-tool-stub-attr": "a stub's name changed: the server checks every call's tool by name",
    "tool-stub-attributes": "a stub's name",
    "tool-stub-invoke": "the stub's bridge, and through it the protocol pipe: tests/security/test_asteval_walls.py",
    "tool-pack-members": "a pack's member table (read-only)",
    "namespace-math-via-dict": "a module's member table (read-only)",
    "modules-namespace-table": "a module's member table (read-only)",
    "state-dict-view-mapping": "a dict view's mapping (the program's own dict, read-only)",
    "modules-capped-source": "the iterator behind a capped one",
    "modules-csv-dictreader-reader": "the C reader behind DictReader",
    "modules-csv-reader-dialect": "the reader's dialect object",
    "modules-namedtuple-class-attr": "a record class's descriptors",
    "modules-namedtuple-renamed-field": "an underscore field",
    "modules-partial-args": "a partial's bound arguments (the program's own)",
    "modules-partial-func": "a partial's function (a tool stub)",
    "modules-sequencematcher-isjunk": "matcher internals",
    "modules-template-pattern": "a template's class regex",
    "modules-textwrapper-regex": "a wrapper's class regex",
    "modules-typing-alias-forward": "a method of the alias's origin class",
    "modules-uuid-is-safe": "an enum member",
    "modules-decimal-from-float-class": "a Decimal made exactly from a float (some 1,100 digits at most)",
    "modules-fraction-slots": "a Fraction's numerator (an int)",
    "modules-fraction-from-float-class": "a library Fraction, past the size checks: the run's time and memory bound it",
}
"""Attacks python's first wall refuses and asteval's does not: the program gets the object (or a result refused
only for having no JSON form). Each is contained by what follows it (no escape detector fires): nothing there
leads to a module, a file, a socket or another run."""

ASTEVAL_REFUSES_OTHERWISE = frozenset(
    {
        "closure-size-bomb-in-generator", "closure-timeout-in-generator-uncatchable",
        "evaluator-recursion-through-decorator",  # FORBIDDEN: not part of asteval's language
        "evaluator-modular-pow-in-c",  # asteval's exponent limit
        "evaluator-parallel-huge-name", "result-too-large", "review-F1a-fnmatch-cache-growth",
        "review-F1c-realpath-quadratic", "review-F1d-edit-quadratic", "review-F2-tools-query-flood",  # 256 KiB str
        "review-F4-nested-lambda-compile",
    }
)  # fmt: skip
"""Attacks asteval refuses with another code than python's (its own limits, or its language lacks the construct)."""


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in [*CASES, *MODULE_CASES]])
async def test_attack_is_contained_on_asteval(
    asteval_target: Target, case: Case, capfd: pytest.CaptureFixture[str]
) -> None:
    """The same attacks on engine = "asteval": never an escape; refused as on python except where listed."""
    target = asteval_target
    data = await _run(target, case.code)
    _assert_no_escape(target, data, capfd.readouterr().out)
    code = data["error"]["code"] if data["status"] == "error" else None
    if case.id in ASTEVAL_REACHES:
        assert code in (None, "RESULT_NOT_SERIALIZABLE"), data["error"]
    elif case.id in ASTEVAL_REFUSES_OTHERWISE:
        assert data["status"] == "error" and code not in (case.expect or ()), data["error"]
    elif case.expect is not None:
        assert data["status"] == "error", f"{case.escape}: expected a refusal, got {data['result']!r}"
        assert code in case.expect, data["error"]
    if code in ("TIMEOUT", "MEMORY_LIMIT", "INTERNAL_ERROR"):  # every asteval run has a fresh worker: the rest
        after = await _run(target, "__result__ = 'alive'")  # cannot leave one broken for the next
        assert after["result"] == "alive", "the next call must work"


@pytest.mark.parametrize(
    ("code", "expected"),
    [pytest.param(code, exp, id=cid) for cid, code, exp in [*CONTROLS, *MODULE_CONTROLS]],
)
async def test_controls_still_compute(target: Target, code: str, expected: object) -> None:
    data = await _run(target, code)
    assert data["status"] == "ok", data["error"]
    assert data["result"] == expected


async def test_suite_has_at_least_100_attacks() -> None:
    assert len(CASES) >= 100
    every = [*CASES, *MODULE_CASES]
    assert len({case.id for case in every}) == len(every)


async def test_inside_symlink_to_outside_secret_is_refused(target: Target) -> None:
    data = await _run(target, "read_file('inside-link')")
    assert data["error"]["code"] == "PATH_OUTSIDE_WORKSPACE"
    assert FILE_SECRET not in json.dumps(data)


async def test_error_text_and_trace_are_bounded(target: Target) -> None:
    """Review F5: the error message and the calls trace cannot smuggle megabytes past the output caps."""
    data = await _run(target, "raise ValueError('x' * 5000000)")
    assert len(data["error"]["message"]) < 5000
    data = await _run(target, "while True:\n    help('x')")
    assert data["error"]["code"] == "TOOL_CALL_LIMIT"
    assert len(data["calls"]) <= 51


async def test_parallel_tool_name_cannot_inflate_the_result(target: Target) -> None:
    """Regression: parallel() took any string as the tool's name and recorded it in the calls trace once per item,
    so a 2-byte result came back as 40 MB of JSON (and 200 items of a 9 MB name would build 1.8 GB in the server)."""
    data = await _run(target, "r = parallel('x' * 1_000_000, [{}] * 40, return_errors=True)\n__result__ = len(r)")
    assert data["error"]["code"] == "NAME_NOT_FOUND", data["error"]
    assert len(json.dumps(data)) < 10_000, f"{len(json.dumps(data)):,} bytes of result"
    data = await _run(target, "__result__ = len(parallel('read_file', [{'path': 'none.txt'}], return_errors=True))")
    assert data["result"] == 1, data["error"]


async def test_no_program_code_runs_while_the_result_is_converted(target: Target) -> None:
    """Regression: a ChainMap result was read key by key, so a defaultdict among its maps called the program's
    factory after the program had ended (a tool call, or a recursion outside the evaluator's own limit)."""
    code = (
        "def factory():\n    write_file('after-the-run.txt', 'x')\n    return 0\n"
        "__result__ = collections.ChainMap(collections.defaultdict(factory), {'k': 1})"
    )
    data = await _run(target, code)
    assert data["result"] == {"k": 1}, data["error"]
    assert data["calls"] == [], data["calls"]
    assert not (target.workspace / "after-the-run.txt").exists()


async def test_regex_cache_does_not_carry_into_the_next_run(target: Target) -> None:
    """Review F3: patterns compiled by one run (up to ~100 MB) must not poison the next run's memory."""
    await _run(target, "for k in range(4):\n    re.compile('a' * 1000000 + str(k))\n__result__ = 1")
    data = await _run(target, "x = [0] * 9000000\ny = [1] * 9000000\n__result__ = len(x) + len(y)")
    assert data["result"] == 18000000, data["error"]


async def test_shadowing_does_not_survive_into_the_next_run(target: Target) -> None:
    await _run(target, "json = 'poisoned'\nmath = None\nread_file = 1")
    data = await _run(target, "__result__ = [json.dumps(1), math.sqrt(4), callable(read_file)]")
    assert data["result"] == ["1", 2.0, True]


async def test_detectors_fire_on_real_escapes(target: Target) -> None:
    clean = await _run(target, "__result__ = 1")
    leaks = [
        {**clean, "result": f"got {FILE_SECRET}"},
        {**clean, "stdout": ENV_SECRET},
        {**clean, "result": "<module 'os' from '/usr/lib/python3.11/os.py'>"},
    ]
    for data in leaks:
        with pytest.raises(AssertionError):
            _assert_no_escape(target, data, "")
    with pytest.raises(AssertionError):
        _assert_no_escape(target, clean, '{"jsonrpc": "2.0"}')
    planted = target.canary_dir / "pwned"
    planted.write_text("x")
    try:
        with pytest.raises(AssertionError):
            _assert_no_escape(target, clean, "")
    finally:
        planted.unlink()
    with socket.create_connection(("127.0.0.1", target.canary.port)):
        pass
    with anyio.fail_after(5):
        while target.canary.connections == 0:
            await anyio.sleep(0.01)
    try:
        with pytest.raises(AssertionError):
            _assert_no_escape(target, clean, "")
    finally:
        target.canary.connections = 0
