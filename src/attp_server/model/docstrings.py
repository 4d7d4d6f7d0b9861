"""Google-style docstrings, parsed: the summary, Args, Returns, Raises and Example sections of a tool.

A tool's docstring is the prompt the model reads (SPEC §6), so the server also checks it at startup:
`docstring_warnings` names tools without a docstring and parameters the Args section leaves out.

The parser is forgiving, because third-party packs write docstrings by hand:

* any indentation (the docstring is cleaned first, as `inspect.getdoc` does);
* ``name: text`` and ``name (type): text`` entries, descriptions wrapped over several lines;
* section names Args/Arguments/Parameters/Keyword Args, Returns/Return/Yields, Raises,
  Example/Examples, with the section text on the header line (``Returns: The sum.``) or below it,
  indented or not.

Unknown sections (Note, Warning, ...) stay in the description as written.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attp_server.toolpack import Tool

_SECTIONS = {
    "args": "args",
    "arguments": "args",
    "parameters": "args",
    "params": "args",
    "keyword args": "args",
    "keyword arguments": "args",
    "other parameters": "args",
    "returns": "returns",
    "return": "returns",
    "yields": "returns",
    "yield": "returns",
    "raises": "raises",
    "raise": "raises",
    "exceptions": "raises",
    "example": "examples",
    "examples": "examples",
}
_HEADER = re.compile(rf"^(?P<name>{'|'.join(_SECTIONS)})\s*:\s*(?P<rest>.*)$", re.IGNORECASE)
_ARG = re.compile(r"^\*{0,2}(?P<name>[A-Za-z_]\w*)\s*(?:\((?P<type>.*?)\))?\s*:\s*(?P<text>.*)$")
_RAISE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)\s*(?:\((?P<type>.*?)\))?\s*(?::\s*(?P<text>.*))?$")
_BULLET = re.compile(r"^(?:[-*•+]\s|\d+[.)]\s)")


@dataclass(frozen=True)
class Docstring:
    """The parts of a Google-style docstring. Missing parts are empty (or None for `returns`).

    Frozen so that nobody reassigns a part; not hashable, as `args` is a dict.
    """

    summary: str = ""
    """The first paragraph, on one line."""
    description: str = ""
    """Free text after the summary, outside the sections, as written (dedented)."""
    args: dict[str, str] = field(default_factory=dict)
    """Parameter name (without ``*``/``**``) -> its description, wrapped lines joined."""
    returns: str | None = None
    raises: list[tuple[str, str]] = field(default_factory=list)
    """(exception name, when/why), in the order written."""
    examples: list[str] = field(default_factory=list)
    """Each example block as written (dedented); blocks are separated by a blank line."""


def parse_docstring(doc: str | None) -> Docstring:
    """Split a Google-style docstring into its parts; never fails, whatever the text."""
    lines = inspect.cleandoc(doc or "").splitlines()
    free: list[str] = []
    args: dict[str, str] = {}
    returns: list[str] = []
    raises: list[tuple[str, str]] = []
    examples: list[str] = []
    i = 0
    while i < len(lines):
        header = _header(lines[i])
        if header is None:
            free.append(lines[i])
            i += 1
            continue
        kind, inline = header
        body, i = _section_body(lines, i + 1, inline)
        if kind == "args":
            args.update(_entries(body, _ARG))
        elif kind == "returns":
            returns.append(_reflow(body))
        elif kind == "raises":
            raises.extend(_entries(body, _RAISE))
        else:
            examples.extend(_example_blocks(body))
    summary, description = _split_summary(free)
    joined_returns = "\n\n".join(r for r in returns if r)
    return Docstring(
        summary=summary,
        description=description,
        args=args,
        returns=joined_returns or None,
        raises=raises,
        examples=examples,
    )


def docstring_warnings(tool: Tool) -> list[str]:
    """What a startup log should say about a tool's docstring: missing, or leaving parameters out.

    ``*args``/``**kwargs`` need no Args entry (naming them is optional in Google style); Args
    entries for parameters that do not exist are reported unless the tool takes ``**kwargs``.
    """
    who = f"tool {tool.name!r} (toolpack {tool.pack!r})"
    if not tool.doc.strip():
        return [f"{who} has no docstring; the model sees only its signature {tool.signature_text()}"]
    doc = parse_docstring(tool.doc)
    warnings = []
    if not doc.summary:
        warnings.append(f"{who} has no summary line; the compact catalog shows the first line of the docstring")
    params = tool.signature.parameters.values()
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    missing = [p.name for p in params if p.kind not in variadic and p.name not in doc.args]
    if missing:
        warnings.append(f"{who} does not document parameter(s) {', '.join(missing)} in its Args section")
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    unknown = [name for name in doc.args if name not in tool.signature.parameters]
    if unknown and not takes_kwargs:
        warnings.append(f"{who} documents parameter(s) {', '.join(unknown)} that its signature does not have")
    return warnings


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _header(line: str) -> tuple[str, str] | None:
    """(section kind, text after the colon) when `line` opens a section at the left margin."""
    if _indent(line) > 0:
        return None
    match = _HEADER.match(line.rstrip())
    if match is None:
        return None
    return _SECTIONS[match["name"].lower()], match["rest"].strip()


def _section_body(lines: list[str], start: int, inline: str) -> tuple[list[str], int]:
    """The body of the section whose header is just before `start`: its lines (dedented), and the index after it.

    The body is the indented block below the header, after the header's own text (`inline`). A body
    written flush left (no indentation) runs to the next blank line or header instead.
    """
    end = start
    following = next((line for line in lines[end:] if line.strip()), "")
    flush_left = not inline and bool(following) and _indent(following) == 0 and _header(following) is None
    body: list[str] = []
    while end < len(lines):
        line = lines[end]
        if not line.strip():
            if flush_left and body:
                break
        elif _indent(line) == 0 and (not flush_left or _header(line) is not None):
            break
        body.append(line)
        end += 1
    while body and not body[-1].strip():
        body.pop()
    body = _dedent(body)
    return [inline, *body] if inline else body, end


def _dedent(lines: list[str]) -> list[str]:
    margin = min((_indent(line) for line in lines if line.strip()), default=0)
    return [line[margin:] if line.strip() else "" for line in lines]


def _entries(body: list[str], entry: re.Pattern[str]) -> list[tuple[str, str]]:
    """``name: text`` items at the body's margin; more-indented or non-matching lines continue the last one."""
    items: list[tuple[str, list[str]]] = []
    for line in body:
        match = entry.match(line) if line.strip() and _indent(line) == 0 else None
        if match is not None:
            items.append((match["name"], [match["text"] or ""]))
        elif items:
            items[-1][1].append(line)
    return [(name, _reflow(text)) for name, text in items]


