"""An upstream tool's JSON Schemas as a Python signature, a docstring and an argument check.

``inputSchema`` gives the parameters (required ones first, in the order the schema lists them, then
the optional ones with their defaults), their types (integer -> int, number -> float, string -> str,
boolean -> bool, array -> list[...], object -> dict) and the Args section (description, allowed
values). ``outputSchema`` gives the return type and the Returns section. The description's first
sentence is the summary the catalog shows.

Calls are checked against the ``inputSchema`` itself (the `jsonschema` library, which the MCP SDK
also uses) before anything is sent, so the model gets ``INVALID_ARGUMENT`` naming the parameter,
what was expected, what it sent and, for a value outside an enum, the closest allowed value. The
schema's regexes are matched by RE2 in linear time (`attp_server.toolpacks.mcp.patterns`), and the
check runs on a tool thread within the run's deadline (`attp_server.run.dispatch`), never on the
event loop.
"""

from __future__ import annotations

import inspect
import keyword
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jsonschema import SchemaError, ValidationError, validators

from attp_server.errors import ErrorCode, ErrorInfo, short_repr, suggest
from attp_server.toolpacks.mcp import patterns

logger = logging.getLogger(__name__)

_SCALARS: dict[str, Any] = {"integer": int, "number": float, "string": str, "boolean": bool, "null": type(None)}
_TEXT_NAMES = {"integer": "int", "number": "float", "string": "str", "boolean": "bool", "null": "None"}
_NOT_WORD = re.compile(r"\W+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'`])")
MAX_ENUM_SHOWN = 12
"""Allowed values listed in a parameter's Args line; past it, the first ones and a count."""


