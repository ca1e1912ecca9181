"""Runs an untrusted Python program once, with its stdin, under limits; returns what it printed.

The kernel is the boundary. Each layer below is on where this machine allows it (probed once per
process, on first use); `protections()` says which are on, and what stops the others, and a setup
weaker than the strongest is logged as a warning on the "ttc" logger.

- **Namespaces** (`unshare` from util-linux): a network namespace (a loopback that is down: no
  connection leaves or reaches the host), a PID namespace whose init is the program (when it
  dies, the kernel kills every process left in it, even those that called setsid), an IPC
  namespace and a mount namespace. As root the program then drops to uid/gid 65534 (nobody) with
  no groups; as another user, unshare needs unprivileged user namespaces and the program moves
  into a nested user namespace with no power over the mounts.
- **A private root** (`_confine`, in the mount namespace): only /usr, /bin, /sbin, /lib*, the
  interpreter's installation (read-only), /etc/ld.so.cache and /etc/localtime, /dev/null, zero,
  full, random and urandom, the namespace's own /proc, and the scratch directory at /tmp: a tmpfs
  of `memory_mb` (nosuid, nodev, noexec) that vanishes with the namespace. Nothing else of the
  machine exists for the program: no home, no project, no data, no answers, no unix socket;
  any path the caller names (`hide`, by its real path too) is covered even inside those trees.
- **seccomp-bpf** (`_seccomp`, loaded last): no execve, no process (threads only), no socket,
  no ptrace, mount, namespace, keyring, bpf, perf, io_uring or memfd; the interpreter's
  /proc/self/status reads `Seccomp: 2`, which the probe checks.
- **A cgroup per program** (`_cgroup`, where one can be made: cgroup v2, or the v1 memory and
  pids controllers): memory (`memory_mb`) and process limits for the whole tree, and the kill
  through the group.
- **Death with ttc**: the parent-death signal is set after every uid change (the kernel clears
  it then), and the program exits before its first line if ttc is already gone; with the PID
  namespace, a kill -9 of ttc or of a verifier worker takes every program it started down, and
  with the private root no scratch directory is left anywhere.
- **rlimits** (soft = hard): RLIMIT_CPU (the CPU budget; SIGKILL at the limit), RLIMIT_AS
  (memory, per process), RLIMIT_NPROC (the uid's tasks at the start plus 64), RLIMIT_FSIZE (the
  output cap + 1 byte, per file), RLIMIT_NOFILE (64), RLIMIT_CORE (0); and PR_SET_NO_NEW_PRIVS.
- an environment with nothing inherited (PATH, HOME, TMPDIR, LANG, LC_ALL: no API key), and
  `python -I -S -B` (no PYTHON* variables, no site-packages, no bytecode written);
- stdin, stdout and stderr as anonymous temporary files: a program printing forever stops at
  RLIMIT_FSIZE; only the first `max_output_bytes` of stdout and the last 64 KiB of stderr are
  read back;
- the **audit-hook guard** (`sys.addaudithook`, unless `audit_guard=False`): a friendly,
  early refusal of what the layers above stop anyway (sockets, processes, ctypes, writes outside
  the scratch directory, other processes' /proc entries, and more; see `_boot`). CPython's
  audit hooks are not a security boundary; they give the clear error message.

Fallbacks: without a private root (no mount namespace) the program has a host scratch directory
under a random name in a directory it can cross but not list, removed through file descriptors
once no process of the run is left (`_remove`; those of a killed ttc are swept at the next
start). There **Landlock** (`_landlock`, Linux >= 5.13, allowed in Docker's default profile and
to any unprivileged process) makes the private root's list a kernel allow-list instead: the
system's trees and the interpreter read-only, the devices, the process's own /proc entries, the
scratch directory read-write; nothing else can be opened, and (by its ABI) no TCP connection,
no signal to a process outside the sandbox. Without Landlock either, the program can read
whatever world-readable file its uid can (`hidden_inputs` says "not hidden", and a suite whose
tests must stay hidden refuses to judge unless told otherwise). Without namespaces it also
shares the host's network and PID space, and only seccomp (or, without it, the guard) keeps it
off the network; without seccomp, exec and fork are refused only by the guard. Processes: a pids
cgroup of the run's own bounds them where cgroups can be made (RLIMIT_NPROC, which counts every
process of the uid, is then not set); as root without one, each ttc process runs its programs
as a uid of its own (`PROCESS_UIDS` + its pid), so no other program can use up its count. Not
protected anywhere: the host's CPU while a run lasts, and kernel exploits through the system
calls left.

`TTC_SANDBOX_WITHOUT=namespaces,landlock,cgroup` (any of them) leaves layers off as if the
machine refused them: how the tests run the fallbacks, and how a user can see one.
Call `run_python` from one thread per process (`preexec_fn` is not safe to run while other
threads fork), as the verifier worker processes do.

The layers are modules: `_confine` and `_boot` (the child's first Python), `_seccomp`, `_cgroup`,
`_limits` (rlimits, prctl, environment), `_launch` (one process), `_remove`, `_proc`, `_result`;
this module probes which setup works here.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
from dataclasses import dataclass, replace
from typing import Any

from ._cgroup import probe as probe_cgroups
from ._landlock import abi as landlock_abi
from ._launch import Setup, filesystem, launch, run_uid
from ._limits import NOBODY, PRCTL
from ._remove import sweep
from ._result import RunOptions, SandboxResult
from ._seccomp import filter_program

__all__ = ["RunOptions", "SandboxResult", "SandboxUnavailable", "protections", "run_python"]

_log = logging.getLogger("ttc")

WITHOUT = "TTC_SANDBOX_WITHOUT"
"""The environment variable naming layers to leave off (comma-separated, of `OPTIONAL`), as if
this machine refused them: how the tests (and a user who wants to see it) run a fallback setup."""
OPTIONAL = ("namespaces", "landlock", "cgroup")
_UNSHARE_FLAGS = ("--net", "--ipc", "--pid", "--fork", "--kill-child", "--mount-proc")
_NAMESPACES = ("net", "ipc", "pid", "mount")
_SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
_PROBE = (
    "import json, sys\n"  # json: the standard library is readable, not only the interpreter
    "print(sys.version_info >= (3, 10))\n"
    "try:\n"
    "    status = open('/proc/self/status').read().split('Seccomp:')[1].split()[0]\n"
    "except Exception:\n"
    "    status = '?'\n"
    "print(status)\n"
)


class SandboxUnavailable(RuntimeError):
    """No interpreter runs under the sandbox on this machine."""


@dataclass(frozen=True, slots=True)
class _Chosen:
    """The setup chosen here, and why each layer that is off is off."""

    setup: Setup
    seccomp_status: str  # `Seccomp:` as the probe program read it from /proc/self/status
    missing: dict[str, str]
    cgroup: str  # what the cgroup probe found, in words


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


def _probe(setup: Setup) -> tuple[str | None, str]:
    """(None if `setup` runs a trivial program on Python >= 3.10 with its seccomp filter on,
    else what went wrong; the `Seccomp:` status the program read)."""
    try:
        result = launch(setup, _PROBE, "", RunOptions(timeout_s=20.0, max_output_bytes=4096))
    except OSError as exc:
        return f"{setup.python}: {exc}", "?"
    lines = result.stdout.split()
    if result.ok and lines[:1] == ["True"] and len(lines) == 2:
        if setup.bpf and lines[1] != "2":
            return f"{setup.python}: the seccomp filter is not on (Seccomp: {lines[1]})", lines[1]
        return None, lines[1]
    text = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()
    return f"{setup.python}: exit status {result.returncode}: {text[-1][:200]}", "?"


def _variants(unshare: str | None, base: Setup) -> list[tuple[str, Setup]]:
    """The setups to try, strongest first, each named (namespaces only with `unshare`). Landlock
    (`base.landlock`) makes the file allow-list of those without a private root."""
    root = os.geteuid() == 0
    variants: list[tuple[str, Setup]] = []
    if unshare is not None:
        wrapper: tuple[str, ...]
        namespaces: tuple[str, ...]
        if root:
            wrapper, namespaces = (unshare, *_UNSHARE_FLAGS, "--"), _NAMESPACES
        else:
            wrapper = (unshare, "--map-root-user", *_UNSHARE_FLAGS, "--")
            namespaces = ("user", *_NAMESPACES)
        # setpriv gives unshare the parent-death signal without a fork of ttc in Python
        setpriv = shutil.which("setpriv", path=_SYSTEM_PATH)
        if setpriv is not None:
            wrapper = (setpriv, "--pdeathsig", "KILL", "--", *wrapper)
        strongest = replace(
            base,
            wrapper=wrapper,
            namespaces=namespaces,
            boot="drop" if root else "nest",
            root=True,
            pdeathsig_preexec=setpriv is None,
        )
        variants.append(("a private root", replace(strongest, landlock=0)))
        variants.append(("namespaces without a private root", replace(strongest, root=False)))
    plain = replace(base, boot="drop" if root else "none")
    variants.append(("no namespaces", plain))
    if base.landlock:  # each again without it, should the kernel refuse this allow-list
        variants += [
            (f"{label} without Landlock", replace(v, landlock=0))
            for label, v in variants
            if v.landlock
        ]
    if base.bpf:  # each again without seccomp, should the kernel refuse the filter
        variants += [(f"{label} without seccomp", replace(v, bpf=b"")) for label, v in variants]
    return variants


def _make_setup(allow_unshare: bool = True) -> _Chosen:
    """The strongest setup that works here (see the module docstring). Anything weaker than the
    strongest is logged as a warning."""
    sweep()
    missing: dict[str, str] = {}
    off = _turned_off()
    turned_off = f"turned off ({WITHOUT}={os.environ.get(WITHOUT, '')})"
    unshare = _unshare(allow_unshare, off, turned_off, missing)
    bpf = filter_program()
    if bpf is None:
        missing["seccomp"] = f"no filter for this architecture ({os.uname().machine})"
    cgroups, cgroup_note = (None, turned_off) if "cgroup" in off else probe_cgroups()
    if cgroups is None:
        missing["cgroup"] = cgroup_note
    else:
        for limit in ("memory", "pids"):
            if limit not in cgroups.limits:
                missing[f"cgroup {limit}"] = (
                    f"{cgroup_note}: no {limit} controller delegated to this process's group"
                )
    landlock, landlock_note = (0, turned_off) if "landlock" in off else landlock_abi()
    root = os.geteuid() == 0
    uid = NOBODY if root else os.geteuid()
    # Without a pids cgroup, RLIMIT_NPROC counts all of a uid's processes: as root, each ttc
    # process runs its programs as a uid of its own, so that others' cannot use up its count.
    own_uid = root and (cgroups is None or "pids" not in cgroups.limits)
    base = Setup(
        "", (), (), uid, bpf=bpf or b"", cgroups=cgroups, landlock=landlock, own_uid=own_uid
    )
    failures: list[str] = []
    for label, variant in _variants(unshare, base):
        why = "no interpreter"
        for python in _candidate_pythons():
            candidate = replace(variant, python=python)
            outcome, status = _probe(candidate)
            if outcome is None:
                if not candidate.root and not candidate.landlock:
                    missing["landlock"] = landlock_note if not landlock else "; ".join(failures)
                return _chosen(candidate, label, status, missing, failures, cgroup_note)
            why = outcome
        failures.append(f"{label} failed ({why})")
    raise SandboxUnavailable(
        "sandbox: no Python >= 3.10 interpreter runs under the sandbox's limits and uid; tried "
        + ", ".join(_candidate_pythons())
        + ": "
        + "; ".join(failures)
    )


def _unshare(
    allow: bool, off: frozenset[str], turned_off: str, missing: dict[str, str]
) -> str | None:
    """unshare's path, if namespaces are to be tried; else why not, in `missing`."""
    if "namespaces" in off:
        missing["namespaces"] = turned_off
        return None
    if not allow:
        missing["namespaces"] = "not allowed by the caller"
        return None
    unshare = shutil.which("unshare", path=_SYSTEM_PATH)
    if unshare is None:
        missing["namespaces"] = "unshare (util-linux) is not installed"
    return unshare


def _turned_off() -> frozenset[str]:
    """The layers `WITHOUT` names (SandboxUnavailable for a name that is no such layer)."""
    names = {name.strip() for name in os.environ.get(WITHOUT, "").split(",") if name.strip()}
    unknown = sorted(names - set(OPTIONAL))
    if unknown:
        raise SandboxUnavailable(
            f"{WITHOUT}: no layer named {', '.join(unknown)}; choose from {', '.join(OPTIONAL)}"
        )
    return frozenset(names)


def _chosen(
    setup: Setup,
    label: str,
    status: str,
    missing: dict[str, str],
    failures: list[str],
    cgroup_note: str,
) -> _Chosen:
    if failures:
        why = "; ".join(failures)
        if not setup.root and "namespaces" not in missing:
            missing["private root"] = why
        if not setup.bpf and "seccomp" not in missing:
            missing["seccomp"] = why
        if not setup.namespaces and "namespaces" not in missing:
            missing["namespaces"] = why
    for layer, why in missing.items():
        _log.warning("sandbox: running without %s (%s), which protects less", layer, why)
    if failures and not missing:
        _log.warning(
            "sandbox: running with %s, which protects less: %s", label, "; ".join(failures)
        )
    return _Chosen(setup, status, missing, cgroup_note)


@functools.cache
def _chosen_here() -> _Chosen:
    return _make_setup()


