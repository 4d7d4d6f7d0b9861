"""The skills library: how-to guides (``SKILL.md``) with attached templates, examples and SOPs.

A skills directory holds one folder per skill::

    skills/
      skills.json                 optional index: {"skills": {name: {title, description, category, path}}}
      attp-programs/
        SKILL.md                  front matter (name, description, ...) + the guide in Markdown
        examples/batch.py         attached files: everything else under the folder
      toolpack-authoring/
        SKILL.md
        templates/pack_template.py

A skill is defined either by an entry of ``skills.json`` (whose ``path`` names its ``SKILL.md`` or its
folder) or by a ``<folder>/SKILL.md`` the index does not mention. Index fields win over front matter.
With several directories, the first one that defines a name wins; later duplicates are logged and
ignored. A library is a snapshot of the directories when loaded; file contents are read on request.

This module knows nothing of MCP or of the sandbox: the ``skills`` toolpack and the ``skill://``
resources are thin faces over `SkillLibrary`.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import re
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from attp_server.errors import AttpError, suggest

__all__ = [
    "BinarySkillFile",
    "PathOutsideSkill",
    "Skill",
    "SkillError",
    "SkillFileNotFound",
    "SkillFileTooLarge",
    "SkillLibrary",
    "SkillLibraryError",
    "SkillNotFound",
    "default_skills_dirs",
    "parse_front_matter",
]

logger = logging.getLogger(__name__)

INDEX_FILE = "skills.json"
SKILL_FILE = "SKILL.md"
MAX_FILE_BYTES = 1024 * 1024
"""Largest SKILL.md or attached file served: whatever is read lands in the model's context."""
MAX_ATTACHED_FILES = 500
_SNIFF_BYTES = 8 * 1024
_SKILL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_IGNORED_NAMES = frozenset({"__pycache__", "node_modules"})
_IGNORED_SUFFIXES = (".pyc", ".pyo", "~")


# ---------------------------------------------------------------- errors


class SkillLibraryError(AttpError):
    """A skills directory cannot be used at all (missing, or its skills.json is broken): a startup error."""


