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
  (see `_boot`). CPython's audit hooks are still not a security boundary: the guard is defense
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

The layers are modules: `_boot` (the child's first Python: hiding, the uid drop, the guard and its
deny lists), `_hide` (which directories), `_limits` (rlimits, prctl, environment), `_launch` (one
process and its scratch directory), `_result`; this module probes which setup works here.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
from dataclasses import replace
from typing import Any

from ._hide import hidden
from ._launch import Setup, launch
from ._limits import NOBODY, PRCTL
from ._result import RunOptions, SandboxResult

__all__ = ["RunOptions", "SandboxResult", "SandboxUnavailable", "protections", "run_python"]

_log = logging.getLogger("ttc")

_UNSHARE_FLAGS = ("--net", "--ipc", "--pid", "--fork", "--kill-child", "--mount-proc")
_NAMESPACES = ("net", "ipc", "pid", "mount")


class SandboxUnavailable(RuntimeError):
    """No interpreter runs under the sandbox on this machine."""


def run_python(code: str, stdin: str, options: RunOptions) -> SandboxResult:
    """Runs the Python program `code` on `stdin` in a sandbox under `options` (see the module
    docstring, and `RunOptions` for the limits)."""
    return launch(_setup(), code, stdin, options)


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


def _probe(setup: Setup) -> str | None:
    """None if `setup` runs a trivial program on Python >= 3.10, else what went wrong."""
    try:
        code = "import sys\nprint(sys.version_info >= (3, 10))"
        result = launch(setup, code, "", RunOptions(timeout_s=20.0, max_output_bytes=4096))
    except OSError as exc:
        return f"{setup.python}: {exc}"
    if result.ok and result.stdout.strip() == "True":
        return None
    lines = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()
    return f"{setup.python}: exit status {result.returncode}: {lines[-1][:200]}"


def _make_setup(allow_unshare: bool = True) -> Setup:
    """The strongest setup that works here: namespaces with hidden directories if unshare is
    allowed, the uid drop when root. Anything weaker than the strongest is logged as a warning.
    """
    root = os.geteuid() == 0
    uid = NOBODY if root else os.geteuid()
    variants: list[tuple[str, Setup]] = []
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
        strongest = Setup("", wrapper, namespaces, None, uid, boot, hide=True)
        weaker = replace(strongest, boot="drop" if root else "none", hide=False)
        variants.append(("namespaces and private directories", strongest))
        variants.append(("namespaces without private directories", weaker))
    else:
        _log.warning(
            "sandbox: no namespaces (%s): programs share the host's network, processes and "
            "files, as far as their uid may",
            "unshare is not installed" if allow_unshare else "not allowed by the caller",
        )
    plain = Setup("", (), (), (NOBODY, NOBODY) if root else None, uid)
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
def _setup() -> Setup:
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
        "hidden": hidden() if setup.hide else [],
        "rlimits": ["CPU", "AS", "NPROC", "FSIZE", "NOFILE", "CORE"],
        "nproc_enforced": setup.uid != 0,
        "prctl": PRCTL is not None,
        "audit_guard": True,
        "fresh_env": True,
        "isolated_python": True,
    }
