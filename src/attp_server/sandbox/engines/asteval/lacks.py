"""What asteval's language lacks, found before a program runs: each construct with what to write instead.

asteval has no handler for some nodes (``class``, generator expressions, ``global``, ``*`` unpacking, ...),
and it gets a few others wrong without a word (``{**a}`` builds a ``None`` key, ``except (A, B)`` and a bare
``raise`` fail with an unrelated error, keyword-only parameters are dropped). A program holding one is
refused before anything of it runs (so no tool was half called), with the line and what to write instead;
`UNSUPPORTED` also names the nodes asteval reports at run time (`failures`).

Runs in the worker; imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

import ast

UNSUPPORTED: dict[str, str] = {
    "classdef": "class is not part of asteval's language: keep records in dicts and write functions",
    "generatorexp": "generator expressions are not part of asteval's language: write a list comprehension, "
    "e.g. sum([x * x for x in xs])",
    "yield": "yield is not part of asteval's language: build a list and return it",
    "yieldfrom": "yield is not part of asteval's language: build a list and return it",
    "global": "global is not part of asteval's language, and a function's assignments never reach the module: "
    "return the value, or change a dict or list the module holds",
    "nonlocal": "nonlocal is not part of asteval's language: return the value, or change a dict or list",
    "starred": "star unpacking (*items) is not part of asteval's language: pass the items one by one, or use "
    "slices (first, rest = items[0], items[1:])",
    "namedexpr": "the := operator is not part of asteval's language: assign on a line of its own first",
    "annassign": "annotated assignments (x: int = 1) are not part of asteval's language: write x = 1",
    "asyncfunctiondef": "async is not part of asteval's language: call the tools directly, or use parallel()",
    "await": "await is not part of asteval's language: call the tools directly, or use parallel()",
    "asyncfor": "async is not part of asteval's language",
    "asyncwith": "async is not part of asteval's language",
    "match": "match is not part of asteval's language: use if/elif",
    "trystar": "except* is not part of asteval's language: use except",
    "typealias": "type aliases are not part of asteval's language",
}
"""asteval's names of the nodes it has no handler for (the node class in lower case) -> what to write instead."""

DICT_UNPACKING = "{**mapping} is not part of asteval's language: write dict(a, key=value), or copy and update()"
EXCEPT_TUPLE = "asteval matches one class per except clause: write one except clause per class"
BARE_RAISE = "a bare raise is not part of asteval's language: raise an exception, e.g. raise ValueError('...')"
RAISE_FROM = "raise ... from ... is not part of asteval's language: raise the new exception alone"
KEYWORD_ONLY = "keyword-only parameters (after * in a def) are not part of asteval's language: drop the *"
POSITIONAL_ONLY = "positional-only parameters (before / in a def) are not part of asteval's language: drop the /"
DECORATOR = "decorators are not part of asteval's language: call the function, f = decorate(f)"
ASYNC_COMPREHENSION = "async comprehensions are not part of asteval's language"


def lacking(tree: ast.AST) -> tuple[str, ast.AST] | None:
    """The first construct in `tree` that asteval cannot run as Python would, with the node it is at."""
    for node in ast.walk(tree):
        name = node.__class__.__name__.lower()
        if name in UNSUPPORTED:
            return UNSUPPORTED[name], node
        problem = _wrong(node)
        if problem is not None:
            return problem, node
    return None


def _wrong(node: ast.AST) -> str | None:
    """Why asteval would run `node` differently from Python, or None."""
    if isinstance(node, ast.Dict) and any(key is None for key in node.keys):
        return DICT_UNPACKING
    if isinstance(node, ast.ExceptHandler) and node.type is not None and not isinstance(node.type, ast.Name):
        return EXCEPT_TUPLE
    if isinstance(node, ast.Raise):
        return BARE_RAISE if node.exc is None else RAISE_FROM if node.cause is not None else None
    if isinstance(node, ast.FunctionDef | ast.Lambda):
        if node.args.kwonlyargs:
            return KEYWORD_ONLY
        if node.args.posonlyargs:
            return POSITIONAL_ONLY
    if isinstance(node, ast.FunctionDef) and node.decorator_list:
        return DECORATOR
    if isinstance(node, ast.comprehension) and node.is_async:
        return ASYNC_COMPREHENSION
    return None
