"""`ttc report`: tables and plots of real run directories; errors counted from the journal."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from fakes import FakeSuite, ScriptedProvider, Step, figure_fits, items

from ttc.engine import (
    METHODS,
    BadRequest,
    DataError,
    Engine,
    EngineOptions,
    Fatal,
    RateLimited,
    RetryPolicy,
    RunConfig,
    RunResult,
    Transient,
)
from ttc.engine.cli import main
from ttc.engine.report import METHOD_STYLES, PlotLine
from ttc.engine.report._plots import NUDGE_Y_PT, plot_lines
from ttc.engine.report._runplot import SIM_SHORT, labelled, plot_runs
from ttc.engine.report._runreport import load_run, report, report_table

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01)

# Six questions over three rounds (elimination: a solved question drops out):
# round 1: q0 rate-limited once then right; q1 two transients then wrong; q2 transient until the
#          attempts run out (a final transient error); q3 a bad request (final, no retry);
#          q4 rate-limited until the attempts run out; q5 right.
# round 2: q1 fatal (final, no retry); q3 right; q2 and q4 wrong.
# round 3: q1 right; q2 and q4 wrong.
MIXED: dict[str, list[Step]] = {
    "q0": [RateLimited("slow down", retry_after=0.001), "right:q0"],
    "q1": [Transient("503"), Transient("reset"), "wrong", Fatal("invalid api key"), "right:q1"],
    "q2": [Transient("503")] * 3,
    "q3": [BadRequest("prompt too long"), "right:q3"],
    "q4": [RateLimited("quota")] * 3,
    "q5": ["right:q5"],
}
ERRORS = {
    1: {"bad_request": 1, "rate_limited": 1, "transient": 1},
    2: {"fatal": 1},
}
RETRIES = {1: {"rate_limited": 3, "transient": 4}}


@dataclass
class SimulatedProvider(ScriptedProvider):
    """A scripted provider that says it is simulated, as the sim provider does."""

    simulated: bool = True


async def run(
    provider: ScriptedProvider,
    out: Path,
    n: int = 6,
    rounds: int = 3,
    method: str = "elim",
    resume: bool = False,
    suite_name: str = "fake",
) -> RunResult:
    config = RunConfig(method=method, rounds=rounds, verifier_workers=0)
    suite = FakeSuite(name=suite_name, pool=items(n))
    async with Engine(
        provider, suite, config, out_dir=out, resume=resume, options=EngineOptions(retry=FAST)
    ) as engine:
        return await engine.run()


def summary(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((out / "summary.json").read_bytes())
    return data


def table_rows(block: str, intervals: bool = False) -> list[list[str]]:
    """The data rows of the first table in `block`, split into cells; without the coverage's
    95% interval (the fifth cell) unless `intervals`."""
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("-----")) + 1
    rows = []
    for line in lines[start:]:
        if not line.strip() or line.startswith("total:"):
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows.append(cells if intervals else cells[:4] + cells[5:])
    return rows


async def test_the_table_shows_every_round_as_the_summary_has_it(tmp_path: Path) -> None:
    await run(ScriptedProvider(dict(MIXED)), tmp_path)
    text = report_table([load_run(tmp_path)])
    for row in table_rows(text, intervals=True):  # each round's coverage inside its interval
        lo, hi = (float(x) for x in row[4].strip("[]").split(", "))
        assert lo <= float(row[3]) <= hi
    rounds = summary(tmp_path)["rounds"]
    rows = table_rows(text)
    assert len(rows) == len(rounds) == 3
    for row, r in zip(rows, rounds, strict=True):
        assert row[0] == str(r["round"]) + ("" if r["adaptive"] else " (warm-up)")
        assert row[1:6] == [
            str(r["active"]),
            str(r["solved"]),
            f"{100 * r['coverage']:.1f}",
            f"{100 * r['accuracy']:.1f}",
            str(r["requests"]),
        ]
        assert row[6:9] == [
            f"{r[k]:,}" for k in ("input_tokens", "output_tokens", "thinking_tokens")
        ]
        assert row[9] == "-"  # no price for the scripted model
        assert row[10] == f"{r['wall_s']:.2f}"
    assert [row[11:] for row in rows] == [
        ["bad_request 1, rate_limited 1, transient 1", "rate_limited 3, transient 4"],
        ["fatal 1", "-"],
        ["-", "-"],
    ]
    s = summary(tmp_path)
    total = text.splitlines()[-1]
    assert total.startswith("total: coverage 66.7% (4/6); ")
    assert f"{sum(r['requests'] for r in rounds)} requests" in total
    assert f"{s['input_tokens']:,} input, {s['output_tokens']:,} output, 0 thinking" in total
    assert "errors: bad_request 1, fatal 1, rate_limited 1, transient 1;" in total
    assert total.endswith("retries: rate_limited 3, transient 4")


async def test_errors_and_retries_by_kind_are_counted_from_the_journal(tmp_path: Path) -> None:
    result = await run(ScriptedProvider(dict(MIXED)), tmp_path)
    rep = load_run(tmp_path)
    assert rep.errors == ERRORS
    assert rep.retries == RETRIES
    # The journal's kinds add up to the engine's own per-round counts.
    for stats in result.rounds:
        assert sum(rep.errors.get(stats.round, {}).values()) == stats.errors
        assert sum(rep.retries.get(stats.round, {}).values()) == stats.retries
    assert rep.complete is True
    assert rep.simulated is False
    assert rep.label == f"elim ({tmp_path.name})"
    assert rep.cost_usd is None


async def test_a_sample_sent_again_on_resume_counts_by_its_last_outcome(tmp_path: Path) -> None:
    await run(ScriptedProvider({"q0": [Fatal("invalid api key")]}), tmp_path, n=2, rounds=1)
    assert load_run(tmp_path).errors == {1: {"fatal": 1}}
    await run(ScriptedProvider({"q0": ["right:q0"]}), tmp_path, n=2, rounds=1, resume=True)
    rep = load_run(tmp_path)
    assert rep.errors == {}
    assert summary(tmp_path)["rounds"][0]["errors"] == 0
    assert "errors: -" in report_table([rep])


async def test_a_run_stopped_mid_way_shows_as_stopped(tmp_path: Path) -> None:
    slow: dict[str, list[Step]] = {f"q{i}": [(0.0 if i < 3 else 30.0, "wrong")] for i in range(5)}
    slow["q0"] = ["right:q0"]
    task = asyncio.create_task(run(ScriptedProvider(slow), tmp_path, n=5))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    rep = load_run(tmp_path)
    assert rep.complete is False
    text = report_table([rep])
    header = text.splitlines()[0]
    assert "stopped (resumable)" in header
    assert "complete" not in header
    [row] = table_rows(text)
    assert row[0] == "1 (warm-up) (stopped)"
    # Five requests went out; three landed before the stop, and only they were paid for.
    [r] = summary(tmp_path)["rounds"]
    assert (r["requests"], r["samples"]) == (5, 3)
    # The round never reached its barrier: solved and coverage are the run's as it stopped.
    assert r["solved"] == 1
    assert r["coverage"] == 0.2
    assert row[1:6] == ["5", "1", "20.0", "20.0", "5"]
    assert row[7] == "30"
    assert row[10] == "-"  # a stopped round's wall time was never measured
    total = text.splitlines()[-1]
    assert total.startswith("total: coverage 20.0% (1/5); accuracy 20.0% (1/5); 5 requests;")


async def test_two_runs_in_one_report(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    await run(ScriptedProvider(dict(MIXED)), first)
    await run(SimulatedProvider({"q0": ["right:q0"]}), second, n=3, rounds=2, method="unif")
    text = report([first, second], plot=None)
    blocks = text.split("\n\n")
    assert len(blocks) == 2
    assert blocks[0].startswith(f"elim (first): fake, scripted-1; {first}; complete; wall ")
    assert blocks[1].startswith(f"unif (second): fake, scripted-1; {second}; complete; wall ")
    assert SIM_SHORT not in blocks[0]
    assert blocks[1].splitlines()[0].endswith(SIM_SHORT)
    assert len(table_rows(blocks[0])) == 3
    assert len(table_rows(blocks[1])) == 2
    total = blocks[1].splitlines()[-1]
    assert total.startswith("total: coverage 33.3% (1/3); accuracy 33.3% (1/3); 6 requests;")


async def test_cost_is_shown_when_the_summary_has_it(tmp_path: Path) -> None:
    await run(ScriptedProvider(dict(MIXED)), tmp_path)
    # A run made once prices exist records cost_usd per round; add them as such a run would.
    data = summary(tmp_path)
    for r, cost in zip(data["rounds"], (0.5, 0.25, 0.125), strict=True):
        r["cost_usd"] = cost
    (tmp_path / "summary.json").write_bytes(orjson.dumps(data))
    rep = load_run(tmp_path)
    assert rep.cost_usd == 0.875
    text = report_table([rep])
    assert [row[9] for row in table_rows(text)] == ["0.5000", "0.2500", "0.1250"]
    assert "cost $0.8750;" in text.splitlines()[-1]
    # One round without a price: the total is unknown, not an undercount.
    data["rounds"][1]["cost_usd"] = None
    (tmp_path / "summary.json").write_bytes(orjson.dumps(data))
    assert load_run(tmp_path).cost_usd is None


async def test_the_plot_is_a_real_png(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    await run(ScriptedProvider(dict(MIXED)), first)
    await run(SimulatedProvider(dict(MIXED)), second, method="unif")
    png = tmp_path / "coverage.png"
    report([first, second], plot=png)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000
    # Two runs with the same label still get a line each.
    again = tmp_path / "again.png"
    plot_runs([load_run(first), load_run(first)], again)
    assert again.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_missing_directory_is_a_data_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-run"
    with pytest.raises(DataError, match=re.escape(str(missing))):
        report([missing], plot=None)


async def test_a_missing_or_corrupt_file_is_a_data_error_naming_it(tmp_path: Path) -> None:
    await run(ScriptedProvider(dict(MIXED)), tmp_path)
    (tmp_path / "config.json").unlink()
    with pytest.raises(DataError, match=re.escape(str(tmp_path / "config.json"))):
        load_run(tmp_path)
    (tmp_path / "summary.json").write_bytes(b'{"rounds": [')
    with pytest.raises(DataError, match=re.escape(str(tmp_path / "summary.json"))):
        load_run(tmp_path)
    (tmp_path / "summary.json").write_bytes(b'{"rounds": [{"round": 1}]}')
    with pytest.raises(DataError, match="round #1 lacks 'active'"):
        load_run(tmp_path)


def legend(fig: Any) -> list[str]:
    return [t.get_text() for t in fig.legends[0].get_texts()]


async def test_a_label_names_the_method_once_and_tells_equal_ones_apart(tmp_path: Path) -> None:
    # Directories named after their method, as `ttc compare` and the paper's grid make them.
    dirs = [tmp_path / "a" / "unif", tmp_path / "b" / "unif", tmp_path / "elim"]
    for d in dirs:
        await run(ScriptedProvider({"q0": ["right:q0"]}), d, n=3, rounds=2, method=d.name)
    text = report(dirs, plot=None)
    headers = [block.splitlines()[0] for block in text.split("\n\n")]
    # The three ran the same questions: their paired differences follow, against the last.
    paired = "paired differences on the same questions"
    assert [h.split(":")[0] for h in headers] == ["unif (a)", "unif (b)", "elim", paired]
    assert "elim - unif (a)" in text
    fig = plot_runs(labelled([load_run(d) for d in dirs]), tmp_path / "p.png")
    assert legend(fig) == ["unif (a)", "unif (b)", "elim"]
    assert load_run(dirs[2]).label == "elim"  # never "elim (elim)"


async def test_equal_runs_stay_visible_in_their_methods_colour(tmp_path: Path) -> None:
    await run(ScriptedProvider(dict(MIXED)), tmp_path / "x")
    same = load_run(tmp_path / "x")
    fig = plot_runs([same, same], tmp_path / "p.png")
    first, second = fig.axes[0].get_lines()
    assert first.get_color() == second.get_color() == METHOD_STYLES["elim"].color
    assert first.get_marker() == METHOD_STYLES["elim"].marker
    assert first.get_linestyle() != second.get_linestyle()
    # Drawn a few points apart, so the second does not hide the first.
    a = first.get_transform().transform(first.get_xydata())
    b = second.get_transform().transform(second.get_xydata())
    apart = abs(a[:, 1] - b[:, 1]) * 72 / fig.dpi
    assert apart == pytest.approx([NUDGE_Y_PT] * len(apart))
    assert (a[:, 0] == b[:, 0]).all()


async def test_runs_on_different_test_sets_get_a_panel_each(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    await run(ScriptedProvider(dict(MIXED)), first)
    await run(SimulatedProvider({"q0": ["right:q0"]}), second, n=3, method="unif",
              suite_name="other")  # fmt: skip
    text = report([first, second], plot=tmp_path / "p.png")
    assert "note: the runs are on 2 test sets (fake, 6 questions; other, 3 questions)" in text
    fig = plot_runs(labelled([load_run(first), load_run(second)]), tmp_path / "p.png")
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["fake, 6 questions", "other, 3 questions"]
    assert [len(ax.get_lines()) for ax in panels] == [1, 1]
    assert "not comparable across panels" in fig.get_suptitle()
    assert SIM_SHORT in fig.get_suptitle()
    assert legend(fig) == ["elim (first)", "unif (second), simulated"]
    assert figure_fits(fig)


def test_a_long_title_is_wrapped_inside_the_figure(tmp_path: Path) -> None:
    line = PlotLine("adpt", "adpt", [1.0, 2.0], [40.0, 60.0])
    title = "coverage vs cumulative output tokens; " + "; ".join(f"model-{i}" for i in range(30))
    fig = plot_lines({"": [line]}, tmp_path / "p.png", title, xlabel="tokens")
    assert figure_fits(fig)
    assert fig.get_suptitle().replace("\n", " ") == title


def test_a_compare_directory_is_reported_run_by_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cmp = tmp_path / "cmp"
    args = ["--suite", "reasoning_gym", "--per-task", "2", "--embedder", "lexical", "--workers",
            "0", "--no-live", "--no-cache", "-q", "--out", str(cmp)]  # fmt: skip
    assert main(["compare", *args]) == 0
    capsys.readouterr()
    png = tmp_path / "p.png"
    assert main(["report", str(cmp), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    for method in METHODS:
        assert f"\n{method}: reasoning_gym, " in f"\n{out}"
    assert (
        f"ttc compare of unif, elim, rand, adpt; its plot: {cmp / 'coverage_vs_tokens.png'}" in out
    )
    assert png.read_bytes().startswith(b"\x89PNG")
    fig = plot_runs(labelled([load_run(cmp / m) for m in METHODS]), png)
    assert legend(fig) == list(METHODS)
    assert [ln.get_color() for ln in fig.axes[0].get_lines()] == [
        METHOD_STYLES[m].color for m in METHODS
    ]


@pytest.mark.parametrize("name", ["x.xyz", "x", "no-such-folder/x.png"])
def test_a_plot_file_that_cannot_be_written_is_refused_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    plot = tmp_path / name
    # The run directory is missing too: the plot is checked before anything is read.
    assert main(["report", str(tmp_path / "no-run"), "--plot", str(plot)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"ttc: error: --plot {plot}: ")
    if "folder" in name:
        assert "does not exist" in err
    else:
        assert ".png, " in err
        assert ".pdf, " in err
    assert not plot.exists()


def test_the_legend_says_its_offsets_are_of_the_drawing_not_percentage_points() -> None:
    from ttc.engine.report._plots import nudge_note

    note = nudge_note(4, rounds_axis=False)
    assert "pt" not in note.split()  # "±2.25 pt" read as percentage points of coverage
    assert "(in points of the drawing, 1/72 in, not data)" in note
    assert "up or down" in note
    assert "across" in nudge_note(4, rounds_axis=True)