class SkillError(Exception):
    """A request to the library that cannot be served. ``code`` is the model-facing error code."""

    code: ClassVar[str] = "SKILL_ERROR"

    def __init__(self, message: str, *, suggestion: str | None = None, solution: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.suggestion = suggestion
        """The closest valid value (a skill name or a file path), if any."""
        self.solution = solution
        """What to do instead, in one sentence."""


class SkillNotFound(SkillError):
    """No skill has this name."""

    code = "SKILL_NOT_FOUND"

    def __init__(self, name: str, suggestion: str | None, known: Sequence[str] = ()) -> None:
        hint = f" Did you mean {suggestion!r}?" if suggestion else ""
        listed = ", ".join(known[:30]) + (", ..." if len(known) > 30 else "")
        available = f" Available skills: {listed}." if known else " The skills library is empty."
        super().__init__(
            f"There is no skill named {name!r}.{hint}{available}",
            suggestion=suggestion,
            solution="Call list_skills() to see every skill with its description.",
        )
        self.name = name
        self.known = tuple(known)


class SkillFileNotFound(SkillError):
    """The skill exists but has no such file (or the path names a folder)."""

    code = "SKILL_FILE_NOT_FOUND"

    def __init__(self, skill: str, path: str, message: str, suggestion: str | None = None) -> None:
        super().__init__(
            message,
            suggestion=suggestion,
            solution=f'use_skill("{skill}")["files"] lists the files attached to this skill.',
        )
        self.skill = skill
        self.path = path


class PathOutsideSkill(SkillError):
    """The path is absolute, uses ``..``, or leads out of the skill's folder through a symbolic link."""

    code = "PATH_OUTSIDE_SKILL"

    def __init__(self, skill: str, path: str, why: str) -> None:
        super().__init__(
            f"Path {path!r} is refused: {why}. Only files inside the folder of skill {skill!r} can be read.",
            solution="Pass a path relative to the skill's folder, as listed in its 'files', e.g. 'templates/x.py'.",
        )
        self.skill = skill
        self.path = path


class BinarySkillFile(SkillError):
    """The file is not UTF-8 text."""

    code = "BINARY_FILE"

    def __init__(self, skill: str, path: str, why: str) -> None:
        super().__init__(
            f"{path!r} of skill {skill!r} is a binary file ({why}); only UTF-8 text files can be read.",
            solution="Read one of the skill's text files instead (Markdown, code, JSON, TOML, ...).",
        )
        self.skill = skill
        self.path = path


class SkillFileTooLarge(SkillError):
    """The file is larger than the library serves."""

    code = "FILE_TOO_LARGE"

    def __init__(self, skill: str, path: str, limit: int) -> None:
        super().__init__(f"{path!r} of skill {skill!r} is larger than the {limit}-byte limit.")
        self.skill = skill
        self.path = path


# ---------------------------------------------------------------- skills


@dataclass(frozen=True)
class Skill:
    """One skill: its metadata, its ``SKILL.md`` and the files attached to it."""

    name: str
    title: str
    description: str
    category: str | None
    folder: Path
    """The skill's folder, fully resolved; every attached file lies inside it."""
    source: Path
    """Its ``SKILL.md`` (inside `folder`)."""
    files: tuple[str, ...]
    """Attached files: sorted POSIX paths relative to `folder`, without the SKILL.md itself."""

    def summary(self) -> dict[str, Any]:
        """The index entry: name, title, description, category and files."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "category": self.category,
            "files": list(self.files),
        }

    def content(self) -> str:
        """The text of ``SKILL.md``, front matter included."""
        rel = self.source.relative_to(self.folder).as_posix()
        return _decode(self.name, rel, _read_regular(self.name, rel, self.source, MAX_FILE_BYTES))


class SkillLibrary:
    """The skills of one or more directories, by name. Read-only once loaded."""

    def __init__(self, skills: Iterable[Skill] = ()) -> None:
        self._skills: dict[str, Skill] = {}
        for skill in skills:
            self._skills.setdefault(skill.name, skill)

    @classmethod
    def load(cls, dirs: Sequence[Path]) -> SkillLibrary:
        """Read every directory, first one first; a name already defined by an earlier one is skipped.

        Raises:
            SkillLibraryError: a directory does not exist, or its skills.json is not a valid index.
        """
        found: dict[str, Skill] = {}
        for directory in dirs:
            for skill in _load_directory(Path(directory)):
                earlier = found.get(skill.name)
                if earlier is not None:
                    logger.warning(
                        "skill %r in %s is ignored: %s already defines it", skill.name, skill.folder, earlier.folder
                    )
                    continue
                found[skill.name] = skill
        return cls(found.values())

    def __len__(self) -> int:
        return len(self._skills)

    def __contains__(self, name: object) -> bool:
        return name in self._skills

    def names(self) -> list[str]:
        return sorted(self._skills)

    def skills(self) -> list[Skill]:
        """Every skill, sorted by name."""
        return [self._skills[name] for name in self.names()]

    def index(self) -> list[dict[str, Any]]:
        """Every skill's index entry (name, title, description, category, files), sorted by name."""
        return [skill.summary() for skill in self.skills()]

    def categories(self) -> list[str]:
        return sorted({skill.category for skill in self._skills.values() if skill.category})

    def get(self, name: str) -> Skill:
        """The skill with this name. Case, ``_`` and ``-`` are forgiven when that leaves one match.

        Raises:
            SkillNotFound: with the closest name as ``suggestion``.
        """
        skill = self._skills.get(name)
        if skill is not None:
            return skill
        wanted = _loose(name)
        matches = [s for n, s in self._skills.items() if _loose(n) == wanted]
        if len(matches) == 1:
            return matches[0]
        raise SkillNotFound(name, suggest(name, self._skills), self.names())

    def read_file(self, name: str, path: str) -> str:
        """The text of a file inside a skill's folder (``path`` relative to it; ``SKILL.md`` works too).

        Raises:
            SkillNotFound, PathOutsideSkill, SkillFileNotFound, BinarySkillFile, SkillFileTooLarge.
        """
        skill = self.get(name)
        rel = _normalize(skill.name, path)
        real = Path(os.path.realpath(skill.folder / rel))
        if not real.is_relative_to(skill.folder):
            raise PathOutsideSkill(skill.name, path, "it goes through a symbolic link that points outside the skill")
        return _decode(skill.name, rel, _read_regular(skill.name, rel, real, MAX_FILE_BYTES, skill))


def default_skills_dirs() -> list[Path]:
    """The bundled library: ``attp_server/bundled_skills``, in a wheel and a checkout alike (``src/attp_server``).

    Found beside the installed package, never by a top-level name, so an unrelated ``skills`` package in
    site-packages is never mistaken for the library.
    """
    bundled = Path(__file__).resolve().parent.parent / "bundled_skills"
    return [bundled] if bundled.is_dir() else []


# ---------------------------------------------------------------- loading


@dataclass(frozen=True)
class _Entry:
    """What the index says about one skill (all optional but the name)."""

    name: str
    title: str | None = None
    description: str | None = None
    category: str | None = None
    path: str | None = None


def _load_directory(directory: Path) -> Iterator[Skill]:
    if not directory.is_dir():
        raise SkillLibraryError(f"skills directory {directory} does not exist or is not a directory")
    root = Path(os.path.realpath(directory))
    seen: dict[str, Path] = {}
    claimed: set[Path] = set()
    for entry in _read_index(directory / INDEX_FILE):
        skill = _from_entry(root, entry)
        if skill is not None:
            claimed.add(skill.folder)
            yield from _unique(skill, seen)
    try:
        folders = sorted(p for p in root.iterdir() if (p / SKILL_FILE).is_file())
    except OSError as exc:
        raise SkillLibraryError(f"skills directory {directory} cannot be listed: {exc}") from exc
    for folder in folders:
        real = Path(os.path.realpath(folder))
        if real in claimed or folder.name.startswith("."):
            continue
        if not _inside(real / SKILL_FILE, real):
            logger.warning("skill folder %s: its SKILL.md is a link leading out of the folder; skipped", folder)
            continue
        skill = _make_skill(folder.name, _Entry(name=folder.name), real, real / SKILL_FILE, from_index=False)
        if skill is not None:
            yield from _unique(skill, seen)


def _unique(skill: Skill, seen: dict[str, Path]) -> Iterator[Skill]:
    if skill.name in seen:
        logger.warning("skill %r in %s is ignored: %s already defines it", skill.name, skill.folder, seen[skill.name])
        return
    seen[skill.name] = skill.folder
    yield skill


def _read_index(path: Path) -> list[_Entry]:
    """The entries of a skills.json, in file order; an absent file is an empty index."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillLibraryError(f"skills index {path} cannot be read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise SkillLibraryError(f"skills index {path} is not valid JSON: {exc}") from exc
    skills = data.get("skills") if isinstance(data, dict) else None
    if not isinstance(skills, dict):
        raise SkillLibraryError(
            f'skills index {path} must be an object {{"skills": {{name: {{title, description, category, path}}}}}}'
        )
    entries = []
    for name, fields in skills.items():
        if not isinstance(fields, dict):
            logger.warning("skills index %s: entry %r is not an object; skipped", path, name)
            continue
        values = {key: fields.get(key) for key in ("title", "description", "category", "path")}
        wrong = [key for key, value in values.items() if value is not None and not isinstance(value, str)]
        if wrong:
            logger.warning("skills index %s: entry %r has non-string %s; skipped", path, name, ", ".join(wrong))
            continue
        entries.append(_Entry(name=name, **values))
    return entries


def _from_entry(root: Path, entry: _Entry) -> Skill | None:
    """Resolve an index entry's path (a SKILL.md, or a folder holding one) inside the directory."""
    raw = entry.path or f"{entry.name}/{SKILL_FILE}"
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if raw.startswith("/") or "\\" in raw or ".." in parts or not parts:
        logger.warning("skill %r: index path %r must be relative to the skills directory; skipped", entry.name, raw)
        return None
    if root.joinpath(*parts).is_dir():
        parts.append(SKILL_FILE)
    if len(parts) < 2:
        logger.warning(
            "skill %r: index path %r must name a file in the skill's own folder, e.g. %r; skipped",
            entry.name,
            raw,
            f"{entry.name}/{SKILL_FILE}",
        )
        return None
    folder = Path(os.path.realpath(root.joinpath(*parts[:-1])))
    source = folder / parts[-1]
    if not source.is_file():
        logger.warning("skill %r: %s does not exist; skipped", entry.name, root.joinpath(*parts))
        return None
    if not _inside(source, folder):
        logger.warning("skill %r: %s is a link leading out of the skill's folder; skipped", entry.name, source)
        return None
    return _make_skill(entry.name, entry, folder, source, from_index=True)


def _make_skill(name: str, entry: _Entry, folder: Path, source: Path, *, from_index: bool) -> Skill | None:
    try:
        text = _decode(name, source.name, _read_regular(name, source.name, source, MAX_FILE_BYTES))
    except SkillError as exc:
        logger.warning("skill %r: %s; skipped", name, exc.message)
        return None
    meta, body = parse_front_matter(text)
    declared = meta.get("name")
    if not from_index and declared and declared != name:
        if _SKILL_NAME.match(declared):
            logger.info("skill folder %s is named %r by its front matter", folder, declared)
            name = declared
        else:
            logger.warning("skill folder %s: front matter name %r is not usable; %r is used", folder, declared, name)
    if not _SKILL_NAME.match(name):
        logger.warning(
            "skill %r in %s is skipped: a name is letters, digits, '-', '_' and '.', at most 128", name, folder
        )
        return None
    title = entry.title or meta.get("title") or meta.get("metadata.title") or _first_heading(body) or name
    description = entry.description or meta.get("description") or _first_paragraph(body)
    category = entry.category or meta.get("category") or meta.get("metadata.category") or None
    return Skill(
        name=name,
        title=title,
        description=description,
        category=category,
        folder=folder,
        source=source,
        files=_attached_files(name, folder, source),
    )


def _attached_files(name: str, folder: Path, source: Path) -> tuple[str, ...]:
    """Regular files under the folder, except the SKILL.md, hidden entries, caches and links leading out."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not _ignored(d) and _inside(Path(dirpath, d), folder))
        for filename in sorted(filenames):
            path = Path(dirpath, filename)
            if _ignored(filename) or path == source or not _inside(path, folder) or not path.is_file():
                continue
            found.append(path.relative_to(folder).as_posix())
            if len(found) >= MAX_ATTACHED_FILES:
                logger.warning("skill %r: only the first %d attached files are listed", name, MAX_ATTACHED_FILES)
                return tuple(sorted(found))
    return tuple(sorted(found))


def _ignored(name: str) -> bool:
    return name.startswith(".") or name in _IGNORED_NAMES or name.endswith(_IGNORED_SUFFIXES)


def _inside(path: Path, folder: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(folder)


def _loose(name: str) -> str:
    return re.sub(r"[\s_-]+", "-", name.strip().lower())


# ---------------------------------------------------------------- reading


def _normalize(skill: str, path: str) -> str:
    """Lexically check a skill-relative path; refusals come before any I/O."""
    if "\x00" in path:
        raise PathOutsideSkill(skill, path.replace("\x00", "\\x00"), "it contains a NUL byte")
    if path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path):
        raise PathOutsideSkill(skill, path, "it is an absolute path")
    parts = path.replace("\\", "/").split("/")
    if ".." in parts:
        raise PathOutsideSkill(skill, path, "it contains a '..' component")
    rel = "/".join(p for p in parts if p not in ("", "."))
    if not rel:
        raise SkillFileNotFound(skill, path, f"{path!r} names the skill's folder, not a file.")
    return rel


def _read_regular(skill: str, rel: str, real: Path, limit: int, owner: Skill | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; special files are never opened."""
    try:
        st = os.stat(real)
    except OSError:
        raise _not_found(skill, rel, owner) from None
    if stat.S_ISDIR(st.st_mode):
        inside = [f for f in owner.files if f.startswith(rel + "/")] if owner else []
        listing = f" Its files: {', '.join(inside[:20])}." if inside else ""
        raise SkillFileNotFound(
            skill, rel, f"{rel!r} is a folder of skill {skill!r}, not a file.{listing}", inside[0] if inside else None
        )
    if not stat.S_ISREG(st.st_mode):
        raise SkillFileNotFound(skill, rel, f"{rel!r} of skill {skill!r} is not a regular file.")
    if st.st_size > limit:
        raise SkillFileTooLarge(skill, rel, limit)
    try:
        # O_NONBLOCK: a FIFO swapped in after stat() must not hang the server.
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise SkillFileNotFound(skill, rel, f"{rel!r} of skill {skill!r} is not a regular file.")
            data = handle.read(limit + 1)
    except OSError as exc:
        raise SkillFileNotFound(skill, rel, f"{rel!r} of skill {skill!r} cannot be read: {exc.strerror}.") from exc
    if len(data) > limit:
        raise SkillFileTooLarge(skill, rel, limit)
    return data


def _not_found(skill: str, rel: str, owner: Skill | None) -> SkillFileNotFound:
    files = list(owner.files) if owner else []
    closest = _closest_file(rel, files)
    hint = f" Did you mean {closest!r}?" if closest else ""
    listing = f" Its files: {', '.join(files[:20])}{', ...' if len(files) > 20 else ''}." if files else ""
    if owner is not None and not files:
        listing = " It has no attached files."
    return SkillFileNotFound(skill, rel, f"Skill {skill!r} has no file {rel!r}.{hint}{listing}", closest)


def _closest_file(rel: str, files: Sequence[str]) -> str | None:
    """The attached file most like `rel`: by whole path, else by file name."""
    closest = suggest(rel, files)
    if closest is None:
        by_name: dict[str, str] = {}
        for f in files:
            by_name.setdefault(PurePosixPath(f).name, f)
        name = suggest(PurePosixPath(rel).name, by_name)
        closest = by_name[name] if name else None
    return closest


def _decode(skill: str, rel: str, data: bytes) -> str:
    nul = data.find(b"\x00", 0, _SNIFF_BYTES)
    if nul >= 0:
        raise BinarySkillFile(skill, rel, f"NUL byte at offset {nul}")
    try:
        text = codecs.decode(data, "utf-8")
    except UnicodeDecodeError as exc:
        raise BinarySkillFile(skill, rel, f"invalid UTF-8 at byte offset {exc.start}") from None
    return text.removeprefix("\ufeff")


# ---------------------------------------------------------------- front matter


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """Split a Markdown text into its ``---`` front matter fields and its body.

    The simple YAML that SKILL.md files use: ``key: value`` lines with plain, ``'single'`` or
    ``"double"`` quoted values, plain values continued on indented lines, ``>`` (folded) and ``|``
    (literal) block scalars, and one level of nesting (``metadata:`` then indented ``key: value``
    lines, returned as ``"metadata.key"``; ``- item`` lists are joined with ``", "``). Comments and
    blank lines are skipped. Without front matter, the fields are empty and the body is the text.
    """
    lines = text.removeprefix("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        return {}, text
    body = "\n".join(lines[end + 1 :])
    if text.endswith("\n") and body:
        body += "\n"
    return _parse_mapping(lines[1:end]), body


_KEY = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_.-]*)\s*:(?:\s+(.*))?\s*$")


