"""A model trial: a model (an agent given only what an MCP client shows) does realistic tasks through attp_execute.

The trial counts what the model's work costs: calls, errors, and whether the answers are right. The agent is
told the tasks and given the tool listing and one command that sends ``attp_execute`` arguments, exactly
as a client sends what a model wrote; it may not read the server's code or docs.

    python -m bench.model_trial prepare DIR          # the workspace: sales.csv, customers.json, events.jsonl, ...
    python -m bench.model_trial answers DIR          # the right answers, computed here without the server
    attp serve --transport http --port P --workspace DIR/workspace [--engine E]   # the server under trial
    python -m bench.model_trial listing --url URL    # what the client shows the model: name, description, schema
    echo '{"code": "..."}' | python -m bench.model_trial call --url URL --log LOG   # one attp_execute call
    python -m bench.model_trial count LOG            # calls and errors

``call`` prints what an MCP client hands the model: each text block, each image block as a saved PNG's path,
and ``isError`` when set. Each call is appended to ``LOG`` (a JSON line: arguments, reply, error code).
"""

from __future__ import annotations

import argparse
import base64
import csv
import datetime
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio

REGIONS = ("North", "South", "East", "West")
PRODUCTS = {f"P{i:02d}": round(5 + i * 7.5, 2) for i in range(1, 11)}
SEGMENTS = ("Enterprise", "SMB", "Consumer")
EVENT_TYPES = ("page_view", "signup", "purchase", "support_ticket")

TASKS = {
    "data": [
        "D1. sales.csv: total revenue per region, largest first.",
        "D2. sales.csv: for each product, the median and the 90th percentile (linear interpolation, as numpy's "
        "default) of the revenue of a single order; name the three products with the highest median.",
        "D3. Join sales.csv with customers.json on the customer id: total revenue and average order revenue per "
        "customer segment; which segment has the highest average order revenue?",
        "D4. sales.csv: daily revenue (sum per date), then its 7-day rolling mean over the calendar days of 2025 "
        "(days without sales count as 0; the first full window ends on 2025-01-07): on which date is the "
        "rolling mean highest, and what is it?",
        "D5. events.jsonl: how many distinct customers had a support_ticket event AND placed at least one order "
        "in December 2025 according to sales.csv?",
        "D6. A line chart of monthly revenue per region (12 months, 4 lines), saved as chart.png in the "
        "workspace (and shown to the user if the tool can show pictures).",
    ],
    "everyday": [
        "E1. logs/app.log is a long log file: how many lines contain 'ERROR', and what is the last ERROR line?",
        "E2. invoices.csv has amounts with cents: their exact total, as a string with two decimals.",
        "E3. notes/ has markdown notes: list the notes (file names) that mention 'budget', with the line that "
        "mentions it, and write them to budget_summary.md as a bulleted list.",
    ],
}


