"""The `modules` setting: what a run gets, what the checks, descriptions and manifest list, and bad values."""

from __future__ import annotations

import collections
import datetime as dt
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from harness import run_code, running

from attp_server.errors import ConfigError
from attp_server.faces.manifest import build_manifest
from attp_server.model.catalog import Catalog
from attp_server.sandbox.process.jsonify import NotJSON, to_json
from attp_server.sandbox.process.pool import Job, WorkerPool
from attp_server.sandbox.stdlib.containers import deque
from attp_server.sandbox.stdlib.namespaces import MODULE_NAMES
from attp_server.settings import Settings, load_settings
from attp_server.toolpack import RESERVED_NAMES, Toolpack, ToolpackLoadError, ToolRegistry, load_toolpack

SOME = ["math", "json", "typing"]


def test_default_is_every_module() -> None:
    assert Settings().modules == list(MODULE_NAMES)
    assert MODULE_NAMES[:6] == ("math", "json", "datetime", "re", "random", "statistics")


@pytest.mark.parametrize(
    ("source", "where"),
    [
        pytest.param({"environ": {"ATTP_MODULES": "math,colections"}}, "environment variable ATTP_MODULES", id="env"),
        pytest.param({"cli": {"modules": ["math", "colections"]}, "environ": {}}, "command line", id="cli"),
    ],
)
def test_unknown_module_names_field_name_choices_and_source(source: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(**source)
    message = str(caught.value)
    for needle in (
        "modules:",
        "'colections'",
        "did you mean 'collections'",
        "hashlib, difflib, uuid, tomllib, typing",
        where,
    ):
        assert needle in message


def test_unknown_module_in_config_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "attp.toml"
    path.write_text('modules = ["math", "numpy"]\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(config_file=path, environ={})
    assert "'numpy'" in str(caught.value)
    assert f"config file {path}" in str(caught.value)


def test_duplicates_are_dropped_in_order() -> None:
    assert load_settings(environ={"ATTP_MODULES": "json,math,json"}).modules == ["json", "math"]


def test_every_module_name_is_reserved_for_the_sandbox(tmp_path: Path) -> None:
    assert set(MODULE_NAMES) <= RESERVED_NAMES
    with pytest.raises(ToolpackLoadError, match="reserved"):
        ToolRegistry([Toolpack(name="hashlib", description="x", tools=[])], tmp_path, {})


def test_description_prompt_and_help_list_only_enabled_modules(tmp_path: Path) -> None:
    registry = ToolRegistry([load_toolpack("files")], tmp_path, {})
    catalog = Catalog(registry, Settings(workspace=tmp_path, modules=SOME))
    assert (
        "Modules ready to use without import (importing them is accepted and changes nothing): math, json, typing."
        in (catalog.description)
    )
    assert "collections" not in catalog.description
    assert "math, json, typing" in catalog.prompt()
    assert "collections" not in catalog.prompt()
    assert catalog.help("typing").startswith("typing: a curated module")
    assert "Optional" in catalog.help("typing")
    assert catalog.help("collections").startswith("No tool named 'collections'")
    full = Catalog(registry, Settings(workspace=tmp_path))
    assert "Counter, defaultdict, deque, namedtuple, OrderedDict" in full.help("collections")


@pytest.mark.anyio
async def test_manifest_lists_the_enabled_modules(tmp_path: Path) -> None:
    registry = ToolRegistry([load_toolpack("files")], tmp_path, {})
    manifest = await build_manifest(Settings(workspace=tmp_path, modules=SOME), registry)
    assert manifest["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]["whitelistedModules"] == SOME


def test_static_check_suggests_the_module_of_a_bare_member(tmp_path: Path) -> None:
    registry = ToolRegistry([load_toolpack("files")], tmp_path, {})
    enabled = registry.known_names()
    assert enabled.members["Counter"] == "collections.Counter"  # not typing.Counter: collections comes first
    assert enabled.members["reduce"] == "functools.reduce"
    assert "Counter" not in registry.known_names(SOME).members  # typing's names are for annotations


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("code", "code_expected", "message"),
    [
        pytest.param("c = Counter('aab')", "NAME_NOT_FOUND", "call collections.Counter(...)", id="bare-member"),
        pytest.param("x = reduce(max, [1, 2])", "NAME_NOT_FOUND", "call functools.reduce(...)", id="bare-function"),
        pytest.param("collections.Countr('a')", "NAME_NOT_FOUND", "did you mean collections.Counter", id="misspelt"),
    ],
)
async def test_static_check_names_where_a_member_lives(
    workspace: Path, code: str, code_expected: str, message: str
) -> None:
    async with running(workspace) as runtime:
        data = await run_code(runtime, code)
    assert data["error"]["code"] == code_expected
    assert message in data["error"]["message"]


@pytest.mark.anyio
async def test_a_disabled_module_is_refused_before_the_run(workspace: Path) -> None:
    async with running(workspace, modules=SOME) as runtime:
        data = await run_code(runtime, "x = 1\n__result__ = hashlib.md5(b'').hexdigest()")
    assert data["error"]["line"] == 2
    assert data["error"]["received"] == "hashlib"


@pytest.mark.anyio
async def test_disabled_modules_are_named_by_the_static_check(workspace: Path) -> None:
    async with running(workspace, modules=SOME) as runtime:
        enabled = await run_code(runtime, "__result__ = [math.sqrt(4), json.dumps(1), repr(typing.Any)]")
        disabled = await run_code(runtime, "__result__ = collections.Counter('a')")
        also_disabled = await run_code(runtime, "x = random\n__result__ = 1")
    assert enabled["result"] == [2.0, "1", "typing.Any"]
    for refused in (disabled, also_disabled):
        assert refused["error"]["code"] == "NAME_NOT_FOUND"
        assert "is not enabled on this server" in refused["error"]["message"]
        assert "the modules are: math, json, typing" in refused["error"]["message"]
    assert "'collections'" in disabled["error"]["message"]


async def _no_calls(name: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError(f"unexpected tool call {name}")


@pytest.mark.anyio
async def test_worker_holds_only_the_jobs_modules() -> None:
    """Past the static check too: a job naming some modules gets exactly those in its worker."""
    code = "__result__ = [repr(typing.Any), json.dumps(1)]\ncollections"
    job = Job(code=code, tools=[], namespaces={}, timeout_s=5, max_output_bytes=1000, max_result_bytes=1000,
              max_tool_calls=0, modules=SOME)  # fmt: skip
    async with WorkerPool(size=1, max_workers=1, memory_mb=256) as pool:
        limited = await pool.run(job, _no_calls)
        everything = await pool.run(replace(job, code=code.replace("\ncollections", ""), modules=None), _no_calls)
    assert limited["error"]["code"] == "NAME_NOT_FOUND"
    assert "'collections'" in limited["error"]["message"]
    assert everything["result"] == ["typing.Any", "1"]


@pytest.mark.anyio
async def test_no_modules_at_all(workspace: Path) -> None:
    async with running(workspace, modules=[]) as runtime:
        data = await run_code(runtime, "__result__ = sum([1, 2])")
        refused = await run_code(runtime, "x = math\n__result__ = 1")
        assert "(importing them is accepted and changes nothing): none." in runtime.catalog.description
    assert data["result"] == 3
    assert refused["error"]["code"] == "NAME_NOT_FOUND"


# ---------------------------------------------------------------- module values as JSON

Point = collections.namedtuple("Point", "x y")

AS_JSON = [
    pytest.param(collections.Counter("aab"), {"a": 2, "b": 1}, id="counter"),
    pytest.param(collections.OrderedDict([("b", 1), ("a", None)]), {"b": 1, "a": None}, id="ordereddict"),
    pytest.param(collections.defaultdict(list, {"k": [1]}), {"k": [1]}, id="defaultdict"),
    pytest.param(collections.ChainMap({"a": 1}, {"a": 2, "b": 3}), {"a": 1, "b": 3}, id="chainmap"),
    pytest.param(deque([1, (2, 3)], maxlen=5), [1, [2, 3]], id="deque"),
    pytest.param(collections.deque([1]), [1], id="stdlib-deque"),
    pytest.param(Point(1, dt.date(2024, 1, 2)), [1, "2024-01-02"], id="namedtuple"),
    pytest.param(uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001", id="uuid"),
    pytest.param({"nested": [collections.Counter(x=1)]}, {"nested": [{"x": 1}]}, id="nested"),
]


@pytest.mark.parametrize(("value", "expected"), AS_JSON)
def test_module_values_become_plain_json(value: object, expected: object) -> None:
    assert to_json(value) == expected


def test_counter_with_unhashable_json_key_names_the_place() -> None:
    with pytest.raises(NotJSON, match=r"__result__ has a key a tuple value"):
        to_json(collections.Counter([(1, 2)]))


@pytest.mark.anyio
async def test_module_values_as_results_and_tool_arguments(workspace: Path) -> None:
    async with running(workspace) as runtime:
        data = await run_code(
            runtime,
            "u = uuid.uuid5(uuid.NAMESPACE_DNS, 'a')\n"
            "__result__ = [slow_echo(u), add(*collections.deque([1, 2])), collections.Counter('ab'), u]",
        )
        iterator = await run_code(runtime, "__result__ = itertools.count()")
    assert data["status"] == "ok", data["error"]
    text = str(uuid.uuid5(uuid.NAMESPACE_DNS, "a"))
    assert data["result"] == [text, 3, {"a": 1, "b": 1}, text]
    assert iterator["error"]["code"] == "RESULT_NOT_SERIALIZABLE"
    assert "list(value)" in iterator["error"]["message"]


@pytest.mark.process
def test_worker_namespaces_do_not_load_openssl() -> None:
    """CPython's own digests serve hashlib and uuid3/uuid5: OpenSSL would cost every worker about 4 MB."""
    probe = (
        "import sys, importlib\n"
        "from attp_server.sandbox.process import worker\n"
        "from attp_server.sandbox.stdlib.modules import build_namespaces\n"
        "build_namespaces()\n"
        "own = all(importlib.util.find_spec(m) for m in ('_md5', '_sha1', '_sha256', '_sha512', '_sha3', '_blake2'))\n"
        "print(own, '_hashlib' in sys.modules)\n"
    )
    own, openssl = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert own == "True"  # this CPython has its own digests, so the test means something
    assert openssl == "False"
