"""Tool descriptions as the model reads them: the tool description, ``help(name)`` and ``tools(query)``.

The description of ``attp_execute`` is all most models ever read (Claude Desktop and n8n never open
resources on their own), so it must be enough to write a first program that works: the rules in a
few lines, then one compact line per tool, ``read_file(path, max_lines=1000, offset=0) -> str — Read
a UTF-8 text file…``, grouped by pack, within `DESCRIPTION_BUDGET` characters. Past the budget the
first tools keep their signatures and the rest are named, with the count and how to look further.
Everything is read from the registry, so built-in, third-party and upstream packs are described alike.

Built once at startup (signatures and docstrings never change while serving).
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import inspect
import platform
import re
from collections.abc import Callable
from typing import Any

from attp_server.model.prompt import CodeFacts, system_prompt
from attp_server.sandbox.engines import ENGINES
from attp_server.sandbox.stdlib.modules import public_names
from attp_server.settings import Settings
from attp_server.toolpack import Tool, ToolRegistry, annotation_text

LANGUAGES = {name: engine.language.name for name, engine in ENGINES.items()}
"""The name of each engine's language, as the model and the user read it."""

DESCRIPTION_BUDGET = 8000
"""Characters of the whole tool description; past it, tools are named instead of shown with signatures."""
SUMMARY_CHARS = 110
"""A tool's summary (its docstring's first line) is cut at a word near this length, or shorter when the
description would not fit otherwise."""
MIN_SUMMARY_CHARS = 24
"""A summary cut shorter than this says too little: the line shows the signature alone."""
PACK_DESCRIPTION_CHARS = 160
DOWN_LINE = "unavailable, the operator has been told"
"""What the model reads of an upstream server that is down (the reason is the operator's: log, /healthz, attp tools)."""
PARAMETERS_CHARS = 140
"""A signature longer than this keeps its required parameters and ends in ``...`` (upstream tools can have dozens)."""
PARAMETER_SHAPE_DEPTH = 3
"""Levels of an object parameter's keys shown in the catalog line (``help()`` shows them all)."""
RETURN_SHAPE_DEPTH = 1
"""Levels of a returned object's keys shown in the catalog line."""


def enabled_modules(settings: Settings) -> tuple[str, ...]:
    """The modules a program on the default engine can use by name: the one list the description, prompt and
    help() read (an engine with modules of its own, Starlark's json and math, has those)."""
    fixed = ENGINES[settings.engine].language.modules
    return fixed if fixed is not None else tuple(settings.modules)


def package_line(packages: list[str]) -> str:
    """The packages a ``cpython`` program can import, with their versions (as installed here, where the workers
    load them from)."""
    versions = []
    for name in packages:
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(name)
    listed = ", ".join(versions) or "none besides the standard library"
    return f"Packages (CPython {platform.python_version()}): {listed}."


def tool_text(tool: Tool) -> str:
    """The ATTP tool description format (seed 000): signature, then the docstring."""
    doc = tool.doc.strip()
    body = "\n".join(f"    {line}" if line else "" for line in doc.splitlines())
    return f'def {tool.signature_text()}:\n    """\n{body}\n    """' if doc else f"def {tool.signature_text()}: ..."


def compact_signature(tool: Tool, depth: int = PARAMETER_SHAPE_DEPTH) -> str:
    """``read_file(path, max_lines=1000, offset=0) -> str``: what a call looks like, in few characters.

    A parameter shows its type only when neither ``str`` nor its default tells it
    (``children: list[str] = None``); a parameter that takes objects shows their keys
    (``entities: list[{name: str, observations: list[str]}]``), nested up to `depth` levels;
    a returned object shows only its top keys (``-> {entities: list[dict]}``).
    A signature longer than `PARAMETERS_CHARS` shows its shapes less deep, then drops optional parameters.
    """
    for level in range(depth, 0, -1):
        text = _compact(tool, level)
        if len(text) <= PARAMETERS_CHARS + len(tool.ref) + 2 or level == 1:
            return text
    return _compact(tool, 1)


