"""From the request to the program that runs: which input, its size, the envelope or TAM dialect, the engine.

Everything here is refused before a worker is asked for: a request that fails comes back as the result
that says what was wrong and what is expected. Parsing happens off the event loop, since a pathological
document must not stall other sessions.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import anyio

from attp_server.errors import ErrorCode, ErrorInfo
from attp_server.model.results import ExecutionResult
from attp_server.run.envelope import Declined, EnvelopeError, Program, parse_envelope
from attp_server.run.outcome import error_result
from attp_server.run.request import ExecuteRequest
from attp_server.run.tam import TamError, TamProgram, looks_like_tam, translate_tam
from attp_server.sandbox.engines import ENGINES, Engine, EngineName
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry


@dataclass(frozen=True)
class Prepared:
    """A program ready for a worker."""

    code: str
    target: str | None
    engine: EngineName = "python"
    keep: bool = False
    """The session's kept names go in and what the program leaves comes back (engines that keep something only)."""
    tam: TamProgram | None = None
    """The TAM blocks the code was translated from: its errors are told in their terms."""


async def prepare(request: ExecuteRequest, settings: Settings, registry: ToolRegistry) -> Prepared | ExecutionResult:
    """The program `request` asks to run, or the result that says why nothing runs."""
    target = request.target
    if (request.code is None) == (request.envelope is None):
        return error_result(
            target,
            ErrorInfo(
                code=ErrorCode.INVALID_ARGUMENT,
                message="give exactly one of `code` (a Python program) or `envelope` (an ATTP TOML envelope)",
                parameter_name="code",
                received="both" if request.code is not None else "neither",
                expected="exactly one of code / envelope",
            ),
        )
    if request.envelope is not None:
        limit = 2 * settings.max_code_chars + 10_000
        if len(request.envelope) > limit:
            return error_result(
                target,
                ErrorInfo(
                    code=ErrorCode.INVALID_ENVELOPE,
                    message=f"the envelope is {len(request.envelope):,} characters; the limit is {limit:,}",
                    parameter_name="envelope",
                    received=f"{len(request.envelope):,} characters",
                    expected=f"at most {limit:,} characters",
                    solution="Send less: keep large data in files and read it with tools.",
                ),
            )
        if looks_like_tam(request.envelope):
            return await _prepare_tam(request.envelope, target, settings, registry)
        try:
            parsed = await anyio.to_thread.run_sync(
                functools.partial(parse_envelope, request.envelope, strict=settings.envelope_strict)
            )
        except EnvelopeError as exc:
            return error_result(target, exc.info)
        target = target or parsed.target
        if isinstance(parsed, Declined):
            return ExecutionResult(status="fail", target=target, hint=parsed.message)
        program = parsed
    else:
        program = Program(code=request.code or "", target=target, thought=request.thought)
    if len(program.code) > settings.max_code_chars:
        return error_result(
            target,
            ErrorInfo(
                code=ErrorCode.INVALID_ARGUMENT,
                message=f"the program is {len(program.code):,} characters; the limit is {settings.max_code_chars:,}",
                parameter_name="code",
                received=f"{len(program.code):,} characters",
                expected=f"at most {settings.max_code_chars:,} characters",
                solution="Split the work into several calls, or keep large data in files and read it with tools.",
            ),
        )
    engine = _engine(request.engine, program.engine, settings)
    if isinstance(engine, ErrorInfo):
        return error_result(target, engine)
    missing = engine.missing()
    if missing is not None:
        return error_result(
            target,
            ErrorInfo(
                code=ErrorCode.INVALID_ARGUMENT,
                message=missing,
                parameter_name="engine",
                received=engine.name,
                expected=f"{settings.engine}, or {engine.name} once the extra is installed",
                suggested_value=settings.engine,
                solution=f"Write the program for engine={settings.engine!r}, or have the operator run "
                f"{engine.install}.",
            ),
        )
    # No static check here: each engine checks in the worker, under the run's deadline (for python:
    # attp_server.sandbox.static_check, with the names the session kept; they travel in the job's state). A
    # pathological Starlark program must never reach starlark-rust in the server process.
    return Prepared(program.code, target, engine.name, keep=engine.keeps != "nothing")


def _engine(argument: str | None, declared: str | None, settings: Settings) -> Engine | ErrorInfo:
    """The engine a call runs on: the envelope's ``tool_call.engine`` or the ``engine`` argument (the same one when
    both are given), else the server's default; one the server does not offer is refused, naming those it does."""
    offered = settings.offered_engines
    listed = ", ".join(offered)
    if argument is not None and declared is not None and argument != declared:
        return ErrorInfo(
            code=ErrorCode.INVALID_ARGUMENT,
            message=f"the engine argument says {argument!r} and the envelope's tool_call.engine says {declared!r}",
            parameter_name="engine",
            received=f"{argument} and {declared}",
            expected="one engine",
            solution="Give the engine once: in the envelope's tool_call.engine, or as the engine argument.",
        )
    name = declared or argument or settings.engine
    if name not in offered:
        where = "tool_call.engine" if declared else "engine"
        return ErrorInfo(
            code=ErrorCode.INVALID_ARGUMENT,
            message=f"engine {name!r} is not offered by this server; it offers {listed}",
            parameter_name=where,
            received=name,
            expected=f"one of {listed}" if len(offered) > 1 else listed,
            suggested_value=settings.engine,
            solution=f"Omit {where} to run on the server's default ({settings.engine})"
            + (f", or pick one of {listed}." if len(offered) > 1 else "."),
        )
    return ENGINES[name]


async def _prepare_tam(
    text: str, target: str | None, settings: Settings, registry: ToolRegistry
) -> Prepared | ExecutionResult:
    """TAM blocks, translated to a program so they share the sandbox, limits and trace."""
    try:
        tam = await anyio.to_thread.run_sync(
            functools.partial(translate_tam, text, registry, max_steps=settings.max_tool_calls)
        )
    except TamError as exc:
        return error_result(target, exc.info)
    return Prepared(tam.code, target, tam=tam)
