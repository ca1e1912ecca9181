"""Overnight runs: killed at random points and resumed, the cache, budgets, `ttc report`."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from ttc.engine.journal import journal_text, read_journal

TTC = str(Path(sys.executable).with_name("ttc"))
COMMON = ["--per-task", "8", "--embedder", "lexical", "--workers", "1", "--sim-latency",
          "0.1", "--concurrency", "2", "-q"]  # fmt: skip


def env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "TTC_CACHE_DIR": str(tmp / ".ttc-cache")}


def ttc(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TTC, *args], cwd=tmp, env=env(tmp), capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def children(pid: int) -> list[int]:
    """Live processes whose parent is `pid` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    """Whether `pid` still runs: a zombie has ended (killed, it waits only to be reaped by
    whoever adopted it, which a loaded machine may do late)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def gone(pids: list[int], within_s: float = 60.0) -> bool:
    """Whether every one of `pids` ends within `within_s` (a bound on a loaded machine: they
    are gone at once on an idle one)."""
    deadline = time.monotonic() + within_s
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def outcome(run: Path) -> tuple[Any, ...]:
    """What must not depend on how often the run was stopped: per question and per round."""
    results = [orjson.loads(x) for x in (run / "results.jsonl").read_bytes().splitlines()]
    per_question = sorted(
        (r["id"], r["solved"], r["response"], r["solved_round"], r["samples"],
         r["input_tokens"], r["output_tokens"], r["thinking_tokens"]) for r in results
    )  # fmt: skip
    summary = load(run / "summary.json")
    per_round = [
        (r["round"], r["active"], r["samples"], r["solved"], r["input_tokens"], r["output_tokens"])
        for r in summary["rounds"]
    ]
    totals = (summary["solved"], summary["input_tokens"], summary["output_tokens"])
    return per_question, per_round, totals


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary less what differs between sessions of the same run: wall times (and the rates
    over them), and what this process itself sent or replayed from the journal."""
    timed = {"wall_s", "achieved_rpm", "achieved_tpm", "this_session"}
    rest = {k: v for k, v in summary.items() if k not in timed}
    rest["rounds"] = [{k: v for k, v in r.items() if k != "wall_s"} for r in summary["rounds"]]
    return rest


