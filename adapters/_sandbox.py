"""Runs an untrusted Python program once, with its stdin, under limits; returns what it printed.

Every run gets, on any POSIX system:

- a fresh scratch directory as its working directory, HOME and TMPDIR, deleted afterwards; it
  has a random name inside a directory the program can cross but not list;
- its own session and process group (`start_new_session`): at the deadline, and again once the
  program has exited, the whole group is killed with `os.killpg(SIGKILL)`, so its forks die too;
- resource limits set in `preexec_fn`, soft = hard so the program cannot raise them:
  RLIMIT_CPU (the CPU budget; SIGKILL at the limit), RLIMIT_AS (memory), RLIMIT_NPROC (forks),
  RLIMIT_FSIZE (the output cap + 1 byte, per file), RLIMIT_NOFILE (64), RLIMIT_CORE (0);
- an environment with nothing inherited: PATH, HOME, TMPDIR, LANG and LC_ALL only, so no API key
  of the parent is visible;
- `python -I -S -B`: isolated mode ignores PYTHON* variables and the user's site directory, -S
  skips site-packages, -B writes no bytecode;
- stdin, stdout and stderr as anonymous temporary files, not pipes: a program printing forever
  stops at RLIMIT_FSIZE, and only the first `max_output_bytes` of stdout and the last 64 KiB of
  stderr are read back;
- an audit-hook guard (`sys.addaudithook`) installed before the program runs, unless
  `audit_guard=False`: it refuses socket creation, connect, bind and name lookups; fork, exec,
  spawn, `subprocess`, `os.system` and signals to other processes; ctypes and
  `_posixsubprocess`; raising resource limits; opening a file for writing, and removing,
  renaming, linking or chmod-ing a path, outside the scratch directory (and more than 64 files
  opened for writing inside it); reading another process's /proc entries; introspection that
  would reach the hook itself (`gc.get_referrers`, setting `__code__`/`__defaults__`). CPython's
  audit hooks are not a security boundary (pure-Python code can monkeypatch the stdlib the
  guard calls): the guard is defense in depth and a clear error message, the OS layers below are
  the boundary.

Depending on the OS (probed once per process, on first use; `protections()` reports the outcome):

- when running as root, the program runs as uid/gid 65534 (nobody) with no supplementary groups:
  it cannot write outside its scratch directory but for world-writable places, cannot read
  root's files, and RLIMIT_NPROC (which the kernel never enforces for root) applies;
- `unshare` from util-linux, if present and permitted: new network namespace (no interface but
  a loopback that is down: no connection can leave or reach the host), PID namespace (the program
  is its init: when it exits, the kernel kills every process it left, even those that called
  setsid), mount namespace with its own /proc (no other process is visible), and IPC namespace.
  As root, unshare also does the uid drop (`--setuid/--setgid`); as another user it needs
  unprivileged user namespaces (`--map-root-user`). Without unshare the program shares the
  host's network and PID space and only the audit guard keeps it off the network. (Being a PID
  namespace's init, the program ignores signals it sends itself without a handler; a death by
  SIGKILL, which unshare cannot pass on, is recognised from unshare's message.)
- Linux prctl: PR_SET_NO_NEW_PRIVS (no privilege gain through setuid binaries) and
  PR_SET_PDEATHSIG (the sandbox dies if the process that started it dies).

Not protected: reads of world-readable files; writes to world-writable directories (/tmp,
/dev/shm) when the audit guard is off or bypassed; disk use inside the scratch directory
beyond the guard's count of files times RLIMIT_FSIZE; the host's CPU while a run lasts (with
the guard off, up to RLIMIT_NPROC processes may spin until the deadline); kernel exploits.
Call `run_python` from one thread per process (`preexec_fn` is not safe to run while other
threads fork), as the verifier worker processes do.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import resource
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["SandboxResult", "protections", "run_python"]

_NOBODY = 65534
_NOFILE = 64
_NPROC = 64
_STDERR_TAIL = 64 << 10
_UNSHARE_FLAGS = ("--net", "--ipc", "--pid", "--fork", "--kill-child", "--mount-proc")
_NAMESPACES = ("net", "ipc", "pid", "mount")
_UNSHARE_SIGKILL = "unshare: sigprocmask unblock failed: Invalid argument\n"
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38

try:  # Linux only: prctl for no-new-privs and the parent-death signal
    _PRCTL: Any = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """How one run ended and what it printed (decoded as UTF-8, invalid bytes replaced).

    killed_reason is None when the program ran to its end (whatever its exit status), else
    "timeout" (wall clock), "cpu" (RLIMIT_CPU), "memory" (MemoryError under RLIMIT_AS),
    "output" (stdout beyond the cap) or "signal SIGxxx".
    """

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    killed_reason: str | None
    stdout_truncated: bool = False
    wall_s: float = 0.0
    pid: int = 0  # the process (and process group) started, for diagnostics

    @property
    def ok(self) -> bool:
        """Whether the program exited with status 0 within every limit."""
        return self.returncode == 0 and self.killed_reason is None


@dataclass(frozen=True, slots=True)
class _Setup:
    """How this machine runs sandboxes: chosen once by probing."""

    python: str
    wrapper: tuple[str, ...]  # the unshare command line before the interpreter, or ()
    namespaces: tuple[str, ...]
    drop: tuple[int, int] | None  # uid, gid that preexec_fn switches to (when unshare does not)
    uid: int  # the uid the program runs as


# The program's process runs this with `-c`: it reads main.py (and prelude.py), installs the
# guard, then executes both in __main__. Everything it defines is local to _ttc_boot, and the
# hook keeps its state in keyword defaults, which the guard forbids changing.
_BOOT = r"""
def _ttc_boot():
    import builtins, os, sys

    def read(name):
        with open(name, "rb") as f:
            return compile(f.read(), name, "exec", dont_inherit=True)

    codes = [read("prelude.py")] if os.path.exists("prelude.py") else []
    codes.append(read("main.py"))
    if sys.argv[1:2] == ["guard"]:
        scratch = os.path.realpath(os.getcwd())
        path_events = {
            "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1),
            "os.symlink": (1,), "os.link": (1,), "os.chmod": (0,), "os.chown": (0,),
            "os.truncate": (0,), "os.utime": (0,), "os.setxattr": (0,),
            "os.removexattr": (0,), "os.chflags": (0,), "shutil.rmtree": (0,),
        }

        def hook(event, args, *, _deny=DENY, _imports=DENY_IMPORTS, _paths=path_events,
                 _scratch=scratch, _prefix=scratch + os.sep, _pid=os.getpid(),
                 _writes=os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
                 _budget=[64], _realpath=os.path.realpath, _join=os.path.join,
                 _getcwd=os.getcwd, _fspath=os.fspath, _fsdecode=os.fsdecode,
                 _isdir=os.path.isdir, _int=int, _bytes=bytes, _isinstance=isinstance,
                 _error=PermissionError,
                 _devices=frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})):
            def path_of(value):
                value = _fsdecode(value) if _isinstance(value, _bytes) else _fspath(value)
                return value if value.startswith("/") else _join(_getcwd(), value)

            def inside(path):
                real = _realpath(path)
                return real == _scratch or real.startswith(_prefix)

            if event in _deny:
                raise _error(f"sandbox: {event} is not allowed")
            if event == "import":
                if args[0] in _imports:
                    raise _error(f"sandbox: importing {args[0]} is not allowed")
            elif event == "open":
                if _isinstance(args[0], _int):
                    return
                path = path_of(args[0])
                if args[2] & _writes:
                    if path in _devices:
                        return
                    if not inside(path):
                        raise _error(f"sandbox: writing {path} is not allowed")
                    _budget[0] -= 1
                    if _budget[0] < 0:
                        raise _error("sandbox: too many files opened for writing")
                elif path.startswith("/proc/"):
                    head = path[6:].split("/", 1)[0]
                    if head.isdigit() and _int(head) != _pid:
                        raise _error(f"sandbox: reading {path} is not allowed")
                elif args[1] is None and not inside(path) and _isdir(path):
                    # os.open of a directory gives a dir_fd for *at() calls the guard cannot see
                    raise _error(f"sandbox: opening the directory {path} is not allowed")
            elif event in _paths:
                for index in _paths[event]:
                    value = args[index]
                    if not _isinstance(value, _int) and not inside(path_of(value)):
                        raise _error(f"sandbox: {event} on {value!r} is not allowed")
            elif event == "os.kill":
                if args[0] != _pid:
                    raise _error("sandbox: signalling another process is not allowed")
            elif event == "object.__setattr__":
                if args[1] in ("__code__", "__defaults__", "__kwdefaults__"):
                    raise _error(f"sandbox: setting {args[1]} is not allowed")

        sys.addaudithook(hook)
    sys.argv[:] = ["main.py"]
    # -S skips site, which is what defines exit() and quit(); programs call them.
    builtins.exit = builtins.quit = sys.exit
    sys.set_int_max_str_digits(0)
    del globals()["_ttc_boot"], globals()["DENY"], globals()["DENY_IMPORTS"]
    return codes


