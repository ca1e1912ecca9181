"""What `Engine.stream` yields: the journal's events as they are written, and the events a host
answering per question needs that the journal does not hold.

    ... SampleLanded, Judged, QuestionSolved (the moment a question is resolved), RoundEnded,
    ... QuestionGaveUp (each question still unresolved when the last round ends), RunEnded

`RunEnded` is always the last event of a run that returns; a run that fails raises its error
from the iterator instead. The events are queued as they happen, whatever the consumer does: a
consumer that stops reading holds them in memory, so read promptly (or close the iterator, which
stops the run as a cancel does).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass

from ttc.engine.contract._state import RunState
from ttc.engine.journal._events import Event
from ttc.engine.run._result import RunResult


@dataclass(frozen=True, slots=True)
class QuestionSolved:
    """A question was resolved by the run's judgement (for ground truth: it has a correct
    response), in round `round`: its response and extracted answer as the judgement selects
    them. `replayed`: resolved again from the journal of a resumed run, not newly."""

    item: str
    round: int
    response: str | None
    answer: str | None
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class QuestionGaveUp:
    """A question still unresolved when the run's last round ended: the run spent `samples` on
    it; `answer` is its final answer by the judgement's rule (None if it has none)."""

    item: str
    samples: int
    answer: str | None


@dataclass(frozen=True, slots=True, repr=False)
class RunEnded:
    """The run returned: its result (whether it completed, and if not why: `result.stopped`).
    Its reports (summary.json, results.jsonl) are written by then."""

    result: RunResult

    def __repr__(self) -> str:
        return f"RunEnded({self.result!r})"


StreamEvent = Event | QuestionSolved | QuestionGaveUp | RunEnded
Sink = Callable[[StreamEvent], None]


def discard(event: StreamEvent) -> None:
    """The sink of an engine with no run under way."""


class SolvedWatch:
    """Tells each question's resolution once: the stream's QuestionSolved events."""

    def __init__(self, state: RunState, sink: Sink) -> None:
        self._state = state
        self._sink = sink
        self._told = bytearray(state.n)

    def check(self, row: int, round_no: int, *, replayed: bool) -> None:
        """Tells `row`'s resolution, if it is resolved and was not told before."""
        if self._told[row] or not self._state.is_solved(row):
            return
        self._told[row] = 1
        pick = self._state.selected(row)
        response = self._state.response(row)
        answer = None if pick is None else pick.answer
        item = self._state.items[row].id
        self._sink(QuestionSolved(item, round_no, response, answer, replayed))

    def sweep(self, round_no: int, *, replayed: bool) -> None:
        """At a barrier: questions resolved by it (self-consistency's consensus)."""
        for row in self._state.solved_rows():
            self.check(row, round_no, replayed=replayed)

    def give_up(self) -> None:
        """At the end of a completed run: each question still unresolved."""
        state = self._state
        for row in state.unsolved_rows():
            pick = state.selected(row)
            answer = None if pick is None else pick.answer
            self._sink(QuestionGaveUp(state.items[row].id, state.records[row].samples, answer))


async def stream_of(
    run: Callable[[Sink], Awaitable[RunResult]],
) -> AsyncGenerator[StreamEvent, None]:
    """The events of `run(sink)`, run as a task of its own, as it puts them in `sink`; then
    RunEnded. Closing the iterator early (or cancelling its reader) cancels the run and waits
    for it to wind down (its journal closed, its reports written)."""
    queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()

    async def produce() -> None:
        try:
            queue.put_nowait(RunEnded(await run(queue.put_nowait)))
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(produce(), name="ttc run")
    try:
        while (event := await queue.get()) is not None:
            yield event
        await task  # the run's error, if it failed
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
