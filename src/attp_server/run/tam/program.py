"""TAM steps to a sandbox program: tool ids resolved, values coerced and validated, code emitted.

Translation resolves tool ids (exact name or alias, ``pack:tool``, ``pack.tool``, then a unique case-
and underscore-insensitive match), coerces each value to its parameter's annotation (`coerce_value`),
validates the call exactly as the runtime will, and emits a Python program for the ordinary sandbox
path, so limits, worker, trace (``calls``) and result shape are those of any program. Its result:

    {"ok": true, "steps": [{"step": 1, "tool": "write_file", "ok": true, "result": {...}}, ...]}
    {"ok": false, "failed_step": 2, "steps": [
        {"step": 1, "tool": "write_file", "ok": true, "result": {...}},
        {"step": 2, "tool": "edit_file", "ok": false, "error": {"code": ..., "message": ..., ...}},
        {"step": 3, "tool": "read_file", "ok": false, "skipped": true}]}

A failed step does not fail the program (its record is data), so the run's ``result`` keeps what
the earlier steps did; `TamProgram.failure` turns it into the run's ``error`` at the step's TAM line,
and `TamProgram.relocate` moves any other run error (a limit, a timeout) there too.
"""

from __future__ import annotations

import inspect
import keyword
import re
from dataclasses import dataclass
from typing import Any

from attp_server.errors import ErrorCode, ErrorInfo, short_repr, suggest
from attp_server.run.tam.coerce import CoercionError, coerce_value
from attp_server.run.tam.grammar import (
    VALUE_CLOSE,
    VALUE_OPEN,
    Source,
    TamError,
    TamStep,
    norm_key,
    parse_tam,
    swallow_note,
)
from attp_server.toolpack import RESERVED_NAMES, ToolRegistry

META_SIGNATURES = {
    name: inspect.Signature(
        [inspect.Parameter(arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=str | None)]
    )
    for name, arg in (("help", "name"), ("tools", "query"))
}
"""The sandbox's own ``help``/``tools``, callable as TAM commands too."""


@dataclass(frozen=True)
class PlannedStep:
    """A resolved step of a translated program, with where it was written."""

    step: int
    tool: str
    line: int
    column: int
    source_line: str
    program_lines: range
    parameters: tuple[tuple[str, int, int, str], ...] = ()
    """(parameter name, line, column, source line) of each value given."""

    def position(self, parameter: str | None) -> tuple[int, int, str]:
        """Where `parameter`'s value was written, else where the step's command is."""
        found = (at[1:] for at in self.parameters if at[0] == parameter)
        return next(found, (self.line, self.column, self.source_line))


@dataclass(frozen=True)
class _Call:
    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    positions: dict[str, tuple[int, int]]

    def expression(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(parts)})"


@dataclass(frozen=True)
class TamProgram:
    """A TAM text translated for the sandbox: the program, and where each of its steps was written."""

    code: str
    steps: tuple[PlannedStep, ...]

    def step_at(self, program_line: int | None) -> PlannedStep | None:
        """The step whose code holds `program_line` of `code`."""
        return next((s for s in self.steps if program_line in s.program_lines), None)

    def failure(self, result: Any) -> ErrorInfo | None:
        """The run's error when a step failed (`result` is the run's result), pointing at that step's TAM line."""
        if not isinstance(result, dict) or result.get("ok") is not False:
            return None
        number, records = result.get("failed_step"), result.get("steps")
        if not isinstance(number, int) or not 1 <= number <= len(self.steps) or not isinstance(records, list):
            return None
        record = next((r for r in records if isinstance(r, dict) and r.get("step") == number), {})
        error = record.get("error")
        if not isinstance(error, dict):
            return None
        planned = self.steps[number - 1]
        ran = self.steps[: number - 1]
        advice = [str(error["solution"]).rstrip(".") + "."] if error.get("solution") else []
        if ran:
            listed = ", ".join(f"{s.step} ({s.tool})" for s in ran)
            advice.append(
                f"Step {listed} already ran; its effects stay."
                if len(ran) == 1
                else f"Steps {listed} already ran; their effects stay."
            )
        if len(self.steps) > 1:
            rest = " together with the steps after it, which did not run" if number < len(self.steps) else ""
            advice.append(f"Fix step {number} and send it again{rest}.")
        prefix = f"step {number} of {len(self.steps)} ({planned.tool}) failed: " if len(self.steps) > 1 else ""
        fields = {k: str(error[k]) for k in ("parameter_name", "suggested_value") if error.get(k) is not None}
        line, column, source_line = planned.position(fields.get("parameter_name"))
        return ErrorInfo(
            code=str(error.get("code") or ErrorCode.TOOL_ERROR),
            message=prefix + str(error.get("message", "")),
            line=line,
            column=column,
            source_line=source_line,
            tool_name=str(error.get("tool_name") or planned.tool),
            solution=" ".join(advice) or None,
            **fields,
        )

    def relocate(self, info: ErrorInfo) -> ErrorInfo:
        """`info` of the run (a limit, a timeout) with its position moved from the program to the TAM text."""
        planned = self.step_at(info.line)
        if planned is None:
            return info.model_copy(update={"line": None, "column": None, "source_line": None})
        return info.model_copy(
            update={
                "message": f"step {planned.step} ({planned.tool}): {info.message}",
                "line": planned.line,
                "column": planned.column,
                "source_line": planned.source_line,
                "tool_name": info.tool_name or planned.tool,
            }
        )


