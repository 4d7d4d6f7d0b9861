"""What a worker gives up before it reads its first program, and its per-run CPU budget.

Runs inside the worker. Everything the sandbox's namespaces need from the file system (time zone
data, the ``_strptime`` module, codec tables, the Starlark extension when installed) is loaded
first; then the process limits are set.

Imports nothing from the rest of ``server``.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import ctypes.util
import math
import os
import resource
from typing import Any

MAX_OPEN_FILES = 32
NOBODY = 65534
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000


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
    # Codecs and unicodedata load lazily from the stdlib, which the worker cannot read once it is nobody.
    import encodings
    import pkgutil
    import unicodedata

    unicodedata.name("a")
    for module in pkgutil.iter_modules(encodings.__path__):
        with contextlib.suppress(Exception):
            codecs.lookup(module.name)
    "x".encode("ascii", "namereplace")
    _preload_starlark()


def _preload_starlark() -> None:
    """Load the Starlark engine's extension module, if the extra is installed, and run it once."""
    try:
        import starlark
    except ImportError:
        return
    dialect = starlark.Dialect.extended()
    dialect.enable_f_strings = True
    module = starlark.Module()
    module.add_callable("echo", lambda value: value)
    program = starlark.parse("preload.star", 'x = struct(a = echo([1, 2.5, "b", None]))\nx.a\n', dialect)
    globals_ = starlark.Globals.extended_by([starlark.LibraryExtension.StructType])
    options = starlark.EvalOptions(check_cancelled=lambda: False)
    starlark.eval_with(options, module, program, globals_)
    with contextlib.suppress(starlark.StarlarkError):
        starlark.parse("preload.star", "x = (\n", dialect)


def _limit(name: str, soft: int, hard: int | None = None) -> bool:
    which = getattr(resource, name, None)
    if which is None:
        return False
    try:
        resource.setrlimit(which, (soft, soft if hard is None else hard))
    except (ValueError, OSError):
        return False
    return True


def _libc() -> Any:
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name, use_errno=True) if name else None


def _unshare_network(libc: Any) -> str | bool:
    """A network namespace of our own: only a loopback that is down, so no connection goes anywhere."""
    if libc is None:
        return False
    if libc.unshare(_CLONE_NEWNET) == 0:
        return "netns"
    # Unprivileged: a user namespace makes us root inside it, which allows a network namespace too.
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0:
        return "userns+netns"
    return False


def _drop_privileges() -> str | bool:
    """Root becomes nobody: no capabilities, no group memberships, no access to root's files."""
    if os.getuid() != 0:
        return f"uid {os.getuid()} (not root)"
    try:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    except OSError:
        return False
    return f"uid {NOBODY}"


def _no_new_privs(libc: Any) -> bool:
    return libc is not None and libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0


def apply(memory_mb: int) -> dict[str, Any]:
    """Give up everything a program must not have; return what took effect (reported, never assumed).

    Order matters: the network namespace needs the privileges that are dropped right after it.
    """
    libc = _libc()
    fds = [int(fd) for fd in os.listdir("/proc/self/fd")] if os.path.isdir("/proc/self/fd") else [8]
    report: dict[str, Any] = {"network_namespace": _unshare_network(libc)}
    report["rlimit_core"] = _limit("RLIMIT_CORE", 0)
    report["rlimit_fsize"] = _limit("RLIMIT_FSIZE", 0)
    report["rlimit_nofile"] = _limit("RLIMIT_NOFILE", max(MAX_OPEN_FILES, max(fds) + 4))
    report["rlimit_as"] = _limit("RLIMIT_AS", memory_mb * 1024 * 1024)
    report["dropped_privileges"] = _drop_privileges()
    # After the drop: RLIMIT_NPROC does not bind root, but it binds nobody.
    report["rlimit_nproc"] = _limit("RLIMIT_NPROC", 0)
    report["no_new_privs"] = _no_new_privs(libc)
    return report


def set_cpu_budget(seconds: float) -> None:
    """Allow this run `seconds` more CPU time than the worker has used so far (SIGXCPU past it)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds + 1)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
