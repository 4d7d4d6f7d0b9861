"""The files toolpack, called directly: behaviour, limits, atomicity, and the workspace boundary."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from harness import past_deadline
from pydantic import ValidationError

from attp_server.toolpack import ToolError, ToolpackContext, ToolRegistry, load_toolpack
from attp_server.toolpacks.files import FilesOptions, toolpack
from attp_server.toolpacks.files import tools as files_tools


def make_files(tmp_path: Path, **options: Any) -> SimpleNamespace:
    """The pack's tools as attributes (files.read_file, ...), bound to tmp_path/ws."""
    assert toolpack.build is not None
    built = toolpack.build(ToolpackContext(workspace=tmp_path / "ws", options=FilesOptions(**options)))
    return SimpleNamespace(**{f.__name__: f for f in built})


@pytest.fixture
def files(tmp_path: Path) -> SimpleNamespace:
    return make_files(tmp_path)


@pytest.fixture
def ws(tmp_path: Path, files: SimpleNamespace) -> Path:
    return tmp_path / "ws"


def raises_code(code: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> ToolError:
    with pytest.raises(ToolError) as info:
        call(*args, **kwargs)
    assert info.value.code == code, info.value.message
    return info.value


def numbered(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


# --- the pack itself -------------------------------------------------------------------------


def test_build_creates_missing_workspace(tmp_path: Path) -> None:
    make_files(tmp_path / "deep" / "er")
    assert (tmp_path / "deep" / "er" / "ws").is_dir()


def test_registry_accepts_pack_aliases_and_signatures(tmp_path: Path) -> None:
    registry = ToolRegistry([load_toolpack("files")], tmp_path / "ws", {"files": {"max_lines": 10}})
    assert sorted(registry.namespaces()["files"]) == sorted(
        ["read_file", "write_file", "edit_file", "list_files", "file_reader", "file_writer", "file_editor"]
    )
    reader = registry.resolve("file_reader")
    assert reader is not None
    assert reader.signature_text() == "read_file(path: str, max_lines: int = 1000, offset: int = 0) -> str"
    for tool in registry.tools.values():
        assert {"Args:", "Returns:", "Raises:", "Example:"} <= set(tool.doc.split()), tool.name


def test_options_forbid_unknown_keys() -> None:
    with pytest.raises(ValidationError):
        FilesOptions.model_validate({"max_byte": 5})


# --- write / read ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("hello\n", id="ascii"),
        pytest.param("héllo wörld ✓ 🎉\n", id="unicode"),
        pytest.param("", id="empty"),
        pytest.param("no newline at end", id="no-final-newline"),
        pytest.param("a\r\nb\r\n", id="crlf-kept"),
        pytest.param("tab\tand \x0c form feed\n", id="control-chars"),
    ],
)
def test_write_then_read_round_trip(files: SimpleNamespace, content: str) -> None:
    files.write_file("notes/todo.md", content)
    assert files.read_file("notes/todo.md") == content


def test_write_reports_path_bytes_and_created(files: SimpleNamespace, ws: Path) -> None:
    first = files.write_file("./a//b/c.txt", "é\n")
    assert first == {"path": "a/b/c.txt", "bytes": 3, "created": True}
    assert files.write_file("a/b/c.txt", "x") == {"path": "a/b/c.txt", "bytes": 1, "created": False}
    assert (ws / "a" / "b" / "c.txt").read_bytes() == b"x"


