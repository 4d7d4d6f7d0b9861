"""The worker's file layer: ``open``, ``os``, ``pathlib`` and ``glob`` reach workspace files through the files pack.

A worker cannot open a file (Landlock and seccomp refuse it), and it must not: its program is anyone's. Yet
pandas, matplotlib, numpy and the standard library open files by path. While a program runs, `Files.install`
replaces the functions they do it with (``builtins.open``, ``io.open``, ``os.stat``, ``os.listdir``, ``os.getcwd``,
``os.mkdir``, ``glob.glob``, ``pathlib.Path.glob``, ...) by ones that ask the server: the bytes of a workspace file
cross the protocol pipe as the files pack's tool calls (``files.read_bytes``, ``files.write_bytes``,
``files.file_info``, ``files.list_files``), under the same rules as the program's own calls: the workspace (a
session's own under isolation), its size limit, approvals, the audit log, the call budget.

A path is a workspace path when it is relative, or under `ROOT` (what ``os.getcwd()`` says). Any other path is
refused at once without a call, except the files `preload_tree` read before the walls closed (matplotlib's fonts),
which are served from memory. A file opened for writing is kept in memory and written when it is closed (or,
at the latest, when the run ends: `Files.close_all`). A tool's error becomes the matching `OSError`
(``FileNotFoundError`` for ``FILE_NOT_FOUND``), the tool's message kept.

Runs in the worker. Imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

import base64
import builtins
import errno
import fnmatch
import glob
import io
import os
import pathlib
import posixpath
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from attp_server.sandbox.process.tools import ToolError

ROOT = "/workspace"
"""The workspace as a program sees it: its current directory, and the prefix of an absolute workspace path."""

CHUNK_BYTES = 8 * 1024 * 1024
"""Bytes one tool call carries (base64 makes a third more): far below the protocol's longest line."""

PRELOADED: dict[str, bytes] = {}
"""Files read before the walls closed, by real path (matplotlib's fonts): served from memory, read-only."""

_PRELOADED_DIRS: set[str] = set()

ERRORS: dict[str, tuple[type[OSError], int]] = {
    "FILE_NOT_FOUND": (FileNotFoundError, errno.ENOENT),
    "IS_A_DIRECTORY": (IsADirectoryError, errno.EISDIR),
    "NOT_A_DIRECTORY": (NotADirectoryError, errno.ENOTDIR),
    "NOT_A_REGULAR_FILE": (PermissionError, errno.EACCES),
    "PATH_OUTSIDE_WORKSPACE": (PermissionError, errno.EACCES),
    "INVALID_PATH": (PermissionError, errno.EACCES),
    "APPROVAL_DENIED": (PermissionError, errno.EACCES),
    "APPROVAL_UNAVAILABLE": (PermissionError, errno.EACCES),
    "NAME_NOT_FOUND": (PermissionError, errno.EACCES),
    "FILE_TOO_LARGE": (OSError, errno.EFBIG),
}
"""A files tool's error code -> the exception a program (and a library) expects from the same failure."""

NO_FILES_PACK = (
    "this server has no files toolpack enabled: a program reads and writes workspace files through it (ask the "
    "server's operator to enable it)"
)


def preload_tree(root: Path, limit: int = 64 * 1024 * 1024) -> None:
    """Read every file under `root` into `PRELOADED` (at most `limit` bytes in all), before the lockdown."""
    total = sum(map(len, PRELOADED.values()))
    for directory, _folders, names in os.walk(root):
        real_directory = os.path.realpath(directory)
        for name in sorted(names):
            path = os.path.join(real_directory, name)
            size = os.path.getsize(path)
            if total + size > limit:
                return
            with builtins.open(path, "rb") as file:
                PRELOADED[path] = file.read()
            total += size
            parent = real_directory
            while parent not in _PRELOADED_DIRS and parent != "/":
                _PRELOADED_DIRS.add(parent)
                parent = os.path.dirname(parent)