__file__ = "main.py"
for _ttc_code in _ttc_boot():
    exec(_ttc_code)
"""

_DENY = (
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.killpg",
    "subprocess.Popen",
    "pty.spawn",
    "socket.__new__",
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyname_ex",
    "socket.gethostbyaddr",
    "socket.getnameinfo",
    "socket.sethostname",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.dlsym/handle",
    "ctypes.cdata",
    "ctypes.cdata/buffer",
    "ctypes.call_function",
    "resource.setrlimit",
    "resource.prlimit",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
)
_DENY_IMPORTS = ("_posixsubprocess", "_ctypes", "ctypes")
_BOOT_SOURCE = (
    f"DENY = frozenset({sorted(_DENY)!r})\n"
    f"DENY_IMPORTS = frozenset({sorted(_DENY_IMPORTS)!r})\n"
    f"{_BOOT}"
)


def _preexec(limits: tuple[tuple[int, int], ...], drop: tuple[int, int] | None) -> None:
    # Runs in the child between fork and exec: only system calls, no imports, no allocation
    # worth speaking of.
    for which, value in limits:
        resource.setrlimit(which, (value, value))
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        _PRCTL(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if os.geteuid() == 0:
        os.setgroups([])
    if drop is not None:
        os.setgid(drop[1])
        os.setuid(drop[0])


def _env(scratch: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": scratch,
        "TMPDIR": scratch,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }


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


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _remove_tree(path: str) -> None:
    def retry(func: Callable[[str], object], failed: str, _exc: object) -> None:
        # A program may leave a directory it owns without permissions (only matters when the
        # sandbox does not run as root).
        try:
            os.chmod(os.path.dirname(failed), 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, 0o700)
            func(failed)
        except OSError:
            pass

    shutil.rmtree(path, onerror=retry)


def _read_head(file: Any, limit: int) -> tuple[bytes, bool]:
    file.seek(0)
    data: bytes = file.read(limit + 1)
    return data[:limit], len(data) > limit


def _read_tail(file: Any, limit: int) -> bytes:
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - limit))
    data: bytes = file.read(limit)
    return data


def _launch(
    setup: _Setup,
    code: str,
    stdin: str,
    *,
    timeout_s: float,
    memory_mb: int,
    cpu_s: float | None,
    max_output_bytes: int,
    prelude: str,
    audit_guard: bool,
) -> SandboxResult:
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if memory_mb < 16:
        raise ValueError(f"memory_mb must be >= 16, got {memory_mb}")
    cpu_limit = max(1, math.ceil(timeout_s if cpu_s is None else cpu_s))
    limits = (
        (resource.RLIMIT_CPU, cpu_limit),
        (resource.RLIMIT_AS, memory_mb << 20),
        (resource.RLIMIT_NPROC, _NPROC),
        (resource.RLIMIT_FSIZE, max_output_bytes + 1),
        (resource.RLIMIT_NOFILE, _NOFILE),
        (resource.RLIMIT_CORE, 0),
    )
    # The scratch directory sits, under a random name, in a directory the program may cross but
    # not list: another sandbox running as the same uid cannot find it.
    outer = tempfile.mkdtemp(prefix="ttc-sandbox-")
    scratch = os.path.join(outer, secrets.token_hex(16))
    try:
        os.mkdir(scratch, 0o700)
        with open(os.path.join(scratch, "main.py"), "w", encoding="utf-8") as f:
            f.write(code)
        if prelude:
            with open(os.path.join(scratch, "prelude.py"), "w", encoding="utf-8") as f:
                f.write(prelude)
        if setup.uid != os.geteuid():
            os.chmod(outer, 0o711)
            os.chown(scratch, setup.uid, setup.uid)
        argv = [*setup.wrapper, setup.python, "-I", "-S", "-B", "-c", _BOOT_SOURCE]
        argv.append("guard" if audit_guard else "noguard")
        with (
            tempfile.TemporaryFile() as fin,
            tempfile.TemporaryFile() as fout,
            tempfile.TemporaryFile() as ferr,
        ):
            fin.write(stdin.encode("utf-8"))
            fin.seek(0)
            started = time.monotonic()
            proc = subprocess.Popen(
                argv,
                stdin=fin,
                stdout=fout,
                stderr=ferr,
                cwd=scratch,
                env=_env(scratch),
                start_new_session=True,
                preexec_fn=functools.partial(_preexec, limits, setup.drop),
            )
            try:
                exited = _exits_within(proc.pid, timeout_s)
            finally:
                # Exited or not, kill the whole group before reaping the leader: its pid (and
                # so the group id) cannot be reused while it is an unreaped zombie.
                _kill_group(proc.pid)
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
            wall = time.monotonic() - started
            out, truncated = _read_head(fout, max_output_bytes)
            err = _read_tail(ferr, _STDERR_TAIL)
    finally:
        _remove_tree(outer)
    stderr = err.decode("utf-8", "replace")
    returncode = proc.returncode
    if setup.wrapper and returncode == 1 and stderr.endswith(_UNSHARE_SIGKILL):
        # unshare passes on its child's death by a signal by raising it on itself, which
        # fails for SIGKILL: it exits 1 with this message instead.
        returncode = -signal.SIGKILL
        stderr = stderr[: -len(_UNSHARE_SIGKILL)]
    reason: str | None = None
    if not exited:
        reason = "timeout"
    elif returncode != 0 and usage.ru_utime + usage.ru_stime >= cpu_limit - 0.2:
        reason = "cpu"
    elif returncode < 0:
        reason = f"signal {signal.Signals(-returncode).name}"
    elif returncode != 0 and "MemoryError" in "\n".join(stderr.rstrip().splitlines()[-3:]):
        reason = "memory"
    elif truncated:
        reason = "output"
    return SandboxResult(
        returncode=returncode,
        stdout=out.decode("utf-8", "replace"),
        stderr=stderr,
        timed_out=not exited,
        killed_reason=reason,
        stdout_truncated=truncated,
        wall_s=wall,
        pid=proc.pid,
    )


def run_python(
    code: str,
    stdin: str,
    *,
    timeout_s: float,
    memory_mb: int = 512,
    cpu_s: float | None = None,
    max_output_bytes: int = 1 << 20,
    prelude: str = "",
    audit_guard: bool = True,
) -> SandboxResult:
    """Runs the Python program `code` on `stdin` in a sandbox (see the module docstring).

    timeout_s: wall-clock limit; cpu_s: CPU-time limit (default: timeout_s, rounded up);
    memory_mb: address-space limit; max_output_bytes: stdout (and any file written) is cut there;
    prelude: source executed in the same namespace just before `code` (tracebacks keep the
    program's own line numbers); audit_guard=False leaves only the OS protections (for tests).
    """
    return _launch(
        _setup(),
        code,
        stdin,
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        cpu_s=cpu_s,
        max_output_bytes=max_output_bytes,
        prelude=prelude,
        audit_guard=audit_guard,
    )


def _candidate_pythons() -> list[str]:
    # The venv's interpreter may live where the unprivileged uid cannot read (e.g. under
    # /root): the system interpreter is the fallback. The program never needs this venv.
    found = [
        os.path.realpath(sys.executable),
        os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
        "/usr/bin/python3",
        "/usr/local/bin/python3",
    ]
    names = dict.fromkeys(path for path in found if path and os.access(path, os.X_OK))
    return list(names)


def _probe(setup: _Setup) -> bool:
    """Whether `setup` runs a trivial program on Python >= 3.10."""
    try:
        result = _launch(
            setup,
            "import sys\nprint(sys.version_info >= (3, 10))",
            "",
            timeout_s=20.0,
            memory_mb=512,
            cpu_s=None,
            max_output_bytes=4096,
            prelude="",
            audit_guard=True,
        )
    except OSError:
        return False
    return result.ok and result.stdout.strip() == "True"


def _make_setup(allow_unshare: bool = True) -> _Setup:
    """The strongest setup that works here: unshare if allowed, the uid drop when root."""
    root = os.geteuid() == 0
    uid = _NOBODY if root else os.geteuid()
    plain = _Setup("", (), (), (_NOBODY, _NOBODY) if root else None, uid)
    variants = []
    unshare = shutil.which("unshare", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if allow_unshare and unshare is not None:
        if root:
            ids = ("--setuid", str(_NOBODY), "--setgid", str(_NOBODY))
            variants.append(
                _Setup("", (unshare, *_UNSHARE_FLAGS, *ids, "--"), _NAMESPACES, None, uid)
            )
        else:
            userns = (unshare, "--map-root-user", *_UNSHARE_FLAGS, "--")
            variants.append(_Setup("", userns, ("user", *_NAMESPACES), None, uid))
    variants.append(plain)
    for python in _candidate_pythons():
        for variant in variants:
            candidate = replace(variant, python=python)
            if _probe(candidate):
                return candidate
    raise RuntimeError(
        "sandbox: no Python interpreter runs under the sandbox's limits and uid; tried "
        + ", ".join(_candidate_pythons())
    )


@functools.cache
def _setup() -> _Setup:
    return _make_setup()


def protections() -> dict[str, Any]:
    """What the sandbox enforces on this machine (probes on first use)."""
    setup = _setup()
    return {
        "python": setup.python,
        "namespaces": list(setup.namespaces),
        "uid": setup.uid,
        "uid_dropped": setup.uid != os.geteuid() or "user" in setup.namespaces,
        "rlimits": ["CPU", "AS", "NPROC", "FSIZE", "NOFILE", "CORE"],
        "nproc_enforced": setup.uid != 0,
        "prctl": _PRCTL is not None,
        "audit_guard": True,
        "fresh_env": True,
        "isolated_python": True,
    }