def test_write_keeps_permissions_of_replaced_file(files: SimpleNamespace, ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("old")
    script.chmod(0o751)
    files.write_file("run.sh", "new")
    assert script.stat().st_mode & 0o777 == 0o751


@pytest.mark.parametrize(
    ("offset", "max_lines", "expected_lines"),
    [
        pytest.param(0, 1000, range(1, 11), id="whole-file"),
        pytest.param(0, 3, range(1, 4), id="first-3"),
        pytest.param(3, 3, range(4, 7), id="middle"),
        pytest.param(7, 3, range(8, 11), id="exact-end"),
        pytest.param(8, 100, range(9, 11), id="tail"),
        pytest.param(9, 1, range(10, 11), id="last-line"),
        pytest.param(10, 5, range(0), id="at-the-end-an-empty-page"),
    ],
)
def test_read_window_is_the_files_own_lines(
    files: SimpleNamespace, offset: int, max_lines: int, expected_lines: range
) -> None:
    """No note inside the text: the trial's model parsed one as a bad JSON line."""
    files.write_file("f.txt", numbered(10))
    text = files.read_file("f.txt", max_lines=max_lines, offset=offset)
    assert text == "".join(f"line {i}\n" for i in expected_lines)


def test_read_caps_max_lines(tmp_path: Path) -> None:
    files = make_files(tmp_path, max_lines=5)
    files.write_file("f.txt", numbered(8))
    assert files.read_file("f.txt", max_lines=1000).splitlines() == [f"line {i}" for i in range(1, 6)]


def test_read_window_ends_on_a_partial_last_line(files: SimpleNamespace) -> None:
    files.write_file("f.txt", "a\nb\nc")
    assert files.read_file("f.txt", max_lines=2) == "a\nb\n"
    assert files.read_file("f.txt", offset=2) == "c"
    assert files.read_file("f.txt", offset=3) == ""


@pytest.mark.parametrize(
    ("kwargs", "code", "parameter"),
    [
        pytest.param({"max_lines": 0}, "INVALID_ARGUMENT", "max_lines", id="max-lines-zero"),
        pytest.param({"offset": -1}, "INVALID_ARGUMENT", "offset", id="negative-offset"),
        pytest.param({"offset": 4}, "LINE_OUT_OF_RANGE", "offset", id="offset-just-past-end"),
        pytest.param({"offset": 99}, "LINE_OUT_OF_RANGE", "offset", id="offset-past-end"),
    ],
)
def test_read_bad_window(files: SimpleNamespace, kwargs: dict[str, int], code: str, parameter: str) -> None:
    files.write_file("f.txt", numbered(3))
    assert raises_code(code, files.read_file, "f.txt", **kwargs).parameter_name == parameter


def test_read_empty_file_at_offset_zero(files: SimpleNamespace) -> None:
    files.write_file("empty.txt", "")
    assert files.read_file("empty.txt") == ""


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", id="png-header"),
        pytest.param(b"text first\n" * 100 + b"\x00", id="nul-within-8k"),
        pytest.param(b"caf\xe9\n", id="latin-1"),
        pytest.param(b"ok\n" * 5000 + b"\xff", id="invalid-utf8-late"),
        pytest.param("hi".encode("utf-16"), id="utf-16"),
    ],
)
def test_binary_file_refused(files: SimpleNamespace, ws: Path, data: bytes) -> None:
    (ws / "blob").write_bytes(data)
    error = raises_code("BINARY_FILE", files.read_file, "blob")
    assert "binary" in error.message
    raises_code("BINARY_FILE", files.edit_file, "blob", old_string="a", new_string="b")


def test_too_large_refused(tmp_path: Path) -> None:
    files = make_files(tmp_path, max_bytes=100)
    (tmp_path / "ws" / "big.txt").write_text("x" * 101)
    raises_code("FILE_TOO_LARGE", files.read_file, "big.txt")
    raises_code("FILE_TOO_LARGE", files.edit_file, "big.txt", old_string="x", new_string="y")
    assert raises_code("FILE_TOO_LARGE", files.write_file, "new.txt", "é" * 51).parameter_name == "content"
    assert not (tmp_path / "ws" / "new.txt").exists()
    assert files.write_file("ok.txt", "x" * 100)["bytes"] == 100


def test_missing_file_suggests_closest_name(files: SimpleNamespace) -> None:
    files.write_file("notes/todo.md", "x")
    error = raises_code("FILE_NOT_FOUND", files.read_file, "notes/todo.txt")
    assert error.suggested_value == "notes/todo.md"
    error = raises_code("FILE_NOT_FOUND", files.read_file, "note/todo.md")
    assert error.suggested_value == "notes/todo.md"
    assert "'note'" in error.message
    assert raises_code("FILE_NOT_FOUND", files.edit_file, "zzz", old_string="a", new_string="b").suggested_value is None


