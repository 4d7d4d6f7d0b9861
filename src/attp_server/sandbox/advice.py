"""What to write instead: the messages for names and attributes the sandbox refuses.

A model reaches for ``type(e).__name__``, ``obj.__dict__`` or ``x.__len__()`` out of habit; the refusal
names the allowed equivalent so that the next call can be right. Imports nothing from ``server``.
"""

from __future__ import annotations

_TYPE_ADVICE = (
    "to test a value's type write isinstance(x, list) (or isinstance(x, (int, float))); for an error, "
    "repr(e) shows its class and message, and `except ValueError as e:` catches one class"
)

_NAME_ADVICE = {
    "type": _TYPE_ADVICE,
    "getattr": "read attributes directly (x.name); keep fields chosen at run time in a dict: d[key]",
    "hasattr": "keep fields chosen at run time in a dict and test `key in d`",
    "setattr": "keep fields chosen at run time in a dict: d[key] = value",
    "delattr": "keep fields chosen at run time in a dict: del d[key]",
    "vars": "keep the values in a dict of your own",
    "dir": "help() lists the tools; help('name') describes one",
    "globals": "keep the values in a dict of your own",
    "locals": "keep the values in a dict of your own",
    "open": "files are read and written with the tools",
    "eval": "write the code itself, or parse data with json.loads",
    "exec": "write the code itself",
    "compile": "write the code itself; re.compile compiles a regular expression",
    "exit": "to stop early, return from a function or raise an exception",
    "quit": "to stop early, return from a function or raise an exception",
    "input": "there is no input; put the data in the program or read it with a tool",
    "object": "there are no classes here: use dicts, lists and functions",
    "super": "there are no classes here: use dicts, lists and functions",
    "__file__": "a program has no file; tools read and write files",
    "__builtins__": "the builtins are available by name (len, sorted, ...)",
    "__import__": "write `import json` (or use the module by name: it is already available)",
}

_ATTRIBUTE_ADVICE = {
    "__name__": _TYPE_ADVICE + "; a ToolError has e.code",
    "__class__": _TYPE_ADVICE,
    "__dict__": "there are no objects with attributes here: keep the data in a dict and read d['key']",
    "__len__": "use len(x)",
    "__str__": "use str(x)",
    "__repr__": "use repr(x)",
    "__iter__": "use iter(x) or a for loop",
    "__next__": "use next(it)",
    "__getitem__": "use x[key]",
    "__setitem__": "use x[key] = value",
    "__contains__": "use `key in x`",
    "__call__": "call it directly: f(...)",
    "__doc__": "help('tool_name') returns a tool's description",
}


def name_advice(name: str) -> str:
    """The message for a name the sandbox refuses, with what to write instead when there is a common answer."""
    advice = _NAME_ADVICE.get(name)
    if name.startswith("__") and advice is None:
        return f"names starting with '__' are not allowed: {name!r}"
    return f"{name!r} is not available in the sandbox" + (f"; {advice}" if advice else "")


def attribute_advice(name: str) -> str:
    """The message for an attribute starting with '_', naming the allowed equivalent of the common ones."""
    advice = _ATTRIBUTE_ADVICE.get(name)
    if advice is None and name.startswith("__") and name.endswith("__"):
        advice = "use the builtin or the operator instead (len(x), str(x), x[key], ==, +, ...)"
    return f"attributes starting with '_' are not allowed: '.{name}'" + (f"; {advice}" if advice else "")
