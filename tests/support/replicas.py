"""Several real `attp serve --transport http` replicas behind a real HAProxy, run with deploy/haproxy.cfg.

`running_cluster` starts N replicas on free loopback ports (one shared environment: the database URL,
the secret file, the workspace), waits for each one's ``/healthz``, then runs Debian's ``haproxy``
with the repository's own ``deploy/haproxy.cfg``, of which only the listening address and the
``server`` lines are replaced by the test's, plus a stats socket the test reads to know which
replicas HAProxy sees up. Every response through the proxy names the replica that answered
(``X-Attp-Replica``, set by the config); `Cluster.client` records them.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
from harness import free_port, mcp_http_client, server_env
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[2]
HAPROXY_CFG = ROOT / "deploy" / "haproxy.cfg"
NGINX_CONF = ROOT / "deploy" / "nginx.conf"
REPLICA_HEADER = "x-attp-replica"
_SERVER_LINE = re.compile(r"^(\s*)server\s+\S+\s+\S+.*$")
_BIND_LINE = re.compile(r"^(\s*)bind\s+\S+.*$")
_NGINX_SERVER = re.compile(r"^(\s*)server\s+[0-9.]+:\d+(.*)$")
_NGINX_LISTEN = re.compile(r"^(\s*)listen\s+\S+;$")


def haproxy_binary() -> str:
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if found is None:
        raise RuntimeError("HAProxy was not found; install Debian's `haproxy` package (.ci/run does)")
    return found


def haproxy_config(template: str, bind: str, servers: list[tuple[str, str]], stats_socket: Path) -> str:
    """deploy/haproxy.cfg with this test's listening address, replicas and a stats socket; all else as shipped."""
    out: list[str] = []
    for line in template.splitlines():
        if (match := _BIND_LINE.match(line)) is not None:
            out.append(f"{match.group(1)}bind {bind}")
        elif (match := _SERVER_LINE.match(line)) is not None:
            if out and out[-1].lstrip().startswith("server "):
                continue  # the backend's servers were written at its first server line
            out.extend(f"{match.group(1)}server {name} {address}" for name, address in servers)
        elif line.strip() == "option dontlognull":
            continue  # log every connection, even one that never sent a request
        elif line.strip().startswith("log stdout"):
            out.append(line.replace(" notice", " info"))  # one line per request in the test's haproxy.log
        else:
            out.append(line)
            if line.strip() == "global":
                out.append(f"    stats socket {stats_socket} mode 600 level admin")
    return "\n".join(out) + "\n"


