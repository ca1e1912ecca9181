"""The engine as an async service embeds it: an event stream, and no failure in silence.

Each failure here was met by embedding `Engine` in a service with public names only: a provider
handed a stray CancelledError, a provider or a judge with a bug, a prompt template that raises,
`run()` after `stop()` or twice at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest
from fakes import FakeSuite, ScriptedProvider, Step, items

from ttc.engine import (
    Completion,
    Demo,
    Engine,
    EngineOptions,
    Fatal,
    Item,
    Judged,
    QuestionGaveUp,
    QuestionSolved,
    Request,
    RetryPolicy,
    RoundEnded,
    RunConfig,
    RunEnded,
    RunStarted,
    SampleLanded,
    StopKind,
    StopReason,
    StreamEvent,
    Verdict,
    VerifierError,
)
from ttc.engine.contract import FloatArray
from ttc.engine.journal import read_journal
from ttc.engine.run import FAILURE_STREAK, VerifierPool
from ttc.engine.run._engine import CANCELLED

FAST = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01)


def solves() -> dict[str, list[Step]]:
    """A script that solves the even questions at once, and never the odd ones."""
    return {f"q{i}": [f"right:q{i}"] for i in range(0, 12, 2)}


def engine(
    provider: ScriptedProvider,
    out: Path | None,
    n: int = 12,
    suite: FakeSuite | None = None,
    resume: bool = False,
    **cfg: object,
) -> Engine:
    cfg.setdefault("verifier_workers", 0)
    cfg.setdefault("rounds", 2)
    config = RunConfig(method="adpt", **cfg)  # type: ignore[arg-type]
    return Engine(
        provider,
        suite or FakeSuite(pool=items(n)),
        config,
        out_dir=out,
        resume=resume,
        options=EngineOptions(retry=FAST),
    )


def journal(out: Path) -> list[dict[str, object]]:
    return list(read_journal(out / "journal.jsonl"))


def summary(out: Path) -> dict[str, object]:
    data = orjson.loads((out / "summary.json").read_bytes())
    assert isinstance(data, dict)
    return data


class CancelledBelow(ScriptedProvider):
    """The library under the provider gives up once: a CancelledError nobody asked for."""

    async def generate(self, request: Request) -> Completion:
        if request.item_id == "q3" and self.calls["q3"] == 0:
            self.calls["q3"] += 1
            raise asyncio.CancelledError
        return await super().generate(request)


async def test_a_stray_cancelled_error_from_a_provider_is_retried_not_a_hang(
    tmp_path: Path,
) -> None:
    async with engine(CancelledBelow(solves()), tmp_path) as e:
        result = await asyncio.wait_for(e.run(), 60)  # a guard against the old hang only
    assert result.complete
    assert result.stopped is None
    assert [s.samples for s in result.rounds] == [s.planned for s in result.rounds]
    retries = [ev for ev in journal(tmp_path) if ev["ev"] == "retry"]
    assert [(r["item"], r["error"]) for r in retries] == [("q3", "transient")]
    assert "cancelled" in str(retries[0]["message"])


class Buggy(ScriptedProvider):
    """A provider with a bug: it raises outside the error tree for one question."""

    async def generate(self, request: Request) -> Completion:
        if request.item_id == "q5":
            await asyncio.sleep(0.05)  # others are in flight meanwhile, and land
            raise KeyError("choices")
        return await super().generate(request)


async def test_a_provider_bug_raises_itself_with_its_traceback_and_loses_nothing(
    tmp_path: Path,
) -> None:
    e = engine(Buggy(solves()), tmp_path, concurrency=12)
    async with e:
        with pytest.raises(KeyError, match="choices") as caught:
            await e.run()
    # Its traceback reaches into the provider's own code.
    assert caught.traceback[-1].name == "generate"
    assert e.stopped is not None
    assert e.stopped.kind is StopKind.FAILED
    stopped = str(summary(tmp_path)["stopped"])
    assert stopped.startswith("failed: KeyError")
    log = (tmp_path / "run.log").read_text()
    assert "Traceback" in log
    assert "raise KeyError" in log
    # Nothing recorded the bug as a sample's failure; the samples in flight landed.
    events = journal(tmp_path)
    assert not [ev for ev in events if ev["ev"] == "sample" and ev.get("ok") is False]
    landed = {ev["item"] for ev in events if ev["ev"] == "sample"}
    assert landed == {f"q{i}" for i in range(12)} - {"q5"}
    # Fixed, the run goes on from its journal: nothing it holds is bought again.
    fixed = ScriptedProvider(solves())
    async with engine(fixed, tmp_path, concurrency=12, resume=True) as again:
        result = await again.run()
    assert result.complete
    assert {r.item_id for r in fixed.history if r.demos == ()} == {"q5"}


class BadCompletion(ScriptedProvider):
    """A provider with a bug in what it returns: one answer's latency is no number."""

    async def generate(self, request: Request) -> Completion:
        completion = await super().generate(request)
        if request.item_id == "q5":
            return dataclasses.replace(completion, latency_s=None)  # type: ignore[arg-type]
        return completion


