"""ATDF 2.x descriptors of tools (seed 001), valid against the ATDF enhanced schema.

Everything comes from the tool's signature and Google-style docstring, nothing is invented:

* ``description`` is the summary plus any free text of the docstring; ``when_to_use`` is built from
  the summary;
* ``how_to_use.inputs`` has one entry per parameter: the JSON type of its annotation, ``required``
  when it has no default, the Args text, and a ``schema`` (the pydantic JSON Schema the server
  validates calls with, plus the ``default``). The schema allows no other keys on an input, so the
  default lives in ``schema``;
* ``how_to_use.outputs.failure`` has one entry per error code the Raises section names
  (``ToolError: FILE_NOT_FOUND (why), ...``), then the two failures every tool call can have:
  ``INVALID_ARGUMENT`` (arguments checked against the signature) and ``TOOL_ERROR`` (any other
  exception). A failure allows only ``code`` and ``description``, so a solution the docstring gives
  is part of the description;
* ``examples`` holds the calls of the tool found in the Example section whose arguments are
  literals, with the doctest output as ``expected_result`` when there is one;
* ``metadata`` has the toolpack as ``category``, the version and author of the distribution that
  ships the tool (when one does), tags, and the Python signature.

The schema has no multi-tool form, so `atdf_catalog` is a plain list of descriptors.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import inspect
import json
import re
import sys
import textwrap
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic.errors import PydanticInvalidForJsonSchema

from attp_server import pyast
from attp_server.model.docstrings import Docstring, parse_docstring
from attp_server.toolpack import Tool, annotation_text, installed_toolpacks

SCHEMA_VERSION = "2.0.0"
"""The ATDF version the descriptors follow (the enhanced schema, seed 001)."""

_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
_CODE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*")
_SNAKE_CODE = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
_ADVERBS = frozenset({"always", "sometimes", "perhaps"})
_NOT_VERBS = frozenset({"an", "the", "this", "that", "these", "those", "it", "its", "each", "every", "some", "one"})
_CONNECTORS = ("when ", "if ", "on ", "for ", "because ", "unless ", "while ", "after ", "before ")


def atdf_descriptor(tool: Tool) -> dict[str, Any]:
    """The ATDF 2.x descriptor of one tool, as JSON-compatible data."""
    doc = parse_docstring(tool.doc)
    success = _success(tool, doc)
    descriptor: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool_id": tool.ref,
        "name": tool.ref,
        "description": _description(tool, doc),
        "when_to_use": _when_to_use(tool, doc),
        "how_to_use": {
            "inputs": [_input(tool, parameter, doc) for parameter in _parameters(tool)],
            "outputs": {"success": success, "failure": _failures(tool, doc)},
        },
        "prerequisites": {
            "conditions": [
                "Call it inside an attp_execute program, as "
                + (f"{tool.ref}(...)" if tool.qualified else f"{tool.name}(...) or {tool.pack}.{tool.name}(...)")
                + "; no import is needed."
            ]
        },
        "metadata": _metadata(tool),
    }
    examples = list(_examples(tool, doc, _first_sentence(success)))
    if examples:
        descriptor["examples"] = examples
    return descriptor


def atdf_catalog(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """The descriptors of several tools, in order (ATDF defines no multi-tool document)."""
    return [atdf_descriptor(tool) for tool in tools]


def _description(tool: Tool, doc: Docstring) -> str:
    if not doc.summary:
        return f"{tool.name}, a tool of the {tool.pack} toolpack (undocumented): {tool.signature_text()}"
    return f"{doc.summary}\n\n{doc.description}" if doc.description else doc.summary


def _when_to_use(tool: Tool, doc: Docstring) -> str:
    """An imperative summary ("Read a file.") reads as "When you need to read a file."; others get a neutral lead-in."""
    if not doc.summary:
        return f"When a task needs {tool.name}; it has no docstring, so judge from its signature."
    first = doc.summary.split()[0]
    third_person = first.endswith("s") and not first.endswith("ss") and first.lower() not in _ADVERBS
    capitalized = first[:1].isupper() and first[1:].isalpha() and first[1:].islower()
    if capitalized and not third_person and first.lower() not in _NOT_VERBS:
        return f"When you need to {first.lower()}{doc.summary[len(first) :]}"
    return f"When you need this: {doc.summary}"


def _parameters(tool: Tool) -> list[inspect.Parameter]:
    """The parameters a call can name; ``*args``/``**kwargs`` have no place in ATDF inputs."""
    return [p for p in tool.signature.parameters.values() if p.kind not in _VARIADIC]


def _input(tool: Tool, parameter: inspect.Parameter, doc: Docstring) -> dict[str, Any]:
    schema = _json_schema(tool, parameter.name)
    required = parameter.default is inspect.Parameter.empty
    entry: dict[str, Any] = {"name": parameter.name, "type": _json_type(schema, schema.get("$defs", {}))}
    text = doc.args.get(parameter.name, "")
    if not required:
        separator = " " if not text or text.endswith((".", "!", "?", "。", ")")) else ". "
        text = f"{text}{separator}Optional (default {parameter.default!r}).".strip()
        default = _json_value(parameter.default)
        if default is not _NO_JSON:
            schema["default"] = default
    if text:
        entry["description"] = text
    entry["required"] = required
    if schema:
        entry["schema"] = schema
    return entry


def _json_schema(tool: Tool, name: str) -> dict[str, Any]:
    """The JSON Schema of the parameter's annotation ({} when it has none or it cannot be expressed)."""
    adapter = tool.adapters.get(name)
    if adapter is None:
        return {}
    try:
        return dict(adapter.json_schema())
    except PydanticInvalidForJsonSchema:
        return {}


