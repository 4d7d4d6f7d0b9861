"""Resolve model-supplied paths inside the workspace root, and read and write files there safely.

Every path a tool receives goes through `Workspace.resolve` before the filesystem is touched. Lexical
checks (absolute paths, ``..``, NUL bytes) come first so that hostile input is refused without any
I/O; then the path is resolved with ``realpath`` and must still lie inside the resolved root, which
catches symbolic links that escape at any level. Callers then only use the resolved path, so a
symlink is never interpreted twice.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from attp_server.errors import short_repr, suggest
from attp_server.toolpack import ToolError

# Absent on some platforms; 0 degrades to a plain open there.
_O_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)

_EXPECTED_PATH = "a relative path inside the workspace, e.g. 'notes/todo.md'"
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


@dataclass(frozen=True)
class Resolved:
    """A checked path: ``rel`` as the model should see it, ``real`` as the OS should use it."""

    rel: str
    """Normalised workspace-relative POSIX path; ``"."`` is the root."""
    real: Path
    """Fully resolved absolute path, guaranteed inside the workspace root."""


def outside_error(path: str, parameter: str, why: str) -> ToolError:
    return ToolError(
        "PATH_OUTSIDE_WORKSPACE",
        f"Path {path!r} is refused: {why}. Only files inside the workspace can be used.",
        parameter_name=parameter,
        received=path,
        expected=_EXPECTED_PATH,
        solution="Pass a path relative to the workspace root, without '..' and without a leading '/'.",
    )


def invalid_path_error(path: str, parameter: str, why: str, suggested: str | None = None) -> ToolError:
    return ToolError(
        "INVALID_PATH",
        f"Path {short_repr(path)} is invalid: {why}.",
        parameter_name=parameter,
        received=short_repr(path),
        expected=_EXPECTED_PATH,
        suggested_value=suggested,
    )


MAX_PATH_CHARS = 4096
"""Linux's PATH_MAX; longer paths cannot exist, and resolving them costs the server."""


def normalize(path: str, parameter: str) -> str:
    """Lexically check and normalise a path; ``"."`` means the workspace root."""
    if len(path) > MAX_PATH_CHARS:
        raise invalid_path_error(path[:80] + "...", parameter, f"it is longer than {MAX_PATH_CHARS} characters")
    if "\x00" in path:
        raise invalid_path_error(path, parameter, "it contains a NUL byte")
    if path == "":
        raise invalid_path_error(path, parameter, "it is empty")
    if path.startswith("/") or _WINDOWS_DRIVE.match(path):
        raise outside_error(path, parameter, "it is an absolute path")
    if "\\" in path:
        # On Linux a backslash is an ordinary name character; a model writing one almost
        # certainly meant a Windows-style separator, so refuse rather than create 'a\\b'.
        fixed = path.replace("\\", "/")
        raise invalid_path_error(path, parameter, "it contains '\\'; use '/' to separate folders", fixed)
    parts = path.split("/")
    if ".." in parts:
        raise outside_error(path, parameter, "it contains a '..' component")
    return "/".join(p for p in parts if p not in ("", ".")) or "."


@contextmanager
def os_errors(rel: str, parameter: str = "path") -> Iterator[None]:
    """Turn an unexpected OSError (races, permissions, full disk) into an error the model can act on."""
    try:
        yield
    except OSError as exc:
        code = {
            errno.ENOENT: "FILE_NOT_FOUND",
            errno.EISDIR: "IS_A_DIRECTORY",
            errno.ENOTDIR: "NOT_A_DIRECTORY",
            errno.ELOOP: "INVALID_PATH",
            errno.ENAMETOOLONG: "INVALID_PATH",
            errno.ENXIO: "NOT_A_REGULAR_FILE",
            errno.EACCES: "PERMISSION_DENIED",
            errno.EPERM: "PERMISSION_DENIED",
        }.get(exc.errno or 0, "IO_ERROR")
        reason = exc.strerror or str(exc)
        raise ToolError(code, f"{rel!r}: {reason}.", parameter_name=parameter, received=rel) from exc


def check_kind(st: os.stat_result, rel: str, parameter: str = "path") -> None:
    """Refuse anything but a regular file, naming what it is instead."""
    if stat.S_ISREG(st.st_mode):
        return
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(
            "IS_A_DIRECTORY",
            f"{rel!r} is a directory, not a file.",
            parameter_name=parameter,
            received=rel,
            expected="the path of a file",
            solution=f"Call list_files({rel!r}) to see the files in it.",
        )
    if stat.S_ISLNK(st.st_mode):
        # realpath() leaves a link unresolved only when it loops.
        raise invalid_path_error(rel, parameter, "it is a symbolic link loop")
    kind = "FIFO" if stat.S_ISFIFO(st.st_mode) else "socket" if stat.S_ISSOCK(st.st_mode) else "device"
    raise ToolError(
        "NOT_A_REGULAR_FILE",
        f"{rel!r} is a {kind}, not a regular file; only regular files can be read or written.",
        parameter_name=parameter,
        received=rel,
        expected="the path of a regular file",
    )


