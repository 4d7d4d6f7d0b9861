"""TAM blocks (seed 003) over every real transport: the same tools, trace and result shape as code."""

from __future__ import annotations

import pytest
from harness import Served

pytestmark = [pytest.mark.anyio, pytest.mark.process]

SINGLE = """I will read the notes first.
<|[REQUEST_TOOL]|>
command:「始」file_reader「末」
path:「始」notes.txt「末」
<|[END_TOOL]|>
"""

CHAIN = """<|[REQUEST_TOOL]|>
command1:「始」FileOperator.WriteFile「末」
path1:「始」notes.txt「末」
content1:「始」a "quoted" \\ line
「始」 and 「末 」 <|markers|>
「末」
command2:「始」files:read_file「末」
path2:「始」notes.txt「末」
max_lines2:「始」1「末」
command3:「始」add「末」
a3:「始」20「末」
b3:「始」22「末」
<|[END_TOOL]|>
"""


async def test_tam_chain_runs_in_order_with_per_step_results(served: Served) -> None:
    async with served.client() as client:
        chain = await client.call_tool(
            "attp_execute", {"envelope": CHAIN.replace("FileOperator.WriteFile", "write_file")}
        )
        single = await client.call_tool("attp_execute", {"envelope": SINGLE})
    content = chain.structured_content
    assert content is not None and content["status"] == "ok", content
    steps = content["result"]["steps"]
    assert [(s["step"], s["tool"], s["ok"]) for s in steps] == [
        (1, "write_file", True),
        (2, "read_file", True),
        (3, "add", True),
    ]
    assert steps[1]["result"].startswith('a "quoted" \\ line\n')
    assert steps[2]["result"] == 42
    assert [c["tool"] for c in content["calls"]] == ["write_file", "read_file", "add"]
    assert (served.workspace / "notes.txt").read_text() == 'a "quoted" \\ line\n「始」 and 「末 」 <|markers|>\n'
    assert single.structured_content is not None
    assert single.structured_content["result"]["steps"][0]["result"].startswith('a "quoted"')


async def test_unknown_tool_id_is_refused_before_anything_runs(served: Served) -> None:
    async with served.client() as client:
        result = await client.call_tool("attp_execute", {"envelope": CHAIN})
    content = result.structured_content
    assert content is not None and result.is_error
    assert content["error"]["code"] == "NAME_NOT_FOUND"
    assert content["error"]["suggested_value"] == "write_file"
    assert content["error"]["line"] == 2
    assert content["calls"] == []


async def test_malformed_block_points_at_the_line(served: Served) -> None:
    async with served.client() as client:
        result = await client.call_tool(
            "attp_execute", {"envelope": "<|[REQUEST_TOOL]|>\ncommand:「始」read_file「末」\npath:「始」x.txt\n"}
        )
    content = result.structured_content
    assert content is not None and content["error"]["code"] == "INVALID_ENVELOPE"
    assert content["error"]["line"] == 3
