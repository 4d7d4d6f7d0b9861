"""The worker's end of the protocol pipes, moved off fds 0 and 1 so that nothing else can write to them.

Runs in the worker; imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

import os
from typing import IO, Any

from attp_server.sandbox.process.protocol import MAX_MESSAGE_BYTES, DoneMessage, Message, decode, encode


class Channel:
    """The protocol pipes, moved off fds 0 and 1 so that nothing else can write to them."""

    def __init__(self, reader: IO[bytes], writer: IO[bytes]) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    def claim_stdio(cls) -> Channel:
        reader = os.fdopen(os.dup(0), "rb")
        writer = os.fdopen(os.dup(1), "wb")
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
        return cls(reader, writer)

    def send(self, message: Message) -> None:
        self.writer.write(encode(message))
        self.writer.flush()

    def send_done(self, done: DoneMessage) -> None:
        """Send a run's report; if it cannot be encoded, send a plain error instead of dying."""
        try:
            data = encode(done)
        except (TypeError, ValueError, UnicodeError, RecursionError):
            failed: DoneMessage = {
                "op": "done",
                "status": "error",
                "error": {"code": "RUNTIME_ERROR", "message": "the run's report could not be encoded"},
                "stdout": "",
                "truncated": False,
                "retire": True,
            }
            data = encode(failed)
        self.writer.write(data)
        self.writer.flush()

    def receive(self) -> dict[str, Any] | None:
        line = self.reader.readline(MAX_MESSAGE_BYTES)
        return decode(line) if line else None
