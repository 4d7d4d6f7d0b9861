"""The engine's one table: every AST node a program may hold, and what the rewrite makes of it.

`rules.native` keeps a node as CPython runs it (its children rewritten); the other rules put a guard
(`guards`) where the policy needs one; `rules.refused` ends the rewrite with the message the static check
gives for that node. A node class missing here is refused too ("... is not available in the sandbox"). The table
is written out here, whole, and handed to each `Transformer` by the evaluator: nothing registers itself when
imported, so what a program becomes is what this file says, whichever modules were imported first.
"""

from __future__ import annotations

import ast
from types import MappingProxyType

from attp_server.sandbox.engines.python import rules
from attp_server.sandbox.engines.python.rules import native, refused
from attp_server.sandbox.engines.python.transform import Rewrites

REWRITES = Rewrites(
    expressions=MappingProxyType(
        {
            ast.Name: rules.name_,
            ast.Constant: native,
            ast.UnaryOp: native,
            ast.BoolOp: native,
            ast.IfExp: native,
            ast.NamedExpr: native,
            ast.Compare: native,
            ast.BinOp: rules.binop,
            ast.Call: rules.call,
            ast.Attribute: rules.attribute,
            ast.Subscript: native,
            ast.Slice: native,
            ast.List: native,
            ast.Tuple: native,
            ast.Set: native,
            ast.Dict: native,
            ast.Starred: native,
            ast.FormattedValue: rules.formatted,
            ast.JoinedStr: native,
            ast.Lambda: rules.lambda_,
            ast.ListComp: rules.comprehension,
            ast.SetComp: rules.comprehension,
            ast.DictComp: rules.comprehension,
            ast.GeneratorExp: rules.comprehension,
            ast.Await: refused,
            ast.Yield: refused,
            ast.YieldFrom: refused,
        }
    ),
    statements=MappingProxyType(
        {
            ast.FunctionDef: rules.function_def,
            ast.Expr: native,
            ast.Assign: rules.assign,
            ast.AnnAssign: rules.annotated,
            ast.AugAssign: rules.augmented,
            ast.Delete: rules.assign,
            ast.Assert: native,
            ast.Pass: native,
            ast.Break: native,
            ast.Continue: native,
            ast.Global: rules.declaration,
            ast.Nonlocal: rules.declaration,
            ast.Raise: rules.raise_,
            ast.Return: native,
            ast.If: native,
            ast.For: native,
            ast.While: native,
            ast.Try: rules.try_,
            ast.Import: rules.import_,
            ast.ImportFrom: rules.import_from,
            ast.With: refused,
            ast.AsyncWith: refused,
            ast.AsyncFor: refused,
            ast.AsyncFunctionDef: refused,
            ast.ClassDef: refused,
            ast.Match: refused,
            ast.TryStar: refused,
        }
    ),
)
"""The table every evaluator rewrites with."""
