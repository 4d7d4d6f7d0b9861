"""What a program's tools and ``print`` are inside a worker, for every engine.

A tool is a call-only stub (`ToolStub`): calling it sends the call to the server through the `ToolBridge` and
waits for the reply; ``parallel`` (`Parallel`) sends one call for many items. A tool's error comes back as a
`ToolError` the program can catch. ``print`` (`Print`) writes into the run's capped `OutputBuffer`.

Runs in the worker; imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from attp_server.sandbox.limits import Abort, Forbidden, Pauses, ToolCallLimit
from attp_server.sandbox.policy import register_exception
from attp_server.sandbox.process import alarm
from attp_server.sandbox.process.channel import Channel
from attp_server.sandbox.process.jsonify import NotJSON, to_json
from attp_server.sandbox.process.protocol import (
    MAX_CALL_BYTES,
    MAX_CALL_VALUES,
    TOOL_ERROR_FIELDS,
    encode,
    value_count,
)
from attp_server.sandbox.stdlib.namespaces import Namespace
from attp_server.sandbox.stdlib.reprs import safe_str

META_TOOLS = ("help", "tools")
"""What every program may call besides the tools: the catalog's own lookups."""


class ToolError(Exception):
    """A tool call failed. Catch it with ``except ToolError as e`` and read ``e.code`` / ``e.message``.

    Every field of a tool's error report (`TOOL_ERROR_FIELDS`) is an attribute: ``e.received``, ``e.expected``,
    ``e.suggested_value``, ... (None when the tool did not say)."""

    from_server = False
    """True only for errors built from a server reply; a program may raise its own, which are not tool errors."""

    code: str
    message: str
    tool_name: str | None
    parameter_name: str | None
    received: str | None
    expected: str | None
    suggested_value: str | None
    solution: str | None

    def __init__(self, info: object = None) -> None:
        details: dict[str, Any] = dict(info) if isinstance(info, dict) else {"message": "" if info is None else info}
        super().__init__(details.get("message", ""))
        self.info = details
        for name in TOOL_ERROR_FIELDS:
            setattr(self, name, details.get(name))
        self.code = str(details.get("code", "TOOL_ERROR"))
        self.message = str(details.get("message", ""))

    @classmethod
    def from_reply(cls, info: dict[str, Any]) -> ToolError:
        error = cls(info)
        error.from_server = True
        return error


register_exception(ToolError, TOOL_ERROR_FIELDS)


class OutputBuffer:
    """Captured ``print`` output, cut at `limit` bytes and marked truncated rather than silently cut."""

    def __init__(self, limit: int, enabled: bool = True) -> None:
        self.limit = limit
        self.enabled = enabled
        self.parts: list[str] = []
        self.size = 0
        self.truncated = False

    def write(self, text: str) -> None:
        if not self.enabled or self.truncated:
            return
        data = text.encode("utf-8", "replace")
        room = self.limit - self.size
        if len(data) > room:
            self.parts.append(data[:room].decode("utf-8", "ignore"))
            self.size = self.limit
            self.truncated = True
            return
        self.parts.append(data.decode("utf-8"))  # re-decoded: lone surrogates become '?', never a broken report
        self.size += len(data)

    def text(self) -> str:
        return "".join(self.parts)


class Print:
    """What ``print`` is inside the sandbox: it writes into the run's capped `OutputBuffer`, which no attribute of
    it reaches (a closure holds the buffer)."""

    __slots__ = ("_write",)

    def __init__(self, output: OutputBuffer) -> None:
        def write(*values: Any, sep: str | None = " ", end: str | None = "\n", **options: Any) -> None:
            if options.get("file") is not None:
                raise Forbidden("print(file=...) is not available; print output is captured and returned as stdout")
            sep = " " if sep is None else sep
            end = "\n" if end is None else end
            if not isinstance(sep, str) or not isinstance(end, str):
                raise TypeError("print() sep and end must be strings")
            output.write(sep.join([safe_str(v) for v in values]) + end)

        self._write = write

    def __call__(self, /, *values: Any, **options: Any) -> None:
        self._write(*values, **options)

    def __repr__(self) -> str:
        return "<built-in function print>"


class ToolStub:
    """What a tool is inside the sandbox: a name that, when called, asks the server to run the tool."""

    __slots__ = ("_invoke", "name")

    def __init__(self, name: str, invoke: Callable[[str, tuple[Any, ...], dict[str, Any]], Any]) -> None:
        self.name = name
        self._invoke = invoke

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        return self._invoke(self.name, args, kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name}>"


class ServerGone(Abort):
    """The server closed the pipe mid-run; the worker exits."""


