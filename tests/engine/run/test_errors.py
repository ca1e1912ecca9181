"""Retries through the engine: rate limits and transient errors recover, fatal ones are recorded."""

from __future__ import annotations

from pathlib import Path

import orjson
from fakes import FakeSuite, ScriptedProvider, items

from ttc.engine import (
    BadRequest,
    Engine,
    EngineOptions,
    Fatal,
    RateLimited,
    RetryPolicy,
    RunConfig,
    RunResult,
    StopKind,
    Transient,
)
from ttc.engine.journal import read_journal
from ttc.engine.run import FAILURE_STREAK, PROVIDER_STOP
from ttc.engine.run._budget import FAILURE_STREAK_MIN, FIRST_ATTEMPTS

FAST = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01)


async def run(provider: ScriptedProvider, n: int, out: Path, **cfg: object) -> RunResult:
    cfg.setdefault("verifier_workers", 0)
    config = RunConfig(method="elim", **cfg)  # type: ignore[arg-type]
    suite = FakeSuite(pool=items(n))
    async with Engine(
        provider, suite, config, out_dir=out, options=EngineOptions(retry=FAST)
    ) as engine:
        return await engine.run()


def journal(out: Path) -> list[dict[str, object]]:
    return list(read_journal(out / "journal.jsonl"))


async def test_rate_limit_then_success_recovers(tmp_path: Path) -> None:
    provider = ScriptedProvider({"q0": [RateLimited("slow down", retry_after=0.02), "right:q0"]})
    result = await run(provider, 1, tmp_path, rounds=1)
    assert result.solved == 1
    assert provider.calls["q0"] == 2
    events = journal(tmp_path)
    retries = [e for e in events if e["ev"] == "retry"]
    assert len(retries) == 1
    assert retries[0]["error"] == "rate_limited"
    assert float(retries[0]["delay"]) >= 0.02  # type: ignore[arg-type]
    samples = [e for e in events if e["ev"] == "sample"]
    assert len(samples) == 1
    assert samples[0]["attempts"] == 2
    verdict = next(e for e in events if e["ev"] == "verdict")
    assert verdict["passed"] is True
    assert verdict["item"] == "q0"
    assert result.rounds[0].retries == 1


async def test_transient_errors_then_success_recover(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        {"q0": [Transient("503"), Transient("reset"), Transient("truncated"), "right:q0"]}
    )
    result = await run(provider, 1, tmp_path, rounds=1)
    assert result.solved == 1
    assert provider.calls["q0"] == 4
    assert result.rounds[0].retries == 3
    assert result.rounds[0].errors == 0


async def test_attempt_timeout_is_retried(tmp_path: Path) -> None:
    provider = ScriptedProvider({"q0": [(5.0, "right:q0 late"), "right:q0"]})
    result = await run(provider, 1, tmp_path, rounds=1, timeout_s=0.05)
    assert result.response("q0") == "right:q0"
    retry = next(e for e in journal(tmp_path) if e["ev"] == "retry")
    assert retry["error"] == "transient"
    assert "timed out" in str(retry["message"])


async def test_fatal_error_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        {"q0": [Fatal("invalid api key"), "right:q0"], "q1": ["right:q1"], "q2": ["wrong"]}
    )
    result = await run(provider, 3, tmp_path, rounds=2)
    # q0's first sample failed for good: one attempt, an error recorded, no retry.
    assert provider.calls["q0"] == 2
    r1 = result.rounds[0]
    assert r1.errors == 1
    assert r1.retries == 0
    failed = [e for e in journal(tmp_path) if e["ev"] == "sample" and not e["ok"]]
    assert len(failed) == 1
    assert failed[0]["item"] == "q0"
    assert failed[0]["error"] == "fatal"
    assert "invalid api key" in str(failed[0]["message"])
    # The others went on, and q0 was solved in the next round.
    assert result.solved == 2
    assert result.records[0].errors == 1


async def test_retries_exhausted_is_a_recorded_error(tmp_path: Path) -> None:
    provider = ScriptedProvider({"q0": [Transient("503")] * 10})
    result = await run(provider, 1, tmp_path, rounds=1)
    assert provider.calls["q0"] == FAST.max_attempts
    assert result.rounds[0].errors == 1
    sample = next(e for e in journal(tmp_path) if e["ev"] == "sample")
    assert sample["ok"] is False
    assert sample["attempts"] == FAST.max_attempts


async def test_a_refused_account_stops_the_run_resumably(tmp_path: Path) -> None:
    # A revoked key: every request would be refused the same way; stop at the first.
    refused = Fatal("HTTP 401: invalid_api_key", stops_run=True)
    provider = ScriptedProvider({f"q{i}": [refused] for i in range(200)})
    async with Engine(
        provider,
        FakeSuite(pool=items(200)),
        RunConfig(method="elim", rounds=2, concurrency=4, verifier_workers=0),
        out_dir=tmp_path,
        options=EngineOptions(retry=FAST),
    ) as engine:
        result = await engine.run()
    assert engine.stopped is not None
    assert engine.stopped.kind is StopKind.PROVIDER
    assert engine.stopped.exit_code == 4
    assert engine.stopped.message.startswith(PROVIDER_STOP)
    assert "invalid_api_key" in engine.stopped.message
    assert result.stopped == engine.stopped
    assert not result.complete
    assert len(provider.history) <= 4  # the requests in flight when it stopped, not 200
    assert not result.rounds[0].complete  # the round is unfinished: `ttc resume` goes on
    assert orjson.loads((tmp_path / "summary.json").read_bytes())["complete"] is False


