"""The memory toolpack through the real attp_execute path (runtime and sandbox workers), the bundled
memory-tidy skill's programs, and two real server processes writing to one database at once."""

from __future__ import annotations

import itertools
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import Served, free_port, run_code, running, server_env, wait_for_health

pytestmark = pytest.mark.anyio

SKILL = Path(__file__).resolve().parents[2] / "src" / "attp_server" / "bundled_skills" / "memory-tidy" / "SKILL.md"

WORKFLOW = """
group = create_contents_page("Tool calling", "Notes on tool protocols", "usr-0", [])
idea = create_detail_page("新想法", "关于工具调用的思考", "详细内容...", group)
attp = create_detail_page("ATTP", "One tool that runs a program", "The model writes code;\\nthe server runs it.", group)
hide_details(idea)
folded = view("usr")
expand_details(idea)
archive = create_contents_page("Archive", "Old ideas", "usr-0")
move_page(attp, archive)
hide_details(archive)
found = [(p["index"], p["snippet"]) for p in find_page("工具")]
try:
    move_page(group, group)
    refused = None
except ToolError as e:
    refused = e.code
__result__ = {"pages": [group, idea, attp, archive], "found": found, "refused": refused,
              "folded": folded, "view": view("usr"), "tree": get_page(group)["children"]}
"""

USR_ROOT = "[usr-0] User — Your own notes about the user and the work; organise them as you like. (contents, expanded)"


def memory_settings(tmp_path: Path) -> dict[str, Any]:
    return {"toolpacks": ["memory"], "db_path": tmp_path / "state" / "memory.sqlite3", "max_tool_calls": 1000}


async def test_seed_workflow_runs_through_attp_execute_and_persists(workspace: Path, tmp_path: Path) -> None:
    async with running(workspace, **memory_settings(tmp_path)) as runtime:
        out = await run_code(runtime, WORKFLOW)
    assert out["status"] == "ok", out["error"]
    result = out["result"]
    assert result["pages"] == ["usr-1", "usr-2", "usr-3", "usr-4"]
    assert result["found"] == [["usr-2", "关于工具调用的思考"]]
    assert result["refused"] == "INVALID_MOVE"
    assert result["tree"] == ["usr-2"]
    assert result["folded"] == (
        f"{USR_ROOT}\n"
        "  [usr-1] Tool calling — Notes on tool protocols (contents, expanded)\n"
        "    [usr-2] 新想法 — 关于工具调用的思考 (detail, hidden)\n"
        "    [usr-3] ATTP — One tool that runs a program (detail, expanded)\n"
        "      | The model writes code;\n"
        "      | the server runs it.\n"
    )
    final = (
        f"{USR_ROOT}\n"
        "  [usr-1] Tool calling — Notes on tool protocols (contents, expanded)\n"
        "    [usr-2] 新想法 — 关于工具调用的思考 (detail, expanded)\n"
        "      | 详细内容...\n"
        "  [usr-4] Archive — Old ideas (contents, hidden, 1 page inside)\n"
    )
    assert result["view"] == final
    calls = [(c["tool"], c["ok"], c["error_code"]) for c in out["calls"]]
    assert calls[-4:] == [
        ("find_page", True, None),
        ("move_page", False, "INVALID_MOVE"),
        ("view", True, None),
        ("get_page", True, None),
    ]
    assert all(ok for _tool, ok, _code in calls[:-3])

    async with running(workspace, **memory_settings(tmp_path)) as runtime:  # a restarted server
        again = await run_code(runtime, '__result__ = view("usr")')
    assert again["result"] == final


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param(
            'create_contents_page("Trips", "", "usr-0")\n__result__ = get_page("Trips")',
            {"code": "PAGE_NOT_FOUND", "tool_name": "get_page", "parameter_name": "page_index",
             "suggested_value": "usr-1"},
            id="a-name-instead-of-an-index",
        ),
        pytest.param(
            '__result__ = create_detail_page("Mine", "", "text", "sys-0")',
            {"code": "PERMISSION_DENIED", "tool_name": "create_detail_page", "parameter_name": "parent_index",
             "suggested_value": "usr-0"},
            id="writing-into-the-read-only-system-segment",
        ),
        pytest.param(
            '__result__ = hide_details("sys-0")',
            {"code": "PERMISSION_DENIED", "tool_name": "hide_details", "parameter_name": "page_index"},
            id="hiding-the-system-root",
        ),
        pytest.param(
            '__result__ = get_children(create_detail_page("Leaf", "", "x", "usr-0"))',
            {"code": "NOT_A_CONTENTS_PAGE", "tool_name": "get_children", "suggested_value": "usr-0"},
            id="children-of-a-detail-page",
        ),
        pytest.param(
            '__result__ = remove_page(1)',
            {"code": "INVALID_ARGUMENT", "tool_name": "remove_page", "parameter_name": "page_index"},
            id="an-int-index",
        ),
    ],
)  # fmt: skip
async def test_tool_errors_reach_the_model(
    workspace: Path, tmp_path: Path, code: str, expected: dict[str, str]
) -> None:
    async with running(workspace, **memory_settings(tmp_path)) as runtime:
        out = await run_code(runtime, code)
    assert out["status"] == "error"
    assert {key: out["error"].get(key) for key in expected} == expected
    assert out["error"]["message"]


def skill_programs() -> list[str]:
    return re.findall(r"```python\n(.*?)```", SKILL.read_text(), flags=re.DOTALL)


async def test_the_memory_tidy_skills_programs_work(workspace: Path, tmp_path: Path) -> None:
    look, start, file_a_fact, tidy = skill_programs()
    setup = """
for name in ["Trip Rome", "Trip Paris", "Trip Oslo", "Invoice rules"]:
    create_detail_page(name, "about " + name, "invoice details for " + name, "usr-0")
"""
    async with running(workspace, **memory_settings(tmp_path)) as runtime:
        outs = [await run_code(runtime, code) for code in (setup, look, start, file_a_fact, file_a_fact, tidy)]
    assert [o["status"] for o in outs] == ["ok"] * 6, [o["error"] for o in outs]
    _, looked, opened, filed, refiled, tidied = (o["result"] for o in outs)
    assert looked == []  # nothing about deployment yet
    assert opened["opened"][0] == "usr-4" and len(opened["opened"]) == 3  # the name match first
    assert filed == refiled == "usr-6"  # the second run updates the page the first one created
    assert tidied["new_folders"] == ["usr-7"]
    assert tidied["tree"].splitlines()[1:] == [
        "  [usr-4] Invoice rules — about Invoice rules (detail, hidden)",
        "  [usr-5] Billing — Invoices and payment (contents, expanded)",
        "    [usr-6] Invoice address — ACME GmbH, Berlin (detail, hidden)",
        "  [usr-7] Trip — 3 notes about trip (contents, expanded)",
        "    [usr-1] Trip Rome — about Trip Rome (detail, hidden)",
        "    [usr-2] Trip Paris — about Trip Paris (detail, hidden)",
        "    [usr-3] Trip Oslo — about Trip Oslo (detail, hidden)",
    ]


# ------------------------------------------------------------------ two server processes, one database

WRITER = """
ME, OTHER = {me!r}, {other!r}
mine = create_contents_page(ME, "notes of server " + ME, "usr-0", [])
seen = False
for attempt in range(400):  # start together: wait until the other server has written too
    if [c for c in get_children("usr-0") if c["name"] == OTHER]:
        seen = True
        break
made = []
moved = []
for i in range(99):
    if i % 5 == 4:
        move_page(made[-1], mine)
        moved.append(made[-1])
    else:
        made.append(create_detail_page(ME + "-" + str(i), "note", "text " + str(i), "usr-0"))
__result__ = {{"mine": mine, "made": made, "moved": moved, "seen": seen}}
"""


