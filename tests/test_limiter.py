"""Limiter tests on a fake clock: the loop's `time` is patched, nothing really sleeps."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from ttc.engine._errors import ConfigError
from ttc.engine._limiter import Limiter

START = 1000.0


class FakeClock:
    """Stands in for `loop.time`; `advance` moves it and lets due timers and their wakers run."""

    def __init__(self) -> None:
        self.now = START

    def time(self) -> float:
        return self.now

    @property
    def elapsed(self) -> float:
        return self.now - START

    async def settle(self) -> None:
        # Waking a chain of waiters takes a loop turn per link (timer → future → task step →
        # next waker), so yield generously; no timer here is ever due before the clock moves.
        for _ in range(50):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        await self.settle()

    async def advance_to(self, elapsed: float) -> None:
        self.now = START + elapsed
        await self.settle()


@pytest.fixture
async def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(asyncio.get_running_loop(), "time", fake.time)
    return fake


class Crowd:
    """Tasks that each take one slot, record when they got in, and leave (or hold it)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.entered: list[float] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.inside = 0
        self.most_inside = 0
        self.release = asyncio.Event()

    def spawn(self, limiter: Limiter, n: int = 1, est: int = 0, hold: bool = False) -> None:
        for _ in range(n):
            self.tasks.append(asyncio.create_task(self._one(limiter, est, hold)))

    async def _one(self, limiter: Limiter, est: int, hold: bool) -> None:
        async with limiter.slot(est):
            self.entered.append(self.clock.elapsed)
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
            try:
                if hold:
                    await self.release.wait()
            finally:
                self.inside -= 1

    async def aclose(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@pytest.fixture
async def crowd(clock: FakeClock) -> AsyncIterator[Crowd]:
    group = Crowd(clock)
    yield group
    await group.aclose()


async def sweep(
    clock: FakeClock, until: float, step: float, check: Callable[[float], None]
) -> None:
    """Advance the clock to `until` in `step`s, calling `check(elapsed)` at every stop."""
    for i in range(round(until / step) + 1):
        await clock.advance_to(i * step)
        check(clock.elapsed)


async def enters_at_once(clock: FakeClock, limiter: Limiter) -> bool:
    """Whether a new slot gets in without the clock moving (a plain await would hang here)."""
    got_in = asyncio.Event()

    async def one() -> None:
        async with limiter.slot():
            got_in.set()

    task = asyncio.create_task(one())
    await clock.settle()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return got_in.is_set()


# --- requests per minute -----------------------------------------------------------------------


async def test_rpm_completions_track_the_bucket_allowance(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(rpm=60, max_concurrency=1000)
    crowd.spawn(limiter, 200)
    burst, rate = 60, 1.0  # bucket size, units per second

    def check(t: float) -> None:
        done = len(crowd.entered)
        allowance = burst + rate * t
        assert done <= allowance + 1e-9, f"{done} requests by t={t}, allowance {allowance}"
        # Keeps up: at most one unit behind the continuous allowance.
        assert done >= min(200, math.floor(allowance) - 1), f"only {done} requests by t={t}"

    await sweep(clock, until=180.0, step=0.25, check=check)
    assert len(crowd.entered) == 200
    # Each entry time is itself within the allowance (no late bookkeeping hides a burst).
    for k, t in enumerate(sorted(crowd.entered), start=1):
        assert k <= burst + rate * t + 1e-9


async def test_rpm_period_is_configurable(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(rpm=2, max_concurrency=10, period=1.0)
    crowd.spawn(limiter, 5)
    await clock.settle()
    assert len(crowd.entered) == 2
    await clock.advance_to(0.49)
    assert len(crowd.entered) == 2
    await clock.advance_to(0.5)
    assert len(crowd.entered) == 3
    await clock.advance_to(1.0)
    assert len(crowd.entered) == 4


async def test_rpm_below_one_still_passes_one_request(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(rpm=0.5)  # one request per two minutes
    crowd.spawn(limiter, 2)
    await clock.settle()
    assert len(crowd.entered) == 1
    await clock.advance_to(119.0)
    assert len(crowd.entered) == 1
    await clock.advance_to(120.0)
    assert len(crowd.entered) == 2


# --- tokens per minute -------------------------------------------------------------------------


async def test_tpm_limits_tokens_per_minute(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(tpm=1000, max_concurrency=1000)  # 1000-token burst, then 1000/60 per second
    crowd.spawn(limiter, 40, est=100)
    burst, rate = 1000.0, 1000.0 / 60

    def check(t: float) -> None:
        tokens = 100 * len(crowd.entered)
        allowance = burst + rate * t
        assert tokens <= allowance + 1e-6, f"{tokens} tokens by t={t}, allowance {allowance}"
        assert tokens >= min(4000, allowance - 200), f"only {tokens} tokens by t={t}"

    await sweep(clock, until=240.0, step=0.5, check=check)
    assert len(crowd.entered) == 40


async def test_reconcile_debt_delays_the_next_slot(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(tpm=600)  # 10 tokens per second
    async with limiter.slot(300):
        pass
    limiter.reconcile(estimated=300, actual=600)  # 300 tokens of debt
    # Without the debt, 300 + 300 fits the 600-token bucket at once; with it the slot needs 900,
    # so it waits for 300 tokens to leak out: 30 s.
    crowd.spawn(limiter, est=300)
    await clock.advance_to(29.9)
    assert crowd.entered == []
    await clock.advance_to(30.0)
    assert crowd.entered == [30.0]
    # The debt was paid once: the bucket is full (600) and a 10-token slot waits just 1 s.
    crowd.spawn(limiter, est=10)
    await clock.advance_to(30.9)
    assert len(crowd.entered) == 1
    await clock.advance_to(31.0)
    assert crowd.entered == [30.0, 31.0]


async def test_reconcile_gives_no_refund(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(tpm=600)
    async with limiter.slot(600):
        pass
    limiter.reconcile(estimated=600, actual=10)
    crowd.spawn(limiter, est=60)
    await clock.advance_to(5.9)
    assert crowd.entered == []
    await clock.advance_to(6.0)
    assert crowd.entered == [6.0]


async def test_oversized_estimate_is_clamped_and_the_rest_carried(
    clock: FakeClock, crowd: Crowd
) -> None:
    limiter = Limiter(tpm=100)  # bucket of 100 tokens, refilling at 100/60 per second
    async with limiter.slot(250):  # would raise inside aiolimiter if not clamped
        pass
    # 150 tokens did not fit and are owed: the next slot pays 100 (a full bucket, 60 s) ...
    crowd.spawn(limiter, est=0)
    await clock.advance_to(59.0)
    assert crowd.entered == []
    await clock.advance_to(60.0)
    assert crowd.entered == [60.0]
    # ... and the one after that pays the last 50 (30 s).
    crowd.spawn(limiter, est=0)
    await clock.advance_to(89.0)
    assert len(crowd.entered) == 1
    await clock.advance_to(90.0)
    assert crowd.entered == [60.0, 90.0]


async def test_cancelled_tpm_waiter_returns_its_debt(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(tpm=600)  # 10 tokens per second
    async with limiter.slot(600):
        pass
    limiter.reconcile(estimated=0, actual=100)
    crowd.spawn(limiter, est=100)  # claims the debt: needs 200 tokens, 20 s
    await clock.advance_to(5.0)
    crowd.tasks[0].cancel()
    await clock.settle()
    # The debt is owed again: a 0-token slot now pays 100 (10 s from the start).
    crowd.spawn(limiter, est=0)
    await clock.advance_to(9.9)
    assert crowd.entered == []
    await clock.advance_to(10.0)
    assert crowd.entered == [10.0]


# --- concurrency -------------------------------------------------------------------------------


async def test_concurrency_is_capped_and_reported(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(max_concurrency=3)
    crowd.spawn(limiter, 10, hold=True)
    await clock.settle()
    assert crowd.inside == 3
    assert limiter.in_flight == 3
    crowd.release.set()
    await clock.settle()
    assert len(crowd.entered) == 10
    assert crowd.most_inside == 3
    assert limiter.max_in_flight == 3
    assert limiter.in_flight == 0


async def test_slot_exits_on_exception(clock: FakeClock) -> None:
    limiter = Limiter(max_concurrency=1)
    with pytest.raises(RuntimeError):
        async with limiter.slot():
            raise RuntimeError("boom")
    assert limiter.in_flight == 0
    assert await enters_at_once(clock, limiter)  # the place was released


@pytest.mark.parametrize("stage", ["place", "gate", "rpm", "tpm"])
async def test_cancelled_waiter_does_not_leak_a_place(
    clock: FakeClock, crowd: Crowd, stage: str
) -> None:
    if stage == "place":
        limiter = Limiter(max_concurrency=1)
        crowd.spawn(limiter, hold=True)  # holds the only place
    elif stage == "gate":
        limiter = Limiter(max_concurrency=1)
        limiter.defer(100.0)
    elif stage == "rpm":
        limiter = Limiter(rpm=1, max_concurrency=1)
        async with limiter.slot():  # spends the only RPM unit
            pass
    else:
        limiter = Limiter(tpm=10, max_concurrency=1)
        async with limiter.slot(10):  # fills the TPM bucket
            pass
    crowd.spawn(limiter, est=5)
    waiter = crowd.tasks[-1]
    await clock.settle()
    assert not waiter.done()
    waiter.cancel()
    await clock.settle()
    assert waiter.cancelled()
    crowd.release.set()
    await clock.advance_to(1000.0)  # every bucket has refilled and the gate has opened
    assert limiter.in_flight == 0
    assert await enters_at_once(clock, limiter)  # the only place is free again


# --- retry-after gate --------------------------------------------------------------------------


async def test_defer_holds_new_slots_until_the_gate(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter()
    limiter.defer(5.0)
    crowd.spawn(limiter, 8)
    await clock.advance_to(2.0)
    limiter.defer(1.0)  # a smaller retry-after does not shorten the gate
    crowd.spawn(limiter, 2)
    await clock.advance_to(4.99)
    assert crowd.entered == []
    await clock.advance_to(5.0)
    assert crowd.entered == [5.0] * 10


async def test_defer_moves_the_gate_later(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter()
    limiter.defer(5.0)
    crowd.spawn(limiter, 3)
    await clock.advance_to(4.0)
    limiter.defer(3.0)  # now the gate opens at 7
    await clock.advance_to(6.99)
    assert crowd.entered == []
    await clock.advance_to(7.0)
    assert crowd.entered == [7.0] * 3
    # Once open, the gate lets new slots straight through.
    crowd.spawn(limiter)
    await clock.settle()
    assert len(crowd.entered) == 4


async def test_defer_does_not_hold_requests_already_past_the_gate(
    clock: FakeClock, crowd: Crowd
) -> None:
    limiter = Limiter(rpm=1)
    async with limiter.slot():
        pass
    crowd.spawn(limiter)  # past the gate, waiting 60 s for an RPM unit
    await clock.advance_to(30.0)
    limiter.defer(100.0)
    await clock.advance_to(60.0)
    assert crowd.entered == [60.0]


# --- configuration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"rpm": 0}, "rpm"),
        ({"rpm": -5}, "rpm"),
        ({"rpm": math.nan}, "rpm"),
        ({"tpm": 0}, "tpm"),
        ({"tpm": -1.5}, "tpm"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"max_concurrency": -2}, "max_concurrency"),
        ({"period": 0.0}, "period"),
    ],
)
def test_bad_values_raise_config_error(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        Limiter(**kwargs)


def test_construction_needs_no_running_loop() -> None:
    limiter = Limiter(rpm=60, tpm=1000, max_concurrency=4)
    assert (limiter.rpm, limiter.tpm, limiter.max_concurrency) == (60, 1000, 4)
    assert (limiter.in_flight, limiter.max_in_flight) == (0, 0)
    unlimited = Limiter()
    assert (unlimited.rpm, unlimited.tpm, unlimited.max_concurrency) == (None, None, 64)
