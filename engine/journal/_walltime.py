"""A run's wall time over all its sessions, and each round's, from the journal's clock.

Every journal line carries the wall-clock time it was written (`at`), and every session begins
with a `start` line. A run stopped and resumed is one run: its wall time is the sum of its
sessions' (each from its `start` line to its last line, so a session killed with SIGKILL counts
up to its last written event), and a round's is the sum of the time each session spent in it.
Within a session, a round begins where the one before it ended (the session's start, for the
first): its time includes what it waited for (the verifier processes starting, the embedder
loading, the FAISS index), so the rounds add up to the session, less the final writing of the
results.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ttc.engine.journal._journal import journal_lines


@dataclass(slots=True)
class PastTimes:
    """What the journal's earlier sessions spent: in all, and in each round."""

    run_s: float = 0.0
    rounds: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    # The rounds that reached their barrier in some session (their `round` line).
    ended: set[int] = field(default_factory=set)


@dataclass(slots=True)
class _Session:
    start: float
    mark: float  # where the round in progress began
    last: float  # the session's last line
    round: int = 1  # the round in progress

    def close(self, into: PastTimes) -> None:
        into.run_s += max(0.0, self.last - self.start)
        into.rounds[self.round] += max(0.0, self.last - self.mark)


def past_times(path: Path) -> PastTimes:
    """The times of the sessions the journal at `path` holds (lines without a clock, written
    by an older ttc, count for nothing)."""
    times = PastTimes()
    session: _Session | None = None
    for _, line in journal_lines(path):
        if line["ev"] == "start":
            if session is not None:
                session.close(times)
            t = line.get("t")
            # A start with no clock (hand-edited, or damaged): its session counts for nothing.
            session = _Session(t, t, t) if isinstance(t, int | float) and t > 0 else None
            continue
        if line["ev"] == "round":
            times.ended.add(int(line["round"]))
        at = line.get("at")
        if session is None or not isinstance(at, int | float):
            continue  # lines shared from another run's journal before this run began
        session.last = max(session.last, float(at))
        if line["ev"] == "round":
            t = int(line["round"])
            times.rounds[t] += max(0.0, session.last - session.mark)
            session.mark, session.round = session.last, t + 1
    if session is not None:
        session.close(times)
    return times


class RunTimer:
    """The wall time of a run, its earlier sessions' included; each round's, from the round
    before it ended (or from this session's start)."""

    def __init__(self, past: PastTimes | None = None) -> None:
        self.past = past or PastTimes()
        self.started_at = time.time()  # the session's `start` line says this
        self.started = time.perf_counter()
        self._mark = self.started
        self.wall = 0.0

    def round_done(self, t: int) -> float:
        """Round `t` reached its barrier (or stopped): its time over every session so far."""
        now = time.perf_counter()
        spent, self._mark = now - self._mark, now
        return self.past.rounds.get(t, 0.0) + spent

    def stop(self) -> None:
        """Takes the wall time (once: the first call stands)."""
        if not self.wall:
            self.wall = self.past.run_s + time.perf_counter() - self.started
