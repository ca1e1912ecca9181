"""What the sandbox reads of processes in /proc, and the tag that names what a ttc process leaves
behind (its scratch directories and cgroups), so that a later one can tell whether their maker
is gone."""

from __future__ import annotations

import os

__all__ = ["PREFIX", "owner_gone", "owner_tag", "start_time", "stat_fields"]

PREFIX = "ttc-sandbox-"


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/`pid`/stat after the command name (state first), or None if there is
    no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].split()


def start_time(pid: int) -> str:
    """The start time of the process `pid` (clock ticks after boot), "0" if there is none."""
    fields = stat_fields(pid)
    return "0" if fields is None else fields[19].decode()


def owner_tag() -> str:
    """This process's tag: `ttc-sandbox-<pid>-<start time>` (a pid alone may be reused)."""
    return f"{PREFIX}{os.getpid()}-{start_time(os.getpid())}"


def owner_gone(name: str) -> bool:
    """Whether `name` begins with the tag of a ttc process that is gone; False for a name this
    code did not make, or one whose process lives."""
    pid, _, rest = name.removeprefix(PREFIX).partition("-")
    start = rest.partition("-")[0]
    if not (name.startswith(PREFIX) and pid.isdigit() and start.isdigit()):
        return False
    return start_time(int(pid)) != start