def _json_type(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    """The JSON type name of a schema: "string", "integer", ...; "string|integer" for unions; "any" if free."""
    if "$ref" in schema:
        return _json_type(defs.get(str(schema["$ref"]).rsplit("/", 1)[-1], {}), defs)
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        return _union([str(k) for k in kind])
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list):
            return _union([_json_type(branch, defs) for branch in schema[key]])
    values = schema["enum"] if "enum" in schema else [schema["const"]] if "const" in schema else None
    if values:
        return _union([_value_type(v) for v in values])
    return "any"


def _union(types: list[str]) -> str:
    """Join branch types; ``X | None`` is just X (optional is said by ``required``/the schema)."""
    unique = list(dict.fromkeys(types))
    if "any" in unique:
        return "any"
    return "|".join([t for t in unique if t != "null"] or unique)


def _value_type(value: object) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}
    return names.get(type(value), "array" if isinstance(value, list) else "object")


_NO_JSON = object()


def _json_value(value: object) -> object:
    """`value` as plain JSON data, or `_NO_JSON` when it has no JSON form (a Path, an object)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return _NO_JSON


def _type_text(annotation: Any) -> str:
    return annotation_text(annotation)


def _success(tool: Tool, doc: Docstring) -> str:
    annotation = tool.signature.return_annotation
    returned = None if annotation is inspect.Signature.empty else _type_text(annotation)
    if doc.returns:
        if returned and not doc.returns.startswith(returned):
            return f"Returns {returned}: {doc.returns}"
        return doc.returns
    if returned == "None":
        return "Completes without a result (returns None)."
    if returned:
        return f"Returns {returned}."
    return "Returns a JSON-compatible value (not documented)."


def _first_sentence(text: str) -> str:
    first = text.split("\n", 1)[0]
    cut = first.find(". ")
    return first[: cut + 1] if cut >= 0 else first


def _failures(tool: Tool, doc: Docstring) -> list[dict[str, str]]:
    failures: dict[str, str] = {}
    others: list[str] = []
    for exception, text in doc.raises:
        codes = _codes(text) if exception.rsplit(".", 1)[-1] == "ToolError" else []
        for code, description in codes:
            failures.setdefault(code, description)
        if not codes:
            others.append(f"{exception}: {text.rstrip('.')}" if text else exception)
    failures.setdefault(
        "INVALID_ARGUMENT",
        f"The arguments do not fit {tool.signature_text()}; parameter_name, received and expected say which "
        "one and why.",
    )
    unexpected = "Any other failure inside the tool; the message names the exception."
    failures.setdefault("TOOL_ERROR", f"{unexpected} Documented: {'; '.join(others)}." if others else unexpected)
    return [{"code": code, "description": description} for code, description in failures.items()]


def _codes(text: str) -> list[tuple[str, str]]:
    """(CODE, description) for each error code a ToolError Raises entry lists.

    The usual form is ``CODE (why), CODE when ..., CODE``: a comma- or semicolon-separated list of
    codes each followed by an optional explanation. Pieces that do not start with a code continue
    the explanation before them. Codes named only in running text are taken without explanation.
    """
    entries: list[tuple[str, list[str]]] = []
    for piece in _split_top_level(text.strip().rstrip(".")):
        code = _leading_code(piece)
        if code is not None:
            entries.append((code, [piece[len(code) :].strip()]))
        elif entries:
            entries[-1][1].append(piece)
        else:
            entries.extend((found, []) for found in _SNAKE_CODE.findall(piece))
    return [(code, _failure_text(code, ", ".join(p for p in parts if p))) for code, parts in entries]


def _split_top_level(text: str) -> Iterator[str]:
    """Split at commas, semicolons and ``or``/``and`` before a code, outside parentheses."""
    depth, start = 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(char, 0)
        if char in ",;" and depth == 0:
            yield from _split_conjunctions(text[start:index])
            start = index + 1
    yield from _split_conjunctions(text[start:])


def _split_conjunctions(piece: str) -> Iterator[str]:
    for part in re.split(r"(?:^|\s+)(?:or|and)\s+(?=[A-Z][A-Z0-9]*_)", piece.strip()):
        if part.strip():
            yield part.strip()


def _leading_code(piece: str) -> str | None:
    """The UPPER_SNAKE code `piece` starts with; a code without "_" must stand alone ("TIMEOUT (why)")."""
    match = _CODE.match(piece)
    if match is None or len(match[0]) < 2:
        return None
    code, after = match[0], piece[match.end() :]
    if after and after[0].isalnum():
        return None
    if "_" in code or not after.strip() or after.strip()[0] in "(:-—–":
        return code
    return None


def _failure_text(code: str, explanation: str) -> str:
    """``FILE_NOT_FOUND`` and "(why)" make "File not found: why."; parentheses and leading dashes are dropped."""
    words = code.replace("_", " ").lower()
    title = words[:1].upper() + words[1:]
    text = explanation.strip().lstrip(":-—– ").strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    if not text:
        return f"{title}."
    text = text.rstrip(".")
    return f"{title} {text}." if text.startswith(_CONNECTORS) else f"{title}: {text}."


def _examples(tool: Tool, doc: Docstring, expected: str) -> Iterator[dict[str, Any]]:
    """One ATDF example per call of the tool, with literal arguments, in the Example section."""
    for block in doc.examples:
        for source, output in _statements(block):
            for call, values, comment in _literal_calls(tool, source):
                goal = comment or f"{doc.summary.rstrip('.') or tool.name}: {call}"
                yield {"goal": goal, "input_values": values, "expected_result": output or expected}


def _statements(block: str) -> list[tuple[str, str]]:
    """(source, expected output) pairs: one per ``>>>`` statement of a doctest, else the whole block."""
    lines = block.splitlines()
    if not any(line.lstrip().startswith(">>>") for line in lines):
        return [(block, "")]
    pairs: list[tuple[list[str], list[str]]] = []
    for line in lines:
        text = line.strip()
        if text.startswith(">>>"):
            pairs.append(([text[4:]], []))
        elif text.startswith("...") and pairs and not pairs[-1][1]:
            pairs[-1][0].append(text[4:])
        elif pairs and text:
            pairs[-1][1].append(text)
    return [("\n".join(source), "\n".join(output)) for source, output in pairs]


def _literal_calls(tool: Tool, source: str) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(call text, arguments by name, trailing comment) of each call whose arguments are all literals."""
    for code in _parsable(source):
        tree = pyast.parse(code)
        calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and _calls_tool(node, tool)]
        lines = code.splitlines()
        for call in sorted(calls, key=lambda node: (node.lineno, node.col_offset)):
            values = _bind_literals(tool, call)
            if values is None:
                continue
            text = ast.get_source_segment(code, call) or ""
            comment = ""
            if call.end_lineno == call.lineno and call.end_col_offset is not None:
                tail = lines[call.lineno - 1][call.end_col_offset :]
                comment = tail.split("#", 1)[1].strip() if "#" in tail else ""
            yield text, values, comment