def test_directory_is_not_a_file(files: SimpleNamespace, ws: Path) -> None:
    (ws / "sub").mkdir()
    raises_code("IS_A_DIRECTORY", files.read_file, "sub")
    raises_code("IS_A_DIRECTORY", files.write_file, "sub", "x")
    raises_code("IS_A_DIRECTORY", files.write_file, "new/", "x")
    files.write_file("plain", "x")
    raises_code("NOT_A_DIRECTORY", files.write_file, "plain/child", "x")
    raises_code("NOT_A_DIRECTORY", files.read_file, "plain/child")


# --- atomicity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_failed_write_keeps_old_content_and_no_temp_files(
    files: SimpleNamespace, ws: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    files.write_file("doc.txt", "old content\n")

    def boom(*args: Any, **kwargs: Any) -> None:
        raise OSError(5, "simulated disk failure")

    monkeypatch.setattr(os, failing, boom)
    raises_code("IO_ERROR", files.write_file, "doc.txt", "new content\n")
    raises_code("IO_ERROR", files.edit_file, "doc.txt", old_string="old", new_string="new")
    monkeypatch.undo()
    assert (ws / "doc.txt").read_text() == "old content\n"
    assert os.listdir(ws) == ["doc.txt"]


# --- edit_file ---------------------------------------------------------------------------------


def test_edit_replace_unique(files: SimpleNamespace) -> None:
    files.write_file("app.py", "DEBUG = True\nNAME = 'x'\n")
    result = files.edit_file("app.py", old_string="DEBUG = True", new_string="DEBUG = False\nVERBOSE = 1")
    assert result == {"path": "app.py", "mode": "replace", "lines_before": 2, "lines_after": 3, "replacements": 1}
    assert files.read_file("app.py") == "DEBUG = False\nVERBOSE = 1\nNAME = 'x'\n"
    files.edit_file("app.py", old_string="VERBOSE = 1\n", new_string="")
    assert files.read_file("app.py") == "DEBUG = False\nNAME = 'x'\n"


@pytest.mark.parametrize(
    ("content", "old", "code", "in_message"),
    [
        pytest.param("a\nb\n", "zzz", "OLD_STRING_NOT_FOUND", "0 times", id="absent"),
        pytest.param(
            "x = 1\ny = 2\nx = 1\n", "x = 1", "OLD_STRING_NOT_UNIQUE", "2 times in 'f.py' (at lines 1, 3)", id="twice"
        ),
        pytest.param("aaa\n", "aa", "OLD_STRING_NOT_UNIQUE", "2 times", id="overlapping"),
        pytest.param("    def f():\n", "  def g():", "OLD_STRING_NOT_FOUND", "0 times", id="absent-indent"),
        pytest.param("a\r\nb\r\n", "a\nb", "OLD_STRING_NOT_FOUND", "Windows line endings", id="crlf-hint"),
        pytest.param("    x = 1\n", "x = 1 ", "OLD_STRING_NOT_FOUND", "whitespace", id="whitespace-hint"),
        pytest.param("Hello\n", "hello", "OLD_STRING_NOT_FOUND", "upper/lower case", id="case-hint"),
        pytest.param("a\n", "", "INVALID_ARGUMENT", "empty", id="empty-old"),
    ],
)
def test_edit_replace_needs_exactly_one_occurrence(
    files: SimpleNamespace, content: str, old: str, code: str, in_message: str
) -> None:
    files.write_file("f.py", content)
    error = raises_code(code, files.edit_file, "f.py", old_string=old, new_string="NEW")
    assert in_message in error.message
    assert error.parameter_name == "old_string"
    assert files.read_file("f.py") == content


