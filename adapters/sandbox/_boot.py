"""The sandboxed program's first Python: it confines itself (`_confine`), writes the program into
its scratch directory, installs the audit-hook guard, then runs prelude.py and main.py in
`__main__`.

The sandbox passes `_confine`'s text and this file's to the child interpreter with `-c` (see
`_launch`); the child never imports ttc, so the program cannot reach ttc either. Its one argument
is a file descriptor, which holds the arguments' length in decimal, a newline, the arguments
(NUL-separated: the command line is readable by every process, and names no host path), the
prelude's length, a newline, the prelude and the program. The arguments: guard|noguard, the
filesystem (root: a private root; ns: the host's in a mount namespace; host: the host's), the
isolation mode (drop, nest or none), uid, gid, the scratch tmpfs's size in MiB, the read end of
ttc's `alive` pipe, the seccomp filter in hex (empty for none), the rlimits (`which=value,...`),
the Landlock ABI (0 for none), the number of cgroup.procs files to enter and those files, then
the paths to hide. After the confinement it writes prelude.py and main.py into the scratch
directory and sets the rlimits.
Everything it defines is local to `_ttc_boot`, and the names it leaves in `__main__` are deleted
before the program runs.

The hook keeps its state in its closure: C functions, immutable values and two counters. The hook
function and its cells are unreachable; its frame (reachable while it runs, e.g. from a path
object's __fspath__) shows only those values, and reading it from a traceback is refused. The
helper `canonical`, which that frame does show, uses no global name and keeps its C functions in
positional defaults, a tuple the guard forbids replacing.

Checked by ruff and mypy like any module: annotations are never evaluated (the future import), and
the few `type: ignore`s mark what typeshed cannot say (ctypes' private base classes, which are
not generic at run time, a class standing in for a CDLL, and rebinding module functions).
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing would slow every run's start-up
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType
    from typing import Any, NoReturn

    from ._confine import _ttc_confine  # defined by the text before this one (see `_launch`)

# Audit events refused outright: processes, sockets, ctypes, sqlite3, rlimits, introspection.
DENY = frozenset(
    (  # noqa: SIM905  (a paragraph of names reads better than one per line)
        "os.system os.exec os.posix_spawn os.spawn os.fork os.forkpty os.killpg os.link "
        "os.symlink subprocess.Popen pty.spawn socket.__new__ socket.connect socket.bind "
        "socket.sendto socket.sendmsg socket.getaddrinfo socket.gethostbyname "
        "socket.gethostbyname_ex socket.gethostbyaddr socket.getnameinfo socket.sethostname "
        "sqlite3.connect sqlite3.connect/handle sqlite3.enable_load_extension "
        "sqlite3.load_extension ctypes.dlopen ctypes.dlsym ctypes.dlsym/handle ctypes.cdata "
        "ctypes.cdata/buffer ctypes.call_function cpython.PyInterpreterState_New "
        "resource.setrlimit resource.prlimit gc.get_objects gc.get_referrers gc.get_referents "
        "sys._current_frames sys._current_exceptions"
    ).split()
)
# Modules that could run code without the hook, or reach outside the sandbox: whatever runs
# other code (subinterpreters, Tcl) or writes files from C without an "open" event (readline's
# history files, the dbm libraries) is refused at import.
DENY_IMPORTS = frozenset(
    (  # noqa: SIM905  (a paragraph of names reads better than one per line)
        "_posixsubprocess _ctypes ctypes _ctypes_test _xxsubinterpreters _interpreters "
        "_xxinterpchannels _interpchannels _interpqueues _posixshmem _sqlite3 sqlite3 _testcapi "
        "_testinternalcapi _tkinter tkinter readline _dbm _gdbm"
    ).split()
)
# Events naming paths that must lie inside the scratch directory: (argument, its dir_fd argument).
PATH_EVENTS = (
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
DIRS = 256
"""Directories a program may create (the guard counts them)."""
FILES = 64
"""Files a program may open for writing (the guard counts them)."""
# What the boot leaves in __main__ and deletes before the program runs.
_NAMES = (
    "_ttc_boot",
    "_ttc_confine",
    "_PIVOT_ROOT",
    "DENY",
    "DENY_IMPORTS",
    "PATH_EVENTS",
    "DIRS",
    "FILES",
    "TYPE_CHECKING",
    "_NAMES",
    "annotations",
)


def _ttc_boot() -> list[CodeType]:
    import builtins
    import os
    import posix
    import resource  # before the privileges go: the interpreter's tree may be root's alone
    import sys

    with open(int(sys.argv[1]), "rb") as f:  # the arguments, then the program
        size, _, text = f.read().partition(b"\n")
        arguments, text = text[: int(size)].decode("utf-8", "surrogateescape"), text[int(size) :]
        size, _, text = text.partition(b"\n")
    guard, fs, mode, uid, gid, scratch_mb, alive_fd, bpf, limits, landlock, count, *rest = (
        arguments.split("\0")
    )
    prelude, main = text[: int(size)], text[int(size) :]
    ids = (int(uid), int(gid), int(scratch_mb), int(alive_fd), int(landlock))
    paths = [rest[: int(count)], rest[int(count) :]]
    _ttc_confine(fs, mode, ids, bytes.fromhex(bpf), paths)
    for name, text in (("prelude.py", prelude), ("main.py", main)):
        if text or name == "main.py":
            with open(name, "xb") as out:  # the scratch directory is the working directory
                out.write(text)
    for pair in limits.split(","):  # soft = hard: the program cannot raise them
        which, _, value = pair.partition("=")
        resource.setrlimit(int(which), (int(value), int(value)))

    def read(name: str) -> CodeType:
        with open(name, "rb") as f:
            return compile(f.read(), name, "exec", dont_inherit=True)

    codes = [read("prelude.py")] if prelude else []
    codes.append(read("main.py"))

    def canonical(
        raw: str,
        lstat: Callable[[str], os.stat_result] = posix.lstat,
        readlink: Callable[[str], str] = posix.readlink,
        failed: tuple[type[Exception], ...] = (OSError, ValueError),
        error: type[Exception] = PermissionError,
    ) -> str:
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

    def make_hook(
        deny: frozenset[str],
        imports: frozenset[str],
        path_events: tuple[tuple[str, tuple[tuple[int, int], ...]], ...],
        files_left: int,
        dirs_left: int,
    ) -> Callable[[str, tuple[Any, ...]], None]:
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
        devices = frozenset(
            ("/dev/null", canonical("/proc/self/fd/1"), canonical("/proc/self/fd/2"))
        )
        writes = posix.O_WRONLY | posix.O_RDWR | posix.O_CREAT | posix.O_TRUNC | posix.O_APPEND
        # An "open" event writes if its flags say so, or its mode does: C code that opens with
        # fopen (ssl's keylog file, and any such) reports the mode and flags 0.
        writing_modes = frozenset("wax+")
        disjoint = frozenset.isdisjoint
        named = frozenset(name for name, _ in path_events)
        special = frozenset(("__code__", "__defaults__", "__kwdefaults__"))
        try:
            raise error
        except error as exc:
            traceback = typ(exc.__traceback__)
        busy = 0  # the thread reading a frame for the hook

        def hook(event: str, args: tuple[Any, ...]) -> None:
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
                places: tuple[tuple[int, int], ...] = ((0, -1),)
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
                        if subclass(typ(base), integer) and base >= 0:  # type: ignore[operator]
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
                elif args[2] & writes or (
                    subclass(typ(args[1]), text) and not disjoint(writing_modes, joined((args[1],)))
                ):
                    if path in devices:
                        return
                    if not inside:
                        raise error(f"sandbox: writing {path} is not allowed")
                    files_left -= 1
                    if files_left < 0:
                        raise error("sandbox: too many files opened for writing")
                else:
                    if (
                        path.startswith("/proc/")
                        and path != own
                        and not path.startswith(mine)
                        and path[6:].partition("/")[0].isdigit()
                    ):
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

        def refuse(*args: object, **kwargs: object) -> NoReturn:
            raise PermissionError("sandbox: creating special files is not allowed")

        for module in (os, posix):  # no audit event in 3.11
            module.mkfifo = module.mknod = refuse  # type: ignore[attr-defined]
        sys.addaudithook(make_hook(DENY, DENY_IMPORTS, PATH_EVENTS, FILES, DIRS))
    sys.argv[:] = ["main.py"]
    # -S skips site, which is what defines exit() and quit(); programs call them.
    builtins.exit = builtins.quit = sys.exit  # type: ignore[assignment]
    sys.set_int_max_str_digits(0)
    for name in _NAMES:
        del globals()[name]
    globals()["__doc__"] = None  # as for any `-c` program
    return codes


if __name__ == "__main__":  # the child's `-c`; an import (for the lists above) runs nothing
    __file__ = "main.py"
    for _ttc_code in _ttc_boot():
        exec(_ttc_code)
