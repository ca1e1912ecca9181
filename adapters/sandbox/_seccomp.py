"""The seccomp-bpf filter a sandboxed program runs under: the kernel refuses what it must not do.

`filter_program()` compiles, in pure Python (no libseccomp), a classic BPF program for the machine's
architecture; `_boot` loads it with prctl(PR_SET_SECCOMP) after the interpreter is up and the
privileges are dropped, just before the program's own code runs. From then on, whatever the
program does (ctypes, a native extension, machine code of its own), the kernel answers:

    a system call of another ABI (i386 on x86_64, x32)      the process is killed
    execve, execveat                                         EPERM: no other program runs
    fork, vfork; clone without CLONE_THREAD, or with a       EPERM: threads only, no process,
      namespace flag                                           no namespace
    clone3                                                   ENOSYS (glibc falls back to clone)
    socket (any family), socketpair but SOCK_STREAM          EPERM: no network, no unix socket
    fallocate with a mode (KEEP_SIZE passes RLIMIT_FSIZE)    EPERM: no disk filled past the cap
    prctl(PR_SET_PDEATHSIG)                                  EPERM: it dies with ttc
    shmget, shmat, msgget, semget                            EPERM: no memory beyond the limits
    ptrace, process_vm_readv/writev, kcmp, pidfd_getfd       EPERM: no other process's memory
    mount, umount2, pivot_root, chroot, unshare, setns,      EPERM: the filesystem and the
      move_mount, open_tree, fsopen/fsconfig/fsmount/          namespaces stay as built
      fspick, mount_setattr, mknod(at)
    keyctl, add_key, request_key, bpf, perf_event_open,      EPERM: kernel interfaces a program
      userfaultfd, io_uring_*, memfd_create, memfd_secret,     never needs, and the usual ways
      open_by_handle_at, name_to_handle_at, fanotify_init,     into kernel bugs; memfd_create
      kexec_*, *_module, reboot, swapon/off, acct, quotactl,   would be a file that no noexec
      syslog, vhangup, sethostname, setdomainname,             mount covers
      settimeofday, clock_settime, clock_adjtime, adjtimex,
      personality, uselib, lookup_dcookie, iopl, ioperm
    anything else                                            allowed

Architectures: x86_64 and aarch64 (the numbers below are the kernel's, from asm/unistd_64.h and
asm-generic/unistd.h). Elsewhere `filter_program()` returns None and `protections()` says the
layer is missing.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Callable

__all__ = ["DENIED", "filter_program"]

DENIED = (  # noqa: SIM905  (a paragraph of names reads better than one per line)
    "execve execveat fork vfork socket ptrace process_vm_readv process_vm_writev kcmp pidfd_getfd "
    "mount umount2 pivot_root chroot unshare setns move_mount open_tree fsopen fsconfig fsmount "
    "fspick mount_setattr mknod mknodat keyctl add_key request_key bpf perf_event_open "
    "userfaultfd io_uring_setup io_uring_enter io_uring_register memfd_create memfd_secret "
    "open_by_handle_at name_to_handle_at fanotify_init kexec_load kexec_file_load init_module "
    "finit_module delete_module reboot swapon swapoff acct quotactl syslog vhangup sethostname "
    "setdomainname settimeofday clock_settime clock_adjtime adjtimex personality uselib "
    "lookup_dcookie iopl ioperm shmget shmat msgget semget"
).split()
"""The system calls refused with EPERM (those an architecture has)."""

# name -> (x86_64, aarch64); None where the architecture has no such call.
_NUMBERS: dict[str, tuple[int | None, int | None]] = {
    "execve": (59, 221),
    "execveat": (322, 281),
    "fork": (57, None),
    "vfork": (58, None),
    "clone": (56, 220),
    "clone3": (435, 435),
    "socket": (41, 198),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "kcmp": (312, 272),
    "pidfd_getfd": (438, 438),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "unshare": (272, 97),
    "setns": (308, 268),
    "move_mount": (429, 429),
    "open_tree": (428, 428),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "mknod": (133, None),
    "mknodat": (259, 33),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "memfd_create": (319, 279),
    "memfd_secret": (447, 447),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "fanotify_init": (300, 262),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "syslog": (103, 116),
    "vhangup": (153, 58),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "personality": (135, 92),
    "uselib": (134, None),
    "lookup_dcookie": (212, 18),
    "iopl": (172, None),
    "ioperm": (173, None),
    "shmget": (29, 194),
    "shmat": (30, 196),
    "msgget": (68, 186),
    "semget": (64, 190),
    "socketpair": (53, 199),
    "fallocate": (285, 47),
    "prctl": (157, 167),
}
# machine -> (column in _NUMBERS, AUDIT_ARCH_*, first number of a foreign ABI sharing the arch)
_ARCHES = {
    "x86_64": (0, 0xC000003E, 0x40000000),  # x32 calls carry bit 30
    "aarch64": (1, 0xC00000B7, None),
}

# Classic BPF, as the kernel's filter.h spells it.
_LD_ABS_W = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_AND = 0x54
_RET = 0x06
_KILL_PROCESS = 0x80000000
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
# struct seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8 i (the low half on little-endian)
_NR, _ARCH, _ARG0 = 0, 4, 16
_CLONE_THREAD = 0x00010000
_CLONE_NAMESPACES = 0x7E020000  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
_PR_SET_PDEATHSIG = 1
_SOCK_STREAM = 1


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _argument_checks(number: Callable[[str], int | None], eperm: int) -> list[bytes]:
    """The calls allowed with some arguments only; each block leaves the accumulator changed, so
    the caller loads the call's number again after them."""

    def when(name: str, arg: int, test: list[bytes]) -> list[bytes]:
        # if nr == name: load the argument's low half, run `test` (which returns); else skip it
        block = [_op(_LD_ABS_W, _ARG0 + 8 * arg), *test]
        return [_op(_LD_ABS_W, _NR), _op(_JEQ, number(name) or 0, jf=len(block)), *block]

    return [
        # fallocate: mode 0 only (KEEP_SIZE and the like would pass RLIMIT_FSIZE)
        *when("fallocate", 1, [_op(_JEQ, 0, jt=1), _op(_RET, eperm), _op(_RET, _ALLOW)]),
        # prctl: never PR_SET_PDEATHSIG (the program would outlive ttc)
        *when(
            "prctl", 0, [_op(_JEQ, _PR_SET_PDEATHSIG, jf=1), _op(_RET, eperm), _op(_RET, _ALLOW)]
        ),
        # socketpair: SOCK_STREAM only (a datagram pair could send to any named socket)
        *when(
            "socketpair",
            1,
            [_op(_AND, 0xF), _op(_JEQ, _SOCK_STREAM, jt=1), _op(_RET, eperm), _op(_RET, _ALLOW)],
        ),
    ]