async def test_a_streak_of_failures_stops_the_run(tmp_path: Path) -> None:
    # Each request is refused for a reason of its own (so not the first attempts' one reason),
    # none is answered: a large round stops after FAILURE_STREAK of them.
    provider = ScriptedProvider({f"q{i}": [BadRequest(f"HTTP 404 ({i})")] for i in range(200)})
    async with Engine(
        provider,
        FakeSuite(pool=items(200)),
        RunConfig(method="elim", rounds=1, concurrency=2, verifier_workers=0),
        options=EngineOptions(retry=FAST),
    ) as engine:
        await engine.run()
    assert engine.stopped is not None
    assert engine.stopped.kind is StopKind.PROVIDER
    assert f"{FAILURE_STREAK} samples in a row failed" in engine.stopped.message
    assert FAILURE_STREAK <= len(provider.history) <= FAILURE_STREAK + 4


async def test_the_failure_streak_scales_to_a_small_round(tmp_path: Path) -> None:
    # 8 samples a round, each failing for a reason of its own: the streak that stops the run is
    # a share of them (at least FAILURE_STREAK_MIN), not 32 that a small run never reaches.
    provider = ScriptedProvider({f"q{i}": [BadRequest(f"HTTP 404 ({i})")] for i in range(8)})
    result = await run(provider, 8, tmp_path, rounds=3, concurrency=1)
    assert result.stopped is not None
    assert result.stopped.kind is StopKind.PROVIDER
    assert f"{FAILURE_STREAK_MIN} samples in a row failed" in result.stopped.message
    assert len(provider.history) == FAILURE_STREAK_MIN
    assert result.failed == f"{FAILURE_STREAK_MIN} samples failed for good (1 of them: " + (
        "bad_request: HTTP 404 (0))"
    )


async def test_a_run_whose_first_attempts_all_fail_alike_stops_at_once(tmp_path: Path) -> None:
    # Nothing listening at --base-url: every attempt fails the same way, and is retried. The run
    # stops once its first FIRST_ATTEMPTS attempts have, naming why, not after every retry of
    # every sample of every round (5 questions, 4 attempts each, 3 rounds: 60).
    refused = Transient("Cannot connect to host 127.0.0.1:8009")
    provider = ScriptedProvider({f"q{i}": [refused] * 100 for i in range(5)})
    result = await run(provider, 5, tmp_path, rounds=3, concurrency=5)
    assert result.stopped is not None
    assert result.stopped.kind is StopKind.PROVIDER
    assert result.stopped.message == (
        f"{PROVIDER_STOP}: the first {FIRST_ATTEMPTS} attempts all failed, none answered: "
        "transient: Cannot connect to host 127.0.0.1:8009"
    )
    # The attempts in flight when it stopped land; none is tried again after the stop.
    assert FIRST_ATTEMPTS <= len(provider.history) < FIRST_ATTEMPTS + 5
    assert result.failed is not None
    assert result.failed.startswith("5 samples failed for good")
    assert "Cannot connect" in (tmp_path / "run.log").read_text()


async def test_the_first_attempts_failing_in_different_ways_or_once_answered_go_on(
    tmp_path: Path,
) -> None:
    # One question answered among the failures: the first-attempts stop never applies, and a
    # rate limit is not a reason to stop either (the limiter waits it out).
    slow = RateLimited("slow down", retry_after=0.001)
    script: dict[str, list[object]] = {"q0": ["right:q0"]}
    script |= {f"q{i}": [slow, slow, "right:" + f"q{i}"] for i in range(1, 6)}
    provider = ScriptedProvider(script)  # type: ignore[arg-type]
    result = await run(provider, 6, tmp_path, rounds=1, concurrency=1)
    assert result.stopped is None
    assert result.failed is None
    assert result.solved == 6


async def test_a_run_that_ends_with_failed_samples_says_so(tmp_path: Path) -> None:
    # Not stopped (answers between the failures), but two samples failed for good: the result
    # says how many and why, so that `ttc run` exits non-zero naming it.
    script = {f"q{i}": ["right" if i % 3 else BadRequest("prompt too long")] for i in range(6)}
    provider = ScriptedProvider(script)  # type: ignore[arg-type]
    result = await run(provider, 6, tmp_path, rounds=1, concurrency=1)
    assert result.stopped is None
    assert result.failed == "2 samples failed for good (all of them: bad_request: prompt too long)"


async def test_failures_between_answers_do_not_stop_the_run(tmp_path: Path) -> None:
    script = {f"q{i}": ["right" if i % 10 == 0 else BadRequest("no")] for i in range(200)}
    provider = ScriptedProvider(script)  # type: ignore[arg-type]
    result = await run(provider, 200, tmp_path, rounds=1, concurrency=1)
    assert len(provider.history) == 200
    assert result.rounds[0].complete
