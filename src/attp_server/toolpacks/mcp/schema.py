"""An upstream tool's JSON Schemas as a Python signature, a docstring and an argument check.

``inputSchema`` gives the parameters (required ones first, in the order the schema lists them, then
the optional ones with their defaults), their types (integer -> int, number -> float, string -> str,
boolean -> bool, array -> list[...], object -> dict) and the Args section (description, allowed
values). ``outputSchema`` gives the return type and the Returns section. The description's first
sentence is the summary the catalog shows.

Calls are checked against the ``inputSchema`` itself (the `jsonschema` library, which the MCP SDK
also uses) before anything is sent, so the model gets ``INVALID_ARGUMENT`` naming the parameter,
what was expected, what it sent and, for a value outside an enum, the closest allowed value.
"""

from __future__ import annotations

import inspect
import keyword
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ForwardRef, Literal, NotRequired, TypedDict, Union

from jsonschema import SchemaError, ValidationError, validators

from attp_server.errors import ErrorCode, ErrorInfo, short_repr, suggest
from attp_server.toolpack import annotation_text

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


MAX_SHAPE_DEPTH = 6
"""Object schemas nested deeper than this inside one parameter are typed ``dict``."""
MAX_SHAPES = 60
"""Object schemas turned into shapes per schema (the rest are ``dict``): a huge schema costs bounded work."""
MAX_SHAPE_KEYS = 24
"""Keys of one object schema shown in its shape; past it the shape is ``dict``."""
MAX_LITERALS = 8
"""An enum of at most this many plain values is typed ``Literal[...]``; a longer one by its values' types."""


class _Shapes:
    """Turns the schemas of one tool into Python types, resolving local ``$ref`` within its root schema.

    A ``$ref`` met again inside itself (a tree of nodes) becomes a forward reference, read as the
    referenced definition's name; nesting past `MAX_SHAPE_DEPTH` and shapes past `MAX_SHAPES` are ``dict``.
    """

    def __init__(self, root: Any) -> None:
        self.root = root if isinstance(root, Mapping) else {}
        self.made = 0
        self.chain: list[str] = []

    def resolve(self, schema: Any) -> Any:
        """`schema` with a local ``$ref`` followed (once: a chain of refs is followed by the caller)."""
        if not isinstance(schema, Mapping):
            return {}
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return schema
        target = _pointer(self.root, ref)
        if not isinstance(target, Mapping):
            return {}
        extra = {k: v for k, v in schema.items() if k != "$ref"}
        return {**target, **extra} if extra else target

    def annotation(self, schema: Any, depth: int = 0) -> Any:
        if not isinstance(schema, Mapping):
            return Any
        ref = schema.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1] or "Shape"
            if ref in self.chain or len(self.chain) >= MAX_SHAPE_DEPTH:
                return ForwardRef(identifier(name))
            self.chain.append(ref)
            try:
                return self.annotation(self.resolve(schema), depth)
            finally:
                self.chain.pop()
        kind = schema.get("type")
        if isinstance(kind, list):
            return _union([self.annotation({**schema, "type": k}, depth) for k in kind if isinstance(k, str)])
        values = schema.get("enum")
        if isinstance(values, list) and values:
            return _literal(values) or _union([type(v) if v is not None else type(None) for v in values])
        if kind == "array":
            items = schema.get("items")
            if isinstance(items, Mapping) and items:
                return list[self.annotation(items, depth + 1)]  # type: ignore[misc]
            return list
        if kind == "object" or (kind is None and "properties" in schema):
            return self._object(schema, depth)
        if isinstance(kind, str) and kind in _SCALARS:
            return _SCALARS[kind]
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                return _union([self.annotation(b, depth) for b in branches])
        branches = schema.get("allOf")
        if isinstance(branches, list) and len(branches) == 1:
            return self.annotation(branches[0], depth)
        if "const" in schema:
            return _literal([schema["const"]]) or type(schema["const"])
        return Any

    def _object(self, schema: Mapping[str, Any], depth: int) -> Any:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping) or not properties:
            extra = schema.get("additionalProperties")
            if isinstance(extra, Mapping) and extra:
                return dict[str, self.annotation(extra, depth + 1)]  # type: ignore[misc]
            return dict
        if depth >= MAX_SHAPE_DEPTH or self.made >= MAX_SHAPES or len(properties) > MAX_SHAPE_KEYS:
            return dict
        self.made += 1
        required = schema.get("required")
        needed = set(required) if isinstance(required, list) else set()
        fields: dict[str, Any] = {}
        for key, value in properties.items():
            annotation = self.annotation(value, depth + 1)
            fields[str(key)] = annotation if key in needed else NotRequired[annotation]
        name = self.chain[-1].rsplit("/", 1)[-1] if self.chain else str(schema.get("title") or "Shape")
        return TypedDict(identifier(name), fields)  # type: ignore[operator]


