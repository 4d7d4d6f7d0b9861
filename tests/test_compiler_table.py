"""The compiler's one table (sandbox/engines/python/table.py): every expression and statement of Python is either
compiled by a function the table names or refused by the policy with its own message; nothing registers itself."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Mapping

import pytest

from attp_server.sandbox import policy
from attp_server.sandbox.engines.python.table import COMPILERS

NODES = [(c, COMPILERS.expressions) for c in ast.expr.__subclasses__()] + [
    (c, COMPILERS.statements) for c in ast.stmt.__subclasses__()
]


@pytest.mark.parametrize(("node", "table"), NODES, ids=lambda v: getattr(v, "__name__", ""))
def test_every_node_is_compiled_or_refused_with_a_reason(node: type, table: Mapping[type, object]) -> None:
    assert node in table or node in policy._UNSUPPORTED


def test_the_table_names_compilers_of_the_compiler_package() -> None:
    for table in (COMPILERS.expressions, COMPILERS.statements):
        for node, compiler in table.items():
            assert compiler.__module__.startswith("attp_server.sandbox.engines.python."), node


@pytest.mark.process
def test_a_fresh_interpreter_compiles_arithmetic_from_the_table_alone() -> None:
    """`ast.BinOp` once had no compiler until `evaluator` was imported (its module registered it on import)."""
    code = (
        "import ast\n"
        "from attp_server.sandbox.engines.python.table import COMPILERS\n"
        "from attp_server.sandbox.engines.python import arithmetic\n"
        "assert COMPILERS.expressions[ast.BinOp] is arithmetic.compile_binop\n"
        "import attp_server.sandbox.engines.python.expressions as e, attp_server.sandbox.engines.python.statements as s\n"
        "assert not hasattr(e, 'EXPRESSIONS') and not hasattr(s, 'STATEMENTS')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