def _setup() -> Setup:
    return _chosen_here().setup


def protections() -> dict[str, Any]:
    """What the sandbox enforces on this machine (probes on first use; raises
    SandboxUnavailable if nothing works): each layer, on or off, and `missing`, why each layer
    that is off is off. `uid` is the uid the program runs as, as the host sees it."""
    setup = _setup()  # first: a test may stand another setup in
    chosen = _chosen_here()
    uid = run_uid(setup)
    limits = sorted(setup.cgroups.limits) if setup.cgroups is not None else []
    return {
        "python": setup.python,
        "namespaces": list(setup.namespaces),
        "private_root": setup.root,
        # The kernel's allow-list of the files a program may open: its private root, or Landlock
        # where there is none, or nothing.
        "file_allow_list": "private root"
        if setup.root
        else f"Landlock ABI {setup.landlock}"
        if setup.landlock
        else None,
        "landlock": setup.landlock,
        "seccomp": bool(setup.bpf),
        "seccomp_status": chosen.seccomp_status,
        "cgroup": chosen.cgroup if setup.cgroups is not None else None,
        "cgroup_limits": limits,
        "hidden_inputs": hidden_inputs(setup),
        "uid": uid,
        "uid_dropped": uid != os.geteuid(),
        "uid_per_process": setup.own_uid,
        "rlimits": [
            "CPU",
            "AS",
            *([] if "pids" in limits else ["NPROC"]),
            "FSIZE",
            "NOFILE",
            "CORE",
        ],
        "nproc_enforced": uid != 0 or "pids" in limits,
        "prctl": PRCTL is not None,
        "audit_guard": True,
        "fresh_env": True,
        "isolated_python": True,
        "missing": dict(chosen.missing),
    }


def hidden_inputs(setup: Setup) -> str:
    """How the files a run hides (`RunOptions.hide`) are kept from its program: "absent" (not in
    its private root), "unreadable" (outside its Landlock allow-list), "covered" (by mounts in
    its mount namespace), or "not hidden" (nothing keeps the program from reading them)."""
    if setup.root:
        return "absent"
    if setup.landlock:
        return "unreadable"
    return "covered" if filesystem(setup) == "ns" else "not hidden"
