"""Runs an untrusted Python program once, with its stdin, under limits; returns what it printed.

Every run gets, on any POSIX system:

- a fresh scratch directory as its working directory, HOME and TMPDIR, deleted afterwards
  (however deep the tree the program left); it has a random name inside a directory the program
  can cross but not list;
- its own session and process group (`start_new_session`): at the deadline, and again once the
  program has exited, the whole group is killed with `os.killpg(SIGKILL)`, so its forks die too;
- resource limits set in `preexec_fn`, soft = hard so the program cannot raise them:
  RLIMIT_CPU (the CPU budget; SIGKILL at the limit), RLIMIT_AS (memory), RLIMIT_NPROC (the
  processes and threads its uid has at the start, plus 64: the kernel counts them all),
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
  spawn, `subprocess`, `os.system` and signals to other processes; ctypes, `_posixsubprocess`,
  subinterpreters (whose code would run without the hook), `_posixshmem`, sqlite3 and the
  `_test*` C-API modules; raising resource limits; `os.mkfifo`/`os.mknod` (replaced: they have no
  audit event), hard and symbolic links; opening a file for writing, and creating, removing,
  renaming, chmod-ing a path or changing directory, outside the scratch directory (more than 64
  files opened for writing or 256 directories created inside it); reading another process's
  /proc entries; opening a directory outside the scratch directory (a dir_fd for *at() calls);
  introspection that would reach the hook (`gc.get_referrers`, setting
  `__code__`/`__defaults__`, reading the hook's frame from a traceback). Every path is first
  made canonical as os.path.realpath would (symbolic links, "..", /proc/self/... magic links,
  dir_fd arguments), by C functions only. The hook keeps its state out of the program's reach
  (see `_BOOT`). CPython's audit hooks are still not a security boundary: the guard is defense
  in depth and a clear error message, the OS layers below are the boundary.

Depending on the OS (probed once per process, on first use; `protections()` reports the outcome,
and a setup weaker than the strongest is logged as a warning on the "ttc" logger):

- `unshare` from util-linux, if present and permitted: new network namespace (no interface but
  a loopback that is down: no connection can leave or reach the host), PID namespace (the program
  is its init: when it exits, the kernel kills every process it left, even those that called
  setsid), mount namespace with its own /proc (no other process is visible), and IPC namespace.
  In the mount namespace the program's interpreter, before anything else, covers /home, /root,
  /tmp, /var/tmp, /dev/shm, /dev/mqueue, /run/user, /run/lock, the directory holding this
  project, the caller's working directory and any directory the caller names (`hide`) with an
  empty read-only tmpfs, then binds back its scratch directory and, read-only, the
  interpreter's own installation if it lay there. As root, it then drops to uid/gid 65534
  (nobody) with no supplementary groups; as another user, unshare needs unprivileged user
  namespaces (`--map-root-user`) and the interpreter then moves into a nested user namespace, so
  the program keeps no power over those mounts (it runs as the user's own uid, which
  `protections()` reports). Without unshare the program shares the host's network, PID space
  and files and only the audit guard keeps it off the network. (Being a PID namespace's init,
  the program ignores signals it sends itself without a handler; a death by SIGKILL, which
  unshare cannot pass on, is recognised from unshare's message.)
- without namespaces, as root: the program runs as uid/gid 65534 (nobody), set in `preexec_fn`;
  as another user: as that user, with no filesystem isolation beyond the guard.
- Linux prctl: PR_SET_NO_NEW_PRIVS (no privilege gain through setuid binaries) and
  PR_SET_PDEATHSIG (the sandbox dies if the process that started it dies).

Not protected: reads of world-readable files outside the hidden directories; without a mount
namespace, writes to world-writable directories when the audit guard is off or bypassed; disk
use inside the scratch directory beyond the guard's counts times RLIMIT_FSIZE; the host's CPU
while a run lasts (with the guard off, up to RLIMIT_NPROC processes may spin until the
deadline); kernel exploits. Known ways around the guard alone: a path object whose __fspath__
answers differently each time, for the few audit events that pass the object itself (e.g.
`shutil.rmtree`); a fresh `posix` module from `_imp.create_builtin` brings `mkfifo` back.
Call `run_python` from one thread per process (`preexec_fn` is not safe to run while other
threads fork), as the verifier worker processes do.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["SandboxResult", "SandboxUnavailable", "protections", "run_python"]

_log = logging.getLogger("ttc")

_NOBODY = 65534
_NOFILE = 64
_NPROC = 64  # processes (threads) a program may add to those its uid already has
_MAX_DIRS = 256  # directories a program may create (the guard counts them)
_STDERR_TAIL = 64 << 10
_UNSHARE_FLAGS = ("--net", "--ipc", "--pid", "--fork", "--kill-child", "--mount-proc")
_NAMESPACES = ("net", "ipc", "pid", "mount")
_UNSHARE_SIGKILL = "unshare: sigprocmask unblock failed: Invalid argument\n"
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
# Hidden from the program (each covered by an empty read-only tmpfs), with the directory holding
# this project, the caller's working directory and any the caller names, when they exist.
_HIDDEN = (
    "/home",
    "/root",
    "/tmp",
    "/var/tmp",
    "/dev/shm",
    "/dev/mqueue",
    "/run/user",
    "/run/lock",
)
# Never hidden, nor any directory above them: the system the interpreter needs.
_ESSENTIAL = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var",
    "/boot",
)
# The project's root (this file is adapters/sandbox/_sandbox.py).
_PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

try:  # Linux only: prctl for no-new-privs and the parent-death signal
    _PRCTL: Any = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None


class SandboxUnavailable(RuntimeError):
    """No interpreter runs under the sandbox on this machine."""


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
    drop: tuple[int, int] | None  # uid, gid that preexec_fn switches to (without namespaces)
    uid: int  # the uid the program runs as (as the kernel sees it, outside any namespace)
    # What the program's interpreter does first, as the namespace's root: "drop" to uid,
    # "nest" into a user namespace without power over the mounts, or "none".
    boot: str = "none"
    hide: bool = False  # whether it covers the _HIDDEN directories (needs a mount namespace)


# The program's process runs this with `-c` (argv: guard|noguard, the isolation mode, uid, gid,
# then the directories to hide). As the namespace's root it hides those directories, then drops
# to the program's uid; it reads main.py (and prelude.py), installs the guard, and executes both
# in __main__. Everything it defines is local to _ttc_boot. The hook keeps its state in its
# closure: C functions, immutable values and two counters. The hook function and its cells are
# unreachable; its frame (reachable while it runs, e.g. from a path object's __fspath__) shows
# only those values, and reading it from a traceback is refused. The helper `canonical`, which
# that frame does show, uses no global name and keeps its C functions in positional defaults, a
# tuple the guard forbids replacing.
_BOOT = r"""
def _ttc_boot():
    import builtins, os, posix, sys

    guard, mode, uid, gid, *masks = sys.argv[1:]

    def isolate(masks, nest):
        # Cover each directory in `masks` with an empty tmpfs, bind the scratch directory and
        # the interpreter's own tree back (the latter read-only), make the covers read-only,
        # then (nest) move into a new user namespace that has no power over these mounts.
        import _ctypes  # without the ctypes package: a quarter of the start-up time

        class c_int(_ctypes._SimpleCData):
            _type_ = "i"

        class libc:
            _handle = _ctypes.dlopen(None, 0)

        class function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = c_int

        bind, rec, remount, rdonly = 4096, 16384, 32, 1
        nosuid, nodev, noexec, noatime, nodiratime = 2, 4, 8, 1024, 2048
        strictatime, st_relatime = 1 << 24, 4096

        def call(name, *args):
            if function((name, libc))(*args) != 0:
                err = _ctypes.get_errno()
                raise OSError(err, f"sandbox: {name}{args!r}: {os.strerror(err)}")

        def under(path, top):
            return path == top or path.startswith(top.rstrip("/") + "/")

        def mkdirs(path):
            current = ""
            for part in path.strip("/").split("/"):
                current += "/" + part
                if not os.path.isdir(current):
                    os.mkdir(current, 0o711)

        here = os.getcwd()
        trees = {os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix,
                                               sys.base_exec_prefix)}
        trees = sorted(t for t in trees if not any(t != o and under(t, o) for o in trees))
        hidden = []
        for mask in sorted(masks, key=len):
            if (os.path.isdir(mask) and not any(under(mask, t) for t in trees)
                    and not any(under(mask, h) for h in hidden)):
                hidden.append(mask)
        keep = [(t, os.open(t, os.O_RDONLY | os.O_DIRECTORY)) for t in trees
                if any(under(t, h) for h in hidden)]
        for mask in hidden:
            call("mount", b"tmpfs", mask.encode(), b"tmpfs", nosuid | nodev | noexec,
                 b"mode=755,size=64k,nr_inodes=4096")
        if any(under(here, h) for h in hidden):
            mkdirs(here)
            call("mount", b".", here.encode(), None, bind, None)
            os.chdir(here)
        for tree, fd in keep:
            mkdirs(tree)
            call("mount", f"/proc/self/fd/{fd}".encode(), tree.encode(), None, bind | rec, None)
            have = os.fstatvfs(fd).f_flag
            flags = remount | bind | rdonly | (have & (nosuid | nodev | noexec | nodiratime))
            if have & noatime:
                flags |= noatime
            elif not have & st_relatime:
                flags |= strictatime
            call("mount", None, tree.encode(), None, flags, None)
            os.close(fd)
        for mask in hidden:
            call("mount", None, mask.encode(), None, remount | rdonly | nosuid | nodev | noexec,
                 None)
        if nest:
            call("unshare", 0x10000000)  # CLONE_NEWUSER
        for name in list(sys.modules):
            if name.partition(".")[0] in ("ctypes", "_ctypes"):
                del sys.modules[name]

    if masks or mode == "nest":
        isolate(masks, mode == "nest")
    if mode == "drop":
        os.setgroups([])
        os.setgid(int(gid))
        os.setuid(int(uid))

    def read(name):
        with open(name, "rb") as f:
            return compile(f.read(), name, "exec", dont_inherit=True)

    codes = [read("prelude.py")] if os.path.exists("prelude.py") else []
    codes.append(read("main.py"))

    def canonical(raw, lstat=posix.lstat, readlink=posix.readlink,
                  failed=(OSError, ValueError), error=PermissionError):
        # os.path.realpath of the absolute str `raw`, from C functions only.
        parts = raw.split("/")
        parts.reverse()
        path = ""
        hops = 0
        while parts:
            name = parts.pop()
            if name == "" or name == ".":
                continue
            if name == "..":
                path = path[: path.rfind("/")] if path else ""
                continue
            candidate = path + "/" + name
            try:
                mode = lstat(candidate).st_mode
            except failed:
                path = candidate
                continue
            if mode & 0o170000 != 0o120000:
                path = candidate
                continue
            hops += 1
            if hops > 40:
                raise error(f"sandbox: too many levels of symbolic links in {raw}")
            try:
                target = readlink(candidate)
            except failed:
                path = candidate
                continue
            if target.startswith("/"):
                path = ""
            more = target.split("/")
            more.reverse()
            parts += more
        return path or "/"

    def make_hook(deny, imports, path_events, files_left, dirs_left):
        import _thread

        getcwd, stat, fspath, ident = posix.getcwd, posix.stat, posix.fspath, _thread.get_ident
        decode, digits, joined = bytes.decode, int.__repr__, "".join
        typ, subclass, text, raw_bytes, integer = type, issubclass, str, bytes, int
        error, failed = PermissionError, (OSError, ValueError)
        arity = len
        scratch = canonical(getcwd())
        prefix = scratch + "/"
        pid = posix.getpid()
        own = "/proc/" + digits(pid)
        mine = own + "/"
        devices = frozenset(("/dev/null", canonical("/proc/self/fd/1"),
                             canonical("/proc/self/fd/2")))
        writes = posix.O_WRONLY | posix.O_RDWR | posix.O_CREAT | posix.O_TRUNC | posix.O_APPEND
        named = frozenset(name for name, _ in path_events)
        special = frozenset(("__code__", "__defaults__", "__kwdefaults__"))
        try:
            raise error
        except error as exc:
            traceback = typ(exc.__traceback__)
        busy = 0  # the thread reading a frame for the hook

        def hook(event, args):
            nonlocal files_left, dirs_left, busy
            if event in deny:
                raise error(f"sandbox: {event} is not allowed")
            if event == "import":
                if args[0] in imports:
                    raise error(f"sandbox: importing {args[0]} is not allowed")
                return
            if event == "object.__getattr__":
                # `types` itself reads tb_frame: refused only when it leads to the guard.
                if args[1] == "tb_frame" and typ(args[0]) is traceback and busy != ident():
                    busy = ident()
                    try:
                        code = args[0].tb_frame.f_code
                    finally:
                        busy = 0
                    if code is hook_code or code is canonical_code:
                        raise error("sandbox: reading the guard's frame is not allowed")
                return
            if event == "object.__setattr__":
                if args[1] in special:
                    raise error(f"sandbox: setting {args[1]} is not allowed")
                return
            if event == "os.kill":
                if args[0] != pid:
                    raise error("sandbox: signalling another process is not allowed")
                return
            if event == "open":
                if subclass(typ(args[0]), integer):
                    return
                places = ((0, -1),)
            elif event in named:
                places = ()
                for name, where in path_events:
                    if name == event:
                        places = where
            else:
                return
            for index, fd_index in places:
                value = args[index]
                kind = typ(value)
                if subclass(kind, integer):  # a file descriptor
                    raw = "/proc/self/fd/" + digits(value)
                else:
                    if not subclass(kind, (text, raw_bytes)):
                        value = fspath(value)
                        kind = typ(value)
                    if subclass(kind, raw_bytes):
                        raw = decode(value, "utf-8", "surrogateescape")
                    else:
                        raw = joined((value,))
                    if not raw.startswith("/"):
                        base = args[fd_index] if 0 <= fd_index < arity(args) else None
                        if subclass(typ(base), integer) and base >= 0:
                            raw = "/proc/self/fd/" + digits(base) + "/" + raw
                        else:
                            raw = getcwd() + "/" + raw
                path = canonical(raw)
                inside = path == scratch or path.startswith(prefix)
                if event != "open":
                    if not inside:
                        raise error(f"sandbox: {event} on {path} is not allowed")
                    if event == "os.mkdir":
                        dirs_left -= 1
                        if dirs_left < 0:
                            raise error("sandbox: too many directories created")
                elif args[2] & writes:
                    if path in devices:
                        return
                    if not inside:
                        raise error(f"sandbox: writing {path} is not allowed")
                    files_left -= 1
                    if files_left < 0:
                        raise error("sandbox: too many files opened for writing")
                else:
                    if path.startswith("/proc/") and path != own and not path.startswith(mine):
                        if path[6:].partition("/")[0].isdigit():
                            raise error(f"sandbox: reading {path} is not allowed")
                    if args[1] is None and not inside:
                        # os.open of a directory gives a dir_fd for *at() calls
                        try:
                            is_dir = stat(path).st_mode & 0o170000 == 0o040000
                        except failed:
                            is_dir = False
                        if is_dir:
                            raise error(f"sandbox: opening the directory {path} is not allowed")

        hook_code, canonical_code = hook.__code__, canonical.__code__
        return hook

    if guard == "guard":
        def refuse(*args, **kwargs):
            raise PermissionError("sandbox: creating special files is not allowed")

        for module in (os, posix):  # no audit event in 3.11
            module.mkfifo = module.mknod = refuse
        sys.addaudithook(make_hook(DENY, DENY_IMPORTS, PATH_EVENTS, 64, DIRS))
    sys.argv[:] = ["main.py"]
    # -S skips site, which is what defines exit() and quit(); programs call them.
    builtins.exit = builtins.quit = sys.exit
    sys.set_int_max_str_digits(0)
    for name in ("_ttc_boot", "DENY", "DENY_IMPORTS", "PATH_EVENTS", "DIRS"):
        del globals()[name]
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
    "os.link",
    "os.symlink",
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
    "sqlite3.connect",
    "sqlite3.connect/handle",
    "sqlite3.enable_load_extension",
    "sqlite3.load_extension",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.dlsym/handle",
    "ctypes.cdata",
    "ctypes.cdata/buffer",
    "ctypes.call_function",
    "cpython.PyInterpreterState_New",
    "resource.setrlimit",
    "resource.prlimit",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "sys._current_frames",
    "sys._current_exceptions",
)
_DENY_IMPORTS = (
    "_posixsubprocess",
    "_ctypes",
    "ctypes",
    "_ctypes_test",
    "_xxsubinterpreters",
    "_interpreters",
    "_xxinterpchannels",
    "_interpchannels",
    "_interpqueues",
    "_posixshmem",
    "_sqlite3",
    "sqlite3",
    "_testcapi",
    "_testinternalcapi",
)
# Events naming paths that must lie inside the scratch directory: (argument, its dir_fd argument).
_PATH_EVENTS = (
    ("os.mkdir", ((0, 2),)),
    ("os.rmdir", ((0, 1),)),
    ("os.remove", ((0, 1),)),
    ("os.rename", ((0, 2), (1, 3))),
    ("os.chmod", ((0, 2),)),
    ("os.chown", ((0, 3),)),
    ("os.utime", ((0, 3),)),
    ("os.truncate", ((0, -1),)),
    ("os.setxattr", ((0, -1),)),
    ("os.removexattr", ((0, -1),)),
    ("os.chflags", ((0, -1),)),
    ("os.chdir", ((0, -1),)),
    ("shutil.rmtree", ((0, 1),)),
)
_BOOT_SOURCE = (
    f"DENY = frozenset({sorted(_DENY)!r})\n"
    f"DENY_IMPORTS = frozenset({sorted(_DENY_IMPORTS)!r})\n"
    f"PATH_EVENTS = {_PATH_EVENTS!r}\n"
    f"DIRS = {_MAX_DIRS}\n"
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
    """Removes a scratch tree however deep or odd; never raises (what remains is logged)."""

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

    # RecursionError on a deep tree, or anything else: rm copes with any depth.
    with contextlib.suppress(Exception):
        shutil.rmtree(path, onerror=retry)
    for argv in (["rm", "-rf", "--", path], ["chmod", "-R", "u+rwx", "--", path]) * 2:
        if not os.path.lexists(path):
            return
        with contextlib.suppress(Exception):
            subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
                timeout=300,
                check=False,
            )
    if os.path.lexists(path):
        _log.warning("sandbox: could not remove the scratch directory %s", path)


def _nproc_limit(uid: int) -> int:
    """RLIMIT_NPROC for a program run as `uid`: the tasks the uid has now, plus _NPROC.

    The kernel counts every process and thread of the real uid against the limit, not only
    the program's.
    """
    if uid == 0:
        return _NPROC  # not enforced for root
    count = 0
    try:
        entries = os.scandir("/proc")
    except OSError:
        return _NPROC
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read()
                count += int(stat[stat.rfind(b")") + 2 :].split()[17])  # num_threads
            except (OSError, ValueError, IndexError):
                continue
    return count + _NPROC


def _maskable(path: str) -> bool:
    return path != "/" and not any(e == path or e.startswith(path + "/") for e in _ESSENTIAL)


def _hidden(extra: Iterable[str] = ()) -> list[str]:
    """The directories a program with a mount namespace does not see (those that exist)."""
    found: list[str] = []
    candidates = [*_HIDDEN, _PROJECT, *extra]
    with contextlib.suppress(OSError):
        candidates.append(os.getcwd())
    for path in candidates:
        real = os.path.realpath(path)
        if real not in found and _maskable(real) and os.path.isdir(real):
            found.append(real)
    return found


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
    hide: Iterable[str] = (),
) -> SandboxResult:
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if memory_mb < 16:
        raise ValueError(f"memory_mb must be >= 16, got {memory_mb}")
    cpu_limit = max(1, math.ceil(timeout_s if cpu_s is None else cpu_s))
    limits = (
        (resource.RLIMIT_CPU, cpu_limit),
        (resource.RLIMIT_AS, memory_mb << 20),
        (resource.RLIMIT_NPROC, _nproc_limit(setup.uid)),
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
        argv += ["guard" if audit_guard else "noguard", setup.boot, str(setup.uid), str(setup.uid)]
        if setup.hide:
            argv += _hidden(hide)
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
    hide: Iterable[str] = (),
) -> SandboxResult:
    """Runs the Python program `code` on `stdin` in a sandbox (see the module docstring).

    timeout_s: wall-clock limit; cpu_s: CPU-time limit (default: timeout_s, rounded up);
    memory_mb: address-space limit; max_output_bytes: stdout (and any file written) is cut there;
    prelude: source executed in the same namespace just before `code` (tracebacks keep the
    program's own line numbers); audit_guard=False leaves only the OS protections (for tests);
    hide: more directories the program must not see (e.g. where the expected answers are).
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
        hide=hide,
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


def _probe(setup: _Setup) -> str | None:
    """None if `setup` runs a trivial program on Python >= 3.10, else what went wrong."""
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
    except OSError as exc:
        return f"{setup.python}: {exc}"
    if result.ok and result.stdout.strip() == "True":
        return None
    lines = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()
    return f"{setup.python}: exit status {result.returncode}: {lines[-1][:200]}"


def _make_setup(allow_unshare: bool = True) -> _Setup:
    """The strongest setup that works here: namespaces with hidden directories if unshare is
    allowed, the uid drop when root. Anything weaker than the strongest is logged as a warning.
    """
    root = os.geteuid() == 0
    uid = _NOBODY if root else os.geteuid()
    variants: list[tuple[str, _Setup]] = []
    unshare = shutil.which("unshare", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if allow_unshare and unshare is not None:
        wrapper: tuple[str, ...]
        namespaces: tuple[str, ...]
        if root:
            wrapper = (unshare, *_UNSHARE_FLAGS, "--")
            namespaces = _NAMESPACES
            boot = "drop"
        else:
            wrapper = (unshare, "--map-root-user", *_UNSHARE_FLAGS, "--")
            namespaces = ("user", *_NAMESPACES)
            boot = "nest"
        strongest = _Setup("", wrapper, namespaces, None, uid, boot, hide=True)
        weaker = replace(strongest, boot="drop" if root else "none", hide=False)
        variants.append(("namespaces and private directories", strongest))
        variants.append(("namespaces without private directories", weaker))
    else:
        _log.warning(
            "sandbox: no namespaces (%s): programs share the host's network, processes and "
            "files, as far as their uid may",
            "unshare is not installed" if allow_unshare else "not allowed by the caller",
        )
    plain = _Setup("", (), (), (_NOBODY, _NOBODY) if root else None, uid)
    variants.append(("no namespaces", plain))
    failures: list[str] = []
    for label, variant in variants:
        why = "no interpreter"
        for python in _candidate_pythons():
            candidate = replace(variant, python=python)
            outcome = _probe(candidate)
            if outcome is None:
                if failures:
                    _log.warning(
                        "sandbox: running with %s, which protects less: %s",
                        label,
                        "; ".join(failures),
                    )
                return candidate
            why = outcome
        failures.append(f"{label} failed ({why})")
    raise SandboxUnavailable(
        "sandbox: no Python >= 3.10 interpreter runs under the sandbox's limits and uid; tried "
        + ", ".join(_candidate_pythons())
        + ": "
        + "; ".join(failures)
    )


@functools.cache
def _setup() -> _Setup:
    return _make_setup()


def protections() -> dict[str, Any]:
    """What the sandbox enforces on this machine (probes on first use; raises
    SandboxUnavailable if nothing works). `uid` is the uid the program runs as, as the host
    sees it; `hidden` lists the directories it sees empty (with those named per run)."""
    setup = _setup()
    return {
        "python": setup.python,
        "namespaces": list(setup.namespaces),
        "uid": setup.uid,
        "uid_dropped": setup.uid != os.geteuid(),
        "hidden": _hidden() if setup.hide else [],
        "rlimits": ["CPU", "AS", "NPROC", "FSIZE", "NOFILE", "CORE"],
        "nproc_enforced": setup.uid != 0,
        "prctl": _PRCTL is not None,
        "audit_guard": True,
        "fresh_env": True,
        "isolated_python": True,
    }
