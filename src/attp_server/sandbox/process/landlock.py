"""Landlock for the worker: no file system access at all, no TCP, signals and abstract sockets scoped.

Landlock (Linux 5.13+) lets an unprivileged process give up access rights for itself and its future
children, for good. The worker creates a ruleset that handles every right the kernel's Landlock ABI knows
and adds no rule, so each of them is denied everywhere:

- ABI 1: execute, write, read files; read directories; remove and make files, directories, devices,
  sockets, FIFOs, symlinks; ABI 2 adds linking/renaming across directories (refer), ABI 3 truncating,
  ABI 5 ioctl on devices;
- ABI 4: TCP bind and connect;
- ABI 6: signals to processes outside the worker's domain (the server, anything else) and connecting to
  abstract Unix sockets outside it.

(ABI 7 adds only audit-log switches.) Landlock also forbids ptrace of a process outside the domain.
What it does not cover (``stat`` of a path, file descriptors opened before) the seccomp filter does.

Imports nothing from the rest of ``attp_server``.
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any

CREATE_RULESET = 444
ADD_RULE = 445
RESTRICT_SELF = 446
"""The same numbers on every architecture (system calls from 424 on are numbered once for all)."""

_CREATE_RULESET_VERSION = 1

_FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: 1 << 13, 3: 1 << 14, 5: 1 << 15}
_NET_TCP = 0b11  # LANDLOCK_ACCESS_NET_BIND_TCP | CONNECT_TCP, ABI 4
_SCOPES = 0b11  # LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | SIGNAL, ABI 6


class Unsupported(Exception):
    """Landlock cannot be applied here; the message says why."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


def _call(libc: Any, number: int, *args: Any) -> int:
    result: int = libc.syscall(ctypes.c_long(number), *args)
    return result


def abi(libc: Any) -> int:
    """The kernel's Landlock ABI version; 0 when it has none (too old, not enabled, or blocked)."""
    version = _call(libc, CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(version, 0)


def _why_not(number: int) -> str:
    if number == errno.ENOSYS:
        return (
            "the kernel has no Landlock (Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK), or a seccomp policy "
            "(a container's) hides it"
        )
    if number == errno.EOPNOTSUPP:
        return "Landlock is built in but not enabled (add landlock to the kernel's lsm= boot parameter)"
    return f"{errno.errorcode.get(number, number)} ({os.strerror(number)})"


def rights(version: int) -> _RulesetAttr:
    """Every right ABI `version` knows, each handled (so, with no rule, denied)."""
    fs = sum(bits for level, bits in _FS_RIGHTS_BY_ABI.items() if version >= level)
    return _RulesetAttr(fs, _NET_TCP if version >= 4 else 0, _SCOPES if version >= 6 else 0)


def restrict(libc: Any) -> str:
    """Give up every right for good (no_new_privs must be set first); return what took effect.

    Raises `Unsupported` naming the reason when the kernel cannot or will not.
    """
    version = abi(libc)
    if version == 0:
        raise Unsupported(_why_not(ctypes.get_errno()))
    attr = rights(version)
    fd = _call(libc, CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    if fd < 0:
        raise Unsupported(f"creating the ruleset failed: {_why_not(ctypes.get_errno())}")
    try:
        if _call(libc, RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise Unsupported(f"restricting the worker failed: {_why_not(ctypes.get_errno())}")
    finally:
        os.close(fd)
    held = ["no file system access"]
    if attr.handled_access_net:
        held.append("no TCP bind or connect")
    if attr.scoped:
        held.append("signals and abstract Unix sockets scoped to the worker")
    return f"ABI {version}: {', '.join(held)}"
