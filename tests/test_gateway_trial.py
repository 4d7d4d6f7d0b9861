"""Issue 24's trial as a test: a user puts the MCP servers they already run behind ``attp serve``.

Four real servers (mcp-server-git, mcp-server-sqlite in its own venv with mcp<2, mcp-server-time,
@modelcontextprotocol/server-memory) and one that dies at start with an AttributeError, behind the
real ``attp serve`` over Streamable HTTP, reached by the SDK's client in both protocol eras. What
cost the trial's model calls must be gone: every tool has its signature in the description, the
knowledge graph's tools show the shape of their objects, sqlite's ``str(rows)`` comes back as a list
of dicts, and the broken server's reason is its own stderr line (in /healthz, the log and the error; the
description gives the model one line for it, issue 34).
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w
from harness import execute, serving_http
from upstreams import broken_stdio, git_stdio, memory_stdio, sqlite_stdio, time_stdio

pytestmark = pytest.mark.anyio

STDERR_LINE = "AttributeError: 'Server' object has no attribute 'list_resources'"
ROWS = [
    {"id": 1, "item": "apple", "qty": 3, "price": 0.5, "note": None},
    {"id": 2, "item": "pear", "qty": 1, "price": 0.75, "note": "it's ripe"},
]
TRIAL = """log = git_log(repo_path=REPO, max_count=5)
rows = read_query(query="SELECT id, item, qty, price, note FROM orders ORDER BY id")
lines = ["id,item,qty"] + [f"{r['id']},{r['item']},{r['qty']}" for r in rows]
moved = convert_time(source_timezone="Europe/Paris", time="09:30", target_timezone="Asia/Tokyo")
create_entities(entities=[{"name": "Ada", "entityType": "person", "observations": ["wrote notes"]}])
graph = read_graph()
__result__ = {"log": log, "rows": rows, "csv": "\\n".join(lines), "tokyo": moved["target"]["timezone"],
              "entities": [e["name"] for e in graph["entities"]]}"""


def make_repository(path: Path) -> None:
    path.mkdir()
    git = ["git", "-C", str(path), "-c", "user.name=Trial", "-c", "user.email=trial@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "notes.md").write_text("hello\n")
    subprocess.run([*git, "add", "notes.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Add the notes"], check=True)


def make_database(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT, qty INTEGER, price REAL, note TEXT)")
        db.executemany(
            "INSERT INTO orders (item, qty, price, note) VALUES (?, ?, ?, ?)",
            [(r["item"], r["qty"], r["price"], r["note"]) for r in ROWS],
        )


def trial_config(root: Path) -> tuple[Path, Path]:
    repository, database = root / "repo", root / "shop.db"
    make_repository(repository)
    make_database(database)
    config = root / "attp.toml"
    servers: dict[str, Any] = {
        "git": git_stdio(repository),
        "sqlite": sqlite_stdio(database),
        "time": time_stdio(),
        "memory": memory_stdio(root / "graph.jsonl"),
        "broken": broken_stdio(),
    }
    config.write_text(tomli_w.dumps({"mcp_servers": servers}))
    return config, repository


async def test_the_trial_through_attp_serve(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config, repository = trial_config(tmp_path)
    log = tmp_path / "attp.log"
    with serving_http(workspace, "--config", str(config), stderr=log) as served:
        assert served.url is not None
        upstream = httpx.get(served.url + "/healthz").json()["upstream"]
        assert {name: s["status"] for name, s in upstream.items()} == {
            "git": "ok",
            "sqlite": "ok",
            "time": "ok",
            "memory_mcp": "ok",
            "broken": "unavailable",
        }
        assert STDERR_LINE in upstream["broken"]["problem"]

        async with served.client() as client:  # the 2026-07-28 era
            listed = await client.list_tools()
            assert listed.ttl_ms == 60_000  # a cache hint: upstream servers can change the list
            [tool] = listed.tools
            description = tool.description or ""
            listed = await execute(client, "__result__ = [t['name'] for t in tools()]")
            names = listed["result"]
            assert len(names) >= 45
            missing = [name for name in names if f"  {name}(" not in description and f"; {name}(" not in description]
            assert missing == [], "every tool has its signature in the description"
            assert "also:" not in description and "shown with their signature" not in description
            assert len(description) <= 8000
            assert "create_entities(entities: list[{name: str, entityType: str, observations: list[str]}])" in (
                description
            )
            # The model reads one line of a server that is down; why is the operator's (log, /healthz, attp tools).
            assert "\n  broken: unavailable, the operator has been told\n" in description
            assert STDERR_LINE not in description and "Fix:" not in description

            helped = await execute(client, "__result__ = help('memory.create_entities')")
            assert "        entityType: The type of the entity" in helped["result"]

            data = await execute(client, TRIAL.replace("REPO", repr(str(repository))))
            assert data["status"] == "ok", data["error"]
            result = data["result"]
            assert result["rows"] == ROWS  # str(rows) from the server, as data
            assert result["csv"] == "id,item,qty\n1,apple,3\n2,pear,1"
            assert "Add the notes" in result["log"]
            assert result["tokyo"] == "Asia/Tokyo"
            assert result["entities"] == ["Ada"]

            down = await execute(client, "broken.list_things()")
            assert down["error"]["code"] == "UPSTREAM_UNAVAILABLE"
            assert STDERR_LINE in down["error"]["message"]

        async with served.client(mode="legacy") as legacy:  # the handshake era
            program = (
                "__result__ = [read_query(query='SELECT item FROM orders'), help('get_weather'), tools('weather')]"
            )
            data = await execute(legacy, program)
            rows, unknown, found = data["result"]
            assert rows == [{"item": "apple"}, {"item": "pear"}]
            assert unknown.startswith("No tool named 'get_weather'. Closest: ")
            assert "tools are missing: broken (unavailable, the operator has been told)" in unknown
            assert STDERR_LINE not in unknown and len(unknown) < 600  # one paragraph, not the whole description
            assert found == [] and data["hint"].startswith("tools('weather') found no tool")

    text = log.read_text()
    assert f"mcp server 'broken' (stderr): {STDERR_LINE}" in text
    assert "mcp server 'broken' is unavailable: command " in text
    assert f"over stdio: it exited at start; its stderr said: {STDERR_LINE}. Fix: " in text
