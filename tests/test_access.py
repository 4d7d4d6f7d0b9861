"""Who reaches what, through the real server: two people signed in through the real OpenID provider, in different
groups, see different catalogs (the tool description, ``tools()``, ``help()``, the tool resources), are refused each
other's tools exactly as if they did not exist, and every such refusal is in the audit log; their handles are their
own; an edit of the rules applies while serving.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from harness import execute, free_port, serving_http
from idp import Idp, identity_provider
from upstreams import time_stdio

pytestmark = pytest.mark.anyio

RULES = """
[access.engineering]
groups = ["eng"]
tools = ["files.*"]

[access.sales]
groups = ["sales"]
tools = ["demo.add", "demo.records"]
rate_limit_per_minute = 1000
"""


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Idp]:
    users = {"alice": ["eng"], "bob": ["sales"], "carol": ["visitors"]}
    with identity_provider(tmp_path_factory.mktemp("idp"), users) as provider:
        yield provider


@pytest.fixture(scope="module")
def served(idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("access")
    port = free_port()
    config = tmp / "attp.toml"
    head = (
        f'oauth_issuer = "{idp.issuer}"\npublic_url = "http://127.0.0.1:{port}"\n'
        f'audit_log = "{tmp / "audit.jsonl"}"\nconfig_poll_s = 0.2\n'
    )
    config.write_text(head + RULES)
    flags = ["--config", str(config), "--toolpack", "files", "--toolpack", "demo_pack:toolpack"]
    with serving_http(tmp / "ws", *flags, port=port) as server:
        server.extra["config"], server.extra["head"], server.extra["audit"] = config, head, tmp / "audit.jsonl"
        yield server


@pytest.fixture(scope="module")
def tokens(idp: Idp, served: Any) -> dict[str, str]:
    return {name: idp.access_token(name, served.url + "/mcp") for name in ("alice", "bob", "carol")}


def as_person(served: Any, token: str, **options: Any) -> Any:
    return served.client(headers={"Authorization": f"Bearer {token}"}, **options)


async def description(served: Any, token: str, mode: str = "auto") -> str:
    async with as_person(served, token, mode=mode) as client:
        listed = await client.list_tools()
    return str(listed.tools[0].description)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_two_people_in_different_groups_read_different_catalogs(
    served: Any, tokens: dict[str, str], mode: str
) -> None:
    alice, bob = await description(served, tokens["alice"], mode), await description(served, tokens["bob"], mode)
    assert "read_file(" in alice and "add(" not in alice and "records(" not in alice
    assert "add(" in bob and "records(" in bob and "read_file(" not in bob and "slow_echo(" not in bob
    for token, mine, theirs in ((tokens["alice"], "read_file", "add"), (tokens["bob"], "add", "read_file")):
        async with as_person(served, token, mode=mode) as client:
            listed = await execute(client, "__result__ = [t['name'] for t in tools()]")
            assert mine in listed["result"] and theirs not in listed["result"]
            helped = await execute(client, f"__result__ = help({theirs!r})")
            assert helped["result"].startswith(f"No tool named {theirs!r}.")
            everything = await client.read_resource("attp://tools")
            text = everything.contents[0].text  # type: ignore[union-attr]
            assert f"def {mine}(" in text and f"def {theirs}(" not in text


async def test_nobody_matched_reaches_nothing(served: Any, tokens: dict[str, str]) -> None:
    text = await description(served, tokens["carol"])
    assert "read_file(" not in text and "add(" not in text
    async with as_person(served, tokens["carol"]) as client:
        data = await execute(client, "__result__ = tools()")
    assert data["result"] == []


async def test_another_persons_tool_is_refused_as_absent_and_audited(served: Any, tokens: dict[str, str]) -> None:
    async with as_person(served, tokens["alice"]) as client:
        theirs = await execute(client, "__result__ = records(2)")
        qualified = await execute(client, "__result__ = demo.add(1, 2)")
        by_name = await execute(client, "__result__ = parallel('demo.add', [{'a': 1, 'b': 2}])")
        absent = await execute(client, "__result__ = no_such_tool(2)")
    assert theirs["error"]["code"] == absent["error"]["code"] == "NAME_NOT_FOUND"
    assert theirs["error"]["message"].replace("records", "X") == absent["error"]["message"].replace("no_such_tool", "X")
    assert qualified["error"]["code"] == "NAME_NOT_FOUND"
    assert by_name["error"]["code"] == "NAME_NOT_FOUND" or by_name["result"][0]["error"]["code"] == "NAME_NOT_FOUND"
    async with as_person(served, tokens["bob"]) as client:
        assert (await execute(client, "__result__ = add(1, 2)"))["result"] == 3
        refused = await execute(client, "__result__ = read_file('x.txt')")
    assert refused["error"]["code"] == "NAME_NOT_FOUND"
    lines = [json.loads(line) for line in Path(served.extra["audit"]).read_text().splitlines()]
    refusals = {(line["principal"], line["tool"]) for line in lines if line["event"] == "access_refused"}
    assert ("alice", "demo.records") in refusals and ("alice", "demo.add") in refusals
    assert ("bob", "files.read_file") in refusals


async def test_a_handle_stays_with_the_person_who_made_it(served: Any, tokens: dict[str, str]) -> None:
    async with as_person(served, tokens["alice"]) as client:
        kept = await execute(client, "secret = 'alice'\n__result__ = 1")
    handle = kept["session"]
    async with as_person(served, tokens["bob"]) as client:
        taken = await execute(client, "__result__ = secret", session=handle)
    assert taken["error"]["code"] == "SESSION_NOT_FOUND"
    async with as_person(served, tokens["alice"]) as client:
        again = await execute(client, "__result__ = secret", session=handle)
    assert again["result"] == "alice"


async def test_an_edit_of_the_rules_applies_while_serving(served: Any, tokens: dict[str, str]) -> None:
    config: Path = served.extra["config"]
    try:
        config.write_text(served.extra["head"] + RULES.replace('tools = ["files.*"]', 'tools = ["files.*", "demo.*"]'))
        with anyio.fail_after(20):
            while "add(" not in await description(served, tokens["alice"]):
                await anyio.sleep(0.2)
        async with as_person(served, tokens["alice"]) as client:
            assert (await execute(client, "__result__ = add(20, 22)"))["result"] == 42
    finally:
        config.write_text(served.extra["head"] + RULES)
        deadline = time.monotonic() + 20
        while "add(" in await description(served, tokens["alice"]) and time.monotonic() < deadline:
            await anyio.sleep(0.2)


SEPARATE = """
[access.engineering]
groups = ["eng"]
tools = ["files.*"]
isolation = "tenant"

