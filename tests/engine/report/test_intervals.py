"""Coverage intervals and paired differences, from a run's journal and results.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ttc.engine.report._intervals import (
    coverage_intervals,
    covered_rounds,
    interval_table,
    paired_table,
)


def _run(path: Path, correct: dict[str, list[int]], ids: list[str]) -> Path:
    path.mkdir()
    lines = [
        {"ev": "verdict", "round": t, "item": q, "k": 0, "score": 1.0, "correct": True}
        for q, rounds in correct.items()
        for t in rounds
    ]
    lines.append({"ev": "verdict", "round": 1, "item": ids[-1], "k": 0, "score": 0.0})
    (path / "journal.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (path / "results.jsonl").write_text("".join(json.dumps({"id": q}) + "\n" for q in ids))
    return path


def test_first_covered_round_and_its_interval(tmp_path: Path) -> None:
    ids = [f"q{i}" for i in range(10)]
    run = _run(tmp_path / "a", {"q0": [2, 1], "q1": [2], "q2": [3]}, ids)
    firsts = covered_rounds(run)
    assert firsts == {"q0": 1, "q1": 2, "q2": 3} | dict.fromkeys(ids[3:])
    cis = coverage_intervals(firsts, 3, 10)
    assert [c.estimate for c in cis] == pytest.approx([0.1, 0.2, 0.3])
    assert all(c.lo <= c.estimate <= c.hi for c in cis)
    # a question the run never reached counts as uncovered
    assert coverage_intervals(firsts, 1, 20)[0].estimate == pytest.approx(0.05)
    assert "R3 coverage % [95% CI]" in interval_table({"a": firsts}, 3, 10)


def test_paired_table_over_the_same_questions(tmp_path: Path) -> None:
    ids = [f"q{i}" for i in range(8)]
    a = covered_rounds(_run(tmp_path / "a", {q: [1] for q in ids[:6]}, ids))
    b = covered_rounds(_run(tmp_path / "b", {q: [1] for q in ids[:2]}, ids))
    text = paired_table({"elim": b, "adpt": a})
    row = text.splitlines()[-1].split()
    assert row[:5] == ["adpt", "-", "elim", "8", "+50.0"]
    assert row[-2:] == ["4/0", "0.125"]  # McNemar: 2 * (1/2)**4
    assert paired_table({"adpt": a}) == ""