@dataclass
class Replica:
    """One `attp serve --transport http`; started, killed and started again by the test."""

    name: str
    port: int
    args: list[str]
    env: dict[str, str]
    log: Path
    cwd: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "attp_server", "serve", "--transport", "http", "--port", str(self.port),
                 *self.args],
                stdout=subprocess.DEVNULL, stderr=log, env=self.env, cwd=self.cwd, start_new_session=True,
            )  # fmt: skip

    def wait_healthy(self, timeout: float = 60.0) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=1.0) as http:  # one client for every poll (httpx.get builds one each time)
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    log = self.log.read_text()
                    raise RuntimeError(f"replica {self.name} exited with {self.process.returncode}: {log}")
                try:
                    if http.get(self.url + "/healthz").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        raise TimeoutError(f"replica {self.name} did not become healthy: {self.log.read_text()}")

    def kill(self) -> None:
        """SIGKILL the replica and everything it started (its workers): no shutdown, no cleanup."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@dataclass
class Cluster:
    """HAProxy at `url` in front of `replicas`."""

    url: str
    replicas: list[Replica]
    haproxy: subprocess.Popen[bytes]
    stats_socket: Path
    served_by: list[str] = field(default_factory=list)
    """The replica that answered each response through `client`, in order."""

    def status(self) -> dict[str, str]:
        """HAProxy's view of each replica in the main backend: 'UP', 'DOWN', ... (from its stats socket)."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(self.stats_socket))
            sock.sendall(b"show stat\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        lines = data.decode().splitlines()
        header = lines[0].lstrip("# ").split(",")
        status: dict[str, str] = {}
        for line in lines[1:]:
            row = dict(zip(header, line.split(","), strict=False))
            if row.get("pxname") == "attp_replicas" and row.get("svname") not in {"FRONTEND", "BACKEND"}:
                status[row["svname"]] = row["status"]
        return status

    def wait_status(self, wanted: dict[str, str], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = self.status()
            if all(current.get(name) == state for name, state in wanted.items()):
                return
            time.sleep(0.1)
        raise TimeoutError(f"HAProxy saw {self.status()}, waited for {wanted}")

    def client(self, **kwargs: Any) -> Client:
        """An SDK client (default mode: 2026-07-28) through the proxy that records who answered each request."""
        return recording_client(self.url, self.served_by, **kwargs)


def recording_client(url: str, served_by: list[str], **kwargs: Any) -> Client:
    """An SDK client of `url`/mcp that appends the X-Attp-Replica header of every response to `served_by`."""
    return Client(_recording_streams(url + "/mcp", served_by), **kwargs)


@asynccontextmanager
async def _recording_streams(url: str, served_by: list[str]) -> AsyncIterator[Any]:
    async def record(response: httpx2.Response) -> None:
        served_by.append(response.headers.get(REPLICA_HEADER, "?"))

    http = mcp_http_client(event_hooks={"response": [record]})
    async with http, streamable_http_client(url, http_client=http) as streams:
        yield streams


@contextmanager
def running_cluster(
    folder: Path, replicas: int, args: list[str], env: dict[str, str] | None = None
) -> Iterator[Cluster]:
    """`replicas` × `attp serve --transport http <args>` behind HAProxy (deploy/haproxy.cfg) on free ports."""
    folder.mkdir(parents=True, exist_ok=True)
    environment = {**server_env(), **(env or {})}
    members = [
        Replica(f"attp{n}", free_port(), list(args), environment, folder / f"attp{n}.log", folder)
        for n in range(1, replicas + 1)
    ]
    proxy_port = free_port()
    stats = folder / "haproxy.sock"
    config = folder / "haproxy.cfg"
    servers = [(r.name, f"127.0.0.1:{r.port}") for r in members]
    config.write_text(haproxy_config(HAPROXY_CFG.read_text(), f"127.0.0.1:{proxy_port}", servers, stats))
    haproxy: subprocess.Popen[bytes] | None = None
    try:
        for replica in members:
            replica.start()
        for replica in members:
            replica.wait_healthy()
        with (folder / "haproxy.log").open("ab") as log:
            haproxy = subprocess.Popen(
                [haproxy_binary(), "-db", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        cluster = Cluster(f"http://127.0.0.1:{proxy_port}", members, haproxy, stats)
        deadline = time.monotonic() + 30
        while not stats.exists():
            if haproxy.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"haproxy did not start: {(folder / 'haproxy.log').read_text()}")
            time.sleep(0.05)
        cluster.wait_status({r.name: "UP" for r in members})
        yield cluster
    finally:
        if haproxy is not None and haproxy.poll() is None:
            haproxy.terminate()
            haproxy.wait(timeout=10)
        for replica in members:
            replica.stop()


def nginx_config(template: str, listen: str, servers: list[str], folder: Path) -> str:
    """deploy/nginx.conf with this test's listening address, replicas, and its pid and temporary files in `folder`."""
    out: list[str] = []
    for line in template.splitlines():
        if (match := _NGINX_LISTEN.match(line)) is not None:
            out.append(f"{match.group(1)}listen {listen};")
        elif (match := _NGINX_SERVER.match(line)) is not None:
            if out and _NGINX_SERVER.match(out[-1]):
                continue
            out.extend(f"{match.group(1)}server {address}{match.group(2)}" for address in servers)
        else:
            out.append(line.replace("/tmp/attp-nginx", str(folder / "nginx")))
            if line.startswith("worker_processes"):
                out.append("user root;  # the test's temporary folders are root's")
    return "\n".join(out) + "\n"


@contextmanager
def running_nginx(folder: Path, replicas: list[Replica]) -> Iterator[str]:
    """Debian's nginx with deploy/nginx.conf in front of `replicas` on a free port; its base URL."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(binary).exists():
        raise RuntimeError("nginx was not found; install Debian's `nginx` package (.ci/run does)")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = folder / "nginx.conf"
    servers = [f"127.0.0.1:{r.port}" for r in replicas]
    config.write_text(nginx_config(NGINX_CONF.read_text(), f"127.0.0.1:{port}", servers, folder))
    with (folder / "nginx.log").open("ab") as log:
        process = subprocess.Popen(
            [binary, "-c", str(config), "-g", "daemon off;"], stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        with httpx.Client(timeout=1.0) as http:  # one client for every poll
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"nginx exited: {(folder / 'nginx.log').read_text()}")
                try:
                    if http.get(url + "/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"nginx did not answer: {(folder / 'nginx.log').read_text()}")
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
