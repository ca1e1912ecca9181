"""Starting one sandboxed process and collecting how it ended.

A run gets `_confine` and `_boot` as its `-c` program with the setup's wrapper (unshare) before the
interpreter; the program's text in an anonymous file (a descriptor, nothing on disk); stdin,
stdout and stderr as anonymous temporary files; the write end of an `alive` pipe held by ttc (the
child exits if it finds ttc gone); its own session and process group; its cgroup, entered before
exec; and the limits of `_limits` in `preexec_fn`. With a private root the scratch directory is a
tmpfs inside the run's mount namespace; otherwise it is a host directory under a random name in a
directory the program can cross but not list, removed through descriptors (`_remove`) once no
process of the run is left.

At the deadline, and again once the program has exited, everything is killed: the cgroup (which
holds whatever the program forked or setsid-ed), the PID namespace's init (the kernel then kills
the whole namespace), and the process group.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import select
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from ._cgroup import Cgroups, Group
from ._limits import NPROC, cpu_limit, environment, pdeathsig, rlimits
from ._proc import stat_fields
from ._remove import owned_name, remove_tree
from ._result import RunOptions, SandboxResult

__all__ = ["BOOT_SOURCE", "PROCESS_UIDS", "Setup", "filesystem", "launch", "run_uid"]

_log = logging.getLogger("ttc")

_STDERR_TAIL = 64 << 10
_UNSHARE_SIGKILL = "unshare: sigprocmask unblock failed: Invalid argument\n"
_FUTURE = "from __future__ import annotations\n"


def _read_boot() -> str:
    # Passed as source, never imported by the child: the program must not be able to import ttc.
    here = os.path.dirname(os.path.abspath(__file__))
    texts = []
    for name in ("_confine.py", "_boot.py"):
        with open(os.path.join(here, name), encoding="utf-8") as f:
            texts.append(f.read())
    return texts[0] + "\n" + texts[1].replace(_FUTURE, "", 1)


BOOT_SOURCE = _read_boot()
"""The child's first program (`_confine`, then `_boot`), as its `-c` text."""


@dataclass(frozen=True, slots=True)
class Setup:
    """How this machine runs sandboxes: chosen once by probing."""

    python: str
    wrapper: tuple[str, ...]  # the unshare command line before the interpreter, or ()
    namespaces: tuple[str, ...]
    uid: int  # the uid the program runs as (as the kernel sees it, outside any namespace)
    # What the program's interpreter does first, as the namespace's root: "drop" to uid,
    # "nest" into a user namespace without power over the mounts, or "none".
    boot: str = "none"
    root: bool = False  # a private root (`_confine`; needs a mount namespace)
    bpf: bytes = b""  # the seccomp filter (`_seccomp`), or none
    cgroups: Cgroups | None = None
    # Whether the wrapper must be given the parent-death signal between fork and exec (no
    # setpriv here): a slower fork, but unshare dies with ttc either way.
    pdeathsig_preexec: bool = False
    landlock: int = 0  # the Landlock ABI the file allow-list is made with (`_confine`), or 0
    # Whether each ttc process runs its programs as a uid of its own (`run_uid`): root without
    # a pids cgroup, so that programs of other processes count nothing against RLIMIT_NPROC.
    own_uid: bool = False


PROCESS_UIDS = 1 << 30
"""The first of the uids a process's programs run as when `Setup.own_uid` (plus the pid): far
above any account's uid, and one per ttc process, as a process runs one program at a time."""


def run_uid(setup: Setup) -> int:
    """The uid this process's programs run as under `setup`."""
    return PROCESS_UIDS + os.getpid() if setup.own_uid else setup.uid


@dataclass(frozen=True, slots=True)
class _Ended:
    """How the process ended, before it is judged: what `SandboxResult` is made from."""

    exited: bool
    returncode: int
    cpu_s: float
    wall_s: float
    stdout: bytes
    truncated: bool
    stderr: bytes
    pid: int


