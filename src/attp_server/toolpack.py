"""Toolpacks: named sets of tool functions, their loading, and argument validation.

A tool is a plain typed Python callable (sync or async) whose signature and Google-style
docstring are what the model reads. Tools run in the server process; the sandbox only holds
call-only stubs that send ``{tool, args, kwargs}`` back here.

Declare a pack::

    from attp_server import Toolpack

    def shout(text: str) -> str:
        \"\"\"Upper-case a text.

        Args:
            text: The text to shout.

        Returns:
            The text in capitals.
        \"\"\"
        return text.upper()

    toolpack = Toolpack(name="loud", description="Make text louder.", tools=[shout])

A pack whose tools need configuration (a root directory, a client) passes ``build`` instead of
(or beside) ``tools``: a function of the `ToolpackContext` that returns the callables.

A pack whose tools are discovered while serving (an upstream MCP server) passes ``live``: a
`LiveTools` that the runtime starts at startup (all such packs at once), asks for the current tools,
and stops at shutdown. Its tools may change while serving; the registry is refreshed when they do.
A tool can read its call's deadline (and forward progress) through `current_call()`.
"""

from __future__ import annotations

import collections.abc
import contextvars
import copy
import dataclasses
import functools
import importlib
import importlib.metadata
import inspect
import keyword
import logging
import time
import types
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from anyio.abc import TaskStatus
from pydantic import BaseModel, TypeAdapter, ValidationError

from attp_server.errors import AttpError, ErrorCode, ErrorInfo, short_repr, suggest
from attp_server.sandbox.engines.starlark.engine import PRELUDE_NAMES, STARLARK_BUILTINS
from attp_server.sandbox.static_check import KnownNames, known_names, module_members
from attp_server.sandbox.stdlib.namespaces import MODULE_NAMES, SAFE_BUILTIN_FUNCTIONS, SAFE_EXCEPTIONS

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "attp.toolpacks"

RESERVED_NAMES = frozenset(
    {
        *MODULE_NAMES,
        *SAFE_BUILTIN_FUNCTIONS,
        *SAFE_EXCEPTIONS,
        *STARLARK_BUILTINS,
        *PRELUDE_NAMES,
        "help",
        "tools",
        "parallel",
        "print",
        "ToolError",
    }
)
"""Names the sandbox itself defines (every curated module, enabled or not, every builtin function and exception
class of either engine); no pack may take them, and an upstream tool named so is reachable only as ``pack.tool``
(an upstream ``len`` must not answer ``len(xs)``, nor a ``ValueError`` tool break ``except ValueError``)."""

ToolFunction = Callable[..., Any]


class ToolError(Exception):
    """Raised by a tool for an error the model can fix.

    The code is passed through to the model as ``error.code`` (UPPER_SNAKE, e.g. ``FILE_NOT_FOUND``);
    every other field lands in the result's ``error`` object.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        parameter_name: str | None = None,
        received: str | None = None,
        expected: str | None = None,
        suggested_value: str | None = None,
        solution: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.parameter_name = parameter_name
        self.received = received
        self.expected = expected
        self.suggested_value = suggested_value
        self.solution = solution

    def info(self, tool_name: str) -> ErrorInfo:
        """This error as the model reads it, raised by the tool `tool_name`."""
        return ErrorInfo(
            code=self.code,
            message=self.message,
            tool_name=tool_name,
            parameter_name=self.parameter_name,
            received=self.received,
            expected=self.expected,
            suggested_value=self.suggested_value,
            solution=self.solution,
        )


@dataclass(frozen=True)
class ToolpackContext:
    """What a pack's ``build`` function receives: the server's workspace and the pack's own options."""

    workspace: Path
    options: BaseModel | None = None
    skills_dirs: tuple[Path, ...] = ()
    """The skills library directories (the `skills_dirs` setting), for packs that serve skills."""
    db_path: Path | None = None
    """The `db_path` setting (absolute), for packs that keep state in a database (memory)."""
    database_url: str | None = None
    """The `database_url` setting when it names a PostgreSQL server shared by replicas, else None: such a pack
    keeps its state there, apart for each `scope`, instead of in `db_path`."""
    scope: str = "shared"
    """Whose state this build works on: "shared", or the isolation scope's name (a tenant's, a session's)."""


@dataclass(frozen=True)
class ToolMarks:
    """What one tool does to the world, as MCP's tool annotations say it.

    The catalog shows the marks, the ``attp_execute`` annotations are derived from them, and
    approvals (``approval = "destructive"``) ask the user before a call to a destructive tool.
    """

    read_only: bool = False
    """Changes nothing (MCP ``readOnlyHint``)."""
    destructive: bool = False
    """Changes or removes what exists: a file written, memory edited, a command run (MCP ``destructiveHint``)."""
    idempotent: bool = False
    """Calling it again with the same arguments has no further effect (MCP ``idempotentHint``)."""
    open_world: bool = False
    """Reaches beyond the workspace: processes, the network, other systems (MCP ``openWorldHint``)."""