def preload_file(path: str) -> None:
    """Read one file into `PRELOADED` (a font matplotlib picked outside its own folder), before the lockdown."""
    real = os.path.realpath(path)
    with builtins.open(real, "rb") as file:
        PRELOADED[real] = file.read()
    parent = os.path.dirname(real)
    while parent not in _PRELOADED_DIRS and parent != "/":
        _PRELOADED_DIRS.add(parent)
        parent = os.path.dirname(parent)


def workspace_path(file: Any) -> str | None:
    """`file` as a workspace-relative path, or None when it is outside the workspace."""
    path = os.fsdecode(os.fspath(file))
    if path.startswith("/"):
        path = posixpath.normpath(path)
        if path == ROOT:
            return "."
        if not path.startswith(ROOT + "/"):
            return None
        path = path[len(ROOT) + 1 :]
    return posixpath.normpath(path) if path else "."


def _outside(file: Any) -> PermissionError:
    return PermissionError(
        errno.EACCES,
        f"the program has no file system of its own: open workspace files by a relative path (or under {ROOT}/)",
        os.fsdecode(os.fspath(file)),
    )


class _Writer(io.BytesIO):
    """A workspace file opened for writing: its bytes are written by `files.write_bytes` when it is closed."""

    def __init__(self, owner: Files, path: str, name: str, mode: str, *, initial: bytes = b"", append: bool = False):
        super().__init__(initial)
        self.owner, self.path, self.name = owner, path, name
        self.mode = mode  # type: ignore[misc]  # what open() would say
        if append:
            self.seek(0, io.SEEK_END)
        owner.writers.add(self)

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.owner.write(self.path, self.getbuffer().tobytes())
        finally:
            self.owner.writers.discard(self)
            super().close()


class _Reader(io.BytesIO):
    def __init__(self, data: bytes, name: str, mode: str) -> None:
        super().__init__(data)
        self.name = name
        self.mode = mode  # type: ignore[misc]  # what open() would say


