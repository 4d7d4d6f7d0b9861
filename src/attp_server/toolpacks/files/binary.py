"""Bytes of workspace files, for an engine's own file layer: what ``open()`` in a ``cpython`` program reads and writes.

These tools are unlisted (`Toolpack.unlisted`): no description shows them and no program finds them by name;
the ``cpython`` engine's worker calls them by ``files.read_bytes`` and so on when a program (or pandas, or
matplotlib) opens a workspace file. They are the files pack's own rules all the same: the workspace (a session's
own under isolation), `FilesOptions.max_bytes`, approvals for writes, the audit log. Bytes travel as base64.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat

from attp_server.toolpack import ToolError, ToolFunction
from attp_server.toolpacks.files.tools import FilesOptions
from attp_server.toolpacks.files.workspace import Workspace, check_kind

MAX_CHUNK_BYTES = 8 * 1024 * 1024
"""Most bytes one `read_bytes` call returns (the worker reads on with ``offset``)."""


class BinaryTools:
    """The unlisted byte tools, bound to one workspace and its limits."""

    def __init__(self, workspace: Workspace, options: FilesOptions) -> None:
        self.workspace = workspace
        self.options = options

    def tools(self) -> list[ToolFunction]:
        return [self.read_bytes, self.write_bytes, self.file_info]

    def read_bytes(self, path: str, offset: int = 0, size: int = MAX_CHUNK_BYTES) -> dict[str, str | int]:
        """Read bytes of a workspace file: up to `size` bytes (8 MiB at most) from byte `offset`.

        Returns:
            {"data": the bytes as base64, "size": the file's whole size in bytes}.

        Raises:
            ToolError: FILE_NOT_FOUND, IS_A_DIRECTORY, FILE_TOO_LARGE, PATH_OUTSIDE_WORKSPACE, INVALID_PATH.
        """
        if offset < 0 or size < 1:
            raise ToolError("INVALID_ARGUMENT", "offset must be 0 or more and size at least 1", parameter_name="offset")
        target = self.workspace.resolve_file(path)
        data, total = self.workspace.read_range(target, offset, min(size, MAX_CHUNK_BYTES), self.options.max_bytes)
        return {"data": base64.b64encode(data).decode("ascii"), "size": total}

    def write_bytes(self, path: str, data: str, append: bool = False) -> dict[str, str | int | bool]:
        """Create or overwrite a workspace file with bytes (base64); `append` adds them to its end instead.

        Returns:
            {"path": workspace-relative path, "bytes": the file's size now, "created": True if the file is new}.

        Raises:
            ToolError: INVALID_ARGUMENT (not base64), FILE_TOO_LARGE, IS_A_DIRECTORY, NOT_A_DIRECTORY,
                PATH_OUTSIDE_WORKSPACE, INVALID_PATH.
        """
        limit = self.options.max_bytes
        if len(data) > (limit + 2) * 4 // 3 + 4:
            raise self._too_large(path, f"more than {limit:,} bytes")
        try:
            content = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ToolError("INVALID_ARGUMENT", "data must be base64", parameter_name="data") from None
        target = self.workspace.resolve_file(path)
        if append and self.workspace.existing_mode(target) is not None:
            content = self.workspace.read_bytes(target, limit) + content
        if len(content) > limit:
            raise self._too_large(target.rel, f"{len(content):,} bytes")
        created = self.workspace.atomic_write(target, content)
        return {"path": target.rel, "bytes": len(content), "created": created}

    def file_info(self, path: str) -> dict[str, str | int | float]:
        """What a workspace path is: {"kind": "file", "dir" or "none", "size": bytes, "modified": seconds since the
        epoch}. A path that does not exist is an answer ("none"), not a failure: the engine's file layer asks before
        it writes (``os.path.exists``, ``savefig``), and the program's tool-call summary should not show that
        question as a failed call.

        Raises:
            ToolError: NOT_A_REGULAR_FILE, PATH_OUTSIDE_WORKSPACE, INVALID_PATH.
        """
        target = self.workspace.resolve(path)
        try:
            found = os.stat(target.real)
        except (FileNotFoundError, NotADirectoryError):
            return {"kind": "none", "size": 0, "modified": 0.0}
        if stat.S_ISDIR(found.st_mode):
            return {"kind": "dir", "size": 0, "modified": found.st_mtime}
        check_kind(found, target.rel)
        return {"kind": "file", "size": found.st_size, "modified": found.st_mtime}

    def _too_large(self, rel: str, size: str) -> ToolError:
        return ToolError(
            "FILE_TOO_LARGE",
            f"The new content of {rel!r} is {size}, over the limit of {self.options.max_bytes:,} bytes.",
            parameter_name="data",
            expected=f"at most {self.options.max_bytes:,} bytes",
            solution="Write a smaller file, or ask the server's operator to raise [toolpacks.files] max_bytes.",
        )
