"""Budgets that hold: each request's worst case is reserved before it is sent and released once
its usage is accounted, so --max-cost and --max-output-tokens are never passed by more than one
request's worst case, however many requests are in flight; --dry-run's plan at its worst."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeSuite, ScriptedProvider, items

from ttc.engine import Engine, EngineOptions, RunConfig, StopKind
from ttc.engine.contract._types import Message, Request, Sampling, Usage
from ttc.engine.run._worstcase import plan_cost, worst_of
from ttc.engine.send._prices import Price
from ttc.engine.send._tokens import TokenEstimator

# $1 an output token, input free: a sample of the scripted model (10 output tokens) costs $10.
PRICE = Price(0.0, 1e6, 1e6)


async def _run(tmp_path: Path, **cfg: object) -> tuple[float, int]:
    # 40 questions, 16 requests in flight, each answered after a short wait: without a
    # reservation, every request in flight when the budget is reached is bought too.
    script = {f"q{i}": [(0.01, "wrong")] for i in range(40)}
    config = RunConfig(
        method="elim",
        rounds=1,
        concurrency=16,
        verifier_workers=0,
        sampling=Sampling(max_output_tokens=10),
        **cfg,  # type: ignore[arg-type]
    )
    async with Engine(
        ScriptedProvider(script),  # type: ignore[arg-type]
        FakeSuite(pool=items(40)),
        config,
        out_dir=tmp_path,
        options=EngineOptions(price=PRICE),
    ) as engine:
        result = await engine.run()
    assert result.stopped is not None
    assert result.stopped.kind is StopKind.BUDGET
    usage = result.usage
    return PRICE.cost(usage), usage.output_tokens


async def test_max_cost_is_never_passed_by_more_than_one_requests_worst_case(
    tmp_path: Path,
) -> None:
    cost, _ = await _run(tmp_path, max_cost_usd=35.0)
    # A request's worst case: 10 output tokens, $10. Without a reservation, 16 in flight: $160.
    assert 35.0 <= cost <= 35.0 + 10.0


async def test_max_output_tokens_is_never_passed_by_more_than_one_requests_cap(
    tmp_path: Path,
) -> None:
    _, output = await _run(tmp_path, max_output_tokens=35)
    assert 35 <= output <= 35 + 10


def test_a_requests_worst_case_is_its_prompt_and_its_output_cap_at_the_price() -> None:
    sampling = Sampling(max_output_tokens=100, thinking_budget=50)
    request = Request((Message("user", "x" * 400),), sampling, 2, "q")
    worst = worst_of(request, Price(1.0, 2.0, 3.0), TokenEstimator())
    assert worst.usage == Usage(100, 200, 100)
    assert worst.cost == pytest.approx((100 * 1.0 + 200 * 2.0 + 100 * 3.0) / 1e6)
    # No cap: the running mean of the outputs seen (512 before any).
    bare = worst_of(
        Request((Message("user", "x" * 400),), Sampling(), 1, "q"), None, TokenEstimator()
    )
    assert bare.usage == Usage(100, 512, 0)
    assert bare.cost is None


def test_a_plans_worst_case_is_every_question_every_round() -> None:
    suite = FakeSuite(pool=items(5))
    config = RunConfig(method="adpt", rounds=3, k=2, sampling=Sampling(max_output_tokens=100))
    plan = plan_cost(config, suite, list(suite.items()), PRICE, demonstrations=True)
    assert [r.requests for r in plan.rounds] == [10, 10, 10]
    assert plan.requests == 30
    assert all(r.usage.output_tokens == 1000 for r in plan.rounds)
    # An adaptive round's prompt shows P demonstrations at the output cap: far longer.
    warm, adaptive = plan.rounds[0].usage.input_tokens, plan.rounds[1].usage.input_tokens
    assert adaptive > warm + 2 * 5 * config.p * 100
    assert plan.cost == pytest.approx(sum(r.cost or 0 for r in plan.rounds))
    assert plan.capped
    flat = plan_cost(config, suite, list(suite.items()), None, demonstrations=False)
    assert flat.rounds[2].usage.input_tokens == warm
    assert flat.cost is None