class Files:
    """One run's file layer: `install` it while the program runs, `close_all` and `uninstall` after."""

    def __init__(self, call: Callable[[str, tuple[Any, ...], dict[str, Any]], Any]) -> None:
        self.call = call
        self.writers: set[_Writer] = set()
        self.made: set[str] = set()
        """Folders the program made (``os.makedirs``): the files pack makes a file's folders when it writes it."""
        self._saved: list[tuple[Any, str, Any]] = []

    # ------------------------------------------------------------ the tool calls

    def _tool(self, name: str, path: str, **kwargs: Any) -> Any:
        try:
            return self.call(f"files.{name}", (path,), kwargs)
        except ToolError as error:
            kind, number = ERRORS.get(error.code, (OSError, errno.EIO))
            message = NO_FILES_PACK if error.code == "NAME_NOT_FOUND" else error.message or error.code
            raise kind(number, message, path) from error

    def read(self, path: str) -> bytes:
        parts, offset = [], 0
        while True:
            chunk = self._tool("read_bytes", path, offset=offset, size=CHUNK_BYTES)
            data = base64.b64decode(str(chunk.get("data", "")) if isinstance(chunk, dict) else "")
            parts.append(data)
            offset += len(data)
            total = chunk.get("size", 0) if isinstance(chunk, dict) else 0
            if not data or not isinstance(total, int) or offset >= total:
                return b"".join(parts)

    def write(self, path: str, data: bytes) -> None:
        for start in range(0, max(len(data), 1), CHUNK_BYTES):
            text = base64.b64encode(data[start : start + CHUNK_BYTES]).decode("ascii")
            self._tool("write_bytes", path, data=text, append=start > 0)

    def info(self, path: str) -> dict[str, Any]:
        found = self._tool("file_info", path)
        if not isinstance(found, dict) or found.get("kind") not in {"file", "dir"}:
            raise FileNotFoundError(errno.ENOENT, "no such file in the workspace", path)
        return found

    def listing(self, directory: str, pattern: str = "*", recursive: bool = False) -> list[str]:
        found = self._tool("list_files", directory, pattern=pattern, recursive=recursive)
        return [str(item) for item in found] if isinstance(found, list) else []

    # ------------------------------------------------------------ what a program calls

    def open(  # noqa: PLR0917  (builtins.open's own signature)
        self,
        file: Any,
        mode: str = "r",
        buffering: int = -1,
        encoding: str | None = None,
        errors: str | None = None,
        newline: str | None = None,
        closefd: bool = True,
        opener: Any = None,
    ) -> Any:
        if isinstance(file, int):
            raise PermissionError(errno.EACCES, "the program cannot open file descriptors; open a workspace path")
        name = os.fsdecode(os.fspath(file))
        binary, raw = "b" in mode, self._open_bytes(file, name, mode)
        if binary:
            return raw
        wrapper = io.TextIOWrapper(raw, encoding=encoding or "utf-8", errors=errors, newline=newline)
        wrapper.mode = mode  # type: ignore[misc]  # what open() would say
        return wrapper

    def _open_bytes(self, file: Any, name: str, mode: str) -> io.BytesIO:
        real = posixpath.normpath(name) if name.startswith("/") else None
        if real is not None and real in PRELOADED and not set(mode) & set("wax+"):
            return _Reader(PRELOADED[real], name, mode)
        path = workspace_path(file)
        if path is None:
            raise _outside(file)
        if set(mode) & set("wax+"):
            existing = b""
            if "x" in mode and self._exists(path):
                raise FileExistsError(errno.EEXIST, "the file exists already", name)
            if "a" in mode or ("r" in mode and "+" in mode):
                existing = self.read(path) if "a" not in mode or self._exists(path) else b""
            return _Writer(self, path, name, mode, initial=existing, append="a" in mode)
        return _Reader(self.read(path), name, mode)

    def _exists(self, path: str) -> bool:
        try:
            self.info(path)
        except FileNotFoundError:
            return False
        return True

    def stat(self, file: Any, *, dir_fd: Any = None, follow_symlinks: bool = True) -> os.stat_result:
        if isinstance(file, int):
            raise PermissionError(errno.EACCES, "the program cannot inspect file descriptors")
        name = os.fsdecode(os.fspath(file))
        real = posixpath.normpath(name) if name.startswith("/") else None
        if real is not None and (real in PRELOADED or real in _PRELOADED_DIRS):
            return _stat_result(real in _PRELOADED_DIRS, len(PRELOADED.get(real, b"")), 0.0)
        path = workspace_path(file)
        if path is None:
            raise _outside(file)
        if path == "." or path in self.made:
            return _stat_result(True, 0, 0.0)
        found = self.info(path)
        size, modified = found.get("size", 0), found.get("modified", 0.0)
        return _stat_result(
            found.get("kind") == "dir",
            size if isinstance(size, int) else 0,
            float(modified) if isinstance(modified, int | float) else 0.0,
        )

    def listdir(self, file: Any = ".") -> list[str]:
        path = workspace_path(file)
        if path is None:
            raise _outside(file)
        prefix = "" if path == "." else path.rstrip("/") + "/"
        return [entry[len(prefix) :].rstrip("/") for entry in self.listing(path)]

    def makedirs(self, name: Any, mode: int = 0o777, exist_ok: bool = False) -> None:
        path = workspace_path(name)
        if path is None:
            raise _outside(name)
        while path not in (".", ""):
            self.made.add(path)
            path = posixpath.dirname(path)

    def mkdir(self, name: Any, mode: int = 0o777, *, dir_fd: Any = None) -> None:
        self.makedirs(name)

    def remove(self, name: Any, *, dir_fd: Any = None) -> None:
        raise PermissionError(
            errno.EACCES, "a program cannot remove or rename workspace files (no files tool does)", os.fsdecode(name)
        )

    def getcwd(self) -> str:
        return ROOT

    def chdir(self, path: Any) -> None:
        raise PermissionError(errno.EACCES, f"the current directory stays {ROOT}: use paths relative to it")

    def glob(self, pattern: Any, *, root_dir: Any = None, recursive: bool = False, **_: Any) -> list[str]:
        text = os.fsdecode(os.fspath(pattern))
        if root_dir is not None:
            text = posixpath.join(os.fsdecode(os.fspath(root_dir)), text)
        path = workspace_path(text)
        if path is None:
            return []
        parts = path.split("/")
        fixed = list(_before_magic(parts))
        rest = parts[len(fixed) :]
        directory = "/".join(fixed) or "."
        if not rest:
            return [text] if self._exists(directory) else []
        try:
            if len(rest) == 1 and "**" not in rest[0]:
                found = [entry.rstrip("/") for entry in self.listing(directory, pattern=rest[0])]
            else:
                entries = self.listing(directory, recursive=True)
                found = [entry for entry in entries if _matches(entry, directory, rest, recursive)]
        except OSError:
            return []
        return [_as_given(entry, text, root_dir) for entry in found]

    def iglob(self, pattern: Any, **kwargs: Any) -> Iterator[str]:
        return iter(self.glob(pattern, **kwargs))

    # ------------------------------------------------------------ installing

    def install(self) -> None:
        """Put the layer in place of the process's own file functions (until `uninstall`)."""
        replacements: list[tuple[Any, str, Any]] = [
            (builtins, "open", self.open),
            (io, "open", self.open),
            (os, "stat", self.stat),
            (os, "lstat", self.stat),
            (os, "listdir", self.listdir),
            (os, "getcwd", self.getcwd),
            (os, "chdir", self.chdir),
            (os, "mkdir", self.mkdir),
            (os, "makedirs", self.makedirs),
            (os, "remove", self.remove),
            (os, "unlink", self.remove),
            (os, "rename", self.remove),
            (os, "replace", self.remove),
            (os, "rmdir", self.remove),
            (glob, "glob", self.glob),
            (glob, "iglob", self.iglob),
            (pathlib.Path, "glob", _path_glob(self, False)),
            (pathlib.Path, "rglob", _path_glob(self, True)),
        ]
        for owner, name, replacement in replacements:
            self._saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, replacement)

    def close_all(self) -> list[str]:
        """Write every file the program left open; return why each that could not be written failed."""
        problems = []
        for writer in list(self.writers):
            try:
                writer.close()
            except OSError as exc:
                problems.append(f"{writer.name}: {exc.strerror or exc}")
        return problems

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()


