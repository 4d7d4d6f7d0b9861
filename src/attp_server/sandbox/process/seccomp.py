"""The worker's system call filter: a seccomp-bpf allow list, built as data and installed with ``prctl``.

After its lockdown a worker only reads and writes its pipes, manages memory, handles its own signals and
timers, reads clocks and random bytes, and exits. That is the whole list (measured by running the test
suites' workloads under ``strace -f``: every system call a worker made after saying ``ready``). Everything
else fails with ``EPERM`` (so a lazy ``open`` deep in a library is an error the run reports, not a dead
worker): no ``open``/``openat``, ``stat``, ``socket``, ``connect``, ``execve``, ``fork``/``clone`` (the
worker has one thread), ``ptrace``, ``process_vm_*``, ``bpf``, ``keyctl``, ``mount``, ``unshare``,
``setns``, ``io_uring``. Three calls are allowed only on the worker itself: ``kill`` and ``tgkill`` (a
crash's ``abort()`` signals itself) when their first argument is the worker's pid, ``prlimit64`` (the
per-run CPU budget) when it is 0 or that pid.

The program first checks the architecture the call was made with (``seccomp_data.arch``): a call made
through another ABI (32-bit ``int 0x80`` on x86_64, or x32 numbers) kills the worker, since its numbers
mean other calls. Tables exist for x86_64 and aarch64; on any other machine `build` raises `Unsupported`.

`build` returns the program as a list of ``(code, jt, jf, k)`` instructions, so tests read and run it
(``tests/test_seccomp.py`` evaluates it instruction by instruction); `install` loads it. Imports nothing
from the rest of ``attp_server``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
from dataclasses import dataclass
from typing import Any

Instruction = tuple[int, int, int, int]
"""One classic BPF instruction: (code, jump if true, jump if false, constant)."""

# Classic BPF opcodes (linux/bpf_common.h) and seccomp return values (linux/seccomp.h).
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_RET_K = 0x06
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
RET_DATA = 0x0000FFFF

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
OFFSET_NR = 0
OFFSET_ARCH = 4
OFFSET_ARGS = 16

X32_SYSCALL_BIT = 0x40000000

ALLOWED = (
    # the protocol pipes, and closing what the worker itself opened before its lockdown
    "read", "write", "close",
    # memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise",
    # its own signals and timers: the deadline alarm, the regex engine's checks, a crash's abort()
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "restart_syscall", "setitimer", "getitimer",
    # clocks, the CPU budget's accounting, random bytes (os.urandom, random seeds)
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "getrusage",
    "getrandom",
    # locks (single-threaded: uncontended futexes still wake), its own ids, exit
    "futex", "sched_yield", "getpid", "gettid", "exit", "exit_group",
)  # fmt: skip
"""System calls allowed whatever their arguments."""

ON_ITSELF = {"kill": (), "tgkill": (), "prlimit64": (0,)}
"""System calls allowed only when their first argument is the worker's pid (or one of these values)."""


@dataclass(frozen=True)
class Arch:
    """One architecture's view of the filter: its audit arch value and system call numbers."""

    name: str
    audit_arch: int
    numbers: dict[str, int]
    x32: bool = False
    """x86_64: numbers with bit 30 set are the x32 ABI's, which the kernel maps to other calls."""


X86_64 = Arch(
    "x86_64",
    0xC000003E,
    {
        "read": 0, "write": 1, "close": 3, "mmap": 9, "mprotect": 10, "munmap": 11, "brk": 12,
        "rt_sigaction": 13, "rt_sigprocmask": 14, "rt_sigreturn": 15, "sched_yield": 24, "mremap": 25,
        "madvise": 28, "nanosleep": 35, "getitimer": 36, "setitimer": 38, "getpid": 39, "exit": 60, "kill": 62,
        "gettimeofday": 96, "getrusage": 98, "sigaltstack": 131, "gettid": 186, "time": 201, "futex": 202,
        "restart_syscall": 219, "clock_gettime": 228, "clock_getres": 229, "clock_nanosleep": 230,
        "exit_group": 231, "tgkill": 234, "prlimit64": 302, "getrandom": 318,
    },
    x32=True,
)  # fmt: skip

AARCH64 = Arch(
    "aarch64",
    0xC00000B7,
    {
        "exit": 93, "exit_group": 94, "futex": 98, "nanosleep": 101, "getitimer": 102, "setitimer": 103,
        "clock_gettime": 113, "clock_getres": 114, "clock_nanosleep": 115, "sched_yield": 124,
        "restart_syscall": 128, "kill": 129, "tgkill": 131, "sigaltstack": 132, "rt_sigaction": 134,
        "rt_sigprocmask": 135, "rt_sigreturn": 139, "getrusage": 165, "gettimeofday": 169, "getpid": 172,
        "gettid": 178, "brk": 214, "munmap": 215, "mremap": 216, "mmap": 222, "mprotect": 226, "madvise": 233,
        "prlimit64": 261, "getrandom": 278, "read": 63, "write": 64, "close": 57,
    },
)  # fmt: skip
"""aarch64 uses the generic table (asm-generic/unistd.h): it has no ``time`` (the vDSO serves it)."""

