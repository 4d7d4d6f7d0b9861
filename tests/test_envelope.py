"""The ATTP envelope (SPEC §2): lenient extraction, strict mode, and INVALID_ENVELOPE errors that show the fix."""

from __future__ import annotations

import re

import pytest

from attp_server.errors import ErrorInfo
from attp_server.run.envelope import Declined, EnvelopeError, Program, parse_envelope

BARE = """\
thought = \"\"\"1. read the notes 2. return them\"\"\"

[tool_call]
status = "success"
target = "read the notes"
code = '''
__result__ = read_file("notes.md")
'''
"""

BARE_CODE = '__result__ = read_file("notes.md")\n'

_ENVELOPE_START = re.compile(r"^(?:thought[ \t]*=|\[tool_call\])", re.MULTILINE)


def invalid(text: str, *, strict: bool = False) -> ErrorInfo:
    """Parse `text`, expect INVALID_ENVELOPE, and return the error record."""
    with pytest.raises(EnvelopeError) as caught:
        parse_envelope(text, strict=strict)
    info = caught.value.info
    assert info.code == "INVALID_ENVELOPE"
    assert str(caught.value) == info.message
    return info


def corrected_envelope(info: ErrorInfo) -> str:
    """The corrected envelope shown in `info.solution` (from its first `thought =` / `[tool_call]` line on)."""
    assert info.solution, info
    match = _ENVELOPE_START.search(info.solution)
    assert match is not None, f"no envelope in the solution: {info.solution!r}"
    return info.solution[match.start() :]


# --- envelopes that parse ----------------------------------------------------------------------


def test_bare_envelope() -> None:
    parsed = parse_envelope(BARE)
    assert parsed == Program(code=BARE_CODE, target="read the notes", thought="1. read the notes 2. return them")


def test_bare_envelope_passes_strict_mode() -> None:
    assert parse_envelope(BARE, strict=True) == parse_envelope(BARE)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"```toml\n{BARE}```\n", id="toml-fence"),
        pytest.param(f"```TOML\n{BARE}```", id="upper-case-fence"),
        pytest.param(f"```\n{BARE}```\n", id="fence-without-language"),
        pytest.param(f"Sure! Here is my call:\n\n```toml\n{BARE}```\n\nLet me know.\n", id="fence-inside-prose"),
        pytest.param(f"I will read the notes first.\n\n{BARE}", id="prose-before"),
        pytest.param(f"{BARE}\nThat should do it.\n", id="prose-after"),
        pytest.param(f"Plan below.\n{BARE}\nDone; waiting for the result.\n", id="prose-before-and-after"),
        pytest.param(BARE.replace("\n", "\r\n"), id="crlf"),
        pytest.param(f"Here:\r\n```toml\r\n{BARE.replace(chr(10), chr(13) + chr(10))}```\r\nbye", id="crlf-fence"),
    ],
)
def test_lenient_extraction_finds_the_envelope(text: str) -> None:
    parsed = parse_envelope(text)
    assert isinstance(parsed, Program)
    assert parsed.code.strip() == BARE_CODE.strip()
    assert parsed.target == "read the notes"
    assert parsed.thought == "1. read the notes 2. return them"


def test_thought_before_tool_call_is_kept() -> None:
    text = 'thought = """1. list files\n2. count them"""\n\n[tool_call]\nstatus = "success"\ncode = "__result__ = 1"\n'
    parsed = parse_envelope(text)
    assert parsed == Program(code="__result__ = 1", target=None, thought="1. list files\n2. count them")


def test_thought_in_prose_before_tool_call() -> None:
    text = (
        "I think this works.\n"
        'thought = """1. a\n2. b"""\n\n'
        "[tool_call]\nstatus = \"success\"\ncode = '''\n__result__ = 2\n'''\nDone!\n"
    )
    assert parse_envelope(text) == Program(code="__result__ = 2\n", thought="1. a\n2. b")