async def test_an_answer_that_cannot_be_landed_fails_the_run_and_the_others_land(
    tmp_path: Path,
) -> None:
    provider = BadCompletion(solves())
    e = engine(provider, tmp_path, concurrency=12)
    async with e:
        with pytest.raises(TypeError):
            await e.run()
    assert e.stopped is not None
    assert e.stopped.kind is StopKind.FAILED
    # Answers land together, a turn's at once: every answer bought but the bad one is
    # journaled, and none is judged after the failure.
    events = journal(tmp_path)
    landed = {ev["item"] for ev in events if ev["ev"] == "sample"}
    assert landed == {r.item_id for r in provider.history} - {"q5"}
    assert len(landed) == 11
    judged = {ev["item"] for ev in events if ev["ev"] == "verdict"}
    assert judged <= landed
    # Fixed, the run goes on from its journal: nothing it holds is bought again.
    fixed = ScriptedProvider(solves())
    async with engine(fixed, tmp_path, concurrency=12, resume=True) as again:
        result = await again.run()
    assert result.complete
    assert {r.item_id for r in fixed.history if r.demos == ()} == {"q5"}


class BuggyJudge(FakeSuite):
    def judge(self, item: Item, response: str) -> Verdict:
        if item.id == "q4":
            raise ValueError("cannot parse")
        return super().judge(item, response)


