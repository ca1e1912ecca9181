"""`ttc run` and `ttc compare` as a user runs them: a real subprocess on Reasoning Gym with sim."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from ttc.engine.journal._journal import read_journal

TTC = str(Path(sys.executable).with_name("ttc"))


def ttc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Each test gets its own response cache, so no test sees another's answers; the Hugging Face
    # Hub is off, with an empty cache, and the data directory empty, so a suite given no --data
    # fails alike everywhere.
    env = {**os.environ, "TTC_CACHE_DIR": str(cwd / ".ttc-cache"), "HF_HUB_OFFLINE": "1",
           "HF_HOME": str(cwd / ".hf"), "TTC_DATA_DIR": str(cwd / ".no-data")}  # fmt: skip
    return subprocess.run(
        [TTC, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def check_consistent(run: Path, k: int = 1) -> Any:
    """Every planned sample has exactly one verdict or error, and the totals agree everywhere."""
    summary = load(run / "summary.json")
    results = [orjson.loads(x) for x in (run / "results.jsonl").read_bytes().splitlines()]
    events = list(read_journal(run / "journal.jsonl"))
    samples = [e for e in events if e["ev"] == "sample"]
    keys = Counter((e["round"], e["item"], e["k"]) for e in samples)
    assert max(keys.values()) == 1, "a sample was recorded twice"
    # every answered sample has exactly one verdict, and nothing else has one
    verdicts = {(e["round"], e["item"], e["k"]): e for e in events if e["ev"] == "verdict"}
    assert len(verdicts) == sum(e["ev"] == "verdict" for e in events)
    assert set(verdicts) == {(e["round"], e["item"], e["k"]) for e in samples if e["ok"]}
    for r in summary["rounds"]:
        in_round = [e for e in samples if e["round"] == r["round"]]
        assert len(in_round) == r["active"] * k == r["samples"]
        assert sum(e["usage"][1] for e in in_round if e["ok"]) == r["output_tokens"]
    assert len(results) == summary["questions"]
    assert sum(x["solved"] for x in results) == summary["solved"]
    assert summary["coverage"] == summary["solved"] / summary["questions"]
    for field in ("input_tokens", "output_tokens", "thinking_tokens"):
        assert sum(x[field] for x in results) == summary[field]
    first_pass: dict[str, str] = {}
    for e in sorted(samples, key=lambda e: (e["round"], e["k"])):
        if e["ok"] and verdicts[(e["round"], e["item"], e["k"])]["passed"]:
            first_pass.setdefault(e["item"], e["text"])
    assert {x["id"]: x["response"] for x in results if x["solved"]} == first_pass
    return summary


@pytest.mark.slow
def test_ttc_run_end_to_end_on_40_problems(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = ttc("run", "--per-task", "10", "--limit", "40", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout
    assert "coverage %" in table
    assert "output tokens" in table
    for line in ("1 (warm-up)", "\n          2", "\n          3", "\n          4"):
        assert line in table
    assert "simulated" in table
    summary = check_consistent(out)
    assert summary["questions"] == 40
    assert summary["simulated"] is True
    assert summary["complete"] is True
    assert summary["rounds_completed"] == 4
    assert "machinery" in summary["note"]
    assert [r["round"] for r in summary["rounds"]] == [1, 2, 3, 4]
    actives = [r["active"] for r in summary["rounds"]]
    assert actives == sorted(actives, reverse=True)
    config = load(out / "config.json")
    assert config["config"]["method"] == "adpt"
    assert config["suite"] == "reasoning_gym"
    log = (out / "run.log").read_text()
    assert "embedder" in log
    # adaptive rounds showed demonstrations of solved questions
    events = read_journal(out / "journal.jsonl")
    assert any(e["demos"] for e in events if e["ev"] == "sample" and e["round"] >= 2)


COMPARED_ORDER = ("elim", "unif", "rand", "adpt")  # as `ttc compare` runs them


@pytest.mark.slow
def test_ttc_compare_shares_the_warmup_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    args = ["--per-task", "5", "--embedder", "lexical", "--workers", "1", "--out", str(out)]
    proc = ttc("compare", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # One cache line a method, each saying whose (four unlabelled `cache:` lines before).
    caches = [x for x in proc.stdout.splitlines() if x.startswith("cache")]
    assert [x.split(":")[0] for x in caches] == [f"cache ({m})" for m in COMPARED_ORDER]
    for method in ("unif", "elim", "rand", "adpt"):
        assert method in proc.stdout
        summary = check_consistent(out / method)
        # Only elim paid for the warm-up; the others replayed it from their journals (and report
        # its requests as a run of their own would).
        assert summary["rounds"][0]["requests"] == 20
        assert summary["this_session"]["replayed"] == (0 if method == "elim" else 20)
    warm = {m: load(out / m / "summary.json")["rounds"][0]["solved"] for m in ("elim", "adpt")}
    assert warm["elim"] == warm["adpt"]
    png = (out / "coverage_vs_tokens.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    assert len(png) > 10_000
    assert "simulated" in (out / "compare.txt").read_text()
    # The paper's protocol (the default): unif matched to elim's output tokens.
    assert "protocol: the paper's" in proc.stdout
    unif = load(out / "unif" / "config.json")["config"]
    assert unif["match_tokens"] == load(out / "elim" / "summary.json")["output_tokens"]


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--rounds", "0"], "--rounds"),
        (["-k", "two"], "-k"),
        (["--warmup", "7"], "--warmup"),
        (["--method", "best"], "--method"),
        (["--rpm", "-5"], "--rpm"),
        (["--neighbours", "near"], "--neighbours"),
        (["--timeout", "nan"], "--timeout"),
        (["--top-p", "5"], "--top-p"),
        (["--temperature", "inf"], "--temperature"),
        (["--resume"], "--resume"),
        (["--suite", "math500"], "--data"),
        (["--suite", "gpqa", "--data", "/no/such/file.csv"], "--data"),
        (["--data", "x.jsonl"], "--data"),
        (["--suite", "custom", "--data", "/etc/hostname"], "--suite-config"),
        (["--lcb-start", "yesterday"], "--lcb-start"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_flag(
    tmp_path: Path, args: list[str], flag: str
) -> None:
    out = [] if "--resume" in args else ["--out", str(tmp_path / "x")]
    proc = ttc("run", *args, *out, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert flag in lines[0]
    assert lines[0].startswith("ttc: error:")
    assert not (tmp_path / "x").exists()


def test_an_out_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.write_text("not a run")
    for command in ("run", "compare"):
        proc = ttc(command, "--per-task", "1", "--out", str(target), cwd=tmp_path)
        assert proc.returncode in (1, 2)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert str(target) in lines[0]
    assert target.read_text() == "not a run"


@pytest.mark.slow
def test_ttc_run_resume_goes_on_and_sends_nothing_twice(tmp_path: Path) -> None:
    out = tmp_path / "run"
    common = ["--per-task", "3", "--embedder", "lexical", "--workers", "1", "--out", str(out)]
    assert ttc("run", "--rounds", "2", *common, cwd=tmp_path).returncode == 0
    finished = (out / "summary.json").read_bytes()
    samples = sum(e["ev"] == "sample" for e in read_journal(out / "journal.jsonl"))
    refused = ttc("run", "--rounds", "2", *common, cwd=tmp_path)
    assert refused.returncode == 2
    assert "--resume" in refused.stderr
    wrong = ttc("run", "--rounds", "2", "--seed", "9", "--resume", *common, cwd=tmp_path)
    assert wrong.returncode == 2
    assert "--seed" in wrong.stderr
    # --rounds is part of the experiment too: a finished run stays as it was
    again = ttc("run", "--rounds", "2", "--resume", *common, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    summary = check_consistent_resumed(out)
    assert summary["complete"] is True
    # Nothing was sent again, and with nothing new done the reports stand as they were.
    assert sum(e["ev"] == "sample" for e in read_journal(out / "journal.jsonl")) == samples
    assert (out / "summary.json").read_bytes() == finished


def check_consistent_resumed(run: Path) -> Any:
    summary = load(run / "summary.json")
    results = [orjson.loads(x) for x in (run / "results.jsonl").read_bytes().splitlines()]
    assert sum(x["output_tokens"] for x in results) == summary["output_tokens"]
    assert sum(x["solved"] for x in results) == summary["solved"]
    return summary


def test_ttc_verify_rescores_responses_from_elsewhere(tmp_path: Path) -> None:
    from ttc.adapters import ReasoningGymSuite

    suite = ReasoningGymSuite(per_task=2)
    chosen = suite.items()[:4]
    lines = [{"id": it.id, "response": f"so \\boxed{{{it.reference}}}"} for it in chosen]
    lines.append({"id": chosen[0].id, "response": "I think \\boxed{definitely wrong}"})
    lines.append({"id": chosen[1].id, "text": "no boxed answer at all"})
    responses = tmp_path / "r.jsonl"
    responses.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    proc = ttc("verify", "--per-task", "2", "--responses", str(responses), "--workers", "1",
               cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "4 passed" in proc.stdout
    verdicts = [orjson.loads(x) for x in (tmp_path / "r.verdicts.jsonl").read_bytes().splitlines()]
    assert [v["passed"] for v in verdicts] == [True, True, True, True, False, False]
    assert [v["line"] for v in verdicts] == [1, 2, 3, 4, 5, 6]
    assert verdicts[4]["answer"] == "definitely wrong"


@pytest.mark.parametrize(
    ("line", "field"),
    [(b"{not json\n", "malformed"), (b'{"response": "x"}\n', "'id'"),
     (b'{"id": "decimal_arithmetic/0"}\n', "'response'"),
     (b'{"id": "nope", "response": "x"}\n', "'id'")],
)  # fmt: skip
def test_ttc_verify_names_the_bad_line(tmp_path: Path, line: bytes, field: str) -> None:
    responses = tmp_path / "r.jsonl"
    good = b'{"id": "decimal_arithmetic/0", "response": "\\\\boxed{1}"}\n'
    responses.write_bytes(good + line)
    proc = ttc("verify", "--per-task", "1", "--responses", str(responses), cwd=tmp_path)
    assert proc.returncode == 2
    [message] = proc.stderr.strip().splitlines()
    assert f"{responses}:2" in message
    assert field in message
    assert not (tmp_path / "r.verdicts.jsonl").exists()


SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("suite", "data", "extra"),
    [
        ("math500", SHARED / "math500" / "test.jsonl", []),
        ("minerva", SHARED / "minerva_math" / "test.jsonl", []),
        ("gpqa", SHARED / "gpqa_diamond" / "gpqa_diamond.jsonl.gz", []),
        ("livecodebench", ROOT / "tests" / "data" / "lcb_fixture.jsonl",
         ["--lcb-start", "2000-01-01", "--lcb-end", "2100-01-01"]),
        ("custom", ROOT / "examples" / "custom" / "word_problems.jsonl",
         ["--suite-config", str(ROOT / "examples" / "custom" / "suite.toml")]),
    ],
)  # fmt: skip
def test_ttc_run_on_every_data_suite(
    tmp_path: Path, suite: str, data: Path, extra: list[str]
) -> None:
    if not data.exists():
        pytest.skip(f"{data} is not on this machine")
    out = tmp_path / suite
    args = ["--suite", suite, "--data", str(data), "--limit", "12", "--rounds", "3",
            "--embedder", "lexical", "--workers", "1", "--out", str(out), *extra]  # fmt: skip
    proc = ttc("run", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = check_consistent(out)
    assert summary["suite"] == ("word_problems" if suite == "custom" else suite)
    assert summary["questions"] == min(12, summary["questions"])
    assert summary["solved"] > 0


def test_dry_run_prints_the_plans_worst_case_cost_and_sends_nothing(tmp_path: Path) -> None:
    # No key, no server: nothing is built that could send, and no directory is written.
    args = ["run", "--provider", "openai", "--model", "gpt-4.1-mini", "--limit", "5", "-k", "2"]
    args += ["--max-tokens", "100", "--dry-run", "--out", str(tmp_path / "run")]
    proc = ttc(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("round 1: 10 requests, at most ")
    assert "1,000 output tokens" in lines[0]
    (plan,) = [x for x in lines if x.startswith("plan (adpt, 5 questions, K=2, 4 rounds): ")]
    assert "40 requests" in plan
    assert "4,000 output tokens" in plan
    assert "at most $" in plan
    assert lines[-1] == "dry run: nothing was sent"
    assert not (tmp_path / "run").exists()
