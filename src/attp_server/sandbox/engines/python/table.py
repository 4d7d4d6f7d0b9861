"""The engine's one table: every AST node a program may hold, and what the rewrite makes of it.

`transform.native` keeps a node as CPython runs it (its children rewritten); the other rules put a guard
(`guards`) where the policy needs one; `transform.refused` ends the rewrite with the message the static check
gives for that node. A node class missing here is refused too ("... is not available in the sandbox"). The table
is written out here, whole, and handed to each `Transformer` by the evaluator: nothing registers itself when
imported, so what a program becomes is what this file says, whichever modules were imported first.
"""

from __future__ import annotations

import ast
from types import MappingProxyType

from attp_server.sandbox.engines.python import transform
from attp_server.sandbox.engines.python.transform import Rewrites, native, refused

REWRITES = Rewrites(
    expressions=MappingProxyType(
        {
            ast.Name: transform.name_,
            ast.Constant: native,
            ast.UnaryOp: native,
            ast.BoolOp: native,
            ast.IfExp: native,
            ast.NamedExpr: native,
            ast.Compare: native,
            ast.BinOp: transform.binop,
            ast.Call: transform.call,
            ast.Attribute: transform.attribute,
            ast.Subscript: native,
            ast.Slice: native,
            ast.List: native,
            ast.Tuple: native,
            ast.Set: native,
            ast.Dict: native,
            ast.Starred: native,
            ast.FormattedValue: transform.formatted,
            ast.JoinedStr: native,
            ast.Lambda: transform.lambda_,
            ast.ListComp: transform.comprehension,
            ast.SetComp: transform.comprehension,
            ast.DictComp: transform.comprehension,
            ast.GeneratorExp: transform.comprehension,
            ast.Await: refused,
            ast.Yield: refused,
            ast.YieldFrom: refused,
        }
    ),
    statements=MappingProxyType(
        {
            ast.FunctionDef: transform.function_def,
            ast.Expr: native,
            ast.Assign: transform.assign,
            ast.AnnAssign: transform.annotated,
            ast.AugAssign: transform.augmented,
            ast.Delete: transform.assign,
            ast.Assert: native,
            ast.Pass: native,
            ast.Break: native,
            ast.Continue: native,
            ast.Global: transform.declaration,
            ast.Nonlocal: transform.declaration,
            ast.Raise: transform.raise_,
            ast.Return: native,
            ast.If: native,
            ast.For: native,
            ast.While: native,
            ast.Try: transform.try_,
            ast.Import: transform.import_,
            ast.ImportFrom: transform.import_from,
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