def prepare(root: Path) -> Path:
    """Write the trial's workspace under `root` (deterministic: the same files every time)."""
    rng = random.Random(20251205)
    workspace = root / "workspace"
    (workspace / "logs").mkdir(parents=True, exist_ok=True)
    (workspace / "notes").mkdir(exist_ok=True)
    customers = [
        {
            "id": f"C{i:04d}",
            "name": f"Customer {i}",
            "segment": rng.choice(SEGMENTS),
            "country": rng.choice(["NO", "DE", "FR", "US", "JP"]),
            "signup_date": (datetime.date(2023, 1, 1) + datetime.timedelta(days=rng.randrange(700))).isoformat(),
        }
        for i in range(1, 501)
    ]
    (workspace / "customers.json").write_text(json.dumps(customers, indent=1), encoding="utf-8")
    start = datetime.date(2025, 1, 1)
    with (workspace / "sales.csv").open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["order_id", "date", "region", "product", "customer_id", "units", "unit_price", "revenue"])
        for order in range(1, 20_001):
            day = start + datetime.timedelta(days=min(364, int(rng.triangular(0, 365, 300))))
            product = rng.choice(list(PRODUCTS))
            units = rng.randint(1, 20)
            price = PRODUCTS[product]
            writer.writerow([order, day.isoformat(), rng.choice(REGIONS), product, f"C{rng.randint(1, 500):04d}",
                             units, f"{price:.2f}", f"{units * price:.2f}"])  # fmt: skip
    with (workspace / "events.jsonl").open("w", encoding="utf-8") as file:
        for _ in range(5_000):
            moment = datetime.datetime(2025, 1, 1) + datetime.timedelta(minutes=rng.randrange(365 * 24 * 60))
            event = {"ts": moment.isoformat(), "customer_id": f"C{rng.randint(1, 500):04d}",
                     "type": rng.choice(EVENT_TYPES), "value": round(rng.random() * 100, 2)}  # fmt: skip
            file.write(json.dumps(event) + "\n")
    lines = []
    for i in range(8_000):
        level = rng.choices(["INFO", "DEBUG", "WARN", "ERROR"], weights=[70, 20, 7, 3])[0]
        lines.append(f"2025-11-{1 + i % 30:02d}T12:{i % 60:02d}:00 {level} worker-{i % 7} request {i} done")
    (workspace / "logs" / "app.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with (workspace / "invoices.csv").open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["invoice", "amount"])
        for i in range(1, 301):
            writer.writerow([f"INV-{i:04d}", f"{rng.randint(1, 99_999) / 100:.2f}"])
    topics = ["budget review for Q3", "team offsite", "hiring plan", "the budget is tight", "roadmap"]
    for i in range(12):
        body = [f"# Note {i}", "", f"Meeting about {topics[i % len(topics)]}.", "Action items follow.", "- item"]
        (workspace / "notes" / f"note-{i:02d}.md").write_text("\n".join(body) + "\n", encoding="utf-8")
    return workspace


def answers(root: Path) -> dict[str, Any]:
    """The right answers, computed from the files with the standard library only."""
    workspace = root / "workspace"
    with (workspace / "sales.csv").open(encoding="utf-8") as file:
        sales = list(csv.DictReader(file))
    customers = {c["id"]: c for c in json.loads((workspace / "customers.json").read_text(encoding="utf-8"))}
    by_region: dict[str, float] = defaultdict(float)
    by_product: dict[str, list[float]] = defaultdict(list)
    by_segment: dict[str, list[float]] = defaultdict(list)
    by_day: dict[str, float] = defaultdict(float)
    december: set[str] = set()
    for row in sales:
        revenue = float(row["revenue"])
        by_region[row["region"]] += revenue
        by_product[row["product"]].append(revenue)
        by_segment[customers[row["customer_id"]]["segment"]].append(revenue)
        by_day[row["date"]] += revenue
        if row["date"].startswith("2025-12"):
            december.add(row["customer_id"])
    medians = {p: (statistics.median(v), statistics.quantiles(v, n=10, method="inclusive")[8])
               for p, v in by_product.items()}  # fmt: skip
    days = [datetime.date(2025, 1, 1) + datetime.timedelta(days=i) for i in range(365)]
    daily = [by_day.get(d.isoformat(), 0.0) for d in days]
    rolling = [(days[i].isoformat(), sum(daily[i - 6 : i + 1]) / 7) for i in range(6, 365)]
    ticketed = {
        e["customer_id"]
        for line in (workspace / "events.jsonl").read_text(encoding="utf-8").splitlines()
        if (e := json.loads(line))["type"] == "support_ticket"
    }
    log = (workspace / "logs" / "app.log").read_text(encoding="utf-8").splitlines()
    errors = [line for line in log if "ERROR" in line]
    with (workspace / "invoices.csv").open(encoding="utf-8") as file:
        cents = sum(round(float(row["amount"]) * 100) for row in csv.DictReader(file))
    notes = sorted(p.name for p in (workspace / "notes").glob("*.md") if "budget" in p.read_text(encoding="utf-8"))
    return {
        "D1": sorted(((r, round(v, 2)) for r, v in by_region.items()), key=lambda x: -x[1]),
        "D2": sorted(medians, key=lambda p: -medians[p][0])[:3],
        "D2_values": {p: (round(m, 2), round(q, 2)) for p, (m, q) in medians.items()},
        "D3": {s: (round(sum(v), 2), round(sum(v) / len(v), 2)) for s, v in by_segment.items()},
        "D4": max(rolling, key=lambda x: x[1]),
        "D5": len(ticketed & december),
        "E1": (len(errors), errors[-1]),
        "E2": f"{cents // 100}.{cents % 100:02d}",
        "E3": notes,
    }


async def listing(url: str) -> None:
    from mcp import Client

    async with Client(url) as client:
        tools = await client.list_tools()
        for tool in tools.tools:
            print(f"tool: {tool.name}\n\ndescription:\n{tool.description}\n")
            print("inputSchema:", json.dumps(tool.input_schema, indent=1))


async def call(url: str, log: Path, images: Path) -> int:
    from mcp import Client

    raw = sys.stdin.read()
    try:
        arguments = json.loads(raw)
        assert isinstance(arguments, dict)
    except (ValueError, AssertionError):
        print('the arguments must be one JSON object, e.g. {"code": "__result__ = 1"}', file=sys.stderr)
        return 2
    started = time.perf_counter()
    async with Client(url, read_timeout_seconds=120) as client:
        result = await client.call_tool("attp_execute", arguments)
    shown: list[str] = []
    for block in result.content:
        if block.type == "text":
            shown.append(block.text)
        elif block.type == "image":
            images.mkdir(parents=True, exist_ok=True)
            path = images / f"image-{int(time.time() * 1000)}.png"
            path.write_bytes(base64.b64decode(block.data))
            shown.append(f"[image {block.mime_type}, {path.stat().st_size:,} bytes: {path}]")
        else:
            shown.append(f"[{block.type} block]")
    if result.is_error:
        shown.append("isError: true")
    print("\n".join(shown))
    structured = result.structured_content or {}
    error = structured.get("error") if isinstance(structured, dict) else None
    entry = {
        "arguments": arguments,
        "is_error": bool(result.is_error),
        "error_code": error.get("code") if isinstance(error, dict) else None,
        "ms": round((time.perf_counter() - started) * 1000),
        "shown": shown,
    }
    with log.open("a", encoding="utf-8") as file:
        file.write(json.dumps(entry) + "\n")
    return 0


def count(log: Path) -> dict[str, Any]:
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    codes: dict[str, int] = defaultdict(int)
    for entry in entries:
        if entry["is_error"]:
            codes[entry["error_code"] or "?"] += 1
    return {"calls": len(entries), "errors": sum(codes.values()), "by_code": dict(codes)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.model_trial")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("prepare", "answers"):
        commands.add_parser(name).add_argument("dir", type=Path)
    commands.add_parser("listing").add_argument("--url", required=True)
    calling = commands.add_parser("call")
    calling.add_argument("--url", required=True)
    calling.add_argument("--log", type=Path, required=True)
    commands.add_parser("count").add_argument("log", type=Path)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        print(prepare(args.dir))
    elif args.command == "answers":
        print(json.dumps(answers(args.dir), indent=1))
    elif args.command == "listing":
        anyio.run(listing, args.url)
    elif args.command == "call":
        return anyio.run(call, args.url, args.log, args.log.parent / "images")
    else:
        print(json.dumps(count(args.log)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