def _parse_mapping(lines: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#") or line[0] in " \t":
            continue
        match = _KEY.match(line)
        if match is None:
            continue
        key, raw = match.group(1), (match.group(2) or "").strip()
        block: list[str] = []
        while i < len(lines) and (not lines[i].strip() or lines[i][0] in " \t"):
            block.append(lines[i])
            i += 1
        if raw[:1] in ("|", ">"):
            fields[key] = _block_scalar(raw[0], block)
        elif raw:
            fields[key] = _scalar(" ".join([raw, *(b.strip() for b in block if b.strip())]))
        else:
            fields.update(_nested(key, block))
    return fields


def _block_scalar(style: str, block: list[str]) -> str:
    """A ``|`` or ``>`` block: dedented; ``>`` folds lines into paragraphs. Trailing newlines dropped."""
    indents = [len(b) - len(b.lstrip()) for b in block if b.strip()]
    cut = min(indents, default=0)
    rows = [b[cut:].rstrip() for b in block]
    if style == "|":
        return "\n".join(rows).strip("\n")
    paragraphs: list[str] = []
    current: list[str] = []
    for row in rows:
        if row and not row[0].isspace():
            current.append(row)
            continue
        if current:
            paragraphs.append(" ".join(current))
            current = []
        if row:  # more-indented lines are kept as they are, as in YAML
            paragraphs.append(row)
    if current:
        paragraphs.append(" ".join(current))
    return "\n".join(paragraphs).strip("\n")


def _nested(key: str, block: list[str]) -> dict[str, str]:
    items: list[str] = []
    fields: dict[str, str] = {}
    for row in (b.strip() for b in block):
        if not row or row.startswith("#"):
            continue
        if row.startswith("- ") or row == "-":
            items.append(_scalar(row[1:].strip()))
            continue
        match = _KEY.match(row)
        if match:
            fields[f"{key}.{match.group(1)}"] = _scalar((match.group(2) or "").strip())
    if items:
        fields[key] = ", ".join(items)
    return fields


def _scalar(raw: str) -> str:
    """A one-line YAML scalar: quotes removed (with their escapes), a trailing `` # comment`` dropped."""
    if raw.startswith('"'):
        out: list[str] = []
        i = 1
        escapes = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/", "0": "\x00"}
        while i < len(raw):
            char = raw[i]
            if char == "\\" and i + 1 < len(raw):
                out.append(escapes.get(raw[i + 1], raw[i + 1]))
                i += 2
                continue
            if char == '"':
                break
            out.append(char)
            i += 1
        return "".join(out)
    if raw.startswith("'"):
        closing = re.match(r"'((?:[^']|'')*)'", raw)
        inner = closing.group(1) if closing else raw[1:]
        return inner.replace("''", "'")
    return re.split(r"\s+#", raw, maxsplit=1)[0].strip()


def _first_heading(body: str) -> str | None:
    for line in body.splitlines():
        if line.startswith("# "):
            return line[2:].strip() or None
    return None


def _first_paragraph(body: str) -> str:
    """The first paragraph of prose (not a heading, fence, list or table), on one line."""
    paragraph: list[str] = []
    for line in body.splitlines():
        stripped = line.strip()
        if not stripped:
            if paragraph:
                break
            continue
        if stripped.startswith(("#", "```", "|", "<!--")):
            if paragraph:
                break
            continue
        paragraph.append(stripped)
    return " ".join(paragraph)
