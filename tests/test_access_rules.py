"""The access rules' own logic, through the runtime in process (the served path is tests/test_access.py): how
matching rules add up, the engines, approval mode and rate limit they give, the labels of principals, the
persons' tenant folders, and the settings that refuse what cannot work."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from harness import running
from opentelemetry import trace
from otel import recording

from attp_server.access.policy import Policy
from attp_server.access_config import AccessRule
from attp_server.errors import ConfigError
from attp_server.run.runtime import CallContext, ExecuteRequest, Runtime
from attp_server.sessions.registry import Caller
from attp_server.settings import Settings, load_settings

pytestmark = pytest.mark.anyio

RULES = {
    "readers": AccessRule(groups=["eng", "sales"], tools=["files.read_file", "files.list_files"]),
    "writers": AccessRule(groups=["eng"], tools=["files.*"], approval="destructive", rate_limit_per_minute=2),
    "calculators": AccessRule(principals=["carol"], tools=["demo.add"], engines=["starlark"], approval="never"),
}


async def run_as(runtime: Runtime, caller: Caller, code: str, **request: Any) -> dict[str, Any]:
    result = await runtime.execute(ExecuteRequest(code=code, **request), CallContext(caller=caller))
    return result.model_dump(mode="json")


def test_matching_rules_add_up() -> None:
    policy = Policy(RULES)
    eng = policy.grant("alice", frozenset({"eng"}))
    assert eng is not None and eng.rules == ("readers", "writers")
    assert eng.admits("files", "write_file") and not eng.admits("demo", "add")
    assert eng.approval == "destructive" and eng.rate_limit_per_minute == 2 and eng.engines is None
    sales = policy.grant("bob", frozenset({"sales"}))
    assert sales is not None and sales.admits("files", "read_file") and not sales.admits("files", "write_file")
    carol = policy.grant("carol", frozenset())
    assert carol is not None and carol.engines == frozenset({"starlark"}) and carol.approval == "never"
    nobody = policy.grant("dave", frozenset({"visitors"}))
    assert nobody is not None and nobody.rules == () and not nobody.admits_pack("files")
    assert Policy({}).grant("anyone") is None  # no rules: everything


def test_the_most_separate_isolation_of_the_matching_rules_holds() -> None:
    rules = {
        "all": AccessRule(groups=["staff"], tools=["*"]),
        "own": AccessRule(groups=["eng"], tools=["*"], isolation="tenant"),
        "apart": AccessRule(principals=["bob"], tools=["*"], isolation="session"),
        "open": AccessRule(principals=["bob", "carol"], tools=["*"], isolation="shared"),
    }
    policy = Policy(rules)
    assert policy.grant("dave", frozenset({"staff"})).isolation is None  # type: ignore[union-attr]  # the server's
    assert policy.grant("alice", frozenset({"staff", "eng"})).isolation == "tenant"  # type: ignore[union-attr]
    assert policy.grant("bob", frozenset({"eng"})).isolation == "session"  # type: ignore[union-attr]
    assert policy.grant("carol", frozenset()).isolation == "shared"  # type: ignore[union-attr]


async def test_the_rules_give_their_approval_rate_limit_and_engines(tmp_path: Path) -> None:
    async with running(tmp_path / "ws", access=RULES) as runtime:
        alice = Caller(person="alice", groups=frozenset({"eng"}))
        written = await run_as(runtime, alice, "__result__ = write_file('a.txt', 'x')")
        assert written["error"]["code"] == "APPROVAL_UNAVAILABLE"  # destructive needs an approval nobody can give
        reads = [await run_as(runtime, alice, "__result__ = list_files()") for _ in range(2)]  # the write counted
        assert reads[0]["status"] == "ok"
        assert reads[1]["error"]["code"] == "RATE_LIMITED" and "2 a minute" in reads[1]["error"]["message"]
        carol = Caller(person="carol")
        python = await run_as(runtime, carol, "__result__ = add(1, 2)")
        assert python["error"]["code"] == "FORBIDDEN" and "starlark" in python["error"]["message"]
        bob = Caller(person="bob", groups=frozenset({"sales"}))
        assert (await run_as(runtime, bob, "__result__ = list_files()"))["status"] == "ok"
        assert runtime.reach.approval(bob) == "never" and runtime.reach.approval(alice) == "destructive"


async def test_principals_are_labelled_by_configured_names_or_keyed_digests(tmp_path: Path) -> None:
    async with running(tmp_path / "ws", access=RULES) as runtime:
        assert runtime.reach.label(Caller(person="carol")) == "carol"  # a rule names carol
        label = runtime.reach.label(Caller(person="alice@example.com", groups=frozenset({"eng"})))
        assert label.startswith("p-") and "alice" not in label and len(label) == 18
        assert label == runtime.reach.label(Caller(person="alice@example.com"))  # stable: one series per person
        assert runtime.reach.label(None) == "anonymous"


async def test_each_signed_in_person_gets_a_tenant_folder_of_their_own(tmp_path: Path) -> None:
    async with running(tmp_path / "ws", isolation="tenant") as runtime:
        for name in ("alice@example.com", "../../etc"):
            caller = Caller(person=name)
            result = await run_as(runtime, caller, f"write_file('mine.txt', {name!r})\n__result__ = 1")
            assert result["status"] == "ok", result
        folders = sorted(p.name for p in (tmp_path / "ws" / "tenants").iterdir())
        assert len(folders) == 2 and all(f.startswith("person.") and len(f) == 39 for f in folders)


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"oauth_issuer": "https://sso.example.com"}, "public_url: sign-in (oauth_issuer) needs"),
        ({"oauth_issuer": "sso.example.com", "public_url": "https://a"}, "oauth_issuer: must be an http"),
        (
            {"oauth_introspection_url": "https://sso/introspect", "oauth_client_id": "x"},
            "introspection needs oauth_client_id and oauth_client_secret",
        ),
        (
            {"mcp_servers": {"gh": {"url": "https://gh/mcp", "identity": "token_exchange"}}},
            "identity = token_exchange, which needs oauth_issuer",
        ),
        ({"mcp_servers": {"jira": {"url": "https://j/mcp", "identity": "per_user"}}}, "which needs public_url"),
        ({"mcp_servers": {"git": {"command": "uvx", "identity": "per_user"}}}, "a command (stdio) runs once"),
        ({"access": {"x": {"tools": ["files.*"]}}}, "a rule applies to someone"),
        ({"access": {"x": {"groups": ["eng"], "tools": ["read_file"]}}}, "names no pack"),
    ],
)
def test_settings_refuse_what_cannot_work(tmp_path: Path, values: dict[str, Any], problem: str) -> None:
    config = tmp_path / "attp.toml"
    config.write_text(tomli_w.dumps(values))
    with pytest.raises(ConfigError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        load_settings(config_file=config, environ={})


def test_the_resource_url_defaults_to_the_mcp_path() -> None:
    assert Settings(public_url="https://attp.example.com/").resource_url == "https://attp.example.com/mcp"
    assert Settings(public_url="https://a", oauth_audience="api://attp").resource_url == "api://attp"


async def test_the_call_span_and_log_line_name_the_principal_by_label(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``enduser.id`` on the call's span and ``principal`` in its log line: a configured name, or a keyed digest."""
    caplog.set_level(logging.INFO, logger="attp_server.ops.call_log")
    with recording() as exporter:
        async with running(tmp_path / "ws", access=RULES) as runtime:
            tracer = trace.get_tracer("test")
            for who in (Caller(person="carol"), Caller(person="alice@example.com", groups=frozenset({"eng"}))):
                with tracer.start_as_current_span(f"call by {who.person}"):
                    await run_as(runtime, who, "__result__ = 1", engine="starlark" if who.person == "carol" else None)
        spans = {span.name: dict(span.attributes or {}) for span in exporter.get_finished_spans()}
    assert spans["call by carol"]["enduser.id"] == "carol"
    alice = spans["call by alice@example.com"]["enduser.id"]
    assert isinstance(alice, str) and alice.startswith("p-") and "alice" not in alice
    logged = [getattr(r, "fields", {}).get("principal") for r in caplog.records if r.getMessage() == "attp_execute"]
    assert "carol" in logged and alice in logged
