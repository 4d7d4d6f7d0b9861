"""The server's shared secret (`secret_file`): the key for keyed digests and for sealing ``requestState``.

Replicas that share one `database_url` must share this file too: every replica then derives the same
store key and folder name for a handle, and unseals the multi-round-trip ``requestState`` another
replica sealed. On one machine nothing needs configuring: when `secret_file` is unset the secret is
generated into the data folder (beside `db_path`) on first start, readable by its owner only.

The secret itself is never used directly: each purpose gets its own key derived from it (`key`),
so a digest of one kind can never be passed off as another.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from attp_server.errors import AttpError
from attp_server.store.layout import SECRET_FILE_NAME, private_folder

__all__ = ["SECRET_FILE_NAME", "Secret", "load_secret"]

SECRET_BYTES = 32
MIN_SECRET_BYTES = 16
MAX_PURPOSES = 64
"""Derived keys kept, so that each is derived once (the purposes are a handful of fixed names)."""


class Secret:
    """A secret held in memory; `key` derives a key per purpose, `digest` a keyed hex digest."""

    def __init__(self, material: bytes) -> None:
        if len(material) < MIN_SECRET_BYTES:
            raise ValueError(f"a secret needs at least {MIN_SECRET_BYTES} bytes")
        self._material = material
        self._keys: dict[str, bytes] = {}

    def __repr__(self) -> str:
        return "Secret(<hidden>)"

    def key(self, purpose: str) -> bytes:
        """32 bytes for one purpose ("handle", "folder", "request-state", ...)."""
        key = self._keys.get(purpose)
        if key is None:
            key = hmac.new(self._material, b"attp-server/" + purpose.encode("utf-8"), hashlib.sha256).digest()
            if len(self._keys) < MAX_PURPOSES:
                self._keys[purpose] = key
        return key

    def digest(self, purpose: str, text: str, length: int = 32) -> str:
        """A keyed digest of `text` (hex, `length` characters): unguessable without the secret, equal on every
        replica that shares it."""
        mac = hmac.new(self.key(purpose), text.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return mac.hexdigest()[:length]


def load_secret(path: Path, *, generate: bool) -> Secret:
    """Read the secret in `path`; with `generate`, create it first when it does not exist.

    The file holds at least 16 bytes (any bytes; a generated one holds 64 hex characters).

    Raises:
        AttpError: the file is missing (and not to be generated), unreadable, or too short.
    """
    if generate and not path.exists():
        _generate(path)
    try:
        material = path.read_bytes().strip()
    except FileNotFoundError:
        raise AttpError(
            f"secret_file {path} does not exist: every replica needs the same secret file (create one with "
            "`head -c 32 /dev/urandom > FILE`, readable by the server only), or leave secret_file unset on a single "
            "machine to have one generated in the data folder"
        ) from None
    except OSError as exc:
        raise AttpError(f"secret_file {path} cannot be read: {exc.strerror or exc}") from None
    if len(material) < MIN_SECRET_BYTES:
        raise AttpError(f"secret_file {path} holds {len(material)} bytes; it needs at least {MIN_SECRET_BYTES}")
    return Secret(material)


def _generate(path: Path) -> None:
    """Write a new secret to `path` unless another process did first. The file appears whole or not at all: it is
    written under a name of its own, then linked into place (a process starting at the same moment, a replica on
    the same data folder, read an empty file between another's create and write, and refused to start)."""
    private_folder(path.parent)
    staged = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_hex(SECRET_BYTES).encode("ascii") + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another replica or process made it first: read theirs
            os.link(staged, path)
    finally:
        staged.unlink(missing_ok=True)
