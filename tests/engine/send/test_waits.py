"""Why an attempt waited (`_waits`): measured only by a limiter asked to time its slots, each
step named, and told to the sender's attempt hook with the attempt, hedged or not."""

from __future__ import annotations

import asyncio

import pytest
from fakes import ScriptedProvider

from ttc.engine import Completion, Limiter, RetryPolicy, Transient
from ttc.engine.contract._errors import ProviderError
from ttc.engine.contract._types import Message, Request
from ttc.engine.send._sender import Job, Sender
from ttc.engine.send._waits import Waited, last_wait, watch_wait


async def test_an_untimed_limiter_measures_nothing() -> None:
    limiter = Limiter(max_concurrency=1)
    watch_wait()
    async with limiter.slot(10):
        pass
    assert last_wait() is None


async def test_a_timed_slot_says_it_waited_for_the_gate() -> None:
    limiter = Limiter(max_concurrency=4)
    limiter.timing = True
    limiter.defer(0.05)  # a server's retry-after closes the gate
    watch_wait()
    async with limiter.slot(10):
        pass
    waited = last_wait()
    assert waited is not None
    assert waited.gate_s > 0
    assert waited.reason() == "gate"
    assert waited.granted_ns >= waited.asked_ns


async def test_a_slot_held_by_another_is_a_wait_for_the_concurrency_cap() -> None:
    limiter = Limiter(max_concurrency=1)
    limiter.timing = True
    release = asyncio.Event()

    async def holder() -> None:
        async with limiter.slot(0):
            await release.wait()

    task = asyncio.create_task(holder())
    await asyncio.sleep(0)
    watch_wait()
    waiting = asyncio.ensure_future(_take(limiter))
    await asyncio.sleep(0.02)
    release.set()
    waited = await waiting
    await task
    assert waited is not None
    assert waited.concurrency_s > 0
    assert waited.reason() == "concurrency"


async def _take(limiter: Limiter) -> Waited | None:
    async with limiter.slot(0):
        pass
    return last_wait()


def test_the_reason_is_the_longest_step_and_none_without_a_wait() -> None:
    waited = Waited(0, 0, 0.0, 0.0, 0.0, 0.0)
    assert waited.reason() is None
    assert waited.reason(backoff_s=0.5) == "backoff"
    assert Waited(0, 0, 0.1, 0.0, 0.3, 0.2).reason(0.05) == "window"


@pytest.mark.parametrize("hedge", [False, True])
async def test_the_sender_tells_each_attempt_its_wait_hedged_or_not(hedge: bool) -> None:
    limiter = Limiter(max_concurrency=2)
    limiter.timing = True
    limiter.hedge = hedge
    provider = ScriptedProvider({"q0": [Transient("503"), "right:q0"]})
    sender = Sender(provider, limiter, RetryPolicy(base_delay=0.001, max_delay=0.002), 5.0)
    seen: list[tuple[int, bool, str | None, float, Waited | None]] = []

    def attempted(
        job: Job,
        n: int,
        completion: Completion | None,
        error: ProviderError | None,
        backoff: float,
    ) -> None:
        kind = None if error is None else error.kind
        seen.append((n, completion is not None, kind, backoff, last_wait()))

    sender.on_attempt = attempted
    request = Request((Message("user", "q"),), item_id="q0")
    outcome = await sender.send_with_retry(Job(0, 1, 0, request, 1))
    assert outcome.attempts == 2
    assert [(n, ok, kind) for n, ok, kind, _, _ in seen] == [
        (1, False, "transient"),
        (2, True, None),
    ]
    assert seen[0][3] == 0.0
    assert seen[1][3] > 0  # the second waited for its backoff
    assert all(w is not None for *_, w in seen), hedge
    # Each attempt's own slot: the second was asked for after the first was granted.
    first, second = seen[0][4], seen[1][4]
    assert first is not None
    assert second is not None
    assert second.asked_ns >= first.granted_ns