READ_ONLY = ToolMarks(read_only=True, idempotent=True)
"""The marks of a tool that only reads."""


MAX_NOTICES = 5
MAX_NOTICE_CHARS = 300


@dataclass(frozen=True)
class ToolCall:
    """What a running tool may know about its call: the run's deadline, and where progress goes."""

    deadline: float | None = None
    """`time.monotonic()` value by which the run that made this call ends; None when unbounded."""
    progress: Callable[[float | None, str], Awaitable[None]] | None = None
    """Report progress from inside a long call: a fraction done (0..1, or None when unknown) and a message."""
    notices: dict[str, str] | None = None
    """The run's notices by key (see `notice`); None outside a run."""
    workspace: Path | None = None
    """The calling session's workspace folder (its own under ``isolation = "session"`` / ``"tenant"``): where a
    shared tool (an upstream MCP server's) writes what it saves for this caller; None outside a run."""
    principal: str | None = None
    """Who the call is for: the signed-in principal or the token's holder; None for an anonymous caller. An upstream
    server with ``identity = "per_user"`` uses this principal's own account."""
    credential: str | None = field(default=None, repr=False)
    """The signed-in caller's access token, for an upstream with ``identity = "token_exchange"``; None otherwise."""
    open_url: Callable[[str, str], Awaitable[bool]] | None = None
    """Ask the person to open a link (message, URL), by URL-mode elicitation: True once they agreed to open it;
    None when the client cannot be asked (the link then goes into the error text)."""

    def notice(self, text: str, *, key: str | None = None) -> None:
        """Tell the model something it must not miss about this call, in the result's ``hint``.

        For what a program could silently get wrong, e.g. a read that returned only part of a file.
        A run keeps its first `MAX_NOTICES` notices, each cut to `MAX_NOTICE_CHARS`. A notice with the
        `key` of an earlier one replaces it (a paging loop's last word stands, said once).
        """
        if self.notices is None:
            return
        key = text if key is None else key
        if key in self.notices or len(self.notices) < MAX_NOTICES:
            self.notices[key] = text[:MAX_NOTICE_CHARS]

    def noticed(self, key: str) -> str | None:
        """The notice given under `key` in this run so far, if any."""
        return None if self.notices is None else self.notices.get(key)

    def withdraw(self, key: str) -> None:
        """Take back the notice given under `key` (what it warned of did not happen after all)."""
        if self.notices is not None:
            self.notices.pop(key, None)

    def remaining(self) -> float | None:
        """Seconds left before the run's deadline (never negative), or None when the call is unbounded."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())


_UNBOUNDED = ToolCall()
_CURRENT_CALL: contextvars.ContextVar[ToolCall] = contextvars.ContextVar("attp_tool_call", default=_UNBOUNDED)


def current_call() -> ToolCall:
    """The `ToolCall` of the tool call being served (an unbounded one outside a run)."""
    return _CURRENT_CALL.get()


def set_current_call(call: ToolCall) -> contextvars.Token[ToolCall]:
    """Make `call` current for this task (and the threads it starts); reset it with the returned token."""
    return _CURRENT_CALL.set(call)


def reset_current_call(token: contextvars.Token[ToolCall]) -> None:
    _CURRENT_CALL.reset(token)


class LiveTools(Protocol):
    """The tools of a pack that come from outside and live while the server runs (an upstream MCP server).

    The runtime starts ``serve`` in a task of its own at startup, and cancels it at shutdown (which
    must leave no child process behind). ``serve`` calls ``task_status.started()`` once the first
    connection attempt has ended, whether it worked or not, within its own startup timeout; afterwards
    it calls ``changed()`` whenever the tools or the availability change.
    """

    @property
    def problem(self) -> str | None:
        """Why the tools cannot be called right now (naming the cause and the fix), or None."""
        ...

    @property
    def told(self) -> str | None:
        """`problem` as a program calling its tools is told it (without the host's details), or None."""
        ...

    def tools(self) -> Sequence[Tool]:
        """The current tools (built with `make_tool`), named as the sandbox calls them within the pack."""
        ...

    def health(self) -> dict[str, Any]:
        """A small JSON report for ``/healthz`` (never a secret)."""
        ...

    async def serve(self, changed: Callable[[], Awaitable[None]], *, task_status: TaskStatus[None]) -> None: ...

    def wake(self) -> None:
        """A program asked for these tools while they are unavailable (and was refused before it ran): try to
        connect again now, if the backoff allows, so that the next call finds them."""
        ...

    def hides(self, name: str) -> bool:
        """Whether `name` (as the server lists it, or as the sandbox would call it) is a tool the pack's filters
        keep from programs: a call to it is refused like any unknown name, and the audit log records the refusal."""
        ...

    def secrets(self) -> list[str]:
        """Every credential the pack holds now (expanded env and headers values, OAuth tokens), longest first: the
        pack blanks them out of everything it says, and the audit log out of the arguments it writes."""
        ...


@dataclass(frozen=True)
class Toolpack:
    """A named set of tools. Each pack is also a namespace in the sandbox (``files.read_file``)."""

    name: str
    description: str
    tools: Sequence[ToolFunction] = ()
    build: Callable[[ToolpackContext], Iterable[ToolFunction]] | None = None
    options: type[BaseModel] | None = None
    aliases: Mapping[str, str] = field(default_factory=dict)
    """Extra names that resolve to a tool of this pack, e.g. ``{"file_reader": "read_file"}``."""
    read_only: bool = False
    """True when no tool of the pack changes anything (feeds the MCP ``readOnlyHint``)."""
    open_world: bool = False
    """True when tools reach beyond the workspace (network, processes; feeds ``openWorldHint``)."""
    marks: Mapping[str, ToolMarks] = field(default_factory=dict)
    """Per-tool marks by tool name. A tool without an entry gets `default_marks`: read-only in a
    read-only pack, else destructive (the safe assumption when a pack does not say)."""
    inline: Sequence[str] = ()
    """Synchronous tools, by name, that return within microseconds whatever their arguments: no I/O, no
    waiting, no work that grows past their arguments' size. The server calls them on its event loop,
    saving the hop to a tool thread and back (about 30 µs each); one that takes longer than 2 ms is moved
    to the threads for good, with a warning in the log."""
    live: LiveTools | None = None
    """Tools discovered while serving (an upstream MCP server). Their names yield: a tool gets its bare
    name only when no other enabled pack has a tool (or alias) of that name; it is always ``pack.tool``."""
    origin: str | None = None
    """The name the user gave it where that is not `name` (an upstream server named ``memory`` is the pack
    ``memory_mcp``): errors that use the old name point to the new one."""
    unlisted: Mapping[str, str] = field(default_factory=dict)
    """Tools that no description lists (the tool description, ``help()``, ``tools()``, the resources) and no
    program finds as a name, each with the listed tool of the pack whose access it follows (under access rules it
    is reachable exactly when that one is): an engine's own machinery calls them by ``pack.tool`` (the ``cpython``
    engine's ``open()`` reads workspace files with ``files.read_bytes``, which follows ``read_file``). Checked,
    approved, audited and counted like any other tool."""
    forget: Callable[[ToolpackContext], None] | None = None
    """Remove what the pack keeps for the context's scope outside its folders (rows in the shared
    database): a session's scope ended (``isolation = "session"``). What is in the scope's folders goes
    with them."""

    def default_marks(self) -> ToolMarks:
        if self.read_only:
            return READ_ONLY
        return ToolMarks(destructive=True, open_world=self.open_world)


@dataclass(frozen=True)
class ToolpackFactory:
    """Makes toolpacks from the server's configuration at startup, registered in the same entry-point
    group as packs: the ``mcp`` gateway makes one `Toolpack` per configured upstream MCP server."""

    make: Callable[[Any, frozenset[str]], Sequence[Toolpack]]
    """Called with the `Settings` and the names already taken by enabled packs; returns the packs."""
    update: Callable[[Any, Sequence[Toolpack], frozenset[str]], Sequence[Toolpack]] | None = None
    """The configuration was edited while serving: called with the new `Settings`, the packs this factory
    made that are serving now, and the names other packs take; returns the packs to serve from now on,
    the very same objects for what did not change (so only the others are started and stopped)."""


@dataclass(frozen=True)
class Tool:
    """One enabled tool: its callable, where it came from, and how to validate calls to it."""

    name: str
    pack: str
    function: ToolFunction
    signature: inspect.Signature
    is_async: bool
    adapters: Mapping[str, TypeAdapter[Any]]
    marks: ToolMarks = field(default_factory=ToolMarks)
    inline: bool = False
    """Called on the server's event loop instead of a tool thread (`Toolpack.inline`)."""
    qualified: bool = False
    """True when the tool is reachable only as ``pack.name`` (its bare name is another pack's, or reserved)."""
    check: Callable[[str, Mapping[str, Any]], ErrorInfo | None] | None = None
    """Validates a call's arguments as a whole (given the tool's `ref` and the arguments the call named),
    instead of per-parameter `adapters`: a tool described by a JSON Schema is checked against that schema."""

    @property
    def ref(self) -> str:
        """How programs (and the catalog) name this tool: ``name``, or ``pack.name`` when `qualified`."""
        return f"{self.pack}.{self.name}" if self.qualified else self.name

    @property
    def summary(self) -> str:
        """The first line of the docstring: what the compact catalog shows."""
        doc = inspect.getdoc(self.function) or ""
        return doc.strip().splitlines()[0] if doc.strip() else ""

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.function) or ""

    def signature_text(self) -> str:
        """``read_file(path: str, max_lines: int = 1000) -> str``, annotations as written."""
        return f"{self.ref}{format_signature(self.signature)}"

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any] | ErrorInfo:
        """Check a call against the signature; return validated keyword arguments or an error."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            return self._arity_error(args, kwargs, str(exc))
        if self.check is not None:  # only what the call named is checked and passed on; the tool applies defaults
            named = dict(bound.arguments)
            return self.check(self.ref, named) or named
        bound.apply_defaults()
        validated: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            adapter = self.adapters.get(name)
            if adapter is None:
                validated[name] = value
                continue
            try:
                validated[name] = adapter.validate_python(value)
            except ValidationError as exc:
                parameter = self.signature.parameters[name]
                return ErrorInfo(
                    code=ErrorCode.INVALID_ARGUMENT,
                    message=f"{self.ref}(): argument {name!r} is invalid: {_first_error(exc)}",
                    tool_name=self.ref,
                    parameter_name=name,
                    received=short_repr(value),
                    expected=annotation_text(parameter.annotation),
                    solution=f"Call it as {self.signature_text()}.",
                )
        return validated

    def _arity_error(self, args: Sequence[Any], kwargs: Mapping[str, Any], reason: str) -> ErrorInfo:
        params = list(self.signature.parameters)
        unknown = [k for k in kwargs if k not in self.signature.parameters]
        suggested = suggest(unknown[0], params) if unknown else None
        missing = [
            p.name
            for i, p in enumerate(self.signature.parameters.values())
            if p.default is inspect.Parameter.empty and p.name not in kwargs and i >= len(args)
        ]
        return ErrorInfo(
            code=ErrorCode.INVALID_ARGUMENT,
            message=f"{self.ref}(): {reason}.",
            tool_name=self.ref,
            parameter_name=unknown[0] if unknown else (missing[0] if missing else None),
            received=f"{len(args)} positional, keywords {sorted(kwargs)}",
            expected=self.signature_text(),
            suggested_value=suggested,
            solution=f"Call it as {self.signature_text()}.",
        )


class ToolpackLoadError(AttpError):
    """A toolpack could not be found, imported, or registered."""


def make_folder(pack: str, folder: Path, setting: str = "workspace") -> None:
    """Create a pack's folder (and its parents) if missing.

    Raises:
        ToolpackLoadError: naming the pack, the folder, the setting and why, in words (never ``[Errno 17] ...``).
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise ToolpackLoadError(
            f"toolpack {pack!r}: {setting} {folder} cannot be a folder: {exc.filename or folder} is a file"
        ) from None
    except OSError as exc:
        raise ToolpackLoadError(
            f"toolpack {pack!r}: {setting} {folder} cannot be created: {exc.strerror or exc} ({exc.filename or folder})"
        ) from None


