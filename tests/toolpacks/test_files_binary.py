"""The files pack's unlisted byte tools (what a ``cpython`` program's ``open()`` reaches): bytes in chunks, the same
workspace boundary and size limit as the listed tools, and nothing of them in what the model reads."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from attp_server.model.catalog import Catalog
from attp_server.settings import Settings
from attp_server.toolpack import ToolError, ToolpackContext, ToolRegistry
from attp_server.toolpacks.files import FilesOptions, toolpack


@pytest.fixture
def files(tmp_path: Path) -> SimpleNamespace:
    assert toolpack.build is not None
    built = toolpack.build(ToolpackContext(workspace=tmp_path / "ws", options=FilesOptions(max_bytes=1000)))
    return SimpleNamespace(**{f.__name__: f for f in built})


def code_of(error: pytest.ExceptionInfo[ToolError]) -> str:
    return error.value.code


def test_bytes_round_trip_in_chunks(files: SimpleNamespace, tmp_path: Path) -> None:
    data = bytes(range(256)) * 3
    assert files.write_bytes("bin/a.dat", base64.b64encode(data[:500]).decode())["created"] is True
    assert files.write_bytes("bin/a.dat", base64.b64encode(data[500:]).decode(), append=True)["bytes"] == 768
    assert (tmp_path / "ws" / "bin" / "a.dat").read_bytes() == data
    first = files.read_bytes("bin/a.dat", size=300)
    rest = files.read_bytes("bin/a.dat", offset=300)
    assert first["size"] == rest["size"] == 768
    assert base64.b64decode(first["data"]) + base64.b64decode(rest["data"]) == data
    assert files.file_info("bin") == {
        "kind": "dir",
        "size": 0,
        "modified": pytest.approx(os.stat(tmp_path / "ws" / "bin").st_mtime),
    }
    assert files.file_info("bin/a.dat")["size"] == 768
    assert files.file_info("bin/none.dat") == {"kind": "none", "size": 0, "modified": 0.0}  # an answer, not an error


def test_the_workspace_boundary_and_the_size_limit_hold(files: SimpleNamespace, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("secret")
    (tmp_path / "ws" / "link").symlink_to(tmp_path / "outside.txt")
    for call in (
        lambda: files.read_bytes("../outside.txt"),
        lambda: files.read_bytes("/etc/passwd"),
        lambda: files.read_bytes("link"),
        lambda: files.file_info("link"),
        lambda: files.write_bytes("../x", "AA=="),
    ):
        with pytest.raises(ToolError) as error:
            call()
        assert code_of(error) in {"PATH_OUTSIDE_WORKSPACE", "INVALID_PATH"}, error.value.message
    with pytest.raises(ToolError) as error:
        files.write_bytes("big.bin", base64.b64encode(b"x" * 1001).decode())
    assert code_of(error) == "FILE_TOO_LARGE"
    (tmp_path / "ws" / "big.bin").write_bytes(b"x" * 1001)
    with pytest.raises(ToolError) as error:
        files.read_bytes("big.bin")
    assert code_of(error) == "FILE_TOO_LARGE"
    with pytest.raises(ToolError) as error:
        files.write_bytes("a.bin", "not base64!")
    assert code_of(error) == "INVALID_ARGUMENT"
    with pytest.raises(ToolError) as error:
        files.read_bytes("missing.bin")
    assert code_of(error) == "FILE_NOT_FOUND"


def test_unlisted_tools_are_found_by_pack_name_only_and_never_described(tmp_path: Path) -> None:
    registry = ToolRegistry([toolpack], tmp_path / "ws", {})
    assert registry.resolve("files.read_bytes") is not None
    assert registry.resolve("read_bytes") is None
    assert "read_bytes" not in registry.tools and "read_bytes" not in registry.namespaces()["files"]
    settings = Settings(workspace=tmp_path / "ws", toolpacks=["files"], db_path=tmp_path / "m.sqlite3")
    catalog = Catalog(registry, settings)
    described = catalog.description + str(catalog.search("bytes")) + catalog.attp_text()
    assert "read_bytes" not in described and "write_bytes" not in described and "file_info" not in described


def test_an_unlisted_tool_follows_the_access_of_its_listed_one(tmp_path: Path) -> None:
    registry = ToolRegistry([toolpack], tmp_path / "ws", {})
    reader = registry.restricted(lambda tool: tool.name in {"read_file", "list_files"}, lambda name: True)
    assert reader.resolve("files.read_bytes") is not None and reader.resolve("files.file_info") is not None
    assert reader.resolve("files.write_bytes") is None
    assert reader.withheld("files.write_bytes") == "files.write_bytes"
    nothing = registry.restricted(lambda tool: False, lambda name: False)
    assert nothing.resolve("files.read_bytes") is None