def test_first_envelope_wins() -> None:
    first = '[tool_call]\nstatus = "success"\ncode = "a = 1"\n'
    second = '[tool_call]\nstatus = "success"\ncode = "b = 2"\n'
    text = f"{first}\nor maybe\n\n{second}"
    assert parse_envelope(text) == Program(code="a = 1")


def test_fenced_block_without_tool_call_is_skipped() -> None:
    text = "```toml\nx = 1\n```\nand the real one:\n```toml\n[tool_call]\nstatus = 'fail'\nmessage = 'no'\n```"
    assert parse_envelope(text) == Declined(message="no")


def test_markdown_fence_inside_the_code() -> None:
    text = (
        "Sure:\n\n```toml\n"
        "[tool_call]\nstatus = \"success\"\ncode = '''\n"
        'write_file("a.md", "```python\\nprint(1)\\n```\\n")\n'
        "'''\n```\n\nLet me know!\n"
    )
    parsed = parse_envelope(text)
    assert isinstance(parsed, Program)
    assert parsed.code == 'write_file("a.md", "```python\\nprint(1)\\n```\\n")\n'


@pytest.mark.parametrize("status", ["success", "Success", " SUCCESS "])
def test_status_is_case_and_space_tolerant(status: str) -> None:
    text = f'[tool_call]\nstatus = "{status}"\ncode = "x = 1"\n'
    assert parse_envelope(text) == Program(code="x = 1")


def test_code_with_triple_single_quotes_inside_a_double_quoted_string() -> None:
    text = '[tool_call]\nstatus = "success"\ncode = """\ns = \'\'\'multi\nline\'\'\'\n__result__ = s\n"""\n'
    parsed = parse_envelope(text)
    assert isinstance(parsed, Program)
    assert parsed.code == "s = '''multi\nline'''\n__result__ = s\n"


# --- status = "fail" ---------------------------------------------------------------------------


def test_fail_with_message_is_declined() -> None:
    text = (
        'thought = "no tool can send email"\n\n[tool_call]\nstatus = "fail"\ntarget = "send the report"\n'
        'message = "There is no email tool; save the report with write_file instead."\n'
    )
    parsed = parse_envelope(text)
    assert parsed == Declined(
        message="There is no email tool; save the report with write_file instead.",
        target="send the report",
        thought="no tool can send email",
    )


def test_fail_ignores_code() -> None:
    text = '[tool_call]\nstatus = "fail"\nmessage = "cannot"\ncode = "__result__ = 1"\n'
    assert parse_envelope(text) == Declined(message="cannot")


