"""benchmarks/paper.py's results.md holds every table of the paper in the paper's shape: per-round
coverage (Tables 2, 3, 7), coverage against samples (Table 1), tokens per round with their total
and savings (Table 4), adpt's gains (Tables 5-6), accuracy per round for self-consistency, and
Figure 1's average, on a small offline grid whose runs they are checked against."""

from __future__ import annotations

import asyncio
import statistics
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import paper  # noqa: E402
from _paper_plan import cell_dir  # noqa: E402
from _paper_shapes import cross_model  # noqa: E402

from ttc.engine import ConfigError  # noqa: E402

METHODS = ("unif", "elim", "rand", "adpt", "sc")
SEEDS = (0, 1)
ROUNDS = 3


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("paper_tables")
    argv = [
        "--out", str(out), "--suites", "gpqa,mixed", "--methods", ",".join(METHODS),
        "--seeds", ",".join(map(str, SEEDS)), "--rounds", str(ROUNDS), "--limit", "9",
        "--embedder", "lexical", "--workers", "1", "--lcb-data", "fixture",
    ]  # fmt: skip
    opts = paper.options_from(paper.build_parser().parse_args(argv), argv)
    line = asyncio.run(paper.run(opts))
    assert line["runs"] == 2 * len(METHODS) * len(SEEDS)
    return out, Path(line["outputs"]["results_md"]).read_text(encoding="utf-8")


def _summaries(out: Path, suite: str, method: str) -> list[dict[str, Any]]:
    return [orjson.loads((cell_dir(out, suite, s, method) / "summary.json").read_bytes())
            for s in SEEDS]  # fmt: skip


