"""The front door stays usable: a short README with its table of contents, links that lead somewhere,
no references to documents a reader does not have, and every setting in the configuration reference."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attp_server.settings import Settings

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
DOCUMENTS = sorted([README, ROOT / "ARCHITECTURE.md", ROOT / "SECURITY.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _prose(path: Path) -> str:
    """The document without its fenced code blocks (code may hold anything that looks like a link)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file."""
    headings = re.findall(r"^#+ (.+)$", _prose(path), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_the_readme_is_short_and_has_a_table_of_contents() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert "\n## Contents\n" in text


def test_the_quick_start_has_exactly_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    quick_start = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    assert quick_start.count("```bash") == 2


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_to_a_document_the_reader_does_not_have(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for needle in (r"\bseed 0\d\d", r"SPEC §", r"design card", r"\bissue \d+"):
        assert not re.search(needle, text, re.I), (path.name, needle)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(path: Path) -> None:
    for target in LINK.findall(_prose(path)):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        assert linked.exists(), f"{path.name}: {target} does not exist"
        if anchor:
            assert anchor in _anchors(linked), f"{path.name}: no heading for #{anchor} in {linked.name}"


def test_every_setting_is_in_the_configuration_reference() -> None:
    reference = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [name for name in Settings.model_fields if f"| `{name}` |" not in reference]
    assert not missing, f"add a row to docs/configuration.md's table for: {missing}"
