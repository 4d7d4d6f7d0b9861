"""Every resource and the prompt of SPEC §5, over a real transport; the example third-party pack end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from harness import SERVE_FLAGS, Served, served_over, serving_http
from mcp_types import TextResourceContents

pytestmark = [pytest.mark.anyio, pytest.mark.process]

SCHEMA = json.loads((Path(__file__).parent / "data" / "atdf" / "enhanced_atdf_schema.json").read_text())


@pytest.fixture(params=["memory", "sse", "streamable-http"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Served:
    """As tests/conftest.py's, but the server in this process keeps no sandbox worker ready: reading resources
    runs no program, and starting two workers per client was most of this file's time."""
    served = served_over(request.param, request, tmp_path_factory)
    if served.settings is not None:
        served.settings = served.settings.model_copy(update={"workers": 0})
    return served


async def read(served: Served, uri: str) -> TextResourceContents:
    async with served.client() as client:
        result = await client.read_resource(uri)
    content = result.contents[0]
    assert isinstance(content, TextResourceContents)
    return content


async def test_resources_and_templates_are_listed(served: Served) -> None:
    async with served.client() as client:
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert {"attp://tools", "attp://prompt", "skill://index"} <= resources
    assert {"attp://tools/{name}", "attp://tools/{name}/atdf", "skill://{name}", "skill://{name}/{+path}"} <= templates


@pytest.mark.parametrize(
    ("uri", "mime", "needle"),
    [
        pytest.param("attp://tools", "text/x-python", "def read_file(path: str", id="tools"),
        pytest.param("attp://tools/add", "text/x-python", "def add(a: int, b: int) -> int", id="one-tool"),
        pytest.param("attp://tools/file_reader", "text/x-python", "def read_file(", id="alias"),
        pytest.param("attp://prompt", "text/markdown", "[tool_call]", id="prompt"),
        pytest.param("skill://index", "application/json", "attp-programs", id="skill-index"),
        pytest.param("skill://attp-programs", "text/markdown", "__result__", id="skill"),
    ],
)
async def test_resource_is_readable(served: Served, uri: str, mime: str, needle: str) -> None:
    content = await read(served, uri)
    assert content.mime_type == mime
    assert needle in content.text


async def test_atdf_resource_validates(served: Served) -> None:
    content = await read(served, "attp://tools/read_file/atdf")
    assert content.mime_type == "application/json"
    jsonschema.validate(json.loads(content.text), SCHEMA)


async def test_skill_file_resource(served: Served) -> None:
    index = json.loads((await read(served, "skill://index")).text)
    files = [(s["name"], f) for s in index for f in s.get("files", [])]
    assert files, "the bundled skills attach files"
    name, path = files[0]
    content = await read(served, f"skill://{name}/{path}")
    assert content.text


async def test_unknown_tool_resource_suggests(served: Served) -> None:
    async with served.client() as client:
        with pytest.raises(Exception, match="read_file"):
            await client.read_resource("attp://tools/reed_file")


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        pytest.param("skill://attp-program", "attp-programs", id="unknown-skill-suggests"),
        pytest.param("skill://attp-programs/nope.md", "nope.md", id="unknown-file"),
        pytest.param("skill://attp-programs/../../../etc/passwd", None, id="traversal"),
        pytest.param("skill://attp-programs/%2e%2e/%2e%2e/etc/passwd", None, id="encoded-traversal"),
    ],
)
async def test_bad_skill_resources_are_refused(served: Served, uri: str, message: str | None) -> None:
    async with served.client() as client:
        with pytest.raises(Exception, match=message) as caught:
            await client.read_resource(uri)
    assert "root:" not in str(caught.value)


async def test_system_prompt(served: Served) -> None:
    async with served.client() as client:
        english = await client.get_prompt("attp_system_prompt")
        chinese = await client.get_prompt("attp_system_prompt", {"language": "zh"})
    text: Any = english.messages[0].content
    assert "def read_file(" in text.text and "{{AVAILABLE_TOOLS}}" not in text.text
    assert "核心规则" in chinese.messages[0].content.text  # type: ignore[union-attr]


async def test_example_third_party_pack_end_to_end(workspace: Path) -> None:
    """examples/textstats is pip-installed; --toolpack textstats finds it by entry point, no server change."""
    with serving_http(workspace, *SERVE_FLAGS, "--toolpack", "textstats") as plugin:
        async with plugin.client() as client:
            description = (await client.list_tools()).tools[0].description or ""
            catalog = (await client.read_resource("attp://tools")).contents[0]
            atdf = (await client.read_resource("attp://tools/top_words/atdf")).contents[0]
            called = await client.call_tool("attp_execute", {"code": "__result__ = top_words('b a b', n=1)"})
        assert "top_words(text, n=10) -> list[dict] — Return the n most frequent words" in description
        assert "def word_count(text: str)" in catalog.text  # type: ignore[union-attr]
        jsonschema.validate(json.loads(atdf.text), SCHEMA)  # type: ignore[union-attr]
        assert called.structured_content["result"] == [{"word": "b", "count": 2}]


async def test_memory_view_resource_with_the_default_packs(tmp_path: Path) -> None:
    """With the default toolpacks (memory among them), memory://view is listed and shows the page tree."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {"ATTP_DB_PATH": str(tmp_path / "memory.sqlite3")}
    with serving_http(workspace, env=env) as served:
        async with served.client() as client:
            listed = {str(r.uri) for r in (await client.list_resources()).resources}
            await client.call_tool(
                "attp_execute", {"code": 'create_detail_page("Plan", "the plan", "step one", "usr-0")'}
            )
            view = (await client.read_resource("memory://view")).contents[0]
    assert "memory://view" in listed
    assert isinstance(view, TextResourceContents)
    assert "Plan" in view.text and "usr-0" in view.text
