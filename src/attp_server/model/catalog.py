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

import collections.abc
import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

from attp_server.model.prompt import REFUSED_PYTHON, CodeFacts, system_prompt
from attp_server.sandbox.starlark.engine import LANGUAGE_NOTES
from attp_server.sandbox.stdlib.modules import public_names
from attp_server.settings import Settings
from attp_server.toolpack import Tool, ToolRegistry

DESCRIPTION_BUDGET = 8000
"""Characters of the whole tool description; past it, tools are named instead of shown with signatures."""
SUMMARY_CHARS = 110
"""A tool's summary (its docstring's first line) is cut at a word near this length."""
PACK_DESCRIPTION_CHARS = 160
PARAMETERS_CHARS = 140
"""A signature longer than this keeps its required parameters and ends in ``...`` (upstream tools can have dozens)."""
STARLARK_MODULES = ("json", "math")


def enabled_modules(settings: Settings) -> tuple[str, ...]:
    """The modules a program can use by name: the one list the description, prompt and help() read."""
    return STARLARK_MODULES if settings.engine == "starlark" else tuple(settings.modules)


def tool_text(tool: Tool) -> str:
    """The ATTP tool description format (seed 000): signature, then the docstring."""
    doc = tool.doc.strip()
    body = "\n".join(f"    {line}" if line else "" for line in doc.splitlines())
    return f'def {tool.signature_text()}:\n    """\n{body}\n    """' if doc else f"def {tool.signature_text()}: ..."


def compact_signature(tool: Tool) -> str:
    """``read_file(path, max_lines=1000, offset=0) -> str``: what a call looks like, in few characters.

    A parameter shows its type only when neither ``str`` nor its default tells it
    (``children: list[str] = None``); return types drop what is inside dicts (``list[dict]``).
    """
    parts: list[str] = []
    required = 0
    for parameter in tool.signature.parameters.values():
        text = parameter.name
        annotation = type_text(parameter.annotation)
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
    arrow = "" if returns is inspect.Signature.empty else f" -> {type_text(returns)}"
    return f"{tool.ref}({params}){arrow}"