def _pointer(root: Mapping[str, Any], ref: str) -> Any:
    """The part of `root` a local JSON pointer (``#/$defs/Node``) names; None for any other reference."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for raw in ref[1:].split("/")[1:] if ref != "#" else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _literal(values: Sequence[Any]) -> Any:
    """``Literal[...]`` of an enum's values, when they are few and plain (str, int, bool, None)."""
    if len(values) > MAX_LITERALS or not all(v is None or isinstance(v, str | int | bool) for v in values):
        return None
    unique = tuple(dict.fromkeys(values))
    return Literal[unique]


def annotation_of(schema: Any, root: Any = None) -> Any:
    """The Python type a JSON Schema describes, for the signature the model reads (Any when it says nothing).

    Objects with properties become shapes (TypedDicts, shown as ``{name: str, tags?: list[str]}``),
    enums ``Literal[...]``; `root` is the schema local ``$ref``s point into (`schema` itself by default).
    """
    return _Shapes(schema if root is None else root).annotation(schema)


def type_text(schema: Any, root: Any = None) -> str:
    """A short type name of a schema for messages: ``str``, ``list[int]``, ``int | None``."""
    return annotation_text(annotation_of(schema, root))


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


def _union(types: Sequence[Any]) -> Any:
    unique = list(dict.fromkeys(types))
    if not unique or Any in unique:
        return Any
    result = unique[0]
    for other in unique[1:]:
        try:
            result = result | other
        except TypeError:  # a forward reference (a schema inside itself) has no ``|``
            return Union[tuple(unique)]  # noqa: UP007
    return result


def shape_of(
    description: str | None, input_schema: Mapping[str, Any], output_schema: Mapping[str, Any] | None, where: str
) -> ToolShape:
    """Build the signature and docstring of a tool from its MCP definition."""
    shapes = _Shapes(input_schema)
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
        annotation = shapes.annotation(p.schema)
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
    doc = _docstring(description or "", ordered, shapes, output_schema, unwrap)
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
        return True, annotation_of(properties["result"], output_schema)
    shaped = annotation_of(output_schema)
    return False, shaped if shaped is not Any else dict


def _docstring(
    description: str,
    parameters: Sequence[Parameter],
    shapes: _Shapes,
    output_schema: Mapping[str, Any] | None,
    unwrap: bool,
) -> str:
    summary, rest = summary_and_rest(description)
    lines = [summary or "An upstream MCP tool (it has no description)."]
    if rest:
        lines += ["", rest]
    if parameters:
        lines += ["", "Args:"]
        for p in parameters:
            schema = shapes.resolve(p.schema)
            note = _note(schema, f"(sent as {p.wire!r})" if p.wire != p.name else "")
            lines.append(f"    {p.name}: {note}".rstrip())
            lines += _field_lines(shapes, p.schema, "        ", 1, [MAX_FIELD_LINES])
    lines += ["", "Returns:", f"    {_returns_text(output_schema, unwrap)}"]
    return "\n".join(lines)


MAX_FIELD_DEPTH = 3
"""Levels of nested fields listed under a parameter in Args."""
MAX_FIELD_LINES = 40
"""Nested field lines listed under one parameter in Args."""


