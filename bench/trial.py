"""Issue 24's trial as a measurement: four real MCP servers, four everyday tasks, attp against direct calls.

The servers: ``mcp-server-git``, ``mcp-server-sqlite`` (in its own venv: it needs mcp<2),
``mcp-server-time`` and ``@modelcontextprotocol/server-memory``. The tasks, on data made here:

1. git: the last five commits, each with its message and the files it changed (``git_log`` + a
   ``git_show`` per commit);
2. sqlite: the orders with more than two items, as CSV (``read_query``; the server sends ``str(rows)``);
3. time: five meeting times in Paris, in Tokyo and New York (``convert_time`` per time and zone);
4. a knowledge graph: four people and who works with whom, then what the graph knows of Ada
   (``create_entities``, ``create_relations``, ``open_nodes``).

(a) Direct calls, as a client exposing the servers' tools to a model: the model reads the tool list
    (``tools/list`` of each server, as JSON) once and every tool result's text; one call per tool call.
(b) attp-server in front of the same servers, with its default packs (as a user runs it): the model
    reads the tool list (attp_execute with its description) once and each program's result; one
    ``attp_execute`` call per task.

Both sides are checked against the answers the data was made with. Characters are exact; tokens as in
``bench.gateway``. Run alone: ``python -m bench.gateway`` (this is its ``trial`` row).
"""

from __future__ import annotations

import datetime
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from attp_server.model.results import render
from attp_server.run.runtime import ExecuteRequest
from attp_server.run.startup import open_runtime
from attp_server.settings import Settings

ROOT = Path(__file__).parents[1]
MEMORY = ROOT / "tests" / "clients" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
TIMES = ["08:00", "09:30", "11:15", "14:00", "16:45"]
ZONES = ["Asia/Tokyo", "America/New_York"]
PEOPLE = [("Ada", "engineer"), ("Grace", "engineer"), ("Linus", "manager"), ("Margaret", "designer")]
WORKS_WITH = [("Ada", "Grace"), ("Ada", "Linus"), ("Grace", "Margaret")]

PROGRAMS = {
    "git": """log = git_log(repo_path=REPO, max_count=5)
shas = re.findall(r"^Commit: ([0-9a-f]{40})$", log, re.M)
shown = parallel(git_show, [{"repo_path": REPO, "revision": sha} for sha in shas])
__result__ = [{"message": text.split("\\n\\n")[1].strip(),
               "files": sorted({line[6:] for line in text.splitlines() if line.startswith("+++ b/")})}
              for text in shown]""",
    "sqlite": """rows = read_query(query="SELECT id, item, qty, price FROM orders WHERE qty > 2 ORDER BY id")
out = io.StringIO()
writer = csv.DictWriter(out, fieldnames=["id", "item", "qty", "price"], lineterminator="\\n")
writer.writeheader()
writer.writerows(rows)
__result__ = out.getvalue()""",
    "time": f"""times, zones = {TIMES!r}, {ZONES!r}
asks = [{{"source_timezone": "Europe/Paris", "time": t, "target_timezone": z}} for t in times for z in zones]
moved = parallel(convert_time, asks)
__result__ = {{t: {{z: moved[i * len(zones) + j]["target"]["datetime"][11:16] for j, z in enumerate(zones)}}
              for i, t in enumerate(times)}}""",
    "graph": f"""create_entities(entities=[{{"name": n, "entityType": k, "observations": ["works here"]}}
                          for n, k in {PEOPLE!r}])
create_relations(relations=[{{"from": a, "to": b, "relationType": "works with"}} for a, b in {WORKS_WITH!r}])
found = open_nodes(names=["Ada"])
__result__ = {{"ada": [e["entityType"] for e in found["entities"]],
              "works_with": sorted(r["to"] for r in found["relations"] if r["from"] == "Ada")}}""",
}


def make_data(base: Path) -> dict[str, Any]:
    """The repository and the database, and the answers every side must give."""
    repo = base / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=Trial", "-c", "user.email=trial@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    commits = []
    for i in range(7):
        files = [f"src/part_{i}.py", f"docs/note_{i % 3}.md"][: 1 + i % 2]
        for name in files:
            path = repo / name
            path.parent.mkdir(exist_ok=True)
            path.write_text(f"# change {i} of {name}\n" + "value = 1\n" * (i + 1))
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", f"Change {i}: update {', '.join(files)}"], check=True)
        commits.append({"message": f"Change {i}: update {', '.join(files)}", "files": sorted(files)})
    database = base / "shop.db"
    rows = [(i, f"item-{i}", (i * 7) % 5, round(1.25 * i, 2)) for i in range(1, 31)]
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT, qty INTEGER, price REAL, note TEXT)")
        db.executemany("INSERT INTO orders (id, item, qty, price, note) VALUES (?, ?, ?, ?, NULL)", rows)
    csv_rows = [f"{i},{item},{qty},{price}" for i, item, qty, price in rows if qty > 2]
    return {
        "repo": repo,
        "database": database,
        "graph": base / "graph.jsonl",
        "answers": {
            "git": list(reversed(commits))[:5],
            "sqlite": "\n".join(["id,item,qty,price", *csv_rows]) + "\n",
            "graph": {"ada": ["engineer"], "works_with": ["Grace", "Linus"]},
        },
    }


def servers(data: dict[str, Any], node: str, sqlite_command: Path) -> dict[str, dict[str, Any]]:
    return {
        "git": {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(data["repo"])]},
        "sqlite": {"command": str(sqlite_command), "args": ["--db-path", str(data["database"])]},
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
        "memory": {"command": node, "args": [str(MEMORY)], "env": {"MEMORY_FILE_PATH": str(data["graph"])}},
    }