def _reflow(lines: list[str]) -> str:
    """Join wrapped lines into paragraphs; keep blank-line paragraph breaks and bullet items on their own lines."""
    out: list[str] = []
    new_paragraph = False
    for raw in lines:
        text = raw.strip()
        if not text:
            new_paragraph = bool(out)
            continue
        if new_paragraph:
            out.extend(["", text])
        elif not out or _BULLET.match(text):
            out.append(text)
        else:
            out[-1] = f"{out[-1]} {text}" if out[-1] else text
        new_paragraph = False
    return "\n".join(out)


def _example_blocks(body: list[str]) -> list[str]:
    """Split an Example section at blank lines that are followed by a line at the margin."""
    blocks: list[list[str]] = [[]]
    for index, line in enumerate(body):
        if not line.strip() and index + 1 < len(body) and _indent(body[index + 1]) == 0 and blocks[-1]:
            blocks.append([])
        elif line.strip() or blocks[-1]:
            blocks[-1].append(line)
    return ["\n".join(block).strip("\n") for block in blocks if any(line.strip() for line in block)]


def _split_summary(free: list[str]) -> tuple[str, str]:
    """The first paragraph (one line) and the rest of the free text (blank runs squeezed)."""
    while free and not free[0].strip():
        free.pop(0)
    cut = next((i for i, line in enumerate(free) if not line.strip()), len(free))
    summary = " ".join(line.strip() for line in free[:cut])
    rest: list[str] = []
    for line in free[cut:]:
        if line.strip() or (rest and rest[-1].strip()):
            rest.append(line.rstrip())
    return summary, "\n".join(_dedent(rest)).strip()
