"""``mcp_manifest.json``: the MCP registry's ``server.json`` for this package (SPEC §12).

Built from what the running code would serve with the default toolpacks: the `attp_execute` tool
with its input and output schemas, the resources and prompts, the toolpacks and their tool
signatures, the whitelisted modules and default limits. ``attp manifest --check`` fails when the
committed file differs, so a changed tool signature cannot ship with a stale manifest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attp_server import __version__
from attp_server.faces.app import create_server
from attp_server.model.catalog import enabled_modules
from attp_server.run.runtime import Runtime
from attp_server.sandbox.process.pool import WorkerPool
from attp_server.settings import ENV_PREFIX, Settings
from attp_server.toolpack import ToolRegistry

SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json"
NAME = "io.github.attp-server/attp-server"
DESCRIPTION = "One MCP tool, attp_execute: the model writes a Python program that calls your tools."
LIMITS = ("timeout_s", "memory_mb", "max_tool_calls", "max_code_chars", "max_output_bytes", "max_result_bytes")


def _environment_variables() -> list[dict[str, Any]]:
    variables = []
    for name, field in Settings.model_fields.items():
        if name == "toolpack_options":
            continue
        variable: dict[str, Any] = {
            "name": f"{ENV_PREFIX}{name.upper()}",
            "description": field.description,
            "isRequired": False,
        }
        if name == "auth_token":
            variable["isSecret"] = True
        default = field.get_default(call_default_factory=True)
        if isinstance(default, list):
            variable["default"] = ",".join(str(item) for item in default)
        elif default is not None:
            variable["default"] = str(default)
        variables.append(variable)
    return variables


async def build_manifest(settings: Settings, registry: ToolRegistry) -> dict[str, Any]:
    """The manifest for `registry`; nothing is started (the worker pool is never entered)."""
    pool = WorkerPool(size=0, max_workers=1, memory_mb=settings.memory_mb)
    server = create_server(Runtime(settings, registry, pool))
    tool = (await server.list_tools())[0]
    resources = [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in await server.list_resources()]
    templates = [
        t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in await server.list_resource_templates()
    ]
    prompts = [p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in await server.list_prompts()]
    details = {
        "tool": tool.model_dump(mode="json", by_alias=True, exclude_none=True),
        "resources": resources,
        "resourceTemplates": templates,
        "prompts": prompts,
        "toolpacks": {
            name: {
                "description": pack.description,
                "tools": [t.signature_text() for t in registry.tools.values() if t.pack == name],
            }
            for name, pack in registry.packs.items()
        },
        "whitelistedModules": list(enabled_modules(settings)),
        "defaultLimits": {key: getattr(settings, key) for key in LIMITS},
    }
    return {
        "$schema": SCHEMA_URL,
        "name": NAME,
        "description": DESCRIPTION,
        "version": __version__,
        "packages": [
            {
                "registryType": "pypi",
                "identifier": "attp-server",
                "version": __version__,
                "runtimeHint": "uvx",
                "transport": {"type": "stdio"},
                "packageArguments": [{"type": "positional", "value": "serve"}],
                "environmentVariables": _environment_variables(),
            }
        ],
        "_meta": {"io.modelcontextprotocol.registry/publisher-provided": details},
    }


def render(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"


def differences(path: Path, manifest: dict[str, Any]) -> list[str]:
    """Top-level places where the file at `path` differs from `manifest` (empty when they agree)."""
    try:
        current = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [f"{path} does not exist"]
    except ValueError as exc:
        return [f"{path} is not JSON: {exc}"]
    if current == manifest:
        return []
    found = []
    for key in sorted(set(current) | set(manifest)):
        if current.get(key) != manifest.get(key):
            found.append(key)
    meta_key = "io.modelcontextprotocol.registry/publisher-provided"
    old, new = current.get("_meta", {}).get(meta_key, {}), manifest["_meta"][meta_key]
    found += [f"_meta.{key}" for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
    return found