[access.sales]
groups = ["sales"]
tools = ["files.*"]
isolation = "session"

[access.visitors]
groups = ["visitors"]
tools = ["files.*"]
"""


@pytest.fixture(scope="module")
def separate(idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A server whose own ``isolation`` is shared, and whose rules give the engineers a folder each and the sales
    people a folder per session."""
    tmp = tmp_path_factory.mktemp("separate")
    port = free_port()
    config = tmp / "attp.toml"
    config.write_text(f'oauth_issuer = "{idp.issuer}"\npublic_url = "http://127.0.0.1:{port}"\n' + SEPARATE)
    with serving_http(tmp / "ws", "--config", str(config), "--toolpack", "files", port=port) as server:
        server.extra["ws"] = tmp / "ws"
        yield server


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_rule_gives_its_people_their_own_folders(separate: Any, idp: Idp, mode: str) -> None:
    """Issue 37: the rules say whose files and memory a person's calls see (``isolation``), beside the server's."""
    token = {name: idp.access_token(name, separate.url + "/mcp") for name in ("alice", "bob", "carol")}
    ws: Path = separate.extra["ws"]
    write = "write_file({!r}, 'x')\n__result__ = sorted(list_files('.'))"
    async with as_person(separate, token["alice"], mode=mode) as client:
        alice = await execute(client, write.format(f"alice-{mode}.txt"))
    async with as_person(separate, token["carol"], mode=mode) as client:
        carol = await execute(client, write.format(f"carol-{mode}.txt"))
    assert f"alice-{mode}.txt" in alice["result"] and f"carol-{mode}.txt" not in alice["result"]
    assert f"carol-{mode}.txt" in carol["result"] and f"alice-{mode}.txt" not in carol["result"]
    assert (ws / f"carol-{mode}.txt").is_file()  # carol's rule sets none: the server's shared workspace
    assert [path.parent.parent.name for path in ws.glob(f"*/*/alice-{mode}.txt")] == ["tenants"]
    async with as_person(separate, token["bob"], mode=mode) as client:
        first = await execute(client, write.format(f"bob-{mode}.txt"))
        handle = {"session": first["session"]} if first.get("session") else {}  # the handshake era: the connection
        again = await execute(client, "__result__ = sorted(list_files('.'))", **handle)
    assert first["result"] == again["result"] == [f"bob-{mode}.txt"]
    assert [path.parent.parent.name for path in ws.glob(f"*/*/bob-{mode}.txt")] == ["sessions"]
    async with as_person(separate, token["bob"], mode=mode) as client:  # another session: another folder
        other = await execute(client, "__result__ = sorted(list_files('.'))")
    assert other["result"] == []