def format_signature(sig: inspect.Signature) -> str:
    """``(path: str, max_lines: int = 1000) -> str``: a signature as the model reads it (`annotation_text`)."""
    parts = []
    for p in sig.parameters.values():
        text = p.name
        if p.annotation is not inspect.Parameter.empty:
            text += f": {annotation_text(p.annotation)}"
        if p.default is not inspect.Parameter.empty:
            text += f" = {p.default!r}" if p.annotation is not inspect.Parameter.empty else f"={p.default!r}"
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            text = "*" + text
        elif p.kind is inspect.Parameter.VAR_KEYWORD:
            text = "**" + text
        parts.append(text)
    out = f"({', '.join(parts)})"
    if sig.return_annotation is not inspect.Signature.empty:
        out += f" -> {annotation_text(sig.return_annotation)}"
    return out


MAX_SHAPE_DEPTH = 4
"""Nested shapes spelled out in a signature; deeper ones read ``dict``."""


def annotation_text(annotation: Any, depth: int = MAX_SHAPE_DEPTH, *, compact: bool = False) -> str:
    """A type as the model reads it: ``list[str]``, ``int | None``, ``Literal['a', 'b']``, and a TypedDict as
    its shape, ``{name: str, note?: str}`` (``?`` marks a key that may be left out; shapes nested deeper than
    `depth` read ``dict``). A forward reference (a schema that contains itself) reads as its name.

    `compact`, for the tool description's one line per tool, spells a container by what a program gets: ``dict``
    for any mapping, ``list[...]`` for any sequence or iterable (``set[...]`` for a set), ``list`` for a tuple (tuples
    arrive as lists), ``any`` for ``Any`` and for a type whose spelling passes 40 characters. The full spelling is
    ``help()``'s, the signatures' and ATDF's.
    """
    if annotation is inspect.Parameter.empty:
        return "any"
    if annotation is Any:
        return "any" if compact else "Any"
    if annotation is None or annotation is type(None):
        return "None"
    if isinstance(annotation, typing.ForwardRef):
        return annotation.__forward_arg__
    if typing.is_typeddict(annotation):
        if depth <= 0:
            return "dict"
        fields = [
            f"{_key_text(key)}{'' if required else '?'}: {annotation_text(value, depth - 1, compact=compact)}"
            for key, value, required in shape_fields(annotation)
        ]
        return "{" + ", ".join(fields) + "}"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return annotation_text(args[0], depth, compact=compact)
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(dict.fromkeys(annotation_text(arg, depth, compact=compact) for arg in args))
    if origin is typing.Literal:
        return "Literal[" + ", ".join(repr(arg) for arg in args) + "]"
    if compact and origin in (dict, collections.abc.Mapping):
        return "dict"
    if compact and origin in _SEQUENCES and len(args) == 1:
        name = origin.__name__ if origin in (set, frozenset) else "list"
        return f"{name}[{annotation_text(args[0], depth, compact=True)}]"
    if compact and origin is tuple:
        return "list"
    if origin is not None and args:
        name = getattr(origin, "__name__", None) or str(origin).replace("typing.", "")
        return f"{name}[{', '.join(annotation_text(arg, depth, compact=compact) for arg in args)}]"
    if isinstance(annotation, type):
        return annotation.__name__
    text = annotation if isinstance(annotation, str) else str(annotation).replace("typing.", "")
    return "any" if compact and len(text) > 40 else text


