"""``attp bundle``: an MCP Bundle (``.mcpb``) Claude Desktop installs with one click.

A bundle is a ZIP file with a ``manifest.json`` (MCPB manifest 0.3, the version Claude Desktop and
``@anthropic-ai/mcpb`` read). This one carries no code: its server is this installation's ``attp``
script (an absolute path, as `attp config claude` prints), started over stdio as ``attp serve``. The
user chooses, in Claude Desktop's install dialog (``user_config``), the workspace folder, the upstream
servers file (a Claude-format JSON ``{"mcpServers": ...}``, optional) and the approval mode; Claude
Desktop fills them into the server's environment (``ATTP_WORKSPACE``, ``ATTP_MCP_CONFIG``,
``ATTP_APPROVAL``), where the settings read them as they read any ``ATTP_*`` variable. The server's own data
(memory, the sessions' store, its secret) goes to ``~/.attp-server/``, outside the workspace the programs see; a
workspace chosen around it, or around the upstream servers file, is refused at start (`store.layout`), and the
dialog says so.
"""

from __future__ import annotations

import io
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

from attp_server import __version__
from attp_server.faces.client_config import server_command

MANIFEST_VERSION = "0.3"
APPROVALS = ("never", "destructive", "always")

README = """attp-server as an MCP Bundle: one tool, attp_execute, that runs Python programs against the tools
(files in the chosen workspace folder, and the MCP servers of the chosen upstream servers file).

This bundle starts {command} from this machine's installation; if that installation moves, make the
bundle again with `attp bundle`.
"""


def bundle_manifest(name: str = "attp-server") -> dict[str, Any]:
    """The ``manifest.json`` of the bundle: this installation's server, and the three choices the user makes."""
    command, *prefix = server_command()
    platform = {"darwin": "darwin", "win32": "win32"}.get(sys.platform, "linux")
    return {
        "manifest_version": MANIFEST_VERSION,
        "name": name,
        "display_name": "attp-server",
        "version": __version__,
        "description": "One tool, attp_execute: the model writes a short Python program that calls your files "
        "and your MCP servers' tools, and reads one result.",
        "long_description": "attp-server runs each program in a locked-down worker process against the files of "
        "the workspace folder and the tools of the MCP servers listed in the upstream servers file (the same "
        "JSON as claude_desktop_config.json). One call replaces a dozen tool calls.",
        "author": {"name": "attp-server"},
        "license": "MIT",
        "keywords": ["mcp", "gateway", "python", "sandbox", "code execution"],
        "server": {
            "type": "binary",
            "entry_point": command,
            "mcp_config": {
                "command": command,
                "args": [*prefix, "serve"],
                "env": {
                    "ATTP_WORKSPACE": "${user_config.workspace}",
                    "ATTP_MCP_CONFIG": "${user_config.upstream_servers}",
                    "ATTP_APPROVAL": "${user_config.approval}",
                    # The data folder (memory, the store, the secret): the user's, not Claude's cwd or the workspace.
                    "ATTP_DB_PATH": "${HOME}/.attp-server/memory.sqlite3",
                },
            },
        },
        "tools": [
            {
                "name": "attp_execute",
                "description": "Run a Python program against the workspace's files and the upstream servers' tools.",
            }
        ],
        "compatibility": {"platforms": [platform], "runtimes": {"python": ">=3.11"}},
        "user_config": {
            "workspace": {
                "type": "directory",
                "title": "Workspace folder",
                "description": "The folder the programs read and write (nothing outside it). Not your home folder, "
                "nor one that holds the upstream servers file: the server's own files (~/.attp-server/) must stay "
                "where programs cannot reach them, and it does not start otherwise.",
                "required": True,
            },
            "upstream_servers": {
                "type": "file",
                "title": "Upstream MCP servers (optional)",
                "description": 'A JSON file in Claude Desktop\'s format, {"mcpServers": {...}}: the servers whose '
                "tools the programs call. Edits to it apply while the server runs, so keep it outside the "
                "workspace folder (programs can change what is in there).",
                "required": False,
                "default": "",
            },
            "approval": {
                "type": "string",
                "title": "Ask before tool calls",
                "description": "never; destructive (ask before a tool that changes or deletes something); always.",
                "required": False,
                "default": "destructive",
            },
        },
    }


def write_bundle(output: Path, name: str = "attp-server") -> dict[str, Any]:
    """Write the ``.mcpb`` file (written whole, then renamed into place); return its manifest."""
    manifest = bundle_manifest(name)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", json.dumps(manifest, indent=2) + "\n")
        archive.writestr("README.md", README.format(command=manifest["server"]["mcp_config"]["command"]))
    partial = output.with_name(output.name + ".partial")
    partial.write_bytes(buffer.getvalue())
    partial.replace(output)
    return manifest
