"""The run directory: consistent files, replay from the journal, a torn last line tolerated."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from fakes import FakeSuite, ScriptedProvider, Step, items

from ttc.engine import ConfigError, DataError, Engine, RunConfig, RunResult
from ttc.engine.journal._events import RunStarted
from ttc.engine.journal._frames import MAGIC, Deflater, compact
from ttc.engine.journal._journal import Journal, journal_text, read_journal
from ttc.engine.run import run_begun

SCRIPT: dict[str, list[Step]] = {
    "q0": ["right:q0"],
    "q1": ["wrong", "right:q1"],
    "q3": ["wrong", "wrong", "right:q3"],
}


async def run(provider: ScriptedProvider, out: Path, resume: bool = False) -> RunResult:
    config = RunConfig(method="elim", rounds=3, verifier_workers=0)
    suite = FakeSuite(pool=items(5))
    async with Engine(provider, suite, config, out_dir=out, resume=resume) as engine:
        return await engine.run()


async def test_run_directory_is_consistent(tmp_path: Path) -> None:
    result = await run(ScriptedProvider(dict(SCRIPT)), tmp_path)
    config = orjson.loads((tmp_path / "config.json").read_bytes())
    assert config["config"]["method"] == "elim"
    assert config["items"] == 5
    assert len(config["items_sha256"]) == 64
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    results = [orjson.loads(x) for x in (tmp_path / "results.jsonl").read_bytes().splitlines()]
    events = list(read_journal(tmp_path / "journal.jsonl"))
    samples = [e for e in events if e["ev"] == "sample"]
    assert summary["solved"] == sum(r["solved"] for r in results) == result.solved == 3
    assert summary["output_tokens"] == sum(r["output_tokens"] for r in results)
    assert summary["output_tokens"] == sum(e["usage"][1] for e in samples)
    assert sum(r["samples"] for r in results) == len(samples) == 5 + 4 + 3
    assert [r["coverage"] for r in summary["rounds"]] == [0.2, 0.4, 0.6]
    assert {r["id"]: r["response"] for r in results if r["solved"]} == {
        "q0": "right:q0",
        "q1": "right:q1",
        "q3": "right:q3",
    }
    assert summary["wall_s"] >= 0


async def test_resume_replays_the_journal_and_sends_nothing(tmp_path: Path) -> None:
    first = await run(ScriptedProvider(dict(SCRIPT)), tmp_path)
    again = ScriptedProvider(dict(SCRIPT))
    second = await run(again, tmp_path, resume=True)
    assert again.history == []
    assert [s.solved for s in second.rounds] == [s.solved for s in first.rounds]
    assert second.usage == first.usage
    assert [s.replayed for s in second.rounds] == [5, 4, 3]


async def test_resume_after_a_torn_line_sends_only_what_is_missing(tmp_path: Path) -> None:
    await run(ScriptedProvider(dict(SCRIPT)), tmp_path)
    path = tmp_path / "journal.jsonl"
    lines = list(journal_text(path))  # written again plain: a journal from before
    # Keep round 1 only, and tear the first line of round 2 in half.
    r1 = [ln for ln in lines if orjson.loads(ln).get("round", 1) == 1]
    r2_first = next(ln for ln in lines if b'"round":2' in ln and b'"sample"' in ln)
    path.write_bytes(b"".join(r1) + r2_first[: len(r2_first) // 2])
    provider = ScriptedProvider({"q1": ["right:q1"], "q3": ["wrong", "right:q3"]})
    result = await run(provider, tmp_path, resume=True)
    # Round 1 came from the journal; rounds 2 and 3 were sent.
    assert result.rounds[0].replayed == 5
    assert result.rounds[0].sent == 0
    assert result.rounds[0].requests == 5  # counted as the uninterrupted run counted them
    assert result.rounds[1].sent == result.rounds[1].requests == 4
    assert result.solved == 3
    list(read_journal(path))  # the torn half-line was cut, the journal reads cleanly
    assert path.read_bytes().startswith(b"{")  # a journal from before goes on plain


async def test_resume_after_a_kill_mid_frame_sends_only_what_is_missing(tmp_path: Path) -> None:
    await run(ScriptedProvider(dict(SCRIPT)), tmp_path)
    path = tmp_path / "journal.jsonl"
    assert path.read_bytes().startswith(MAGIC)  # a run writes its journal compact
    lines = list(journal_text(path))
    # Killed in the middle of the write of round 2's first sample (its own frame: a frame a
    # write), so the journal holds round 1 whole and a torn frame.
    r2 = next(i for i, ln in enumerate(lines) if b'"ev":"sample","round":2' in ln)
    written = compact(b"".join(lines[:r2]))
    torn = Deflater().frame(lines[r2])
    path.write_bytes(written + torn[: len(torn) // 2])
    provider = ScriptedProvider({"q1": ["right:q1"], "q3": ["wrong", "right:q3"]})
    result = await run(provider, tmp_path, resume=True)
    assert result.rounds[0].sent == 0
    assert result.rounds[1].sent == result.rounds[1].requests == 4
    assert result.solved == 3
    assert path.read_bytes().startswith(written)  # cut after the whole frames, then gone on
    assert sum(b'"ev":"start"' in ln for ln in journal_text(path)) == 2


async def test_a_second_run_into_the_same_directory_is_refused(tmp_path: Path) -> None:
    await run(ScriptedProvider(dict(SCRIPT)), tmp_path)
    with pytest.raises(ConfigError, match="--out"):
        await run(ScriptedProvider(dict(SCRIPT)), tmp_path)


def test_corrupt_middle_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        journal.append(RunStarted(resumed=False, t=0.0))
    with path.open("ab") as fh:
        fh.write(b"{not json\n")
        fh.write(b'{"ev":"round"}\n')
    with pytest.raises(DataError, match=r"journal.jsonl:2"):
        list(read_journal(path))


async def test_resume_refuses_a_different_experiment(tmp_path: Path) -> None:
    await run(ScriptedProvider(dict(SCRIPT)), tmp_path)
    suite = FakeSuite(pool=items(5))
    other = RunConfig(method="elim", rounds=3, seed=7, verifier_workers=0)
    engine = Engine(ScriptedProvider(), suite, other, out_dir=tmp_path, resume=True)
    with pytest.raises(ConfigError, match="--seed"):
        await engine.run()
    # Limits may change on resume.
    faster = RunConfig(method="elim", rounds=3, concurrency=3, verifier_workers=0)
    provider = ScriptedProvider()
    async with Engine(provider, suite, faster, out_dir=tmp_path, resume=True) as engine:
        await engine.run()
    assert provider.history == []


async def test_resume_of_fewer_questions_says_how_many_in_words(tmp_path: Path) -> None:
    await run(ScriptedProvider(dict(SCRIPT)), tmp_path)
    config = RunConfig(method="elim", rounds=3, verifier_workers=0)
    fewer = FakeSuite(pool=items(4))
    engine = Engine(ScriptedProvider(), fewer, config, out_dir=tmp_path, resume=True)
    with pytest.raises(ConfigError) as refused:
        await engine.run()
    # It read "had a different items (5, now 4)".
    assert "had a different number of questions: 5, now 4" in str(refused.value)


async def test_resume_sends_again_the_samples_that_failed(tmp_path: Path) -> None:
    from ttc.engine import Fatal

    failing = ScriptedProvider({"q0": [Fatal("bad key")], "q1": [Fatal("bad key")]})
    first = await run(failing, tmp_path)
    assert first.rounds[0].errors == 2
    fixed = ScriptedProvider({"q0": ["right:q0"], "q1": ["right:q1"]})
    second = await run(fixed, tmp_path, resume=True)
    # Round 1's two failures were re-sent (they were never paid for); everything else the
    # journal held was replayed, so nothing else was sent.
    assert dict(fixed.calls) == {"q0": 1, "q1": 1}
    assert second.rounds[0].sent == 2
    assert second.rounds[0].replayed == 3
    assert second.rounds[0].requests == 5
    assert second.solved == 2


async def test_a_landed_sample_without_verdict_is_judged_not_bought_again(tmp_path: Path) -> None:
    first = await run(ScriptedProvider(dict(SCRIPT)), tmp_path)
    path = tmp_path / "journal.jsonl"
    # The run stopped after round 3's samples landed but before any was judged.
    kept = [
        ln
        for ln in journal_text(path)
        if not (orjson.loads(ln).get("round") == 3 and orjson.loads(ln)["ev"] != "sample")
    ]
    path.write_bytes(b"".join(kept))
    provider = ScriptedProvider()
    second = await run(provider, tmp_path, resume=True)
    assert provider.history == []
    assert second.response("q3") == first.response("q3") == "right:q3"
    assert second.usage == first.usage
    rejudged = [e for e in read_journal(path) if e["ev"] == "verdict" and e["round"] == 3]
    assert len(rejudged) == 3


async def test_an_interrupted_run_reports_what_it_did(tmp_path: Path) -> None:
    import asyncio

    slow: dict[str, list[Step]] = {f"q{i}": [(0.0 if i < 3 else 30.0, "wrong")] for i in range(5)}
    config = RunConfig(method="elim", rounds=3, verifier_workers=0)
    engine = Engine(ScriptedProvider(slow), FakeSuite(pool=items(5)), config, out_dir=tmp_path)
    task = asyncio.create_task(engine.run())
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    results = [orjson.loads(x) for x in (tmp_path / "results.jsonl").read_bytes().splitlines()]
    assert summary["complete"] is False
    assert summary["rounds"][0]["complete"] is False
    assert summary["rounds"][0]["samples"] == 3 == sum(r["samples"] for r in results)
    assert summary["output_tokens"] == sum(r["output_tokens"] for r in results) == 30
    landed = [e for e in read_journal(tmp_path / "journal.jsonl") if e["ev"] == "sample"]
    assert len(landed) == 3


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of a directory: its bytes and its modification time."""
    return {
        str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize(
    ("spoil", "words"),
    [
        (lambda d: (d / "journal.jsonl").unlink(), "journal.jsonl is missing"),
        (lambda d: (d / "journal.jsonl").write_bytes(b""), "journal.jsonl is empty"),
    ],
)
async def test_a_resume_with_no_journal_to_go_on_from_is_refused_touching_nothing(
    tmp_path: Path, spoil: Callable[[Path], object], words: str
) -> None:
    await run(ScriptedProvider(dict(SCRIPT)), tmp_path)
    spoil(tmp_path)
    before = snapshot(tmp_path)
    provider = ScriptedProvider(dict(SCRIPT))
    with pytest.raises(ConfigError) as caught:
        await run(provider, tmp_path, resume=True)
    assert str(caught.value) == f"nothing to resume: {tmp_path / words}"
    assert provider.history == []
    assert snapshot(tmp_path) == before


async def test_a_resume_of_a_directory_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "typo"
    with pytest.raises(ConfigError, match=r"nothing to resume: .*typo/journal\.jsonl is missing"):
        await run(ScriptedProvider(), out, resume=True)
    assert not out.exists()
    assert not run_begun(out)
    await run(ScriptedProvider(dict(SCRIPT)), out)  # a fresh run needs no journal
    assert run_begun(out)


@pytest.mark.parametrize(
    ("spoil", "where"),
    [
        (lambda d: _truncate(d / "config.json", 40), r"config\.json:\d+: malformed JSON \("),
        (lambda d: (d / "config.json").write_text('{"config": 7}'), "field 'config'"),
        (lambda d: _replace_line(d / "journal.jsonl", 4, b"{garbage"), r"journal\.jsonl:4: "),
        (lambda d: _replace_line(d / "journal.jsonl", 2, b"[" * 5000), r"journal\.jsonl:2: nested"),
    ],
)
async def test_a_corrupt_config_or_journal_refuses_the_resume_touching_nothing(
    tmp_path: Path, spoil: Callable[[Path], object], where: str
) -> None:
    await run(ScriptedProvider(dict(SCRIPT)), tmp_path)
    spoil(tmp_path)
    before = snapshot(tmp_path)
    provider = ScriptedProvider(dict(SCRIPT))
    with pytest.raises(DataError, match=where) as caught:
        await run(provider, tmp_path, resume=True)
    assert "\n" not in str(caught.value)
    assert provider.history == []
    assert snapshot(tmp_path) == before  # the lock's file included: it names no new holder


def _truncate(path: Path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size])


def _replace_line(path: Path, lineno: int, line: bytes) -> None:
    lines = [raw.rstrip(b"\n") for raw in journal_text(path)]  # written again plain
    lines[lineno - 1] = line
    path.write_bytes(b"\n".join(lines) + b"\n")
