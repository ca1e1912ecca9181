"""A run's timeline: every journal line has its time, the limiter is sampled while rounds run,
and `ttc report DIR --timeline P.png` draws requests, tokens, retries and the cap from them."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from fakes import FakeSuite, ScriptedProvider, Step, items

from ttc.engine import (
    ConfigError,
    Engine,
    EngineOptions,
    RateLimited,
    RetryPolicy,
    RunConfig,
    Transient,
)
from ttc.engine.cli import main
from ttc.engine.journal import read_journal
from ttc.engine.report._timeline import Timeline, read_timeline, timeline

FAST = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01)


async def faulty_run(out: Path) -> None:
    script: dict[str, list[Step]] = {
        f"q{i}": [(0.3, "wrong")] for i in range(12)
    }  # slow enough for the limiter to be sampled
    script["q0"] = [RateLimited("slow down", retry_after=0.01), "right:q0"]
    script["q1"] = [Transient("503"), Transient("reset"), "right:q1"]
    config = RunConfig(method="elim", rounds=2, verifier_workers=0, rpm=6000, concurrency=4)
    async with Engine(
        ScriptedProvider(script), FakeSuite(pool=items(12)), config, out_dir=out,
        options=EngineOptions(retry=FAST),
    ) as engine:  # fmt: skip
        await engine.run()


def journal(out: Path) -> list[dict[str, object]]:
    return list(read_journal(out / "journal.jsonl"))


async def test_the_timeline_counts_what_the_journal_holds(tmp_path: Path) -> None:
    await faulty_run(tmp_path)
    events = journal(tmp_path)
    assert all(isinstance(e.get("at"), float) for e in events)  # every line has its time
    samplings = [e for e in events if e["ev"] == "limiter"]
    assert samplings  # the limiter was sampled while the rounds ran
    assert all(e["rpm"] == 6000 and e["cap"] in {1, 2, 3, 4} for e in samplings)
    tl = read_timeline(tmp_path)
    samples = [e for e in events if e["ev"] == "sample"]
    assert sum(tl.requests) == len(samples)
    tokens = sum(sum(e["usage"]) for e in samples if e["ok"])  # type: ignore[call-overload]
    assert sum(tl.tokens) == tokens
    assert {k: sum(v) for k, v in tl.retries.items()} == {"rate_limited": 1, "transient": 2}
    assert sum(tl.rate_limited) == 1
    assert tl.configured_rpm == 6000
    assert len(tl.limiter) == len(samplings)
    # summary.json holds the rates achieved over the run's wall time.
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    minutes = summary["wall_s"] / 60
    requests = sum(r["requests"] for r in summary["rounds"])
    assert summary["achieved_rpm"] == pytest.approx(requests / minutes, rel=0.01)
    total = summary["input_tokens"] + summary["output_tokens"] + summary["thinking_tokens"]
    assert summary["achieved_tpm"] == pytest.approx(total / minutes, rel=0.01)


async def test_ttc_report_draws_the_timeline(tmp_path: Path) -> None:
    run = tmp_path / "run"
    await faulty_run(run)
    png = tmp_path / "timeline.png"
    note = timeline(run, png)
    assert png.read_bytes().startswith(b"\x89PNG")
    assert "requests" in note


def test_report_timeline_takes_one_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["report", str(tmp_path), str(tmp_path), "--timeline", str(tmp_path / "t.png")])
    assert code == 2
    assert "--timeline: name one run directory" in capsys.readouterr().err


def test_a_directory_without_a_journal_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no journal"):
        timeline(tmp_path, tmp_path / "t.png")


def test_requests_per_minute_are_what_a_per_minute_limit_counts() -> None:
    # 1-s bins: 50 requests every 6 s (a 6-s window filled at once), 500 per minute.
    bursts = [50 if i % 6 == 0 else 0 for i in range(180)]
    tl = Timeline(t0=0.0, bin_s=1, bins=180, requests=bursts, tokens=[0] * 180,
                  rate_limited=[0] * 180, retries={})  # fmt: skip
    rate = tl.per_minute(tl.requests)
    assert max(rate) == 500  # never the 3,000 / min of a burst's own second
    assert rate[59:] == [500.0] * 121
    assert rate[0] == 50  # the first minute counts from the run's start
    # Bins of a minute or more: their mean per minute.
    hours = Timeline(t0=0.0, bin_s=120, bins=2, requests=[1000, 600], tokens=[0, 0],
                     rate_limited=[0, 0], retries={})  # fmt: skip
    assert hours.per_minute(hours.requests) == [500.0, 300.0]


def test_the_timeline_marks_rounds_and_keeps_cache_answers_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(out: Path) -> None:
        args = ["run", "--provider", "sim", "--limit", "6", "--rounds", "3", "--no-live"]
        args += ["--embedder", "lexical", "--cache", str(tmp_path / "c.sqlite3")]
        assert main([*args, "--out", str(out)]) == 0

    run(tmp_path / "sent")
    run(tmp_path / "cached")  # the same run again: every answer is in the cache
    capsys.readouterr()
    for name, from_cache in (("sent", False), ("cached", True)):
        events = journal(tmp_path / name)
        samples = [e for e in events if e["ev"] == "sample"]
        assert samples
        assert all(bool(e.get("cache")) is from_cache for e in samples)
        tl = read_timeline(tmp_path / name)
        assert sum(tl.requests) == (0 if from_cache else len(samples))
        assert sum(tl.cached) == (len(samples) if from_cache else 0)
        # One marker per round the journal holds, numbered as the journal numbers it.
        assert sorted(tl.rounds) == sorted({int(str(e["round"])) for e in samples}) == [1, 2, 3]
        png = tmp_path / f"{name}.png"
        note = timeline(tmp_path / name, png)
        assert png.read_bytes().startswith(b"\x89PNG")
        assert ("0 requests, " in note and "answers from the cache" in note) is from_cache


def test_the_table_the_log_and_the_timeline_number_rounds_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["run", "--provider", "sim", "--limit", "6", "--rounds", "3", "--no-live", "--no-cache"]
    assert main([*args, "--embedder", "lexical", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = orjson.loads((out / "summary.json").read_bytes())
    log = (out / "run.log").read_text()
    marked = read_timeline(out).rounds
    assert [r["round"] for r in summary["rounds"]] == [1, 2, 3]
    for r in summary["rounds"]:
        n, warm = r["round"], "" if r["adaptive"] else " (warm-up)"
        # The per-round table, the live line as it is logged, and the timeline's marker.
        assert any(row.strip().startswith(f"{n}{warm} ") for row in printed.splitlines())
        assert f"round {n}/3: {r['active']} active, {r['requests']} requests" in log
        assert n in marked
    assert summary["rounds"][0]["adaptive"] is False  # round 1 is the warm-up