# --- INVALID_ENVELOPE ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "field", "received", "expected"),
    [
        pytest.param(
            "I will read the file notes.md and summarise it.",
            "envelope",
            "'I will read the file notes.md and summarise it.'",
            "a TOML document with a [tool_call] table",
            id="not-toml",
        ),
        pytest.param(
            'thought = "x"\n',
            "tool_call",
            "'thought = \"x\"\\n'",
            "a [tool_call] table with status, target and code",
            id="no-tool-call",
        ),
        pytest.param(
            'tool_call = "run it"\n', "tool_call", "'run it'", "a [tool_call] table", id="tool-call-not-table"
        ),
        pytest.param("tool_call = [1, 2]\n", "tool_call", "[1, 2]", "a [tool_call] table", id="tool-call-array"),
        pytest.param(
            '[tool_call]\nstatus = "maybe"\ncode = "x = 1"\n',
            "tool_call.status",
            "'maybe'",
            '"success" or "fail"',
            id="unknown-status",
        ),
        pytest.param(
            '[tool_call]\nstatus = 1\ncode = "x = 1"\n', "tool_call.status", "1", '"success" or "fail"', id="status-int"
        ),
        pytest.param(
            '[tool_call]\ncode = "x = 1"\n', "tool_call.status", None, '"success" or "fail"', id="missing-status"
        ),
        pytest.param(
            '[tool_call]\nstatus = "success"\ntarget = "t"\n',
            "tool_call.code",
            None,
            "a non-empty string of Python code",
            id="success-without-code",
        ),
        pytest.param(
            '[tool_call]\nstatus = "success"\ncode = "  \\n "\n',
            "tool_call.code",
            "'  \\n '",
            "a non-empty string of Python code",
            id="empty-code",
        ),
        pytest.param(
            '[tool_call]\nstatus = "success"\ncode = 5\n',
            "tool_call.code",
            "5",
            "a non-empty string of Python code",
            id="code-not-string",
        ),
        pytest.param(
            '[tool_call]\nstatus = "fail"\n', "tool_call.message", None, "a non-empty string", id="fail-without-message"
        ),
        pytest.param(
            '[tool_call]\nstatus = "fail"\nmessage = ""\n',
            "tool_call.message",
            "''",
            "a non-empty string",
            id="fail-empty-message",
        ),
        pytest.param(
            '[tool_call]\nstatus = "success"\ntarget = 3\ncode = "x = 1"\n',
            "tool_call.target",
            "3",
            "a string",
            id="target-not-string",
        ),
        pytest.param(
            'thought = 5\n[tool_call]\nstatus = "success"\ncode = "x = 1"\n',
            "thought",
            "5",
            "a string",
            id="thought-not-string",
        ),
        pytest.param("   \n\t", "envelope", "''", "an ATTP TOML envelope", id="empty"),
    ],
)
def test_invalid_envelope_names_field_received_expected(
    text: str, field: str, received: str | None, expected: str
) -> None:
    info = invalid(text)
    assert info.parameter_name == field
    assert info.received == received
    assert info.expected == expected
    assert info.message


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("I will read the file notes.md and summarise it.", id="not-toml"),
        pytest.param('thought = "x"\n', id="no-tool-call"),
        pytest.param('tool_call = "run it"\n', id="tool-call-not-table"),
        pytest.param('[tool_call]\nstatus = "maybe"\ncode = "x = 1"\n', id="unknown-status"),
        pytest.param('[tool_call]\ncode = "x = 1"\n', id="missing-status"),
        pytest.param('[tool_call]\nstatus = "success"\n', id="success-without-code"),
        pytest.param('[tool_call]\nstatus = "success"\ncode = ""\n', id="empty-code"),
        pytest.param('[tool_call]\nstatus = "fail"\n', id="fail-without-message"),
        pytest.param('[tool_call]\nstatus = "success"\ntarget = 3\ncode = "x = 1"\n', id="target-not-string"),
        pytest.param("", id="empty"),
    ],
)
def test_solution_shows_an_envelope_that_parses(text: str) -> None:
    info = invalid(text)
    assert info.solution is not None
    fixed = parse_envelope(corrected_envelope(info))
    assert isinstance(fixed, Program | Declined)


def test_fail_without_message_shows_a_fail_envelope() -> None:
    info = invalid('[tool_call]\nstatus = "fail"\n')
    assert isinstance(parse_envelope(corrected_envelope(info)), Declined)


def test_missing_status_says_it_is_missing() -> None:
    info = invalid('[tool_call]\ncode = "x = 1"\n')
    assert "missing" in info.message


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        pytest.param("I will read the file.", 1, 3, id="prose"),
        pytest.param("a = 1\nb = 2\nc = = 3\n", 3, 5, id="third-line"),
    ],
)
def test_invalid_toml_reports_line_and_column(text: str, line: int, column: int) -> None:
    info = invalid(text)
    assert info.parameter_name == "envelope"
    assert (info.line, info.column) == (line, column)
    assert "not valid TOML" in info.message
    assert f"line {line}" in info.message