async def test_a_judge_that_raises_stops_the_run_loudly_and_resumes_unbought(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(solves())
    e = engine(provider, tmp_path, suite=BuggyJudge(pool=items(12)))
    async with e:
        with pytest.raises(VerifierError, match=r"ValueError\('cannot parse'\) on item q4"):
            await e.run()
    assert e.stopped is not None
    assert "q4" in str(summary(tmp_path)["stopped"])
    assert "cannot parse" in (tmp_path / "run.log").read_text()
    bought = len(provider.history)
    # The judge fixed: samples that landed are judged now, not bought again.
    again_provider = ScriptedProvider(solves())
    async with engine(again_provider, tmp_path, resume=True) as again:
        result = await again.run()
    assert result.complete
    assert result.solved == 6
    warmup = [r for r in again_provider.history if r.demos == ()]
    assert len(warmup) == 12 - bought


async def test_a_streak_of_refusals_says_in_the_result_why_the_run_stopped(
    tmp_path: Path,
) -> None:
    # Each refusal words it differently (not the first attempts' one reason to stop at once).
    provider = ScriptedProvider({f"q{i}": [Fatal(f"model not found ({i})")] for i in range(80)})
    async with engine(provider, tmp_path, n=80, concurrency=4) as e:
        result = await e.run()
    assert not result.complete
    assert result.stopped is not None
    assert result.stopped.kind is StopKind.PROVIDER
    # A quarter of the 80 samples the round plans (at most FAILURE_STREAK).
    assert f"{min(FAILURE_STREAK, 20)} samples in a row failed" in result.stopped.message
    assert "model not found" in result.stopped.message


class BrokenTemplate(FakeSuite):
    def adaptive_prompt(self, item: Item, demos: Sequence[Demo]) -> str:
        raise ValueError("template has no {question}")


async def test_an_error_in_prompt_rendering_arrives_as_itself(tmp_path: Path) -> None:
    provider = ScriptedProvider(solves())
    async with engine(provider, tmp_path, suite=BrokenTemplate(pool=items(12)), concurrency=8) as e:
        with pytest.raises(ValueError, match=r"no \{question\}"):  # not an ExceptionGroup
            await e.run()


async def test_run_after_stop_is_refused_not_an_empty_result() -> None:
    async with engine(ScriptedProvider(), None) as e:
        e.stop("the service is shutting down")
        with pytest.raises(RuntimeError, match=r"stopped.*shutting down"):
            await e.run()


async def test_two_runs_at_once_on_one_engine_are_refused_and_nothing_leaks() -> None:
    provider = ScriptedProvider({f"q{i}": [(0.02, f"right:q{i}")] for i in range(12)})
    before = asyncio.all_tasks()
    async with engine(provider, None) as e:
        first = asyncio.create_task(e.run())
        await asyncio.sleep(0.005)
        with pytest.raises(RuntimeError, match="already running"):
            await e.run()
        result = await first
    assert result.complete
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - before == set()


async def test_the_stream_tells_each_question_as_it_is_solved(tmp_path: Path) -> None:
    provider = ScriptedProvider({f"q{i}": [(0.01 * i, f"right:q{i}")] for i in range(0, 12, 2)})
    seen: list[StreamEvent] = []
    running_at_first_solve = None
    async with engine(provider, tmp_path, rounds=3) as e:
        async for event in e.stream():
            if isinstance(event, QuestionSolved) and running_at_first_solve is None:
                running_at_first_solve = e.running
            seen.append(event)
    # A service answering per question does not wait for the whole run.
    assert running_at_first_solve is True
    assert isinstance(seen[0], RunStarted)
    end = seen[-1]
    assert isinstance(end, RunEnded)
    assert end.result.complete
    solved = [ev for ev in seen if isinstance(ev, QuestionSolved)]
    assert sorted(ev.item for ev in solved) == sorted(f"q{i}" for i in range(0, 12, 2))
    assert all(ev.round == 1 and ev.response == f"right:{ev.item}" for ev in solved)
    assert end.result.solved == len(solved)
    gave_up = [ev for ev in seen if isinstance(ev, QuestionGaveUp)]
    assert sorted(ev.item for ev in gave_up) == sorted(f"q{i}" for i in range(1, 12, 2))
    assert all(ev.samples == 3 for ev in gave_up)  # one per round (k=1)
    # Each solve comes after its verdict; the rounds end in order; nothing after RunEnded.
    kinds = [type(ev) for ev in seen]
    assert kinds.count(RoundEnded) == 3
    assert kinds.count(SampleLanded) == kinds.count(Judged) == 6 + 6 * 3
    for i, ev in enumerate(seen):  # the verdict that solved it, before it
        if isinstance(ev, QuestionSolved):
            before = seen[:i]
            assert any(isinstance(j, Judged) and j.item == ev.item and j.passed for j in before)
    assert kinds.index(QuestionGaveUp) > max(i for i, k in enumerate(kinds) if k is RoundEnded)


async def test_closing_the_stream_early_cancels_the_run_which_resumes(tmp_path: Path) -> None:
    provider = ScriptedProvider({f"q{i}": [(0.01, f"right:q{i}")] for i in range(40)})
    async with engine(provider, tmp_path, n=40, concurrency=4) as e:
        async with contextlib.aclosing(e.stream()) as events:
            async for event in events:
                if isinstance(event, SampleLanded):
                    break
        assert not e.running
    # Why it stopped is recorded and logged: not `stopped: null`, as a run that ended.
    assert e.stopped == StopReason(StopKind.INTERRUPTED, CANCELLED)
    assert summary(tmp_path)["stopped"] == CANCELLED
    assert summary(tmp_path)["complete"] is False
    assert CANCELLED in (tmp_path / "run.log").read_text()
    landed = {ev["item"] for ev in journal(tmp_path) if ev["ev"] == "sample"}
    assert 0 < len(landed) < 40
    fresh = ScriptedProvider({f"q{i}": [f"right:q{i}"] for i in range(40)})
    async with engine(fresh, tmp_path, n=40, concurrency=4, resume=True) as again:
        result = await again.run()
    assert result.complete
    assert result.solved == 40
    assert {r.item_id for r in fresh.history} == {f"q{i}" for i in range(40)} - landed


async def test_cancelling_a_run_stops_it_as_closing_its_stream_does(tmp_path: Path) -> None:
    # `run` makes no stream of its own: a cancelled caller is the run cancelled.
    provider = ScriptedProvider({f"q{i}": [(0.01, f"right:q{i}")] for i in range(40)})
    async with engine(provider, tmp_path, n=40, concurrency=4) as e:
        running = asyncio.ensure_future(e.run())
        for _ in range(6000):  # until a sample is journaled (a minute at most)
            if any(ev["ev"] == "sample" for ev in journal(tmp_path)):
                break
            await asyncio.sleep(0.01)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert not e.running
    assert e.stopped == StopReason(StopKind.INTERRUPTED, CANCELLED)
    assert summary(tmp_path)["stopped"] == CANCELLED
    assert summary(tmp_path)["complete"] is False
    landed = {ev["item"] for ev in journal(tmp_path) if ev["ev"] == "sample"}
    assert 0 < len(landed) < 40
    fresh = ScriptedProvider({f"q{i}": [f"right:q{i}"] for i in range(40)})
    async with engine(fresh, tmp_path, n=40, concurrency=4, resume=True) as again:
        result = await again.run()
    assert result.solved == 40
    assert {r.item_id for r in fresh.history} == {f"q{i}" for i in range(40)} - landed


async def test_engines_share_one_verifier_pool(tmp_path: Path) -> None:
    suite = FakeSuite(pool=items(12))
    pool = VerifierPool(suite, workers=1)
    pool.start()
    try:
        engines = [
            Engine(
                ScriptedProvider(solves()),
                suite,
                RunConfig(method="adpt", rounds=2),
                out_dir=tmp_path / name,
                options=EngineOptions(verifiers=pool, retry=FAST),
            )
            for name in ("a", "b")
        ]
        async with engines[0] as a, engines[1] as b:
            results = await asyncio.gather(a.run(), b.run())
        assert [r.solved for r in results] == [6, 6]
        assert pool.started  # the engines neither started nor closed the host's pool
        assert (await pool.judge(items(1)[0], "right:q0")).score == 1.0
    finally:
        await pool.aclose()


class BrokenEmbedder:
    name = "broken"
    dim = 4
    batch_size = 64

    def embed(self, texts: Sequence[str]) -> FloatArray:
        raise IndexError("tokenizer table out of range")


async def test_an_embedder_bug_raises_itself_and_the_run_resumes(tmp_path: Path) -> None:
    e = Engine(
        ScriptedProvider(solves()),
        FakeSuite(pool=items(12)),
        RunConfig(method="adpt", rounds=2, verifier_workers=0),
        out_dir=tmp_path,
        embedder=BrokenEmbedder(),
    )
    async with e:
        with pytest.raises(IndexError, match="tokenizer table"):
            await e.run()
    assert str(summary(tmp_path)["stopped"]).startswith("failed: IndexError")
    # The warm-up it bought is kept: resumed with a working embedder, only round 2 is sent.
    again = ScriptedProvider(solves())
    async with engine(again, tmp_path, resume=True) as fixed:
        result = await fixed.run()
    assert result.complete
    assert all(r.demos for r in again.history if r.item_id in {"q1", "q3"})
    assert {r.item_id for r in again.history} == {f"q{i}" for i in range(1, 12, 2)}
