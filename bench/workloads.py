"""The benchmark programs, the tools they call, and the result each must produce.

Every engine runs the same three programs. Where an engine's language differs, the variant says how
and why in one line (Starlark has no sets; Monty and smolagents need ``import json``; engines other
than ours return their last expression instead of setting ``__result__``).
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attp_server import Toolpack


def lookup(key: str) -> dict[str, Any]:
    """Return a small record for `key`.

    Args:
        key: Any text.
    """
    return {"key": key, "value": len(key) * 7, "tags": ["a", "b"]}


def score(value: int) -> float:
    """Return a score for `value`.

    Args:
        value: Any number.
    """
    return value / 3.0


def _make_document(target_bytes: int = 50_000) -> str:
    rng = random.Random(7)
    cities = ["Lyon", "Oslo", "Kyoto", "Lima", "Perth", "Accra", "Quito", "Hanoi"]
    rows: list[dict[str, Any]] = []
    text = ""
    while len(text) < target_bytes:
        rows.append(
            {
                "id": len(rows),
                "city": rng.choice(cities),
                "amount": rng.randrange(1, 10_000),
                "active": rng.random() < 0.7,
                "note": "x" * rng.randrange(5, 40),
            }
        )
        if len(rows) % 50 == 0:
            text = json.dumps({"rows": rows})
    return json.dumps({"rows": rows})


DOCUMENT = _make_document()
"""A JSON document of about 50 KB (deterministic: the same bytes in every run)."""


def document() -> str:
    """Return the benchmark's JSON document (about 50 KB) as text."""
    return DOCUMENT


def noop() -> str:
    """Do nothing and return "ok"."""
    return "ok"


TOOLS: dict[str, Callable[..., Any]] = {"lookup": lookup, "score": score, "document": document}

toolpack = Toolpack(
    name="bench",
    description="Cheap tools for benchmarks.",
    tools=[lookup, score, document],
    read_only=True,
    inline=["lookup", "score", "document"],
)
"""Loaded by ``attp serve --toolpack bench.workloads:toolpack``. Its tools take microseconds: the server calls
them on its event loop (`Toolpack.inline`)."""

threaded_toolpack = Toolpack(
    name="bench",
    description="The same tools, not declared inline: each call hops to a tool thread and back.",
    tools=[lookup, score, document],
    read_only=True,
)
"""Loaded by ``attp serve --toolpack bench.workloads:threaded_toolpack``."""


def _async_twin(function: Callable[..., Any]) -> Callable[..., Any]:
    async def twin(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    return functools.wraps(function)(twin)


async_toolpack = Toolpack(
    name="bench",
    description="The same tools as coroutines: the server awaits them on its loop, with no hop to a thread.",
    tools=[_async_twin(f) for f in (lookup, score, document)],
    read_only=True,
)


W1 = """\
records = [lookup(k) for k in ["alpha", "beta", "gamma"]]
scores = [score(r["value"]) for r in records[:2]]
best = max(records, key=lambda r: r["value"])
tags = sorted({t for r in records for t in r["tags"]})
__result__ = {"best": best["key"], "scores": scores, "n": len(records), "tags": tags}
"""

W2 = """\
total = 0
for i in range(100000):
    total += i * i
labels = []
for i in range(1000):
    labels.append("row-" + str(i))
__result__ = {"total": total, "labels": len(labels), "last": labels[-1]}
"""

W3 = """\
data = json.loads(document())
rows = [r for r in data["rows"] if r["active"]]
by_city = {}
for r in rows:
    by_city[r["city"]] = by_city.get(r["city"], 0) + r["amount"]
top = sorted(by_city.items(), key=lambda kv: kv[1], reverse=True)[:5]
text = json.dumps({"count": len(rows), "top": top, "rows": rows[:200]})
__result__ = {"count": len(rows), "dumped": text.count('"city"'), "top": [kv[0] for kv in top]}
"""


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    code: str
    tool_calls: int

    def expected(self) -> Any:
        """The result, from plain CPython: every engine must return exactly this."""
        namespace: dict[str, Any] = {"json": json, **TOOLS}
        exec(compile(self.code, f"<{self.name}>", "exec"), namespace)
        return json.loads(json.dumps(namespace["__result__"]))

    def returning_last(self) -> str:
        """The program for engines that return their last expression."""
        return self.code + "__result__\n"

    def with_json_import(self) -> str:
        """For engines whose ``json`` must be imported (ours and Starlark's are preloaded)."""
        prefix = "import json\n" if "json." in self.code else ""
        return prefix + self.returning_last()

    def small(self) -> Workload:
        """The same program at a tiny size (``--quick``): W2's loop over 2,000 instead of 100,000."""
        return Workload(self.name, self.title, self.code.replace("range(100000)", "range(2000)"), self.tool_calls)

    def starlark(self) -> str:
        """Starlark has no set type: the set comprehension of W1 becomes dict keys (same result)."""
        code = self.code.replace("sorted({t for r in records", "sorted({t: None for r in records")
        code = code.replace('for t in r["tags"]})', 'for t in r["tags"]}.keys())')
        return code.replace("json.loads(", "json.decode(").replace("json.dumps(", "json.encode(") + "__result__\n"


WORKLOADS = (
    Workload("w1", "typical: 5 tool calls, a comprehension, a dict", W1, 5),
    Workload("w2", "loop: sum of i*i over 100,000, 1,000 strings", W2, 0),
    Workload("w3", "json: load 50 KB, transform, dump", W3, 1),
)