def tam_program(text: str, registry: ToolRegistry) -> str:
    """The sandbox program for the TAM blocks in `text` (see `translate_tam`)."""
    return translate_tam(text, registry).code


def translate_tam(text: str, registry: ToolRegistry, *, max_steps: int | None = None) -> TamProgram:
    """Parse, resolve every tool, coerce and validate every value, and emit the program. Nothing runs.

    `max_steps` (the ``max_tool_calls`` setting) refuses a text with more steps up front, rather
    than running the first ones and stopping with TOOL_CALL_LIMIT halfway.

    Raises:
        TamError: INVALID_ENVELOPE, NAME_NOT_FOUND, INVALID_ARGUMENT or TOOL_CALL_LIMIT, at the line of
            the TAM text.
    """
    source = Source(text)
    steps = parse_tam(text)
    if max_steps is not None and len(steps) > max_steps:
        over = steps[max_steps]
        raise source.error(
            f"the TAM text has {len(steps)} steps; at most {max_steps} tool calls may run in one call",
            (over.line, over.column),
            code=ErrorCode.TOOL_CALL_LIMIT,
            example=None,
            received=f"{len(steps)} steps",
            expected=f"at most {max_steps} steps",
            solution=f"Send the first {max_steps} steps now and the rest in a later call.",
        )
    calls = [_plan(source, step, registry) for step in steps]
    taken = {*registry.callable_names(), *registry.packs, *META_SIGNATURES, *RESERVED_NAMES}
    return _emit(source, steps, calls, taken)


def _resolve(source: Source, step: TamStep, registry: ToolRegistry) -> tuple[str, inspect.Signature, Any]:
    """(name to call, signature, Tool or None for help/tools) of the step's tool id."""
    written = step.tool
    names = [*registry.callable_names(), *META_SIGNATURES]

    def found(name: str) -> tuple[str, inspect.Signature, Any]:
        tool = registry.resolve(name)
        # The tool's own ref: ``hostile.write_file`` must call the hostile pack's tool, never a bare namesake.
        return (name, META_SIGNATURES[name], None) if tool is None else (tool.ref, tool.signature, tool)

    def match(wanted: str, pool: list[str]) -> str | None:
        if wanted in pool:
            return wanted
        hits = {n for n in pool if norm_key(n) == norm_key(wanted)}
        targets = {getattr(registry.resolve(n), "name", n) for n in hits}
        if len(targets) > 1:
            raise not_found(f"{written!r} matches several tools ({', '.join(sorted(hits))}); write the exact name")
        return min(hits) if hits else None

    def not_found(message: str, suggestion: str | None = None) -> TamError:
        catalog = ", ".join(sorted(registry.tools)[:40])
        return source.error(
            message + (f"; did you mean {suggestion}?" if suggestion else "") + swallow_note(step),
            (step.line, step.column),
            code=ErrorCode.NAME_NOT_FOUND,
            example=None,
            parameter_name="command",
            received=short_repr(written),
            suggested_value=suggestion,
            solution=f"Name a tool as read_file, files:read_file or files.read_file. The tools: {catalog}.",
        )

    qualified = re.fullmatch(r"([^:.]+)[:.]([^:.]+)", written)
    if written not in names and qualified is not None:
        pack_written, tool_written = (part.strip() for part in qualified.groups())
        pack = match(pack_written, list(registry.packs))
        if pack is None:
            hint = match(tool_written, names) or _suggest(tool_written, names)
            raise not_found(f"no toolpack {pack_written!r} (toolpacks: {', '.join(registry.packs)})", hint)
        member = match(tool_written, registry.namespaces()[pack])
        if member is None:
            raise not_found(f"toolpack {pack!r} has no tool {tool_written!r}", _suggest(tool_written, names))
        return found(f"{pack}.{member}")
    name = match(written, names)
    if name is None:
        raise not_found(f"no tool {written!r}", _suggest(written, names))
    return found(name)


def _suggest(written: str, names: list[str]) -> str | None:
    tail = re.split(r"[:.]", written)[-1].strip()
    for probe in (written, tail):
        if hit := suggest(probe, names):
            return hit
    normal = {norm_key(n): n for n in names}
    hit = suggest(norm_key(tail), normal)
    return normal[hit] if hit else None