def _compact(tool: Tool, depth: int) -> str:
    parts: list[str] = []
    required = 0
    for parameter in tool.signature.parameters.values():
        text = parameter.name
        annotation = annotation_text(parameter.annotation, depth, compact=True)
        default = parameter.default
        if default is inspect.Parameter.empty or default is None:
            if annotation not in ("str", "str | None", "any", "any | None"):
                text += f": {annotation.removesuffix(' | None')}"
            if default is None:
                text += "=None" if ":" not in text else " = None"
        else:
            text += f"={default!r}"
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            text = "*" + text
        elif parameter.kind is inspect.Parameter.VAR_KEYWORD:
            text = "**" + text
        if default is inspect.Parameter.empty and parameter.kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            required = len(parts) + 1
        parts.append(text)
    shown = parts
    while len(", ".join(shown)) > PARAMETERS_CHARS and len(shown) > max(required, 1):
        shown = shown[:-1]
    params = ", ".join(shown) + (", ..." if len(shown) < len(parts) else "")
    returns = tool.signature.return_annotation
    arrow = (
        ""
        if returns is inspect.Signature.empty
        else f" -> {annotation_text(returns, RETURN_SHAPE_DEPTH, compact=True)}"
    )
    return f"{tool.ref}({params}){arrow}"


_BOUNDARY = re.compile(r"[.!?](?=\s)|[,;:](?=\s)|\s(?=[(—–-]\s|\()")
"""Where a summary may be cut: after a sentence or a clause (``.``, ``,``, ``;``, ``:``), before a dash or a
parenthesis."""
_ABBREVIATION = re.compile(r"\b(e\.g|i\.e|etc|vs|cf|incl|approx|no)\.$", re.I)
"""A full stop that ends an abbreviation, not a sentence."""
_FORMAT = re.compile(
    r"`[^`]{1,60}`|<[^<>\s]{1,30}>(?:[:/@.,=#-]*<[^<>\s]{1,30}>)*|\b[Yy]{4}-MM-[Dd]{2}(?:[T ]HH:MM(?::SS)?)?"
)
"""An argument format a tool's own text gives (```owner/repo```, ``<revision>:<path>``, ``YYYY-MM-DD``): kept when
the prose around it is cut."""


_CLAUSE_END = re.compile(r"[.!?;:](?=\s|$)")
_CONJUNCTION = re.compile(r"\b(?:and|or)\b")
_CLAUSE_WORDS = frozenset(
    "with without for from in into by to as at on of when where which who that so but then if unless because while "  # noqa: SIM905 (a word list reads best as words)
    "keeping using returning giving".split()
)
"""A part after a comma that starts with one of these words is a clause (``, with line numbers``), not a list item."""
_DANGLING = re.compile(r"\b(?:and|or|nor|but|of|to|the|an?|with|for|in|on|by|from|as|at|into)$", re.I)
"""A word a phrase cannot end on: no cut right after it (``name, description, or…``)."""
LIST_ITEM_WORDS = 4
"""An item of a list written in prose (``name, description, or parent``) has at most this many words."""


def _in_list(line: str, comma: int) -> bool:
    """Whether the comma at `comma` separates the items of a list (``an INSERT, UPDATE, or DELETE query``), where a
    cut would read as if the list ended there, rather than a clause (``a file, with line numbers``; ``a commit, or
    of a file``): its clause goes on in short items up to one with ``and`` or ``or`` in it; a comma right before
    the ``and`` or ``or`` is a list's when a short item and another comma come before it."""
    end = _CLAUSE_END.search(line, comma + 1)
    parts = line[comma + 1 : end.start() if end else len(line)].split(",")
    for index, part in enumerate(parts):
        words = part.split()
        if not words or words[0].lower() in _CLAUSE_WORDS:
            return False
        joined = _CONJUNCTION.search(part)
        if joined is None:
            if len(words) > LIST_ITEM_WORDS:
                return False
            continue
        before = part[: joined.start()].split()
        if before or index > 0:
            return len(before) <= LIST_ITEM_WORDS
        starts = [match.end() for match in _CLAUSE_END.finditer(line, 0, comma)]
        earlier = line[starts[-1] if starts else 0 : comma].split(",")
        return len(earlier) > 1 and len(earlier[-1].split()) <= LIST_ITEM_WORDS
    return False


