"""A real PostgreSQL server for the tests: Debian's binaries, a fresh cluster in a temporary folder.

`running_postgres` runs ``initdb`` and ``postgres`` on a free 127.0.0.1 port, waits until it accepts
connections, and stops it (fast shutdown) and removes the folder afterwards. PostgreSQL refuses to run
as root, so when the tests run as root (CI does) the cluster belongs to the ``postgres`` system user
(or ``nobody``) and the server runs as that user through ``setpriv``. `fresh_database` gives each test
a database of its own on the one server.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness import free_port

SUPERUSER = "attp"
READY_TIMEOUT_S = 60.0
MISSING = (
    "PostgreSQL's server binaries (initdb, postgres) were not found; install Debian's `postgresql` "
    "package (.ci/run does: apt-get install postgresql)"
)


def bin_dir() -> Path:
    """Debian's /usr/lib/postgresql/<newest>/bin; else the directory of `pg_ctl` on PATH."""
    debian = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "postgres").is_file()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if debian:
        return debian[-1]
    found = shutil.which("pg_ctl")
    if found and (Path(found).resolve().parent / "postgres").is_file():
        return Path(found).resolve().parent
    raise RuntimeError(MISSING)


@dataclass(frozen=True)
class Postgres:
    """A running server: its port and a URL for its superuser."""

    port: int
    folder: Path
    process: subprocess.Popen[bytes]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _unprivileged() -> tuple[list[str], int, int] | None:
    """When root: the command prefix to run as the `postgres` (or `nobody`) user, with its uid and gid."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        prefix = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--"]
        return prefix, entry.pw_uid, entry.pw_gid
    raise RuntimeError("running as root and neither a `postgres` nor a `nobody` user exists to run PostgreSQL as")


@contextmanager
def running_postgres() -> Iterator[Postgres]:
    """A fresh PostgreSQL cluster on a free loopback port, stopped and removed when the block ends."""
    binaries = bin_dir()
    folder = Path(tempfile.mkdtemp(prefix="attp-pg-"))
    user = _unprivileged()
    prefix: list[str] = []
    if user is not None:
        prefix, uid, gid = user
        os.chown(folder, uid, gid)
    folder.chmod(0o700)
    data, sockets = folder / "data", folder / "sockets"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    try:
        subprocess.run(
            [*prefix, str(binaries / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
             "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"],
            check=True, capture_output=True, env=env, cwd=folder, timeout=120,
        )  # fmt: skip
        subprocess.run([*prefix, "mkdir", str(sockets)], check=True, env=env, timeout=10)
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {exc.stderr.decode(errors='replace')}") from None
    port = free_port()
    log = (folder / "server.log").open("wb")
    process = subprocess.Popen(
        [*prefix, str(binaries / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sockets),
         "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
         "-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=32MB"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=folder, start_new_session=True,
    )  # fmt: skip
    server = Postgres(port, folder, process)
    try:
        _wait_ready(server, folder / "server.log")
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # fast shutdown: disconnect clients, stop
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


def _wait_ready(server: Postgres, log: Path) -> None:
    import psycopg

    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"PostgreSQL exited with {server.process.returncode}: {log.read_text(errors='replace')}")
        try:
            with psycopg.connect(server.url(), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            time.sleep(0.1)
    raise TimeoutError(f"PostgreSQL did not accept connections within {READY_TIMEOUT_S:g} s: {log.read_text()}")


@contextmanager
def fresh_database(server: Postgres) -> Iterator[str]:
    """A new, empty database on `server` for one test; its URL. Dropped afterwards."""
    name = "t_" + uuid.uuid4().hex[:16]
    url = server.create_database(name)
    try:
        yield url
    finally:
        server.drop_database(name)