def _stat_result(is_dir: bool, size: int, modified: float) -> os.stat_result:
    mode = (stat.S_IFDIR | 0o755) if is_dir else (stat.S_IFREG | 0o644)
    return os.stat_result((mode, 0, 0, 1, 0, 0, size, modified, modified, modified))


def _before_magic(parts: list[str]) -> Iterator[str]:
    for part in parts:
        if glob.has_magic(part):
            return
        yield part


def _matches(entry: str, directory: str, rest: list[str], recursive: bool) -> bool:
    """Whether the workspace path `entry` (under `directory`) matches the pattern's remaining parts."""
    relative = entry[len(directory) + 1 :] if directory != "." else entry
    names = relative.rstrip("/").split("/")
    return _match_parts(names, rest, recursive)


def _match_parts(names: list[str], patterns: list[str], recursive: bool) -> bool:
    if not patterns:
        return not names
    head, *tail = patterns
    if head == "**" and recursive:
        return any(_match_parts(names[skip:], tail, recursive) for skip in range(len(names) + 1))
    return bool(names) and fnmatch.fnmatchcase(names[0], head) and _match_parts(names[1:], tail, recursive)


def _as_given(entry: str, pattern: str, root_dir: Any) -> str:
    if root_dir is not None:
        base = workspace_path(root_dir) or "."
        return entry[len(base) + 1 :] if base != "." and entry.startswith(base + "/") else entry
    return posixpath.join(ROOT, entry) if pattern.startswith("/") else entry


def _path_glob(files: Files, recursive: bool) -> Callable[..., Iterator[pathlib.Path]]:
    def path_glob(self: pathlib.Path, pattern: str) -> Iterator[pathlib.Path]:
        pattern = f"**/{pattern}" if recursive else pattern
        return iter([pathlib.Path(found) for found in files.glob(str(self / pattern), recursive=True)])

    return path_glob
