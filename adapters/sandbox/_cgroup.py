"""One cgroup per sandboxed program: a memory limit and a process limit for its whole tree, and a
kill that nothing it forked or setsid-ed survives.

Where this process may create cgroups (as root, usually), each run gets a group in every hierarchy
that helps, as a child of a group per ttc process (`ttc-sandbox-<pid>-<start time>`, below this
process's own group, so that any limit above still holds):

- cgroup v2 (the unified hierarchy): the kill (`cgroup.kill`), and, when the controllers are
  delegated to this process's group, `memory.max` (with `memory.swap.max` 0) and `pids.max`;
- cgroup v1: the memory controller's `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`,
  swap included) and the pids controller's `pids.max`, where v2 does not give them.

The program enters its groups between fork and exec (`preexec`), before any of its code runs. The
kill writes `cgroup.kill` where v2 has one, else sends SIGKILL to every process listed until none
is left (the seccomp filter forbids new processes, and pids.max bounds them without it); the
groups are removed once empty. A group whose ttc process is gone (killed with -9, say) is killed
and removed at the next start. Whether the memory limit killed a process is read back
(`oom_kill` in memory.events or memory.oom_control). An empty group serves the next run of the
same process.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass, field

from ._proc import owner_gone, owner_tag

__all__ = ["Cgroups", "Group", "probe"]

_ROOT = "/sys/fs/cgroup"


@dataclass(frozen=True, slots=True)
class _Place:
    """Where this process's groups go in one hierarchy."""

    parent: str  # this ttc process's group, created at the probe
    version: int  # 1 or 2
    limits: frozenset[str]  # of "memory", "pids": what this hierarchy limits here


class Cgroups:
    """The hierarchies a run's group is made in (`probe`), and the groups made so far: a run
    takes an idle one (its limits set again if they differ), and gives it back once it is empty,
    which saves making and removing groups for every run. `close` removes them all (at exit)."""

    def __init__(self, places: tuple[_Place, ...]) -> None:
        self.places = places
        self._idle: list[Group] = []

    @property
    def limits(self) -> frozenset[str]:
        return frozenset().union(*(p.limits for p in self.places))

    def group(self, memory_bytes: int, pids: int) -> Group:
        """A group for one run, empty, with these limits."""
        wanted = (memory_bytes, pids)
        group = self._idle.pop() if self._idle else self._make()
        try:
            if group.limits != wanted:
                for place, path in group.dirs:
                    _limit(place, path, memory_bytes, pids)
                group.limits = wanted
        except OSError:
            group.close()
            raise
        group.oom_before = group.oom_kills()
        return group

    def release(self, group: Group) -> None:
        """Gives back a group after its run: kept for the next if it is empty, else removed."""
        if group.pids():
            group.close()
        else:
            self._idle.append(group)

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
        for place in self.places:
            _rmdir(place.parent, tries=1)

    def _make(self) -> Group:
        name = "run-" + secrets.token_hex(6)
        made: list[tuple[_Place, str]] = []
        try:
            for place in self.places:
                path = os.path.join(place.parent, name)
                os.mkdir(path)
                made.append((place, path))
        except OSError:
            Group(tuple(made)).close()
            raise
        return Group(tuple(made))


@dataclass(slots=True)
class Group:
    """One run's groups, one per hierarchy."""

    dirs: tuple[tuple[_Place, str], ...]
    limits: tuple[int, int] = (0, 0)  # memory bytes, pids, as last set
    oom_before: int = field(default=0)

    @property
    def limited(self) -> frozenset[str]:
        """What these groups limit: of "memory" and "pids"."""
        return frozenset().union(*(place.limits for place, _ in self.dirs))

    @property
    def procs_files(self) -> tuple[str, ...]:
        """The cgroup.procs files that the program writes itself into before its first line."""
        return tuple(os.path.join(path, "cgroup.procs") for _, path in self.dirs)

    def pids(self) -> list[int]:
        found: set[int] = set()
        for file in self.procs_files:
            with contextlib.suppress(OSError, ValueError), open(file, "rb") as f:
                found.update(int(line) for line in f.read().split())
        return sorted(found)

    def kill(self, wait_s: float = 5.0) -> bool:
        """Kills every process in the groups; whether they were all gone within `wait_s`."""
        for place, path in self.dirs:
            if place.version == 2:
                with (
                    contextlib.suppress(OSError),
                    open(os.path.join(path, "cgroup.kill"), "w") as f,
                ):
                    f.write("1")
        deadline = time.monotonic() + wait_s
        pause = 0.0005
        while True:
            left = self.pids()
            if not left:
                return True
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.02)

    def oom_kills(self) -> int:
        """How many processes the memory limit has killed in these groups so far."""
        return sum(_oom_kills(place, path) for place, path in self.dirs if "memory" in place.limits)

    def close(self) -> None:
        """Removes the groups (once empty)."""
        for _, path in self.dirs:
            _rmdir(path)


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _limit(place: _Place, path: str, memory_bytes: int, pids: int) -> None:
    if "pids" in place.limits:
        _write(os.path.join(path, "pids.max"), str(pids))
    if "memory" not in place.limits:
        return
    if place.version == 2:
        _write(os.path.join(path, "memory.max"), str(memory_bytes))
        swap = os.path.join(path, "memory.swap.max")
        if os.path.exists(swap):
            _write(swap, "0")
        return
    files = [os.path.join(path, "memory.limit_in_bytes")]
    memsw = os.path.join(path, "memory.memsw.limit_in_bytes")
    if os.path.exists(memsw):  # never below the memory limit: raised first, lowered last
        files = [memsw, *files] if _read_int(memsw) < memory_bytes else [*files, memsw]
    for file in files:
        _write(file, str(memory_bytes))


