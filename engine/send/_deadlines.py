"""The per-attempt timeout: every attempt of a Sender on one timer.

`asyncio.timeout` arms a timer handle of its own per use: a push on the loop's heap, and a
cancelled handle left there until the loop sweeps it. That was 3.8 µs an attempt here, some 2%
of `ttc batch`'s CPU per request at zero latency. The attempts of one Sender share one duration,
so their deadlines fall in the order they start: the live ones are kept in that order (an
`OrderedDict`, each removed in O(1) when its attempt ends), and one timer is armed, for the
earliest. When it fires, every attempt past its deadline is cancelled, and the timer is armed
again for the next. Once no attempt is watched, the timer is cancelled and the loop let go (so
an attempt alone, with none beside it, still arms a timer of its own, as `asyncio.timeout` does:
the saving is where attempts overlap, as they do whenever more than one is under way).

What an attempt sees is `asyncio.timeout`'s: its task is cancelled at the deadline, and the
`with` turns that CancelledError into TimeoutError, unless the task was also cancelled by someone
else (then the CancelledError propagates: `Task.cancelling` and `Task.uncancel` tell them apart).

    deadlines = Deadlines(10.0)
    with deadlines.watch():          # inside a task
        await call()                 # TimeoutError once 10 s have passed
"""

from __future__ import annotations

import asyncio
import collections
from types import TracebackType

__all__ = ["Deadline", "Deadlines"]


class Deadlines:
    """The deadlines of attempts that each get `seconds` (None: no deadline), on one timer per
    event loop. Each loop's attempts are kept apart (`_Watched`), and only while it has some:
    an idle Deadlines keeps no loop alive, and a loop stopped for a while (a host that runs
    several in turn) finds its attempts as it left them."""

    __slots__ = ("_by_loop", "_last", "seconds")

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._by_loop: dict[asyncio.AbstractEventLoop, _Watched] = {}
        self._last: _Watched | None = None  # the loop served last: one lookup per attempt

    def watch(self) -> Deadline:
        """A deadline `seconds` from when its `with` is entered, for the task that enters it."""
        return Deadline(self)

    def __len__(self) -> int:
        """The attempts being watched, on every loop."""
        return sum(len(watched.live) for watched in list(self._by_loop.values()))

    def _watched(self, loop: asyncio.AbstractEventLoop) -> _Watched:
        """`loop`'s attempts, made when it has none yet; the entries of loops closed with
        attempts left under way (their tasks will never run again) are dropped then."""
        last = self._last
        if last is not None and last.loop is loop:
            return last
        watched = self._by_loop.get(loop)
        if watched is None:
            for other in list(self._by_loop):  # a copy: another thread's loop may change it
                if other.is_closed():
                    self._by_loop.pop(other, None)
            watched = self._by_loop[loop] = _Watched(self, loop)
        self._last = watched
        return watched

    def _drop(self, watched: _Watched) -> None:
        """`watched`'s loop has no attempt left: neither its timer nor this object keeps it
        alive (a host that runs a loop per job frees each)."""
        if watched.timer is not None:
            watched.timer.cancel()
            watched.timer = None
        self._by_loop.pop(watched.loop, None)
        if self._last is watched:
            self._last = None


class _Watched:
    """One loop's attempts under way, in deadline order, and the timer armed for the first."""

    __slots__ = ("live", "loop", "owner", "timer")

    def __init__(self, owner: Deadlines, loop: asyncio.AbstractEventLoop) -> None:
        self.owner, self.loop = owner, loop
        self.live: collections.OrderedDict[Deadline, None] = collections.OrderedDict()
        self.timer: asyncio.TimerHandle | None = None

    def fire(self) -> None:
        """Cancels every attempt past its deadline, then waits for the next deadline."""
        self.timer = None
        live, now = self.live, self.loop.time()
        while live:
            first = next(iter(live))
            if first.when > now:
                self.timer = self.loop.call_at(first.when, self.fire)
                return
            live.popitem(last=False)
            first.expired = True
            first.task.cancel()
        self.owner._drop(self)


class Deadline:
    """One attempt's deadline, as a `with` block inside its task (see the module)."""

    __slots__ = ("_cancelling", "_owner", "_watched", "expired", "task", "when")

    def __init__(self, owner: Deadlines) -> None:
        self._owner = owner
        self._watched: _Watched | None = None
        self.expired = False

    def __enter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a Deadline is entered inside a task")
        owner = self._owner
        self.task = task
        self._cancelling = task.cancelling()
        if owner.seconds is None:
            return self
        loop = task.get_loop()
        watched = self._watched = owner._watched(loop)
        self.when = loop.time() + owner.seconds
        watched.live[self] = None
        if watched.timer is None:
            watched.timer = loop.call_at(self.when, watched.fire)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.expired:
            watched = self._watched
            if watched is not None:
                live = watched.live
                live.pop(self, None)
                if not live:
                    self._owner._drop(watched)
            return
        # Cancelled by the timer: a timeout, unless someone else cancelled the task as well.
        if self.task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc
