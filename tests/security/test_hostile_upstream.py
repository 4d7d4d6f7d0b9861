"""Hostile data from an upstream MCP server, through the real path (runtime, gateway, worker).

Upstream servers are trusted code, but what they return is untrusted (SECURITY.md point 8): a result
past the server's ``max_result_bytes`` must be refused at a cost bounded by that limit, not by what
the upstream sent, since the conversion runs on the server's event loop that every session shares.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from harness import make_settings

from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime

pytestmark = [pytest.mark.anyio, pytest.mark.process]

HOSTILE = Path(__file__).parent.parent / "support" / "hostile_server.py"
LIMIT = 100_000


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def runtime(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    servers = {"hostile": {"command": sys.executable, "args": [str(HOSTILE)], "max_result_bytes": LIMIT}}
    settings = make_settings(tmp_path_factory.mktemp("hostile"), toolpacks=[], mcp_servers=servers, timeout_s=20.0)
    async with open_runtime(settings) as opened:
        yield opened


async def run(runtime: Runtime, code: str) -> dict[str, Any]:
    return (await runtime.execute(ExecuteRequest(code=code))).model_dump(mode="json")


async def test_upstream_json_text_flood_is_refused_before_it_is_parsed(runtime: Runtime) -> None:
    """Regression: a 3 MB text block of ``[],`` was parsed into a million lists and walked on the event
    loop before its size was checked (with the default 10 MB limit: seconds of stall for every session)."""
    data = await run(runtime, "__result__ = flood(1_000_000)")
    assert data["error"]["code"] == "RESULT_TOO_LARGE", data
    assert f"{LIMIT:,}" in data["error"]["message"]
    # Past twice the limit (plus 1 MiB) the message is not even read (issue 22); below, measured unparsed:
    data = await run(runtime, "__result__ = flood(200_000)")
    assert data["error"]["code"] == "RESULT_TOO_LARGE", data
    assert "600,004 characters of text" in data["error"]["message"], data["error"]


async def test_upstream_structured_flood_stops_at_the_limit(runtime: Runtime) -> None:
    """Regression: structured content of a million lists was copied in full before its size was checked."""
    data = await run(runtime, "__result__ = flood_structured(200_000)")
    assert data["error"]["code"] == "RESULT_TOO_LARGE", data
    assert f"more than {LIMIT:,} bytes" in data["error"]["message"], data["error"]
    data = await run(runtime, "__result__ = flood_structured(1_000_000)")  # past twice the limit: refused unread
    assert data["error"]["code"] == "RESULT_TOO_LARGE" and "refused unread" in data["error"]["message"], data


async def test_upstream_result_within_the_limit_comes_back(runtime: Runtime) -> None:
    data = await run(runtime, "__result__ = [flood(2), flood_structured(1)]")
    assert data["status"] == "ok", data["error"]
    assert data["result"] == [[[], [], []], {"items": [[]]}]


async def test_the_same_image_saved_by_calls_at_once_is_saved_for_each(tmp_path: Path) -> None:
    """Regression: results are converted in threads (off the event loop), and every call saving the same
    image wrote the same ``.partial`` file: one thread moved it into place while another still wrote it, and
    that one's move failed (FileNotFoundError), an error for an image that was saved."""
    servers = {"hostile": {"command": sys.executable, "args": [str(HOSTILE)], "save_media": True}}
    settings = make_settings(tmp_path, toolpacks=[], mcp_servers=servers, timeout_s=60.0)
    async with open_runtime(settings) as runtime:
        for _ in range(3):
            data = await run(runtime, "__result__ = [r['path'] for r in parallel('picture', [{'kb': 4096}] * 8)]")
            assert data["status"] == "ok", data["error"]
            assert len(set(data["result"])) == 1, data["result"]
            assert (tmp_path / data["result"][0]).stat().st_size == 4096 * 1024
            (tmp_path / data["result"][0]).unlink()