class Workspace:
    """The root directory the tools may touch, and the only way to turn a path into a real one."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))

    def resolve(self, path: str, parameter: str = "path") -> Resolved:
        rel = normalize(path, parameter)
        real = Path(os.path.realpath(self.root / rel))
        if not real.is_relative_to(self.root):
            raise outside_error(path, parameter, "it goes through a symbolic link that points outside the workspace")
        return Resolved(rel, real)

    def resolve_file(self, path: str, parameter: str = "path") -> Resolved:
        """Resolve a path that must name a file (existing or not), never the root or 'dir/'."""
        target = self.resolve(path, parameter)
        if target.rel == "." or path.endswith("/"):
            raise ToolError(
                "IS_A_DIRECTORY",
                f"{path!r} names a directory, not a file.",
                parameter_name=parameter,
                received=path,
                expected=_EXPECTED_PATH,
            )
        return target

    def contains(self, path: Path) -> bool:
        """Whether a path, with every symbolic link followed, is inside the workspace."""
        return Path(os.path.realpath(path)).is_relative_to(self.root)

    def relative(self, real: Path) -> str:
        return real.relative_to(self.root).as_posix()

    def not_found(self, target: Resolved, parameter: str = "path") -> ToolError:
        """FILE_NOT_FOUND naming the first missing component and the closest existing name there."""
        parts = target.rel.split("/")
        exists = (os.path.lexists(self.root.joinpath(*parts[: i + 1])) for i in range(len(parts)))
        index = next((i for i, found in enumerate(exists) if not found), len(parts) - 1)
        base = self.root.joinpath(*parts[:index])
        names = _listdir(base) if self.contains(base) else []
        closest = suggest(parts[index], names)
        suggested = "/".join([*parts[:index], closest, *parts[index + 1 :]]) if closest else None
        missing = "/".join(parts[: index + 1])
        where = "" if missing == target.rel else f" (there is no {missing!r})"
        hint = f" Did you mean {suggested!r}?" if suggested else ""
        folder = "/".join(parts[:index]) or "."
        return ToolError(
            "FILE_NOT_FOUND",
            f"File {target.rel!r} does not exist{where}.{hint}",
            parameter_name=parameter,
            received=target.rel,
            suggested_value=suggested,
            solution=f"Call list_files({folder!r}) to see what exists, or write_file() to create the file.",
        )

    def read_bytes(self, target: Resolved, limit: int) -> bytes:
        """The content of a regular file of at most `limit` bytes."""
        try:
            before = os.lstat(target.real)
        except FileNotFoundError:
            raise self.not_found(target) from None
        except NotADirectoryError:
            raise _parent_not_directory(target) from None
        check_kind(before, target.rel)  # before open(): opening a device or FIFO can block or have effects
        _check_size(before.st_size, limit, target.rel)
        with os_errors(target.rel):
            # O_NONBLOCK: if a FIFO was swapped in after lstat(), open() must not hang waiting for a writer.
            fd = os.open(target.real, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
            with os.fdopen(fd, "rb") as handle:
                check_kind(os.fstat(handle.fileno()), target.rel)
                data = handle.read(limit + 1)
        _check_size(len(data), limit, target.rel)
        return data

    def read_range(self, target: Resolved, offset: int, size: int, limit: int) -> tuple[bytes, int]:
        """`size` bytes from `offset` of a regular file of at most `limit` bytes, and the file's whole size."""
        try:
            before = os.lstat(target.real)
        except (FileNotFoundError, NotADirectoryError):
            raise self.not_found(target) from None
        check_kind(before, target.rel)
        _check_size(before.st_size, limit, target.rel)
        with os_errors(target.rel):
            fd = os.open(target.real, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
            try:
                found = os.fstat(fd)
                check_kind(found, target.rel)
                _check_size(found.st_size, limit, target.rel)
                return os.pread(fd, max(0, min(size, found.st_size - offset)), offset), found.st_size
            finally:
                os.close(fd)

    def existing_mode(self, target: Resolved) -> int | None:
        """Permission bits of the file about to be replaced, or None if it does not exist yet."""
        try:
            st = os.lstat(target.real)
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            raise _parent_not_directory(target) from None
        check_kind(st, target.rel)
        return stat.S_IMODE(st.st_mode)

    def atomic_write(self, target: Resolved, data: bytes) -> bool:
        """Replace the file's content all at once; True if the file was created.

        The data goes to a temporary file in the same directory (same filesystem, so the rename
        is atomic) and is fsynced before ``os.replace``; a crash leaves the old or the new
        content, never a mix. The directory is fsynced afterwards so the rename itself survives.
        """
        mode = self.existing_mode(target)
        parent = target.real.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise _parent_not_directory(target) from None
        tmp = parent / f".{target.real.name[:200]}.{secrets.token_hex(4)}.tmp"
        with os_errors(target.rel):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o666)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    if mode is not None:
                        os.fchmod(handle.fileno(), mode)
                    os.fsync(handle.fileno())
                os.replace(tmp, target.real)
            except BaseException:
                with suppress(OSError):
                    os.unlink(tmp)
                raise
        _fsync_directory(parent)
        return mode is None


def _check_size(size: int, limit: int, rel: str) -> None:
    if size > limit:
        raise ToolError(
            "FILE_TOO_LARGE",
            f"{rel!r} is larger than the {limit}-byte limit of this server.",
            parameter_name="path",
            received=rel,
            expected=f"a file of at most {limit} bytes",
        )


def _parent_not_directory(target: Resolved) -> ToolError:
    return ToolError(
        "NOT_A_DIRECTORY",
        f"{target.rel!r} cannot exist: one of its parent folders is a file, not a directory.",
        parameter_name="path",
        received=target.rel,
        expected=_EXPECTED_PATH,
    )


def _listdir(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


def _fsync_directory(directory: Path) -> None:
    # Best effort: some filesystems refuse fsync on directories, and by now the new content is
    # already in place, so failing the call here would misreport what happened.
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