def identifier(name: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """`name` as a public Python identifier not in `taken`: ``get-weather`` -> ``get_weather``.

    Every run of characters that cannot be in an identifier becomes ``_``; leading underscores are
    dropped (names starting with ``_`` are private in the sandbox); a leading digit gets ``n_``; a
    keyword gets a trailing ``_`` (``from`` -> ``from_``); an empty result is ``tool``. A name already
    in `taken` gets ``_2``, ``_3``, ... so every conversion of one list is predictable and unique.
    """
    text = _NOT_WORD.sub("_", name).strip("_") or "tool"
    if text[0].isdigit():
        text = f"n_{text}"
    if keyword.iskeyword(text) or keyword.issoftkeyword(text):
        text += "_"
    candidate, counter = text, 2
    while candidate in taken:
        candidate, counter = f"{text}_{counter}", counter + 1
    return candidate


def summary_and_rest(description: str) -> tuple[str, str]:
    """The first sentence (what the compact catalog shows) and the rest of an upstream description."""
    text = description.strip()
    if not text:
        return "", ""
    first_line, _, after = text.partition("\n")
    parts = _SENTENCE_END.split(first_line, maxsplit=1)
    summary = parts[0].strip()
    rest = "\n".join(p for p in [parts[1].strip() if len(parts) > 1 else "", after.strip()] if p)
    return summary, rest


def annotation_of(schema: Any) -> Any:
    """The Python type a JSON Schema describes, for the signature the model reads (Any when it says nothing)."""
    if not isinstance(schema, Mapping):
        return Any
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([annotation_of({**schema, "type": k}) for k in kind if isinstance(k, str)])
    if kind == "array":
        items = schema.get("items")
        return list[annotation_of(items)] if isinstance(items, Mapping) and items else list  # type: ignore[misc]
    if kind == "object":
        return dict
    if isinstance(kind, str) and kind in _SCALARS:
        return _SCALARS[kind]
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            return _union([annotation_of(b) for b in branches])
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return _union([type(v) if v is not None else type(None) for v in schema["enum"]])
    if "const" in schema:
        return type(schema["const"])
    if "properties" in schema:
        return dict
    return Any


def _union(types: Sequence[Any]) -> Any:
    unique = list(dict.fromkeys(types))
    if not unique or Any in unique:
        return Any
    result = unique[0]
    for other in unique[1:]:
        result = result | other
    return result


def type_text(schema: Any) -> str:
    """A short type name of a schema for messages: ``str``, ``list[int]``, ``int | None``."""
    return _annotation_text(annotation_of(schema))


def _annotation_text(annotation: Any) -> str:
    if annotation is Any:
        return "any"
    if isinstance(annotation, type):
        return "None" if annotation is type(None) else annotation.__name__
    return str(annotation).replace("typing.", "").replace("NoneType", "None")


@dataclass(frozen=True)
class Parameter:
    """One argument of an upstream tool: its Python name and its name in the schema."""

    name: str
    wire: str
    schema: Mapping[str, Any]
    required: bool


@dataclass(frozen=True)
class ToolShape:
    """What the sandbox shows of an upstream tool and how its calls are checked."""

    signature: inspect.Signature
    doc: str
    parameters: tuple[Parameter, ...]
    input_schema: Mapping[str, Any]
    unwrap_result: bool
    """True when ``outputSchema`` is the SDK's ``{"result": x}`` wrapper of a non-object result."""
    validator: Any = None
    """The compiled ``inputSchema`` (a jsonschema validator), or None when the schema is not valid."""

    def check(self, ref: str, arguments: Mapping[str, Any]) -> ErrorInfo | None:
        """Validate the arguments a program gave (Python names) against the ``inputSchema``."""
        return check_arguments(ref, self, arguments)

    def wire_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments under their schema names, as sent upstream."""
        by_name = {p.name: p.wire for p in self.parameters}
        return {by_name.get(name, name): value for name, value in arguments.items()}


def shape_of(
    description: str | None, input_schema: Mapping[str, Any], output_schema: Mapping[str, Any] | None, where: str
) -> ToolShape:
    """Build the signature and docstring of a tool from its MCP definition."""
    properties = input_schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required_names = input_schema.get("required")
    required = set(required_names) if isinstance(required_names, list) else set()
    taken: set[str] = set()
    parameters = []
    for wire, schema in properties.items():
        name = identifier(str(wire), taken)
        taken.add(name)
        parameters.append(Parameter(name, str(wire), schema if isinstance(schema, Mapping) else {}, wire in required))
    ordered = [p for p in parameters if p.required] + [p for p in parameters if not p.required]
    signature_parameters = []
    for p in ordered:
        annotation = annotation_of(p.schema)
        if p.required:
            default: Any = inspect.Parameter.empty
        elif "default" in p.schema:
            default = p.schema["default"]
        else:
            default = None
            if annotation is not Any:
                annotation = _union([annotation, type(None)])
        signature_parameters.append(
            inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation)
        )
    unwrap, returned = _returned(output_schema)
    signature = inspect.Signature(
        signature_parameters, return_annotation=inspect.Signature.empty if returned is None else returned
    )
    doc = _docstring(description or "", ordered, output_schema, unwrap)
    return ToolShape(signature, doc, tuple(ordered), input_schema, unwrap, compile_validator(input_schema, where))


def _returned(output_schema: Mapping[str, Any] | None) -> tuple[bool, Any]:
    if not isinstance(output_schema, Mapping):
        return False, None
    properties = output_schema.get("properties")
    if (
        isinstance(properties, Mapping)
        and list(properties) == ["result"]
        and output_schema.get("required") == ["result"]
    ):
        return True, annotation_of(properties["result"])
    return False, dict


def _docstring(
    description: str, parameters: Sequence[Parameter], output_schema: Mapping[str, Any] | None, unwrap: bool
) -> str:
    summary, rest = summary_and_rest(description)
    lines = [summary or "An upstream MCP tool (it has no description)."]
    if rest:
        lines += ["", rest]
    if parameters:
        lines += ["", "Args:"]
        for p in parameters:
            lines.append(f"    {p.name}: {_argument_text(p)}".rstrip())
    lines += ["", "Returns:", f"    {_returns_text(output_schema, unwrap)}"]
    return "\n".join(lines)


def _argument_text(parameter: Parameter) -> str:
    schema = parameter.schema
    text = " ".join(str(schema.get("description", "")).split())
    if parameter.wire != parameter.name:
        text = f"{text} (sent as {parameter.wire!r})".strip()
    values = schema.get("enum")
    if not isinstance(values, list) and isinstance(schema.get("items"), Mapping):
        values = schema["items"].get("enum")
    if isinstance(values, list) and values:
        shown = ", ".join(repr(v) for v in values[:MAX_ENUM_SHOWN])
        more = f", ... ({len(values) - MAX_ENUM_SHOWN} more)" if len(values) > MAX_ENUM_SHOWN else ""
        text = f"{text} One of: {shown}{more}.".strip()
    limits = [f"{word} {schema[key]}" for key, word in _LIMIT_WORDS.items() if key in schema]
    if limits:
        text = f"{text} ({', '.join(limits)})".strip()
    return text


_LIMIT_WORDS = {
    "minimum": ">=",
    "maximum": "<=",
    "exclusiveMinimum": ">",
    "exclusiveMaximum": "<",
    "minLength": "min length",
    "maxLength": "max length",
    "minItems": "min items",
    "maxItems": "max items",
    "pattern": "matching",
}


def _returns_text(output_schema: Mapping[str, Any] | None, unwrap: bool) -> str:
    if not isinstance(output_schema, Mapping):
        return (
            "The tool's result as data: parsed JSON when it sends JSON, else its text; images and audio as "
            "{type, mimeType, size}; several parts as a list."
        )
    properties = output_schema.get("properties")
    if unwrap and isinstance(properties, Mapping):
        inner = properties["result"]
        described = " ".join(str(inner.get("description", "")).split()) if isinstance(inner, Mapping) else ""
        return f"{type_text(inner)}{': ' + described if described else ''}"
    if not isinstance(properties, Mapping) or not properties:
        return "dict: the tool's structured result."
    fields = []
    for key, schema in properties.items():
        described = " ".join(str(schema.get("description", "")).split()) if isinstance(schema, Mapping) else ""
        fields.append(f"{key} ({type_text(schema)}){': ' + described if described else ''}")
    return "dict with " + "; ".join(fields) + "."


def compile_validator(input_schema: Mapping[str, Any], where: str) -> Any:
    """A JSON Schema validator of the arguments, or None when the schema itself is invalid or holds a regex
    RE2 cannot run (then only the signature checks the call, and the upstream server has the last word)."""
    patterns.install()  # before any validator of this process matches a pattern
    try:
        cls = validators.validator_for(input_schema)
        cls.check_schema(dict(input_schema))
    except (SchemaError, TypeError, ValueError) as exc:
        logger.warning("%s: its inputSchema is not valid JSON Schema, so calls are sent unchecked: %s", where, exc)
        return None
    for pattern in patterns.schema_patterns(input_schema):
        if (why := patterns.unsupported(pattern)) is not None:
            logger.warning(
                "%s: its inputSchema's pattern %.80r needs a backtracking regex engine (%s), so calls are sent "
                "unchecked",
                where,
                pattern,
                why,
            )
            return None
    return cls(dict(input_schema))


def check_arguments(ref: str, shape: ToolShape, arguments: Mapping[str, Any]) -> ErrorInfo | None:
    validator = shape.validator
    if validator is None:
        return None
    wire = shape.wire_arguments(arguments)
    try:
        error = _best(validator.iter_errors(wire))
    except (RecursionError, ValueError, TypeError) as exc:  # a pathological schema or value: let upstream decide
        logger.debug("%s: arguments not checked: %s", ref, exc)
        return None
    if error is None:
        return None
    return _invalid(ref, shape, error, wire)


def _best(errors: Any) -> ValidationError | None:
    from jsonschema.exceptions import best_match

    found: ValidationError | None = best_match(errors)
    return found


def _invalid(ref: str, shape: ToolShape, error: ValidationError, wire: Mapping[str, Any]) -> ErrorInfo:
    path = list(error.absolute_path)
    by_wire = {p.wire: p for p in shape.parameters}
    parameter = by_wire.get(str(path[0])) if path else None
    if parameter is None and error.validator == "required" and isinstance(error.validator_value, list):
        missing = [name for name in error.validator_value if name not in wire]
        parameter = by_wire.get(missing[0]) if missing else None
    name = parameter.name if parameter is not None else None
    place = name + "".join(f"[{p!r}]" for p in path[1:]) if name else "the arguments"
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    info = ErrorInfo(
        code=ErrorCode.INVALID_ARGUMENT,
        message=f"{ref}(): {place} is invalid: {_message(error)}",
        tool_name=ref,
        parameter_name=name,
        received=short_repr(error.instance) if error.validator != "required" else None,
        expected=_expected(error, schema),
        solution=f"Call it as {ref}{shape.signature}; help({ref!r}) describes every parameter.",
    )
    if error.validator == "enum" and isinstance(error.validator_value, list) and error.validator_value:
        options = [str(v) for v in error.validator_value]
        close = suggest(str(error.instance), options, cutoff=0.4)
        info.suggested_value = close if close is not None else options[0]
    return info


def _message(error: ValidationError) -> str:
    text = str(error.message)
    return text if len(text) <= 300 else text[:300] + "..."


def _expected(error: ValidationError, schema: Mapping[str, Any]) -> str:
    kind: Literal["type", "enum", "required"] | str = str(error.validator)
    if kind == "enum" and isinstance(error.validator_value, list):
        return "one of " + ", ".join(repr(v) for v in error.validator_value[:MAX_ENUM_SHOWN])
    if kind == "type":
        return type_text(schema)
    if kind == "required":
        return "every required argument"
    if kind in _LIMIT_WORDS:
        return f"{type_text(schema)} {_LIMIT_WORDS[kind]} {error.validator_value}"
    return f"a value matching the schema's {kind!r} rule ({short_repr(error.validator_value, 80)})"
