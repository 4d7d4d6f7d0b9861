"""A real ``attp serve --engine cpython`` over stdio, SSE and Streamable HTTP, on both protocol eras: a chart the
program shows reaches the client as MCP image content (PNG) after the text, and the structured result says what it
is; a DataFrame read from the workspace comes back as plain data."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import SERVE_FLAGS, Served, serving_http, stdio_client
from mcp import Client
from mcp_types import ImageContent, TextContent

pytest.importorskip("matplotlib")

pytestmark = pytest.mark.anyio

FLAGS = [*SERVE_FLAGS, "--engine", "cpython", "--timeout-s", "30"]
CHART = """\
import pandas as pd
import matplotlib.pyplot as plt
sales = pd.read_csv("sales.csv")
totals = sales.groupby("region").amount.sum()
fig, ax = plt.subplots()
totals.plot.bar(ax=ax, title="Sales by region")
show(fig)
__result__ = totals
"""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cpython-served")
    (folder / "sales.csv").write_text("region,amount\nnorth,10\nsouth,20\nnorth,5\n")
    return folder


@pytest.fixture(scope="module")
def http(workspace: Path) -> Iterator[Served]:
    with serving_http(workspace, *FLAGS) as served:
        yield served


def client(transport: str, era: str, workspace: Path, http: Served) -> Client:
    options = {"mode": "legacy"} if era == "legacy" else {}
    if transport == "stdio":
        return stdio_client(workspace, *FLAGS, **options)
    if transport == "sse":
        return http.over_sse().client(**options)
    return http.client(**options)


@pytest.mark.parametrize(
    ("transport", "era"),
    [
        pytest.param("stdio", "modern", id="stdio-2026"),
        pytest.param("stdio", "legacy", id="stdio-legacy"),
        pytest.param("streamable-http", "modern", id="http-2026"),
        pytest.param("streamable-http", "legacy", id="http-legacy"),
        pytest.param("sse", "legacy", id="sse"),
    ],
)
async def test_a_chart_comes_back_as_image_content_after_the_text(
    transport: str, era: str, workspace: Path, http: Served
) -> None:
    async with client(transport, era, workspace, http) as mcp:
        result = await mcp.call_tool("attp_execute", {"code": CHART})
    assert not result.is_error, result.content
    text, *images = result.content
    assert isinstance(text, TextContent) and '"result":{"north":15,"south":20}' in text.text
    assert '"pictures":["image/png, ' in text.text
    assert len(images) == 1 and isinstance(images[0], ImageContent)
    assert images[0].mime_type == "image/png"
    png = base64.b64decode(images[0].data)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert result.structured_content is not None
    assert result.structured_content["pictures"] == [{"mime_type": "image/png", "bytes": len(png)}]
    assert result.structured_content["result"] == {"north": 15, "south": 20}