def test_edit_replace_all_renames_every_occurrence(files: SimpleNamespace) -> None:
    """The trial's rename of a key used three times took a read and a whole-file rewrite without it."""
    files.write_file("c.json", '{"a": {"timeout": 3}, "b": {"timeout": 10}, "c": {"timeout": 2}}\n')
    result = files.edit_file("c.json", old_string='"timeout"', new_string='"timeout_seconds"', replace_all=True)
    assert result["replacements"] == 3
    assert files.read_file("c.json").count('"timeout_seconds"') == 3
    raises_code("OLD_STRING_NOT_FOUND", files.edit_file, "c.json", old_string="nope", new_string="x", replace_all=True)
    error = raises_code(
        "INVALID_EDIT_MODE", files.edit_file, "c.json", start_line=1, end_line=1, new_content="{}", replace_all=True
    )
    assert error.parameter_name == "replace_all"


def test_edit_replace_all_checks_the_size_before_building_it(files: SimpleNamespace) -> None:
    files.write_file("a.txt", "a" * 100_000)
    error = raises_code(
        "FILE_TOO_LARGE", files.edit_file, "a.txt", old_string="a", new_string="b" * 1000, replace_all=True
    )
    assert "100000 occurrences" in error.message
    assert files.read_file("a.txt") == "a" * 100_000


@pytest.mark.parametrize(
    ("start", "end", "new", "expected"),
    [
        pytest.param(2, 3, "B\nC\n", "1\nB\nC\n4\n5\n", id="replace-two"),
        pytest.param(1, 1, "ONE", "ONE\n2\n3\n4\n5\n", id="newline-added"),
        pytest.param(2, 4, "", "1\n5\n", id="delete"),
        pytest.param(5, 5, "five\nsix\n", "1\n2\n3\n4\nfive\nsix\n", id="last-line-grows"),
        pytest.param(1, 5, "all", "all\n", id="everything"),
    ],
)
def test_edit_line_range(files: SimpleNamespace, start: int, end: int, new: str, expected: str) -> None:
    files.write_file("f.txt", "1\n2\n3\n4\n5\n")
    result = files.edit_file("f.txt", start_line=start, end_line=end, new_content=new)
    assert files.read_file("f.txt") == expected
    assert result == {
        "path": "f.txt",
        "mode": "line_range",
        "lines_before": 5,
        "lines_after": expected.count("\n"),
    }


def test_edit_line_range_keeps_missing_final_newline(files: SimpleNamespace) -> None:
    files.write_file("f.txt", "a\nb")
    files.edit_file("f.txt", start_line=2, end_line=2, new_content="B")
    assert files.read_file("f.txt") == "a\nB"


@pytest.mark.parametrize(
    ("start", "end"),
    [
        pytest.param(0, 1, id="zero-start"),
        pytest.param(-1, 2, id="negative"),
        pytest.param(3, 2, id="start-after-end"),
        pytest.param(1, 4, id="end-past-file"),
        pytest.param(4, 4, id="start-past-file"),
    ],
)
def test_edit_line_range_out_of_range(files: SimpleNamespace, start: int, end: int) -> None:
    files.write_file("f.txt", "1\n2\n3\n")
    error = raises_code("LINE_OUT_OF_RANGE", files.edit_file, "f.txt", start_line=start, end_line=end, new_content="")
    assert "3 lines" in error.message
    assert files.read_file("f.txt") == "1\n2\n3\n"


@pytest.mark.parametrize(
    ("kwargs", "in_message"),
    [
        pytest.param({}, "no edit was given", id="neither"),
        pytest.param({"old_string": "a", "new_string": "b", "start_line": 1}, "both modes", id="mixed"),
        pytest.param(
            {"old_string": "a", "new_string": "b", "start_line": 1, "end_line": 1, "new_content": "x"},
            "both modes",
            id="all-five",
        ),
        pytest.param({"old_string": "a"}, "also needs new_string", id="old-only"),
        pytest.param({"new_string": "a"}, "also needs old_string", id="new-only"),
        pytest.param({"start_line": 1, "end_line": 1}, "also needs new_content", id="range-no-content"),
        pytest.param({"new_content": "x"}, "also needs start_line and end_line", id="content-only"),
    ],
)
def test_edit_mode_must_be_exactly_one(files: SimpleNamespace, kwargs: dict[str, Any], in_message: str) -> None:
    files.write_file("f.txt", "a\n")
    error = raises_code("INVALID_EDIT_MODE", files.edit_file, "f.txt", **kwargs)
    assert in_message in error.message
    assert "replace mode" in error.message and "line-range mode" in error.message


