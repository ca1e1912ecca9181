"""The verifier pool: worker processes that judge responses while requests are still in flight.

Verifiers run in processes, not threads: some (math-verify) rely on `signal.alarm`, which only
works in a process's main thread, and a CPU-bound verifier must not stall the event loop.
Workers are started with `spawn` so they inherit no event loop, no sockets and no threads.

`spawn` imports the host's `__main__` module in each worker: a script must start its run under
`if __name__ == "__main__":`. A worker that re-runs such a script, instead of re-running the
whole run, exits at once, and the pool's first use raises one `VerifierError` naming the cause;
so does a pool whose workers cannot start at all (a suite class defined in a notebook cannot be
imported by a new process: judge in-process with `workers=0`). Workers ignore SIGINT: Ctrl-C is
the host's to handle, and the host shuts them down.

The workers are `_procs.Workers`: the event loop reads and writes their pipes itself, with no
thread of the parent in between (and no named semaphore for a `kill -9` to leave behind).

A suite's `judge` that raises is a bug in the suite, not a score: the pool raises a
`VerifierError` naming the item (the traceback goes to the log), and the run stops dispatching;
samples that landed stay in the journal, to be judged when the run is resumed.

`Verifiers` is what the engine asks of a pool; `VerifierPool` is the local one, and
`ttc.adapters.RayVerifierPool` judges on Ray with the same `judge_pairs` in each worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from typing import Any, Protocol

from ttc.engine.contract._errors import ConfigError, VerifierError
from ttc.engine.contract._types import Item, Suite, Verdict
from ttc.engine.run._procs import Workers, WorkersBroken

log = logging.getLogger("ttc")

_SUITE: Suite | None = None


def _die_with_parent(parent: int) -> None:
    # A run killed with SIGKILL cannot shut its pool down: on Linux the kernel then kills the
    # workers too (PR_SET_PDEATHSIG), so no orphan waits forever on a dead queue.
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:  # the parent died before the line above took effect
            os._exit(1)


def _install(suite: Suite, parent: int) -> None:
    # The suite is pickled once per worker, not once per response; its `prepare()` hook builds
    # its verifiers here, at start-up, rather than inside the first round.
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the host's: it shuts us down
    _die_with_parent(parent)
    global _SUITE
    _SUITE = suite
    suite.prepare()


def _judge_many(batch: list[tuple[Any, str]]) -> list[Any]:
    """`judge_pairs` in a worker, on a batch as `_to_worker` sent it, answered as `_verdicts`
    reads it."""
    assert _SUITE is not None, "verifier worker was not initialised"
    pairs = [(Item(*item) if type(item) is tuple else item, text) for item, text in batch]
    return [_plain(v) for v in judge_pairs(_SUITE, pairs)]


# Items and verdicts cross to and from the workers as plain tuples when they are of the
# contract's own classes: a slotted dataclass pickles through `dataclasses.fields` for every
# object, which cost more than the rest of a round trip. A subclass (a suite's own) goes whole.
def _to_worker(pairs: list[tuple[Item, str]]) -> list[tuple[Any, str]]:
    return [
        ((it.id, it.question, it.reference, it.meta) if type(it) is Item else it, text)
        for it, text in pairs
    ]


def _plain(v: Verdict) -> Any:
    return (v.score, v.answer, v.detail) if type(v) is Verdict else v


def _verdicts(replies: list[Any]) -> list[Verdict]:
    return [Verdict(*v) if type(v) is tuple else v for v in replies]


class JudgeRaised(Exception):
    """A suite's `judge` raised: which item, what, and its traceback (as text, so that it
    crosses the process boundary whole)."""

    def __init__(self, item: str, error: str, trace: str) -> None:
        super().__init__(item, error, trace)
        self.item = item
        self.error = error
        self.trace = trace

    def __str__(self) -> str:
        return f"on item {self.item}, in the verifier process:\n{self.trace.rstrip()}"

    def failure(self) -> VerifierError:
        """The error the run stops with (raise it from this one, whose text is the judge's own
        traceback: the host sees it with the error, and a run's run.log with the failure)."""
        return VerifierError(
            f"the suite's judge raised {self.error} on item {self.item}: a judge returns a "
            "score, 0 for a response it cannot read, and never raises (its traceback is the "
            "cause below)"
        )


def judge_pairs(suite: Suite, pairs: list[tuple[Item, str]]) -> list[Verdict]:
    """`suite.judge` on each pair, in a verifier worker; JudgeRaised if a judge raised."""
    # A judge that raises is a bug in the suite (a response it cannot read scores 0, by its own
    # rule): never a silent 0, but an error naming the item, with the traceback.
    verdicts = []
    for item, text in pairs:
        try:
            verdicts.append(suite.judge(item, text))
        except Exception as exc:
            raise JudgeRaised(item.id, repr(exc), traceback.format_exc()) from None
    return verdicts


def _bootstrapping() -> bool:
    """Whether this process is a `spawn` child still importing its parent's `__main__`."""
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def _importable(suite: Suite) -> None:
    """A suite class a new process cannot import (defined in a notebook or an interactive
    session) is refused before any process starts."""
    cls = type(suite)
    main = sys.modules.get("__main__")
    if cls.__module__ == "__main__" and not getattr(main, "__file__", None):
        raise ConfigError(
            f"the suite's class {cls.__qualname__} is defined in an interactive session, so the "
            "verifier processes cannot import it: move it into a module, or judge in this "
            "process with 0 verifier workers (RunConfig(verifier_workers=0))"
        )


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while worker processes start (they inherit it across exec); restored
    after. Only the main thread may change a signal's handler: elsewhere, left as it is."""
    before = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or before is None:
        yield  # (None: a handler set from C, which could not be put back)
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


class Verifiers(Protocol):
    """What the engine asks of a verifier pool: `start` (at once, without blocking: workers
    start in the background), `ready`, `judge_many` and `aclose`; `started` says whether
    `start` was called (an engine starts, and then closes, a pool it is handed unstarted)."""

    workers: int
    judged: int

    @property
    def started(self) -> bool: ...

    def start(self) -> None: ...

    async def ready(self) -> None: ...

    async def judge_many(self, pairs: list[tuple[Item, str]]) -> list[Verdict]: ...

    async def aclose(self) -> None: ...


class VerifierPool:
    """Judges (item, response) pairs with the suite's verifier; `workers=0` judges in-process."""

    def __init__(self, suite: Suite, workers: int) -> None:
        self.suite = suite
        self.workers = workers
        self._pool: Workers | None = None
        self._retired: list[Workers] = []  # broken sets, closed, not yet reaped
        self._ready = False
        self.judged = 0

    @property
    def started(self) -> bool:
        """Whether the worker processes are running (always true in-process)."""
        return self.workers == 0 or self._pool is not None

    def start(self) -> None:
        if self.workers > 0 and self._pool is None:
            if _bootstrapping():
                # This process is a verifier worker of another run, importing that run's script
                # (no `__main__` guard): starting a run here would start processes for ever.
                # Leave quietly; the run that started us says why its workers did not start.
                os._exit(1)
            _importable(self.suite)
            if os.name != "posix":  # the loop watches the workers' pipes: a selector on POSIX
                raise ConfigError(
                    "verifier processes need a POSIX system: judge in this process with 0 "
                    "verifier workers (RunConfig(verifier_workers=0)), or on Ray"
                )
            # Start the workers now, so their imports overlap the first requests; they are
            # started ignoring SIGINT, so a Ctrl-C during their start-up prints nothing.
            with _sigint_ignored():
                self._pool = Workers(self.workers, _install, (self.suite, os.getpid()), _judge_many)

    async def ready(self) -> None:
        """Wait until the worker processes have started and installed the suite; VerifierError
        if they could not."""
        if self._ready or self._pool is None:
            return
        if self._pool.started:  # a worker that dies later is replaced, not a start-up failure
            self._ready = True
            return
        try:
            await self._pool.ready()
        except WorkersBroken:
            raise VerifierError(
                "the verifier processes exited while starting, so no response can be judged. "
                "They are started with multiprocessing's spawn, which imports the script that "
                "started the run: put the code that starts it under "
                '`if __name__ == "__main__":`. Otherwise the suite could not be set up in a new '
                "process (its class must be importable, and its prepare() must succeed): judge "
                "in this process with 0 verifier workers to see the error"
            ) from None
        self._ready = True

    async def judge(self, item: Item, text: str) -> Verdict:
        """The verdict on one response."""
        return (await self.judge_many([(item, text)]))[0]

    async def judge_many(self, pairs: list[tuple[Item, str]]) -> list[Verdict]:
        """Verdicts on several responses, in one round trip to a worker."""
        self.judged += len(pairs)
        try:
            if self._pool is None:
                return judge_pairs(self.suite, pairs)
            return await self._judge_in_workers(pairs)
        except JudgeRaised as exc:
            raise exc.failure() from exc

    async def _judge_in_workers(self, pairs: list[tuple[Item, str]]) -> list[Verdict]:
        await self.ready()
        for _ in range(2):
            pool = self._pool
            assert pool is not None
            try:
                return _verdicts(await pool.call(_to_worker(pairs)))
            except WorkersBroken:
                # A worker died (killed, out of memory). Every batch in flight on that pool
                # fails at once: only the first to notice starts a fresh pool.
                if self._pool is pool:
                    log.warning("a verifier process died; restarting the pool")
                    self._restart()
        reason = "verifier process died twice on this batch"
        log.warning(reason)
        return [Verdict(0.0, None, reason) for _ in pairs]

    def _restart(self) -> None:
        if self._pool is not None:
            # A broken set has failed every call waiting on it (each is tried again here).
            self._pool.close()
            self._retired.append(self._pool)
            self._pool = None
        self.start()

    async def aclose(self) -> None:
        sets, self._retired = self._retired, []
        if self._pool is not None:
            sets.append(self._pool)
            self._pool = None
        for workers in sets:
            workers.close()
        for workers in sets:
            await asyncio.to_thread(workers.join)
