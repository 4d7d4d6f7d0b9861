"""The audit log (`audit_log`): one JSON line per thing a tool did or was refused, on whose behalf.

A line is written for every call of a tool that is not read-only (built-in or upstream), every
approval decision (granted, denied, unavailable), and every call refused by a rate limit, before
the program sees the outcome. Each line holds: the time (UTC, ISO 8601), the event, the principal
(the token's name, or anonymous), a digest of the session handle (never the handle), ``pack.tool``,
the SHA-256 and size of the arguments as canonical JSON (sorted keys, no spaces, UTF-8), the outcome
(``ok`` or the error code) and the duration. With `audit_arguments` the values are written too, the
server's own secrets replaced by ``[redacted]``: its tokens, and every credential it holds for an upstream server
(env and headers as configured and as expanded, OAuth access and refresh tokens, a client secret).

Lines are appended with one ``write`` each on an ``O_APPEND`` file, so they never interleave; the
file is opened again when its path no longer names it (``logrotate`` moved it), like
`logging.handlers.WatchedFileHandler`. Every write happens on a worker thread, never on the event
loop. A failure to write is logged and never fails the call (telemetry must not break a run).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio

from attp_server.settings import Settings

logger = logging.getLogger(__name__)

REDACTED = "[redacted]"


def handle_digest(handle: str | None) -> str | None:
    """A stable digest of a session handle: lines of one session can be grouped, the handle cannot be
    recovered (it is a random id the client holds)."""
    if handle is None:
        return None
    return hashlib.sha256(handle.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def canonical_json(arguments: Mapping[str, Any]) -> bytes:
    """The arguments as canonical JSON: sorted keys, no spaces, UTF-8 (what the digest is taken of)."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return text.encode("utf-8", "surrogatepass")


def server_secrets(settings: Settings) -> list[str]:
    """Every secret the server holds: tokens, upstream servers' env values and headers (each at least 4
    characters, so that redacting does not mangle ordinary words)."""
    found = [secret.get_secret_value() for secret in settings.auth_tokens.values()]
    if settings.auth_token is not None:
        found.append(settings.auth_token.get_secret_value())
    for server in settings.upstream_servers.values():
        found.extend(secret.get_secret_value() for secret in server.env.values())
        for secret in server.headers.values():
            value = secret.get_secret_value()
            found.append(value)
            if value.lower().startswith("bearer "):
                found.append(value[7:].strip())
    return sorted({s for s in found if len(s) >= 4}, key=len, reverse=True)


def redacted(value: Any, secrets: Iterable[str]) -> Any:
    """`value` with every string holding one of `secrets` replaced by `REDACTED` (keys and values)."""
    secrets = list(secrets)

    def clean(item: Any) -> Any:
        if isinstance(item, str):
            return REDACTED if any(s in item for s in secrets) else item
        if isinstance(item, Mapping):
            return {clean(str(k)): clean(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [clean(v) for v in item]
        return item

    return clean(value)


class AuditLog:
    """Appends audit lines to `audit_log`; a no-op when the setting is unset."""

    def __init__(self, settings: Settings, held: Callable[[], Iterable[str]] | None = None) -> None:
        """`held`: the credentials the live packs hold now (the registry's `held_secrets`), redacted besides the
        configured ones."""
        self.path: Path | None = settings.audit_log.expanduser() if settings.audit_log is not None else None
        self.arguments = settings.audit_arguments
        self.secrets = server_secrets(settings) if self.arguments else []
        self.held = held
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None
        self.failures = 0

    @property
    def enabled(self) -> bool:
        return self.path is not None

    async def record(
        self,
        event: str,
        *,
        principal: str,
        handle: str | None,
        tool: str,
        outcome: str,
        arguments: Mapping[str, Any] | None = None,
        duration_ms: float | None = None,
    ) -> None:
        """Write one line (on a thread); returns once it is written, or once writing it failed (logged)."""
        if self.path is None:
            return
        entry: dict[str, Any] = {
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "event": event,
            "principal": principal,
            "session": handle,
            "tool": tool,
            "outcome": outcome,
        }
        if duration_ms is not None:
            entry["duration_ms"] = round(duration_ms, 3)
        secrets = self.secrets
        if self.arguments and self.held is not None:  # read here, on the event loop the packs run on
            secrets = sorted({*secrets, *(s for s in self.held() if len(s) >= 4)}, key=len, reverse=True)
        try:
            await anyio.to_thread.run_sync(self._write, entry, arguments, secrets)
        except Exception:
            self.failures += 1
            logger.exception("could not write the audit log %s", self.path)

    def _write(self, entry: dict[str, Any], arguments: Mapping[str, Any] | None, secrets: list[str]) -> None:
        if arguments is not None:
            data = canonical_json(arguments)
            entry["arguments_sha256"] = hashlib.sha256(data).hexdigest()
            entry["arguments_bytes"] = len(data)
            if self.arguments:
                entry["arguments"] = redacted(arguments, secrets)
        line = (json.dumps(entry, ensure_ascii=False, default=repr) + "\n").encode("utf-8", "surrogatepass")
        with self._lock:
            fd = self._open()
            written = os.write(fd, line)
            if written != len(line):  # a full disk: the rest would start a torn line
                raise OSError(f"wrote {written} of {len(line)} bytes")

    def _open(self) -> int:
        """The file's descriptor, opened again when the path now names another file (or none)."""
        assert self.path is not None
        try:
            stat = os.stat(self.path)
            identity: tuple[int, int] | None = (stat.st_dev, stat.st_ino)
        except FileNotFoundError:
            identity = None
        if self._fd is not None and identity == self._identity:
            return self._fd
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # a folder made for it is the server user's
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        stat = os.fstat(fd)
        self._fd, self._identity = fd, (stat.st_dev, stat.st_ino)
        return fd

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
