"""A test hook, never a feature: workers that run each program as plain CPython after their whole lockdown.

The worker's walls must hold by themselves, and the server must not believe what a worker sends it (SECURITY.md,
"What a worker sends"). The tests of both cannot lean on the evaluator, so they serve through *fallen* workers:
each locks itself down exactly as a serving worker does (the same fork server, limits, Landlock and seccomp), says
``ready``, and then, instead of evaluating a ``run`` message's program, ``exec``s it as plain CPython with the
protocol pipe in reach (`serve`). The program is then the worker: it may send any message, of any size, in any
order, patch the worker's loop for the next run (`fallen_run` is looked up again for each message), or hand the
job to the real evaluator (``evaluate(job)``).

How it is turned on, and by whom:

- **`attp serve` and `attp exec`**: only by the server process's own environment, read once at start
  (`requested`): ``TESTS_ONLY_ATTP_FALLEN_WORKERS`` set to exactly `CONSENT`. A program cannot set it (workers
  hold no way to the server's environment, and a worker's own environment is five fixed variables), nor can a
  client (no request, header, handle or setting names it; configuration files are never read for it, and a live
  reload never looks again). Anything else in the variable stops the server at start, as does any of: a
  `containment` other than ``required`` (no fallen program ever runs without every wall), or HTTP on an address
  other than loopback. When on, the start-up log says so at WARNING, and ``/healthz``
  shows ``sandbox.containment.fallen_workers: true``.
- **`attp doctor`**: builds its own pools with ``fallen=True`` in code, for the probes of what the server does
  with a hostile worker's messages; no serving pool is built so.

Runs in the worker (`serve`) and in the server (`requested`); imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from attp_server.sandbox.process.channel import Channel
from attp_server.sandbox.process.protocol import DoneMessage, Message, text_of

ENVIRONMENT = "TESTS_ONLY_ATTP_FALLEN_WORKERS"
"""The server process's environment variable that turns the hook on (tests only). Not ``ATTP_``: it is no setting."""

CONSENT = "every-program-runs-as-plain-cpython"
"""The only value `ENVIRONMENT` may hold: anything else stops the server."""

LOOPBACK = ("127.0.0.1", "::1", "localhost")

WARNING = (
    "TEST HOOK ON: %s is set, so every program runs as PLAIN CPYTHON inside the locked-down workers (no evaluator, "
    "no policy: only the worker's walls and the server's checks stand). This is for the project's tests; never "
    "serve anyone like this"
)


class FallenRefused(Exception):
    """The hook was asked for where it may not run: the server does not start."""


def requested(environ: Mapping[str, str], *, containment: str, transport: str, host: str) -> bool:
    """Whether the server process's environment turns the hook on; raises `FallenRefused` when it is set wrong or
    the server is not one it may run in (see the module's docstring)."""
    value = environ.get(ENVIRONMENT)
    if value is None:
        return False
    if value != CONSENT:
        raise FallenRefused(
            f"{ENVIRONMENT} is set, to something other than {CONSENT!r}: this test hook makes every program run as "
            "plain CPython; unset it (a real server never has it)"
        )
    if containment != "required":
        raise FallenRefused(f'{ENVIRONMENT} needs containment = "required": no fallen program runs without every wall')
    if transport == "http" and host not in LOOPBACK:
        raise FallenRefused(f"{ENVIRONMENT} serves only on loopback (127.0.0.1, ::1), not on {host!r}")
    return True


# ---------------------------------------------------------------- in the worker


class _Watched:
    """The channel a fallen program is given: the real pipes, noting whether the run's report was sent."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.reported = False

    def send(self, message: Message | Mapping[str, Any]) -> None:
        self.reported = self.reported or message.get("op") == "done"
        self.channel.send(message)  # type: ignore[arg-type]  # a fallen program sends what it likes

    def send_bytes(self, data: bytes) -> None:
        """Write raw bytes into the protocol pipe (a line of any size, or half of one)."""
        self.channel.writer.write(data)
        self.channel.writer.flush()

    def receive(self) -> dict[str, Any] | None:
        return self.channel.receive()


def fallen_run(channel: _Watched, message: dict[str, Any], evaluate: Callable[[Any], DoneMessage]) -> None:
    """Run one ``run`` message's code as plain CPython. Its globals: ``channel`` (``send``, ``send_bytes``,
    ``receive``), ``job`` (the message), ``evaluate`` (the real evaluator: ``evaluate(job)`` returns its report).
    Unless it sent a ``done`` itself, one is sent for it: ``__result__`` and ``retire: false`` (a fallen worker
    always asks to be used again)."""
    namespace: dict[str, Any] = {"__name__": "__fallen__", "channel": channel, "job": message, "evaluate": evaluate}
    done: DoneMessage = {"op": "done", "status": "ok", "result": None, "stdout": "", "truncated": False}
    try:
        exec(compile(str(message.get("code", "")), "fallen.py", "exec"), namespace)  # noqa: S102  (the test hook)
        done["result"] = namespace.get("__result__")
    except BaseException as exc:  # (SystemExit included: reported, not obeyed)
        done["status"] = "error"
        done["error"] = {"code": "RUNTIME_ERROR", "message": f"{type(exc).__name__}: {text_of(exc, 2000)}"}
    if not channel.reported:
        done["retire"] = False
        channel.channel.send_done(done)


def serve(channel: Channel, evaluate: Callable[[Any], DoneMessage], walls: Mapping[str, Any]) -> None:
    """A fallen worker's loop, after its lockdown and ``ready``: each ``run`` message to `fallen_run` (looked up
    again each time, so that a program can replace it), until the pipe closes or another message comes.
    `walls` is the lockdown's report: without every layer no program runs (the worker exits)."""
    if walls.get("missing"):
        return
    module = sys.modules[__name__]
    while True:
        message = channel.receive()
        if message is None or message.get("op") != "run":
            return
        watched = _Watched(channel)
        module.fallen_run(watched, message, evaluate)
