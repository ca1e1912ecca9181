"""A run over several sessions (stopped, resumed), as a user reads its reports: a refused or
empty resume leaves them as they were, wall times add up over the sessions, and the simulated
label follows the answers into the response cache and the journal."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from fakes import FakeSuite, ScriptedProvider, Step, items

from ttc.engine import ConfigError, Engine, EngineOptions, ResponseCache, RunConfig, StopKind
from ttc.engine.cli._progress import Progress
from ttc.engine.contract import FloatArray
from ttc.engine.contract._state import RoundStats, RunState
from ttc.engine.contract._types import Usage
from ttc.retrieval import LexicalEmbedder

N = 8


def _summary(run: Path) -> Any:
    return orjson.loads((run / "summary.json").read_bytes())


def _files(run: Path) -> dict[str, bytes]:
    return {name: (run / name).read_bytes() for name in ("summary.json", "results.jsonl")}


def _script() -> dict[str, list[str | Any]]:
    # q0..q3 solved in the warm-up, q4..q5 in round 2, q6..q7 never.
    return {f"q{i}": [f"right:q{i}"] for i in range(4)} | {
        f"q{i}": ["wrong", f"right:q{i}"] for i in (4, 5)
    }


async def _run(
    out: Path,
    *,
    resume: bool = False,
    provider: ScriptedProvider | None = None,
    cache: ResponseCache | None = None,
    embedder: Any = None,
    **config: Any,
) -> Any:
    suite = FakeSuite(pool=items(N))
    cfg = RunConfig(method="adpt", rounds=3, verifier_workers=0, **config)
    engine = Engine(
        provider or ScriptedProvider(_script()),
        suite,
        cfg,
        out_dir=out,
        resume=resume,
        embedder=embedder or LexicalEmbedder(),
        options=EngineOptions(cache=cache),
    )
    async with engine:
        return await engine.run()


async def test_a_resume_refused_for_its_budget_leaves_the_finished_reports_alone(
    tmp_path: Path,
) -> None:
    await _run(tmp_path)
    before = _files(tmp_path)
    assert _summary(tmp_path)["complete"]
    # The scripted model has no list price: --max-cost cannot be kept, and is refused...
    with pytest.raises(ConfigError, match="--max-cost"):
        await _run(tmp_path, resume=True, max_cost_usd=5.0)
    # ...before anything was written.
    assert _files(tmp_path) == before


async def test_a_finished_run_resumed_with_a_smaller_budget_replays_and_stays_finished(
    tmp_path: Path,
) -> None:
    first = await _run(tmp_path)
    before = _files(tmp_path)
    provider = ScriptedProvider(_script())
    result = await _run(tmp_path, resume=True, provider=provider, max_output_tokens=1)
    # Nothing was bought again, every round replayed, and the reports stand as they were.
    assert provider.history == []
    assert result.complete
    assert result.stopped is None
    assert result.coverage == first.coverage
    assert [s.solved for s in result.rounds] == [s.solved for s in first.rounds]
    assert _files(tmp_path) == before


async def test_a_budget_still_stops_new_work_after_the_replay(tmp_path: Path) -> None:
    stopped = await _run(tmp_path, max_output_tokens=60)  # the warm-up spends 80
    assert stopped.stopped is not None
    assert stopped.stopped.kind is StopKind.BUDGET
    provider = ScriptedProvider(_script())
    again = await _run(tmp_path, resume=True, provider=provider, max_output_tokens=60)
    assert provider.history == []  # the budget is spent: nothing new is bought
    assert again.stopped is not None
    assert again.stopped.kind is StopKind.BUDGET
    assert _summary(tmp_path)["stopped"] == "--max-output-tokens 60 reached"


@dataclass
class SlowEmbedder:
    """The lexical embedder, after a wait (as a model loading would make it)."""

    wait_s: float
    inner: LexicalEmbedder = field(default_factory=LexicalEmbedder)
    name: str = "slow"

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def batch_size(self) -> int:
        return self.inner.batch_size

    def embed(self, texts: Sequence[str]) -> FloatArray:
        time.sleep(self.wait_s)
        return self.inner.embed(texts)


async def test_a_round_counts_the_time_it_waits_for_the_embedder(tmp_path: Path) -> None:
    await _run(tmp_path, embedder=lambda: SlowEmbedder(0.6))
    summary = _summary(tmp_path)
    rounds = [r["wall_s"] for r in summary["rounds"]]
    # Round 2 needs the vectors: it waited for them, and says so.
    assert rounds[1] >= 0.5
    # The rounds add up to the run, less the writing of the results.
    assert sum(rounds) == pytest.approx(summary["wall_s"], abs=0.05)


async def test_wall_times_accumulate_over_the_sessions(tmp_path: Path) -> None:
    slow: dict[str, list[Step]] = {f"q{i}": [(0.3, f"right:q{i}")] for i in range(N)}
    await _run(tmp_path, provider=ScriptedProvider(slow), max_output_tokens=60)
    first = _summary(tmp_path)
    assert first["wall_s"] >= 0.3
    # A resume that buys the rest: the run's time is both sessions', and so is round 1's.
    await _run(tmp_path, resume=True, provider=ScriptedProvider(_script()))
    second = _summary(tmp_path)
    assert second["complete"]
    assert second["wall_s"] > first["wall_s"]
    assert second["rounds"][0]["wall_s"] >= first["rounds"][0]["wall_s"] - 0.002  # ms rounding
    assert sum(r["wall_s"] for r in second["rounds"]) == pytest.approx(second["wall_s"], abs=0.05)


@dataclass
class Simulator(ScriptedProvider):
    """A scripted provider that says it is the offline simulator (as `ttc serve` does)."""

    simulated: bool = True


async def test_answers_from_the_cache_keep_their_simulated_label(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite3")
    live = await _run(tmp_path / "live", provider=Simulator(_script()), cache=cache)
    cache.flush()
    assert live.simulated
    assert _summary(tmp_path / "live")["simulated"] is True
    # The same requests again, from a provider that has not yet seen a simulated answer: every
    # answer comes from the cache, and the label with it.
    remote = ScriptedProvider(_script())
    replayed = await _run(tmp_path / "cached", provider=remote, cache=cache)
    assert remote.history == []
    assert replayed.simulated
    summary = _summary(tmp_path / "cached")
    assert summary["simulated"] is True
    assert "simulated" in summary["note"]
    cache.close()


async def test_answers_replayed_from_the_journal_keep_their_simulated_label(
    tmp_path: Path,
) -> None:
    await _run(tmp_path, provider=Simulator(_script()), max_output_tokens=60)
    resumed = await _run(tmp_path, resume=True, provider=ScriptedProvider(_script()))
    assert resumed.simulated
    assert _summary(tmp_path)["simulated"] is True


async def test_a_real_run_is_not_labelled_simulated(tmp_path: Path) -> None:
    result = await _run(tmp_path)
    assert not result.simulated
    assert "simulated" not in _summary(tmp_path)


def _progress(planned: int, samples: int, cost: float | None) -> Progress:
    progress = Progress(live=True)
    state = RunState(items(4))
    state.rounds.append(RoundStats(round=2, adaptive=True, planned=planned, samples=samples))
    progress._state, progress._rounds = state, 4
    progress._cost = lambda usage: cost
    return progress


def test_the_live_line_says_what_the_run_waits_for() -> None:
    progress = _progress(planned=0, samples=0, cost=0.5)
    progress.waiting("the embedder (loading its model, embedding the questions)")
    assert "waiting for the embedder" in progress.line()
    progress.waiting(None)
    assert "waiting for" not in progress.line()


def test_the_live_line_says_price_unknown_and_no_false_eta() -> None:
    progress = _progress(planned=100_000, samples=99_999, cost=None)
    assert "price unknown" in progress.line()
    assert "$?" not in progress.line()
    for _ in range(600):  # hundreds a second: the last sample is not "0s" away, it is waited on
        progress.request_done()
    line = progress.line()
    assert "ETA 0s" not in line
    assert "waiting on the last 1" in line
    state = progress._state
    assert state is not None
    state.rounds[-1].samples = 0
    assert re.search(r"ETA \d+s", progress.line())


async def test_a_finished_run_whose_last_rounds_had_nothing_to_sample_stays_finished(
    tmp_path: Path,
) -> None:
    everything: dict[str, list[Step]] = {
        f"q{i}": [f"right:q{i}"] for i in range(N)
    }  # all solved in the warm-up
    first = await _run(tmp_path, provider=ScriptedProvider(everything))
    assert [s.active for s in first.rounds] == [N, 0, 0]
    before = _files(tmp_path)
    provider = ScriptedProvider(everything)
    again = await _run(tmp_path, resume=True, provider=provider, max_output_tokens=1)
    assert provider.history == []
    assert again.stopped is None
    assert again.complete
    assert _files(tmp_path) == before


@pytest.mark.parametrize("columns", [100, 80, 60, 40])
def test_the_live_line_fits_the_terminal_on_one_line(columns: int) -> None:
    # A large run: the full line is 160-odd characters, and used to be written whole, so a
    # narrow terminal wrapped it and got a new line every tick.
    stream = io.StringIO()
    progress = _progress(planned=100_000, samples=54_321, cost=123.4567)
    progress.stream, progress.columns = stream, lambda: columns
    state = progress._state
    assert state is not None
    state.rounds[-1].usage = Usage(98_765_432, 12_345_678, 3_456_789)
    state.rounds[-1].retries, state.rounds[-1].rate_limited = 1234, 567
    assert len(progress.line()) > 140
    for _ in range(3):
        progress.render()
    shown = stream.getvalue().split("\r")[1:]
    assert len(shown) == 3
    for text in shown:
        assert "\n" not in text
        line = text.removesuffix("\x1b[K")
        assert len(line) <= columns - 1
        assert line.startswith(("round 2/4 54321/100000", "r2/4 54321/100000"))
    if columns >= 60:  # the compact line keeps the ETA
        assert "ETA" in shown[0]


def test_the_live_line_is_the_full_one_when_it_fits() -> None:
    progress = _progress(planned=10, samples=3, cost=0.5)
    assert progress.fitted(200) == progress.line()
    assert progress.fitted(60).startswith("r2/4 3/10 | solved 0/4 0.0% | out 0 | $0.5000")
