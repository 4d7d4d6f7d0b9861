"""The engines a program may run on, behind one small interface: the table here, one folder each.

Owns: `ENGINES`, the table every part reads about an engine (its language as the model reads it, from the
engine's own ``language.py``; what a handle keeps of its runs between calls; whether it runs only behind every
containment layer; whether a worker that ran it may run another; the extra that installs it and whether it is
installed here), `EngineRun`, what a worker asks of an engine for one program, and `import_hint`, the hint every
engine gives for an unnecessary import.
The engines: `python/` (the project's evaluator, the default), `starlark/` (starlark-pyo3), `asteval/` (asteval's
own `Interpreter`), `cpython/` (real CPython behind the walls, with the data stack).

A worker's fork server builds each installed engine its workers run once, before they fork and lock down
(`runner`; an engine with workers of its own only there), and for each ``run`` message a worker asks
that engine for an `EngineRun`; the worker maps what the run raises to error codes and the answer to the
result, the same way for every engine.
Runs in the worker and in the server (the table only); imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from attp_server.sandbox.engines.asteval.language import LANGUAGE as ASTEVAL
from attp_server.sandbox.engines.cpython.language import LANGUAGE as CPYTHON
from attp_server.sandbox.engines.language import Language
from attp_server.sandbox.engines.python.language import LANGUAGE as PYTHON
from attp_server.sandbox.engines.starlark.language import LANGUAGE as STARLARK

EngineName = Literal["python", "starlark", "asteval", "cpython"]
"""Every value of the ``engine`` setting (the table below has one entry for each)."""

Keeps = Literal["names", "pickles", "nothing"]
"""What a handle keeps of an engine's runs: ``names`` (the variables and ``def``s a program leaves, as data and
source), ``pickles`` (the top-level names a program leaves, pickled in the worker into one blob the server stores
sealed to the handle and never reads), or ``nothing`` (every run starts empty)."""


@dataclass(frozen=True)
class Engine:
    """One engine, as the rest of the server knows it."""

    name: EngineName
    """Its value of the ``engine`` setting and argument."""
    language: Language
    """Its language as the model reads it (each engine's ``language.py``): the description and prompt are built
    from it."""
    keeps: Keeps
    walls: bool
    """It runs only where every containment layer holds (``containment = "required"``)."""
    runner: str
    """``module:Class`` of its worker side, built once per worker before the lockdown."""
    package: str | None = None
    """The import that must be installed for it (None: always here)."""
    distribution: str | None = None
    """What installs `package`, as its users know it."""
    extra: str | None = None
    """The extra of attp-server that installs `distribution`."""
    own_workers: bool = False
    """It runs on workers of its own (forked from a fork server that loaded its packages), never on the default
    engine's: those workers do not build it."""
    reuse: bool = True
    """A worker that ran a program on it may run another. False where a program can change what its process
    holds for later runs (asteval lets it set attributes on what it reaches): the worker retires after one run."""

    @property
    def install(self) -> str:
        """The command that installs what it needs."""
        return f"pip install 'attp-server[{self.extra}]'"

    def missing(self) -> str | None:
        """Why it cannot run on this installation, or None when it can."""
        if self.package is None or importlib.util.find_spec(self.package) is not None:
            return None
        return f"engine {self.name!r} needs the optional extra {self.distribution}: install it with {self.install}"

    def load(self) -> type[EngineRunner]:
        """Its worker-side class (imported on first use: the server never needs it)."""
        module, _, attribute = self.runner.partition(":")
        runner: type[EngineRunner] = getattr(importlib.import_module(module), attribute)
        return runner


ENGINES: Mapping[str, Engine] = {
    engine.name: engine
    for engine in (
        Engine("python", PYTHON, "names", walls=False, runner="attp_server.sandbox.engines.python.engine:Python"),
        Engine(
            "starlark",
            STARLARK,
            "nothing",
            walls=False,
            runner="attp_server.sandbox.engines.starlark.engine:StarlarkEngine",
            package="starlark",
            distribution="starlark-pyo3",
            extra="starlark",
        ),
        Engine(
            "asteval",
            ASTEVAL,
            "names",
            walls=True,  # asteval bounds neither memory nor time, and a program reaches the protocol pipe
            runner="attp_server.sandbox.engines.asteval.engine:Asteval",
            reuse=False,
        ),
        Engine(
            "cpython",
            CPYTHON,
            "pickles",
            walls=True,  # real CPython: only the walls hold it
            runner="attp_server.sandbox.engines.cpython.engine:CPythonEngine",
            extra="data",
            own_workers=True,  # data-stack workers
            reuse=False,  # a program can change anything in its process
        ),
    )
}
"""Every engine, by name; the first is the default."""

ENGINE_NAMES: tuple[str, ...] = tuple(ENGINES)


@dataclass
class Answer:
    """What a program left: its names (``__result__`` among them, if set) and its last expression's value."""

    symbols: Mapping[str, Any]
    last: tuple[Any, int | None] | None
    """The value of the last expression statement and its line, when the program ended on one."""
    hint: str | None = None
    """What the engine tells the model about this run besides the result (an unnecessary import)."""
    pictures: list[dict[str, str]] = field(default_factory=list)
    """Pictures the program showed, each ``{"mime_type": "image/png", "data": base64}``."""
    error: Mapping[str, Any] | None = None
    """The run's error although the program ran to its end (its result cannot be returned: too large)."""


def import_hint(modules: list[str]) -> str:
    """The hint for a program that imported modules it already had by name (`Answer.hint`)."""
    names = ", ".join(modules)
    return f"imports are unnecessary here: {names} {'is' if len(modules) == 1 else 'are'} already available by name"


class EngineRun(Protocol):
    """One program on one engine. `execute` raises what the program raised (and the `Abort` family for limits);
    the worker turns that into the run's error."""

    check_s: float | None
    """Seconds the static check took, for the trace (None: the engine has none)."""

    def execute(self) -> Answer: ...

    def names(self) -> list[str]:
        """Every name the program could use without defining it, for "did you mean" suggestions."""
        ...

    def kept(self) -> dict[str, Any] | None:
        """The state the run leaves for its handle (None: unchanged), once `execute` has returned or raised a
        program's own exception."""
        ...


class EngineRunner(Protocol):
    """An engine's worker side, built once per worker before its lockdown."""

    def __init__(self) -> None: ...

    def start(self, job: Mapping[str, Any], tools: Any, output: Any, deadline: float) -> EngineRun:
        """A run of the ``run`` message `job`, calling tools through `tools` (a `ToolBridge`), printing into
        `output` (an `OutputBuffer`), until `deadline` (`time.monotonic()`)."""
        ...
