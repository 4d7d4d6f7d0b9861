"""mcp_manifest.json: valid for the MCP registry, current with the code, and stale the moment a signature changes."""

from __future__ import annotations

import json
from pathlib import Path

import demo_pack
import jsonschema
import pytest

from attp_server import Toolpack
from attp_server.faces.cli import main
from attp_server.sandbox.stdlib.namespaces import MODULE_NAMES

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((Path(__file__).parent / "data" / "mcp-registry-server.schema.json").read_text())


def test_committed_manifest_is_valid_for_the_registry() -> None:
    manifest = json.loads((ROOT / "mcp_manifest.json").read_text())
    jsonschema.validate(manifest, SCHEMA)
    assert len(manifest["description"]) <= 100
    package = manifest["packages"][0]
    assert (package["registryType"], package["runtimeHint"], package["transport"]) == ("pypi", "uvx", {"type": "stdio"})
    names = {variable["name"] for variable in package["environmentVariables"]}
    assert {"ATTP_WORKSPACE", "ATTP_TIMEOUT_S", "ATTP_AUTH_TOKEN", "ATTP_TOOLPACKS"} <= names
    details = manifest["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]
    assert details["tool"]["name"] == "attp_execute"
    assert {"inputSchema", "outputSchema"} <= set(details["tool"])
    assert details["whitelistedModules"] == list(MODULE_NAMES)


def test_committed_manifest_is_current(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["manifest", "--check"]) == 0, capsys.readouterr().err


def test_check_fails_after_a_signature_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mcp_manifest.json"
    packs = ["--toolpack", "files", "--toolpack", "demo_pack:toolpack"]
    assert main(["manifest", "--path", str(path), *packs]) == 0
    jsonschema.validate(json.loads(path.read_text()), SCHEMA)
    assert main(["manifest", "--check", "--path", str(path), *packs]) == 0

    def add(a: int, b: int, c: int = 0) -> int:
        """Add up to three integers.

        Args:
            a: The first number.
            b: The second number.
            c: An optional third number.
        """
        return a + b + c

    changed = Toolpack(name="demo", description=demo_pack.toolpack.description, tools=[add])
    monkeypatch.setattr(demo_pack, "toolpack", changed)
    assert main(["manifest", "--check", "--path", str(path), *packs]) == 1
    assert "out of date" in capsys.readouterr().err