def sample_lines(run: Path) -> int:
    """Sample events in the run's journal so far."""
    path = run / "journal.jsonl"
    return sum(b'"ev":"sample"' in line for line in journal_text(path))


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    assert ttc(tmp_path, "run", *COMMON, "--no-cache", "--out", str(reference)).returncode == 0
    killed = tmp_path / "killed"
    rng = random.Random(20261121)
    command = [TTC, "run", *COMMON, "--no-cache", "--out", str(killed)]
    mid_run_kills = 0
    for _attempt in range(25):
        before = sample_lines(killed)
        proc = subprocess.Popen(command, cwd=tmp_path, env=env(tmp_path),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        # Kill once this attempt has bought something (start-up takes seconds on a loaded
        # machine, and a kill before the first sample would prove nothing), at a random point.
        deadline = time.monotonic() + 120
        while proc.poll() is None and sample_lines(killed) == before:
            assert time.monotonic() < deadline, "the run made no progress in 120 s"
            time.sleep(0.02)
        try:
            proc.wait(timeout=rng.uniform(0.0, 1.5))
        except subprocess.TimeoutExpired:
            workers = children(proc.pid)
            proc.kill()  # SIGKILL: no handler, no flush, no clean-up
            proc.wait()
            assert gone(workers), "verifier processes outlived the killed run"
            summary = killed / "summary.json"
            mid_run_kills += not summary.exists() or not load(summary)["complete"]
        if (killed / "summary.json").exists() and load(killed / "summary.json")["complete"]:
            break
        command = [TTC, "resume", str(killed)]
    assert load(killed / "summary.json")["complete"] is True
    assert mid_run_kills >= 2, "the kills should land while the run is working"
    assert outcome(killed) == outcome(reference)
    # The whole summary, field by field: a resumed round counts the requests of every session.
    assert comparable(load(killed / "summary.json")) == comparable(load(reference / "summary.json"))
    # every sample of the journal was bought once: no key has two responses
    samples = list(read_journal(killed / "journal.jsonl"))
    keys = [(e["round"], e["item"], e["k"]) for e in samples if e["ev"] == "sample" and e["ok"]]
    assert len(keys) == len(set(keys))


@pytest.mark.slow
def test_a_second_run_with_the_cache_sends_no_request(tmp_path: Path) -> None:
    fast = ["--per-task", "4", "--embedder", "lexical", "--workers", "1", "-q"]
    first = ttc(tmp_path, "run", *fast, "--out", str(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    assert "0 answered from the cache" in first.stdout
    second = ttc(tmp_path, "run", *fast, "--out", str(tmp_path / "b"))
    assert second.returncode == 0, second.stderr
    assert "cache: 0 requests sent" in second.stdout
    assert outcome(tmp_path / "a") == outcome(tmp_path / "b")
    # another method shares the warm-up: only its adaptive rounds are sent
    elim = ttc(tmp_path, "run", *fast, "--method", "elim", "--out", str(tmp_path / "c"))
    warm = load(tmp_path / "c" / "summary.json")["rounds"][0]["requests"]
    sent = int(elim.stdout.split("cache: ")[1].split(" requests sent")[0])
    total = sum(r["requests"] for r in load(tmp_path / "c" / "summary.json")["rounds"])
    assert sent == total - warm
    # --no-cache sends everything
    nocache = ttc(tmp_path, "run", *fast, "--no-cache", "--out", str(tmp_path / "d"))
    assert "cache:" not in nocache.stdout


def test_budget_stops_cleanly_and_resume_finishes(tmp_path: Path) -> None:
    out = tmp_path / "budget"
    args = ["--per-task", "5", "--embedder", "lexical", "--workers", "0", "-q", "--no-cache"]
    stopped = ttc(tmp_path, "run", *args, "--max-output-tokens", "3000", "--out", str(out))
    assert stopped.returncode == 3, stopped.stderr
    assert f"ttc resume {out}" in stopped.stdout
    summary = load(out / "summary.json")
    assert summary["complete"] is False
    assert "--max-output-tokens" in summary["stopped"]
    assert len(summary["rounds"]) == 1
    # The budget held: requests go out only while it has room for their worst case, so not
    # every one of the round's 20 was bought (all were, in flight at once, before).
    bought = summary["rounds"][0]["requests"]
    assert bought < 20
    assert summary["output_tokens"] >= 3000
    done = ttc(tmp_path, "resume", str(out), "--max-output-tokens", "10000000")
    assert done.returncode == 0, done.stderr
    summary = load(out / "summary.json")
    assert summary["complete"] is True
    # What round 1 bought came from the journal; the rest of it was sent now.
    assert summary["rounds"][0]["requests"] == 20
    assert summary["this_session"]["replayed"] == bought
    later = sum(r["requests"] for r in summary["rounds"][1:])
    assert summary["this_session"]["sent"] == 20 - bought + later
    # a price makes a cost budget possible, and the summary reports the cost
    priced = tmp_path / "priced"
    cost_run = ttc(tmp_path, "run", *args, "--price", "0.4,1.6", "--max-cost", "0.005",
                   "--out", str(priced))  # fmt: skip
    assert cost_run.returncode == 3
    summary = load(priced / "summary.json")
    assert "--max-cost" in summary["stopped"]
    assert summary["cost_usd"] >= 0.005
    assert summary["cost_usd"] == pytest.approx(
        (summary["input_tokens"] * 0.4 + summary["output_tokens"] * 1.6) / 1e6
    )
    # without a price, a cost budget cannot be kept: refused before anything is sent
    unpriced = ttc(tmp_path, "run", *args, "--max-cost", "1", "--out", str(tmp_path / "x"))
    assert unpriced.returncode == 2
    assert "--price" in unpriced.stderr


def test_ttc_report_prints_every_round_and_writes_a_plot(tmp_path: Path) -> None:
    args = ["--per-task", "3", "--embedder", "lexical", "--workers", "0", "-q", "--no-cache"]
    for method in ("adpt", "elim"):
        assert (
            ttc(
                tmp_path, "run", *args, "--method", method, "--out", str(tmp_path / method)
            ).returncode
            == 0
        )
    plot = tmp_path / "both.png"
    proc = ttc(
        tmp_path, "report", str(tmp_path / "adpt"), str(tmp_path / "elim"), "--plot", str(plot)
    )
    assert proc.returncode == 0, proc.stderr
    assert "adpt" in proc.stdout
    assert "elim" in proc.stdout
    assert "simulated" in proc.stdout
    assert proc.stdout.count("1 (warm-up)") == 2
    assert plot.read_bytes().startswith(b"\x89PNG")
    missing = ttc(tmp_path, "report", str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert "nope" in missing.stderr


def test_ttc_resume_of_something_that_is_not_a_run(tmp_path: Path) -> None:
    proc = ttc(tmp_path, "resume", str(tmp_path))
    assert proc.returncode == 2
    assert "not a run directory" in proc.stderr


def test_ttc_resume_of_a_missing_directory_says_it_is_missing(tmp_path: Path) -> None:
    proc = ttc(tmp_path, "resume", str(tmp_path / "runs" / "nonexistent"))
    assert proc.returncode == 2
    assert f"{tmp_path / 'runs' / 'nonexistent'}: no such directory" in proc.stderr
