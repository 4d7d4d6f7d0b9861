"""What an upstream stdio server says on its stderr: logged, and its last lines kept for the reason it is down.

A server that dies at start (a missing module, an SDK it was not written for) says why on stderr
and nowhere else; the MCP client only sees the connection close. `StderrTail` is the stderr of one
started process: a pipe read by a thread of its own (it ends when the process and its children have
all closed it), each line cut to `MAX_LINE_CHARS`, with every value of the server's `env` blanked out, logged
and kept (the last `KEEP_LINES`). `meaningful` picks the line that says what went wrong: npm's headline
when ``npx`` failed to fetch the server (the registry's 404, not npm's "A complete log of this run..."), else
the last error line, else the last line that is not a stack frame or a runtime's banner.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import threading
import typing
from collections.abc import Iterable
from typing import TextIO

import anyio

logger = logging.getLogger(__name__)

KEEP_LINES = 20
"""Last lines of an upstream's stderr kept in memory."""
MAX_LINE_CHARS = 300
"""A longer stderr line is cut (a server printing one endless line costs bounded memory)."""
REDACTED = "[redacted]"

_NOISE = re.compile(
    r"""^\s*(
        at\s.+                              # a JavaScript stack frame
      | File\s".+                           # a Python stack frame
      | Traceback\s\(most\srecent\scall\slast\):
      | \^+~*\s*|~+\^+~*                    # Python's and Node's markers under a line
      | Node\.js\sv\d.*                     # Node's version banner after an uncaught error
      | Require\sstack:|-\s/.*              # Node's module resolution list
      | throw\s\w+;?                        # the source line Node quotes
      | \{|\}|\[\]|code:\s.*|requireStack:.*  # Node's error object dump
    )\s*$""",
    re.VERBOSE,
)
_ERROR = re.compile(r"(\b[A-Z]\w*(Error|Exception)\b|\berror\b|\bfatal\b|\bpanic\b)", re.IGNORECASE)
_NPM = re.compile(r"^\s*npm (?:error|ERR!)\s*(.*)$")
"""A line of npm's error report (``npx`` failing before the server starts): its text after the prefix."""
_NPM_FRAME = re.compile(
    r"""^(
        code\s\S+ | errno\s.* | syscall\s.* | path\s.* | \d{3}\s*   # the report's fields, a bare status
      | A\scomplete\slog\sof\sthis\srun.* | Log\sfiles\swere\snot\swritten.*  # where npm's own log went
      | \d{3}\s+Note\sthat\syou\scan\salso\sinstall.* | \d{3}\s+tarball,\sfolder,.*  # a 404's advice
    )?$""",
    re.VERBOSE,
)
"""Lines of npm's report that say where or how, not what: its code, its log file's path, a 404's advice."""


class StderrTail:
    """The stderr of one upstream process (`file` is what the process is started with)."""

    def __init__(self, pack: str, secrets: Iterable[str]) -> None:
        self.pack = pack
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._lines: collections.deque[str] = collections.deque(maxlen=KEEP_LINES)
        self._ended = threading.Event()
        read_fd, write_fd = os.pipe()
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")
        self.file = typing.cast(TextIO, os.fdopen(write_fd, "w", encoding="utf-8"))
        threading.Thread(target=self._read, name=f"mcp-stderr-{pack}", daemon=True).start()

    def started(self) -> None:
        """Close this process's copy of the pipe's write end (the child has its own): EOF when the child ends."""
        if not self.file.closed:
            self.file.close()

    async def ended(self, timeout_s: float = 1.0) -> None:
        """Wait (up to `timeout_s`) until every line the process wrote has been read."""
        self.started()
        await anyio.to_thread.run_sync(self._ended.wait, timeout_s)

    def lines(self) -> list[str]:
        return list(self._lines)

    def meaningful(self, *, errors_only: bool = False) -> str | None:
        """The line that best says what went wrong: the last error line, else (unless `errors_only`: a server
        that ran a while has printed lines that say nothing of why it stopped) the last ordinary line."""
        lines = [line for line in self._lines if line.strip() and not _NOISE.match(line)]
        if npm := npm_headline(lines):
            return npm
        errors = [line for line in lines if _ERROR.search(line)]
        chosen = errors[-1] if errors else lines[-1] if lines and not errors_only else None
        return chosen.strip() if chosen is not None else None

    def _read(self) -> None:
        try:
            with self._reader:
                while True:
                    line = self._reader.readline(MAX_LINE_CHARS * 4)
                    if not line:
                        break
                    rest = line
                    while rest and not rest.endswith("\n"):  # a very long line: its start is kept, the rest skipped
                        rest = self._reader.readline(MAX_LINE_CHARS * 4)
                    text = self._redact(line.rstrip("\r\n"))
                    if len(text) > MAX_LINE_CHARS:
                        text = text[:MAX_LINE_CHARS] + "..."
                    self._lines.append(text)
                    logger.info("mcp server %r (stderr): %s", self.pack, text)
        except (OSError, ValueError) as exc:  # the pipe closed under the reader: nothing more to read
            logger.debug("mcp server %r: stderr reader stopped: %s", self.pack, exc)
        finally:
            self._ended.set()

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text


def npm_headline(lines: Iterable[str]) -> str | None:
    """What npm's error report says went wrong (``npm error 404 Not Found - GET https://registry.npmjs.org/...``,
    with its code), not its last line (``A complete log of this run can be found in: ...``); None without one."""
    code = None
    for line in lines:
        match = _NPM.match(line)
        if match is None:
            continue
        text = match.group(1).strip()
        if text.startswith("code "):
            code = code or text.removeprefix("code ").strip()
        if not _NPM_FRAME.match(text):
            return f"npm error {text}" + (f" ({code})" if code and code not in text else "")
    return None