def shorten(text: str, limit: int) -> str:
    """`text` on one line, within `limit` characters: cut after its last sentence or clause that fits (with an
    ellipsis), never mid-phrase nor mid-list (`_in_list`); the argument formats it gives (``<revision>:<path>``) are
    kept before prose. Empty when not even its first clause fits."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    formats = " ".join(dict.fromkeys(match.group(0) for match in _FORMAT.finditer(line)))
    room = limit - 1 - (len(formats) + 3 if formats else 0)
    ends = [
        match.start()
        for match in _BOUNDARY.finditer(line)
        if 0 < match.start() <= room
        and not _ABBREVIATION.search(line, 0, match.start() + 1)
        and not _DANGLING.search(line, max(0, match.start() - 8), match.start())
        and not (line[match.start()] == "," and _in_list(line, match.start()))
    ]
    prose = line[: ends[-1]].rstrip() if ends else ""
    if formats and all(part in prose for part in formats.split(" ")):
        formats = ""  # what is kept says them already
    if not prose:
        return formats if 0 < len(formats) <= limit else ""
    return prose + "…" + (f" ({formats})" if formats else "")


def _most(top: int, fits: Callable[[int], bool]) -> int | None:
    """The largest k in 0..top with fits(k), or None; fits is (nearly) monotonic, so bisect, then step up."""
    if not fits(0):
        return None
    low, high = 0, top
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    while low < top and fits(low + 1):
        low += 1
    return low


class Catalog:
    """What the model can read about the enabled tools, prepared once."""

    def __init__(self, registry: ToolRegistry, settings: Settings) -> None:
        self.registry = registry
        self.settings = settings
        self.modules = enabled_modules(settings)
        self._signatures: dict[str, str] = {}
        self.description = self._description()

    # ------------------------------------------------------------ the tool description

    def facts(self) -> CodeFacts:
        """What a program may use, for the prompt (the description states the same)."""
        return CodeFacts(
            engine=self.settings.engine,
            packages=package_line(self.settings.cpython_packages) if self.settings.engine == "cpython" else None,
            modules=self.modules,
            timeout_s=self.settings.timeout_s,
            max_tool_calls=self.settings.max_tool_calls,
            max_code_chars=self.settings.max_code_chars,
            max_result_bytes=self.settings.max_result_bytes,
            result_format=self.settings.result_format,
            reaching_out=self._reaching_out(),
        )

    def _reaching_out(self) -> list[str]:
        """The tools that reach beyond the workspace (the network, processes, other systems): those marked so,
        and every tool of an upstream MCP server as ``pack.*`` (another program or a remote server, whatever its
        tools' annotations say, and whether or not it is up now)."""
        live = [name for name, pack in self.registry.packs.items() if pack.live is not None]
        marked = [tool.ref for tool in self.registry.tools.values() if tool.marks.open_world and tool.pack not in live]
        return [*marked, *(f"{name}.*" for name in live)]

    def _rules(self) -> str:
        s = self.settings
        language = ENGINES[s.engine].language
        lines = [
            f"Run a short {language.name} program that calls the tools listed below, and get back its result. One "
            "program can make many tool calls: loop, filter and combine their results in code instead of calling "
            "one tool per round trip.",
            "",
            "Rules:",
            "- Tools are plain functions: call them by name (or as pack.tool); they return data (str, list, dict).",
        ]
        modules = ", ".join(self.modules) or "none"
        if language.imports:
            importing = "importing them is accepted and changes nothing" if s.allow_imports else "imports are refused"
            lines.append(f"- Modules ready to use without import ({importing}): {modules}.")
        else:
            lines.append(f"- Modules ready to use: {modules}. Nothing can be imported.")
        lines.append(
            "- Put the answer in __result__ (JSON data: dict, list, str, number, bool, None); without it the last "
            "expression's value is returned. print() output comes back as stdout."
        )
        if state := self._state_rule():
            lines.append(state)
        lines.extend(language.rules)
        if s.engine == "cpython":
            lines.append(f"- {package_line(s.cpython_packages)}")
        if engines := self._engines_rule():
            lines.append(engines)
        lines.append(self._reach_rule())
        lines.append(
            f"- Limits per call: {s.timeout_s:g} s, {s.max_tool_calls} tool calls (help/tools included), "
            f"{s.max_code_chars:,} characters of code, {s.max_result_bytes:,} bytes of result."
        )
        shape = "a JSON object" if s.result_format == "json" else "TOML"
        lines.append(
            f"- The reply is {shape}: status (ok/error/fail), result, stdout, hint, error (code, message, line, "
            "suggested_value, solution, ...), tool_calls (calls per tool, failures with their codes)."
        )
        lines.append(
            '- help("name") returns a tool\'s full description (Args, Returns, Raises, Example); tools("word") '
            "searches the tools."
        )
        lines.append("- Send `code` (the program) or `envelope` (a whole ATTP TOML envelope), not both.")
        return "\n".join(lines) + "\n"

    def _engines_rule(self) -> str:
        """The engines a call may pick besides the default, each with what it is (none: no line)."""
        default, *others = self.settings.offered_engines
        if not others:
            return ""
        listed = " ".join(f'engine="{name}" is {ENGINES[name].language.summary}.' for name in others)
        return (
            f"- Engines: {default} runs a program unless the call picks another with engine (or tool_call.engine in "
            f"an envelope). {listed}"
        )

    def _reach_rule(self) -> str:
        outside = self._reaching_out()
        if not outside:
            return (
                "- The program has no network, file or process access of its own, and no enabled tool reaches the "
                "network or runs commands: work with the tools below."
            )
        names = ", ".join(outside[:8]) + (f" and {len(outside) - 8} more" if len(outside) > 8 else "")
        return (
            "- The program has no network, file or process access of its own; only the tools reach outside it, and "
            f"only these go beyond the workspace (network, commands, other systems): {names}."
        )

    def _state_rule(self) -> str:
        if self.settings.session_state and self.settings.engine == "cpython":
            return (
                "- Between your calls in a session the top-level names a program leaves are kept: values that "
                "pickle (DataFrames, arrays, lists, dicts, ...), def and class by their source, imported modules "
                f"(at most {self.settings.cpython_max_state_bytes:,} bytes pickled; hint names what was not kept). "
                "Pass the reply's session value back as session on your next call to use them; reset=true clears "
                "them."
            )
        if not self.settings.session_state or ENGINES[self.settings.engine].keeps != "names":
            if self.settings.isolation == "session":
                return (
                    "- Each session has its own files and memory: pass the reply's session value back as session "
                    "on your next call to work on them again."
                )
            return ""
        return (
            "- Between your calls in a session only plain data is kept (str, numbers, bool, None, lists and "
            f"dicts of them, {self.settings.max_state_bytes:,} bytes of JSON in all) and top-level def functions; "
            "anything else is dropped (hint names it). Pass the reply's session value back as session on your next "
            "call to use them again; reset=true clears them."
        )

    def _description(self) -> str:
        """The rules, then every tool's line, fitted into `DESCRIPTION_BUDGET`.

        What gives way, in order, before any signature is dropped: the tools' summaries get shorter (down
        to none: signature-only lines), then each pack's signatures share lines. Only then do tools lose
        their signatures, the built-in packs' first, so the servers the user put behind attp keep theirs.
        """
        rules = self._rules()
        tools = list(self.registry.tools.values())
        if not tools:
            return rules + self._unavailable() + "\nNo tools are enabled: only the modules above are available."
        rules += self._unavailable()
        tools = self._by_priority(tools)

        def fits(text: str) -> bool:
            return len(rules + text) <= DESCRIPTION_BUDGET

        summary = _most(SUMMARY_CHARS, lambda k: fits(self._catalog(tools, self._lines(tools, k), len(tools))))
        if summary is not None:
            return rules + self._catalog(tools, self._lines(tools, summary), len(tools))
        signatures = self._lines(tools, 0)
        if fits(self._catalog(tools, signatures, len(tools), grouped=True)):
            return rules + self._catalog(tools, signatures, len(tools), grouped=True)
        shown = _most(len(tools), lambda k: fits(self._catalog(tools, signatures, k, grouped=True)))
        if shown is not None:
            return rules + self._catalog(tools, signatures, shown, grouped=True)
        longest = max(len(members) for members in self._by_pack(tools).values())
        names = _most(longest, lambda k: fits(self._names_only(tools, k)))
        if names is not None:
            return rules + self._names_only(tools, names)
        packs = _most(len(self.registry.packs), lambda k: fits(self._packs_only(tools, k)))
        return rules + self._packs_only(tools, packs or 0)

    def _by_priority(self, tools: list[Tool]) -> list[Tool]:
        """The tools in the order they keep their signatures: the upstream servers' (the user's own) first."""
        packs = self.registry.packs

        def upstream(tool: Tool) -> bool:
            pack = packs.get(tool.pack)
            return pack is not None and pack.live is not None

        return [t for t in tools if upstream(t)] + [t for t in tools if not upstream(t)]

    def _lines(self, tools: list[Tool], summary_chars: int) -> dict[str, str]:
        """Each tool's catalog line, its summary cut to `summary_chars` (none under `MIN_SUMMARY_CHARS`)."""
        lines = {}
        for tool in tools:
            summary = shorten(tool.summary, summary_chars) if summary_chars >= MIN_SUMMARY_CHARS else ""
            lines[tool.ref] = self._signature(tool) + (f" — {summary}" if summary else "")
        return lines

    def _signature(self, tool: Tool) -> str:
        """`compact_signature`, worked out once per tool while the description is fitted."""
        found = self._signatures.get(tool.ref)
        if found is None:
            found = self._signatures[tool.ref] = compact_signature(tool)
        return found

    def _unavailable(self) -> str:
        """One line per upstream MCP server that is down. Why, and the fix (the host's PATH, variable names, log
        files), are the operator's to read: in the log, ``/healthz`` and ``attp tools``."""
        down = self.registry.unavailable()
        if not down:
            return ""
        lines = "".join(f"\n  {name}: {DOWN_LINE}" for name in down)
        return f"\nMCP servers down now (their tools are missing until they are back):{lines}\n"

    def _by_pack(self, tools: list[Tool]) -> dict[str, list[Tool]]:
        grouped: dict[str, list[Tool]] = {}
        for tool in tools:
            grouped.setdefault(tool.pack, []).append(tool)
        return grouped

    def _pack_line(self, name: str) -> str:
        pack = self.registry.packs.get(name)
        description = shorten(pack.description, PACK_DESCRIPTION_CHARS) if pack is not None else ""
        return f"\n{name}" + (f" — {description}" if description else "")

    def _catalog(self, tools: list[Tool], lines: dict[str, str], shown: int, *, grouped: bool = False) -> str:
        """Every pack with its tools' lines: the first `shown` tools of `tools` with their signature line, the
        others by name. `grouped` puts a pack's signatures on one line, separated by ``;``."""
        with_signature = {tool.ref for tool in tools[:shown]}
        heading = "signatures; help('name') for a tool's description" if grouped else "signature — what it does"
        out = [f"\nTools ({heading}):"]
        for pack, members in self._by_pack(list(self.registry.tools.values())).items():
            out.append(self._pack_line(pack))
            signed = [lines[t.ref] for t in members if t.ref in with_signature]
            if grouped and signed:
                out.append("  " + "; ".join(signed))
            else:
                out.extend(f"  {line}" for line in signed)
            rest = [t.ref for t in members if t.ref not in with_signature]
            if rest:
                out.append("  also: " + ", ".join(rest))
        out.extend(self._aliases())
        if shown < len(tools):
            out.append(
                f"\n{shown} of {len(tools)} tools are shown with their signature (the list is too long for "
                "more); for the others call help('name') inside your program, or tools('word') to search."
            )
        return "\n".join(out)

    def _names_only(self, tools: list[Tool], names: int) -> str:
        """Past the budget even without signatures: each pack with its first `names` tool names and a count."""
        out = [f"\nToolpacks ({len(tools)} tools; too many to list their signatures here):"]
        for pack, members in self._by_pack(tools).items():
            out.append(self._pack_line(pack))
            listed = ", ".join(t.ref for t in members[:names])
            more = len(members) - min(names, len(members))
            out.append(
                f"  {len(members)} tools"
                + (f": {listed}" if listed else "")
                + (f" and {more} more" if listed and more else "")
            )
        out.append(
            "\nInside your program, tools('word') lists matching tools with their signatures and help('name') "
            "returns one tool's full description."
        )
        return "\n".join(out)

    def _packs_only(self, tools: list[Tool], packs: int) -> str:
        """Past the budget even with one line per pack: the first `packs` packs with their tool counts."""
        grouped = list(self._by_pack(tools).items())
        listed = ", ".join(f"{name} ({len(members)})" for name, members in grouped[:packs])
        more = len(grouped) - packs
        return (
            f"\nToolpacks ({len(tools)} tools in {len(grouped)} packs; tool count in brackets): {listed}"
            + (f" and {more} more packs" if more else "")
            + ".\nInside your program, tools('word') lists matching tools with their signatures, help('pack') one "
            "pack's tools and help('name') one tool's full description."
        )

    def _aliases(self) -> list[str]:
        aliases = [f"{alias} = {target}" for alias, target in self.registry.aliases.items()]
        return ["\nAliases: " + ", ".join(aliases)] if aliases else []

    # ------------------------------------------------------------ the other views

    def attp_text(self) -> str:
        """Every enabled tool in the ATTP format (seed 000): what ``attp://tools`` and the prompt show."""
        header = "# ===== Available tools =====\n# Call them directly by name; no import.\n\n"
        return header + "\n\n\n".join(tool_text(tool) for tool in self.registry.tools.values())

    def prompt(self, language: str = "en") -> str:
        """The ATTP system prompt with this server's tools and code rules filled in."""
        return system_prompt(self.attp_text(), language, self.facts())

    @functools.cached_property
    def module_members(self) -> dict[str, frozenset[str]]:
        """The enabled curated modules and their members, for ``help('collections')``."""
        return public_names(self.modules)

    def help(self, name: object = None) -> str:
        """``help()`` inside a program: one tool's full description, or an overview."""
        if name is None:
            return self.description
        if not isinstance(name, str):
            return "help(name) takes a tool name as a string, e.g. help('read_file')"
        if ENGINES[self.settings.engine].language.imports and name in self.modules:
            members = ", ".join(sorted(self.module_members[name], key=str.lower))
            return f"{name}: a curated module, used by name without import. Members: {members}"
        if name in self.registry.packs:
            pack = self.registry.packs[name]
            tools = [t for t in self.registry.tools.values() if t.pack == name]
            return f"{name}: {pack.description}\n\n" + "\n\n".join(tool_text(t) for t in tools)
        tool = self.registry.resolve(name) or self.registry.resolve(name.split(".")[-1])
        if tool is None:
            return self.unknown(name)
        return tool_text(tool)

    def unknown(self, name: str, lead: str | None = None) -> str:
        """One short paragraph for a name that is no tool (`lead` says so, by default "No tool named ..."):
        the closest names, and the MCP servers that are down."""
        names = self.closest(name)
        text = (
            (lead or f"No tool named {name!r}.")
            + " "
            + (f"Closest: {', '.join(names)}." if names else "No tool has a similar name.")
        )
        down = self.registry.unavailable()
        if down:
            pack = name.split(".", maxsplit=1)[0]
            listed = [pack] if pack in down else list(down)
            text += f" MCP servers down now, so their tools are missing: {', '.join(listed)} ({DOWN_LINE})."
        return text + " tools('word') searches names and descriptions."

    def closest(self, name: str, count: int = 3) -> list[str]:
        """Up to `count` tool names like `name`: those sharing a word of it first, then those spelled alike."""
        refs = list(self.registry.tools)
        words = [w for w in re.split(r"[\W_]+", name.lower()) if len(w) >= 4]
        sharing = [ref for ref in refs if any(word in ref.lower() for word in words)]
        short = {ref.rsplit(".", maxsplit=1)[-1]: ref for ref in refs}
        alike = difflib.get_close_matches(name.rsplit(".", maxsplit=1)[-1], list(short), n=count, cutoff=0.5)
        return list(dict.fromkeys([*sharing, *(short[a] for a in alike)]))[:count]

    def search(self, query: object = None) -> list[dict[str, Any]]:
        """``tools(query)`` inside a program: matching tools with their signature and summary."""
        words = query.lower().split() if isinstance(query, str) else []
        out = []
        for tool in self.registry.tools.values():
            haystack = f"{tool.ref} {tool.pack} {tool.doc}".lower()
            if all(word in haystack for word in words):
                out.append(
                    {"name": tool.ref, "pack": tool.pack, "signature": tool.signature_text(), "summary": tool.summary}
                )
        return out