ARCHES = {arch.name: arch for arch in (X86_64, AARCH64)}
_MACHINE_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


class Unsupported(Exception):
    """The filter cannot be built or installed here; the message says why."""


def this_arch() -> Arch:
    machine = platform.machine().lower()
    name = _MACHINE_ALIASES.get(machine, machine)
    if name not in ARCHES:
        known = ", ".join(ARCHES)
        raise Unsupported(f"no system call table for the {machine or 'unknown'} architecture (only {known})")
    return ARCHES[name]


def build(arch: Arch, pid: int) -> list[Instruction]:
    """The filter for a worker whose pid is `pid`, as BPF instructions (labels resolved)."""
    deny = ("ret", RET_ERRNO | errno.EPERM)
    code: list[tuple[Any, ...]] = [
        ("ld", OFFSET_ARCH),
        ("jeq", arch.audit_arch, None, "kill"),  # another ABI: its numbers mean other calls
        ("ld", OFFSET_NR),
    ]
    if arch.x32:
        code.append(("jge", X32_SYSCALL_BIT, "kill", None))
    for name in ALLOWED:
        if name in arch.numbers:
            code.append(("jeq", arch.numbers[name], "allow", None))
    for name in ON_ITSELF:
        code.append(("jeq", arch.numbers[name], f"self:{name}", None))
    code.append(deny)
    for name, also in ON_ITSELF.items():
        # The low word of args[0] must be the pid (or an allowed value), its high word 0 (both little-endian).
        code += [("label", f"self:{name}"), ("ld", OFFSET_ARGS + 4), ("jeq", 0, None, "deny"), ("ld", OFFSET_ARGS)]
        code += [("jeq", value, "allow", None) for value in (pid, *also)]
        code.append(deny)
    code += [("label", "allow"), ("ret", RET_ALLOW), ("label", "kill"), ("ret", RET_KILL_PROCESS)]
    code += [("label", "deny"), deny]
    return _assemble(code)


def _assemble(code: list[tuple[Any, ...]]) -> list[Instruction]:
    """Resolve labels into relative jumps (``None``: the next instruction)."""
    labels: dict[str, int] = {}
    position = 0
    for op in code:
        if op[0] == "label":
            labels[op[1]] = position
        else:
            position += 1
    program: list[Instruction] = []
    for op in code:
        kind = op[0]
        if kind == "label":
            continue
        here = len(program)
        if kind == "ld":
            program.append((BPF_LD_W_ABS, 0, 0, op[1]))
        elif kind == "ret":
            program.append((BPF_RET_K, 0, 0, op[1]))
        else:
            opcode = BPF_JEQ_K if kind == "jeq" else BPF_JGE_K
            jumps = [0 if target is None else labels[target] - here - 1 for target in op[2:4]]
            if not all(0 <= jump <= 255 for jump in jumps):
                raise ValueError(f"jump out of range in {op!r}")
            program.append((opcode, jumps[0], jumps[1], op[1]))
    return program


class _SockFilter(ctypes.Structure):
    _fields_ = (("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32))


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter)))


_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


def install(program: list[Instruction], libc: Any | None = None) -> None:
    """Load `program` as this thread's seccomp filter (``no_new_privs`` must be set, or CAP_SYS_ADMIN held).

    Raises `Unsupported` with the kernel's reason when it refuses.
    """
    if libc is None:
        name = ctypes.util.find_library("c")
        if not name:
            raise Unsupported("no C library to call prctl with")
        libc = ctypes.CDLL(name, use_errno=True)
    filters = (_SockFilter * len(program))(*(_SockFilter(*instruction) for instruction in program))
    fprog = _SockFprog(len(program), filters)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        number = ctypes.get_errno()
        name = errno.errorcode.get(number, str(number))
        raise Unsupported(f"the kernel refused the filter: {name} ({os.strerror(number)})")


def describe(arch: Arch) -> str:
    allowed = sum(name in arch.numbers for name in ALLOWED) + len(ON_ITSELF)
    return (
        f"{arch.name}: {allowed} system calls allowed ({', '.join(ON_ITSELF)} only on the worker itself); "
        "every other fails with EPERM; a call through another ABI kills the worker"
    )
