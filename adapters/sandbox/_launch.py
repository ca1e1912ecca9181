"""Starting one sandboxed process and collecting how it ended.

A run gets a fresh scratch directory (its working directory, HOME and TMPDIR) under a random name
in a directory it can cross but not list; `_boot` as its `-c` program with the setup's wrapper
(unshare) before the interpreter; stdin, stdout and stderr as anonymous temporary files; its own
session and process group, killed whole at the deadline and again once it has exited; and the
limits of `_limits` in `preexec_fn`. Everything it left is removed afterwards, however deep.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._hide import hidden
from ._limits import cpu_limit, environment, preexec, rlimits
from ._result import RunOptions, SandboxResult

__all__ = ["BOOT_SOURCE", "Setup", "launch", "remove_tree"]

_log = logging.getLogger("ttc")

_STDERR_TAIL = 64 << 10
_UNSHARE_SIGKILL = "unshare: sigprocmask unblock failed: Invalid argument\n"


def _read_boot() -> str:
    # Passed as source, never imported by the child: the program must not be able to import ttc.
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_boot.py")
    with open(path, encoding="utf-8") as f:
        return f.read()


BOOT_SOURCE = _read_boot()
"""The child's first program (`_boot`), as its `-c` text."""


@dataclass(frozen=True, slots=True)
class Setup:
    """How this machine runs sandboxes: chosen once by probing."""

    python: str
    wrapper: tuple[str, ...]  # the unshare command line before the interpreter, or ()
    namespaces: tuple[str, ...]
    drop: tuple[int, int] | None  # uid, gid that preexec_fn switches to (without namespaces)
    uid: int  # the uid the program runs as (as the kernel sees it, outside any namespace)
    # What the program's interpreter does first, as the namespace's root: "drop" to uid,
    # "nest" into a user namespace without power over the mounts, or "none".
    boot: str = "none"
    hide: bool = (
        False  # whether it covers the hidden directories (`_hide`) (needs a mount namespace)
    )


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
    limits = rlimits(setup.uid, options)
    # The scratch directory sits, under a random name, in a directory the program may cross but
    # not list: another sandbox running as the same uid cannot find it.
    outer = tempfile.mkdtemp(prefix="ttc-sandbox-")
    try:
        scratch = _scratch(outer, setup, code, options.prelude)
        argv = [*setup.wrapper, setup.python, "-I", "-S", "-B", "-c", BOOT_SOURCE]
        argv += ["guard" if options.audit_guard else "noguard", setup.boot, str(setup.uid)]
        argv.append(str(setup.uid))
        if setup.hide:
            argv += hidden(options.hide)
        run = functools.partial(preexec, limits, setup.drop)
        ended = _run(argv, stdin, scratch, run, options)
    finally:
        remove_tree(outer)
    return _result(setup, ended, cpu_limit(options.timeout_s, options.cpu_s))


def _scratch(outer: str, setup: Setup, code: str, prelude: str) -> str:
    """The run's scratch directory, holding main.py (and prelude.py), owned by the program's uid."""
    scratch = os.path.join(outer, secrets.token_hex(16))
    os.mkdir(scratch, 0o700)
    with open(os.path.join(scratch, "main.py"), "w", encoding="utf-8") as f:
        f.write(code)
    if prelude:
        with open(os.path.join(scratch, "prelude.py"), "w", encoding="utf-8") as f:
            f.write(prelude)
    if setup.uid != os.geteuid():
        os.chmod(outer, 0o711)
        os.chown(scratch, setup.uid, setup.uid)
    return scratch


def _run(
    argv: list[str], stdin: str, scratch: str, setup: Callable[[], None], options: RunOptions
) -> _Ended:
    """Starts the process, waits for it up to the deadline, kills its group and reaps it."""
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
            env=environment(scratch),
            start_new_session=True,
            preexec_fn=setup,
        )
        try:
            exited = _exits_within(proc.pid, options.timeout_s)
        finally:
            # Exited or not, kill the whole group before reaping the leader: its pid (and
            # so the group id) cannot be reused while it is an unreaped zombie.
            _kill_group(proc.pid)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        out, truncated = _read_head(fout, options.max_output_bytes)
        err = _read_tail(ferr, _STDERR_TAIL)
    cpu = usage.ru_utime + usage.ru_stime
    return _Ended(exited, proc.returncode, cpu, wall, out, truncated, err, proc.pid)


def _result(setup: Setup, ended: _Ended, cpu_limit: int) -> SandboxResult:
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
        killed_reason=_reason(ended, returncode, stderr, cpu_limit),
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


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def remove_tree(path: str) -> None:
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


def _read_head(file: Any, limit: int) -> tuple[bytes, bool]:
    file.seek(0)
    data: bytes = file.read(limit + 1)
    return data[:limit], len(data) > limit


def _read_tail(file: Any, limit: int) -> bytes:
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - limit))
    data: bytes = file.read(limit)
    return data