def test_strict_invalid_toml_after_tool_call_reports_position_and_quote_advice() -> None:
    text = "thought = 't'\n[tool_call]\nstatus = \"success\"\ncode = '''\nx = '''abc'''\n'''\n"
    info = invalid(text, strict=True)
    assert info.parameter_name == "envelope"
    assert info.line == 5
    assert info.column is not None
    assert '"""' in info.message


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param(
            "[tool_call]\nstatus = \"success\"\ncode = '''\nx = '''abc'''\n'''\n", 4, id="triple-quote-in-code"
        ),
        pytest.param('[tool_call]\nstatus = "success\ncode = "x = 1"\n', 2, id="unterminated-status"),
    ],
)
def test_lenient_invalid_toml_after_tool_call_reports_the_syntax_error(text: str, line: int) -> None:
    info = invalid(text)
    assert info.parameter_name == "envelope"
    assert "not valid TOML" in info.message
    assert info.line == line


# --- strict mode -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"```toml\n{BARE}```\n", id="fence"),
        pytest.param(f"Here is my call:\n{BARE}", id="prose-before"),
        pytest.param(f"{BARE}\nDone.\n", id="prose-after"),
    ],
)
def test_strict_refuses_fences_and_prose(text: str) -> None:
    assert isinstance(parse_envelope(text), Program)
    info = invalid(text, strict=True)
    assert info.parameter_name == "envelope"
    assert info.line is not None


def test_strict_requires_a_thought() -> None:
    text = '[tool_call]\nstatus = "success"\ncode = "x = 1"\n'
    assert parse_envelope(text) == Program(code="x = 1")
    info = invalid(text, strict=True)
    assert info.parameter_name == "thought"
    assert info.expected is not None
    assert "thought" in info.expected
    assert isinstance(parse_envelope(corrected_envelope(info), strict=True), Program)


def test_strict_refuses_an_empty_thought() -> None:
    info = invalid('thought = ""\n[tool_call]\nstatus = "success"\ncode = "x = 1"\n', strict=True)
    assert info.parameter_name == "thought"


def test_strict_without_tool_call() -> None:
    info = invalid('thought = "t"\n', strict=True)
    assert info.parameter_name == "tool_call"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"```toml\n{BARE}```\n", id="fence"),
        pytest.param('thought = "t"\n[tool_call]\nstatus = "maybe"\ncode = "x = 1"\n', id="unknown-status"),
        pytest.param('thought = "t"\n[tool_call]\nstatus = "fail"\n', id="fail-without-message"),
    ],
)
def test_strict_solution_envelope_passes_strict_mode(text: str) -> None:
    info = invalid(text, strict=True)
    parse_envelope(corrected_envelope(info), strict=True)


@pytest.mark.parametrize("strict", [False, True])
def test_nesting_too_deep_for_the_toml_parser_is_an_invalid_envelope(strict: bool) -> None:
    """tomllib parses arrays recursively: thousands of '[' raised RecursionError (an INTERNAL_ERROR)."""
    info = invalid("thought = 'x'\nb = " + "[" * 5000 + "]" * 5000 + "\n", strict=strict)
    assert "nested too deeply" in info.message
    assert info.parameter_name == "envelope" and info.solution is not None


def test_a_pathological_envelope_costs_a_bounded_number_of_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: an array left open over 50,000 characters made the prose-cut search parse every one of 200
    shorter cuts in full (5.6 s of the server's CPU for one request, before admission control)."""
    import attp_server.run.envelope as envelope

    parsed: list[int] = []
    real = envelope._toml

    def counting(text: str) -> dict[str, object]:
        parsed.append(len(text))
        return real(text)

    monkeypatch.setattr(envelope, "_toml", counting)
    text = "[tool_call]\nx = [\n" + "1,\n" * 16_600
    with pytest.raises(EnvelopeError) as caught:
        parse_envelope(text)
    assert "not valid TOML" in caught.value.info.message
    assert sum(parsed) <= envelope.MAX_PARSED_CHARS + 2 * len(text), f"{sum(parsed):,} characters parsed"
