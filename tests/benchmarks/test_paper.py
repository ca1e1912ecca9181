"""The reproduction harness `benchmarks/paper.py` on a tiny grid, offline (sim provider).

Two suites of 12 questions (Reasoning Gym, and MATH-500 from ../shared/data when it is there),
four methods, two seeds, three rounds: every run directory is complete, the warm-up is sent once
per (suite, seed) and replayed by every method, the table is the runs' summaries averaged, the
figures are PNGs, and running the harness again sends nothing.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import paper  # noqa: E402
from _paper_grid import Outcome  # noqa: E402
from _paper_plan import (  # noqa: E402
    DATA_DIR,
    GridOptions,
    cell_dir,
    load_suite,
    plan_methods,
    same_warmup,
    skip_reason,
)
from _paper_report import (  # noqa: E402
    Run,
    by_suite,
    plot_final,
    plot_rounds,
    plot_tokens,
    plot_usage,
    stat,
    table_json,
    table_markdown,
)
from fakes import figure_fits  # noqa: E402

from ttc.adapters import SimConfig, SimProvider  # noqa: E402
from ttc.adapters.suites import DATA_FILES  # noqa: E402
from ttc.engine import Completion, ConfigError, Item, Provider, Request, Sampling, Suite  # noqa: E402
from ttc.engine.contract import sample_seed  # noqa: E402
from ttc.engine.journal import items_sha256, journal_text  # noqa: E402
from ttc.engine.report import METHOD_STYLES  # noqa: E402

METHODS = ("unif", "elim", "rand", "adpt")
SEEDS = (0, 1)
N = 12


@dataclass
class CountingSim(Provider):
    """The sim provider, recording every request it is sent as (suite, seed, request)."""

    inner: SimProvider
    suite: str
    seed: int
    sent: list[tuple[str, int, Request]]
    simulated: bool = True
    name: str = field(init=False)
    model: str = field(init=False)

    def __post_init__(self) -> None:
        self.name, self.model = self.inner.name, self.inner.model

    async def generate(self, request: Request) -> Completion:
        self.sent.append((self.suite, self.seed, request))
        return await self.inner.generate(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _suites() -> list[str]:
    suites = ["reasoning_gym"]
    if (DATA_DIR / DATA_FILES["math500"]).exists():
        suites.append("math500")
    return suites


def _argv(out: Path, suites: Sequence[str]) -> list[str]:
    return [
        "--out", str(out), "--suites", ",".join(suites), "--methods", ",".join(METHODS),
        "--seeds", ",".join(map(str, SEEDS)), "--rounds", "3", "--limit", str(N),
        "--per-task", "3", "--embedder", "lexical", "--workers", "1",
    ]  # fmt: skip


async def _run(argv: list[str], sent: list[tuple[str, int, Request]]) -> dict[str, Any]:
    opts = paper.options_from(paper.build_parser().parse_args(argv), argv)

    def factory(suite: Suite, items: Sequence[Item], seed: int) -> CountingSim:
        return CountingSim(SimProvider(suite, items, SimConfig(seed=seed)), suite.name, seed, sent)

    return await paper.run(opts, factory)


def _summary(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((path / "summary.json").read_bytes())
    return data


def _round_one(path: Path) -> list[tuple[Any, ...]]:
    lines = [raw.rstrip(b"\n") for raw in journal_text(path / "journal.jsonl")]
    events = [orjson.loads(line) for line in lines]
    return sorted(
        (e["item"], e["k"], e["text"], tuple(e["usage"]))
        for e in events
        if e["ev"] == "sample" and e["round"] == 1
    )


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], list[Any]]:
    import asyncio

    out = tmp_path_factory.mktemp("paper")
    sent: list[tuple[str, int, Request]] = []
    line = asyncio.run(_run(_argv(out, _suites()), sent))
    return out, line, sent


def test_every_run_directory_is_complete(grid: tuple[Path, dict[str, Any], list[Any]]) -> None:
    out, line, _ = grid
    suites = _suites()
    assert line["runs"] == line["runs_ran"] == len(suites) * len(METHODS) * len(SEEDS)
    assert line["simulated"] is True
    assert "measures the machinery, not the method" in line["note"]
    for suite in suites:
        for seed in SEEDS:
            for method in METHODS:
                path = cell_dir(out, suite, seed, method)
                summary = _summary(path)
                assert summary["complete"] is True
                assert summary["questions"] == N
                assert summary["method"] == method
                assert len(summary["rounds"]) == 3
                assert (path / "results.jsonl").is_file()
                assert (path / "config.json").is_file()


def test_the_warm_up_is_sent_once_and_replayed_by_every_method(
    grid: tuple[Path, dict[str, Any], list[Any]],
) -> None:
    out, line, sent = grid
    for suite in _suites():
        for seed in SEEDS:
            elim = cell_dir(out, suite, seed, "elim")
            lines = (elim / "results.jsonl").read_bytes().splitlines()
            items = [orjson.loads(x)["id"] for x in lines]
            first = {sample_seed(seed, item, 1, 0): item for item in items}
            warmups = [
                r for s, sd, r in sent if (s, sd) == (suite, seed) and r.sampling.seed in first
            ]
            # Every question's round-one sample was bought once, for all four methods.
            assert sorted(r.item_id for r in warmups) == sorted(items)
            reference = _round_one(elim)
            assert len(reference) == N
            for method in METHODS:
                path = cell_dir(out, suite, seed, method)
                assert _round_one(path) == reference
                summary = _summary(path)
                # Counted as an uninterrupted run of the method would count them; what this
                # process sent apart.
                assert summary["rounds"][0]["requests"] == N
                if method != "elim":
                    assert summary["this_session"]["replayed"] == N
                    assert summary["this_session"]["sent"] == sum(
                        r["requests"] for r in summary["rounds"][1:]
                    )
    assert line["warmup_shared"] == ["adpt<-elim", "rand<-elim", "unif<-elim"]


def _journal_times(out: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in out.rglob("journal.jsonl")}


def _table(line: dict[str, Any]) -> dict[str, Any]:
    table: dict[str, Any] = orjson.loads(Path(line["outputs"]["results_json"]).read_bytes())
    return table


def _by_method(out: Path, suite: str) -> dict[str, list[dict[str, Any]]]:
    return {m: [_summary(cell_dir(out, suite, s, m)) for s in SEEDS] for m in METHODS}


def test_the_table_is_the_summaries_averaged(grid: tuple[Path, dict[str, Any], list[Any]]) -> None:
    out, line, _ = grid
    table = _table(line)
    markdown = Path(line["outputs"]["results_md"]).read_text(encoding="utf-8")
    assert table["simulated"] is True
    assert "simulated (sim provider): measures the machinery, not the method" in markdown
    for suite in _suites():
        runs = _by_method(out, suite)
        cells = table["suites"][suite]["methods"]
        for method, summaries in runs.items():
            for key in ("coverage", "accuracy"):
                values = [100 * s[key] for s in summaries]
                got = cells[method][f"{key}_pct"]
                assert got["values"] == pytest.approx(values)
                assert got["mean"] == pytest.approx(statistics.fmean(values))
                assert got["std"] == pytest.approx(statistics.stdev(values))
            coverage = cells[method]["coverage_pct"]
            assert f"{coverage['mean']:.1f} ± {coverage['std']:.1f}" in markdown
            tokens = [float(s["output_tokens"]) for s in summaries]
            assert cells[method]["output_tokens"]["mean"] == pytest.approx(statistics.fmean(tokens))
            per_round = cells[method]["coverage_pct_by_round"]
            for t in range(3):
                expected = statistics.fmean(100 * s["rounds"][t]["coverage"] for s in summaries)
                assert per_round[t]["mean"] == pytest.approx(expected)


def test_the_gain_of_adpt_is_the_difference_of_final_coverages(
    grid: tuple[Path, dict[str, Any], list[Any]],
) -> None:
    out, line, _ = grid
    table = _table(line)
    for suite in _suites():
        runs = _by_method(out, suite)
        gains = table["suites"][suite]["adpt_gain_points"]
        assert set(gains) == {"unif", "elim", "rand"}
        for other in ("unif", "elim", "rand"):
            diffs = [
                100 * (a["coverage"] - b["coverage"])
                for a, b in zip(runs["adpt"], runs[other], strict=True)
            ]
            assert gains[other]["values"] == pytest.approx(diffs)
            assert gains[other]["mean"] == pytest.approx(statistics.fmean(diffs))
            assert gains[other]["std"] == pytest.approx(statistics.stdev(diffs))


def test_unif_matches_elims_tokens_and_carries_its_coverage_forward(
    grid: tuple[Path, dict[str, Any], list[Any]],
) -> None:
    out, _, _ = grid
    for suite in _suites():
        for seed in SEEDS:
            unif = cell_dir(out, suite, seed, "unif")
            config = orjson.loads((unif / "config.json").read_bytes())["config"]
            elim_tokens = _summary(cell_dir(out, suite, seed, "elim"))["output_tokens"]
            assert config["match_tokens"] == elim_tokens
            rounds = _summary(unif)["rounds"]
            idle = [r for r in rounds if r["planned"] == 0]
            # The rounds after the matched number sample nothing: the coverage carries forward.
            for r in idle:
                assert r["coverage"] == rounds[r["round"] - 2]["coverage"]


def test_the_figures_are_png_files(grid: tuple[Path, dict[str, Any], list[Any]]) -> None:
    _, line, _ = grid
    figures = line["outputs"]["figures"]
    paths = [Path(figures["final_coverage"])]
    for suite in _suites():
        assert set(figures["suites"][suite]) == {
            "coverage_per_round",
            "coverage_vs_tokens",
            "tokens_per_round",
        }
        paths += [Path(p) for p in figures["suites"][suite].values()]
    for path in paths:
        data = path.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        assert len(data) > 5_000


async def test_running_again_sends_nothing(grid: tuple[Path, dict[str, Any], list[Any]]) -> None:
    out, first, _ = grid
    before = _journal_times(out)
    sent: list[tuple[str, int, Request]] = []
    line = await _run(_argv(out, _suites()), sent)
    assert sent == []
    assert line["runs_ran"] == 0
    assert line["runs_reused"] == first["runs"]
    assert line["requests"] == line["sent"] == 0
    assert _journal_times(out) == before
    assert _table(line)["suites"].keys() == set(_suites())


async def test_a_different_experiment_in_the_same_directory_is_refused(
    grid: tuple[Path, dict[str, Any], list[Any]],
) -> None:
    out, _, _ = grid
    argv = [*_argv(out, ["reasoning_gym"]), "--rounds", "2"]
    with pytest.raises(ConfigError, match="rounds"):
        await _run(argv, [])


def _opts(*extra: str) -> Any:
    argv = ["--out", "never-written", "--methods", "all", *extra]
    return paper.options_from(paper.build_parser().parse_args(argv), argv)


def test_which_methods_share_the_warm_up_and_in_what_order() -> None:
    opts = _opts()
    # The paper's decoding (temperature 0.3): every preset samples its warm-up as elim does.
    assert all(same_warmup(opts, "math500", m) for m in opts.methods)
    assert plan_methods(opts, "math500") == [
        "elim", "rand", "adpt", "temp", "fixed-icl", "sc", "esc", "asc", "bandit", "unif", "da"
    ]  # fmt: skip
    assert skip_reason(opts, "math500", "fixed-icl") is None
    assert "fixed-icl" in (skip_reason(opts, "gpqa", "fixed-icl") or "")
    # With no temperature set, temp's round one samples at 0.3, elim's at the default: no share.
    hot = _opts("--temperature", "default")
    assert not same_warmup(hot, "math500", "temp")
    assert same_warmup(hot, "math500", "adpt")
    # Matched to adpt: unif and da run after it, still after everything else.
    assert plan_methods(_opts("--match-to", "adpt"), "gpqa")[-2:] == ["unif", "da"]


def test_the_papers_decoding_per_provider() -> None:
    gemini = _opts("--provider", "gemini", "--model", "gemini-2.5-flash-lite").sampling
    assert (gemini.temperature, gemini.top_p, gemini.top_k) == (0.3, 0.9, 40)
    assert gemini.max_output_tokens == 65_536
    mini = _opts("--provider", "openai", "--model", "gpt-4.1-mini").sampling
    assert (mini.temperature, mini.top_p, mini.max_output_tokens) == (0.3, 0.9, 32_768)
    assert mini.reasoning_effort is None
    nano = _opts("--provider", "openai", "--model", "gpt-5-nano").sampling
    assert (nano.temperature, nano.top_p, nano.top_k) == (None, None, None)
    assert (nano.reasoning_effort, nano.verbosity, nano.max_output_tokens) == (
        "medium",
        "medium",
        32_768,
    )
    think = _opts("--provider", "gemini", "--model", "g", "--thinking-budget", "24576").sampling
    assert think.thinking_budget == 24_576
    assert _opts("--temperature", "default").sampling.temperature is None
    assert _opts("--limit", "all").limits["math500"] is None
    assert _opts().limits["reasoning_gym"] == 100


async def test_a_real_model_is_never_rated_by_a_stand_in(tmp_path: Path) -> None:
    out = tmp_path / "grid"
    argv = ["--out", str(out), "--provider", "openai", "--model", "gpt-4.1-mini",
            "--suites", "reasoning_gym", "--per-task", "1", "--methods", "elim,da"]  # fmt: skip
    opts = paper.options_from(paper.build_parser().parse_args(argv), argv)
    with pytest.raises(ConfigError, match="--difficulty-model: da needs a difficulty model"):
        await paper.run(opts)
    assert not out.exists()  # refused before anything is written


def _runs(out: Path, seeds: Sequence[int]) -> list[Run]:
    return [
        Run(suite, method, seed, _summary(cell_dir(out, suite, seed, method)))
        for suite in _suites()
        for seed in seeds
        for method in METHODS
    ]


HEADER = {"provider": "sim", "model": "sim-1", "rounds": 3, "simulated": True}


def test_one_seed_says_1_seed_instead_of_a_zero_spread(
    grid: tuple[Path, dict[str, Any], list[Any]], tmp_path: Path
) -> None:
    from matplotlib.container import ErrorbarContainer

    out, _, _ = grid
    suites = by_suite(_runs(out, [0]), METHODS)
    header = {**HEADER, "seeds": [0]}
    markdown = table_markdown(suites, METHODS, header)
    assert "± 0.0" not in markdown
    assert "1 seed (0), so no spread" in markdown
    cells = table_json(suites, header)["suites"]["reasoning_gym"]["methods"]
    assert cells["adpt"]["coverage_pct"]["std"] is None
    fig = plot_final(suites, tmp_path / "final.png", "final", METHODS, {})
    assert not any(isinstance(c, ErrorbarContainer) for c in fig.axes[0].containers)
    fig = plot_rounds(suites["reasoning_gym"], tmp_path / "rounds.png", "rounds", {})
    assert len(fig.axes[0].collections) == 0  # no zero-width band either
    # With two seeds: the spread, and its bars.
    both = by_suite(_runs(out, SEEDS), METHODS)
    assert "± " in table_markdown(both, METHODS, {**HEADER, "seeds": list(SEEDS)})
    fig = plot_final(both, tmp_path / "final2.png", "final", METHODS, {})
    assert any(isinstance(c, ErrorbarContainer) for c in fig.axes[0].containers)
    assert stat([57.0]).text() == "57.0 (1 seed)"  # a cell one seed short in a larger grid


def test_the_paper_figures_colour_each_method_as_ttc_report_does(
    grid: tuple[Path, dict[str, Any], list[Any]], tmp_path: Path
) -> None:
    from matplotlib.colors import to_hex

    out, _, _ = grid
    stats = by_suite(_runs(out, SEEDS), METHODS)["reasoning_gym"]
    labels = {"unif": "unif (matched)"}
    fig = plot_tokens(stats, tmp_path / "t.png", "tokens", labels)
    lines = fig.axes[0].get_lines()
    assert [ln.get_label() for ln in lines] == ["unif (matched)", "elim", "rand", "adpt"]
    for line, method in zip(lines, METHODS, strict=True):
        assert line.get_color() == METHOD_STYLES[method].color
        assert line.get_marker() == METHOD_STYLES[method].marker
    fig = plot_final({"reasoning_gym": stats}, tmp_path / "f.png", "final", METHODS, {})
    bars = fig.axes[0].patches
    assert [to_hex(b.get_facecolor()) for b in bars] == [METHOD_STYLES[m].color for m in METHODS]


def test_a_figure_of_one_method_keeps_its_title_inside(
    grid: tuple[Path, dict[str, Any], list[Any]], tmp_path: Path
) -> None:
    out, _, _ = grid
    [adpt] = [m for m in by_suite(_runs(out, [0]), METHODS)["reasoning_gym"] if m.method == "adpt"]
    title = (
        "livecodebench fixture (7 problems): tokens per round (prompt + thinking + response)\n"
        "sim / sim-1; 1 seed (0)\nsimulated (sim provider): measures the machinery, not the method"
    )
    fig = plot_usage([adpt], tmp_path / "u.png", title)
    assert figure_fits(fig)
    assert fig.get_suptitle().replace("\n", " ") == title.replace("\n", " ")


def test_the_livecodebench_fixture_is_called_a_fixture(tmp_path: Path) -> None:
    opts = GridOptions(suites=("livecodebench",), methods=("elim",), seeds=(0,), out=tmp_path,
                       sampling=Sampling(), limits={"livecodebench": 5})  # fmt: skip
    loaded = load_suite(opts, "livecodebench")  # no --lcb-data: the grid's default
    outcomes = []
    for name, items in (("fixture", loaded.items), ("other", loaded.items[1:])):
        path = tmp_path / name
        path.mkdir()
        config = {"items": len(items), "items_sha256": items_sha256(items)}
        (path / "config.json").write_bytes(orjson.dumps(config))
        outcomes.append(Outcome("livecodebench", 0, "elim", path, "ran"))
    assert paper.fixture_names(outcomes[:1]) == {
        "livecodebench": "livecodebench fixture (5 problems)"
    }
    assert paper.fixture_names(outcomes[1:]) == {}


def test_the_self_consistency_ablation_is_not_adpt_twice() -> None:
    # With --judge consensus adpt is sc's strategy: naming both would give two identical rows.
    with pytest.raises(ConfigError, match="which is sc"):
        _opts("--methods", "elim,rand,adpt,sc", "--judge", "consensus")
    assert _opts("--methods", "elim,rand,sc", "--judge", "consensus").methods == (
        "elim",
        "rand",
        "sc",
    )