# --- list_files --------------------------------------------------------------------------------


@pytest.fixture
def tree(files: SimpleNamespace, ws: Path, tmp_path: Path) -> SimpleNamespace:
    for name in ["README.md", "setup.py", "src/app.py", "src/util.py", "src/data.json", "src/deep/x.py", ".hidden"]:
        files.write_file(name, "x")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.py").write_text("s")
    (ws / "escape").symlink_to(tmp_path / "outside")
    (ws / "escape_file.py").symlink_to(tmp_path / "outside" / "secret.py")
    (ws / "inner_link.py").symlink_to("setup.py")
    (ws / "src_link").symlink_to("src")
    os.mkfifo(ws / "pipe")
    return files


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param(
            {},
            [".hidden", "README.md", "inner_link.py", "setup.py", "src/", "src_link/"],
            id="root",
        ),
        pytest.param({"pattern": "*.py"}, ["inner_link.py", "setup.py"], id="pattern"),
        pytest.param({"directory": "src"}, ["src/app.py", "src/data.json", "src/deep/", "src/util.py"], id="subdir"),
        pytest.param({"directory": "src/", "pattern": "*.json"}, ["src/data.json"], id="subdir-slash"),
        pytest.param(
            {"pattern": "*.py", "recursive": True},
            ["inner_link.py", "setup.py", "src/app.py", "src/deep/x.py", "src/util.py"],
            id="recursive-pattern",
        ),
        pytest.param(
            {"directory": "src", "recursive": True},
            ["src/app.py", "src/data.json", "src/deep/x.py", "src/util.py"],
            id="recursive-subdir",
        ),
        pytest.param(
            {"directory": "src_link"},
            ["src_link/app.py", "src_link/data.json", "src_link/deep/", "src_link/util.py"],
            id="inside-link",
        ),
        pytest.param({"pattern": "nothing*"}, [], id="no-match"),
    ],
)
def test_list_files(tree: SimpleNamespace, kwargs: dict[str, Any], expected: list[str]) -> None:
    assert tree.list_files(**kwargs) == expected


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        pytest.param({"directory": "escape"}, "PATH_OUTSIDE_WORKSPACE", id="link-out"),
        pytest.param({"directory": "../"}, "PATH_OUTSIDE_WORKSPACE", id="dotdot"),
        pytest.param({"directory": "/tmp"}, "PATH_OUTSIDE_WORKSPACE", id="absolute"),
        pytest.param({"directory": "setup.py"}, "NOT_A_DIRECTORY", id="file"),
        pytest.param({"directory": "srcc"}, "FILE_NOT_FOUND", id="missing"),
        pytest.param({"pattern": "src/*.py"}, "INVALID_PATTERN", id="slash-in-pattern"),
        pytest.param({"pattern": ""}, "INVALID_PATTERN", id="empty-pattern"),
    ],
)
def test_list_files_refused(tree: SimpleNamespace, kwargs: dict[str, Any], code: str) -> None:
    raises_code(code, tree.list_files, **kwargs)


def test_list_files_suggests_folder(tree: SimpleNamespace) -> None:
    assert raises_code("FILE_NOT_FOUND", tree.list_files, "srcc").suggested_value == "src"
    assert raises_code("INVALID_PATTERN", tree.list_files, pattern="src/*.py").suggested_value == "*.py"


def test_recursive_listing_stops_at_its_programs_time_limit(tree: SimpleNamespace) -> None:
    with past_deadline():
        assert raises_code("TIMEOUT", tree.list_files, recursive=True).parameter_name == "directory"
    assert tree.list_files(recursive=True)  # outside a run: no time limit


