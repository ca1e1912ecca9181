"""The send path's shared parts: the contract's defaults, the one worker pool, the one token
estimator, and the sender's raw-call entry."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from fakes import FakeSuite, ScriptedProvider, items

from ttc.engine import Completion, Limiter, Provider, Request, RetryPolicy, Suite, Transient, Usage
from ttc.engine._util._pool import Batches, bounded
from ttc.engine.contract._types import Message
from ttc.engine.send import TokenEstimator
from ttc.engine.send._sender import Job, Sender

# ---- the contract


class Bare(Provider):
    """A provider that declares nothing but what it must."""

    name = "bare"
    model = "bare-1"

    async def generate(self, request: Request) -> Completion:
        return Completion(("x",), Usage())


async def test_a_provider_declares_its_capabilities_with_defaults() -> None:
    bare = Bare()
    assert (bare.endpoint, bare.simulated) == (None, False)
    await bare.aclose()  # nothing to release, and no error
    with pytest.raises(TypeError):
        Provider()  # type: ignore[abstract]


def test_a_suite_declares_its_hooks_with_defaults() -> None:
    suite = FakeSuite(pool=items(1))
    assert isinstance(suite, Suite)
    suite.prepare()
    assert suite.answer_key("  x  =\n 2 ") == "x = 2"
    with pytest.raises(TypeError):
        Suite()  # type: ignore[abstract]


# ---- the worker pool


async def test_bounded_runs_each_item_once_at_most_n_at_once_and_pulls_lazily() -> None:
    pulled: list[int] = []
    done: list[int] = []
    running = most = 0

    def source() -> Iterator[int]:
        for i in range(20):
            pulled.append(i)
            yield i

    async def work(i: int) -> None:
        nonlocal running, most
        # Never more pulled than started by a worker: no work is built ahead.
        assert len(pulled) <= len(done) + 3
        running += 1
        most = max(most, running)
        await asyncio.sleep(0)
        running -= 1
        done.append(i)

    await bounded(source(), work, 3)
    assert sorted(done) == list(range(20))
    assert most == 3


async def test_bounded_propagates_the_first_error() -> None:
    async def work(i: int) -> None:
        if i == 2:
            raise ValueError("two")
        await asyncio.sleep(0)

    # As itself, not in a group: `except ValueError` around a pool catches what the work raised.
    with pytest.raises(ValueError, match="two"):
        await bounded(range(10), work, 2)


async def test_batches_group_what_landed_and_end_every_reader() -> None:
    batches: Batches[int] = Batches(maxsize=10, batch=4)
    for i in range(6):
        await batches.put(i)
    await batches.close()
    seen: list[list[int]] = []

    async def judge(group: list[int]) -> None:
        seen.append(group)

    await bounded(batches, judge, 3)  # three readers, one end mark: none is left waiting
    assert sorted(x for group in seen for x in group) == list(range(6))
    assert max(len(group) for group in seen) <= 4


async def test_an_offer_takes_an_item_only_while_there_is_room_and_wakes_a_reader() -> None:
    batches: Batches[int] = Batches(maxsize=2, batch=8)
    seen: list[list[int]] = []

    async def judge(group: list[int]) -> None:
        seen.append(group)

    reader = asyncio.create_task(bounded(batches, judge, 1))
    await asyncio.sleep(0)  # the reader waits for an item
    assert batches.offer(0)
    assert batches.offer(1)
    assert not batches.offer(2)  # full: a producer then awaits `put`
    for _ in range(3):
        await asyncio.sleep(0)
    assert seen == [[0, 1]]  # woken by the offers, it took both
    assert batches.offer(2)
    await batches.close()
    await reader
    assert seen == [[0, 1], [2]]
    with pytest.raises(RuntimeError, match="closed"):
        batches.offer(3)


async def test_a_full_batches_holds_its_producers_until_a_reader_takes_room() -> None:
    batches: Batches[int] = Batches(maxsize=3, batch=2)
    producers = [asyncio.create_task(batches.put(i)) for i in range(7)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert sum(p.done() for p in producers) == 3  # the queue holds three; four wait
    seen: list[list[int]] = []

    async def judge(group: list[int]) -> None:
        seen.append(group)
        await asyncio.sleep(0)

    readers = asyncio.create_task(bounded(batches, judge, 2))
    await asyncio.gather(*producers)
    await batches.close()
    await readers
    assert sorted(x for group in seen for x in group) == list(range(7))
    assert all(1 <= len(group) <= 2 for group in seen)
    with pytest.raises(RuntimeError, match="closed"):
        await batches.put(8)


async def test_a_producer_cancelled_as_it_is_woken_passes_the_room_on() -> None:
    batches: Batches[int] = Batches(maxsize=1, batch=1)
    await batches.put(0)
    first = asyncio.create_task(batches.put(1))
    second = asyncio.create_task(batches.put(2))
    await asyncio.sleep(0)
    assert not first.done()
    assert not second.done()
    assert await batches.__anext__() == [0]  # room for one: the first in line is woken...
    first.cancel()  # ...and cancelled before it runs: the second must get the room
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert first.cancelled()
    assert second.done()
    assert await batches.__anext__() == [2]


# ---- the token estimator


def test_the_estimate_is_prompt_over_four_plus_the_cap_or_the_running_mean() -> None:
    tokens = TokenEstimator()
    assert tokens.estimate(400) == 100 + 512
    assert tokens.estimate(400, cap=100, n=2) == 100 + 200
    tokens.observe_usage(Usage(5, 10, 20))
    tokens.observe(50)
    assert tokens.expected_output() == 40
    assert tokens.estimate(3) == 40


# ---- the sender


async def test_a_sender_without_a_provider_makes_raw_calls_with_retries() -> None:
    sender = Sender(None, Limiter(), RetryPolicy(base_delay=0.0), 5.0)
    calls = 0

    async def call() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise Transient("503")
        return 7

    retries: list[int] = []
    result = await sender.call_with_retry(
        10, call, lambda r: (r, None), lambda attempt, e, d: retries.append(attempt)
    )
    assert result == (7, None, 2)
    assert retries == [1]
    request = Request((Message("user", "q"),), item_id="q0")
    with pytest.raises(TypeError):
        await sender.send_with_retry(Job(0, 0, 0, request, 1))


async def test_a_sender_sends_jobs_to_its_provider() -> None:
    provider = ScriptedProvider({"q0": ["right:q0"]})
    sender = Sender(provider, Limiter(), RetryPolicy(), 5.0)
    request = Request((Message("user", "q"),), item_id="q0")
    outcome = await sender.send_with_retry(Job(0, 0, 0, request, 1))
    assert outcome.completion is not None
    assert outcome.completion.texts == ("right:q0",)


class TwoTexts(Provider):
    """A provider with a bug: two texts where one was asked."""

    name = "two"
    model = "two-1"

    async def generate(self, request: Request) -> Completion:
        return Completion(("a", "b"), Usage(1, 1))


class Simulating(Provider):
    """A provider known to answer from the simulator, whose completions do not say so."""

    name = "sim-behind"
    model = "sim-1"
    simulated = True

    async def generate(self, request: Request) -> Completion:
        return Completion(("x",), Usage(1, 1))


async def test_an_answer_with_texts_for_other_than_n_fails_its_sample_at_once() -> None:
    limiter = Limiter()
    sender = Sender(TwoTexts(), limiter, RetryPolicy(base_delay=0.0), 5.0)
    request = Request((Message("user", "q"),), item_id="q0")
    outcome = await sender.send_with_retry(Job(0, 0, 0, request, 1))
    assert outcome.completion is None
    assert outcome.error is not None
    assert "2 texts for n=1" in str(outcome.error)
    assert outcome.attempts == 1  # a bug is not retried
    assert limiter.in_flight == 0  # its slot given back


async def test_a_simulated_providers_answer_is_labelled_simulated() -> None:
    sender = Sender(Simulating(), Limiter(), RetryPolicy(), 5.0)
    request = Request((Message("user", "q"),), item_id="q0")
    outcome = await sender.send_with_retry(Job(0, 0, 0, request, 1))
    assert outcome.completion is not None
    assert outcome.completion.simulated
