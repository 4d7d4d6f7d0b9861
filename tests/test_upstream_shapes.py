"""What the model reads of an upstream server, in detail (issue 24): shapes of object schemas, $ref and
cycles, enums, Python-literal results, and the stderr line that says why a server is down."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import mcp_types as types
import pytest

from attp_server.toolpack import format_signature
from attp_server.toolpacks.mcp.content import result_data
from attp_server.toolpacks.mcp.failure import withheld
from attp_server.toolpacks.mcp.literal import python_literal
from attp_server.toolpacks.mcp.schema import MAX_SHAPES, shape_of
from attp_server.toolpacks.mcp.stderr import KEEP_LINES, REDACTED, StderrTail

ENTITIES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The name of the entity"},
                    "entityType": {"type": "string", "description": "The type of the entity"},
                    "observations": {"type": "array", "items": {"type": "string"}, "description": "Facts."},
                    "weight": {"type": "number"},
                },
                "required": ["name", "entityType", "observations"],
            },
        }
    },
    "required": ["entities"],
}

TREE: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {
                "label": {"type": "string", "description": "Its label."},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["label"],
        },
        "Mode": {"type": "string", "enum": ["fast", "deep"]},
    },
    "properties": {
        "root": {"$ref": "#/$defs/Node"},
        "mode": {"$ref": "#/$defs/Mode"},
        "dangling": {"$ref": "#/$defs/Missing"},
        "remote": {"$ref": "https://example.org/schema.json"},
    },
    "required": ["root"],
}


def test_objects_show_their_keys_and_help_describes_each_field() -> None:
    shape = shape_of("Create entities.", ENTITIES, None, "test")
    assert format_signature(shape.signature) == (
        "(entities: list[{name: str, entityType: str, observations: list[str], weight?: float}])"
    )
    assert (
        "Args:\n    entities:\n"
        "        name: The name of the entity\n"
        "        entityType: The type of the entity\n"
        "        observations: Facts.\n"
        "        weight (optional): float\n"
    ) in shape.doc


def test_refs_are_resolved_and_a_cycle_reads_as_its_name() -> None:
    shape = shape_of("Walk.", TREE, None, "test")
    assert format_signature(shape.signature) == (
        "(root: {label: str, children?: list[Node]}, mode: Literal['fast', 'deep'] | None = None, "
        "dangling: Any = None, remote: Any = None)"
    )
    assert (
        "    root:\n        label: Its label.\n        children (optional): list[Node]\n    mode: One of" in shape.doc
    )


def test_return_shapes_come_from_the_output_schema() -> None:
    output = {
        "type": "object",
        "properties": {"graph": {"type": "object", "properties": {"nodes": {"type": "array", "items": {}}}}},
        "required": ["graph"],
    }
    shape = shape_of("Read.", {"type": "object"}, output, "test")
    assert format_signature(shape.signature) == "() -> {graph: {nodes?: list}}"


def test_a_huge_schema_costs_bounded_work() -> None:
    """Thousands of object schemas: past MAX_SHAPES they are plain dict, and nothing recurses without end."""
    wide = {
        "type": "object",
        "properties": {
            f"p{i}": {
                "type": "object",
                "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}},
            }
            for i in range(500)
        },
    }
    started = time.perf_counter()
    shape = shape_of("Wide.", wide, None, "test")
    assert time.perf_counter() - started < 5
    text = format_signature(shape.signature)
    assert text.count("{") <= MAX_SHAPES and "p499: dict | None = None" in text
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(200):
        deep = {"type": "object", "properties": {"x": deep}, "required": ["x"]}
    assert "dict" in format_signature(shape_of("Deep.", deep, None, "test").signature)


# --- Python literals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "data"),
    [
        pytest.param("[{'id': 1, 'note': None, 'ok': True}]", [{"id": 1, "note": None, "ok": True}], id="rows"),
        pytest.param("[(1, 'a'), (2, 'b')]", [[1, "a"], [2, "b"]], id="tuples"),
        pytest.param("(1, -2.5)", [1, -2.5], id="tuple"),
        pytest.param("{'it''s': \"x\", 2: [ ]}", {"its": "x", 2: []}, id="dict"),
        pytest.param("  [1, {2, 3}]  \n", [1, [2, 3]], id="set-and-space"),
    ],
)
def test_python_literals_of_plain_values_are_data(text: str, data: Any) -> None:
    assert python_literal(text) == data


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("__import__('os').system('true')", id="call"),
        pytest.param("[os.environ]", id="attribute"),
        pytest.param("[1 + 2]", id="arithmetic"),
        pytest.param("[b'raw']", id="bytes"),
        pytest.param("[1j]", id="complex"),
        pytest.param("[Decimal('1.5')]", id="decimal"),
        pytest.param("{**x}", id="unpacking"),
        pytest.param("'just a string'", id="string"),
        pytest.param("42", id="number"),
        pytest.param("[1, 2", id="unclosed"),
        pytest.param("[" * 150 + "]" * 150, id="too-deep"),
        pytest.param("[" * 5000 + "]" * 5000, id="parser-limit"),
        pytest.param("[" + "9" * 6000 + "]", id="huge-int"),
        pytest.param("Rows: [1, 2]", id="prose"),
    ],
)
def test_anything_else_stays_text(text: str) -> None:
    assert python_literal(text) is None


def test_a_literal_result_is_data_through_the_result_path() -> None:
    result = types.CallToolResult(content=[types.TextContent(type="text", text="[{'id': 1, 'name': 'Ada'}]")])
    assert result_data(result, unwrap=False, max_bytes=10_000) == [{"id": 1, "name": "Ada"}]
    too_big = types.CallToolResult(content=[types.TextContent(type="text", text=repr(list(range(5000))))])
    with pytest.raises(Exception, match="limit is 1,000"):
        result_data(too_big, unwrap=False, max_bytes=1000)


# --- stderr ---------------------------------------------------------------------------------------

PYTHON_TRACEBACK = """Traceback (most recent call last):
  File "/srv/server.py", line 11, in <module>
    @server.list_resources()
     ^^^^^^^^^^^^^^^^^^^^^