def _parsable(source: str) -> list[str]:
    """The source as one program, or its lines that parse on their own when the whole does not."""
    source = textwrap.dedent(source)
    try:
        pyast.parse(source)
    except SyntaxError:
        out = []
        for line in source.splitlines():
            try:
                pyast.parse(line.strip())
            except SyntaxError:
                continue
            out.append(line.strip())
        return out
    return [source]


def _calls_tool(call: ast.Call, tool: Tool) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id == tool.name
    return (
        isinstance(func, ast.Attribute)
        and func.attr == tool.name
        and isinstance(func.value, ast.Name)
        and func.value.id == tool.pack
    )


def _bind_literals(tool: Tool, call: ast.Call) -> dict[str, Any] | None:
    """The call's arguments by parameter name, or None if one is not a literal or they do not fit."""
    try:
        args = [ast.literal_eval(arg) for arg in call.args]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg is not None}
        if len(kwargs) != len(call.keywords):
            return None
        bound = tool.signature.bind(*args, **kwargs)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    values = {name: _json_value(value) for name, value in bound.arguments.items()}
    return None if any(value is _NO_JSON for value in values.values()) else values


def _metadata(tool: Tool) -> dict[str, Any]:
    metadata: dict[str, Any] = {"category": tool.pack}
    module = str(getattr(tool.function, "__module__", "") or "")
    distribution = _distribution(module.split(".", 1)[0]) if module else None
    if distribution is not None:
        metadata["version"] = distribution.version
        # get_all, not [...]: a missing key is deprecated there (3.12) and would warn.
        authors = distribution.metadata.get_all("Author") or distribution.metadata.get_all("Author-email") or []
        if authors:
            metadata["author"] = ", ".join(str(a) for a in authors)
    elif isinstance(version := getattr(sys.modules.get(module), "__version__", None), str):
        metadata["version"] = version
    metadata["tags"] = list(dict.fromkeys([tool.pack, *(w for w in tool.name.lower().split("_") if w)]))
    metadata["signature"] = tool.signature_text()
    return metadata


@functools.cache
def _distribution(package: str) -> importlib.metadata.Distribution | None:
    """The installed distribution that ships the top-level `package`: by its files, else by its toolpack entry point.

    Editable installs list no package files, so the entry point (``attp.toolpacks``) is the link.
    """
    names = importlib.metadata.packages_distributions().get(package, [])
    for name in names:
        try:
            return importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    for entry_point in installed_toolpacks():
        if entry_point.module.split(".", 1)[0] == package and entry_point.dist is not None:
            return entry_point.dist
    return None