def filter_program(machine: str | None = None) -> bytes | None:
    """The filter's instructions (struct sock_filter[], native byte order) for `machine` (default:
    this one), or None where the architecture is not known here."""
    arch = _ARCHES.get(machine or os.uname().machine)
    if arch is None:
        return None
    column, audit_arch, foreign = arch
    eperm = _ERRNO | errno.EPERM

    def number(name: str) -> int | None:
        return _NUMBERS[name][column]

    ops = [
        _op(_LD_ABS_W, _ARCH),
        _op(_JEQ, audit_arch, jt=1),
        _op(_RET, _KILL_PROCESS),
        _op(_LD_ABS_W, _NR),
    ]
    if foreign is not None:
        ops += [_op(_JGE, foreign, jf=1), _op(_RET, _KILL_PROCESS)]
    for name in DENIED:
        nr = number(name)
        if nr is not None:
            ops += [_op(_JEQ, nr, jf=1), _op(_RET, eperm)]
    ops += [_op(_JEQ, _NUMBERS["clone3"][column] or 0, jf=1), _op(_RET, _ERRNO | errno.ENOSYS)]
    ops += _argument_checks(number, eperm)
    ops += [_op(_LD_ABS_W, _NR)]
    # clone: a thread (CLONE_THREAD, no namespace flag) or nothing.
    ops += [
        _op(_JEQ, number("clone") or 0, jf=4),
        _op(_LD_ABS_W, _ARG0),
        _op(_JSET, _CLONE_NAMESPACES, jt=1),
        _op(_JSET, _CLONE_THREAD, jt=1),
        _op(_RET, eperm),
        _op(_RET, _ALLOW),
    ]
    return b"".join(ops)