_SEQUENCES = (list, set, frozenset, collections.abc.Sequence, collections.abc.Iterable)


def shape_fields(shape: Any) -> list[tuple[str, Any, bool]]:
    """A TypedDict's keys in order, each with its type and whether it is required."""
    required: frozenset[str] = getattr(shape, "__required_keys__", frozenset())
    hints: dict[str, Any] = getattr(shape, "__annotations__", {})
    out = []
    for key, hint in hints.items():
        wrapped = typing.get_origin(hint) in (typing.NotRequired, typing.Required)
        out.append((key, typing.get_args(hint)[0] if wrapped else hint, key in required))
    return out


def _key_text(key: str) -> str:
    return key if key.isidentifier() else repr(key)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return str(err.get("msg", "invalid value"))


def make_tool(
    function: ToolFunction,
    pack: str,
    name: str | None = None,
    marks: ToolMarks | None = None,
    check: Callable[[str, Mapping[str, Any]], ErrorInfo | None] | None = None,
    *,
    inline: bool = False,
) -> Tool:
    """Inspect a callable once: signature (with string annotations resolved) and validators.

    With `check`, that function validates the arguments instead of pydantic adapters of the annotations.
    """
    tool_name = str(name or getattr(function, "__name__", ""))
    if not tool_name.isidentifier() or keyword.iskeyword(tool_name) or tool_name.startswith("_"):
        raise ToolpackLoadError(
            f"toolpack {pack!r}: tool name {tool_name!r} is not usable; tool names must be public Python identifiers"
        )
    signature = inspect.signature(function, eval_str=True)
    adapters: dict[str, TypeAdapter[Any]] = {}
    for param in signature.parameters.values():
        if check is not None or param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if param.annotation is not inspect.Parameter.empty:
            adapters[param.name] = TypeAdapter(param.annotation)
    return Tool(
        name=tool_name,
        pack=pack,
        function=function,
        signature=signature,
        is_async=inspect.iscoroutinefunction(function),
        adapters=adapters,
        marks=marks or ToolMarks(),
        check=check,
        inline=inline,
    )