def _field_lines(
    shapes: _Shapes,
    schema: Mapping[str, Any],
    indent: str,
    depth: int,
    left: list[int],
    *,
    seen: frozenset[str] = frozenset(),
) -> list[str]:
    """One line per key of the object `schema` describes (through arrays and optional branches), each with
    its description (its type when it has none), and the keys of its own nested objects below it, indented.
    A definition met again inside itself is not listed again."""
    found = _object_inside(shapes, schema)
    if found is None or depth > MAX_FIELD_DEPTH:
        return []
    inner, refs = found
    if refs & seen:
        return []
    seen = seen | refs
    required = inner.get("required")
    needed = required if isinstance(required, list) else []
    lines: list[str] = []
    for key, value in inner["properties"].items():
        if left[0] <= 0:
            lines.append(f"{indent}...")
            break
        left[0] -= 1
        field = shapes.resolve(value)
        optional = "" if key in needed else " (optional)"
        note = _note(field) or _type_within(shapes.root, value, seen)
        lines.append(f"{indent}{key}{optional}: {note}".rstrip())
        lines += _field_lines(shapes, value, indent + "    ", depth + 1, left, seen=seen)
    return lines


def _type_within(root: Any, schema: Any, seen: frozenset[str]) -> str:
    """The type text of `schema` inside the definitions `seen` (which read as their names)."""
    shapes = _Shapes(root)
    shapes.chain = sorted(seen)
    return annotation_text(shapes.annotation(schema))


def _object_inside(shapes: _Shapes, schema: Any) -> tuple[Mapping[str, Any], frozenset[str]] | None:
    """The object schema with properties that `schema` is, or holds as its items or as a non-null branch,
    with the ``$ref``s followed to reach it."""
    refs: set[str] = set()
    for _ in range(MAX_SHAPE_DEPTH):
        if isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
            refs.add(schema["$ref"])
        schema = shapes.resolve(schema)
        if isinstance(schema.get("properties"), Mapping) and schema["properties"]:
            return schema, frozenset(refs)
        if isinstance(schema.get("items"), Mapping):
            schema = schema["items"]
            continue
        branches = [b for key in ("anyOf", "oneOf", "allOf") for b in schema.get(key) or [] if isinstance(b, Mapping)]
        branches = [b for b in branches if b.get("type") != "null"]
        if len(branches) != 1:
            return None
        schema = branches[0]
    return None


def _note(schema: Mapping[str, Any], aside: str = "") -> str:
    """A schema's description (and `aside`), allowed values and limits, on one line."""
    text = " ".join([*str(schema.get("description", "")).split(), aside]).strip()
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
            "The tool's result as data: parsed when it sends JSON or a Python literal of a list or dict (as "
            "str(rows) gives), else its text; images and audio as {type, mimeType, size}; several parts as a list."
        )
    properties = output_schema.get("properties")
    if unwrap and isinstance(properties, Mapping):
        inner = properties["result"]
        described = " ".join(str(inner.get("description", "")).split()) if isinstance(inner, Mapping) else ""
        return f"{type_text(inner, output_schema)}{': ' + described if described else ''}"
    if not isinstance(properties, Mapping) or not properties:
        return "dict: the tool's structured result."
    fields = []
    for key, schema in properties.items():
        described = " ".join(str(schema.get("description", "")).split()) if isinstance(schema, Mapping) else ""
        fields.append(f"{key} ({type_text(schema, output_schema)}){': ' + described if described else ''}")
    return "dict with " + "; ".join(fields) + "."


def compile_validator(input_schema: Mapping[str, Any], where: str) -> Any:
    """A JSON Schema validator of the arguments, or None when the schema itself is invalid (then only the
    signature checks the call, and the upstream server has the last word)."""
    try:
        cls = validators.validator_for(input_schema)
        cls.check_schema(dict(input_schema))
        return cls(dict(input_schema))
    except (SchemaError, TypeError, ValueError, RecursionError) as exc:
        logger.warning("%s: its inputSchema is not valid JSON Schema, so calls are sent unchecked: %s", where, exc)
        return None


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
