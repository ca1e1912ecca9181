"""Batch mode in the engine, with a fake Batch API (`FakeBatches`: a vendor's batches in memory,
answered by a scripted model when polled enough): a batch run lands what a synchronous run
lands, at the batch rate; a resume after a kill between a batch's creation and its journal line
finds the batch by its tag instead of making a second; a poll that fails is polled again;
--max-cost stops before a batch that would pass it; the price table's rates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from fakes import FakeSuite, ScriptedProvider, items

from ttc.engine import (
    BatchAPI,
    Engine,
    EngineOptions,
    Price,
    Request,
    RunConfig,
    StopKind,
    Transient,
    Usage,
)
from ttc.engine.contract import BatchResult, BatchStatus
from ttc.engine.journal import SampleLanded, decode, encode, journal_text, read_journal
from ttc.engine.send._prices import PRICES, parse_batch_discount
from ttc.retrieval import LexicalEmbedder

N = 8
PRICE = Price(1.0, 1.0, 1.0)


def _script() -> dict[str, list[str | Any]]:
    return {f"q{i}": [f"right:q{i}"] for i in range(4)} | {
        f"q{i}": ["wrong", f"right:q{i}"] for i in (4, 5)
    }


class FakeBatches(BatchAPI):
    """Batches in memory; a batch completes on its second poll, answered by `model`."""

    def __init__(self, model: ScriptedProvider) -> None:
        self.model = model
        self.poll_s = (0.001, 0.01)
        self.lines: dict[str, Request] = {}
        self.files: dict[str, list[str]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.crash_on_create = False
        self.crash_before_create = False  # the process dies after the upload, before create
        self.crash_at: int | None = None  # the number of the create call that dies
        self.poll_failures = 0
        self.fail_once: set[str] = set()  # custom ids whose first batch fails them

    def encode(self, custom_id: str, request: Request) -> bytes:
        self.lines[custom_id] = request
        return custom_id.encode() + b"\n"

    async def upload(self, data: bytes, name: str) -> str:
        file_id = f"file-{len(self.files)}"
        self.files[file_id] = data.decode().split()
        return file_id

    async def create(self, file_id: str, tag: str) -> BatchStatus:
        if self.crash_before_create:
            self.crash_before_create = False
            raise RuntimeError("killed after the upload, before the batch")
        batch_id = f"batch-{len(self.batches)}"
        self.batches[batch_id] = {"tag": tag, "ids": self.files[file_id], "polls": 0}
        if self.crash_on_create or self.crash_at == len(self.batches):
            # the process dies before the batch's id is journaled
            self.crash_on_create, self.crash_at = False, None
            raise RuntimeError("killed after the batch was created")
        return BatchStatus(batch_id, "validating", len(self.files[file_id]))

    async def poll(self, batch_id: str) -> BatchStatus:
        if self.poll_failures:
            self.poll_failures -= 1
            raise Transient("the poll itself failed")
        batch = self.batches[batch_id]
        batch["polls"] += 1
        status = "completed" if batch["polls"] >= 2 else "in_progress"
        return BatchStatus(batch_id, status, len(batch["ids"]))

    async def find(self, tag: str) -> BatchStatus | None:
        for batch_id, batch in self.batches.items():
            if batch["tag"] == tag:
                return BatchStatus(batch_id, "in_progress", len(batch["ids"]))
        return None

    async def results(self, status: BatchStatus, requests: Any) -> list[BatchResult]:
        batch = self.batches[status.id]
        if "results" in batch:  # a vendor's output file reads the same every time
            return list(batch["results"])
        found = batch["results"] = []
        for i in batch["ids"]:
            if i in self.fail_once:
                self.fail_once.discard(i)
                found.append(BatchResult(i, None, Transient("failed in the batch"), "failed"))
            else:
                found.append(BatchResult(i, await self.model.generate(self.lines[i])))
        return found


async def _run(out: Path, provider: ScriptedProvider, *, resume: bool = False,
               **config: Any) -> Any:  # fmt: skip
    cfg = RunConfig(method="adpt", rounds=3, verifier_workers=0, **config)
    engine = Engine(provider, FakeSuite(pool=items(N)), cfg, out_dir=out, resume=resume,
                    embedder=LexicalEmbedder(), options=EngineOptions(price=PRICE))  # fmt: skip
    async with engine:
        return await engine.run()


def _load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def _results(run: Path) -> list[Any]:
    return [orjson.loads(x) for x in (run / "results.jsonl").read_bytes().splitlines()]


def _batched() -> tuple[ScriptedProvider, FakeBatches]:
    provider = ScriptedProvider(_script())
    fake = FakeBatches(ScriptedProvider(_script()))
    provider.batch = fake
    return provider, fake


async def test_a_batch_run_lands_what_a_synchronous_run_does_at_half_price(
    tmp_path: Path,
) -> None:
    await _run(tmp_path / "sync", ScriptedProvider(_script()))
    provider, fake = _batched()
    fake.poll_failures = 2  # transient poll errors are waited out
    result = await _run(tmp_path / "batch", provider)
    assert result.complete
    assert provider.history == []  # nothing went through the synchronous path
    assert _results(tmp_path / "batch") == _results(tmp_path / "sync")
    sync, batch = (
        _load(tmp_path / "sync" / "summary.json"),
        _load(tmp_path / "batch" / "summary.json"),
    )
    assert batch["input_tokens"] == sync["input_tokens"]
    assert batch["cost_usd"] == pytest.approx(sync["cost_usd"] / 2)
    assert len(fake.batches) == 3  # one a round
    events = list(read_journal(tmp_path / "batch" / "journal.jsonl"))
    kinds = [e["ev"] for e in events]
    assert kinds.count("batch_file") == kinds.count("batch") == 3
    assert all(e.get("batch") for e in events if e["ev"] == "sample")


async def test_a_batch_whose_id_was_never_journaled_is_found_by_its_tag(tmp_path: Path) -> None:
    await _run(tmp_path / "reference", ScriptedProvider(_script()))
    provider, fake = _batched()
    fake.crash_on_create = True
    with pytest.raises(RuntimeError, match="killed"):
        await _run(tmp_path / "run", provider)
    journal = b"".join(journal_text(tmp_path / "run" / "journal.jsonl"))
    assert b'"ev":"batch_file"' in journal
    assert b'"ev":"batch"' not in journal
    resumed = ScriptedProvider(_script())
    resumed.batch = fake  # the vendor's batches outlive the process
    result = await _run(tmp_path / "run", resumed, resume=True)
    assert result.complete
    assert len(fake.batches) == 3  # round 1's batch was adopted, not made again
    assert resumed.history == []
    assert _results(tmp_path / "run") == _results(tmp_path / "reference")


async def test_a_file_uploaded_before_a_kill_is_not_uploaded_again(tmp_path: Path) -> None:
    await _run(tmp_path / "reference", ScriptedProvider(_script()))
    provider, fake = _batched()
    fake.crash_before_create = True
    with pytest.raises(RuntimeError, match="killed"):
        await _run(tmp_path / "run", provider)
    assert (len(fake.files), len(fake.batches)) == (1, 0)  # uploaded (journaled), no batch
    resumed = ScriptedProvider(_script())
    resumed.batch = fake
    result = await _run(tmp_path / "run", resumed, resume=True)
    assert result.complete
    assert len(fake.files) == len(fake.batches) == 3  # round 1's file used, not sent again
    assert next(iter(fake.batches.values()))["ids"] == fake.files["file-0"]
    assert _results(tmp_path / "run") == _results(tmp_path / "reference")


async def test_a_resend_batch_whose_id_was_never_journaled_is_found_by_its_tag(
    tmp_path: Path,
) -> None:
    await _run(tmp_path / "reference", ScriptedProvider(_script()))
    provider, fake = _batched()
    fake.fail_once = {"t1-r2-k0", "t1-r5-k0"}
    fake.crash_at = 2  # round 1's re-send batch: made, then the process dies
    with pytest.raises(RuntimeError, match="killed"):
        await _run(tmp_path / "run", provider)
    resumed = ScriptedProvider(_script())
    resumed.batch = fake
    result = await _run(tmp_path / "run", resumed, resume=True)
    assert result.complete
    assert len(fake.batches) == 4  # 3 rounds and one re-send: none made twice
    assert resumed.history == []
    assert _results(tmp_path / "run") == _results(tmp_path / "reference")
    events = list(read_journal(tmp_path / "run" / "journal.jsonl"))
    resent = [e["resent"] for e in events if e["ev"] == "batch_state" and e.get("resent")]
    assert resent == [{"failed": 2}]  # counted once, by the session that saw it


async def test_max_cost_stops_before_a_batch_that_would_pass_it(tmp_path: Path) -> None:
    provider, fake = _batched()
    result = await _run(tmp_path, provider, max_cost_usd=1e-6)
    assert fake.batches == {}  # nothing submitted
    assert result.stopped is not None
    assert result.stopped.kind is StopKind.BUDGET
    assert "would be passed by the next batch" in str(result.stopped)


def test_prices_batch_and_cached_rates() -> None:
    price = Price(2.0, 8.0, 8.0, cached_input=0.5)
    usage = Usage(1_000_000, 1_000_000, 0, cached_tokens=400_000)
    # 600k input at 2, 400k cached at 0.5, 1M output at 8
    assert price.cost(usage) == pytest.approx(1.2 + 0.2 + 8.0)
    assert price.cost(usage.bought_in_batch()) == pytest.approx((1.2 + 0.2 + 8.0) / 2)
    mixed = Usage(1_000_000, 0, 0) + Usage(1_000_000, 0, 0).bought_in_batch()
    assert price.cost(mixed) == pytest.approx(2.0 + 1.0)
    assert price.with_batch_discount(0.25).cost(Usage(0, 1_000_000).bought_in_batch()) == 6.0
    assert all(p.cached_input is not None and p.batch == 0.5 for p in PRICES.values())
    assert parse_batch_discount("0.5") == 0.5
    with pytest.raises(Exception, match="--batch-discount"):
        parse_batch_discount("1.5")


def test_a_sample_bought_in_a_batch_keeps_its_rate_in_the_journal() -> None:
    usage = Usage(100, 20, 5, cached_tokens=64).bought_in_batch()
    event = SampleLanded(2, "q1", 0, "text", usage)
    line = encode(event)
    assert line["usage"] == [100, 20, 5, 64]
    assert line["batch"] is True
    back = decode(line)
    assert isinstance(back, SampleLanded)
    assert back.usage == usage
    plain = decode(encode(SampleLanded(2, "q1", 0, "t", Usage(1, 2, 3))))
    assert isinstance(plain, SampleLanded)
    assert plain.usage.batch is None


def test_batch_flags_refuse_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ttc.engine.cli._main import main

    with pytest.raises(SystemExit) as exited:
        main(["run", "--batch-discount", "2", "--out", str(tmp_path / "a")])
    assert exited.value.code == 2
    assert "--batch-discount: expected a number in [0, 1)" in capsys.readouterr().err
    code = main(["run", "--batch", "--limit", "4", "--no-cache", "--out", str(tmp_path / "b")])
    assert code == 2
    err = capsys.readouterr().err
    assert "--batch: the sim provider has no Batch API" in err
    assert "Traceback" not in err
    assert not (tmp_path / "b" / "journal.jsonl").exists()


def test_azure_batch_is_refused_before_anything_is_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ttc.engine.cli._main import main

    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "sk-test")
    argv = ["run", "--provider", "azure", "--model", "dep", "--base-url", "http://127.0.0.1:9"]
    code = main([*argv, "--batch", "--limit", "4", "--no-cache", "--out", str(tmp_path / "a")])
    assert code == 2
    err = capsys.readouterr().err
    assert "--batch: Azure OpenAI's Batch API is not supported" in err
    assert not (tmp_path / "a" / "journal.jsonl").exists()
