"""An upstream ``CallToolResult`` as plain data for the sandbox.

* ``structuredContent`` when present (the SDK's ``{"result": x}`` wrapper of a non-object result
  unwrapped to ``x``);
* else the content blocks: one text block parsed as JSON when it is JSON, or as a Python literal
  when it is exactly one list, dict or tuple of plain values (``str(rows)``; see `literal`),
  returned as ``str`` when neither; images and audio as ``{"type", "mimeType", "size"}`` (plus
  ``"path"`` when the server's ``save_media`` option saved them into the workspace), never their
  base64; resource links and embedded resources as small dicts; several blocks as a list of those;
  none as None.

What an upstream server returns is untrusted data: it only ever becomes JSON values (never an
object with behaviour), its nesting and size are capped, and a credential of the server found in it
is blanked out.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import mimetypes
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from mcp_types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from attp_server.toolpack import ToolError
from attp_server.toolpacks.mcp.literal import python_literal

MAX_DEPTH = 100
"""Deepest nesting of lists and dicts accepted from an upstream result."""

REDACTED = "[redacted]"

SaveMedia = Callable[[bytes, str | None], str]
"""Writes decoded media bytes (with their MIME type) into the workspace and returns the relative path."""


def result_data(
    result: CallToolResult,
    *,
    unwrap: bool,
    max_bytes: int,
    secrets: Iterable[str] = (),
    save: SaveMedia | None = None,
) -> Any:
    """The data a program receives for `result`; raises `ToolError` for an error result or one too large."""
    hidden = sorted({s for s in secrets if s}, key=len, reverse=True)
    budget = _Budget(max_bytes)
    if result.is_error:
        text = " ".join(_text_of(block) for block in result.content).strip() or "(the server gave no message)"
        raise ToolError("TOOL_ERROR", _scrub(_cut(text, 2000), hidden))
    if result.structured_content is not None:
        value: Any = result.structured_content
        if unwrap and isinstance(value, dict) and list(value) == ["result"]:
            value = value["result"]
    else:
        # Text is measured before it is parsed: a few bytes of ``[],`` become a Python object each.
        characters = sum(len(block.text) for block in result.content if isinstance(block, TextContent))
        if characters > max_bytes:
            raise _too_large(f"{characters:,} characters of text", max_bytes)
        parts = [_block(block, save) for block in result.content]
        value = None if not parts else parts[0] if len(parts) == 1 else parts
    value = _plain(value, 0, budget)
    size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    if size > max_bytes:
        raise _too_large(f"{size:,} bytes of data", max_bytes)
    return _scrub(value, hidden) if hidden else value


def _too_large(what: str, max_bytes: int) -> ToolError:
    return ToolError(
        "RESULT_TOO_LARGE",
        f"the tool returned {what}; this server's limit is {max_bytes:,} (mcp_servers.NAME.max_result_bytes)",
        solution="Ask for less: a narrower query, fewer items, or a page of the data.",
    )


class _Budget:
    """The bytes a result's JSON takes at least, counted while it is copied: the copy stops past the limit,
    so the server's work for a huge result is bounded by the limit, not by what the upstream sent."""

    __slots__ = ("left", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise _too_large(f"more than {self.limit:,} bytes of data", self.limit)


def _block(block: Any, save: SaveMedia | None) -> Any:
    if isinstance(block, TextContent):
        return _json_or_text(block.text)
    if isinstance(block, ImageContent | AudioContent):
        return _media(block.type, block.data, block.mime_type, save)
    if isinstance(block, ResourceLink):
        link = {"type": "resource_link", "uri": str(block.uri), "name": block.name}
        if block.mime_type:
            link["mimeType"] = block.mime_type
        if block.description:
            link["description"] = block.description
        return link
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        out: dict[str, Any] = {"type": "resource", "uri": str(resource.uri)}
        if resource.mime_type:
            out["mimeType"] = resource.mime_type
        if isinstance(resource, TextResourceContents):
            out["text"] = resource.text
            return out
        blob = _media("resource", resource.blob, resource.mime_type, save)
        return {**out, **{k: v for k, v in blob.items() if k != "type"}}
    return {"type": str(getattr(block, "type", "unknown"))}


def _media(kind: str, data: str, mime_type: str | None, save: SaveMedia | None) -> dict[str, Any]:
    """A small description of base64 media: the bytes stay in the server (or go to a workspace file)."""
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return {"type": kind, "mimeType": mime_type, "size": None, "error": "the data is not valid base64"}
    out: dict[str, Any] = {"type": kind, "mimeType": mime_type, "size": len(raw)}
    if save is not None:
        out["path"] = save(raw, mime_type)
    return out


def media_saver(root: Path, folder: str) -> SaveMedia:
    """Save media under ``<root>/<folder>/<sha256 prefix><ext>``; the same bytes land in the same file once."""

    def save(raw: bytes, mime_type: str | None) -> str:
        extension = mimetypes.guess_extension(mime_type or "") or ".bin"
        relative = Path(folder) / f"{hashlib.sha256(raw).hexdigest()[:16]}{extension}"
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            # A partial file of its own: results are converted in threads, and calls that return the same
            # image at once each save it (the last move wins, with the same bytes).
            handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f"{target.name}.", suffix=".partial")
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(raw)
                os.replace(partial, target)
            except BaseException:
                Path(partial).unlink(missing_ok=True)
                raise
        return relative.as_posix()

    return save