def launch(setup: Setup, code: str, stdin: str, options: RunOptions) -> SandboxResult:
    """Runs `code` on `stdin` once under `setup` and `options` (see `run_python`)."""
    group = setup.cgroups.group(options.memory_mb << 20, NPROC + 8) if setup.cgroups else None
    outer = None
    try:
        if setup.root:
            cwd, scratch = "/", "/tmp"
        else:
            outer, scratch = _scratch(setup)
            cwd = scratch
        ended = _run(setup, _Start(code, stdin, cwd, scratch), options, group)
        oom = group is not None and group.oom_kills() > group.oom_before
    finally:
        if setup.cgroups is not None and group is not None:
            setup.cgroups.release(group)
        if outer is not None:
            remove_tree(outer)
    return _result(setup, ended, cpu_limit(options.timeout_s, options.cpu_s), oom)


@dataclass(frozen=True, slots=True)
class _Start:
    code: str
    stdin: str
    cwd: str  # where the interpreter starts (the host's scratch directory, or / for a root)
    scratch: str  # the scratch directory as the program sees it


def _scratch(setup: Setup) -> tuple[str, str]:
    """A host scratch directory owned by the program's uid: (its hidden parent, itself). The
    parent's name tells which ttc process made it, so that a later one can sweep it."""
    outer = tempfile.mkdtemp(prefix=owned_name())
    scratch = os.path.join(outer, secrets.token_hex(16))
    os.mkdir(scratch, 0o700)
    uid = run_uid(setup)
    if uid != os.geteuid():
        os.chmod(outer, 0o711)
        os.chown(scratch, uid, uid)
    return outer, scratch


def _arguments(setup: Setup, options: RunOptions, alive: int, group: Group | None) -> list[str]:
    """The boot's arguments (see `_boot`): read from its descriptor, not the command line, which
    every process of the machine can read (and the program as /proc/1/cmdline)."""
    uid = run_uid(setup)
    limited = group is not None and "pids" in group.limited
    arguments = ["guard" if options.audit_guard else "noguard", filesystem(setup)]
    arguments += [setup.boot, str(uid), str(uid), str(options.memory_mb), str(alive)]
    arguments.append(setup.bpf.hex())
    pairs = rlimits(uid, options, nproc=not limited)
    arguments.append(",".join(f"{which}={value}" for which, value in pairs))
    arguments.append(str(setup.landlock))
    cgroups = group.procs_files if group is not None else ()
    arguments += [str(len(cgroups)), *cgroups]
    if filesystem(setup) != "host":
        arguments += _hidden(options.hide)
    return arguments


def _argv(setup: Setup, source_fd: int) -> list[str]:
    """The command line: the wrapper, the interpreter, the boot and the descriptor it reads its
    arguments and the program from."""
    return [*setup.wrapper, setup.python, "-I", "-S", "-B", "-c", BOOT_SOURCE, str(source_fd)]


def filesystem(setup: Setup) -> str:
    """What the program sees: "root" (a private root), "ns" (the host's files in a mount
    namespace: the inputs named in `hide` covered), "host" (the host's, nothing covered)."""
    if setup.root:
        return "root"
    return "ns" if "mount" in setup.namespaces else "host"


def _hidden(paths: tuple[str, ...]) -> list[str]:
    """What to cover in a private root: each path named, by its real path (links resolved)."""
    found: list[str] = []
    for path in paths:
        for candidate in (os.path.abspath(path), os.path.realpath(path)):
            if candidate not in found and candidate != "/":
                found.append(candidate)
    return found


