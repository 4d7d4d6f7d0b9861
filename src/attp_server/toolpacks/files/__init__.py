"""The ``files`` toolpack: read, write, edit and list text files inside the server's workspace."""

from __future__ import annotations

from attp_server.toolpack import READ_ONLY, ToolFunction, ToolMarks, Toolpack, ToolpackContext, make_folder
from attp_server.toolpacks.files.binary import BinaryTools
from attp_server.toolpacks.files.tools import FilesOptions, FileTools

__all__ = ["BinaryTools", "FileTools", "FilesOptions", "build", "toolpack"]


def build(ctx: ToolpackContext) -> list[ToolFunction]:
    """Create the workspace if needed and bind the tools to it (the byte tools to the same workspace)."""
    options = ctx.options if isinstance(ctx.options, FilesOptions) else FilesOptions()
    make_folder("files", ctx.workspace)
    text = FileTools(ctx.workspace, options)
    return [*text.tools(), *BinaryTools(text.workspace, options).tools()]


toolpack = Toolpack(
    name="files",
    description="Read, write, edit and list UTF-8 text files in the workspace folder.",
    build=build,
    options=FilesOptions,
    aliases={"file_reader": "read_file", "file_writer": "write_file", "file_editor": "edit_file"},
    marks={
        "read_file": READ_ONLY,
        "list_files": READ_ONLY,
        "write_file": ToolMarks(destructive=True, idempotent=True),
        "edit_file": ToolMarks(destructive=True),
        "read_bytes": READ_ONLY,
        "file_info": READ_ONLY,
        "write_bytes": ToolMarks(destructive=True, idempotent=True),
    },
    unlisted={"read_bytes": "read_file", "file_info": "read_file", "write_bytes": "write_file"},
)
