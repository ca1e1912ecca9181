"""The per-attempt timeout: every attempt of a Sender on one timer.

`asyncio.timeout` arms a timer handle of its own per use: a push on the loop's heap, and a
cancelled handle left there until the loop sweeps it. That was 3.8 µs an attempt here, some 2%
of `ttc batch`'s CPU per request at zero latency. The attempts of one Sender share one duration,
so their deadlines fall in the order they start: the live ones are kept in that order (an
`OrderedDict`, each removed in O(1) when its attempt ends), and one timer is armed, for the
earliest. When it fires, every attempt past its deadline is cancelled, and the timer is armed
again for the next. Once no attempt is watched, the timer is cancelled and the loop let go.

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
    event loop. Used by one loop at a time, as the Limiter it serves."""

    __slots__ = ("_live", "_loop", "_timer", "seconds")

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._live: collections.OrderedDict[Deadline, None] = collections.OrderedDict()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None

    def watch(self) -> Deadline:
        """A deadline `seconds` from when its `with` is entered, for the task that enters it."""
        return Deadline(self)

    def __len__(self) -> int:
        """The attempts being watched."""
        return len(self._live)

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serves `loop` from now on. The attempts of a loop that has stopped are dropped (their
        tasks will never run again); a loop still running with attempts under way is an error,
        as it is for an asyncio lock shared between loops."""
        old = self._loop
        if old is not None and self._live and old.is_running() and not old.is_closed():
            raise RuntimeError("Deadlines is in use by another event loop")
        if self._timer is not None:
            self._timer.cancel()
        self._live.clear()
        self._timer, self._loop = None, loop

    def _fire(self) -> None:
        """Cancels every attempt past its deadline, then waits for the next deadline."""
        self._timer = None
        loop, live = self._loop, self._live
        assert loop is not None
        now = loop.time()
        while live:
            first = next(iter(live))
            if first.when > now:
                self._timer = loop.call_at(first.when, self._fire)
                return
            live.popitem(last=False)
            first.expired = True
            first.task.cancel()
        self._loop = None  # nothing watched: no loop kept alive (see `_idle`)

    def _idle(self) -> None:
        """No attempt is watched: the timer is cancelled, and neither it nor this object keeps
        the loop alive (a host that runs a loop per job frees each)."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop = None


class Deadline:
    """One attempt's deadline, as a `with` block inside its task (see the module)."""

    __slots__ = ("_cancelling", "_owner", "expired", "task", "when")

    def __init__(self, owner: Deadlines) -> None:
        self._owner = owner
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
        if loop is not owner._loop:
            owner._bind(loop)
        self.when = loop.time() + owner.seconds
        owner._live[self] = None
        if owner._timer is None:
            owner._timer = loop.call_at(self.when, owner._fire)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.expired:
            live = self._owner._live
            live.pop(self, None)
            if not live:
                self._owner._idle()
            return
        # Cancelled by the timer: a timeout, unless someone else cancelled the task as well.
        if self.task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc
