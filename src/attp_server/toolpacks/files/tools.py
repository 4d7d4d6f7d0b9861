"""The four file tools. Their docstrings are what the model reads, so they are written for it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from attp_server.toolpack import ToolError, ToolFunction, current_call
from attp_server.toolpacks.files.workspace import Resolved, Workspace, os_errors

BINARY_SNIFF_BYTES = 8 * 1024
MAX_LIST_ENTRIES = 10_000

REPLACE_ARGS = ("old_string", "new_string")
RANGE_ARGS = ("start_line", "end_line", "new_content")
_READ_TO_END = "read_file:to-the-end"
"""The key of the one notice the reads that reached a file's end share (the hint says each read's lines)."""
_READ_COUNT = re.compile(r"read_file reached the end of (\d+) files")
_EDIT_MODES = (
    "edit_file has two modes: replace mode, edit_file(path, old_string=..., new_string=...), "
    "or line-range mode, edit_file(path, start_line=..., end_line=..., new_content=...)."
)


class FilesOptions(BaseModel):
    """Settings of the files toolpack (``[toolpacks.files]`` in the configuration)."""

    model_config = ConfigDict(extra="forbid")

    max_bytes: int = Field(default=10 * 1024 * 1024, gt=0)
    """Largest file that can be read, edited or written."""
    max_lines: int = Field(default=5000, gt=0)
    """Hard cap on the lines one read_file call returns, whatever max_lines the model asks for."""


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` kept. Only ``\\n`` splits, so numbering matches editors and grep."""
    lines = text.split("\n")
    last = lines.pop()
    return [line + "\n" for line in lines] + ([last] if last else [])


