"""The skills library: indexes, front matter, precedence, attached files, refusals, the bundled library."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from attp_server.model import skills as skills_module
from attp_server.model.skills import (
    BinarySkillFile,
    PathOutsideSkill,
    SkillError,
    SkillFileNotFound,
    SkillFileTooLarge,
    SkillLibrary,
    SkillLibraryError,
    SkillNotFound,
    default_skills_dirs,
    parse_front_matter,
)

REPO = Path(__file__).resolve().parent.parent
BUNDLED_DIR = REPO / "src" / "attp_server" / "bundled_skills"
BUNDLED = ["attp-programs", "memory-tidy", "skill-authoring", "toolpack-authoring"]


def make_skill(
    root: Path,
    folder: str,
    front: str | None = None,
    body: str = "# Guide\n\nDo it.\n",
    files: dict[str, str | bytes] | None = None,
) -> Path:
    """Write root/folder/SKILL.md (with `front` as its front matter) and the attached files."""
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    head = f"---\n{front}\n---\n" if front is not None else ""
    (path / "SKILL.md").write_text(head + body, encoding="utf-8")
    for name, content in (files or {}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    return path


def write_index(root: Path, skills: dict[str, dict[str, Any]]) -> None:
    (root / "skills.json").write_text(json.dumps({"skills": skills}), encoding="utf-8")


@pytest.fixture
def lib_dir(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    make_skill(
        root,
        "report-writing",
        "name: report-writing\ndescription: Write quarterly reports.",
        "# Quarterly reports\n\nSteps.\n",
        {"templates/report.md": "# Report\n", "examples/q1.md": "# Q1\n", "sop/checks.md": "- [ ] totals\n"},
    )
    make_skill(root, "plain", "name: plain\ndescription: A skill without files.")
    return root


# --- front matter -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        pytest.param("name: x\ndescription: Plain text.", {"name": "x", "description": "Plain text."}, id="plain"),
        pytest.param(
            'description: "Use it: when \\"quoted\\"\\n"',
            {"description": 'Use it: when "quoted"\n'},
            id="double-quoted",
        ),
        pytest.param("description: 'it''s: fine'", {"description": "it's: fine"}, id="single-quoted"),
        pytest.param(
            "description: >\n  Folded over\n  two lines.\n\n  New paragraph.\nname: y",
            {"description": "Folded over two lines.\nNew paragraph.", "name": "y"},
            id="folded-block",
        ),
        pytest.param(
            "description: >-\n    Indented more\n    than usual.",
            {"description": "Indented more than usual."},
            id="folded-strip",
        ),
        pytest.param("description: |\n  line one\n  line two", {"description": "line one\nline two"}, id="literal"),
        pytest.param(
            "description: a plain value\n  continued on the next line",
            {"description": "a plain value continued on the next line"},
            id="plain-continued",
        ),
        pytest.param(
            'metadata:\n  category: reports\n  title: "Quarterly"',
            {"metadata.category": "reports", "metadata.title": "Quarterly"},
            id="nested",
        ),
        pytest.param(
            "allowed-tools:\n  - read_file\n  - 'write_file'", {"allowed-tools": "read_file, write_file"}, id="list"
        ),
        pytest.param(
            "# a comment\nname: z # trailing comment\nurl: http://x#frag",
            {"name": "z", "url": "http://x#frag"},
            id="comments",
        ),
        pytest.param("name: x\nnot a key line\ndescription: d", {"name": "x", "description": "d"}, id="junk-line"),
    ],
)
def test_front_matter_fields(front: str, expected: dict[str, str]) -> None:
    fields, body = parse_front_matter(f"---\n{front}\n---\n# Body\n")
    assert fields == expected
    assert body == "# Body\n"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("# No front matter\n", id="none"),
        pytest.param("---\nname: x\n# never closed\n", id="unclosed"),
        pytest.param("", id="empty"),
    ],
)
def test_text_without_front_matter_is_all_body(text: str) -> None:
    assert parse_front_matter(text) == ({}, text)


def test_front_matter_after_byte_order_mark() -> None:
    assert parse_front_matter("\ufeff---\nname: x\n---\nbody\n") == ({"name": "x"}, "body\n")


# --- loading: front matter, index, precedence ----------------------------------------------------


def test_index_from_front_matter(lib_dir: Path) -> None:
    library = SkillLibrary.load([lib_dir])
    assert library.index() == [
        {"name": "plain", "title": "Guide", "description": "A skill without files.", "category": None, "files": []},
        {
            "name": "report-writing",
            "title": "Quarterly reports",
            "description": "Write quarterly reports.",
            "category": None,
            "files": ["examples/q1.md", "sop/checks.md", "templates/report.md"],
        },
    ]


def test_title_category_and_description_fallbacks(tmp_path: Path) -> None:
    make_skill(tmp_path, "a", "name: a\ntitle: Explicit\ncategory: ops\ndescription: >\n  Folded\n  text.")
    make_skill(
        tmp_path, "b", "name: b\nmetadata:\n  category: docs", "# Heading B\n\nFirst paragraph\nwraps.\n\nMore.\n"
    )
    make_skill(tmp_path, "c", None, "No heading at all.\n")
    summary = {s["name"]: s for s in SkillLibrary.load([tmp_path]).index()}
    assert (summary["a"]["title"], summary["a"]["category"], summary["a"]["description"]) == (
        "Explicit",
        "ops",
        "Folded text.",
    )
    assert (summary["b"]["title"], summary["b"]["category"]) == ("Heading B", "docs")
    assert summary["b"]["description"] == "First paragraph wraps."
    assert (summary["c"]["title"], summary["c"]["description"]) == ("c", "No heading at all.")


def test_index_from_skills_json_wins_over_front_matter(lib_dir: Path) -> None:
    write_index(
        lib_dir,
        {
            "reports": {
                "title": "Report writing",
                "description": "From the index.",
                "category": "docs",
                "path": "report-writing/SKILL.md",
            },
            "by-folder": {"description": "Path names the folder.", "path": "plain"},
        },
    )
    library = SkillLibrary.load([lib_dir])
    # The index names both folders, so neither is found again under its front matter name.
    assert library.names() == ["by-folder", "reports"]
    reports = library.get("reports")
    assert (reports.title, reports.description, reports.category) == ("Report writing", "From the index.", "docs")
    assert reports.files == ("examples/q1.md", "sop/checks.md", "templates/report.md")
    assert library.get("by-folder").title == "Guide"  # not in the index: from the SKILL.md heading


def test_index_entry_without_path_defaults_to_its_folder(lib_dir: Path) -> None:
    write_index(lib_dir, {"plain": {"category": "misc"}})
    library = SkillLibrary.load([lib_dir])
    assert library.get("plain").category == "misc"
    assert library.get("plain").description == "A skill without files."
    assert library.categories() == ["misc"]


@pytest.mark.parametrize(
    ("entry", "log"),
    [
        pytest.param({"path": "missing/SKILL.md"}, "does not exist", id="missing"),
        pytest.param({"path": "../outside/SKILL.md"}, "must be relative", id="dotdot"),
        pytest.param({"path": "/etc/SKILL.md"}, "must be relative", id="absolute"),
        pytest.param({"path": "flat.md"}, "own folder", id="flat-file"),
        pytest.param({"title": 3}, "non-string title", id="bad-type"),
    ],
)
def test_bad_index_entries_are_skipped_with_a_warning(
    lib_dir: Path, caplog: pytest.LogCaptureFixture, entry: dict[str, Any], log: str
) -> None:
    (lib_dir / "flat.md").write_text("# flat\n")
    (lib_dir.parent / "outside").mkdir()
    (lib_dir.parent / "outside" / "SKILL.md").write_text("# outside\n")
    write_index(lib_dir, {"broken": entry})
    with caplog.at_level(logging.WARNING, logger="attp_server.model.skills"):
        library = SkillLibrary.load([lib_dir])
    assert "broken" not in library
    assert library.names() == ["plain", "report-writing"]
    assert log in caplog.text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("{not json", "not valid JSON", id="not-json"),
        pytest.param('{"skill": {}}', '"skills"', id="no-skills-key"),
        pytest.param('["a"]', '"skills"', id="not-an-object"),
    ],
)
def test_broken_index_is_a_startup_error(lib_dir: Path, content: str, message: str) -> None:
    (lib_dir / "skills.json").write_text(content)
    with pytest.raises(SkillLibraryError, match=message):
        SkillLibrary.load([lib_dir])


def test_missing_directory_is_a_startup_error(tmp_path: Path) -> None:
    with pytest.raises(SkillLibraryError, match="does not exist"):
        SkillLibrary.load([tmp_path / "nope"])


def test_front_matter_name_names_the_skill(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    make_skill(tmp_path, "Folder Name", "name: tidy-name\ndescription: d")
    make_skill(tmp_path, "bad-front", "name: has space\ndescription: d")
    make_skill(tmp_path, "bad folder", "description: no usable name")
    with caplog.at_level(logging.WARNING, logger="attp_server.model.skills"):
        library = SkillLibrary.load([tmp_path])
    assert library.names() == ["bad-front", "tidy-name"]
    assert "'bad folder'" in caplog.text


def test_several_dirs_first_definition_wins(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    make_skill(first, "shared", "name: shared\ndescription: from first")
    make_skill(second, "shared", "name: shared\ndescription: from second")
    make_skill(second, "only-second", "name: only-second\ndescription: d")
    with caplog.at_level(logging.WARNING, logger="attp_server.model.skills"):
        library = SkillLibrary.load([first, second])
    assert library.names() == ["only-second", "shared"]
    assert library.get("shared").description == "from first"
    assert "'shared'" in caplog.text and str(second) in caplog.text
    assert SkillLibrary.load([second, first]).get("shared").description == "from second"


def test_duplicate_name_within_one_dir_keeps_the_index_entry(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    make_skill(tmp_path, "indexed", "name: indexed\ndescription: d")
    make_skill(tmp_path, "other", "name: dup\ndescription: from the folder")
    write_index(tmp_path, {"dup": {"description": "from the index", "path": "indexed/SKILL.md"}})
    with caplog.at_level(logging.WARNING, logger="attp_server.model.skills"):
        library = SkillLibrary.load([tmp_path])
    assert library.get("dup").description == "from the index"
    assert "already defines it" in caplog.text


def test_empty_directory_and_no_directory(tmp_path: Path) -> None:
    assert SkillLibrary.load([tmp_path]).index() == []
    assert len(SkillLibrary.load([])) == 0


# --- attached files -----------------------------------------------------------------------------


def test_attached_files_skip_hidden_caches_and_links_leading_out(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    files: dict[str, str | bytes] = {
        "templates/a.py": "x = 1\n",
        "templates/deep/b.md": "b\n",
        "examples/img.png": b"\x89PNG\r\n\x1a\n\x00\x00",
        ".hidden": "h",
        "notes/.draft.md.swp": "s",
        "__pycache__/x.cpython-311.pyc": b"\x00",
        "examples/old.pyc": b"\x00",
    }
    folder = make_skill(tmp_path / "lib", "s", "name: s\ndescription: d", files=files)
    os.symlink(secret, folder / "leak.txt")
    os.symlink(folder / "templates" / "a.py", folder / "alias.py")
    os.symlink(tmp_path, folder / "escape")
    skill = SkillLibrary.load([tmp_path / "lib"]).get("s")
    assert skill.files == ("alias.py", "examples/img.png", "templates/a.py", "templates/deep/b.md")


def test_index_path_may_name_another_markdown_file(tmp_path: Path) -> None:
    folder = make_skill(tmp_path, "s", None, files={"extra.md": "# extra\n"})
    (folder / "GUIDE.md").write_text("---\nname: ignored\n---\n# The guide\n")
    write_index(tmp_path, {"s": {"path": "s/GUIDE.md"}})
    skill = SkillLibrary.load([tmp_path]).get("s")
    assert skill.title == "The guide"
    assert skill.files == ("SKILL.md", "extra.md")
    assert skill.content().startswith("---\nname: ignored")


# --- get: names and suggestions -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("asked", "found"),
    [
        pytest.param("report-writing", "report-writing", id="exact"),
        pytest.param("report_writing", "report-writing", id="underscore"),
        pytest.param("Report Writing", "report-writing", id="case-and-space"),
    ],
)
def test_get_forgives_case_and_separators(lib_dir: Path, asked: str, found: str) -> None:
    assert SkillLibrary.load([lib_dir]).get(asked).name == found


@pytest.mark.parametrize(
    ("asked", "suggestion"),
    [
        pytest.param("report-writng", "report-writing", id="typo"),
        pytest.param("plane", "plain", id="close"),
        pytest.param("zzzzzz", None, id="nothing-close"),
    ],
)
def test_unknown_skill_suggests_the_closest_name(lib_dir: Path, asked: str, suggestion: str | None) -> None:
    with pytest.raises(SkillNotFound) as info:
        SkillLibrary.load([lib_dir]).get(asked)
    assert (info.value.name, info.value.suggestion, info.value.code) == (asked, suggestion, "SKILL_NOT_FOUND")
    assert "plain, report-writing" in info.value.message
    assert info.value.solution and "list_skills()" in info.value.solution


def test_unknown_skill_in_an_empty_library() -> None:
    with pytest.raises(SkillNotFound, match="library is empty") as info:
        SkillLibrary().get("anything")
    assert info.value.suggestion is None


# --- read_file ----------------------------------------------------------------------------------


def test_read_file_returns_text(lib_dir: Path) -> None:
    library = SkillLibrary.load([lib_dir])
    assert library.read_file("report-writing", "templates/report.md") == "# Report\n"
    assert library.read_file("report-writing", "./templates//report.md") == "# Report\n"
    assert library.read_file("report-writing", "SKILL.md").startswith("---\nname: report-writing")
    assert library.get("report-writing").content() == library.read_file("report-writing", "SKILL.md")


@pytest.fixture
def hostile(tmp_path: Path) -> SkillLibrary:
    (tmp_path / "secret.txt").write_text("secret")
    folder = make_skill(
        tmp_path / "lib",
        "s",
        "name: s\ndescription: d",
        files={"templates/a.py": "x = 1\n", "blob.bin": b"abc\x00def", "latin.txt": "é".encode("latin-1")},
    )
    os.symlink(tmp_path / "secret.txt", folder / "leak.txt")
    os.symlink(tmp_path, folder / "up")
    os.symlink(tmp_path / "nowhere", folder / "dangling.txt")
    os.mkfifo(folder / "pipe")
    return SkillLibrary.load([tmp_path / "lib"])


@pytest.mark.parametrize(
    ("path", "error", "suggestion"),
    [
        pytest.param("../secret.txt", PathOutsideSkill, None, id="dotdot"),
        pytest.param("templates/../../secret.txt", PathOutsideSkill, None, id="inner-dotdot"),
        pytest.param("..\\secret.txt", PathOutsideSkill, None, id="backslash-dotdot"),
        pytest.param("/etc/passwd", PathOutsideSkill, None, id="absolute"),
        pytest.param("C:\\Windows\\win.ini", PathOutsideSkill, None, id="windows-absolute"),
        pytest.param("templates/a.py\x00.md", PathOutsideSkill, None, id="nul"),
        pytest.param("leak.txt", PathOutsideSkill, None, id="symlink-out"),
        pytest.param("up/secret.txt", PathOutsideSkill, None, id="symlinked-dir-out"),
        pytest.param("dangling.txt", PathOutsideSkill, None, id="dangling-link-out"),
        pytest.param("templates/b.py", SkillFileNotFound, "templates/a.py", id="missing-close"),
        pytest.param("a.py", SkillFileNotFound, "templates/a.py", id="missing-folder-part"),
        pytest.param("templates", SkillFileNotFound, "templates/a.py", id="folder"),
        pytest.param(".", SkillFileNotFound, None, id="skill-folder"),
        pytest.param("pipe", SkillFileNotFound, None, id="fifo"),
        pytest.param("blob.bin", BinarySkillFile, None, id="nul-bytes"),
        pytest.param("latin.txt", BinarySkillFile, None, id="not-utf8"),
    ],
)
def test_read_file_refusals(hostile: SkillLibrary, path: str, error: type[SkillError], suggestion: str | None) -> None:
    with pytest.raises(error) as info:
        hostile.read_file("s", path)
    assert type(info.value) is error
    assert info.value.suggestion == suggestion
    assert "secret" not in info.value.message.replace("secret.txt", "")


def test_read_file_of_unknown_skill(hostile: SkillLibrary) -> None:
    with pytest.raises(SkillNotFound):
        hostile.read_file("t", "templates/a.py")


def test_read_file_size_limit(hostile: SkillLibrary, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(skills_module, "MAX_FILE_BYTES", 3)
    with pytest.raises(SkillFileTooLarge, match="3-byte limit") as info:
        hostile.read_file("s", "templates/a.py")
    assert info.value.code == "FILE_TOO_LARGE"


def test_error_codes() -> None:
    codes = {cls.__name__: cls.code for cls in SkillError.__subclasses__()}
    assert codes == {
        "SkillNotFound": "SKILL_NOT_FOUND",
        "SkillFileNotFound": "SKILL_FILE_NOT_FOUND",
        "PathOutsideSkill": "PATH_OUTSIDE_SKILL",
        "BinarySkillFile": "BINARY_FILE",
        "SkillFileTooLarge": "FILE_TOO_LARGE",
    }


# --- the bundled library ------------------------------------------------------------------------


def test_default_dirs_find_the_checkout_library() -> None:
    assert default_skills_dirs() == [BUNDLED_DIR]


def test_bundled_library_has_its_skills() -> None:
    library = SkillLibrary.load(default_skills_dirs())
    assert library.names() == BUNDLED
    for skill in library.skills():
        assert skill.category in ("attp", "memory")
        assert skill.files, f"{skill.name} attaches templates or examples"
        assert len(skill.description) > 40
        for path in skill.files:
            assert library.read_file(skill.name, path).strip(), path


def test_bundled_index_agrees_with_front_matter() -> None:
    index = json.loads((BUNDLED_DIR / "skills.json").read_text())["skills"]
    assert sorted(index) == BUNDLED
    for name, entry in index.items():
        fields, body = parse_front_matter((BUNDLED_DIR / entry["path"]).read_text())
        assert (fields["name"], fields["description"]) == (name, entry["description"])
        assert body.lstrip().startswith(f"# {entry['title']}\n"), name


def _load_copy(package: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """model/skills.py loaded from another location, as if the installed `attp_server` package lived there."""
    (package / "model").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "src" / "attp_server" / "model" / "skills.py", package / "model" / "skills.py")
    spec = importlib.util.spec_from_file_location("relocated_skills", package / "model" / "skills.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_default_dirs_prefer_the_wheel_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site-packages"
    (site / "attp_server" / "bundled_skills").mkdir(parents=True)
    (site / "skills").mkdir()  # an unrelated top-level package named "skills"
    assert _load_copy(site / "attp_server", monkeypatch).default_skills_dirs() == [
        (site / "attp_server" / "bundled_skills").resolve()
    ]


def test_default_dirs_ignore_a_stray_skills_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site-packages"
    (site / "skills").mkdir(parents=True)
    assert _load_copy(site / "attp_server", monkeypatch).default_skills_dirs() == []