class ToolRegistry:
    """The enabled tools, by the name programs call them, with their packs.

    Built once at startup. Packs with `Toolpack.live` tools are re-read by `refresh` when their tools
    change; every other pack's tools are fixed. Keys of `tools` are each tool's `Tool.ref`.
    """

    def __init__(
        self,
        packs: Sequence[Toolpack],
        workspace: Path,
        options: Mapping[str, Mapping[str, Any]],
        skills_dirs: Sequence[Path] = (),
        db_path: Path | None = None,
        *,
        database_url: str | None = None,
        scope: str = "shared",
        reuse: Mapping[str, list[ToolFunction]] | None = None,
    ) -> None:
        self.packs: dict[str, Toolpack] = {}
        self.tools: dict[str, Tool] = {}
        self.unlisted: dict[str, Tool] = {}
        """The packs' `Toolpack.unlisted` tools, by ``pack.tool``: `resolve` finds them, nothing lists them."""
        self._follows: dict[str, str] = {}
        """An unlisted tool's ``pack.tool`` -> the name of the listed tool whose access it follows."""
        self.aliases: dict[str, str] = {}
        self.skills_dirs = tuple(skills_dirs)
        self.db_path = db_path
        self.database_url = database_url
        self.scope = scope
        self.workspace = workspace
        """The folder this registry's packs were built for (a session's own under isolation)."""
        self.options = options
        self._withheld: dict[str, str] = {}
        self._built: dict[str, list[ToolFunction]] = {}
        self._fixed: dict[str, list[Tool]] = {}
        self._fixed_owner: dict[str, str] = {}
        """Tool name -> the fixed pack that defines it (the clash check, without a scan of every pack per tool)."""
        for pack in packs:
            self._add_pack(pack, workspace, options.get(pack.name, {}), reuse.get(pack.name) if reuse else None)
        self.refresh()

    def held_secrets(self) -> list[str]:
        """The credentials every live pack holds now (`LiveTools.secrets`)."""
        return [secret for pack in self.packs.values() if pack.live is not None for secret in pack.live.secrets()]

    def rebuilt(self, workspace: Path, db_path: Path, scope: str = "shared") -> ToolRegistry:
        """The same packs, those that may keep things (built, not read-only) bound to another folder and database.

        Isolation (``isolation = "session"`` / ``"tenant"``) gives each scope its own registry this way;
        read-only packs and packs of fixed tools are shared as they are.
        """
        reuse = {name: self._built[name] for name, pack in self.packs.items() if name in self._built and pack.read_only}
        return ToolRegistry(
            list(self.packs.values()),
            workspace,
            self.options,
            self.skills_dirs,
            db_path=db_path,
            database_url=self.database_url,
            scope=scope,
            reuse=reuse,
        )

    def forget_scope(self, workspace: Path, db_path: Path, scope: str) -> None:
        """A scope ended for good: each pack with a `Toolpack.forget` removes what it kept for it (in a thread)."""
        for pack in self.packs.values():
            if pack.forget is None:
                continue
            options = pack.options.model_validate(dict(self.options.get(pack.name, {}))) if pack.options else None
            context = ToolpackContext(
                workspace=workspace,
                options=options,
                skills_dirs=self.skills_dirs,
                db_path=db_path,
                database_url=self.database_url,
                scope=scope,
            )
            pack.forget(context)

    def _add_pack(
        self,
        pack: Toolpack,
        workspace: Path,
        raw_options: Mapping[str, Any],
        built: list[ToolFunction] | None = None,
    ) -> None:
        if not pack.name.isidentifier() or pack.name.startswith("_"):
            raise ToolpackLoadError(f"toolpack name {pack.name!r} must be a public Python identifier")
        if pack.name in self.packs:
            raise ToolpackLoadError(f"toolpack {pack.name!r} is enabled twice")
        if pack.name in RESERVED_NAMES:
            raise ToolpackLoadError(f"toolpack name {pack.name!r} is reserved for a sandbox built-in")
        self.packs[pack.name] = pack
        if pack.live is not None:
            return
        options: BaseModel | None = None
        if pack.options is not None:
            try:
                options = pack.options.model_validate(dict(raw_options))
            except ValidationError as exc:
                raise ToolpackLoadError(f"toolpack {pack.name!r}: bad options: {exc}") from exc
        functions = list(pack.tools)
        if pack.build is not None:
            context = ToolpackContext(
                workspace=workspace,
                options=options,
                skills_dirs=self.skills_dirs,
                db_path=self.db_path,
                database_url=self.database_url,
                scope=self.scope,
            )
            self._built[pack.name] = built if built is not None else list(pack.build(context))
            functions.extend(self._built[pack.name])
        names = {str(getattr(f, "__name__", "")) for f in functions}
        unknown = set(pack.marks) - names
        if unknown:
            raise ToolpackLoadError(f"toolpack {pack.name!r}: marks name unknown tools {sorted(unknown)}")
        if unknown := set(pack.inline) - names:
            raise ToolpackLoadError(f"toolpack {pack.name!r}: inline names unknown tools {sorted(unknown)}")
        if unknown := ({*pack.unlisted, *pack.unlisted.values()} - names) | (
            set(pack.unlisted.values()) & set(pack.unlisted)
        ):
            raise ToolpackLoadError(
                f"toolpack {pack.name!r}: unlisted names unknown or unlisted tools {sorted(unknown)}"
            )
        tools = []
        for function in functions:
            name = str(getattr(function, "__name__", ""))
            marks = pack.marks.get(name, pack.default_marks())
            tool = make_tool(function, pack.name, marks=marks, inline=name in pack.inline)
            if tool.inline and tool.is_async:
                raise ToolpackLoadError(
                    f"toolpack {pack.name!r}: {name!r} is async (on the event loop already): not inline"
                )
            if name in pack.unlisted:
                self.unlisted[f"{pack.name}.{name}"] = dataclasses.replace(tool, qualified=True)
                self._follows[f"{pack.name}.{name}"] = pack.unlisted[name]
            else:
                tools.append(tool)
        self._fixed[pack.name] = tools
        for tool in tools:
            if tool.name in self.packs or tool.name == pack.name or tool.name in RESERVED_NAMES:
                raise ToolpackLoadError(
                    f"tool name {tool.name!r} of toolpack {pack.name!r} clashes with a toolpack or sandbox built-in"
                )
            other = self._fixed_owner.get(tool.name)
            if other is not None and other != pack.name:
                raise ToolpackLoadError(
                    f"tool name clash: {tool.name!r} is defined by toolpack {other!r} and by toolpack {pack.name!r}"
                )
        for tool in tools:
            self._fixed_owner.setdefault(tool.name, pack.name)
        names = {t.name for t in tools}
        for alias, target in pack.aliases.items():
            if target not in names:
                raise ToolpackLoadError(f"toolpack {pack.name!r}: alias {alias!r} points to unknown tool {target!r}")
            self.aliases[alias] = target

    def refresh(self) -> None:
        """Re-read the live packs' tools and settle every name.

        Fixed packs' tools keep their bare names (a clash among them failed at startup). A live pack's
        tool gets its bare name only when no other pack has a tool or alias of that name and it is not
        a pack name or a sandbox built-in; otherwise it is reachable only as ``pack.tool``.
        """
        live: dict[str, list[Tool]] = {}
        for pack in self.packs.values():
            if pack.live is not None:
                live[pack.name] = [dataclasses.replace(tool, pack=pack.name) for tool in pack.live.tools()]
        counts: dict[str, int] = {}
        for tools in [*self._fixed.values(), *live.values()]:
            for tool in tools:
                counts[tool.name] = counts.get(tool.name, 0) + 1
        taken = {*self.packs, *RESERVED_NAMES, *self.aliases}
        self.tools = {}
        for name in self.packs:
            for tool in self._fixed.get(name, []):
                self.tools[tool.ref] = tool
            for tool in live.get(name, []):
                qualified = counts[tool.name] > 1 or tool.name in taken
                settled = dataclasses.replace(tool, qualified=qualified)
                self.tools[settled.ref] = settled

    def set_live(self, packs: Sequence[Toolpack]) -> None:
        """Serve these live packs from now on, in place of the current ones (the configuration was edited).

        `packs` and `tools` are replaced, never changed in place, so a `snapshot` taken before keeps what it saw.
        """
        fixed = {name: pack for name, pack in self.packs.items() if pack.live is None}
        for pack in packs:
            if pack.live is None or pack.name in fixed or pack.name in RESERVED_NAMES or not pack.name.isidentifier():
                raise ToolpackLoadError(f"toolpack {pack.name!r} cannot be served as a live pack")
        self.packs = {**fixed, **{pack.name: pack for pack in packs}}
        self.refresh()

    def snapshot(self) -> ToolRegistry:
        """This registry as it is now, for one run: it keeps calling the tools it started with whatever is
        edited while it runs (`refresh` and `set_live` replace the dicts a snapshot shares, never change them)."""
        return copy.copy(self)

    def restricted(self, admits: Callable[[Tool], bool], keeps_pack: Callable[[str], bool]) -> ToolRegistry:
        """A snapshot with only the tools `admits` (one principal's, under access rules), the packs that keep one of
        them (or, for a live pack with no tools yet, that `keeps_pack`) and the aliases of kept tools. The names it
        leaves out are `withheld`: a program that calls one is refused as for an unknown name, and audited."""
        view = copy.copy(self)
        view.tools = {ref: tool for ref, tool in self.tools.items() if admits(tool)}
        with_tools = {tool.pack for tool in self.tools.values()}
        kept = {tool.pack for tool in view.tools.values()}
        view.packs = {
            name: pack
            for name, pack in self.packs.items()
            if name in kept or (name not in with_tools and pack.live is not None and keeps_pack(name))
        }
        view.aliases = {alias: target for alias, target in self.aliases.items() if target in view.tools}
        admitted = {(tool.pack, tool.name) for tool in view.tools.values()}
        view.unlisted = {
            ref: tool for ref, tool in self.unlisted.items() if (tool.pack, self._follows[ref]) in admitted
        }
        withheld = {ref: ref for ref in self.unlisted if ref not in view.unlisted}
        for ref, tool in self.tools.items():
            if ref not in view.tools:
                withheld[ref] = withheld[f"{tool.pack}.{tool.name}"] = f"{tool.pack}.{tool.name}"
        for alias, target in self.aliases.items():
            if alias not in view.aliases:
                withheld[alias] = withheld[f"{self.tools[target].pack}.{alias}"] = f"{self.tools[target].pack}.{target}"
        for name in self.packs:
            if name not in view.packs:
                withheld[name] = f"{name}.*"
        view._withheld = withheld
        return view

    def withheld(self, name: str) -> str | None:
        """``pack.tool`` when `name` names a tool this view leaves out (`restricted`), else None."""
        return self._withheld.get(name)

    def resolve(self, name: str) -> Tool | None:
        """Find a tool by the name programs call it, an alias, or ``pack.tool``."""
        found = self.tools.get(name) or self.tools.get(self.aliases.get(name, "")) or self.unlisted.get(name)
        if found is not None or "." not in name:
            return found
        pack, _, short = name.partition(".")
        for tool in self.tools.values():
            if tool.pack == pack and tool.name == short:
                return tool
        aliased = self.tools.get(self.aliases.get(short) or "")
        return aliased if aliased is not None and aliased.pack == pack else None

    def namespaces(self) -> dict[str, list[str]]:
        """Pack name -> the tool names (and aliases) reachable as ``pack.tool`` in the sandbox."""
        out: dict[str, list[str]] = {name: [] for name in self.packs}
        for tool in self.tools.values():
            out[tool.pack].append(tool.name)
        for alias, target in self.aliases.items():
            out[self.tools[target].pack].append(alias)
        return out

    def known_names(self, modules: Sequence[str] = MODULE_NAMES) -> KnownNames:
        """Every name a program may use without defining it: tools, builtins, the enabled modules and pack
        namespaces (what the static check accepts)."""
        packs = tuple((pack, tuple(names)) for pack, names in self.namespaces().items())
        unavailable = tuple(self.unavailable().items())
        return known_names(tuple(self.callable_names()), packs, unavailable, module_members(tuple(modules)))

    def callable_names(self) -> list[str]:
        """Every name a program may call directly: tools with a bare name, and aliases."""
        return [*(ref for ref, tool in self.tools.items() if not tool.qualified), *self.aliases]

    def renamed(self) -> dict[str, str]:
        """The names users gave packs that are served under another name -> that name (``memory`` -> ``memory_mcp``)."""
        return {pack.origin: name for name, pack in self.packs.items() if pack.origin and pack.origin != name}

    def filtered(self, name: str) -> str | None:
        """``pack.tool`` when `name` (bare or ``pack.tool``) names a tool a live pack's filters hide, else None."""
        pack, dot, short = name.partition(".")
        candidates = [(pack, self.packs.get(pack))] if dot else list(self.packs.items())
        for candidate, found in candidates:
            if found is not None and found.live is not None and found.live.hides(short if dot else name):
                return f"{candidate}.{short if dot else name}"
        return None

    def unavailable(self) -> dict[str, str]:
        """Live packs whose tools cannot be called now -> why, and what fixes it, as a program is told it."""
        return {
            name: pack.live.told
            for name, pack in self.packs.items()
            if pack.live is not None and pack.live.told is not None
        }