def decode_text(data: bytes, rel: str) -> str:
    """UTF-8 text, or BINARY_FILE: a NUL early on or any invalid UTF-8 means it is not text for us."""
    nul = data.find(b"\x00", 0, BINARY_SNIFF_BYTES)
    if nul >= 0:
        raise _binary_file(rel, f"NUL byte at offset {nul}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _binary_file(rel, f"invalid UTF-8 at byte offset {exc.start}") from None


def _binary_file(rel: str, why: str) -> ToolError:
    return ToolError(
        "BINARY_FILE",
        f"{rel!r} is a binary file ({why}); these tools only handle UTF-8 text files.",
        parameter_name="path",
        received=rel,
        expected="the path of a UTF-8 text file",
    )


class FileTools:
    """The tools, bound to one workspace root and its limits."""

    def __init__(self, workspace: Path, options: FilesOptions) -> None:
        self.workspace = Workspace(workspace)
        self.options = options

    def tools(self) -> list[ToolFunction]:
        return [self.read_file, self.write_file, self.edit_file, self.list_files]

    def _read_text(self, target: Resolved) -> str:
        return decode_text(self.workspace.read_bytes(target, self.options.max_bytes), target.rel)

    def _write_text(self, target: Resolved, text: str, parameter: str) -> tuple[int, bool]:
        data = text.encode("utf-8")
        if len(data) > self.options.max_bytes:
            raise ToolError(
                "FILE_TOO_LARGE",
                f"The new content of {target.rel!r} is {len(data)} bytes, over the limit of {self.options.max_bytes}.",
                parameter_name=parameter,
                expected=f"at most {self.options.max_bytes} bytes of UTF-8 text",
                solution="Split the content over several smaller files.",
            )
        return len(data), self.workspace.atomic_write(target, data)

    def read_file(self, path: str, max_lines: int = 1000, offset: int = 0) -> str:
        """Read a UTF-8 text file from the workspace: max_lines lines (5000 at most) from line offset (0-based).

        To read a whole file longer than that cap, read it in pages: while the last page ends with "\\n", call again
        with offset set to the lines read so far (text.count("\\n")); the last example below does this.

        Args:
            path: File path relative to the workspace root, e.g. "notes/todo.md".
            max_lines: Most lines to return (at least 1); the server caps it (5000 by default).
            offset: Number of lines to skip first (0-based: 0 is the first line), to continue a long file.

        Returns:
            The text of the lines, exactly as in the file and nothing else: "" once offset reaches
            the end. The result's hint says every time which lines were read of how many ("lines
            1-5000 of 5000: the whole file", or "more remain: read on with offset=5000"). Only "\\n"
            ends a line: count them with text.count("\\n"), not len(text.splitlines()), which also
            splits at "\\r".

        Raises:
            ToolError: FILE_NOT_FOUND (suggested_value holds the closest existing name),
                IS_A_DIRECTORY, BINARY_FILE (not UTF-8 text), FILE_TOO_LARGE,
                LINE_OUT_OF_RANGE (offset past the end), PATH_OUTSIDE_WORKSPACE, INVALID_PATH.

        Example:
            text = read_file("notes/todo.md")
            rest = read_file("logs/big.log", offset=1000, max_lines=200)
            text, page = "", read_file("data/big.jsonl", max_lines=5000)
            while page.endswith("\\n"):  # only the file's last page can end inside a line
                text += page
                page = read_file("data/big.jsonl", max_lines=5000, offset=text.count("\\n"))
            text += page
        """
        if max_lines < 1:
            raise ToolError(
                "INVALID_ARGUMENT",
                f"max_lines must be at least 1, got {max_lines}.",
                parameter_name="max_lines",
                received=str(max_lines),
                expected=f"an integer from 1 to {self.options.max_lines}",
            )
        if offset < 0:
            raise ToolError(
                "INVALID_ARGUMENT",
                f"offset must be 0 or more, got {offset}.",
                parameter_name="offset",
                received=str(offset),
                expected="a 0-based line offset, 0 for the start of the file",
                suggested_value="0",
            )
        target = self.workspace.resolve_file(path)
        lines = split_lines(self._read_text(target))
        total = len(lines)
        if offset > total:  # offset == total is the end of a paging loop: an empty page, not an error
            raise ToolError(
                "LINE_OUT_OF_RANGE",
                f"offset {offset} is past the end of {target.rel!r}, which has {total} lines.",
                parameter_name="offset",
                received=str(offset),
                expected=f"0 <= offset <= {total} ({total} gives an empty page)",
                suggested_value="0",
            )
        limit = min(max_lines, self.options.max_lines)
        end = min(offset + limit, total)
        # The text stays the file's own lines (a note inside it would be parsed as data); the hint says, every
        # time, which lines were read of how many. A paging loop that goes on from where it stopped to the end
        # takes back its "more remain", and the reads that reached the end share one notice.
        call = current_call()
        partial = f"read_file:{target.rel}"
        if end < total:
            capped = f" (max_lines is capped at {limit})" if max_lines > limit else ""
            call.notice(
                f"read_file({path!r}) gave part of the file: lines {offset + 1}-{end} of {total}{capped}; more "
                f"remain: read on with offset={end}",
                key=partial,
            )
            return "".join(lines[offset:end])
        if offset and (call.noticed(partial) or "").endswith(f"read on with offset={offset}"):
            call.withdraw(partial)
        previous = call.noticed(_READ_TO_END)
        same = previous is not None and f"read_file({path!r}) gave " in previous  # the same file read on
        if same and end == offset:  # a paging loop's last, empty page: the lines it read before say more
            return ""
        counted = _READ_COUNT.match(previous or "")
        files = 1 if previous is None else (int(counted.group(1)) if counted else 1) + (0 if same else 1)
        span = f"lines {offset + 1}-{end} of {total}" if end > offset else f"no lines (the file has {total})"
        whole = "the whole file" if offset == 0 else "to the end of the file"
        said = f"read_file({path!r}) gave {span}: {whole}."
        call.notice(
            said if files == 1 else f"read_file reached the end of {files} files; the last: {said}", key=_READ_TO_END
        )
        return "".join(lines[offset:end])

    def write_file(self, path: str, content: str) -> dict[str, str | int | bool]:
        """Create or overwrite a UTF-8 text file in the workspace with the given content.

        Missing parent folders are created. The write is atomic: readers see the old content or
        the new content, never a partly written file.

        Args:
            path: File path relative to the workspace root, e.g. "notes/todo.md".
            content: The complete new text of the file (replaces everything that was there).

        Returns:
            {"path": workspace-relative path, "bytes": size written, "created": True if the file is new}.

        Raises:
            ToolError: FILE_TOO_LARGE, IS_A_DIRECTORY, NOT_A_DIRECTORY (a parent folder is a file),
                NOT_A_REGULAR_FILE, PATH_OUTSIDE_WORKSPACE, INVALID_PATH.

        Example:
            write_file("notes/todo.md", "- buy milk\\n- call Bob\\n")
        """
        target = self.workspace.resolve_file(path)
        size, created = self._write_text(target, content, "content")
        return {"path": target.rel, "bytes": size, "created": created}

    def edit_file(  # noqa: PLR0917 - the signature the model is shown; both modes share one call
        self,
        path: str,
        old_string: str | None = None,
        new_string: str | None = None,
        start_line: int | None = None,
        end_line: int | None = None,
        new_content: str | None = None,
        replace_all: bool = False,
    ) -> dict[str, str | int]:
        """Change part of a text file: old_string → new_string or lines start_line..end_line → new_content ("" deletes).

        Use exactly one of two modes:
        - replace mode: old_string and new_string. old_string must occur exactly once in the file
          (copy it exactly, including indentation; add surrounding lines to make it unique), or
          give replace_all=True to replace every occurrence (a rename).
        - line-range mode: start_line, end_line and new_content. Lines start_line..end_line
          (1-based, inclusive) are replaced by new_content; "" deletes them. A newline is added to
          new_content if it lacks one, so the next line stays on its own line.

        Args:
            path: File path relative to the workspace root, e.g. "src/app.py".
            old_string: Replace mode: the exact text to find.
            new_string: Replace mode: the text to put in its place ("" to delete it).
            start_line: Line-range mode: first line to replace, 1-based.
            end_line: Line-range mode: last line to replace, inclusive.
            new_content: Line-range mode: the text replacing those lines.
            replace_all: Replace mode: replace every occurrence of old_string (at least one), not just one.

        Returns:
            {"path": ..., "mode": "replace" or "line_range", "lines_before": n, "lines_after": m,
            "replacements": how many places changed (replace mode)}.

        Raises:
            ToolError: OLD_STRING_NOT_FOUND, OLD_STRING_NOT_UNIQUE (names the count and line numbers),
                LINE_OUT_OF_RANGE, INVALID_EDIT_MODE (modes mixed or incomplete), FILE_NOT_FOUND,
                BINARY_FILE, FILE_TOO_LARGE, PATH_OUTSIDE_WORKSPACE.

        Example:
            edit_file("src/app.py", old_string="DEBUG = True", new_string="DEBUG = False")
            edit_file("config.toml", old_string="timeout =", new_string="timeout_s =", replace_all=True)
            edit_file("notes/todo.md", start_line=3, end_line=4, new_content="- done\\n")
        """
        arguments = zip(
            REPLACE_ARGS + RANGE_ARGS, (old_string, new_string, start_line, end_line, new_content), strict=True
        )
        given = [name for name, value in arguments if value is not None]
        _check_edit_mode(given)
        if replace_all and old_string is None:
            raise ToolError(
                "INVALID_EDIT_MODE",
                "replace_all=True belongs to replace mode (old_string and new_string); line-range mode replaces "
                "the lines it names.",
                parameter_name="replace_all",
                received=", ".join(given),
                solution="Drop replace_all, or use old_string and new_string.",
            )
        target = self.workspace.resolve_file(path)
        text = self._read_text(target)
        replacements = 0
        if old_string is not None and new_string is not None:
            if replace_all:
                new_text, replacements = _replace_every(
                    text, old_string, new_string, target.rel, self.options.max_bytes
                )
            else:
                new_text, replacements = _replace_once(text, old_string, new_string, target.rel), 1
            mode = "replace"
        else:
            assert start_line is not None and end_line is not None and new_content is not None  # checked above
            mode, new_text = "line_range", _replace_lines(text, start_line, end_line, new_content, target.rel)
        self._write_text(target, new_text, "new_string" if mode == "replace" else "new_content")
        result: dict[str, str | int] = {
            "path": target.rel,
            "mode": mode,
            "lines_before": len(split_lines(text)),
            "lines_after": len(split_lines(new_text)),
        }
        if mode == "replace":
            result["replacements"] = replacements
        return result

    def list_files(self, directory: str = ".", pattern: str = "*", recursive: bool = False) -> list[str]:
        """List the files in a workspace folder whose names match a glob pattern (paths relative to the workspace).

        Args:
            directory: Folder relative to the workspace root; "." is the root.
            pattern: Glob matched against the file name only, e.g. "*.py" or "test_*"
                (no "/": put the folder in `directory`).
            recursive: Also search all subfolders. Symbolic links to folders are not entered.

        Returns:
            Sorted workspace-relative paths. Without recursive, subfolders matching the pattern
            are included with a trailing "/"; with recursive, only files are listed.

        Raises:
            ToolError: TOO_MANY_FILES (over 10000 results: narrow the pattern or the folder),
                FILE_NOT_FOUND, NOT_A_DIRECTORY, INVALID_PATTERN, PATH_OUTSIDE_WORKSPACE.

        Example:
            list_files()
            list_files("src", pattern="*.py", recursive=True)
        """
        _check_pattern(pattern)
        folder = self.workspace.resolve(directory or ".", "directory")
        if not folder.real.is_dir():
            if not os.path.lexists(folder.real):
                raise self.workspace.not_found(folder, "directory")
            raise ToolError(
                "NOT_A_DIRECTORY",
                f"{folder.rel!r} is a file, not a directory.",
                parameter_name="directory",
                received=directory,
                solution=f"Call read_file({folder.rel!r}) to read it.",
            )
        prefix = PurePosixPath(folder.rel)
        found: list[str] = []
        for relative, is_dir in self._walk(folder.real, recursive):
            if not fnmatchcase(relative.name, pattern):
                continue
            found.append((prefix / relative).as_posix() + ("/" if is_dir else ""))
            if len(found) > MAX_LIST_ENTRIES:
                raise ToolError(
                    "TOO_MANY_FILES",
                    f"More than {MAX_LIST_ENTRIES} entries match {pattern!r} in {folder.rel!r}.",
                    parameter_name="pattern",
                    received=pattern,
                    expected="a narrower pattern or folder",
                    solution="Use a more specific pattern (e.g. '*.py'), a subfolder, or recursive=False.",
                )
        return sorted(found)

    def _walk(self, top: Path, recursive: bool) -> Iterator[tuple[PurePosixPath, bool]]:
        """(path relative to top, is a directory) of usable entries; nothing reached via an outside link."""
        if not recursive:
            with os_errors(self.workspace.relative(top), "directory"), os.scandir(top) as entries:
                kinds = [(PurePosixPath(e.name), self._kind(Path(e.path))) for e in entries]
            yield from ((name, kind == "dir") for name, kind in kinds if kind)
            return
        # followlinks=False: linked folders are neither escaped through nor listed twice.
        for dirpath, _dirnames, filenames in os.walk(top, followlinks=False):
            if current_call().remaining() == 0.0:  # the program's time is up: nobody waits for the rest of a huge tree
                raise ToolError(
                    "TIMEOUT",
                    "list_files() was stopped at the program's time limit, still walking the folders.",
                    parameter_name="directory",
                    solution="List a smaller folder, or use recursive=False and go down one folder at a time.",
                )
            base = PurePosixPath(Path(dirpath).relative_to(top).as_posix())
            yield from ((base / name, False) for name in filenames if self._kind(Path(dirpath, name)) == "file")

    def _kind(self, path: Path) -> str | None:
        """Return "file" or "dir" for entries a tool could use; None for special files and links leading out."""
        if path.is_symlink() and not self.workspace.contains(path):
            return None
        if path.is_dir():
            return "dir"
        return "file" if path.is_file() else None


MAX_PATTERN_CHARS = 255
"""A file-name glob longer than a file name can be is a mistake (and compiling one costs the server)."""

MAX_REPORTED_MATCHES = 1000


def _check_pattern(pattern: str) -> None:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(
            "INVALID_PATTERN",
            f"pattern is {len(pattern):,} characters; a file-name glob has at most {MAX_PATTERN_CHARS}.",
            parameter_name="pattern",
            received=pattern[:80] + "...",
            expected=f"a file-name glob of at most {MAX_PATTERN_CHARS} characters, such as '*.py'",
        )
    if pattern and "/" not in pattern:
        return
    suggestion = pattern.rsplit("/", 1)[-1] or "*"
    raise ToolError(
        "INVALID_PATTERN",
        f"pattern {pattern!r} is matched against file names only, so it cannot be empty or contain '/'.",
        parameter_name="pattern",
        received=pattern,
        expected="a file-name glob such as '*.py'",
        suggested_value=suggestion,
        solution="Put the folder in `directory` and use recursive=True to search subfolders.",
    )


def _check_edit_mode(given: list[str]) -> None:
    """Exactly one mode, with all of its arguments; otherwise say what is wrong and show both modes."""
    replace = [name for name in given if name in REPLACE_ARGS]
    line_range = [name for name in given if name in RANGE_ARGS]
    if (len(replace) == len(REPLACE_ARGS) and not line_range) or (len(line_range) == len(RANGE_ARGS) and not replace):
        return
    if replace and line_range:
        problem = f"arguments of both modes were given ({', '.join(given)})"
    elif replace:
        problem = f"replace mode also needs {' and '.join(n for n in REPLACE_ARGS if n not in given)}"
    elif line_range:
        problem = f"line-range mode also needs {' and '.join(n for n in RANGE_ARGS if n not in given)}"
    else:
        problem = "no edit was given"
    raise ToolError(
        "INVALID_EDIT_MODE",
        f"edit_file(): {problem}. {_EDIT_MODES}",
        received=", ".join(given) or "no edit arguments",
        expected="old_string + new_string, or start_line + end_line + new_content",
        solution="Give all the arguments of one mode and none of the other.",
    )


def _replace_once(text: str, old: str, new: str, rel: str) -> str:
    if not old:
        raise ToolError(
            "INVALID_ARGUMENT",
            "old_string is empty; it must be the exact text to replace.",
            parameter_name="old_string",
            received="''",
            solution="To write a whole file use write_file(); to insert lines use line-range mode.",
        )
    positions = _find_all(text, old, MAX_REPORTED_MATCHES + 1)
    if len(positions) == 1:
        return text[: positions[0]] + new + text[positions[0] + len(old) :]
    if not positions:
        raise ToolError(
            "OLD_STRING_NOT_FOUND",
            f"old_string occurs 0 times in {rel!r}.{_near_miss_hint(text, old)}",
            parameter_name="old_string",
            received=old if len(old) <= 200 else old[:200] + "...",
            solution=f"Call read_file({rel!r}) and copy the text exactly, including spaces, tabs and line breaks.",
        )
    # Line numbers of the first 20 only, counted in one pass: a per-match count would be quadratic.
    line_numbers, line, last = [], 1, 0
    for pos in positions[:20]:
        line += text.count("\n", last, pos)
        line_numbers.append(line)
        last = pos
    shown = ", ".join(map(str, line_numbers)) + (", ..." if len(positions) > 20 else "")
    times = f"more than {MAX_REPORTED_MATCHES}" if len(positions) > MAX_REPORTED_MATCHES else str(len(positions))
    raise ToolError(
        "OLD_STRING_NOT_UNIQUE",
        f"old_string occurs {times} times in {rel!r} (at lines {shown}); it must occur exactly once.",
        parameter_name="old_string",
        received=old if len(old) <= 200 else old[:200] + "...",
        solution="Include more surrounding lines in old_string to make it unique, or use line-range mode.",
    )


def _replace_every(text: str, old: str, new: str, rel: str, max_bytes: int) -> tuple[str, int]:
    """Every non-overlapping occurrence, left to right, as `str.replace` does; none is an error.

    The new length is checked before the new text is built: a short old_string repeated a million
    times, each replaced by a long new_string, must not build gigabytes in the server.
    """
    count = text.count(old) if old else 0
    if count == 0:
        _replace_once(text, old, new, rel)  # raises the precise error (empty old_string, or not found)
    size = len(text) + count * (len(new) - len(old))
    if size > max_bytes:  # characters: a lower bound of the UTF-8 bytes
        raise ToolError(
            "FILE_TOO_LARGE",
            f"replacing all {count} occurrences would make {rel!r} at least {size} bytes, over the limit of "
            f"{max_bytes}.",
            parameter_name="new_string",
            expected=f"at most {max_bytes} bytes of UTF-8 text",
            solution="Replace fewer occurrences, or use a shorter new_string.",
        )
    return text.replace(old, new), count


def _find_all(text: str, needle: str, limit: int) -> list[int]:
    """Start of each occurrence (at most `limit`), overlapping ones included: 'aa' in 'aaa' is ambiguous too."""
    positions: list[int] = []
    pos = text.find(needle)
    while pos >= 0 and len(positions) < limit:
        positions.append(pos)
        pos = text.find(needle, pos + 1)
    return positions


def _near_miss_hint(text: str, old: str) -> str:
    if "\r\n" in text and "\n" in old and "\r\n" not in old:
        return " The file uses Windows line endings (\\r\\n); old_string uses \\n."
    if old.strip() and old.strip() in text:
        return " It does occur without its leading/trailing whitespace: check the indentation."
    if old.lower() in text.lower():
        return " It does occur with different upper/lower case."
    return ""


def _replace_lines(text: str, start: int, end: int, new_content: str, rel: str) -> str:
    lines = split_lines(text)
    total = len(lines)
    if not 1 <= start <= end <= total:
        raise ToolError(
            "LINE_OUT_OF_RANGE",
            f"Lines {start}-{end} are not a valid range of {rel!r}, which has {total} lines.",
            parameter_name="start_line" if not 1 <= start <= total else "end_line",
            received=f"start_line={start}, end_line={end}",
            expected=f"1 <= start_line <= end_line <= {total}" if total else "a non-empty file",
            solution="Lines are numbered from 1 and end_line is inclusive."
            if total
            else "The file is empty; use write_file() to give it content.",
        )
    if new_content and not new_content.endswith("\n") and lines[end - 1].endswith("\n"):
        new_content += "\n"
    return "".join(lines[: start - 1]) + new_content + "".join(lines[end:])