async def test_metrics_answer_a_signed_in_person_and_name_no_one_the_configuration_does_not(
    idp: Idp, tmp_path: Path
) -> None:
    """``/metrics`` takes a signed-in person's token; a person no rule names by name is counted as ``other``, so
    the series stay bounded whoever signs in, and no person's name is in them."""
    port = free_port()
    config = tmp_path / "attp.toml"
    config.write_text(
        f'oauth_issuer = "{idp.issuer}"\npublic_url = "http://127.0.0.1:{port}"\n'
        '[access.visitors]\ngroups = ["visitors"]\ntools = ["files.*"]\nrate_limit_per_minute = 1\n'
    )
    with serving_http(tmp_path / "ws", "--config", str(config), "--toolpack", "files", port=port) as server:
        token = idp.access_token("carol", server.url + "/mcp")
        async with as_person(server, token) as client:
            data = await execute(client, "__result__ = [list_files('.') for _ in range(3)]")
        assert data["error"]["code"] == "RATE_LIMITED", data
        async with httpx.AsyncClient() as http:
            refused = await http.get(server.url + "/metrics")
            answer = await http.get(server.url + "/metrics", headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 401 and answer.status_code == 200
    assert 'attp_rate_limited_total{principal="other"} 1.0' in answer.text
    assert "carol" not in answer.text


async def test_a_rule_gives_a_person_some_tools_of_an_upstream_server(idp: Idp, tmp_path: Path) -> None:
    """Patterns over a real upstream server's tools (mcp-server-time): alice reaches one of its tools, bob the
    other; each is refused the other's as if it did not exist."""
    port = free_port()
    time_server = time_stdio()
    config = tmp_path / "attp.toml"
    config.write_text(
        f'oauth_issuer = "{idp.issuer}"\npublic_url = "http://127.0.0.1:{port}"\ntoolpacks = []\n'
        f"[mcp_servers.time]\ncommand = {json.dumps(time_server['command'])}\nargs = {json.dumps(time_server['args'])}\n"
        '[access.engineering]\ngroups = ["eng"]\ntools = ["time.get_current_time"]\n'
        '[access.sales]\ngroups = ["sales"]\ntools = ["time.convert_*"]\n'
    )
    now = "__result__ = time.get_current_time(timezone='UTC')['timezone']"
    convert = "__result__ = time.convert_time(source_timezone='UTC', time='12:00', target_timezone='UTC')['source']"
    with serving_http(tmp_path / "ws", "--config", str(config), port=port) as server:
        answers = {}
        for login in ("alice", "bob"):
            async with as_person(server, idp.access_token(login, server.url + "/mcp")) as client:
                listed = await execute(client, "__result__ = sorted(t['name'] for t in tools())")
                answers[login] = (listed, await execute(client, now), await execute(client, convert))
    alice, bob = answers["alice"], answers["bob"]
    assert alice[0]["result"] == ["get_current_time"] and bob[0]["result"] == ["convert_time"]
    assert alice[1]["result"] == "UTC" and alice[2]["error"]["code"] == "NAME_NOT_FOUND"
    assert bob[2]["result"]["timezone"] == "UTC" and bob[1]["error"]["code"] == "NAME_NOT_FOUND"


async def test_a_rules_approval_and_engines_hold_through_the_server(idp: Idp, tmp_path: Path) -> None:
    """A rule's ``approval`` and ``engines`` through the real server: the engineers' writes need a person's approval
    (a client that cannot ask gets APPROVAL_UNAVAILABLE), the visitors' programs are Starlark only."""
    port = free_port()
    config = tmp_path / "attp.toml"
    config.write_text(
        f'oauth_issuer = "{idp.issuer}"\npublic_url = "http://127.0.0.1:{port}"\nengines = ["python", "starlark"]\n'
        '[access.engineering]\ngroups = ["eng"]\ntools = ["files.*"]\napproval = "destructive"\n'
        '[access.visitors]\ngroups = ["visitors"]\ntools = ["files.*"]\nengines = ["starlark"]\n'
    )
    with serving_http(tmp_path / "ws", "--config", str(config), "--toolpack", "files", port=port) as server:
        async with as_person(server, idp.access_token("alice", server.url + "/mcp")) as client:
            written = await execute(client, "__result__ = write_file('a.txt', 'x')")
            listed = await execute(client, "__result__ = list_files('.')")
        async with as_person(server, idp.access_token("carol", server.url + "/mcp")) as client:
            python = await execute(client, "__result__ = list_files('.')")
            starlark = await execute(client, "__result__ = len(list_files('.'))", engine="starlark")
    assert written["error"]["code"] == "APPROVAL_UNAVAILABLE", written
    assert listed["status"] == "ok" and listed["result"] == []  # nothing was written
    assert python["error"]["code"] == "FORBIDDEN" and "starlark" in python["error"]["message"], python
    assert starlark["status"] == "ok" and starlark["result"] == 0, starlark
