"""Settings of the shell toolpack (``[toolpacks.shell]`` in the configuration) and its default deny list."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_COMMAND_START = r"(?:^|[;&|(`]|\$\()\s*(?:sudo\s+|exec\s+|command\s+){0,8}+"
"""Where a command word can begin: the start of a line, or after ``;``, ``&``, ``|``, ``(``, a backquote."""

DEFAULT_DENY_PATTERNS: tuple[str, ...] = (
    # rm of the root, everything under it, or the home folder: rm -rf /, rm -rf /*, rm -rf ~
    r"\brm\s+(?:-\S*\s+){0,20}+(?:/|/\*|~/?|~/\*|\$HOME/?|\$\{HOME\}/?)(?=\s|;|&|\||\)|$)",
    r"--no-preserve-root",
    # formatting, or writing raw bytes over, a disk
    r"\bmkfs(?:\.\w+)?\b",
    r"\bdd\b[^;&|\n]{0,200}?\bof=/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)",
    r">\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)\w*",
    # fork bombs such as :(){ :|:& };:
    r"(?<![\w:])([\w:]+)\s*\(\)\s*\{\s*\1\s*\|\s*\1\s*&",
    # stopping or restarting the machine
    _COMMAND_START + r"(?:shutdown|reboot|halt|poweroff)\b",
    _COMMAND_START + r"(?:init|telinit)\s+[06]\b",
    _COMMAND_START + r"systemctl\s+(?:\S+\s+){0,8}(?:poweroff|reboot|halt|kexec)\b",
)
"""Regexes (searched, multi-line) that refuse obviously destructive commands.

This is a seatbelt against accidents, not a security boundary: a determined program can always spell
a command in a way no pattern foresees. Run the server as an unprivileged user in a disposable
environment when the shell pack is enabled.

The patterns are searched in the server process, which a search holds until it ends: no pattern
repeats without bound a group that itself repeats (``(?:-\\S*\\s+)*`` took 18 s on a 100 kB command of
``-rm`` words), so every search is linear in the command's length.
"""


class ShellOptions(BaseModel):
    """Settings of the shell toolpack."""

    model_config = ConfigDict(extra="forbid")

    max_timeout: int = Field(default=600, ge=1)
    """Largest ``timeout`` (seconds) a call may ask for."""
    max_output_bytes: int = Field(default=1_000_000, gt=0)
    """Cap on the bytes kept from each of stdout and stderr; the rest is read and dropped."""
    deny_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_DENY_PATTERNS))
    """Regexes; a command matching any of them is refused with COMMAND_DENIED. Replaces the defaults."""
    env_passthrough: list[str] = Field(default_factory=list)
    """Names of server environment variables passed to commands. None by default: the server's
    environment (tokens, keys) never reaches a command unless named here."""

    @field_validator("deny_patterns")
    @classmethod
    def _compile_patterns(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"deny pattern {pattern!r} is not a valid regular expression: {exc}") from exc
        return patterns

    @field_validator("env_passthrough")
    @classmethod
    def _check_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not _ENV_NAME.match(name):
                raise ValueError(f"env_passthrough: {name!r} is not an environment variable name")
        return names
