"""The JSON-line messages between the server and a worker, each declared once here.

One JSON object per line, UTF-8, in both directions; nothing is ever pickled. The worker sends
`ReadyMessage` when it has locked itself down; then, for each program, the server sends `RunMessage`,
the worker answers each of its tool calls' `CallMessage` with the server's `ReplyMessage`, and ends with
`DoneMessage` (``attp doctor``'s workers take one `ProbeMessage` instead, and send `OutputMessage`s).
An error crossing the pipe, either way, is an `ErrorReport`: the fields of
`attp_server.errors.ErrorInfo`, listed once in `ERROR_FIELDS` (tests/test_protocol.py holds them equal).

The worker trusts what the server sends. The server does not trust what a worker sends (a program may
have taken it over): it reads those messages as plain JSON objects and checks each field it uses.

Imported by both sides; imports nothing from the rest of ``attp_server``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from attp_server.sandbox.stdlib.reprs import safe_str


class _ErrorCode(TypedDict):
    code: str
    message: str


class ErrorReport(_ErrorCode, total=False):
    """An error as it crosses the pipe: what the model reads as ``error`` (same fields as ``ErrorInfo``)."""

    line: int | None
    column: int | None
    source_line: str | None
    tool_name: str | None
    parameter_name: str | None
    received: str | None
    expected: str | None
    suggested_value: str | None
    solution: str | None


ERROR_FIELDS: tuple[str, ...] = tuple(ErrorReport.__annotations__)
"""Every field of an error report, in order."""

LOCATION_FIELDS = ("line", "column", "source_line")
"""Where in the program: the worker adds these; a tool's error never carries them."""

TOOL_ERROR_FIELDS: tuple[str, ...] = tuple(name for name in ERROR_FIELDS if name not in LOCATION_FIELDS)
"""The fields a tool's error brings across (a program reads them as ``e.code``, ``e.received``, ...)."""


class Limits(TypedDict):
    """The bounds of one run."""

    timeout_s: float
    max_output_bytes: int
    max_result_bytes: int
    max_tool_calls: int
    capture_print: bool
    max_state_bytes: int


class ReadyMessage(TypedDict):
    """worker -> server, once: started and locked down (`lockdown` says what each layer did)."""

    op: Literal["ready"]
    pid: int
    lockdown: dict[str, Any]


class _Run(TypedDict):
    op: Literal["run"]
    engine: str
    """One of `attp_server.sandbox.engines.ENGINES` (absent means ``python``)."""
    code: str
    tools: list[str]
    """Qualified tool names, ``pack.tool``."""
    namespaces: dict[str, list[str]]
    """Each pack's namespace -> the tool names it holds."""
    allow_imports: bool
    unavailable: dict[str, str]
    """Packs whose tools cannot be called now -> why."""
    limits: Limits


class RunMessage(_Run, total=False):
    """server -> worker: run this program with these tools, modules and limits."""

    modules: list[str]
    """The curated modules the program may use (absent: all of them)."""
    keep: bool
    """Report the state the program leaves in `DoneMessage.state`."""
    state: dict[str, Any]
    """A session's kept state, restored before the program runs."""
    warm_up: bool
    """The server's own warm-up program, run before the worker is handed to anybody (`WorkerPool._warmed`): it is
    not the one run an engine that serves one run per worker allows."""


class CallMessage(TypedDict):
    """worker -> server: call a tool (arguments already JSON data)."""

    op: Literal["call"]
    tool: str
    args: list[Any]
    kwargs: dict[str, Any]


class _Ok(TypedDict):
    ok: bool


class ToolReply(_Ok, total=False):
    """What the server's call handler answers: ``ok`` with a ``value``, or not ``ok`` with an ``error``."""

    value: Any
    error: ErrorReport


class _Reply(ToolReply):
    op: Literal["reply"]


class ReplyMessage(_Reply, total=False):
    """server -> worker: the answer to a `CallMessage`."""

    paused_s: float
    """Seconds the server waited for a person during the call: not counted against the run's deadline."""


class _Done(TypedDict):
    op: Literal["done"]
    status: Literal["ok", "error"]


class DoneMessage(_Done, total=False):
    """worker -> server: the run's report (the server also makes one up when the worker is killed or dies)."""

    result: Any
    hint: str | None
    error: ErrorReport | None
    stdout: str
    truncated: bool
    retire: bool
    """The worker exits after this run: the server must not hand it another."""
    state: dict[str, Any] | None
    """The state the program left, when the `RunMessage` asked to keep it (None: keep what was kept)."""
    check_s: float
    """Seconds from the run's arrival to the end of the static check (the trace's static-check span)."""
    pictures: list[dict[str, str]]
    """What the program showed (``cpython``): ``{"mime_type": "image/png", "data": base64}`` each."""