def _run(setup: Setup, start: _Start, options: RunOptions, group: Group | None) -> _Ended:
    """Starts the process, waits for it up to the deadline, kills everything and reaps it."""
    alive_r, alive_w = os.pipe()
    arguments = "\0".join(_arguments(setup, options, alive_r, group))
    header = arguments.encode("utf-8", "surrogateescape")
    # A program (or input) that is not valid Unicode reaches the child as such: its compiler
    # (or the program) refuses it there, and the caller gets a failed run, not an exception.
    prelude = options.prelude.encode("utf-8", "surrogatepass")
    source = b"%d\n%s%d\n%s" % (len(header), header, len(prelude), prelude)
    source += start.code.encode("utf-8", "surrogatepass")
    with (
        tempfile.TemporaryFile() as fsrc,
        tempfile.TemporaryFile() as fin,
        tempfile.TemporaryFile() as fout,
        tempfile.TemporaryFile() as ferr,
    ):
        fsrc.write(source)
        fsrc.flush()
        fsrc.seek(0)
        fin.write(start.stdin.encode("utf-8", "surrogatepass"))
        fin.seek(0)
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                _argv(setup, fsrc.fileno()),
                stdin=fin,
                stdout=fout,
                stderr=ferr,
                cwd=start.cwd,
                env=environment(start.scratch),
                start_new_session=True,
                pass_fds=(fsrc.fileno(), alive_r),
                preexec_fn=pdeathsig if setup.pdeathsig_preexec else None,
            )
        except BaseException:
            os.close(alive_w)
            raise
        finally:
            os.close(alive_r)
        try:
            exited = _exits_within(proc.pid, options.timeout_s)
        finally:
            # Exited or not, kill everything before reaping the leader: its pid (and so the
            # group id) cannot be reused while it is an unreaped zombie.
            _kill_all(proc.pid, group, wait=not setup.root)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            os.close(alive_w)
        wall = time.monotonic() - started
        out, truncated = _read_head(fout, options.max_output_bytes)
        err = _read_tail(ferr, _STDERR_TAIL)
    cpu = usage.ru_utime + usage.ru_stime
    return _Ended(exited, proc.returncode, cpu, wall, out, truncated, err, proc.pid)


def _result(setup: Setup, ended: _Ended, cpu_limit: int, oom: bool) -> SandboxResult:
    stderr = ended.stderr.decode("utf-8", "replace")
    returncode = ended.returncode
    if setup.wrapper and returncode == 1 and stderr.endswith(_UNSHARE_SIGKILL):
        # unshare passes on its child's death by a signal by raising it on itself, which
        # fails for SIGKILL: it exits 1 with this message instead.
        returncode = -signal.SIGKILL
        stderr = stderr[: -len(_UNSHARE_SIGKILL)]
    return SandboxResult(
        returncode=returncode,
        stdout=ended.stdout.decode("utf-8", "replace"),
        stderr=stderr,
        timed_out=not ended.exited,
        killed_reason="memory" if oom else _reason(ended, returncode, stderr, cpu_limit),
        stdout_truncated=ended.truncated,
        wall_s=ended.wall_s,
        pid=ended.pid,
    )


def _reason(ended: _Ended, returncode: int, stderr: str, cpu_limit: int) -> str | None:
    """Why the run was stopped (see `SandboxResult.killed_reason`), or None."""
    if not ended.exited:
        return "timeout"
    if returncode != 0 and ended.cpu_s >= cpu_limit - 0.2:
        return "cpu"
    if returncode < 0:
        return f"signal {signal.Signals(-returncode).name}"
    if returncode != 0 and "MemoryError" in "\n".join(stderr.rstrip().splitlines()[-3:]):
        return "memory"
    if ended.truncated:
        return "output"
    return None


def _exits_within(pid: int, timeout_s: float) -> bool:
    """Whether `pid` exits within `timeout_s`; it is left unreaped (a zombie keeps its pgid)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(max(0.0, timeout_s) * 1000))
        finally:
            os.close(fd)
    deadline = time.monotonic() + timeout_s
    pause = 0.001
    while True:  # no pidfd (Linux < 5.3): poll without reaping
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)


def _kill_all(pid: int, group: Group | None, wait: bool) -> None:
    """Kills the run: its cgroup, the PID namespace's init (a child of unshare), its group; then
    (`wait`) waits for that init to be gone, when no cgroup says that all is."""
    if group is not None:
        group.kill()
    children = _children(pid)
    for child in children:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if wait and group is None:
        _wait_gone(children)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        return []


def _wait_gone(pids: list[int], wait_s: float = 5.0) -> None:
    """Waits until none of `pids` exists (a PID namespace's init exits once its namespace is
    empty), before anything of the run is removed."""
    deadline = time.monotonic() + wait_s
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if _running(p)]
        time.sleep(0.001)


def _running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie (which may wait long for an init that reaps)."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] != b"Z"


def _read_head(file: Any, limit: int) -> tuple[bytes, bool]:
    file.seek(0)
    data: bytes = file.read(limit + 1)
    return data[:limit], len(data) > limit


def _read_tail(file: Any, limit: int) -> bytes:
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - limit))
    data: bytes = file.read(limit)
    return data