def _text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def _tools_json(tools: list[Any]) -> str:
    return json.dumps([t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools])


async def direct(data: dict[str, Any], config: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The tasks as a model does them with each server's own tools: what it reads, and its calls."""
    read: dict[str, str] = {}
    calls: dict[str, int] = {}
    answers: dict[str, Any] = {}
    lists = []
    repo = str(data["repo"])
    for name, server in config.items():
        params = StdioServerParameters(command=server["command"], args=server["args"], env=server.get("env"))
        async with Client(params, mode="legacy") as client:
            lists.append(_tools_json((await client.list_tools()).tools))
            texts: list[str] = []

            async def call(tool: str, arguments: dict[str, Any], texts: list[str] = texts, c: Client = client) -> Any:
                result = await c.call_tool(tool, arguments)
                texts.append(_text(result))
                return result

            if name == "git":
                log = _text(await call("git_log", {"repo_path": repo, "max_count": 5}))
                shas = [line[8:] for line in log.splitlines() if line.startswith("Commit: ")]
                for sha in shas:
                    await call("git_show", {"repo_path": repo, "revision": sha})
            elif name == "sqlite":
                query = "SELECT id, item, qty, price FROM orders WHERE qty > 2 ORDER BY id"
                await call("read_query", {"query": query})
            elif name == "time":
                for moment in TIMES:
                    for zone in ZONES:
                        arguments = {"source_timezone": "Europe/Paris", "time": moment, "target_timezone": zone}
                        await call("convert_time", arguments)
            else:
                people = [{"name": n, "entityType": k, "observations": ["works here"]} for n, k in PEOPLE]
                await call("create_entities", {"entities": people})
                links = [{"from": a, "to": b, "relationType": "works with"} for a, b in WORKS_WITH]
                await call("create_relations", {"relations": links})
                found = await call("open_nodes", {"names": ["Ada"]})
                answers["graph"] = found.structured_content
        task = "graph" if name == "memory" else name
        read[task], calls[task] = "".join(texts), len(texts)
    return {"tool_list": "".join(lists), "read": read, "calls": calls, "graph": answers.get("graph")}


async def through_attp(data: dict[str, Any], config: dict[str, dict[str, Any]], workspace: Path) -> dict[str, Any]:
    """The tasks as four attp_execute programs, one per task."""
    from attp_server.faces.app import create_server

    settings = Settings(workspace=workspace, workers=1, mcp_servers=config, db_path=workspace.parent / "m.sqlite3")
    read: dict[str, str] = {}
    results: dict[str, Any] = {}
    async with open_runtime(settings) as runtime:
        tools = _tools_json(await create_server(runtime).list_tools())
        for task, program in PROGRAMS.items():
            code = f"REPO = {str(data['repo'])!r}\n{program}" if task == "git" else program
            done = await runtime.execute(ExecuteRequest(code=code))
            if done.status != "ok":
                raise SystemExit(f"the attp program for {task} failed: {done.error}")
            read[task] = render(done, settings.result_format)
            results[task] = done.result
    return {"tool_list": tools, "read": read, "calls": dict.fromkeys(PROGRAMS, 1), "results": results}


def check(data: dict[str, Any], attp: dict[str, Any], direct_side: dict[str, Any]) -> None:
    answers, results = data["answers"], attp["results"]
    for task in ("git", "sqlite", "graph"):
        if results[task] != answers[task]:
            raise SystemExit(f"attp's {task} answer is wrong: {results[task]!r}, expected {answers[task]!r}")
    today = datetime.datetime.now(ZoneInfo("Europe/Paris")).date()
    expected = {}
    for moment in TIMES:
        start = datetime.datetime.combine(today, datetime.time.fromisoformat(moment), ZoneInfo("Europe/Paris"))
        expected[moment] = {zone: start.astimezone(ZoneInfo(zone)).strftime("%H:%M") for zone in ZONES}
    if results["time"] != expected:
        raise SystemExit(f"attp's time answer is wrong: {results['time']!r}, expected {expected!r}")
    graph = direct_side["graph"] or {}
    if sorted(r["to"] for r in graph.get("relations", []) if r["from"] == "Ada") != ["Grace", "Linus"]:
        raise SystemExit(f"the direct graph answer is wrong: {graph!r}")


async def trial(node: str, sqlite_command: Path, base: Path) -> dict[str, Any]:
    """Both sides on fresh data each (the knowledge graph is written by the tasks)."""
    sides: dict[str, Any] = {}
    for side in ("direct", "attp"):
        folder = base / side
        folder.mkdir()
        data = make_data(folder)
        config = servers(data, node, sqlite_command)
        if side == "direct":
            sides["direct"] = await direct(data, config)
        else:
            workspace = folder / "ws"
            workspace.mkdir()
            sides["attp"] = await through_attp(data, config, workspace)
            check(data, sides["attp"], sides["direct"])
    out: dict[str, Any] = {}
    for side, got in sides.items():
        out[side] = {
            "tool_list_chars": len(got["tool_list"]),
            "result_chars": {task: len(text) for task, text in got["read"].items()},
            "chars": len(got["tool_list"]) + sum(len(text) for text in got["read"].values()),
            "calls": got["calls"],
            "total_calls": sum(got["calls"].values()),
            "texts": got["tool_list"] + "".join(got["read"].values()),
        }
    return out
