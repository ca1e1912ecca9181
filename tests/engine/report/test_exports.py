"""`ttc export`: a run directory (and a `ttc compare` one) as Parquet tables and as an Inspect
log, each read back with its own library and checked against the run's journal and summary."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from fakes import FakeSuite, ScriptedProvider, Step, items

from ttc.engine import ConfigError, Engine, EngineOptions, RunConfig
from ttc.engine._util._extras import require
from ttc.engine.cli import main
from ttc.engine.journal import read_journal
from ttc.engine.report._parquet import rounds_path
from ttc.engine.report._runreport import load_run
from ttc.engine.send import RetryPolicy

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

FLAGS = ["--suite", "reasoning_gym", "--per-task", "1", "--embedder", "lexical", "--workers",
         "0", "--no-live", "--no-cache", "-q", "-k", "2", "--rounds", "3"]  # fmt: skip


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "adpt"
    assert main(["run", *FLAGS, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def compare_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cmp") / "cmp"
    assert main(["compare", *FLAGS, "--out", str(out)]) == 0
    return out


def summary(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((path / "summary.json").read_bytes())
    return data


def journaled(path: Path) -> dict[tuple[int, str, int], dict[str, Any]]:
    """Each sample's last line in the journal, by (round, item, k)."""
    found = {}
    for line in read_journal(path / "journal.jsonl"):
        if line["ev"] == "sample":
            found[(line["round"], line["item"], line["k"])] = line
    return found


SAMPLE_TYPES = {
    "method": pa.string(),
    "question_id": pa.string(),
    "round": pa.int32(),
    "k": pa.int32(),
    "attempts": pa.int32(),
    "demonstrations": pa.list_(pa.string()),
    "ok": pa.bool_(),
    "input_tokens": pa.int64(),
    "output_tokens": pa.int64(),
    "thinking_tokens": pa.int64(),
    "latency_s": pa.float64(),
    "score": pa.float64(),
    "passed": pa.bool_(),
    "cost_usd": pa.float64(),
    "landed_at": pa.timestamp("ms", tz="UTC"),
}