@functools.cache
def installed_toolpacks() -> tuple[importlib.metadata.EntryPoint, ...]:
    """Every installed toolpack's entry point (group ``attp.toolpacks``), read once per process.

    Reading them scans the metadata of every installed distribution (about 5 ms each time; a registry loads
    several packs). A server builds its registry when it starts, so a pack installed later is seen at the next.
    """
    return tuple(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def load_factory(name: str) -> ToolpackFactory:
    """Load the `ToolpackFactory` registered under entry-point name `name` (``mcp``)."""
    found = [ep for ep in installed_toolpacks() if ep.name == name]
    if not found:
        raise ToolpackLoadError(f"no toolpack factory {name!r} is installed (entry-point group {ENTRY_POINT_GROUP})")
    try:
        obj = found[0].load()
    except Exception as exc:
        raise ToolpackLoadError(f"toolpack factory {name!r} failed to import: {exc}") from exc
    if not isinstance(obj, ToolpackFactory):
        raise ToolpackLoadError(f"entry point {name!r} is a {type(obj).__name__}, expected a ToolpackFactory")
    return obj


def load_toolpack(spec: str) -> Toolpack:
    """Load a pack by entry-point name (``files``) or import spec (``package.module:attribute``)."""
    if ":" in spec:
        module_name, _, attribute = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ToolpackLoadError(f"toolpack {spec!r}: cannot import module {module_name!r}: {exc}") from exc
        try:
            obj = getattr(module, attribute)
        except AttributeError as exc:
            raise ToolpackLoadError(f"toolpack {spec!r}: module {module_name!r} has no {attribute!r}") from exc
    else:
        found = [ep for ep in installed_toolpacks() if ep.name == spec]
        if not found:
            known = sorted(ep.name for ep in installed_toolpacks())
            hint = suggest(spec, known)
            raise ToolpackLoadError(
                f"unknown toolpack {spec!r}; installed toolpacks: {', '.join(known) or 'none'}"
                + (f" (did you mean {hint!r}?)" if hint else "")
                + "; or give an import spec 'module:attribute'"
            )
        try:
            obj = found[0].load()
        except Exception as exc:
            raise ToolpackLoadError(f"toolpack {spec!r} failed to import: {exc}") from exc
    if isinstance(obj, ToolpackFactory):
        raise ToolpackLoadError(f"{spec!r} makes toolpacks from configuration; it is not enabled by name")
    if callable(obj) and not isinstance(obj, Toolpack):
        obj = obj()
    if not isinstance(obj, Toolpack):
        raise ToolpackLoadError(f"toolpack {spec!r} is a {type(obj).__name__}, expected a server.Toolpack")
    return obj
