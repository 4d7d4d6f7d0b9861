"""Run an MCP server over stdio and record every JSON-RPC line both ways: ``mcp_tap.py LOG -- COMMAND ...``.

The gateway tests put it between attp-server and a real third-party server to see the wire itself:
that a cancelled call sends ``notifications/cancelled``, and that ``parallel()`` has every request in
flight before the first answer comes back. Each line of LOG is ``{"t": seconds, "dir": "in"|"out", "msg": ...}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import IO


def _pump(source: IO[bytes], sink: IO[bytes], direction: str, log: IO[str], lock: threading.Lock) -> None:
    for line in iter(source.readline, b""):
        sink.write(line)
        sink.flush()
        try:
            message = json.loads(line)
        except ValueError:
            message = line.decode("utf-8", "replace")
        with lock:
            log.write(json.dumps({"t": time.monotonic(), "dir": direction, "msg": message}) + "\n")
            log.flush()
    sink.close()


def main() -> None:
    log_path, separator, *command = sys.argv[1:]
    assert separator == "--", "usage: mcp_tap.py LOG -- COMMAND [ARGS...]"
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    lock = threading.Lock()
    with open(log_path, "a", encoding="utf-8") as log:
        threads = [
            threading.Thread(target=_pump, args=(sys.stdin.buffer, child.stdin, "in", log, lock), daemon=True),
            threading.Thread(target=_pump, args=(child.stdout, sys.stdout.buffer, "out", log, lock), daemon=True),
        ]
        for thread in threads:
            thread.start()
        threads[1].join()
    sys.exit(child.wait())


if __name__ == "__main__":
    main()
