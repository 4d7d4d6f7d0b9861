"""The worker protocol's decoder: whatever a (possibly compromised) worker writes, the server gets a
message or a ProtocolError, never another exception."""

from __future__ import annotations

import pytest

from attp_server.sandbox.process.protocol import ProtocolError, decode, encode


def test_a_message_round_trips() -> None:
    message = {"op": "call", "id": 3, "name": "read_file", "args": ["notes.md"], "kwargs": {}}
    assert decode(encode(message)) == message


@pytest.mark.parametrize(
    ("line", "why"),
    [
        pytest.param(b"not json\n", "not JSON", id="not-json"),
        pytest.param(b"\xff\xfe\n", "not JSON", id="not-utf8"),
        pytest.param(b"[1, 2]\n", "JSON object", id="not-an-object"),
        pytest.param(b'{"id": 1}\n', "JSON object", id="no-op"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested too deeply", id="nested-too-deeply"),
    ],
)
def test_a_bad_line_is_a_protocol_error(line: bytes, why: str) -> None:
    with pytest.raises(ProtocolError, match=why):
        decode(line)