def _table(markdown: str, heading: str) -> tuple[list[str], dict[str, list[str]]]:
    """The first table after the heading line that starts with `heading`: its column heads and
    its rows by their first cell."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    first = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("|"))
    rows = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    head, body = rows[0], rows[2:]
    return head, {row[0]: row[1:] for row in body}


def _per_round(summaries: list[dict[str, Any]], key: str) -> list[str]:
    return [
        f"{statistics.fmean(100 * s['rounds'][t][key] for s in summaries):.1f}"
        for t in range(ROUNDS)
    ]


def test_coverage_per_round_in_the_shape_of_tables_2_3_and_7(grid: tuple[Path, str]) -> None:
    out, md = grid
    for suite, heading in (("gpqa", "### GPQA ("), ("mixed", "### Mixed (LiveCodeBench fixture")):
        head, rows = _table(md, heading)
        assert head == ["Method", "R1", "R2", "R3"]  # R1 is the warm-up (the paper's R0)
        names = {"unif": "Unif", "elim": "Elim", "sc": "Ours (SC)", "rand": "Ours (Rand)",
                 "adpt": "Ours (Adpt)"}  # fmt: skip
        assert list(rows) == list(names.values())  # the paper's order of rows
        for method, name in names.items():
            assert rows[name] == _per_round(_summaries(out, suite, method), "coverage")
    # The mixed set is named as the paper's Table 7, and as built on the LiveCodeBench fixture.
    assert "### Mixed (LiveCodeBench fixture, MATH-500, GPQA) (the paper's Table 7" in md


def test_coverage_against_samples_in_the_shape_of_table_1(grid: tuple[Path, str]) -> None:
    out, md = grid
    head, rows = _table(md, "## Coverage (%) vs. number of samples per question")
    assert head == ["#Samples", "1", "2", "3"]
    assert list(rows) == ["Fixed", "Neighbour"]
    assert rows["Fixed"] == _per_round(_summaries(out, "gpqa", "elim"), "coverage")
    assert rows["Neighbour"] == _per_round(_summaries(out, "gpqa", "adpt"), "coverage")


def test_tokens_per_round_with_total_and_savings_as_table_4(grid: tuple[Path, str]) -> None:
    out, md = grid
    head, rows = _table(md, "## Token usage (prompt + thinking + response) per round")
    assert head == ["Method", "R1", "R2", "R3", "Total"]
    assert list(rows) == ["Elim", "Ours", "Savings"]

    def tokens(method: str) -> list[float]:
        keys = ("input_tokens", "thinking_tokens", "output_tokens")
        runs = _summaries(out, "gpqa", method)
        return [statistics.fmean(sum(r["rounds"][t][k] for k in keys) for r in runs)
                for t in range(ROUNDS)]  # fmt: skip

    elim, ours = tokens("elim"), tokens("adpt")
    for name, values in (("Elim", elim), ("Ours", ours)):
        assert rows[name] == [f"{v:,.0f}" for v in values] + [f"{sum(values):,.0f}"]
    saved = [e - o for e, o in zip(elim, ours, strict=True)]
    assert rows["Savings"] == [f"{v:,.0f}" for v in saved] + [f"{sum(saved):,.0f}"]
    assert rows["Savings"][0] == "0"  # the shared warm-up costs the same


def test_self_consistency_reports_accuracy_per_round(grid: tuple[Path, str]) -> None:
    out, md = grid
    # The paper's eight figures in order: the ablations (self-consistency their panel f) are
    # Figure 7, between Reasoning Gym's (6) and the final-round coverage (8).
    title = "## Accuracy (%) per round: the self-consistency panel (the paper's Figure 7f)"
    head, rows = _table(md, title)
    assert head == ["Method", "Round 1", "Round 2", "Round 3"]
    assert rows["Ours (SC)"] == _per_round(_summaries(out, "gpqa", "sc"), "accuracy")
    assert rows["Elim"] == _per_round(_summaries(out, "gpqa", "elim"), "accuracy")


def test_gains_in_the_shape_of_tables_5_and_6(grid: tuple[Path, str]) -> None:
    out, md = grid
    head, rows = _table(md, "## Coverage improvement of adpt (points): the paper's Tables 5–6")
    assert head == ["Benchmark", "U", "E", "R", "sc"]
    assert set(rows) == {"GPQA", "Mixed (LiveCodeBench fixture, MATH-500, GPQA)"}
    adpt, elim = _summaries(out, "gpqa", "adpt"), _summaries(out, "gpqa", "elim")
    diffs = [100 * (a["coverage"] - e["coverage"]) for a, e in zip(adpt, elim, strict=True)]
    assert rows["GPQA"][1].startswith(f"{statistics.fmean(diffs):.2f} ±")


def test_figure_1_averages_over_benchmarks_and_models(grid: tuple[Path, str]) -> None:
    out, md = grid
    head, rows = _table(md, "## Average final-round coverage (%) over the benchmarks")
    assert head == ["Model", "Benchmarks", "Unif", "Elim", "Ours (Rand)", "Ours (Adpt)"]
    (model,) = rows
    assert model.startswith("sim / sim-2")
    # The mixed set is not one of the paper's five benchmarks: GPQA alone is averaged.
    assert rows[model][0] == "1"
    for column, method in zip(head[2:], ("unif", "elim", "rand", "adpt"), strict=True):
        runs = _summaries(out, "gpqa", method)
        mean = statistics.fmean(100 * r["coverage"] for r in runs)
        assert rows[model][head.index(column) - 1] == f"{mean:.1f}"
    # Another grid (here the same one, standing for a second model) joins the table and the mean.
    cross = cross_model([out, out])
    assert [r["model"] for r in cross] == [model, model]
    json = orjson.loads((out / "results.json").read_bytes())
    assert json["figure1"]["models"][0]["suites"] == ["gpqa"]


def test_a_missing_cross_model_grid_is_a_one_line_error(tmp_path: Path) -> None:
    argv = ["--out", str(tmp_path / "g"), "--cross-model", str(tmp_path / "nothing")]
    with pytest.raises(ConfigError, match=r"--cross-model: cannot read .*results\.json"):
        paper.options_from(paper.build_parser().parse_args(argv), argv)


def test_intervals_over_seeds_and_differences_against_unif_and_elim() -> None:
    from _paper_stats import Run, by_suite, differences, stat, t975

    # Student's t: 2 seeds, df 1
    s = stat([10.0, 20.0])
    assert s.ci95 == pytest.approx((15 - 12.706 * 7.0710678 / 1.4142136, 15 + 12.706 * 5.0))
    assert stat([5.0]).ci95 is None
    assert t975(100) == 1.96
    assert stat([99.0, 100.0]).interval_text(percent=True).endswith(", 100.0]")

    def summary(coverage: float) -> dict[str, object]:
        return {"coverage": coverage, "rounds": [{"coverage": coverage}]}

    runs = [
        Run("s", m, seed, summary(c))
        for m, cs in {"unif": (0.5, 0.6), "elim": (0.6, 0.6), "adpt": (0.7, 0.9)}.items()
        for seed, c in enumerate(cs)
    ]
    stats = by_suite(runs, ["unif", "elim", "adpt"])["s"]
    vs_unif = differences(stats, "unif")
    assert vs_unif["adpt"].values == pytest.approx((20.0, 30.0))
    assert vs_unif["elim"].values == pytest.approx((10.0, 0.0))
    assert differences(stats, "elim")["adpt"].mean == pytest.approx(20.0)
    assert differences(stats, "rand") == {}


def test_the_panels_say_how_their_methods_are_judged() -> None:
    from _paper_shapes import judged_by
    from _paper_stats import Run, by_suite

    summary = {"coverage": 0.5, "rounds": [{"coverage": 0.5}]}
    runs = [Run("s", m, 0, summary) for m in ("elim", "adpt", "sc")]
    stats = by_suite(runs, ["elim", "adpt", "sc"])["s"]
    assert judged_by(stats, {"judge": None}) == (
        "mixes consensus-judged (sc) and ground-truth-judged (elim, adpt) methods"
    )
    assert judged_by(stats, {"judge": "consensus"}).startswith("every method judged by consensus")