def _read_int(path: str) -> int:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0


def _oom_kills(place: _Place, path: str) -> int:
    name = "memory.events" if place.version == 2 else "memory.oom_control"
    try:
        with open(os.path.join(path, name), encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _rmdir(path: str, tries: int = 40) -> None:
    # A group is removable once its last process is reaped, which may lag the kill a little.
    pause = 0.0005
    for _ in range(tries):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def _own_groups() -> dict[str, str]:
    """This process's group path per hierarchy: "2" for v2, else each v1 controller's name."""
    found: dict[str, str] = {}
    with open("/proc/self/cgroup", encoding="utf-8") as f:
        for line in f:
            number, controllers, path = line.rstrip("\n").split(":", 2)
            if number == "0" and not controllers:
                found["2"] = path
            for controller in controllers.split(","):
                if controller in ("memory", "pids"):
                    found[controller] = path
    return found


def _mounts() -> dict[str, tuple[str, str]]:
    """Where each hierarchy is mounted: {"2" | controller: (mount point, root within it)}."""
    found: dict[str, tuple[str, str]] = {}
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            before, _, after = line.partition(" - ")
            fields, rest = before.split(), after.split()
            if len(fields) < 5 or len(rest) < 3:
                continue
            root, point = fields[3], fields[4].replace("\\040", " ")
            if rest[0] == "cgroup2":
                found.setdefault("2", (point, root))
            elif rest[0] == "cgroup":
                for option in rest[2].split(","):
                    if option in ("memory", "pids"):
                        found.setdefault(option, (point, root))
    return found


def _sweep(directory: str) -> None:
    """Kills and removes the groups of ttc processes that are gone."""
    try:
        names = [n for n in os.listdir(directory) if owner_gone(n)]
    except OSError:
        return
    for name in names:
        parent = os.path.join(directory, name)
        with contextlib.suppress(OSError):
            for child in os.listdir(parent):
                path = os.path.join(parent, child)
                if os.path.isdir(path):
                    Group(((_Place(parent, 1, frozenset()), path),)).kill(wait_s=1.0)
                    _rmdir(path)
        _rmdir(parent)


def _place(kind: str, own: str, mount: tuple[str, str]) -> _Place | None:
    point, root = mount
    relative = os.path.relpath(own, root) if own.startswith(root) else None
    if relative is None:
        return None
    base = os.path.normpath(os.path.join(point, relative))
    _sweep(base)
    parent = os.path.join(base, owner_tag())
    try:
        os.mkdir(parent)
    except FileExistsError:
        pass
    except OSError:
        return None
    if kind != "2":
        return _Place(parent, 1, frozenset((kind,)))
    limits: set[str] = set()
    with contextlib.suppress(OSError):
        with open(os.path.join(parent, "cgroup.controllers"), encoding="ascii") as f:
            available = set(f.read().split()) & {"memory", "pids"}
        if available:
            _write(
                os.path.join(parent, "cgroup.subtree_control"),
                " ".join("+" + c for c in sorted(available)),
            )
            limits = available
    return _Place(parent, 2, frozenset(limits))


def probe() -> tuple[Cgroups | None, str]:
    """The hierarchies usable here (None if none), and what was found, in words."""
    try:
        own, mounts = _own_groups(), _mounts()
    except OSError as exc:
        return None, f"cgroups unreadable ({exc})"
    places: list[_Place] = []
    v2 = _place("2", own["2"], mounts["2"]) if "2" in own and "2" in mounts else None
    if v2 is not None:
        places.append(v2)
    for kind in ("memory", "pids"):
        if v2 is not None and kind in v2.limits:
            continue
        if kind in own and kind in mounts:
            place = _place(kind, own[kind], mounts[kind])
            if place is not None:
                places.append(place)
    cgroups = Cgroups(tuple(places)) if places else None
    if cgroups is None:
        return None, "no cgroup can be made here"
    try:
        cgroups.release(cgroups.group(64 << 20, 8))
    except OSError as exc:
        cgroups.close()
        return None, f"a cgroup could not be limited ({exc})"
    atexit.register(cgroups.close)
    return cgroups, "cgroup " + ", ".join(
        f"v{p.version}" + (f" ({', '.join(sorted(p.limits))})" if p.limits else " (kill)")
        for p in places
    )