def start_server(tmp_path: Path, name: str, db_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    workspace = tmp_path / name
    workspace.mkdir()
    env = {**server_env(), "ATTP_DB_PATH": str(db_path)}
    flags = ["--toolpack", "memory", "--timeout-s", "60", "--max-tool-calls", "1000", "--workers", "1"]
    process = subprocess.Popen(
        [sys.executable, "-m", "attp_server", "serve", "--transport", "http", "--port", str(port),
         "--workspace", str(workspace), *flags],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=workspace,
    )  # fmt: skip
    return process, f"http://127.0.0.1:{port}"


def usr_pages(db_path: Path) -> dict[str, sqlite3.Row]:
    conn = sqlite3.connect(db_path)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("INSERT INTO page_fts(page_fts, rank) VALUES ('integrity-check', 1)")
        return {r["page_index"]: r for r in conn.execute("SELECT * FROM pages WHERE segment_id = 'usr'")}
    finally:
        conn.close()


@pytest.mark.process
@pytest.mark.soak
@pytest.mark.slow
async def test_two_servers_writing_one_database_keep_the_tree_consistent(tmp_path: Path) -> None:
    db_path = tmp_path / "shared" / "memory.sqlite3"
    servers = [start_server(tmp_path, name, db_path) for name in ("A", "B")]  # both create and migrate at once
    results: dict[str, Any] = {}
    try:
        for process, url in servers:
            wait_for_health(url, process)

        async def write(me: str, other: str, url: str) -> None:
            async with Served("streamable-http", tmp_path, url=url).client() as client:
                reply = await client.call_tool("attp_execute", {"code": WRITER.format(me=me, other=other)})
            assert reply.structured_content is not None
            results[me] = reply.structured_content

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(write, "A", "B", servers[0][1])
                group.start_soon(write, "B", "A", servers[1][1])
    finally:
        for process, _url in servers:
            process.terminate()
        for process, _url in servers:
            process.wait(timeout=10)

    assert {me: (r["status"], r["error"]) for me, r in results.items()} == {"A": ("ok", None), "B": ("ok", None)}
    out = {me: r["result"] for me, r in results.items()}
    assert out["A"]["seen"] and out["B"]["seen"]
    assert all(len(o["made"]) == 80 and len(o["moved"]) == 19 for o in out.values())  # 1 + 80 + 19 = 100 writes

    pages = usr_pages(db_path)
    made = out["A"]["made"] + out["B"]["made"]
    assert set(pages) == {"usr-0", out["A"]["mine"], out["B"]["mine"], *made}  # nothing lost, nothing extra
    assert len(set(made)) == 160
    for me, other in (("A", "B"), ("B", "A")):
        assert [pages[i]["name"] for i in out[me]["made"]] == [f"{me}-{i}" for i in range(99) if i % 5 != 4]
        folder = sorted((p for p in pages.values() if p["parent"] == out[me]["mine"]), key=lambda p: p["position"])
        assert [p["page_index"] for p in folder] == out[me]["moved"]  # every move landed, in order
        assert not set(out[me]["moved"]) & {p["page_index"] for p in pages.values() if p["parent"] == "usr-0"}
        assert out[other]["mine"] != out[me]["mine"]
    siblings: dict[str, list[int]] = {}
    for index, page in pages.items():
        if index == "usr-0":
            assert page["parent"] is None
            continue
        assert pages[page["parent"]]["kind"] == "contents", index  # every link points at a folder
        siblings.setdefault(page["parent"], []).append(page["position"])
    assert all(sorted(p) == list(range(len(p))) for p in siblings.values()), siblings
    numbers = sorted(int(i.split("-")[1]) for i in made)
    owners = [pages[f"usr-{n}"]["name"][0] for n in numbers]
    assert sum(a != b for a, b in itertools.pairwise(owners)) >= 2, "the two servers never interleaved"
