"""`ttc ablate RUN_DIR`: the questions a run's warm-up left unsolved, sampled with and without
their demonstrations in pairs. In the simulator the effect is found when demonstrations help
(--sim-icl-gain 1) and not when they do not (0); a second call goes on from the arms' journals
and buys nothing twice; a stopped ablation goes on where it stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ttc.engine.cli._main import main
from ttc.engine.journal import read_journal
from ttc.engine.report._stats import mcnemar_exact

RUN = ["run", "--limit", "80", "--no-cache", "--embedder", "lexical", "-R", "1", "--workers", "0"]
RUN += ["--seed", "1", "-q"]


def _run(tmp_path: Path, gain: str) -> Path:
    out = tmp_path / f"gain{gain}"
    assert main([*RUN, "--sim-icl-gain", gain, "--out", str(out)]) == 0
    return out


def _samples(journal: Path) -> list[tuple[int, str, int]]:
    return [(e["round"], e["item"], e["k"]) for e in read_journal(journal) if e["ev"] == "sample"]


@pytest.mark.parametrize("gain", ["1", "0"])
def test_the_effect_is_found_only_where_demonstrations_help(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], gain: str
) -> None:
    monkeypatch.chdir(tmp_path)
    run = _run(tmp_path, gain)
    capsys.readouterr()
    assert main(["ablate", str(run), "--rounds", "4", "-q"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("ablation: simulated (sim provider): ")
    result = json.loads((run / "ablation.json").read_text())
    lo, hi = result["ci95"]
    assert result["simulated"] is True
    assert result["pairs"] == 4 * result["questions"] > 100
    assert lo <= result["effect"] <= hi
    assert result["p_value"] == mcnemar_exact(result["only_with"], result["only_without"])
    if gain == "1":
        assert lo > 0
        assert result["p_value"] < 0.01
    else:
        assert lo <= 0 <= hi
        assert result["p_value"] > 0.05
    # Both arms replayed the run's warm-up (nothing sent in round 1) and sampled the same keys.
    keys = {arm: _samples(run / "ablation" / arm / "journal.jsonl") for arm in ("with", "without")}
    assert set(keys["with"]) == set(keys["without"])
    warmup = [key for key in keys["with"] if key[0] == 1]
    assert warmup == [key for key in _samples(run / "journal.jsonl") if key[0] == 1]


def test_a_second_call_buys_nothing_and_a_stopped_one_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    run = _run(tmp_path, "1")
    # Stopped by a budget given on the way (a flag of the run's, as `ttc resume` takes them).
    code = main(["ablate", str(run), "--rounds", "2", "-q", "--max-output-tokens", "30000"])
    assert code == 3
    assert not (run / "ablation.json").exists()
    journals = [run / "ablation" / arm / "journal.jsonl" for arm in ("with", "without")]
    before = [len(_samples(j)) for j in journals]
    assert main(["ablate", str(run), "--rounds", "2", "-q"]) == 0
    after = [_samples(j) for j in journals]
    for samples, count in zip(after, before, strict=True):
        assert len(samples) == len(set(samples)) > count  # went on, nothing sampled twice
    first = json.loads((run / "ablation.json").read_text())
    capsys.readouterr()
    assert main(["ablate", str(run), "--rounds", "2", "-q"]) == 0
    assert [_samples(j) for j in journals] == after  # nothing new bought
    assert json.loads((run / "ablation.json").read_text()) == first
    assert "ablation: simulated" in capsys.readouterr().out


def test_a_run_that_is_not_one_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ablate", str(tmp_path / "none")]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_a_compare_directory_names_its_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "adpt").mkdir()
    (tmp_path / "adpt" / "config.json").write_text("{}")
    (tmp_path / "invocation.json").write_text('{"argv": ["compare", "--limit", "2"]}')
    assert main(["ablate", str(tmp_path)]) == 2
    assert f"name one of its runs, e.g. {tmp_path / 'adpt'}" in capsys.readouterr().err


def test_shared_limits_are_the_arms_not_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A quota shared through Redis holds the ablation's requests too: Redis unreachable is the
    # same one line as for `ttc run`, never a silent fall back to local limits.
    run = tmp_path / "run"
    assert main([*RUN[:2], "12", *RUN[3:], "--out", str(run)]) == 0
    capsys.readouterr()
    code = main(["ablate", str(run), "-q", "--shared-limits", "redis://127.0.0.1:1/0"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--shared-limits" in err
    assert "unreachable" in err
    assert not (run / "ablation" / "with" / "journal.jsonl").exists() or not [
        e for e in read_journal(run / "ablation" / "with" / "journal.jsonl") if e.get("round") == 2
    ]