def type_text(annotation: Any) -> str:
    """A short spelling of a type: ``list[dict]``, ``dict | None``, ``'a' | 'b'``; ``any`` when unknown."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return "any"
    if annotation is None or annotation is type(None):
        return "None"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(dict.fromkeys(type_text(arg) for arg in args))
    if origin is typing.Literal:
        return " | ".join(repr(arg) for arg in args)
    if origin in (dict, collections.abc.Mapping):
        return "dict"
    if origin in (list, set, frozenset, collections.abc.Sequence, collections.abc.Iterable) and len(args) == 1:
        name = "list" if origin is not set and origin is not frozenset else origin.__name__
        return f"{name}[{type_text(args[0])}]"
    if origin is tuple:
        return "list"  # tuples arrive as lists
    if isinstance(annotation, type):
        return annotation.__name__
    text = str(annotation).replace("typing.", "")
    return text if len(text) <= 40 else "any"


def shorten(text: str, limit: int) -> str:
    """`text` on one line, cut at a word before `limit` characters (with an ellipsis)."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"


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
        self.description = self._description()

    # ------------------------------------------------------------ the tool description

    def facts(self) -> CodeFacts:
        """What a program may use, for the prompt (the description states the same)."""
        return CodeFacts(
            engine=self.settings.engine,
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
        engine = s.engine.capitalize()
        lines = [
            f"Run a short {engine} program that calls the tools listed below, and get back its result. One program "
            "can make many tool calls: loop, filter and combine their results in code instead of calling one tool "
            "per round trip.",
            "",
            "Rules:",
            "- Tools are plain functions: call them by name (or as pack.tool); they return data (str, list, dict).",
        ]
        modules = ", ".join(self.modules) or "none"
        if s.engine == "starlark":
            lines.append(f"- Modules ready to use: {modules}. Nothing can be imported.")
            lines.append(f"- {LANGUAGE_NOTES}")
        else:
            importing = "importing them is accepted and changes nothing" if s.allow_imports else "imports are refused"
            lines.append(f"- Modules ready to use without import ({importing}): {modules}.")
        lines.append(
            "- Put the answer in __result__ (JSON data: dict, list, str, number, bool, None); without it the last "
            "expression's value is returned. print() output comes back as stdout."
        )
        if s.engine != "starlark":
            lines.append(
                "- A failed tool call raises ToolError; catch it with `except ToolError as e:` and read e.code "
                "(e.g. FILE_NOT_FOUND), e.message, e.suggested_value, e.parameter_name, e.solution. Uncaught, it "
                "ends the run with that error."
            )
            lines.append(f"- Not available: {REFUSED_PYTHON}.")
            lines.append(
                "- parallel(tool, [kwargs, ...]) runs one tool over many argument dicts at once; results in order."
            )
        if state := self._state_rule():
            lines.append(state)
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
        if not self.settings.session_state or self.settings.engine != "python":
            if self.settings.isolation == "session":
                return (
                    "- Each session has its own files and memory: pass the reply's session value back as session "
                    "on your next call to work on them again."
                )
            return ""
        return (
            "- Variables and top-level def functions are kept in a session: pass the reply's session value back as "
            "session on your next call to use them again (hint names any not kept); reset=true clears them."
        )

    def _description(self) -> str:
        rules = self._rules()
        tools = list(self.registry.tools.values())
        if not tools:
            return rules + self._unavailable() + "\nNo tools are enabled: only the modules above are available."
        lines = {tool.ref: f"{compact_signature(tool)} — {shorten(tool.summary, SUMMARY_CHARS)}" for tool in tools}
        lines = {name: line.removesuffix(" — ") for name, line in lines.items()}
        rules += self._unavailable()
        shown = _most(len(tools), lambda k: len(rules + self._catalog(tools, lines, k)) <= DESCRIPTION_BUDGET)
        if shown is not None:
            return rules + self._catalog(tools, lines, shown)
        longest = max(len(members) for members in self._by_pack(tools).values())
        names = _most(longest, lambda k: len(rules + self._names_only(tools, k)) <= DESCRIPTION_BUDGET)
        if names is not None:
            return rules + self._names_only(tools, names)
        packs = _most(len(self.registry.packs), lambda k: len(rules + self._packs_only(tools, k)) <= DESCRIPTION_BUDGET)
        return rules + self._packs_only(tools, packs or 0)

    def _unavailable(self) -> str:
        """The upstream MCP servers that are down, with why and the fix: the model can tell the user."""
        down = self.registry.unavailable()
        if not down:
            return ""
        listed = "; ".join(f"{name}: {problem}" for name, problem in down.items())
        return f"\nUnavailable now (MCP servers that are down): {listed}\n"

    def _by_pack(self, tools: list[Tool]) -> dict[str, list[Tool]]:
        grouped: dict[str, list[Tool]] = {}
        for tool in tools:
            grouped.setdefault(tool.pack, []).append(tool)
        return grouped

    def _pack_line(self, name: str) -> str:
        pack = self.registry.packs.get(name)
        description = shorten(pack.description, PACK_DESCRIPTION_CHARS) if pack is not None else ""
        return f"\n{name}" + (f" — {description}" if description else "")

    def _catalog(self, tools: list[Tool], lines: dict[str, str], shown: int) -> str:
        """The first `shown` tools with their signature line, the others by name under their pack."""
        with_signature = {tool.ref for tool in tools[:shown]}
        out = ["\nTools (signature — what it does):"]
        for pack, members in self._by_pack(tools).items():
            out.append(self._pack_line(pack))
            out.extend(f"  {lines[t.ref]}" for t in members if t.ref in with_signature)
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
        if self.settings.engine == "python" and name in self.modules:
            members = ", ".join(sorted(self.module_members[name], key=str.lower))
            return f"{name}: a curated module, used by name without import. Members: {members}"
        if name in self.registry.packs:
            pack = self.registry.packs[name]
            tools = [t for t in self.registry.tools.values() if t.pack == name]
            return f"{name}: {pack.description}\n\n" + "\n\n".join(tool_text(t) for t in tools)
        tool = self.registry.resolve(name) or self.registry.resolve(name.split(".")[-1])
        if tool is None:
            return f"No tool named {name!r}. " + self.description
        return tool_text(tool)

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
