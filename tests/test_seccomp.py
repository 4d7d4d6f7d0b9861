"""The worker's seccomp filter is data: each program is run here, instruction by instruction, by a small
classic-BPF interpreter, for x86_64 and aarch64, against the system calls a worker needs and those a fallen
program would want. Then the real thing: the filter installed in a child process on this machine."""

from __future__ import annotations

import errno
import struct
import subprocess
import sys

import pytest

from attp_server.sandbox.process import seccomp
from attp_server.sandbox.process.seccomp import AARCH64, ALLOWED, RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS, X86_64

PID = 4242
EPERM = RET_ERRNO | errno.EPERM

DENIED = {
    # name: (x86_64, aarch64); None where the architecture has no such call
    "open": (2, None), "openat": (257, 56), "openat2": (437, 437), "newfstatat": (262, 79), "getdents64": (217, 61),
    "socket": (41, 198), "connect": (42, 203), "bind": (49, 200), "socketpair": (53, 199),
    "execve": (59, 221), "execveat": (322, 281), "fork": (57, None), "vfork": (58, None), "clone": (56, 220),
    "clone3": (435, 435), "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "bpf": (321, 280), "keyctl": (250, 219), "add_key": (248, 217), "mount": (165, 40), "umount2": (166, 39),
    "unshare": (272, 97), "setns": (308, 268), "tkill": (200, 130), "pidfd_open": (434, 434),
    "pidfd_send_signal": (424, 424), "pidfd_getfd": (438, 438), "open_by_handle_at": (304, 265),
    "io_uring_setup": (425, 425), "memfd_create": (319, 279), "userfaultfd": (323, 282),
    "perf_event_open": (298, 241), "dup": (32, 23), "ioctl": (16, 29), "chdir": (80, 49), "getppid": (110, 173),
    "setuid": (105, 146), "prctl": (157, 167), "seccomp": (317, 277), "landlock_create_ruleset": (444, 444),
}  # fmt: skip


def run_bpf(program: list[seccomp.Instruction], data: bytes) -> int:
    """Classic BPF as seccomp runs it: the accumulator, absolute 32-bit loads, JEQ/JGE against constants, RET."""
    accumulator = 0
    pc = 0
    for _ in range(len(program) + 1):  # no backward jumps exist in classic BPF
        code, jt, jf, k = program[pc]
        if code == seccomp.BPF_LD_W_ABS:
            assert k % 4 == 0 and k + 4 <= len(data), f"load outside seccomp_data at {pc}"
            accumulator = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code in (seccomp.BPF_JEQ_K, seccomp.BPF_JGE_K):
            taken = accumulator == k if code == seccomp.BPF_JEQ_K else accumulator >= k
            pc += 1 + (jt if taken else jf)
        elif code == seccomp.BPF_RET_K:
            return k
        else:
            raise AssertionError(f"unknown instruction {code:#x} at {pc}")
        assert pc < len(program), "ran off the end of the program"
    raise AssertionError("no return")


def seccomp_data(arch: int, nr: int, *args: int) -> bytes:
    padded = [*args, *[0] * (6 - len(args))]
    return struct.pack("<iIQ6Q", nr, arch, 0x1000, *(a & (2**64 - 1) for a in padded))


@pytest.mark.parametrize("arch", [X86_64, AARCH64], ids=lambda a: a.name)
def test_every_call_a_running_worker_makes_is_allowed(arch: seccomp.Arch) -> None:
    program = seccomp.build(arch, PID)
    for name in ALLOWED:
        if name not in arch.numbers:
            assert (arch.name, name) == ("aarch64", "time")  # served by the vDSO there
            continue
        assert run_bpf(program, seccomp_data(arch.audit_arch, arch.numbers[name], 3, 0, 0)) == RET_ALLOW, name


