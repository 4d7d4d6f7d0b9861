"""Tool descriptions as the model reads them: the compact catalog, ``help(name)`` and ``tools(query)``.

Built once from the registry at startup (signatures and docstrings never change while serving).
"""

from __future__ import annotations

import functools
from typing import Any

from attp_server.prompt import system_prompt
from attp_server.sandbox.modules import public_names
from attp_server.sandbox.starlark_engine import LANGUAGE_NOTES
from attp_server.settings import Settings
from attp_server.toolpack import Tool, ToolRegistry

DESCRIPTION_BUDGET = 4000
"""Characters of catalog in the tool description; past it only toolpack names are listed."""


def tool_text(tool: Tool) -> str:
    """The ATTP tool description format (seed 000): signature, then the docstring."""
    doc = tool.doc.strip()
    body = "\n".join(f"    {line}" if line else "" for line in doc.splitlines())
    return f'def {tool.signature_text()}:\n    """\n{body}\n    """' if doc else f"def {tool.signature_text()}: ..."


class Catalog:
    """What the model can read about the enabled tools, prepared once."""

    def __init__(self, registry: ToolRegistry, settings: Settings) -> None:
        self.registry = registry
        self.settings = settings
        self.description = self._description()

    def _rules(self) -> str:
        s = self.settings
        if s.engine == "starlark":
            modules = "json and math are pre-injected, no import.\n"
            language = f"- {LANGUAGE_NOTES}\n"
        else:
            modules = f"Pre-injected modules, no import: {', '.join(s.modules) or 'none'}.\n"
            language = (
                "- A failed tool call raises ToolError: try: ... except ToolError as e: use e.code, e.message.\n"
                "- Not available: import, names or attributes starting with _, class, with, yield, open, eval, exec, "
                "getattr, type, dir, globals.\n"
            )
        return (
            f"Run a short {s.engine.capitalize()} program that calls the tools below, and get back its result. One "
            "call can do many tool calls: loop, filter and combine their results in code instead of calling tools "
            "one at a time.\n"
            "\n"
            "Rules:\n"
            f"- Call tools directly by name (also as pack.tool); no import. {modules}"
            "- Put the answer in __result__ (JSON data: dict, list, str, number, bool, None); without it the last "
            "expression's value is returned. print() output comes back as stdout.\n"
            f"{language}"
            f"- Limits per call: {s.timeout_s:g} s, {s.max_tool_calls} tool calls (help/tools included), "
            f"{s.max_code_chars} characters of "
            f"code, {s.max_result_bytes:,} bytes of result.\n"
            '- help("tool_name") returns a tool\'s full description; tools("word") searches the tools.\n'
            "- Send `code` (the program) or `envelope` (a whole ATTP TOML envelope), not both.\n"
        )

    def _description(self) -> str:
        rules = self._rules()
        lines = [f"- {tool.signature_text()}: {tool.summary}" for tool in self.registry.tools.values()]
        aliases = [f"{alias} = {target}" for alias, target in self.registry.aliases.items()]
        catalog = "\nTools:\n" + "\n".join(lines)
        if aliases:
            catalog += "\nAliases: " + ", ".join(aliases)
        if len(rules) + len(catalog) > DESCRIPTION_BUDGET:
            catalog = self._packs_only(with_names=True)
            if len(rules) + len(catalog) > DESCRIPTION_BUDGET:
                catalog = self._packs_only(with_names=False)
        if not self.registry.tools:
            catalog = "\nNo tools are enabled: only the pre-injected modules are available."
        return rules + catalog

    def _packs_only(self, *, with_names: bool) -> str:
        """Past the budget: each pack with its description (and its tool names while they still fit)."""
        lines = []
        for name, pack in self.registry.packs.items():
            line = f"- {name}: {pack.description}"
            if with_names:
                line += " Tools: " + ", ".join(t.name for t in self.registry.tools.values() if t.pack == name)
            lines.append(line)
        return (
            "\nToolpacks (the full catalog is too long to list here: call tools() or tools('word') inside your "
            "code to list tools with their signatures, and help('name') to read one):\n" + "\n".join(lines)
        )

    def attp_text(self) -> str:
        """Every enabled tool in the ATTP format (seed 000): what ``attp://tools`` and the prompt show."""
        header = "# ===== Available tools =====\n# Call them directly by name; no import.\n\n"
        return header + "\n\n\n".join(tool_text(tool) for tool in self.registry.tools.values())

    def prompt(self, language: str = "en") -> str:
        """The ATTP system prompt with this server's tools filled in, for the server's engine."""
        return system_prompt(self.attp_text(), language, engine=self.settings.engine, modules=self.settings.modules)

    @functools.cached_property
    def module_members(self) -> dict[str, frozenset[str]]:
        """The enabled curated modules and their members, for ``help('collections')``."""
        return public_names(self.settings.modules)

    def help(self, name: object = None) -> str:
        """``help()`` inside a program: one tool's full description, or an overview."""
        if name is None:
            return self.description
        if not isinstance(name, str):
            return "help(name) takes a tool name as a string, e.g. help('read_file')"
        if self.settings.engine == "python" and name in self.settings.modules:
            members = ", ".join(sorted(self.module_members[name], key=str.lower))
            return f"{name}: a curated module, used by name without import. Members: {members}"
        if name in self.registry.packs:
            pack = self.registry.packs[name]
            tools = [t for t in self.registry.tools.values() if t.pack == name]
            return f"{name}: {pack.description}\n\n" + "\n\n".join(tool_text(t) for t in tools)
        tool = self.registry.resolve(name.split(".")[-1])
        if tool is None:
            return f"No tool named {name!r}. " + self.description
        return tool_text(tool)

    def search(self, query: object = None) -> list[dict[str, Any]]:
        """``tools(query)`` inside a program: matching tools with their signature and summary."""
        words = query.lower().split() if isinstance(query, str) else []
        out = []
        for tool in self.registry.tools.values():
            haystack = f"{tool.name} {tool.pack} {tool.doc}".lower()
            if all(word in haystack for word in words):
                out.append(
                    {"name": tool.name, "pack": tool.pack, "signature": tool.signature_text(), "summary": tool.summary}
                )
        return out
