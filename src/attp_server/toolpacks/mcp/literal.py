"""Text that is a Python literal, read as data: what many older Python servers send for rows.

``mcp-server-sqlite`` and its kind answer with ``str(rows)``: ``[{'id': 1, 'note': None}]``, single
quotes and ``None``, which JSON refuses. `python_literal` reads such text as data when it is exactly
one list, dict or tuple of plain values (str, int, float, bool, None and those containers; a set is
read as a list) and returns None for anything else, which then stays text.

Nothing is evaluated: the text is parsed into a syntax tree and only the nodes of plain literals are
accepted (a name, a call, an attribute, an operator other than a sign on a number, bytes or a
complex number make it text). The work is bounded: the caller has measured the text against the
server's ``max_result_bytes`` before, Python's parser refuses nesting past 200 brackets, and the
walk stops at `MAX_DEPTH` levels, the limit of the JSON path.
"""

from __future__ import annotations

import ast
from typing import Any

MAX_DEPTH = 100
"""Deepest nesting accepted, as for JSON results (content.MAX_DEPTH)."""
STARTS = "[{("


class _NotPlain(Exception):
    """The text is not a plain literal (it stays text)."""


def python_literal(text: str) -> Any:
    """The list or dict a Python literal `text` spells (a tuple as a list), or None when it is not one."""
    stripped = text.strip()
    if not stripped or stripped[0] not in STARTS:
        return None
    try:
        tree = ast.parse(stripped, mode="eval")
        value = _value(tree.body, 0)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError, _NotPlain):
        return None
    return value if isinstance(value, list | dict) else None


def _value(node: ast.AST, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise _NotPlain
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, str | bool | int | float):
            return node.value
        raise _NotPlain  # bytes, complex, Ellipsis
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = node.operand
        number = operand.value if isinstance(operand, ast.Constant) else None
        if not isinstance(number, int | float) or isinstance(number, bool):
            raise _NotPlain
        return -number if isinstance(node.op, ast.USub) else number
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_value(item, depth + 1) for item in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if key is None:  # ``{**other}``
                raise _NotPlain
            name = _value(key, depth + 1)
            if isinstance(name, list | dict):
                raise _NotPlain
            out[name] = _value(item, depth + 1)
        return out
    raise _NotPlain