AttributeError: 'Server' object has no attribute 'list_resources'
"""
NODE_TRACEBACK = """node:internal/modules/cjs/loader:1228
  throw err;
  ^

Error: Cannot find module '/srv/missing.js'
    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)
    at node:internal/main/run_main_module:28:49 {
  code: 'MODULE_NOT_FOUND',
  requireStack: []
}

Node.js v20.11.0
"""


REGISTRY_URL = "https://registry.npmjs.org/@modelcontextprotocol%2fserver-does-not-exist"
NPX_404 = f"""npm error code E404
npm error 404 Not Found - GET {REGISTRY_URL}
npm error 404
npm error 404  The requested resource '@modelcontextprotocol/server-does-not-exist@*' could not be found or you do not have permission to access it.
npm error 404
npm error 404 Note that you can also install from a
npm error 404 tarball, folder, http url, or git url.
npm error A complete log of this run can be found in: /root/.npm/_logs/2026-12-05T09_05_23_656Z-debug-0.log
"""  # npx -y of a package the registry does not have (npm 11), word for word
NPX_CERTIFICATE = """npm ERR! code UNABLE_TO_GET_ISSUER_CERT_LOCALLY
npm ERR! errno UNABLE_TO_GET_ISSUER_CERT_LOCALLY
npm ERR! request to https://registry.npmjs.org/x failed, reason: unable to get local issuer certificate

