"""The engine's one table (sandbox/engines/python/table.py): every expression and statement of Python is either
rewritten by a rule the table names or refused with the policy's own message; nothing registers itself."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Mapping

import pytest

from attp_server.sandbox import policy
from attp_server.sandbox.engines.python import rules
from attp_server.sandbox.engines.python.table import REWRITES
from attp_server.sandbox.limits import Forbidden

NODES = [(c, REWRITES.expressions) for c in ast.expr.__subclasses__()] + [
    (c, REWRITES.statements) for c in ast.stmt.__subclasses__()
]


@pytest.mark.parametrize(("node", "table"), NODES, ids=lambda v: getattr(v, "__name__", ""))
def test_every_node_has_a_rule(node: type, table: Mapping[type, object]) -> None:
    assert node in table


def test_a_node_the_static_check_refuses_is_refused_by_the_rewrite_too() -> None:
    for node in policy._UNSUPPORTED:
        table = REWRITES.expressions if issubclass(node, ast.expr) else REWRITES.statements
        assert table[node] is rules.refused, node


def test_the_table_names_rules_of_the_engine() -> None:
    for table in (REWRITES.expressions, REWRITES.statements):
        for node, rule in table.items():
            assert rule.__module__ == "attp_server.sandbox.engines.python.rules", node


@pytest.mark.parametrize(
    "code",
    ["class A:\n    pass", "with x:\n    pass", "async def f():\n    pass", "def g():\n    yield 1", "x.y = 1"],
)
def test_the_rewrite_refuses_what_the_check_refuses(code: str) -> None:
    """The second look: a tree that reached the rewrite without the static check is refused there."""
    from attp_server.sandbox.engines.python.evaluator import compile_program

    with pytest.raises(Forbidden):
        compile_program(ast.parse(code))


@pytest.mark.process
def test_a_fresh_interpreter_rewrites_arithmetic_from_the_table_alone() -> None:
    """A rule once had to be registered by importing its module; the table alone says what each node becomes."""
    code = (
        "import ast\n"
        "from attp_server.sandbox.engines.python.table import REWRITES\n"
        "from attp_server.sandbox.engines.python import rules\n"
        "assert REWRITES.expressions[ast.BinOp] is rules.binop\n"
        "assert REWRITES.statements[ast.Try] is rules.try_\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