@pytest.mark.parametrize("arch", [X86_64, AARCH64], ids=lambda a: a.name)
def test_what_a_fallen_program_wants_fails_with_eperm(arch: seccomp.Arch) -> None:
    program = seccomp.build(arch, PID)
    index = 0 if arch is X86_64 else 1
    for name, numbers in DENIED.items():
        number = numbers[index]
        if number is None:
            continue
        assert number not in arch.numbers.values(), name
        assert run_bpf(program, seccomp_data(arch.audit_arch, number, 0, 0)) == EPERM, name
    for number in range(500):  # every number not on the allow list is refused
        if number not in arch.numbers.values():
            assert run_bpf(program, seccomp_data(arch.audit_arch, number)) == EPERM, number


@pytest.mark.parametrize("arch", [X86_64, AARCH64], ids=lambda a: a.name)
def test_signals_and_limits_only_on_the_worker_itself(arch: seccomp.Arch) -> None:
    program = seccomp.build(arch, PID)
    kill, tgkill, prlimit = (arch.numbers[n] for n in ("kill", "tgkill", "prlimit64"))
    for number in (kill, tgkill):
        assert run_bpf(program, seccomp_data(arch.audit_arch, number, PID, 9)) == RET_ALLOW
        for other in (1, PID - 1, PID + 1, 0, -1, -PID, PID | 1 << 32):
            assert run_bpf(program, seccomp_data(arch.audit_arch, number, other, 9)) == EPERM, other
    for own in (0, PID):
        assert run_bpf(program, seccomp_data(arch.audit_arch, prlimit, own, 0)) == RET_ALLOW
    for other in (1, PID + 1, 1 << 32):
        assert run_bpf(program, seccomp_data(arch.audit_arch, prlimit, other, 0)) == EPERM


def test_another_abi_kills_the_worker() -> None:
    x86 = seccomp.build(X86_64, PID)
    i386 = 0x40000003  # AUDIT_ARCH_I386: int 0x80 from a 64-bit process, where 0 is restart_syscall...
    assert run_bpf(x86, seccomp_data(i386, X86_64.numbers["read"])) == RET_KILL_PROCESS
    assert run_bpf(x86, seccomp_data(X86_64.audit_arch, 0x40000000 | 0)) == RET_KILL_PROCESS  # x32 read
    assert run_bpf(x86, seccomp_data(AARCH64.audit_arch, 63)) == RET_KILL_PROCESS
    arm = seccomp.build(AARCH64, PID)
    assert run_bpf(arm, seccomp_data(0x40000028, 3)) == RET_KILL_PROCESS  # AUDIT_ARCH_ARM (32-bit compat)


def test_an_unknown_architecture_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seccomp.platform, "machine", lambda: "riscv64")
    with pytest.raises(seccomp.Unsupported, match=r"riscv64 architecture \(only x86_64, aarch64\)"):
        seccomp.this_arch()


INSTALLED = """
import ctypes, errno, os, signal, sys
from attp_server.sandbox.process import seccomp
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs
seccomp.install(seccomp.build(seccomp.this_arch(), os.getpid()), libc)
results = []
for attempt in (lambda: os.open("/etc/hostname", os.O_RDONLY), lambda: os.stat("/"), os.fork,
                lambda: os.kill(1, 0), lambda: libc.socket(2, 1, 0)):
    try:
        value = attempt()
        results.append("ALLOWED" if value is None or value >= 0 else f"errno {ctypes.get_errno()}")
    except OSError as exc:
        results.append(f"errno {exc.errno}")
os.kill(os.getpid(), 0)  # itself: allowed
results.append(str(os.getpid() > 0))
os.write(1, (" ".join(results) + "\\n").encode())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp is Linux's")
def test_the_installed_filter_refuses_on_this_machine() -> None:
    done = subprocess.run([sys.executable, "-c", INSTALLED], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [*["errno", str(errno.EPERM)] * 4, "errno", str(errno.EPERM), "True"], done.stdout
