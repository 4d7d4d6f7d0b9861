"""The compiler's one table: every AST node a program may hold, and the function that compiles it.

A node class missing here is refused when the program is compiled (``Forbidden``: "... is not available in the
sandbox"); the static check (`attp_server.sandbox.policy`) refuses most of them earlier with a better message.
The table is written out here, whole, and handed to each `Context` by the evaluator: no compiler module
registers itself when imported, so what compiles is what this file says, whichever modules were imported first.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from attp_server.sandbox.engines.python import (
    arithmetic,
    calls,
    control,
    definitions,
    displays,
    expressions,
    imports,
    statements,
)
from attp_server.sandbox.engines.python.expressions import Context, Eval
from attp_server.sandbox.engines.python.statements import Stmt


@dataclass(frozen=True)
class Compilers:
    """Node class -> compiler, for expressions and for statements."""

    expressions: Mapping[type, Callable[[Context, Any], Eval]]
    statements: Mapping[type, Callable[[Context, Any], Stmt]]


COMPILERS = Compilers(
    expressions=MappingProxyType(
        {
            ast.Name: expressions.compile_name,
            ast.Constant: expressions.compile_constant,
            ast.UnaryOp: expressions.compile_unaryop,
            ast.BoolOp: expressions.compile_boolop,
            ast.IfExp: expressions.compile_ifexp,
            ast.NamedExpr: expressions.compile_namedexpr,
            ast.BinOp: arithmetic.compile_binop,
            ast.Compare: arithmetic.compile_compare,
            ast.Call: calls.compile_call,
            ast.Attribute: displays.compile_attribute,
            ast.Subscript: displays.compile_subscript,
            ast.Slice: displays.compile_slice,
            ast.List: displays.compile_list,
            ast.Tuple: displays.compile_tuple,
            ast.Set: displays.compile_set,
            ast.Dict: displays.compile_dict,
            ast.Starred: displays.compile_starred,
            ast.FormattedValue: displays.compile_formatted,
            ast.JoinedStr: displays.compile_joinedstr,
            ast.Lambda: definitions.compile_lambda,
            ast.ListComp: definitions.compile_listcomp,
            ast.SetComp: definitions.compile_setcomp,
            ast.DictComp: definitions.compile_dictcomp,
            ast.GeneratorExp: definitions.compile_generatorexp,
        }
    ),
    statements=MappingProxyType(
        {
            ast.FunctionDef: definitions.compile_functiondef,
            ast.Expr: statements.compile_expression_statement,
            ast.Assign: statements.compile_assign,
            ast.AnnAssign: statements.compile_annassign,
            ast.AugAssign: statements.compile_augassign,
            ast.Delete: statements.compile_delete,
            ast.Assert: statements.compile_assert,
            ast.Pass: statements.compile_pass,
            ast.Break: statements.compile_break,
            ast.Continue: statements.compile_continue,
            ast.Global: statements.compile_declaration,
            ast.Nonlocal: statements.compile_declaration,
            ast.Raise: statements.compile_raise,
            ast.With: statements.refused("'with' blocks are not available; files are read and written with tools"),
            ast.Return: control.compile_return,
            ast.If: control.compile_if,
            ast.For: control.compile_for,
            ast.While: control.compile_while,
            ast.Try: control.compile_try,
            ast.Import: imports.compile_import,
            ast.ImportFrom: imports.compile_importfrom,
        }
    ),
)
"""The table every evaluator compiles with."""
