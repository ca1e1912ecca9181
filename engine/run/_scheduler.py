"""One round of requests: a bounded pipeline of two worker pools under one `asyncio.TaskGroup`.

    jobs (lazy) ─► request workers ─► Sender.send_with_retry ─► cache | limiter ─► provider
                                      │
                                      ├─► on_landed (journaled in the same turn: never lost)
                                      └─► landed batches ─► verify workers ─► on_judged
                                                            (in batches of what landed)

Request workers are as many as the concurrency cap, verify workers a few per verifier process;
both are the engine's one worker pool (`bounded`). Jobs are built lazily, one per free worker,
and the landed queue is bounded, so no task or prompt exists for work that cannot start yet, and
memory stays flat however large the test set. A sample goes to the verifiers the moment it
lands, while other requests are still in flight; a verify worker takes everything that has
landed meanwhile (up to `batch` samples) in one go, because a round trip to a verifier process
costs far more than judging one response.

A failure that is not a provider's refusal (a bug in a provider, a suite's judge that raised, a
verifier pool that broke) stops the dispatch through `on_failure`; requests in flight still land
and are journaled, and the first such error is raised, as itself, once they have.

The answers that land in one turn of the loop go to `on_landed` together, in one list, at the
end of that turn (`_Landed`), before any of them is judged, and before the round returns (or is
cancelled); a failure goes at once (it may stop the dispatch), after the answers before it.
Either way a sample is journaled within a turn of landing, as the journal's writer gathers lines
for tens of milliseconds anyway. Landed one at a time, each between two requests' work, a
sample's landing (its event made, encoded and handed to the writer) cost half as much CPU again,
for the same instructions: its code and data out of the caches; landed together, their journal
lines go to the writer in one hand-over.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

from ttc.engine._util._pool import Batches, bounded
from ttc.engine.contract._types import Completion
from ttc.engine.send._sender import Job, Outcome

__all__ = ["run_round", "single"]

# A sample that landed with a response, on its way to the verify workers.
Answered = tuple[Job, Completion]
# Lands outcomes, in order: each that it can, raising the first error after the others landed.
OnLanded = Callable[[list[tuple[Job, Outcome]]], None]
# A verify worker takes what has landed meanwhile, up to this many samples, in one round trip.
BATCH = 64


def _always() -> bool:
    return True


def _ignore(exc: Exception) -> None:
    return None


class _Landed:
    """The answers that landed in this turn of the loop, handed to `on_landed` together at its
    end (or sooner: a failure landing, a batch to judge, the round's end), in the order they
    landed; an error `on_landed` raises goes to `failures`."""

    def __init__(self, on_landed: OnLanded, failures: _Failures) -> None:
        self.on_landed, self.failures = on_landed, failures
        self.pending: list[tuple[Job, Outcome]] = []
        self.loop = asyncio.get_running_loop()

    def add(self, job: Job, outcome: Outcome) -> None:
        if outcome.completion is None:
            # A failure lands at once, after those before it: it may stop the dispatch (a
            # refused key, a streak of failures), before another worker takes the next job.
            self.pending.append((job, outcome))
            self.flush()
            return
        if not self.pending:
            self.loop.call_soon(self.flush)
        self.pending.append((job, outcome))

    def flush(self) -> None:
        """Lands every outcome pending (called again, or late, it finds none)."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        try:
            self.on_landed(pending)
        except Exception as exc:
            self.failures.add(exc)


class _Failures:
    """The errors that failed a round: the first stops the dispatch (`on_failure`)."""

    def __init__(self, on_failure: Callable[[Exception], None]) -> None:
        self.errors: list[Exception] = []
        self._on_failure = on_failure

    def add(self, exc: Exception) -> None:
        if not self.errors:
            self._on_failure(exc)
        self.errors.append(exc)


async def run_round(
    jobs: Iterable[Job] | AsyncIterator[Job],
    sender: Callable[[Job], Awaitable[Outcome]],
    on_landed: OnLanded,
    on_judged: Callable[[list[Answered]], Awaitable[None]],
    *,
    workers: int,
    verifiers: int,
    dispatch: Callable[[], bool] = _always,
    on_failure: Callable[[Exception], None] = _ignore,
) -> None:
    """Sends every job through `sender` (a `Sender.send_with_retry`); `on_landed` is handed
    each outcome in the turn of the loop it landed in (with the others of that turn, in one
    list), `on_judged` the answered ones, each after `on_landed` saw it.

    `dispatch()` is asked as each job is about to go to `sender`: true sends it (a caller counts
    its sends there, with no wrapper of `sender`: a coroutine less a request); once it is false
    (the run stops), jobs not yet taken are dropped unsent (a resumed run sends them); requests
    in flight finish. An error raised by a send (other than the provider's refusals,
    which the sender turns into outcomes), `on_landed` or `on_judged` goes to `on_failure` (which
    stops the dispatch) and is raised once the requests in flight have landed; a batch whose
    judging failed stays unjudged (a resumed run judges it).
    """
    landed: Batches[Answered] = Batches(maxsize=2 * workers, batch=BATCH)
    failures = _Failures(on_failure)
    lands = _Landed(on_landed, failures)

    async def send(job: Job) -> None:
        if failures.errors or not dispatch():
            return
        try:
            outcome = await sender(job)
        except Exception as exc:
            failures.add(exc)
            return
        lands.add(job, outcome)
        comp = outcome.completion
        if comp is not None and not landed.offer((job, comp)):  # full: it waits for room
            await landed.put((job, comp))

    async def judge(group: list[Answered]) -> None:
        lands.flush()  # each sample journaled before its verdict
        # Every batch is taken off the queue, judged or not: senders never wait on a full one.
        if not failures.errors:
            try:
                await on_judged(group)
            except Exception as exc:
                failures.add(exc)

    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(bounded(landed, judge, verifiers))
            await bounded(jobs, send, workers)
            await landed.close()
    except BaseExceptionGroup as group:
        raise single(group) from None
    finally:  # what landed in the last turn, or before a cancellation, is never lost
        lands.flush()
    if failures.errors:
        raise failures.errors[0]


def single(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error behind a task group's (nested) group, so that a caller's `except
    ValueError` sees it; the group itself when its tasks failed in different ways."""
    leaves: list[BaseException] = []
    todo: list[BaseException] = [group]
    while todo:
        exc = todo.pop()
        if isinstance(exc, BaseExceptionGroup):
            todo.extend(exc.exceptions)
        elif not isinstance(exc, asyncio.CancelledError):
            leaves.append(exc)
    kinds = {(type(exc), str(exc)) for exc in leaves}
    return leaves[0] if len(kinds) == 1 else group
