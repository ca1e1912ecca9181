"""The sandboxed interpreter's confinement, done before the program's first line: a private root,
the privilege drop, the parent-death signal, the seccomp filter.

`_launch` passes this file's text, followed by `_boot`'s, to the child with `-c`; `_boot` calls
`_ttc_confine` first. As the mount namespace's root (`fs == "root"`) it builds a new root on a
tmpfs and pivots into it: read-only binds of /usr, /bin, /sbin and /lib* (or their links) and of
the interpreter's own installation, /etc/ld.so.cache and /etc/localtime, a /dev holding only null,
zero, full, random and urandom, the namespace's own /proc, and, as /tmp, the program's scratch
directory: a private tmpfs (nosuid, nodev, noexec: no native code written there can be loaded)
that lives and dies with the namespace, so nothing is left to remove. Paths named in `hide` are
covered where they would still be visible. Nothing else of the machine exists for the program.

Then it drops to the program's uid (`drop`), or moves into a user namespace with no power over the
mounts (`nest`); sets the parent-death signal again (the kernel clears it when the uid changes);
exits at once if ttc has already gone (the write end of the `alive` pipe is closed); and loads
the seccomp filter (`_seccomp`), after which no system call undoes any of it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing would slow every run's start-up
if TYPE_CHECKING:
    from collections.abc import Callable

# pivot_root has no glibc wrapper: its number per machine.
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}


def _ttc_confine(
    fs: str,
    mode: str,
    ids: tuple[int, int, int, int, int],
    bpf: bytes,
    paths: list[list[str]],
) -> None:
    # ids: the program's uid and gid, the scratch tmpfs's size (MiB), the `alive` pipe's fd, the
    # Landlock ABI to restrict the files with (0: none); paths: the cgroup.procs files to enter,
    # the paths to hide.
    import _ctypes  # without the ctypes package: a quarter of the start-up time
    import os
    import sys

    uid, gid, scratch_mb, alive, landlock_abi = ids
    cgroups, hide = paths

    class c_int(_ctypes._SimpleCData):  # type: ignore[type-arg]  # no [int] at run time
        _type_ = "i"

    class c_void_p(_ctypes._SimpleCData):  # type: ignore[type-arg]
        _type_ = "P"

    class c_char(_ctypes._SimpleCData):  # type: ignore[type-arg]
        _type_ = "c"

    class libc:
        _handle = _ctypes.dlopen(None, 0)  # type: ignore[arg-type]  # None: the program

    class function(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = c_int

    def call(name: str, *args: object) -> int:
        # A class with a _handle passes for a CDLL, as ctypes itself duck-types it. `syscall`
        # returns a descriptor (>= 0) where the others return 0.
        result: int = function((name, libc))(*args)  # type: ignore[arg-type]
        if result < 0 or (result != 0 and name != "syscall"):
            err = _ctypes.get_errno()
            raise OSError(err, f"sandbox: {name}{args!r}: {os.strerror(err)}")
        return result

    bind, rec, remount, rdonly, detach = 4096, 16384, 32, 1, 2
    nosuid, nodev, noexec, noatime, nodiratime = 2, 4, 8, 1024, 2048
    strictatime, st_relatime = 1 << 24, 4096

    def read_only(target: str, have: int) -> None:
        # Read-only, keeping the nosuid/nodev/noexec/atime flags (a user namespace may not drop
        # them).
        flags = remount | bind | rdonly | (have & (nosuid | nodev | noexec | nodiratime))
        if have & noatime:
            flags |= noatime
        elif not have & st_relatime:
            flags |= strictatime
        call("mount", None, target.encode(), None, flags, None)

    def bind_ro(fd: int, target: str) -> None:
        # A recursive bind, read-only down to every mount below it.
        call("mount", f"/proc/self/fd/{fd}".encode(), target.encode(), None, bind | rec, None)
        read_only(target, os.fstatvfs(fd).f_flag)
        with open("/proc/self/mountinfo", "rb") as f:
            points = [line.split()[4].decode() for line in f]
        for point in points:
            if point != target and under(point, target):
                read_only(point, os.statvfs(point).f_flag)

    def cover(top: str) -> None:
        # The paths to hide, as they appear under `top`: an empty read-only tmpfs over a
        # directory, /dev/null over a file.
        for path in hide:
            target = top + path
            if os.path.isdir(target):
                flags = rdonly | nosuid | nodev | noexec
                call("mount", b"tmpfs", target.encode(), b"tmpfs", flags, b"size=4k")
            elif os.path.lexists(target):
                call("mount", b"/dev/null", target.encode(), None, bind, None)

    def under(path: str, top: str) -> bool:
        return path == top or path.startswith(top.rstrip("/") + "/")

    def mkdirs(path: str) -> None:
        current = ""
        for part in path.strip("/").split("/"):
            current += "/" + part
            if not os.path.isdir(current):
                os.mkdir(current, 0o755)

    def touch(path: str) -> None:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))

    system = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]
    files = ("ld.so.cache", "localtime")
    devices = ["null", "zero", "full", "random", "urandom"]

    def readable() -> tuple[dict[str, str], list[str]]:
        # What a program may read, besides /etc's `files` and /dev's `devices`: the system's
        # trees (those that are links, as links) and the interpreter's installation.
        links = {p: os.readlink(p) for p in system if os.path.islink(p)}
        roots = {
            os.path.realpath(p)
            for p in (sys.base_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable))
        }
        dirs = [p for p in system if os.path.isdir(p) and p not in links]
        dirs += sorted(t for t in roots if not any(t != o and under(t, o) for o in roots | {*dirs}))
        return links, dirs

    def new_root() -> None:
        opath = os.O_PATH | os.O_CLOEXEC
        links, dirs = readable()
        # Every source is opened first: the tmpfs below covers /tmp, where a tree may lie.
        sources = {p: os.open(p, opath) for p in dirs}
        etc = {f: os.open("/etc/" + f, opath) for f in files if os.path.isfile("/etc/" + f)}
        dev = {d: os.open("/dev/" + d, opath) for d in devices if os.path.exists("/dev/" + d)}
        proc = os.open("/proc", opath | os.O_DIRECTORY)
        top = "/tmp"
        call("mount", b"tmpfs", top.encode(), b"tmpfs", nosuid | nodev, b"mode=755,size=64k")
        for path, target in links.items():
            os.symlink(target, top + path)
        for path, fd in sources.items():
            mkdirs(top + path)
            bind_ro(fd, top + path)
        os.mkdir(top + "/etc", 0o755)
        for file, fd in etc.items():
            name = top + "/etc/" + file
            touch(name)
            bind_ro(fd, name)
        os.mkdir(top + "/dev", 0o755)
        call("mount", b"tmpfs", (top + "/dev").encode(), b"tmpfs", nosuid | noexec, b"mode=755")
        for name, fd in dev.items():
            touch(top + "/dev/" + name)
            call(
                "mount",
                f"/proc/self/fd/{fd}".encode(),
                (top + "/dev/" + name).encode(),
                None,
                bind,
                None,
            )
        for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0")):
            os.symlink(target, top + "/dev/" + name)
        os.symlink("/proc/self/fd/1", top + "/dev/stdout")
        os.symlink("/proc/self/fd/2", top + "/dev/stderr")
        os.mkdir(top + "/proc", 0o555)
        call(
            "mount",
            f"/proc/self/fd/{proc}".encode(),
            (top + "/proc").encode(),
            None,
            bind | rec,
            None,
        )
        os.mkdir(top + "/tmp", 0o755)
        owner = f",uid={uid},gid={gid}" if mode == "drop" else ""
        options = f"mode=700,size={scratch_mb}m,nr_inodes=8192{owner}"
        call(
            "mount",
            b"tmpfs",
            (top + "/tmp").encode(),
            b"tmpfs",
            nosuid | nodev | noexec,
            options.encode(),
        )
        cover(top)
        for fd in (*sources.values(), *etc.values(), *dev.values(), proc):
            os.close(fd)
        call("mount", None, (top + "/dev").encode(), None, remount | rdonly | nosuid | noexec, None)
        os.chdir(top)
        os.mkdir(".old", 0o700)
        call("syscall", _PIVOT_ROOT[os.uname().machine], b".", b".old")
        os.chdir("/")
        call("umount2", b"/.old", detach)
        os.rmdir("/.old")
        call("mount", None, b"/", None, remount | rdonly | nosuid | nodev, None)
        os.chdir("/tmp")

    def retitle() -> None:
        # /proc/PID/cmdline shows the arguments' memory: overwritten, it names no host path (the
        # interpreter's, the boot's text). A last byte that is not NUL tells the kernel to read
        # up to the first NUL, as after setproctitle(3).
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48 and 49)
        title = b"python3\0"
        if end - start > len(title):
            with open("/proc/self/mem", "r+b", buffering=0) as mem:
                mem.seek(start)
                mem.write(title + b" " * (end - start - len(title)))

    def landlock() -> None:
        # The file allow-list where there is no private root: what the private root would hold,
        # read-only, and the scratch directory (the working directory) read-write. The rights are
        # linux/landlock.h's, as many as this ABI knows: whatever is not allowed is refused.
        order, abi = sys.byteorder, landlock_abi
        execute, write, read_file, read_dir = 1, 2, 4, 8
        make_char, make_sock, make_fifo, make_block, make_sym = 64, 512, 1024, 2048, 4096
        handled = (1 << 13) - 1  # ABI 1: execute ... make_sym
        handled |= (1 << 13 if abi >= 2 else 0) | (1 << 14 if abi >= 3 else 0)  # refer, truncate
        handled |= 1 << 15 if abi >= 5 else 0  # ioctl on devices
        on_files = handled & (execute | write | read_file | 1 << 14 | 1 << 15)
        net = 3 if abi >= 4 else 0  # TCP bind and connect: none is allowed
        scoped = 3 if abi >= 6 else 0  # abstract unix sockets and signals outside the domain
        size = 24 if abi >= 6 else 16 if abi >= 4 else 8
        attr = b"".join(v.to_bytes(8, order) for v in (handled, net, scoped))[:size]
        ruleset = call("syscall", 444, attr, size, 0)
        opath = os.O_PATH | os.O_CLOEXEC

        def allow(path: str, rights: int) -> None:
            try:
                fd = os.open(path, opath)
            except OSError:
                return
            try:
                if os.fstat(fd).st_mode & 0o170000 != 0o040000:
                    rights &= on_files
                rule = (rights & handled).to_bytes(8, order) + fd.to_bytes(4, order)
                call("syscall", 445, ruleset, 1, rule, 0)  # LANDLOCK_RULE_PATH_BENEATH
            finally:
                os.close(fd)

        for path in readable()[1]:
            allow(path, execute | read_file | read_dir)
        for file in files:
            allow("/etc/" + file, read_file)
        for device in devices:
            allow("/dev/" + device, read_file | write)
        allow("/proc/self", read_file | read_dir)  # this process's own entries only
        scratch = handled & ~(execute | make_char | make_sock | make_fifo | make_block | make_sym)
        allow(os.getcwd(), scratch)
        call("syscall", 446, ruleset, 0)  # landlock_restrict_self: for good, children included
        os.close(ruleset)

    retitle()
    call("prctl", 1, 9)  # until the uid changes: ttc (or unshare) dying kills this process
    for procs in cgroups:  # before anything else: whatever this process becomes stays inside
        with open(procs, "w") as f:
            f.write("0")
    if fs == "root":
        new_root()
    elif fs == "ns":  # the host's files, in a mount namespace: only the inputs are covered
        cover("")
    if mode == "drop":
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    elif mode == "nest":
        call("unshare", 0x10000000)  # CLONE_NEWUSER: no power over the mounts above
    call("prctl", 1, 9)  # PR_SET_PDEATHSIG, SIGKILL: cleared by a uid change
    if fs != "host":  # in a PID namespace of its own, as after an exec: its /proc is its own
        call("prctl", 4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
    call("prctl", 38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: no gain through setuid files
    os.set_blocking(alive, False)
    try:
        gone = os.read(alive, 1) == b""  # ttc holds the write end: EOF means it has died
    except BlockingIOError:
        gone = False
    os.close(alive)
    if gone:
        os._exit(137)
    if landlock_abi:
        landlock()
    if bpf:

        class Filter(_ctypes.Array):  # type: ignore[type-arg]
            _type_ = c_char
            _length_ = len(bpf)

        class Prog(_ctypes.Array):  # type: ignore[type-arg]
            _type_ = c_char
            _length_ = 16

        instructions = Filter.from_buffer_copy(bpf)
        order: Callable[..., bytes] = int.to_bytes
        header = order(len(bpf) // 8, 2, sys.byteorder) + bytes(6)
        prog = Prog.from_buffer_copy(
            header + order(_ctypes.addressof(instructions), 8, sys.byteorder)
        )
        call("prctl", 22, 2, c_void_p(_ctypes.addressof(prog)))  # PR_SET_SECCOMP, FILTER
    for name in list(sys.modules):
        if name.partition(".")[0] in ("ctypes", "_ctypes"):
            del sys.modules[name]
