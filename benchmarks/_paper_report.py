"""The figures of `benchmarks/paper.py`, from the statistics of `_paper_stats`: coverage per round,
coverage against output tokens, tokens per round, and final-round coverage (the paper's Figure 8).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from _paper_shapes import PAPER_METHODS, judged_by
from _paper_stats import (
    SIM_BANNER,
    USAGE,
    MethodStats,
    Run,
    Stat,
    by_suite,
    gains,
    stat,
    suite_name,
)
from _paper_tables import table_json, table_markdown, write_tables

from ttc.engine.report import PlotLine, method_style, plot_lines, wrap_title

__all__ = [
    "SIM_BANNER",
    "MethodStats",
    "Run",
    "Stat",
    "by_suite",
    "gains",
    "plot_final",
    "plot_rounds",
    "plot_tokens",
    "plot_usage",
    "stat",
    "table_json",
    "table_markdown",
    "write_figures",
    "write_tables",
]


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bar_figure(width: float, height: float, title: str, rows: int = 1, cols: int = 1) -> Any:
    """A figure laid out so that nothing is clipped, its title wrapped to its width."""
    fig, axes = _plt().subplots(
        rows, cols, figsize=(width, height), sharey=True, squeeze=False, layout="constrained"
    )
    fig.suptitle(wrap_title(title, width), fontsize=9)
    return fig, axes


def _save(fig: Any, path: Path) -> Any:
    fig.savefig(path, dpi=120)
    _plt().close(fig)
    return fig


def plot_rounds(
    stats: Sequence[MethodStats], path: Path, title: str, labels: Mapping[str, str]
) -> Any:
    """(a) Coverage per round, mean over seeds, shaded ± 0.5 std (none for one seed)."""
    lines = []
    for m in stats:
        by_round = m.coverage_by_round()
        band = None
        if all(s.std is not None for s in by_round):
            band = [(s.mean - 0.5 * (s.std or 0), s.mean + 0.5 * (s.std or 0)) for s in by_round]
        xs = [float(t) for t in range(1, len(by_round) + 1)]
        label = labels.get(m.method, m.method)
        lines.append(PlotLine(label, m.method, xs, [s.mean for s in by_round], band))
    return plot_lines({"": lines}, path, title, xlabel="round (1 = warm-up)", rounds_axis=True)


def plot_accuracy(
    stats: Sequence[MethodStats], path: Path, title: str, labels: Mapping[str, str]
) -> Any:
    """The self-consistency panel (the paper's Figure 7f): accuracy per round, rounds marked
    explicitly, mean over seeds, shaded ± 0.5 std (none for one seed)."""
    lines = []
    for m in stats:
        by_round = m.by_round("accuracy")
        band = None
        if all(s.std is not None for s in by_round):
            band = [(s.mean - 0.5 * (s.std or 0), s.mean + 0.5 * (s.std or 0)) for s in by_round]
        xs = [float(t) for t in range(1, len(by_round) + 1)]
        label = labels.get(m.method, PAPER_METHODS.get(m.method, m.method))
        lines.append(PlotLine(label, m.method, xs, [s.mean for s in by_round], band))
    return plot_lines(
        {"": lines}, path, title, xlabel="Round", ylabel="accuracy (%)", rounds_axis=True
    )


def plot_tokens(
    stats: Sequence[MethodStats], path: Path, title: str, labels: Mapping[str, str]
) -> Any:
    """(b) Coverage against cumulative output tokens, both means over seeds, a marker per round."""
    lines = [
        PlotLine(
            labels.get(m.method, m.method),
            m.method,
            m.mean_by_round("output_tokens", cumulative=True),
            [s.mean for s in m.coverage_by_round()],
        )
        for m in stats
    ]
    over = "1 seed" if all(len(m.runs) == 1 for m in stats) else "mean over seeds"
    xlabel = f"cumulative output tokens ({over}; thinking excluded)"
    return plot_lines({"": lines}, path, title, xlabel=xlabel)


def plot_usage(stats: Sequence[MethodStats], path: Path, title: str) -> Any:
    """(c) Tokens per round, prompt + thinking + response stacked, one panel per method."""
    cols = min(4, len(stats))
    rows = -(-len(stats) // cols)
    fig, axes = _bar_figure(max(6.0, 3.2 * cols), 2.6 * rows + 1.6, title, rows, cols)
    shades = ("#c6dbef", "#fdae6b", "#3182bd")
    for ax, m in zip(axes.flat, stats, strict=False):
        xs = list(range(1, m.rounds + 1))
        bottom = [0.0] * m.rounds
        for (key, name), shade in zip(USAGE, shades, strict=True):
            values = m.mean_by_round(key)
            ax.bar(xs, values, bottom=bottom, color=shade, label=name, edgecolor="white")
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_title(m.method, fontsize=9, color=method_style(m.method).color)
        ax.set_xticks(xs)
        ax.set_xlabel("round", fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    for ax in axes.flat[len(stats) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("tokens per round", fontsize=8)
    handles, names = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", fontsize=8, ncols=3)
    return _save(fig, path)


def plot_final(
    suites: Mapping[str, list[MethodStats]],
    path: Path,
    title: str,
    order: Sequence[str],
    names: Mapping[str, str],
) -> Any:
    """Final-round coverage per suite and method, mean with ± std bars (the paper's Figure 8);
    a bar of one seed has none."""
    present = {m.method for st in suites.values() for m in st}
    methods = [m for m in order if m in present]
    fig, axes = _bar_figure(max(7.0, 1.6 * len(suites) + 3), 5.2, title)
    ax = axes[0, 0]
    width = 0.8 / max(1, len(methods))
    for j, method in enumerate(methods):
        xs, ys, errs = [], [], []
        for i, stats in enumerate(suites.values()):
            found = next((m for m in stats if m.method == method), None)
            if found is not None:
                s = found.final("coverage")
                xs.append(i + (j - (len(methods) - 1) / 2) * width)
                ys.append(s.mean)
                errs.append(s.std)
        ax.bar(xs, ys, width, color=method_style(method).color, label=method)
        # Error bars only where there is a spread: a bar of one seed has none, not a zero one.
        bars = [(x, y, e) for x, y, e in zip(xs, ys, errs, strict=True) if e is not None]
        if bars:
            bx, by, be = zip(*bars, strict=True)
            ax.errorbar(bx, by, yerr=be, fmt="none", ecolor="black", capsize=2, linewidth=1)
    ax.set_xticks(range(len(suites)))
    ax.set_xticklabels([wrap_title(names.get(s, s), 1.5) for s in suites], fontsize=8)
    ax.set_ylabel("final-round coverage (%)")
    ax.grid(alpha=0.3, axis="y")
    ax.set_ylim(0, max(100.0, ax.get_ylim()[1]))
    fig.legend(fontsize=8, ncols=min(len(methods), 8), loc="outside lower center")
    return _save(fig, path)


def write_figures(
    suites: Mapping[str, list[MethodStats]],
    out: Path,
    header: Mapping[str, Any],
    labels: Mapping[str, str],
    methods: Sequence[str],
) -> dict[str, Any]:
    """Every figure; returns their paths (per suite, and the overall one)."""
    simulated = bool(header.get("simulated"))
    seeds = header["seeds"]
    one = len(seeds) == 1
    who = f"{header['provider']} / {header['model']}; " + (
        f"1 seed ({seeds[0]})" if one else f"{len(seeds)} seeds ({', '.join(map(str, seeds))})"
    )

    def title(what: str) -> str:
        text = f"{what}\n{who}"
        return f"{text}\n{SIM_BANNER}" if simulated else text

    paths: dict[str, Any] = {"suites": {}}
    for suite, stats in suites.items():
        folder = out / suite
        folder.mkdir(parents=True, exist_ok=True)
        n = int(stats[0].runs[0].summary["questions"])
        where = suite_name(suite, header)
        if where == suite:
            where = f"{suite} ({n} questions)"
        figs = {
            "coverage_per_round": folder / "coverage_per_round.png",
            "coverage_vs_tokens": folder / "coverage_vs_output_tokens.png",
            "tokens_per_round": folder / "tokens_per_round.png",
        }
        # With one seed the line under says "1 seed"; with more, each figure says what it shows.
        spread = "" if one else ", mean ± 0.5 std over seeds"
        means = "" if one else ", means over seeds"
        plot_rounds(stats, figs["coverage_per_round"],
                    title(f"{where}: coverage per round{spread}"), labels)  # fmt: skip
        plot_tokens(stats, figs["coverage_vs_tokens"],
                    title(f"{where}: coverage vs cumulative output tokens{means}"),
                    labels)  # fmt: skip
        plot_usage(stats, figs["tokens_per_round"],
                   title(f"{where}: tokens per round (prompt + thinking + response)"
                         f"{'' if one else ', mean over seeds'}"))  # fmt: skip
        if any(m.method == "sc" for m in stats):  # the self-consistency panel (Figure 7f)
            figs["accuracy_per_round"] = folder / "accuracy_per_round.png"
            judged = judged_by(stats, header)
            plot_accuracy(stats, figs["accuracy_per_round"],
                          title(f"{where}: accuracy per round, {judged}{spread}"),
                          labels)  # fmt: skip
        paths["suites"][suite] = {k: str(v) for k, v in figs.items()}
    final = out / "final_coverage.png"
    what = "no error bars (1 seed)" if one else "mean ± std over seeds"
    names = {s: suite_name(s, header) for s in suites}
    plot_final(suites, final, title(f"final-round coverage, {what}"), methods, names)
    paths["final_coverage"] = str(final)
    return paths