class ProbeMessage(TypedDict):
    """server -> worker, only to a worker started for ``attp doctor`` (its ``probe`` argument): run `code` as
    plain CPython, with `cpu_s` seconds of CPU, and end with a `DoneMessage` (its error's ``code`` is the
    exception's type). A serving worker leaves at this message without running it."""

    op: Literal["probe"]
    code: str
    cpu_s: float


class OutputMessage(TypedDict):
    """worker -> server, while a probe runs: what it printed, sent as it is written."""

    op: Literal["output"]
    text: str


Message = ReadyMessage | RunMessage | CallMessage | ReplyMessage | DoneMessage | ProbeMessage | OutputMessage

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Longest line a worker accepts from the server (a run's kept state, a tool's reply). What the server accepts from a
worker is bounded per kind of message, far below (the limits below; `attp_server.sandbox.process.inbound`)."""

MAX_RUNS_PER_WORKER = 1000
"""A worker serves at most this many runs, so slow leaks in C extensions cannot accumulate (the server counts)."""

MAX_READY_BYTES = 64 * 1024
"""Longest ``ready`` line: a pid and the lockdown's report."""

MAX_OUTPUT_BYTES = 512 * 1024
"""Longest ``output`` line (a probe's print, sent in pieces of at most `OUTPUT_PIECE` characters)."""

OUTPUT_PIECE = 64 * 1024

MAX_CALL_BYTES = 32 * 1024 * 1024
"""Longest ``call`` line: what one tool call's arguments may hold as JSON (a whole file of the files pack, whose
limit is 10 MiB, escaped)."""

MAX_CALL_VALUES = 2_000_000
"""Most JSON values one ``call`` line may hold, counted before it is decoded as its commas, ``[`` and ``{``
(`value_count`: an upper bound, since text may hold them too: a 10 MiB CSV or JSON text passes, at one per five
bytes). Each value costs the server about 70 bytes decoded, so a line of ``[{},{},...]`` costs at most 140 MB
however long it is, instead of 24 times its size."""

MAX_DEPTH = 256
"""Deepest nesting of a message from a worker (values are at most 100 deep, kept state's tags add some)."""

DONE_SLACK_BYTES = 1024 * 1024
"""What a ``done`` line may hold beyond its run's result, output and state: error texts, hint, fields."""


def done_bytes(limits: Limits, keep: bool, pictures: bool = False) -> int:
    """Longest ``done`` line a run with these `limits` can honestly send: its result, its output (escaped: a control
    character is six bytes of JSON), its kept state, its pictures (base64 of at most ``max_result_bytes`` of PNG, on
    an engine that shows them), and `DONE_SLACK_BYTES`."""
    state = 2 * limits["max_state_bytes"] if keep else 0
    shown = 2 * limits["max_result_bytes"] if pictures else 0
    return limits["max_result_bytes"] + 6 * limits["max_output_bytes"] + state + shown + DONE_SLACK_BYTES


def value_count(line: bytes) -> int:
    """An upper bound of the JSON values in `line`, without decoding it: every value but a container's first is
    after a comma, and every container starts with ``[`` or ``{`` (text holding them only raises the count)."""
    return line.count(b",") + line.count(b"[") + line.count(b"{") + 1


class ProtocolError(Exception):
    """A line that is not a JSON object with an ``op``."""


def encode(message: Mapping[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


MAX_TEXT = 4000
"""Longest error text either side reports; the rest is cut with a note."""


def text_of(value: object, limit: int = MAX_TEXT) -> str:
    """``str(value)`` that cannot fail and cannot be huge: valid UTF-8, at most `limit` characters, no address
    (``KeyError(json.loads)`` says ``<function json.loads>``)."""
    try:
        text = value if isinstance(value, str) else safe_str(value)
    except Exception:
        text = f"<{type(value).__name__} that cannot be shown as text>"
    if len(text) > limit:
        text = text[:limit] + f"... ({len(text) - limit:,} more characters)"
    return text.encode("utf-8", "replace").decode("utf-8")


def capped(error: Any) -> Any:
    """An error report with every text field cut to `MAX_TEXT` characters (anything else is left as it is)."""
    if not isinstance(error, dict):
        return error
    return {k: text_of(v) if isinstance(v, str) else v for k, v in error.items()}


def decode(line: bytes) -> dict[str, Any]:
    """One line as a JSON object with an ``op``; which message it is, and whether its fields hold, is for the
    reader to check (the server never takes a worker's word for it)."""
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from exc
    except RecursionError:
        raise ProtocolError("JSON nested too deeply") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("a message must be a JSON object with an 'op'")
    return message
