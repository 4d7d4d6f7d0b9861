"""Why an upstream stdio server did not start, in words that lead to the fix.

`not_started` explains a command that could not be started at all (not on the PATH attp-server was started with,
not executable). `withheld` names the variables of attp-server's environment a server did not get (a stdio server
gets only a few basics, `env_passthrough` and its own `env`), but only when the failure looks like one they cause:
a missing certificate, a proxy, or a path. Any other failure (a 404 from the registry, a crash in the server's own
code) is not helped by a list of variables, and gets none.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

_KINDS = (
    (
        "a missing certificate",
        re.compile(r"(?i:certificate|self[- ]signed|unable to (get|verify))|\b(SSL|TLS)\b|[A-Z]_CERT_|\bCERT_"),
        re.compile(r"CERT|CA_BUNDLE|SSL|TLS|^NODE_OPTIONS$", re.I),
    ),
    (
        "a proxy",
        re.compile(
            r"(?i:proxy|getaddrinfo|name resolution|Name or service not known|Network is unreachable)"
            r"|\b(ENOTFOUND|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EAI_AGAIN)\b"
        ),
        re.compile(r"PROXY", re.I),
    ),
    (
        "a path",
        re.compile(
            r"(?i:No such file or directory|command not found|Cannot find module|No module named|not recognized as)"
            r"|\bENOENT\b"
        ),
        re.compile(r"^(?!.*(CERT|SSL|TLS|CA_)).*PATH$|^HOME$|^VIRTUAL_ENV$", re.I),
    ),
)
"""What a failure looks like (its words), and the variables that cause failures of that kind when missing."""
MAX_NAMED = 20
COMES_WITH = {
    "uvx": "uv (https://docs.astral.sh/uv/)",
    "uv": "uv (https://docs.astral.sh/uv/)",
    "npx": "Node.js",
    "node": "Node.js",
    "npm": "Node.js",
}
"""What installs the commands upstream servers are most often started with."""


def withheld(
    said: str, environ: Mapping[str, str], given: Iterable[str], passthrough: Iterable[str]
) -> tuple[str, list[str]] | None:
    """(what the failure looks like, the variables of `environ` of that kind the server did not get), when `said`
    (its reason and its stderr) looks like a missing certificate, a proxy or a path; else None. Names only."""
    patterns, passed = tuple(passthrough), set(given)
    missing = [
        name
        for name in environ
        if name not in passed and not any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
    ]
    looks = [(kind, variables) for kind, words, variables in _KINDS if words.search(said)]
    named = sorted({name for _, variables in looks for name in missing if variables.search(name)})
    if not named:
        return None
    return " or ".join(kind for kind, _ in looks), named[:MAX_NAMED]


def not_started(command: str, cause: BaseException, where: str, path: str) -> tuple[str, str]:
    """Why the command did not start, and the fix: a program missing from PATH is the usual case (uvx, npx and
    node live in folders an app such as Claude Desktop does not put on the PATH it starts us with)."""
    if isinstance(cause, PermissionError):
        return (
            f"the command {command!r} is not executable (PermissionError)",
            f"make it executable, or correct {where}.command",
        )
    if os.sep in command or (os.altsep and os.altsep in command):
        return f"the command {command!r} does not exist", f"correct {where}.command (an absolute path)"
    reason = f"the command {command!r} was not found on the PATH attp-server was started with"
    reason += f" ({path[:300]})" if path else ""
    comes_with = COMES_WITH.get(Path(command).name)
    fix = f"install {comes_with}, or " if comes_with else "install it, or "
    fix += (
        f"give its absolute path as {where}.command (`which {command}` in a terminal prints it): an app such "
        "as Claude Desktop starts attp-server with a shorter PATH than a terminal's"
    )
    return reason, fix