def _json_or_text(text: str) -> Any:
    """JSON text as data; else a Python literal of a list, dict or tuple (`python_literal`); else the text."""
    stripped = text.strip()
    if not stripped or stripped[0] not in '{["-0123456789tfn(':
        return text
    try:
        return json.loads(stripped, parse_constant=_refuse)
    except (ValueError, RecursionError):
        pass
    literal = python_literal(stripped)
    return text if literal is None else literal


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON data")


def _plain(value: Any, depth: int, budget: _Budget) -> Any:
    """A JSON-only copy of `value`, refusing structures nested past `MAX_DEPTH` or larger than `budget`.

    Each value spends the fewest bytes its JSON can take (``json.dumps``' ``", "`` and ``": "``
    included), so a result that fits is never refused here; the exact size is measured afterwards.
    """
    if depth > MAX_DEPTH:
        raise ToolError(
            "TOOL_ERROR", f"the tool returned data nested more than {MAX_DEPTH} levels deep, which is not accepted"
        )
    if isinstance(value, str):
        budget.spend(len(value) + 2)
        return value
    if value is None or isinstance(value, bool | int):
        budget.spend(1)
        return value
    if isinstance(value, float):
        budget.spend(1)
        return value if math.isfinite(value) else str(value)
    if isinstance(value, list | tuple):
        budget.spend(2 * max(len(value), 1))  # the brackets and a separator between two items
        return [_plain(item, depth + 1, budget) for item in value]
    if isinstance(value, dict):
        budget.spend(2 * max(len(value), 1))
        out = {}
        for key, item in value.items():
            name = str(key)
            budget.spend(len(name) + 4)  # quoted, and ": "
            out[name] = _plain(item, depth + 1, budget)
        return out
    text = str(value)
    budget.spend(len(text) + 2)
    return text


def _scrub(value: Any, secrets: list[str]) -> Any:
    """Blank out every credential of the server that occurs in the result (an upstream echoing its env)."""
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, list):
        return [_scrub(item, secrets) for item in value]
    if isinstance(value, dict):
        return {_scrub(key, secrets): _scrub(item, secrets) for key, item in value.items()}
    return value


def _text_of(block: Any) -> str:
    if isinstance(block, TextContent):
        return block.text
    return f"[{getattr(block, 'type', 'content')}]"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit:,} more characters)"
