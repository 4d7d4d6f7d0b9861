"""The parts import one way: faces -> run -> model, sessions -> store -> foundations -> sandbox; the worker side imports
nothing above the sandbox. Read from the source (every ``import`` and ``from`` statement), so a new module
is held to its part's rule the day it is added."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "attp_server"
FOUNDATIONS = {"errors", "settings", "toolpack", "mcp_config", "access_config", "fetch", "pyast", "__init__"}
# Which parts each part may import (itself always). Toolpacks are plug-ins: foundations, the skills library.
ALLOWED: dict[str, set[str]] = {
    "faces": {"run", "access", "ops", "model", "sessions", "store", "foundations", "sandbox", "toolpacks"},
    "run": {"access", "ops", "model", "sessions", "store", "foundations", "sandbox"},
    "access": {"foundations"},
    "ops": {"foundations"},
    "model": {"foundations", "sandbox"},
    "sessions": {"store", "foundations", "sandbox"},
    "store": {"foundations"},
    "toolpacks": {"foundations", "model", "store", "sandbox"},
    "foundations": {"sandbox"},
    "sandbox": set(),
}


def _part(module: str) -> str:
    """The part a dotted module name under attp_server belongs to."""
    parts = module.split(".")[1:]
    if parts[:1] == ["__main__"]:
        return "faces"  # `python -m attp_server` is the `attp` command
    if not parts or parts[0] in FOUNDATIONS:
        return "foundations"
    return parts[0]


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    names = list(relative.parts)
    return ".".join(names[:-1] if names[-1] == "__init__" else names)


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every attp_server module `path` imports, at any depth of the file (lazy imports included)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("attp_server")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attp_server"):
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def _resolve(name: str) -> str:
    """`attp_server.x.y.Name` -> the longest prefix that is a module or package of the tree."""
    parts = name.split(".")
    while len(parts) > 1:
        path = PACKAGE.parent.joinpath(*parts)
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    return "attp_server"


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "bundled_skills" not in p.parts)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_direction_of_the_parts(path: Path) -> None:
    module = _module_name(path)
    part = _part(module)
    wrong = []
    for line, name in _imports(path):
        target = _resolve(name)
        target_part = _part(target)
        if target_part != part and target_part not in ALLOWED[part]:
            wrong.append(f"line {line}: {part} imports {target} ({target_part})")
    assert wrong == []


WORKER_SIDE = sorted(p for p in (PACKAGE / "sandbox").rglob("*.py") if p.name != "pool.py")


@pytest.mark.parametrize("path", WORKER_SIDE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_worker_side_imports_nothing_above_the_sandbox(path: Path) -> None:
    """What runs in a worker must not pull in pydantic, the MCP SDK or a toolpack."""
    outside = [name for _line, name in _imports(path) if not _resolve(name).startswith("attp_server.sandbox")]
    assert outside == []


def test_every_part_says_what_it_owns() -> None:
    for folder in [
        PACKAGE / p for p in ("faces", "run", "access", "ops", "model", "sessions", "store", "sandbox", "toolpacks")
    ] + [PACKAGE / "sandbox" / p for p in ("engines", "engines/python", "engines/starlark", "stdlib", "process")]:
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc) > 80, folder