def test_list_files_too_many(files: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files_tools, "MAX_LIST_ENTRIES", 3)
    for i in range(3):
        files.write_file(f"d/f{i}.txt", "x")
    assert len(files.list_files("d", recursive=True)) == 3
    files.write_file("d/f3.txt", "x")
    for recursive in (False, True):
        error = raises_code("TOO_MANY_FILES", files.list_files, "d", recursive=recursive, pattern="f*")
        assert "pattern" in (error.solution or "")
    # the cap counts matches, not everything walked past
    assert files.list_files("d", pattern="f3*", recursive=True) == ["d/f3.txt"]


# --- the workspace boundary --------------------------------------------------------------------


@pytest.fixture
def hostile(files: SimpleNamespace, ws: Path, tmp_path: Path) -> Path:
    """A workspace with links leading out, a FIFO, a loop; returns the outside folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (ws / "sub").mkdir()
    (ws / "real.txt").write_text("inside")
    (ws / "link_etc").symlink_to("/etc")
    (ws / "link_out_dir").symlink_to(outside)
    (ws / "link_out_file").symlink_to(outside / "secret.txt")
    (ws / "link_chain").symlink_to("link_out_file")
    (ws / "dangling_out").symlink_to(outside / "not_yet.txt")
    (ws / "sub" / "link_up").symlink_to("../../outside/secret.txt")
    (ws / "loop").symlink_to("loop")
    os.mkfifo(ws / "fifo")
    return outside


OUTSIDE = "PATH_OUTSIDE_WORKSPACE"
HOSTILE_PATHS = [
    pytest.param("../x", OUTSIDE, id="dotdot"),
    pytest.param("..", OUTSIDE, id="dotdot-alone"),
    pytest.param("a/../../x", OUTSIDE, id="dotdot-nested"),
    pytest.param("./../x", OUTSIDE, id="dot-dotdot"),
    pytest.param("a/b/../../../x", OUTSIDE, id="dotdot-deep"),
    pytest.param("sub/../real.txt", OUTSIDE, id="dotdot-staying-inside"),
    pytest.param("../ws/real.txt", OUTSIDE, id="dotdot-back-in"),
    pytest.param("{outside}/secret.txt", OUTSIDE, id="absolute"),
    pytest.param("/{outside}/secret.txt", OUTSIDE, id="double-slash-absolute"),
    pytest.param("/", OUTSIDE, id="root"),
    pytest.param("C:\\x", OUTSIDE, id="windows-drive"),
    pytest.param("c:/x", OUTSIDE, id="windows-drive-slash"),
    pytest.param("..\\x", "INVALID_PATH", id="backslash-dotdot"),
    pytest.param("a\\b", "INVALID_PATH", id="backslash"),
    pytest.param("\x00", "INVALID_PATH", id="nul"),
    pytest.param("real.txt\x00.png", "INVALID_PATH", id="nul-inside"),
    pytest.param("", "INVALID_PATH", id="empty"),
    pytest.param("link_out_dir/secret.txt", OUTSIDE, id="dir-link-out"),
    pytest.param("link_out_dir/new.txt", OUTSIDE, id="dir-link-out-new"),
    pytest.param("link_out_file", OUTSIDE, id="file-link-out"),
    pytest.param("link_chain", OUTSIDE, id="link-chain-out"),
    pytest.param("dangling_out", OUTSIDE, id="dangling-link-out"),
    pytest.param("sub/link_up", OUTSIDE, id="relative-link-out"),
    pytest.param("fifo", "NOT_A_REGULAR_FILE", id="fifo"),
    pytest.param("loop", "INVALID_PATH", id="symlink-loop"),
    pytest.param(".", "IS_A_DIRECTORY", id="workspace-root"),
    pytest.param("sub", "IS_A_DIRECTORY", id="directory"),
]


def _format(path: str, outside: Path) -> str:
    return path.replace("/{outside}", str(outside)).replace("{outside}", str(outside))


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize(("path", "code"), HOSTILE_PATHS)
def test_read_refuses_hostile_path(files: SimpleNamespace, hostile: Path, path: str, code: str) -> None:
    path = _format(path, hostile)
    error = raises_code(code, files.read_file, path)
    assert error.parameter_name == "path"
    if code == OUTSIDE:
        assert error.received == path
        assert error.expected == "a relative path inside the workspace, e.g. 'notes/todo.md'"
        assert "secret" not in error.message.replace(path, "")


@pytest.mark.parametrize(("path", "code"), HOSTILE_PATHS)
def test_write_refuses_hostile_path(
    files: SimpleNamespace, hostile: Path, ws: Path, tmp_path: Path, path: str, code: str
) -> None:
    before_outside, before_ws = snapshot(hostile), snapshot(ws)
    raises_code(code, files.write_file, _format(path, hostile), "pwned")
    raises_code(code, files.edit_file, _format(path, hostile), start_line=1, end_line=1, new_content="pwned")
    assert snapshot(hostile) == before_outside
    assert snapshot(ws) == before_ws
    assert sorted(os.listdir(tmp_path)) == ["outside", "ws"]


def test_etc_link_cannot_be_read(files: SimpleNamespace, hostile: Path) -> None:
    for path in ["/etc/passwd", "//etc/passwd", "link_etc/passwd", "link_etc", "sub/../../../../etc/passwd"]:
        raises_code(OUTSIDE, files.read_file, path)
    raises_code(OUTSIDE, files.list_files, "link_etc")


@pytest.mark.parametrize(
    ("path", "on_disk"),
    [
        pytest.param("~", "~", id="tilde-is-a-name"),
        pytest.param("~/x", "~/x", id="tilde-folder"),
        pytest.param("C:x", "C:x", id="colon-name"),
        pytest.param("./a//b/./c", "a/b/c", id="normalised"),
        pytest.param("...", "...", id="three-dots-name"),
        pytest.param("..foo", "..foo", id="dotdot-prefix-name"),
        pytest.param("-rf", "-rf", id="dash-name"),
        pytest.param(" spaced name ", " spaced name ", id="spaces"),
        pytest.param("ünï/cødé.txt", "ünï/cødé.txt", id="unicode"),
    ],
)
def test_unusual_but_inside_names_allowed(files: SimpleNamespace, ws: Path, path: str, on_disk: str) -> None:
    files.write_file(path, "ok")
    assert (ws / on_disk).read_text() == "ok"
    assert files.read_file(path) == "ok"


def test_symlink_inside_pointing_inside_is_followed(files: SimpleNamespace, ws: Path) -> None:
    files.write_file("data/real.txt", "one")
    (ws / "alias.txt").symlink_to("data/real.txt")
    (ws / "data_link").symlink_to("data")
    assert files.read_file("alias.txt") == "one"
    assert files.read_file("data_link/real.txt") == "one"
    files.write_file("alias.txt", "two")
    files.edit_file("data_link/real.txt", old_string="two", new_string="three")
    assert (ws / "alias.txt").is_symlink()
    assert (ws / "data" / "real.txt").read_text() == "three"


def test_workspace_reached_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real_ws").mkdir()
    (tmp_path / "ws").symlink_to(tmp_path / "real_ws")
    files = make_files(tmp_path)
    files.write_file("a.txt", "x")
    assert (tmp_path / "real_ws" / "a.txt").read_text() == "x"
    assert files.list_files() == ["a.txt"]


@pytest.mark.anyio
async def test_a_read_cut_short_is_named_in_the_result_hint(tmp_path: Path) -> None:
    """A model parsing a 20,000-line JSONL read 5,000 lines and took the truncation line for bad data."""
    from harness import run_code, running

    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "big.jsonl").write_text("".join(f'{{"i": {i}}}\n' for i in range(12000)))
    whole = "[json.loads(x)['i'] for x in read_file('big.jsonl', max_lines=100000).splitlines()][-1]"
    paging = (
        "lines, page = [], read_file('big.jsonl', max_lines=5000)\n"
        "while page:\n"
        "    lines += page.splitlines()\n"
        "    page = read_file('big.jsonl', max_lines=5000, offset=len(lines))\n"
        "__result__ = len(lines)"
    )
    async with running(tmp_path / "ws") as runtime:
        cut = await run_code(runtime, f"__result__ = {whole}")
        window = await run_code(runtime, "__result__ = len(read_file('big.jsonl', max_lines=10, offset=11990))")
        paged = await run_code(runtime, paging)
        twice = await run_code(
            runtime, "a = read_file('big.jsonl', max_lines=10)\nb = read_file('big.jsonl', offset=10)"
        )
        head_and_tail = await run_code(
            runtime, "a = read_file('big.jsonl', max_lines=10)\nb = read_file('big.jsonl', offset=11000)"
        )
    assert cut["status"] == "ok" and cut["result"] == 4999, cut
    assert "read_file('big.jsonl') gave part of the file: lines 1-5000 of 12000" in cut["hint"]
    assert "max_lines is capped at 5000" in cut["hint"] and "more remain: read on with offset=5000" in cut["hint"]
    assert window["status"] == "ok"
    assert window["hint"] == "read_file('big.jsonl') gave lines 11991-12000 of 12000: to the end of the file."
    assert paged["result"] == 12000, paged  # the loop read on to the end: its "more remain" is taken back
    assert paged["hint"] == "read_file('big.jsonl') gave lines 10001-12000 of 12000: to the end of the file."
    assert twice["hint"].count("read_file(") == 1 and "lines 11-1010 of 12000" in twice["hint"]
    assert "lines 1-10 of 12000" in head_and_tail["hint"], head_and_tail  # the middle was never read
    assert "lines 11001-12000 of 12000: to the end of the file." in head_and_tail["hint"]


@pytest.mark.anyio
async def test_the_paging_loop_of_read_files_docstring_reads_every_line_of_a_log_with_carriage_returns(
    tmp_path: Path,
) -> None:
    """read_file counts lines by ``\\n`` only; the docstring's paging loop counted them with str.splitlines(),
    which also splits at ``\\r`` (a progress bar's log), ``\\x0c`` and U+2028, so each page moved the offset
    past lines never read: 3,000 of a 10,000-line log were silently skipped."""
    from harness import run_code, running

    from attp_server.model.docstrings import parse_docstring

    (tmp_path / "ws").mkdir()
    text = "".join(f"step {i}: 50%\rstep {i}: 100%\n" for i in range(10_000)) + "done"
    (tmp_path / "ws" / "train.log").write_text(text, newline="")
    example = parse_docstring(files_tools.FileTools.read_file.__doc__).examples[0]
    loop = example[example.index("\n", example.index("rest = ")) + 1 :].replace('"data/big.jsonl"', "'train.log'")
    assert loop.startswith(("text, page", "lines, page")), loop  # the paging loop, as the model reads it
    async with running(tmp_path / "ws") as runtime:
        read = "text" if loop.startswith("text") else "''.join(lines)"
        data = await run_code(runtime, f"{loop}\n__result__ = [{read}.count('100%'), {read}.endswith('done')]")
    assert data["status"] == "ok", data["error"]
    assert data["result"] == [10_000, True], "the loop skipped lines of the file"


@pytest.mark.anyio
async def test_a_whole_read_says_so_too(tmp_path: Path) -> None:
    """Issue 24: a complete 5,000-line log and one cut at 5,000 lines looked the same; now the hint tells."""
    from harness import run_code, running

    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "full.log").write_text("".join(f"line {i}\n" for i in range(5000)))
    (tmp_path / "ws" / "short.txt").write_text("one\ntwo\n")
    async with running(tmp_path / "ws") as runtime:
        whole = await run_code(runtime, "__result__ = len(read_file('full.log', max_lines=5000))")
        both = await run_code(runtime, "a = read_file('full.log', max_lines=5000)\n__result__ = read_file('short.txt')")
    assert whole["hint"] == "read_file('full.log') gave lines 1-5000 of 5000: the whole file."
    assert both["hint"] == (
        "read_file reached the end of 2 files; the last: read_file('short.txt') gave lines 1-2 of 2: the whole file."
    )
