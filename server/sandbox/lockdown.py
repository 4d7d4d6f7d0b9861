"""What a worker gives up before it reads its first program, and its per-run CPU budget.

Runs inside the worker. Everything the sandbox's namespaces need from the file system (time zone
data, the ``_strptime`` module, codec tables) is loaded first; then the process limits are set.

Imports nothing from the rest of ``server``.
"""

from __future__ import annotations

import math
import os
import resource
from typing import Any

MAX_OPEN_FILES = 32


def preload() -> None:
    """Touch everything a program may need that would otherwise be loaded lazily from disk."""
    import _strptime  # type: ignore[import-not-found]  # noqa: F401  (strptime imports it on first use)
    import datetime
    import json
    import re
    import statistics

    datetime.datetime.now().astimezone()
    datetime.datetime.strptime("2024-01-02", "%Y-%m-%d")
    re.compile(r"\w+\d*", re.IGNORECASE).findall("preload 123")
    json.loads(json.dumps({"a": [1.5, "b"]}))
    statistics.linear_regression([1, 2, 3], [2, 4, 6])
    "préload".encode().decode("latin-1").casefold()


def _limit(name: str, soft: int, hard: int | None = None) -> bool:
    which = getattr(resource, name, None)
    if which is None:
        return False
    try:
        resource.setrlimit(which, (soft, soft if hard is None else hard))
    except (ValueError, OSError):
        return False
    return True


def apply(memory_mb: int) -> dict[str, Any]:
    """Set the process limits; return which ones took effect (reported by the server, never assumed)."""
    highest_fd = (
        max((int(fd) for fd in os.listdir("/proc/self/fd")), default=2) if os.path.isdir("/proc/self/fd") else 8
    )
    return {
        "rlimit_core": _limit("RLIMIT_CORE", 0),
        "rlimit_fsize": _limit("RLIMIT_FSIZE", 0),
        "rlimit_nofile": _limit("RLIMIT_NOFILE", max(MAX_OPEN_FILES, highest_fd + 4)),
        "rlimit_as": _limit("RLIMIT_AS", memory_mb * 1024 * 1024),
        "rlimit_nproc": _limit("RLIMIT_NPROC", 0),
    }


def set_cpu_budget(seconds: float) -> None:
    """Allow this run `seconds` more CPU time than the worker has used so far (SIGXCPU past it)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds + 1)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