npm ERR! A complete log of this run can be found in: /home/me/.npm/_logs/debug-0.log
"""  # npm 9 behind a company's TLS proxy


async def tail_of(text: str, secrets: list[str] | None = None) -> StderrTail:
    tail = StderrTail("demo", secrets or [])
    tail.file.write(text)
    tail.file.flush()
    await tail.ended()
    return tail


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param(PYTHON_TRACEBACK, "AttributeError: 'Server' object has no attribute 'list_resources'", id="py"),
        pytest.param(NODE_TRACEBACK, "Error: Cannot find module '/srv/missing.js'", id="node"),
        pytest.param("starting\nlistening on stdio\n", "listening on stdio", id="no-error"),
        pytest.param("", None, id="silent"),
        pytest.param(NPX_404, f"npm error 404 Not Found - GET {REGISTRY_URL} (E404)", id="npx-404"),
        pytest.param(
            NPX_CERTIFICATE,
            "npm error request to https://registry.npmjs.org/x failed, reason: unable to get local issuer certificate "
            "(UNABLE_TO_GET_ISSUER_CERT_LOCALLY)",
            id="npx-certificate",
        ),
    ],
)
async def test_the_meaningful_stderr_line(text: str, line: str | None) -> None:
    assert (await tail_of(text)).meaningful() == line


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        pytest.param(
            "certificate verify failed", ("a missing certificate", ["NODE_OPTIONS", "SSL_CERT_FILE"]), id="ca"
        ),
        pytest.param(
            "npm ERR! code UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
            ("a missing certificate", ["NODE_OPTIONS", "SSL_CERT_FILE"]),
            id="npm-ca",
        ),
        pytest.param("getaddrinfo ENOTFOUND registry.npmjs.org", ("a proxy", ["HTTPS_PROXY"]), id="proxy"),
        pytest.param("Error: Cannot find module 'x'", ("a path", ["NODE_PATH"]), id="path"),
        pytest.param("ModuleNotFoundError: No module named 'mcp'", ("a path", ["NODE_PATH"]), id="module"),
        pytest.param(f"npm error 404 Not Found - GET {REGISTRY_URL}", None, id="registry-404"),
        pytest.param("AttributeError: 'Server' object has no attribute 'list_resources'", None, id="a-bug"),
        pytest.param("ValueError: ENOTFOUNDATION is not a word", None, id="no-whole-word"),
    ],
)
def test_variables_are_named_only_for_a_failure_they_cause(said: str, expected: tuple[str, list[str]] | None) -> None:
    """The variables a stdio server did not get are named when its failure looks like a missing certificate, a proxy
    or a path, and then only those of that kind; never for a failure no variable helps."""
    environ = {
        "PATH": "/usr/bin", "NODE_OPTIONS": "--use-openssl-ca", "SSL_CERT_FILE": "/etc/ca.pem", "HTTPS_PROXY": "http://p:3128",
        "NODE_PATH": "/opt/node", "PYTHONUNBUFFERED": "1", "NO_PROXY_HERE": "x", "GIVEN": "y",
    }  # fmt: skip
    assert withheld(said, environ, given=["PATH", "GIVEN"], passthrough=["NO_*"]) == expected


@pytest.mark.anyio
async def test_a_server_that_ran_a_while_is_explained_only_by_an_error_line() -> None:
    tail = await tail_of("listening on stdio\nhandled 3 requests\n")
    assert tail.meaningful(errors_only=True) is None
    assert (await tail_of(PYTHON_TRACEBACK)).meaningful(errors_only=True) is not None


@pytest.mark.anyio
async def test_stderr_is_redacted_cut_and_bounded() -> None:
    secret = "sk-live-0123456789"
    text = "".join(f"line {i}\n" for i in range(100)) + f"Error: bad token {secret}\n" + "x" * 100_000 + "\nlast\n"
    tail = await tail_of(text, [secret])
    lines = tail.lines()
    assert len(lines) == KEEP_LINES and lines[-1] == "last"
    assert f"Error: bad token {REDACTED}" in lines
    assert all(len(line) <= 303 for line in lines) and secret not in "".join(lines)
    assert tail.meaningful() == f"Error: bad token {REDACTED}"


@pytest.mark.anyio
async def test_the_reader_ends_with_the_process() -> None:
    tail = StderrTail("demo", [])
    code = "import sys, time; time.sleep(0.2); sys.stderr.write('child says Error: gone\\n')"
    child = subprocess.Popen([sys.executable, "-c", code], stderr=tail.file)
    tail.started()  # only the child holds the pipe now
    await tail.ended(timeout_s=10)
    assert child.wait(timeout=10) == 0
    assert tail.meaningful() == "child says Error: gone"
