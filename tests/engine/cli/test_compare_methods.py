"""`ttc compare --methods`: any presets, elim first (the others share its warm-up), each round's
coverage with its interval, paired differences, and a line naming the methods judged with no
oracle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ttc.engine.cli._main import main
from ttc.engine.journal import read_journal


def test_the_methods_named_run_on_elims_warmup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "cmp"
    argv = ["compare", "--methods", "esc,bandit,elim", "-k", "2", "--limit", "20", "-R", "2"]
    argv += ["--no-cache", "--workers", "0", "--out", str(out), "-q"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["bandit", "elim", "esc"]
    assert "protocol: the paper's (section 5, Appendix A): decoding:" in text  # no unif
    assert "R2 coverage % [95% CI]" in text
    assert "bandit - elim" in text  # the last method against each other (no adpt here)
    assert "judged by agreement, no oracle: esc" in text
    # esc's warm-up is elim's, replayed: the same samples
    warm = [
        (e["item"], e["k"], e["text"])
        for e in read_journal(out / "esc" / "journal.jsonl")
        if e["ev"] == "sample" and e["round"] == 1
    ]
    elim = [
        (e["item"], e["k"], e["text"])
        for e in read_journal(out / "elim" / "journal.jsonl")
        if e["ev"] == "sample" and e["round"] == 1
    ]
    assert warm == elim
    assert list(json.loads((out / "compare.json").read_text())["runs"]) == [
        "elim",
        "esc",
        "bandit",
    ]


def test_an_unknown_method_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["compare", "--methods", "elim,nope"])
    assert "--methods: expected a comma list" in capsys.readouterr().err