def test_parquet_has_a_typed_row_per_journaled_sample_and_one_per_round(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.parquet"
    assert main(["export", str(run_dir), "--format", "parquet", "--out", str(out)]) == 0
    assert str(rounds_path(out)).endswith("run.rounds.parquet")
    table = pq.read_table(out)
    for name, kind in SAMPLE_TYPES.items():
        assert table.schema.field(name).type == kind, name
    lines = journaled(run_dir)
    assert table.num_rows == len(lines) > 0
    rows = table.to_pylist()
    assert {(r["round"], r["question_id"], r["k"]) for r in rows} == set(lines)
    for r in rows:
        line = lines[(r["round"], r["question_id"], r["k"])]
        assert r["demonstrations"] == line["demos"]
        assert [r["input_tokens"], r["output_tokens"], r["thinking_tokens"]] == line["usage"][:3]
        assert r["method"] == "adpt"
        assert r["passed"] is not None  # every landed sample of a finished run was judged
    assert any(r["demonstrations"] for r in rows)  # adaptive rounds showed demonstrations
    s = summary(run_dir)
    assert sum(r["output_tokens"] for r in rows) == s["output_tokens"]
    assert sum(r["input_tokens"] for r in rows) == s["input_tokens"]
    solved = {r["question_id"] for r in rows if r["passed"]}
    assert len(solved) == s["covered"]
    rounds = pq.read_table(rounds_path(out))
    assert rounds.schema.field("coverage").type == pa.float64()
    assert rounds.schema.field("round").type == pa.int32()
    assert rounds.to_pylist()
    assert [r["round"] for r in rounds.to_pylist()] == [r["round"] for r in s["rounds"]]
    assert [r["output_tokens"] for r in rounds.to_pylist()] == [
        r["output_tokens"] for r in s["rounds"]
    ]
    assert f"{table.num_rows} samples: {out}" in capsys.readouterr().out


def test_a_compare_directory_exports_every_method_with_a_column_naming_it(
    compare_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cmp.parquet"
    assert main(["export", str(compare_dir), "--format", "parquet", "--out", str(out)]) == 0
    rows = pq.read_table(out).to_pylist()
    per_method = Counter(r["method"] for r in rows)
    assert per_method == {
        m: len(journaled(compare_dir / m)) for m in ("unif", "elim", "rand", "adpt")
    }
    rounds = Counter(r["method"] for r in pq.read_table(rounds_path(out)).to_pylist())
    assert rounds == {m: len(summary(compare_dir / m)["rounds"]) for m in per_method}


async def test_errors_and_retries_of_a_sample_are_its_columns(tmp_path: Path) -> None:
    from ttc.engine import RateLimited, Transient
    from ttc.engine.report._parquet import write_parquet
    from ttc.engine.report._samples import read_samples

    script: dict[str, list[Step]] = {
        "q0": [RateLimited("slow down", retry_after=0.001), "right:q0"],
        "q1": [Transient("503")] * 3,
    }
    config = RunConfig(method="elim", rounds=1, verifier_workers=0)
    fast = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01)
    suite = FakeSuite(name="fake", pool=items(2))
    async with Engine(
        ScriptedProvider(script), suite, config, out_dir=tmp_path / "run",
        options=EngineOptions(retry=fast),
    ) as engine:  # fmt: skip
        await engine.run()
    write_parquet([read_samples(tmp_path / "run")], tmp_path / "x.parquet")
    rows = {r["question_id"]: r for r in pq.read_table(tmp_path / "x.parquet").to_pylist()}
    assert rows["q0"]["ok"]
    assert rows["q0"]["retries"] == 1
    assert rows["q0"]["passed"]
    assert not rows["q1"]["ok"]
    assert rows["q1"]["error"] == "transient"
    assert rows["q1"]["retries"] == 2
    assert rows["q1"]["score"] is None
    assert sum(load_run(tmp_path / "run").retries[1].values()) == 3


def test_the_inspect_log_reads_back_with_the_runs_samples_scores_and_usage(
    run_dir: Path, tmp_path: Path
) -> None:
    log_api = pytest.importorskip("inspect_ai.log")
    out = tmp_path / "run.eval"
    assert main(["export", str(run_dir), "--format", "inspect", "--out", str(out)]) == 0
    log = log_api.read_eval_log(str(out))
    s = summary(run_dir)
    assert log.status == "success"
    assert log.eval.task == "ttc/adpt"
    assert log.eval.task_args["k"] == 2
    assert log.eval.task_args["rounds"] == 3
    samples = log.samples
    assert len(samples) == s["questions"]
    covered = sum(x.scores["covered"].value == "C" for x in samples)
    accurate = sum(x.scores["accurate"].value == "C" for x in samples)
    assert (covered, accurate) == (s["covered"], s["accurate"])
    usage = [u for x in samples for u in x.model_usage.values()]
    assert sum(u.input_tokens for u in usage) == s["input_tokens"]
    assert sum(u.output_tokens for u in usage) == s["output_tokens"]
    total = next(iter(log.stats.model_usage.values()))
    assert (total.input_tokens, total.output_tokens) == (s["input_tokens"], s["output_tokens"])
    metrics = {sc.name: sc.metrics["accuracy"].value for sc in log.results.scores}
    assert metrics == {"covered": s["coverage"], "accurate": s["accuracy"]}
    # Each draw is a user turn (the demonstrations it was shown) and the response.
    lines = journaled(run_dir)
    for sample in samples:
        assert sample.input != sample.id  # the question's text, read again from its suite
        draws = [m for m in sample.messages if m.role == "user"]
        assert len(draws) == sum(1 for key in lines if key[1] == sample.id)
        for m in draws:
            line = lines[(m.metadata["round"], sample.id, m.metadata["k"])]
            assert m.metadata["demonstrations"] == line["demos"]
            for demo in line["demos"]:
                assert demo in m.text
        verdicts = sample.scores["covered"].metadata["verdicts"]
        assert any(v["passed"] for v in verdicts) == (sample.scores["covered"].value == "C")


def test_a_compare_directory_is_an_inspect_log_per_method(
    compare_dir: Path, tmp_path: Path
) -> None:
    log_api = pytest.importorskip("inspect_ai.log")
    out = tmp_path / "cmp.eval"
    assert main(["export", str(compare_dir), "--format", "inspect", "--out", str(out)]) == 0
    for method in ("unif", "elim", "rand", "adpt"):
        log = log_api.read_eval_log(str(tmp_path / f"cmp-{method}.eval"))
        assert log.eval.task == f"ttc/{method}"
        assert len(log.samples) == summary(compare_dir / method)["questions"]


def test_an_inspect_log_is_an_eval_or_json_file(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.txt"
    assert main(["export", str(run_dir), "--format", "inspect", "--out", str(out)]) == 2
    assert "an Inspect log is a .eval or a .json file" in capsys.readouterr().err


def test_a_missing_extra_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow: ImportError
    with pytest.raises(ConfigError, match=r"install the 'parquet' extra \(pip install 'ttc\["):
        require("pyarrow", "parquet")