class ToolBridge:
    """Sends tool calls to the server, counts them, and turns replies into values or `ToolError`s."""

    def __init__(self, channel: Channel, max_calls: int) -> None:
        self.channel = channel
        self.max_calls = max_calls
        self.count = 0
        self.pauses = Pauses()

    def __call__(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.count += 1  # help() and tools() count too: every call crosses to the server
        if self.count > self.max_calls:
            raise ToolCallLimit(f"the program made more than {self.max_calls} tool calls; batch work into fewer calls")
        try:
            payload_args = [to_json(a, f"{name}() argument {i + 1}") for i, a in enumerate(args)]
            payload_kwargs = {k: to_json(v, f"{name}() argument {k!r}") for k, v in kwargs.items()}
        except NotJSON as exc:
            raise ToolError.from_reply(
                {"code": "INVALID_ARGUMENT", "message": f"{exc}. Tools take JSON data.", "tool_name": name}
            ) from None
        try:
            frame = encode({"op": "call", "tool": name, "args": payload_args, "kwargs": payload_kwargs})
        except (UnicodeError, ValueError, RecursionError):
            raise ToolError.from_reply(
                {
                    "code": "INVALID_ARGUMENT",
                    "message": f"{name}() got text that is not valid Unicode (a lone surrogate?)",
                    "tool_name": name,
                }
            ) from None
        if len(frame) > MAX_CALL_BYTES or (values := value_count(frame)) > MAX_CALL_VALUES:
            what = (
                f"{len(frame):,} bytes of JSON; a tool call carries at most {MAX_CALL_BYTES:,}"
                if len(frame) > MAX_CALL_BYTES
                else f"up to {values:,} values (counting commas and brackets); a tool call carries at most "
                f"{MAX_CALL_VALUES:,}"
            )
            raise ToolError.from_reply(
                {
                    "code": "INVALID_ARGUMENT",
                    "message": f"the arguments of {name}() are {what}",
                    "tool_name": name,
                    "solution": "Send the data in several smaller calls, or fewer, larger values (text rather than "
                    "a list of millions of items).",
                }
            )
        alarm.hold()  # the deadline waits for the reply: the pipe is never left mid-message
        try:
            self.channel.writer.write(frame)
            self.channel.writer.flush()
            reply = self.channel.receive()
            paused = reply.get("paused_s") if reply is not None else None
            if isinstance(paused, int | float) and 0 < paused < float("inf"):
                self.pauses.paused(float(paused))  # the server waited for a person: that time is not the program's
        finally:
            alarm.release()  # after any pause moved the deadline: only a deadline still passed ends the run
        if reply is None:
            raise ServerGone("the server closed the connection")
        if reply.get("ok"):
            return reply.get("value")
        error = reply.get("error") or {}
        if error.get("code") == "TOOL_CALL_LIMIT":
            raise ToolCallLimit(str(error.get("message", "tool call limit reached")))
        raise ToolError.from_reply(error)


class Parallel:
    """``parallel(tool, items, return_errors=False)``: one tool over many keyword-argument dicts, run at once
    by the server. Results come back in the order of `items`; every item counts as one tool call."""

    __slots__ = ("_bridge",)

    def __init__(self, bridge: ToolBridge) -> None:
        self._bridge = bridge

    def __repr__(self) -> str:
        return "<built-in function parallel>"

    def __call__(self, tool: Any, items: Any, return_errors: bool = False) -> list[Any]:
        name = tool.name if isinstance(tool, ToolStub) else tool if isinstance(tool, str) else None
        if name is None or name in (*META_TOOLS, "parallel"):
            raise _usage(f"parallel() runs a tool such as read_file or pack.tool, not {_kind(tool)}", "tool")
        if not isinstance(items, list | tuple):
            raise _usage(f"parallel() takes a list of keyword-argument dicts as items, not {_kind(items)}", "items")
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise _usage(f"parallel() items[{index}] is {_kind(item)}; each item is a dict of keyword arguments, "
                             f'e.g. {{"path": "a.txt"}}', "items")  # fmt: skip
        if not items:
            return []
        bridge = self._bridge
        bridge.count += len(items) - 1  # the bridge counts the one crossing below as the last of them
        replies = bridge("parallel", (name, list(items)), {})
        results: list[Any] = []
        first: ToolError | None = None
        for reply in replies if isinstance(replies, list) else []:
            if isinstance(reply, dict) and reply.get("ok"):
                results.append(reply.get("value"))
                continue
            error = ToolError.from_reply(dict(reply.get("error") or {}) if isinstance(reply, dict) else {})
            if error.code == "TOOL_CALL_LIMIT":
                raise ToolCallLimit(error.message)
            first = first or error
            results.append(error)
        if first is not None and not return_errors:
            raise first
        return results


def _usage(message: str, parameter: str) -> ToolError:
    return ToolError.from_reply(
        {
            "code": "INVALID_ARGUMENT",
            "message": message,
            "tool_name": "parallel",
            "parameter_name": parameter,
            "solution": 'Call it as parallel(read_file, [{"path": "a.txt"}, {"path": "b.txt"}]).',
        }
    )


def _kind(value: object) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


def tool_symbols(job: Mapping[str, Any], bridge: ToolBridge, reserved: Collection[str] = ()) -> dict[str, Any]:
    """The names a program calls tools by: each tool's bare name (never one in `reserved`: a tool never takes a
    builtin's, an exception class's or a module's name, even if a job says otherwise), ``help`` and ``tools``, each
    pack's namespace (``pack.tool``, always the qualified name: a bare name may belong to another pack's tool), and
    ``parallel``."""
    symbols: dict[str, Any] = {
        name: ToolStub(name, bridge) for name in [*job.get("tools", []), *META_TOOLS] if name not in reserved
    }
    for pack, names in job.get("namespaces", {}).items():
        symbols[pack] = Namespace(pack, {name: ToolStub(f"{pack}.{name}", bridge) for name in names})
    symbols["parallel"] = Parallel(bridge)
    return symbols
