"""What a worker gives up before it reads its first program, and its per-run CPU budget.

Runs inside the worker. Everything the sandbox's namespaces need from the file system (time zone
data, the ``_strptime`` module, codec tables, the Starlark extension when installed) is loaded
first; then the process limits are set, and last the two containment layers that hold even if the
evaluator falls (SECURITY.md, "Two walls"): Landlock (`landlock`: no file system access) and seccomp
(`seccomp`: only the system calls a running worker makes).

Imports nothing from the rest of ``server``.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import ctypes.util
import functools
import math
import os
import resource
import threading
from collections.abc import Iterable
from typing import Any

from attp_server.sandbox.process import landlock, seccomp

MAX_OPEN_FILES = 32
NOBODY = 65534
_PR_SET_NO_NEW_PRIVS = 38
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
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
    _libc()
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


@functools.cache
def _libc() -> Any:
    """The C library, found once (by `preload`, in the fork server: finding it runs ``ldconfig``, 3 ms a worker)."""
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


def _drop_privileges(libc: Any, uid: int, user_namespace: bool) -> str | bool:
    """Root becomes nobody: no capabilities, no group memberships, no access to root's files.

    Any other user stays who it is (`uid`, as seen from outside: inside a user namespace of its own, where it has
    no mapping, the worker would call itself 65534), and gives up every capability it has: the ones a user
    namespace of its own grants it (over nothing but its empty network namespace), and any it was started with.
    What is reported is what holds."""
    if uid == 0 and not user_namespace:
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        except OSError:
            return False
        return f"uid {NOBODY}"
    who = f"uid {uid} ({'root' if uid == 0 else 'not root'}: the server's user"
    if _clear_capabilities(libc):
        return f"{who}; no capabilities" + (", in a user namespace of its own)" if user_namespace else ")")
    if user_namespace:
        return f"{who}, with every capability inside a user namespace of its own)"
    return f"{who})"


def _clear_capabilities(libc: Any) -> bool:
    """Empty this process's effective, permitted and inheritable capability sets (``capset``); True if it did."""
    if libc is None:
        return False
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable}, all zero
    return bool(libc.capset(header, data) == 0)


def _no_new_privs(libc: Any) -> bool:
    return libc is not None and libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0


CONTAINMENT = ("landlock", "seccomp")
"""The layers `containment = "required"` demands (each must hold by itself if the evaluator falls)."""


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


ONE_THREAD = {
    **dict.fromkeys(
        ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
         "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"),
        "1",
    ),
    "ARROW_DEFAULT_MEMORY_POOL": "system", "MPLBACKEND": "Agg",
}  # fmt: skip
"""Part of every worker's environment, read by the numerical libraries as they load: one BLAS thread (none besides
the main one: numpy imported by anything would otherwise start a thread per core, and the lockdown refuses a
threaded worker), Arrow's system allocator (its jemalloc arenas would want threads of their own), and the
matplotlib backend that draws without a display."""

WITHOUT_NUMPY = "import sys; sys.modules.update({} if 'engine=cpython' in sys.argv else {'numpy': None}); "
"""The first statement of a worker's (and a fork server's) program: a worker that is not a data-stack worker never
imports numpy, whatever is installed beside the server (asteval, which the sandbox imports, loads it when it can:
its memory and its BLAS would be every worker's, for nothing)."""

ALLOWED_THREADS = frozenset({"jemalloc_bg_thd"})
"""Threads a fork server may run besides its own: pyarrow's allocator starts this idle one when its library loads
(no setting stops it; the ``cpython`` engine's data stack loads it). jemalloc makes its own state safe across
fork, a fork has only the forking thread, and Arrow allocates from the system allocator there
(``ARROW_DEFAULT_MEMORY_POOL``), so a worker never needs it back."""


def other_threads() -> list[str]:
    """This process's threads besides the calling one and `ALLOWED_THREADS`, by name: a fork of a process running
    any of them could inherit a lock one of them held, and the lockdown binds only the thread that applies it."""
    names: list[str] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return names
    for task in tasks:
        if int(task) == threading.get_native_id():
            continue
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                name = comm.read().strip()
        except OSError:
            name = "?"
        if name not in ALLOWED_THREADS:
            names.append(name)
    return names


def _landlock(libc: Any) -> str:
    if libc is None:
        raise landlock.Unsupported("no C library to make system calls with")
    return landlock.restrict(libc)


def _seccomp(libc: Any) -> str:
    arch = seccomp.this_arch()
    seccomp.install(seccomp.build(arch, os.getpid()), libc)
    return seccomp.describe(arch)


def apply(memory_mb: int, without: Iterable[str] = ()) -> dict[str, Any]:
    """Give up everything a program must not have; return what took effect (reported, never assumed).

    Each layer's entry is what took effect, or False; ``missing`` says why for each containment layer
    that could not be applied. Order matters: the network namespace needs the privileges that are dropped
    right after it; Landlock and seccomp need ``no_new_privs``; seccomp comes last (it forbids the calls
    that set up the others). `without` leaves containment layers out (``attp doctor`` shows each alone).
    """
    skipped = set(without)
    libc = _libc()
    fds = [int(fd) for fd in os.listdir("/proc/self/fd")] if os.path.isdir("/proc/self/fd") else [8]
    uid = os.getuid()  # before a user namespace of its own makes it unmapped there
    report: dict[str, Any] = {"network_namespace": _unshare_network(libc)}
    report["rlimit_core"] = _limit("RLIMIT_CORE", 0)
    report["rlimit_fsize"] = _limit("RLIMIT_FSIZE", 0)
    report["rlimit_nofile"] = _limit("RLIMIT_NOFILE", max(MAX_OPEN_FILES, max(fds) + 4))
    report["rlimit_as"] = _limit("RLIMIT_AS", memory_mb * 1024 * 1024)
    report["dropped_privileges"] = _drop_privileges(libc, uid, report["network_namespace"] == "userns+netns")
    # After the drop: RLIMIT_NPROC does not bind root, but it binds nobody.
    report["rlimit_nproc"] = _limit("RLIMIT_NPROC", 0)
    report["no_new_privs"] = _no_new_privs(libc)
    missing: dict[str, str] = {}
    threads = _threads()
    for layer, restrict in (("landlock", _landlock), ("seccomp", _seccomp)):
        report[layer] = False
        if layer in skipped:
            missing[layer] = "left out on purpose (attp doctor shows each wall alone; the benchmark measures its cost)"
        elif threads != 1:
            missing[layer] = f"the worker runs {threads} threads; the layer would bind only one of them"
        elif not report["no_new_privs"]:
            missing[layer] = "no_new_privs could not be set, which the layer needs"
        else:
            try:
                report[layer] = restrict(libc)
            except (landlock.Unsupported, seccomp.Unsupported, OSError) as exc:
                missing[layer] = str(exc)
    report["missing"] = missing
    return report


def set_cpu_budget(seconds: float) -> None:
    """Allow this run `seconds` more CPU time than the worker has used so far (SIGXCPU past it)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds + 1)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