def _plan(source: Source, step: TamStep, registry: ToolRegistry) -> _Call:
    name, signature, tool = _resolve(source, step, registry)
    shown = tool.signature_text() if tool is not None else f"{name}{signature}"
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    regular = {p.name: p for p in signature.parameters.values() if p.kind not in variadic}
    takes_extra = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())

    def invalid(message: str, position: tuple[int, int], **fields: str | None) -> TamError:
        return source.error(
            message,
            position,
            code=ErrorCode.INVALID_ARGUMENT,
            example=None,
            tool_name=name,
            solution=f"Give the parameters of {shown}, each as key:{VALUE_OPEN}value{VALUE_CLOSE}.",
            **fields,
        )

    values: dict[str, Any] = {}
    lines: dict[str, tuple[int, int]] = {}
    for param in step.params:
        target = regular.get(param.key)
        if target is None:
            candidates = [p for p in regular.values() if norm_key(p.name) == norm_key(param.key)]
            target = candidates[0] if len(candidates) == 1 else None
        if target is None:
            if takes_extra and param.key.isidentifier() and not keyword.iskeyword(param.key) and param.key[0] != "_":
                values[param.key] = param.value
                continue
            normal = {norm_key(p): p for p in regular}
            guess = suggest(param.key, regular) or normal.get(suggest(norm_key(param.key), normal) or "")
            raise invalid(
                f"{name}() has no parameter {param.key!r}" + (f"; did you mean {guess!r}?" if guess else "")
                + swallow_note(step),
                (param.line, param.column),
                parameter_name=param.key,
                expected=shown,
                suggested_value=guess,
            )  # fmt: skip
        try:
            values[target.name] = coerce_value(param.value, target.annotation)
        except CoercionError as exc:
            reason = f" ({exc.reason})" if exc.reason else ""
            raise invalid(
                f"{name}(): {param.key!r} must be {exc.expected}{reason}",
                (param.line, param.column),
                parameter_name=target.name,
                received=short_repr(param.value),
                expected=exc.expected,
            ) from None
        lines[target.name] = (param.line, param.column)
    missing = [p.name for p in regular.values() if p.default is inspect.Parameter.empty and p.name not in values]
    if missing:
        raise invalid(
            f"{name}() needs {', '.join(repr(m) for m in missing)}" + swallow_note(step),
            (step.line, step.column),
            parameter_name=missing[0],
            expected=shown,
        )
    args: list[Any] = []
    for p in regular.values():
        if p.kind is inspect.Parameter.POSITIONAL_ONLY and p.name in values:
            args.append(values.pop(p.name))
        elif p.kind is inspect.Parameter.POSITIONAL_ONLY and any(
            q.kind is inspect.Parameter.POSITIONAL_ONLY and q.name in values for q in regular.values()
        ):
            raise invalid(f"{name}() needs {p.name!r} before the later parameters", (step.line, step.column))
    if tool is not None:
        bound = tool.bind(args, values)
        if isinstance(bound, ErrorInfo):
            line, column = lines.get(bound.parameter_name or "", (step.line, step.column))
            raise TamError(
                bound.model_copy(update={"line": line, "column": column, "source_line": source.line_text(line)})
            )
    return _Call(name, tuple(args), values, lines)


class _Fresh:
    """Program variable names that shadow no tool, pack or sandbox built-in."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = set(taken)

    def __call__(self, base: str) -> str:
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}{n}"
        self.taken.add(name)
        return name


def _emit(source: Source, steps: list[TamStep], calls: list[_Call], taken: set[str]) -> TamProgram:
    fresh = _Fresh(taken)
    log, failed, value, caught, record = (fresh(f"tam_{n}") for n in ("steps", "failed", "value", "error", "record"))
    fields = ("code", "message", "tool_name", "parameter_name", "suggested_value", "solution")
    lines = [
        f"def {record}(error):",
        "    info = {" + ", ".join(f"{f!r}: error.{f}" for f in fields) + "}",
        "    return {key: info[key] for key in info if info[key] is not None}",
        f"{log} = []",
        f"{failed} = 0",
    ]
    planned = []
    for number, (step, call) in enumerate(zip(steps, calls, strict=True), start=1):
        head = f"'step': {number}, 'tool': {call.name!r}"
        first = len(lines) + 1
        lines += [
            f"# step {number}: {call.name} (TAM line {step.line})",
            f"if {failed}:",
            f"    {log}.append({{{head}, 'ok': False, 'skipped': True}})",
            "else:",
            "    try:",
            f"        {value} = {call.expression()}",
            f"        {log}.append({{{head}, 'ok': True, 'result': {value}}})",
            f"    except ToolError as {caught}:",
            f"        {failed} = {number}",
            f"        {log}.append({{{head}, 'ok': False, 'error': {record}({caught})}})",
        ]
        where = (step.line, step.column, source.line_text(step.line))
        given = tuple((name, *at, source.line_text(at[0])) for name, at in call.positions.items())
        planned.append(PlannedStep(number, call.name, *where, range(first, len(lines) + 1), given))
    lines += [
        f"if {failed}:",
        f"    __result__ = {{'ok': False, 'failed_step': {failed}, 'steps': {log}}}",
        "else:",
        f"    __result__ = {{'ok': True, 'steps': {log}}}",
    ]
    return TamProgram("\n".join(lines) + "\n", tuple(planned))
