"""Limiter tests on a fake clock (the `clock` fixture): the loop's `time` is patched, nothing
really sleeps."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from fakes import FakeClock, ScriptedProvider

from ttc.engine.contract._errors import ConfigError, RateLimited
from ttc.engine.contract._types import Message, RateInfo, Request
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._retry import RetryPolicy
from ttc.engine.send._sender import Job, Sender


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


async def test_rpm_paces_requests_evenly(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(rpm=60, max_concurrency=1000, headroom=0.0)
    crowd.spawn(limiter, 200)
    await sweep(clock, until=200.0, step=0.25, check=lambda t: None)
    # One request per second from the start: no burst that a server's window would refuse.
    assert crowd.entered == [float(k) for k in range(200)]


async def test_rpm_headroom_keeps_every_window_under_the_limit(
    clock: FakeClock, crowd: Crowd
) -> None:
    # A server counting requests in a sliding window of 60 s (or 6 s: the window is unknown to
    # the client) must never see more than the limit, while the client sits just below it.
    limiter = Limiter(rpm=60, max_concurrency=10_000, headroom=0.03)
    crowd.spawn(limiter, 130)
    await sweep(clock, until=135.0, step=0.01, check=lambda t: None)
    assert len(crowd.entered) == 130
    times = sorted(crowd.entered)
    for window, limit in ((60.0, 60), (6.0, 6)):
        j = 0
        for i, t in enumerate(times):
            while times[j] <= t - window:
                j += 1
            assert i - j + 1 <= limit, f"{i - j + 1} requests in a {window} s window"
    rate = (len(times) - 1) / (times[-1] - times[0]) * 60
    assert 0.95 * 60 <= rate <= 0.97 * 60 + 1e-6  # 0.97 less the sweep's 0.01 s steps


async def test_rpm_period_is_configurable(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(rpm=2, max_concurrency=10, period=1.0, headroom=0.0)
    crowd.spawn(limiter, 5)
    await clock.settle()
    assert len(crowd.entered) == 1
    await clock.advance_to(0.49)
    assert len(crowd.entered) == 1
    await clock.advance_to(0.5)
    assert len(crowd.entered) == 2
    await clock.advance_to(1.0)
    assert len(crowd.entered) == 3


async def test_rpm_below_one_still_passes_one_request(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(rpm=0.5, headroom=0.0)  # one request per two minutes
    crowd.spawn(limiter, 2)
    await clock.settle()
    assert len(crowd.entered) == 1
    await clock.advance_to(119.0)
    assert len(crowd.entered) == 1
    await clock.advance_to(120.0)
    assert len(crowd.entered) == 2


# --- tokens per minute -------------------------------------------------------------------------


async def test_tpm_bursts_its_headroom_then_paces(clock: FakeClock, crowd: Crowd) -> None:
    # Burst 100 tokens (10% of a minute's), then 900 tokens per minute.
    limiter = Limiter(tpm=1000, max_concurrency=1000, headroom=0.1)
    crowd.spawn(limiter, 40, est=50)
    burst, rate = 100.0, 900.0 / 60

    def check(t: float) -> None:
        tokens = 50 * len(crowd.entered)
        allowance = burst + rate * t
        assert tokens <= allowance + 1e-6, f"{tokens} tokens by t={t}, allowance {allowance}"
        assert tokens >= min(2000, allowance - 100), f"only {tokens} tokens by t={t}"

    await sweep(clock, until=200.0, step=0.5, check=check)
    assert len(crowd.entered) == 40


async def test_reconcile_charges_the_difference_both_ways(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(tpm=600, headroom=0.0)  # 10 tokens per second, no burst
    async with limiter.slot(300):  # the bucket is empty again at 30 s
        pass
    limiter.reconcile(estimated=300, actual=600)  # it really used 600: empty at 60 s
    crowd.spawn(limiter, est=10)
    await clock.advance_to(59.9)
    assert crowd.entered == []
    await clock.advance_to(60.0)
    assert crowd.entered == [60.0]
    # Overestimated: 600 charged, 100 used; the refund brings the empty time back.
    crowd.spawn(limiter, est=600)  # enters at 61 s; the bucket is then empty at 121 s
    await clock.advance_to(61.0)
    assert crowd.entered == [60.0, 61.0]
    limiter.reconcile(estimated=600, actual=100)  # empty at 71 s instead
    crowd.spawn(limiter, est=10)
    await clock.advance_to(70.9)
    assert len(crowd.entered) == 2
    await clock.advance_to(71.0)
    assert crowd.entered == [60.0, 61.0, 71.0]


async def test_a_refund_wakes_the_request_waiting_for_room(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(tpm=600, headroom=0.0)  # 10 tokens per second
    async with limiter.slot(600):  # estimated 600: the bucket is empty at 60 s
        pass
    crowd.spawn(limiter, est=10)
    await clock.advance_to(5.0)
    assert crowd.entered == []
    limiter.reconcile(estimated=600, actual=100)  # it used 100: empty at 10 s, not 60 s
    await clock.advance_to(9.9)
    assert crowd.entered == []
    await clock.advance_to(10.0)
    assert crowd.entered == [10.0]


async def test_nonsense_usage_costs_at_most_one_period(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(tpm=600, headroom=0.0)
    async with limiter.slot(10):
        pass
    limiter.reconcile(estimated=10, actual=10**12)  # charged as 600 tokens, not 10**12
    limiter.reconcile(estimated=10, actual=-5)  # a negative usage refunds the estimate only
    crowd.spawn(limiter, est=1)  # 600 tokens were charged in all, less the refund of 10
    await clock.advance_to(58.9)
    assert crowd.entered == []
    await clock.advance_to(59.0)
    assert crowd.entered == [59.0]


async def test_a_refused_request_gets_its_tokens_back(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(tpm=600, headroom=0.0)  # 10 tokens per second, no burst
    provider = ScriptedProvider({"q0": [RateLimited("slow down"), "right:q0"]})
    sender = Sender(provider, limiter, RetryPolicy(base_delay=0.0), 10.0, lambda *a: None)
    job = Job(0, 1, 0, Request((Message("user", "q"),), n=1, item_id="q0"), est_tokens=300)
    outcome = await sender.send_with_retry(job)
    assert outcome.completion is not None
    assert outcome.attempts == 2
    # The refusal's 300 tokens came back; the answer's estimate was corrected to the 10 tokens
    # it used: the bucket is empty after 1 s, not after 30 + 30 s.
    crowd.spawn(limiter, est=1)
    await clock.advance_to(0.9)
    assert crowd.entered == []
    await clock.advance_to(1.0)
    assert crowd.entered == [1.0]


async def test_a_request_above_the_burst_waits_for_an_empty_bucket(
    clock: FakeClock, crowd: Crowd
) -> None:
    limiter = Limiter(tpm=100, headroom=0.1)  # burst 10 tokens, 1.5 tokens per second
    async with limiter.slot(250):  # larger than the burst: passes on an empty bucket
        pass
    crowd.spawn(limiter, est=5)
    await clock.advance_to(163.0)  # 250 / 1.5 = 166.7 s to drain; 5 more fit 3.3 s earlier
    assert crowd.entered == []
    await clock.advance_to(163.4)
    assert crowd.entered == [pytest.approx(163.4)]


async def test_cancelled_tpm_waiter_takes_nothing(clock: FakeClock, crowd: Crowd) -> None:
    limiter = Limiter(tpm=600, headroom=0.0)  # 10 tokens per second
    async with limiter.slot(600):
        pass
    crowd.spawn(limiter, est=100)  # waits 60 s
    await clock.advance_to(5.0)
    crowd.tasks[0].cancel()
    await clock.settle()
    crowd.spawn(limiter, est=1)  # the cancelled waiter left no charge behind
    await clock.advance_to(59.9)
    assert crowd.entered == []
    await clock.advance_to(60.0)
    assert crowd.entered == [60.0]


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
    limiter = Limiter(rpm=1, headroom=0.0)
    async with limiter.slot():
        pass
    crowd.spawn(limiter)  # past the gate, waiting 60 s for an RPM unit
    await clock.advance_to(30.0)
    limiter.defer(100.0)
    await clock.advance_to(60.0)
    assert crowd.entered == [60.0]


# --- adaptive concurrency (AIMD) and announced limits ------------------------------------------


async def test_a_rate_limit_episode_cuts_the_cap_once(clock: FakeClock) -> None:
    limiter = Limiter(max_concurrency=40, decrease=0.5)
    tickets = []
    for _ in range(10):
        async with limiter.slot() as ticket:
            tickets.append(ticket)
    # Ten requests sent before any refusal come back refused: one episode, one cut.
    for ticket in tickets:
        limiter.rate_limited(ticket)
    assert (limiter.concurrency_cap, limiter.cuts) == (20, 1)
    # A refusal of a request sent after the cut is a new episode.
    async with limiter.slot() as later:
        pass
    limiter.rate_limited(later)
    assert (limiter.concurrency_cap, limiter.cuts) == (10, 2)
    for _ in range(30):  # never below one place
        async with limiter.slot() as t:
            pass
        limiter.rate_limited(t)
    assert limiter.concurrency_cap == 1


async def test_clean_responses_grow_the_cap_back_to_the_ceiling(clock: FakeClock) -> None:
    limiter = Limiter(max_concurrency=16, decrease=0.5)
    async with limiter.slot() as t:
        pass
    limiter.rate_limited(t)
    assert limiter.concurrency_cap == 8
    # Additive increase: about one place per cap's worth of clean responses.
    for _ in range(7):
        limiter.succeeded()
    assert limiter.concurrency_cap == 8
    for _ in range(2):
        limiter.succeeded()
    assert limiter.concurrency_cap == 9
    for _ in range(200):
        limiter.succeeded()
    assert limiter.concurrency_cap == 16  # never above the configured ceiling


async def test_a_cut_cap_holds_new_requests_but_not_those_in_flight(
    clock: FakeClock, crowd: Crowd
) -> None:
    limiter = Limiter(max_concurrency=10, decrease=0.5)
    crowd.spawn(limiter, 10, hold=True)
    await clock.settle()
    assert limiter.in_flight == 10
    limiter.rate_limited(0)  # cap 5: the ten in flight go on
    crowd.spawn(limiter, 3, hold=False)
    await clock.settle()
    assert (limiter.in_flight, len(crowd.entered)) == (10, 10)
    crowd.release.set()
    await clock.settle()
    assert len(crowd.entered) == 13
    assert limiter.in_flight == 0


def test_without_adaptive_the_cap_stays() -> None:
    limiter = Limiter(max_concurrency=10, adaptive=False)
    limiter.rate_limited(0)
    assert limiter.concurrency_cap == 10


async def test_announced_limits_start_or_lower_the_buckets(clock: FakeClock) -> None:
    limiter = Limiter()
    limiter.succeeded(RateInfo(limit_requests=500, limit_tokens=200_000))
    assert (limiter.rpm, limiter.tpm) == (500, 200_000)
    limiter.succeeded(RateInfo(limit_requests=800))  # looser than what is in force: ignored
    assert limiter.rpm == 500
    configured = Limiter(rpm=1000, tpm=50_000)
    configured.succeeded(RateInfo(limit_requests=300, limit_tokens=90_000))
    assert (configured.rpm, configured.tpm) == (300, 50_000)


async def test_an_exhausted_quota_closes_the_gate_until_its_reset(
    clock: FakeClock, crowd: Crowd
) -> None:
    limiter = Limiter()
    limiter.succeeded(RateInfo(remaining_requests=0, reset_requests_s=2.5))
    crowd.spawn(limiter, 3)
    await clock.advance_to(2.4)
    assert crowd.entered == []
    await clock.advance_to(2.5)
    assert crowd.entered == [2.5] * 3
    limiter.rate_limited(99, RateInfo(remaining_tokens=0, reset_tokens_s=1.0))
    crowd.spawn(limiter)
    await clock.advance_to(3.4)
    assert len(crowd.entered) == 3
    await clock.advance_to(3.5)
    assert len(crowd.entered) == 4


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
        ({"headroom": 1.0}, "headroom"),
        ({"headroom": -0.1}, "headroom"),
        ({"decrease": 1.0}, "decrease"),
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


@pytest.mark.parametrize("reset", [999_999_999.0, math.inf])
async def test_an_absurd_announced_reset_closes_the_gate_for_a_minute_at_most(
    clock: FakeClock, crowd: Crowd, reset: float
) -> None:
    limiter = Limiter()
    limiter.rate_limited(0, RateInfo(remaining_requests=0, reset_requests_s=reset))
    crowd.spawn(limiter, 2)
    await clock.advance_to(59.9)
    assert crowd.entered == []
    await clock.advance_to(60.0)
    assert crowd.entered == [60.0, 60.0]
