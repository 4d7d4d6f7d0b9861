"""Every curated module by name: what the worker gives a run, and what the server's checks and descriptions list.

Each family lives in its own module (`namespaces`: seed 000's six; `exact`: decimal and fractions;
`containers`, `iterators`, `texts`, `digests`, `hints`); this one only puts them together. A run gets the
namespaces the ``modules`` setting enables, in `attp_server.sandbox.stdlib.namespaces.MODULE_NAMES` order;
`random` is rebuilt per run around a fresh generator, every other namespace is built once per worker.

Imported by the worker and by the server (for member names); imports nothing from the rest of ``server``
but ``attp_server.sandbox``.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable, Iterable

from attp_server.sandbox.stdlib import containers, digests, exact, hints, iterators, texts
from attp_server.sandbox.stdlib.namespaces import MODULE_NAMES, Namespace, random_namespace, static_namespaces

BUILDERS: dict[str, Callable[[], Namespace]] = {
    "decimal": exact.decimal_namespace,
    "fractions": exact.fractions_namespace,
    "collections": containers.collections_namespace,
    "itertools": iterators.itertools_namespace,
    "functools": iterators.functools_namespace,
    "operator": iterators.operator_namespace,
    "csv": texts.csv_namespace,
    "io": texts.io_namespace,
    "string": texts.string_namespace,
    "textwrap": texts.textwrap_namespace,
    "copy": containers.copy_namespace,
    "heapq": containers.heapq_namespace,
    "bisect": containers.bisect_namespace,
    "base64": digests.base64_namespace,
    "hashlib": digests.hashlib_namespace,
    "difflib": texts.difflib_namespace,
    "uuid": digests.uuid_namespace,
    "tomllib": texts.tomllib_namespace,
    "typing": hints.typing_namespace,
}

PER_RUN = frozenset({"random"})
"""Modules rebuilt for every run (they hold per-run state)."""


def build_namespaces() -> dict[str, Namespace]:
    """Every curated namespace except the per-run ones, built once (in the worker: before it locks itself down)."""
    spaces = static_namespaces()
    spaces.update({name: build() for name, build in BUILDERS.items()})
    return {name: spaces[name] for name in MODULE_NAMES if name in spaces}


def run_namespaces(built: dict[str, Namespace], enabled: Iterable[str], rng: _random.Random) -> dict[str, Namespace]:
    """The namespaces one run gets: those `enabled`, in `MODULE_NAMES` order, `random` around `rng`; with
    `decimal`, a fresh copy of its bounded context for this thread (`exact.use_context`)."""
    wanted = frozenset(enabled)
    if "decimal" in wanted:
        exact.use_context()
    return {
        name: random_namespace(rng) if name == "random" else built[name]
        for name in MODULE_NAMES
        if name in wanted and (name in built or name in PER_RUN)
    }


def public_names(enabled: Iterable[str] = MODULE_NAMES) -> dict[str, frozenset[str]]:
    """Module name -> member names, for the server's static check, suggestions and ``help('module')``."""
    wanted = frozenset(enabled)
    spaces = {**build_namespaces(), "random": random_namespace(_random.Random(0))}  # no run here: no decimal context
    return {name: frozenset(spaces[name].members) for name in MODULE_NAMES if name in wanted and name in spaces}
