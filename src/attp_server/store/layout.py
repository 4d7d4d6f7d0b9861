"""The server's own files: where they are, the rule that keeps them out of every program's reach, and their modes.

A program can read and write everything in the workspace (the files pack; the shell pack can reach far more, see
SECURITY.md). The server's own files must therefore never lie inside it:

* the configuration files: the config file (``--config``, ``./attp.toml``) and every ``mcp_config`` file. They
  are read again while serving (`config_poll_s`), so a program that appends ``[mcp_servers.x] command = ...``
  would make the server start any command, and any setting would change at the next start;
* the data folder (the folder of `db_path`: the store's ``state.sqlite3``, ``secret.key``, the memory database),
  `secret_file`, an SQLite `database_url` and the `audit_log`: whoever reads the secret can forge what it keys,
  whoever writes the store changes every session's kept state, and a program must not edit the record of what
  it did.

`misplaced` finds the ones that lie inside the workspace. It compares folders by identity (device and inode), so
symbolic links, ``..``, bind mounts and the other spellings of a case-insensitive file system do not hide one,
and it names a file with a second name (a hard link) on the workspace's file system, which could be inside it.
`refusal` says what to move where. `attp serve` and `attp exec` refuse to start on such a layout
(`check_layout`), a configuration edit that would make one is not applied, and `attp config` never prints one.

What the server creates for itself is its user's alone (`private_folder`, `private_file`: 0700 and 0600). SQLite
gives a database's ``-wal``, ``-shm`` and ``-journal`` files the mode of the database file, so creating that file
first makes them private too.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from attp_server.errors import AttpError
from attp_server.settings import Settings

__all__ = [
    "SECRET_FILE_NAME",
    "STATE_FILE_NAME",
    "ServerFile",
    "check_layout",
    "data_folder",
    "data_home",
    "misplaced",
    "private_file",
    "private_folder",
    "refusal",
    "server_files",
]

STATE_FILE_NAME = "state.sqlite3"
SECRET_FILE_NAME = "secret.key"  # noqa: S105 - a file name, not a secret
DATA_HOME = ".attp-server"
"""The folder in the user's home where the server's files go when the default place is inside the workspace (the
MCP Bundle's data folder too)."""

CONFIG_WHY = (
    "the server reads it again while serving, so a program that edits it could make the server start any command"
)


@dataclass(frozen=True)
class ServerFile:
    """One file (or folder) of the server's own, and how to move it."""

    path: Path
    what: str
    """What it is, for the reader: "the config file", "the data folder (...)"."""
    why: str
    """What a program could do with it."""
    fix: str
    """How to move it: the setting (and flag) to give, and where."""


def data_folder(settings: Settings) -> Path:
    """Where the server keeps its own files by default: the folder of `db_path`."""
    return settings.db_path.resolve().parent


def data_home() -> Path:
    """``~/.attp-server``: where `refusal` suggests moving the server's files, and where `attp config` puts the data
    folder when the default one would be inside the workspace."""
    return Path.home() / DATA_HOME


def sqlite_path(settings: Settings) -> Path | None:
    """The file of an ``sqlite:///PATH`` `database_url`, else None."""
    url = settings.database_url.get_secret_value() if settings.database_url is not None else None
    if url is None or not url.startswith("sqlite:"):
        return None
    return Path(url.removeprefix("sqlite:").removeprefix("//"))


def server_files(settings: Settings, config_file: Path | None) -> list[ServerFile]:
    """Every file and folder the server owns under `settings`, with `config_file` (the TOML it was started with)."""
    home = data_home()
    found: list[ServerFile] = []
    if config_file is not None:
        moved = home / config_file.name
        found.append(
            ServerFile(config_file, "the config file", CONFIG_WHY, f"Move it to {moved} and give --config {moved}")
        )
    for path in settings.mcp_config:
        moved = home / path.name
        found.append(
            ServerFile(
                path,
                "an upstream servers file (mcp_config)",
                CONFIG_WHY,
                f"Move it to {moved} and name that path in mcp_config (--mcp-config {moved})",
            )
        )
    folder = data_folder(settings)
    found.append(
        ServerFile(
            folder,
            "the data folder (the folder of db_path: the store, secret.key, the memory database)",
            "a program could read the server's secret and change what the server keeps for every session",
            f"Give --db-path {home / 'memory.sqlite3'} (or set db_path)"
            + (f", and move what {folder} holds there to keep it" if folder.exists() else ""),
        )
    )
    if settings.secret_file is not None:
        moved = home / SECRET_FILE_NAME
        found.append(
            ServerFile(
                settings.secret_file,
                "the secret_file",
                "a program could read the server's secret",
                f"Move it to {moved} and give --secret-file {moved} (or set secret_file)",
            )
        )
    database = sqlite_path(settings)
    if database is not None:
        moved = home / STATE_FILE_NAME
        found.append(
            ServerFile(
                database,
                "the store (database_url)",
                "a program could change what the server keeps for every session",
                f"Move it to {moved} and set database_url to sqlite://{moved}",
            )
        )
    if settings.audit_log is not None:
        moved = home / "audit.jsonl"
        found.append(
            ServerFile(
                settings.audit_log.expanduser(),
                "the audit_log",
                "a program could erase or forge the record of what it did",
                f"Set audit_log to {moved}",
            )
        )
    return found


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return None
    return (found.st_dev, found.st_ino)


def _folders(path: Path) -> Iterator[Path]:
    """`path` and each folder above it, as written (made absolute) and with every symbolic link resolved."""
    for spelling in dict.fromkeys([Path(os.path.abspath(path)), Path(os.path.realpath(path))]):
        yield spelling
        yield from spelling.parents


def inside(path: Path, workspace: Path) -> bool:
    """Whether `path` is the workspace or lies anywhere below it (following links, by the folders' identity)."""
    root = Path(os.path.realpath(workspace))
    if Path(os.path.realpath(path)).is_relative_to(root):  # a layout not created yet is compared as written
        return True
    identity = _identity(root)
    return identity is not None and any(_identity(folder) == identity for folder in _folders(path))


def _other_names(file: ServerFile, settings: Settings) -> Iterator[Path]:
    """The regular files of `file` (a folder: the server's files in it) that have more than one name."""
    paths = [file.path]
    if file.path == data_folder(settings):
        paths = [settings.db_path, file.path / STATE_FILE_NAME, file.path / SECRET_FILE_NAME]
    for path in paths:
        try:
            found = os.stat(path)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(found.st_mode) and found.st_nlink > 1:
            yield path


def misplaced(settings: Settings, config_file: Path | None) -> list[tuple[ServerFile, str]]:
    """The server's files a program could reach through the workspace, each with what is wrong with it."""
    workspace = settings.workspace.expanduser()
    device = _identity(workspace)
    problems = []
    for file in server_files(settings, config_file):
        if inside(file.path, workspace):
            problems.append((file, f"{os.path.abspath(file.path)}, {file.what}: {file.why}. {file.fix}."))
            continue
        for path in _other_names(file, settings):
            if device is not None and os.stat(path).st_dev == device[0]:
                problems.append(
                    (
                        file,
                        f"{path} ({file.what}) has another name (a hard link) on the workspace's file system, which a "
                        f"program could reach if it lies in the workspace: {file.why}. Remove the other name "
                        f"(find it with `find {Path(os.path.realpath(workspace))} -samefile {path}`).",
                    )
                )
    return problems


def refusal(settings: Settings, problems: list[tuple[ServerFile, str]]) -> str:
    """What `check_layout` says: the files, why each matters, and what to move where."""
    workspace = Path(os.path.realpath(settings.workspace.expanduser()))
    lines = [
        f"the workspace {workspace} holds the server's own files, and programs can read and change everything in it:"
    ]
    lines += [f"  - {text}" for _, text in problems]
    lines.append(f"Or serve a folder that holds none of them: --workspace {workspace / 'workspace'}, say.")
    return "\n".join(lines)


def check_layout(settings: Settings, config_file: Path | None) -> None:
    """Refuse a layout that puts one of the server's own files where a program can reach it.

    Raises:
        AttpError: naming each such file, why it matters and where to move it (`refusal`).
    """
    problems = misplaced(settings, config_file)
    if problems:
        raise AttpError("refusing to start: " + refusal(settings, problems))


def private_folder(path: Path) -> None:
    """Create `path` and the folders missing above it for the server's user only (0700); existing ones keep their
    mode."""
    missing = []
    for folder in [path, *path.parents]:
        if folder.exists():
            break
        missing.append(folder)
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it first
            os.mkdir(folder, 0o700)
    if not path.is_dir():
        raise NotADirectoryError(f"{path} is not a folder")


def private_file(path: Path) -> None:
    """Create `path` empty for the server's user only (0600), and its folder as `private_folder` does; an existing
    file is left as it is. An empty file is an empty SQLite database, whose -wal and -shm files get its mode."""
    private_folder(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except FileExistsError:
        return
    os.close(fd)
