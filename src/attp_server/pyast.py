"""Parsing and compiling Python source in the server process, one thread at a time.

CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state. When two threads
build trees at once and the interpreter switches between them mid-tree (a garbage collection running
a finalizer is enough), the count goes wrong and ``ast.parse`` or ``compile`` raises
``SystemError: AST constructor recursion depth mismatch`` for a valid program (python/cpython#106905).
The server checks programs on worker threads, so every parse and compile of the server goes through
this module's lock. Workers parse in their own process, one program at a time, and need none.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    """``ast.parse(source)``, serialised with every other parse and compile of the server."""
    with _LOCK:
        return ast.parse(source, mode="exec")


def compile_tree(tree: ast.Module, filename: str, flags: int = 0) -> None:
    """Compile `tree` (never run it) for the compiler's own errors, serialised like `parse`."""
    with _LOCK:
        compile(tree, filename, "exec", flags=flags, dont_inherit=True)
