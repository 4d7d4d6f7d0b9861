"""Layer 2 checked from outside the worker (via /proc), against what the pool reports."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from harness import running

from attp_server.sandbox.process.lockdown import ONE_THREAD

pytestmark = pytest.mark.anyio


def status_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    raise KeyError(name)


async def test_worker_lockdown_matches_its_report(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTP_AUTH_TOKEN", "server-token-must-not-reach-workers")
    monkeypatch.setenv("SOME_CREDENTIAL", "credential-must-not-reach-workers")
    async with running(workspace, workers=1) as runtime:
        with anyio.fail_after(20):
            while not runtime.pool.worker_pids():
                await anyio.sleep(0.05)
        pid = runtime.pool.worker_pids()[0]
        report = runtime.pool.lockdown
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        names = {entry.split(b"=", 1)[0].decode() for entry in environ if entry}
        assert names <= {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "MPLCONFIGDIR", *ONE_THREAD}, names
        assert all(entry.split(b"=", 1)[1] == b"1" for entry in environ if b"_THREADS=" in entry)
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        assert cwd != Path.cwd() and cwd.name.startswith("attp-worker-")
        for fd in (0, 1):
            assert os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/null"
        assert report["no_new_privs"] is (status_field(pid, "NoNewPrivs") == "1")
        if report["network_namespace"]:
            assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
        if str(report["dropped_privileges"]).startswith("uid 65534"):
            assert status_field(pid, "Uid").split()[0] == "65534"
            assert status_field(pid, "CapEff") == "0000000000000000"
        limits = {
            line[:26].strip(): line[26:].split()[0] for line in Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]
        }
        assert report["rlimit_fsize"] and limits["Max file size"] == "0"
        assert report["rlimit_as"] and limits["Max address space"] == str(256 * 1024 * 1024)
        assert report["rlimit_core"] and limits["Max core file size"] == "0"
        # The second wall, seen from outside: a seccomp filter is on (mode 2), Landlock applied, one thread.
        assert report["seccomp"] and status_field(pid, "Seccomp") == "2"
        assert str(report["landlock"]).startswith("ABI ") and report["missing"] == {}
        assert status_field(pid, "Threads") == "1"
