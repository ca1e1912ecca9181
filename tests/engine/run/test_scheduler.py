"""The round's pipeline (`run_round`): where each outcome lands, and when."""

from __future__ import annotations

import asyncio

import pytest

from ttc.engine import Completion, Request, Transient, Usage
from ttc.engine.contract._types import Message
from ttc.engine.run._scheduler import Answered, run_round
from ttc.engine.send._sender import Job, Outcome


def job(i: int) -> Job:
    return Job(i, 0, 0, Request((Message("user", f"q{i}"),)), 1)


def answered(i: int) -> Outcome:
    return Outcome(Completion((f"a{i}",), Usage(1, 1)), None, 1)


def failed(i: int) -> Outcome:
    return Outcome(None, Transient(f"no answer to q{i}"), 3)


async def test_every_outcome_lands_before_it_is_judged_and_before_the_round_returns() -> None:
    landed: list[int] = []
    judged: list[int] = []
    turns: list[int] = []  # how many had landed when each outcome came back

    async def send(j: Job) -> Outcome:
        await asyncio.sleep(0.001 * (j.row % 3))
        turns.append(len(landed))
        # Every fifth fails (it is never judged), the last one among them.
        return failed(j.row) if j.row % 5 == 4 else answered(j.row)

    calls: list[int] = []  # how many outcomes each call of on_landed was handed

    def on_landed(outcomes: list[tuple[Job, Outcome]]) -> None:
        calls.append(len(outcomes))
        landed.extend(j.row for j, _ in outcomes)

    async def on_judged(group: list[Answered]) -> None:
        assert all(j.row in landed for j, _ in group)  # its line before its verdict
        judged.extend(j.row for j, _ in group)

    await run_round((job(i) for i in range(50)), send, on_landed, on_judged, workers=8, verifiers=2)
    assert sorted(landed) == list(range(50))
    assert sorted(judged) == [i for i in range(50) if i % 5 != 4]
    # Outcomes back in one turn of the loop land together at its end: some outcome came back
    # while another, back before it, had not landed yet, and they were handed over in one call.
    assert any(n < i for i, n in enumerate(turns))
    assert max(calls) > 1
    assert sum(calls) == 50


async def test_what_landed_in_the_last_turn_lands_even_when_the_round_is_cancelled() -> None:
    landed: list[int] = []
    back = asyncio.Event()

    async def send(j: Job) -> Outcome:
        if j.row < 3:
            back.set()
            return answered(j.row)
        await asyncio.sleep(3600)
        raise AssertionError("never")

    def on_landed(outcomes: list[tuple[Job, Outcome]]) -> None:
        landed.extend(j.row for j, _ in outcomes)

    async def on_judged(group: list[Answered]) -> None:
        await asyncio.sleep(3600)  # the verdicts never come: the round is cancelled first

    task = asyncio.ensure_future(
        run_round((job(i) for i in range(6)), send, on_landed, on_judged, workers=6, verifiers=1)
    )
    await back.wait()
    task.cancel()  # in the turn the first outcomes came back in, before it ends
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(landed) == [0, 1, 2]


async def test_an_error_in_landing_fails_the_round_once_the_requests_in_flight_have_landed() -> (
    None
):
    landed: list[int] = []
    told: list[Exception] = []

    async def send(j: Job) -> Outcome:
        await asyncio.sleep(0.001 * j.row)
        return answered(j.row)

    def on_landed(outcomes: list[tuple[Job, Outcome]]) -> None:
        # As the round's own does: lands the others, then raises.
        landed.extend(j.row for j, _ in outcomes if j.row != 2)
        if any(j.row == 2 for j, _ in outcomes):
            raise ValueError("a bug in landing")

    async def on_judged(group: list[Answered]) -> None:
        return None

    with pytest.raises(ValueError, match="a bug in landing"):
        await run_round(
            (job(i) for i in range(40)),
            send,
            on_landed,
            on_judged,
            workers=4,
            verifiers=1,
            on_failure=told.append,
        )
    assert [str(e) for e in told] == ["a bug in landing"]
    assert 0 < len(landed) < 39  # the dispatch stopped; what was in flight still landed
    assert 2 not in landed


async def test_a_failure_lands_at_once_so_that_a_stop_it_causes_sends_nothing_more() -> None:
    sent: list[int] = []
    stop = False

    async def send(j: Job) -> Outcome:
        sent.append(j.row)
        return failed(j.row)  # back without a pause: a worker goes on to its next job at once

    def on_landed(outcomes: list[tuple[Job, Outcome]]) -> None:
        nonlocal stop
        stop = True  # as a refused key stops the run

    async def on_judged(group: list[Answered]) -> None:
        raise AssertionError("a failure is never judged")

    await run_round(
        (job(i) for i in range(200)),
        send,
        on_landed,
        on_judged,
        workers=4,
        verifiers=1,
        dispatch=lambda: not stop,
    )
    assert len(sent) <= 4  # the ones taken before the first failure landed
