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
    # A wrong --base-url or model: each request is a bad request, none is answered.
    provider = ScriptedProvider({f"q{i}": [BadRequest("HTTP 404")] for i in range(200)})
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


async def test_failures_between_answers_do_not_stop_the_run(tmp_path: Path) -> None:
    script = {f"q{i}": ["right" if i % 10 == 0 else BadRequest("no")] for i in range(200)}
    provider = ScriptedProvider(script)  # type: ignore[arg-type]
    result = await run(provider, 200, tmp_path, rounds=1, concurrency=1)
    assert len(provider.history) == 200
    assert result.rounds[0].complete
