"""The paper's tables in the paper's shape, as markdown, so a grid's numbers sit beside the paper's.

- Table 1 (GPQA): coverage against samples per question, rows Fixed (elim: the same zero-shot
  prompt every round) and Neighbour (adpt), columns 1..R·K.
- Tables 2, 3 and 7: coverage per round, rows the methods, columns R1..R{R} (R1 is the
  warm-up, the paper's R0: rounds are numbered from 1 in every ttc output), one table per suite
  (Table 2 is MinervaMath, Table 3 MATH-500, Table 7 the mixed failure-mode set).
- Table 4: tokens per round (prompt + thinking + response), rows Elim, Ours (adpt) and Savings,
  columns R1.. and Total.
- The self-consistency panel (Figure 7f): accuracy, not coverage, per round, rounds marked
  explicitly, for every suite on which `sc` ran.
- Figure 1: final-round coverage averaged over the benchmarks, per method, one row per model
  (this grid's and those of `--cross-model`), and their average.

Cells are means over seeds (the paper prints means); results.json holds every spread.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from _paper_stats import MethodStats, suite_name

from ttc.engine import ConfigError

# The paper's names for the methods and benchmarks, and the order of its rows.
PAPER_METHODS = {
    "unif": "Unif",
    "da": "DA",
    "elim": "Elim",
    "temp": "Temp",
    "fixed-icl": "Fixed ICL",
    "sc": "Ours (SC)",
    "rand": "Ours (Rand)",
    "adpt": "Ours (Adpt)",
}
PAPER_SUITES = {
    "math500": "MATH-500",
    "livecodebench": "LiveCodeBench",
    "minerva": "MinervaMath",
    "gpqa": "GPQA",
    "reasoning_gym": "ReasonGym",
    "mixed": "Mixed (LiveCodeBench, MATH-500, GPQA)",
}
# Which of the paper's tables is a suite's per-round coverage table, with the paper's model.
ROUND_TABLES = {
    "minerva": "Table 2: MinervaMath, Gemini-2.5-flash-lite thinking",
    "math500": "Table 3: MATH-500, GPT-4.1-mini",
    "mixed": "Table 7: the deliberately diverse set, Appendix D",
}
FIGURE1_METHODS = ("unif", "elim", "rand", "adpt")
BENCHMARKS = ("math500", "livecodebench", "minerva", "gpqa", "reasoning_gym")


def paper_name(suite: str, header: Mapping[str, Any]) -> str:
    """The paper's name of a suite (a fixture stays called a fixture)."""
    label = suite_name(suite, header)
    return label if label != suite else PAPER_SUITES.get(suite, suite)


def _rows(stats: Sequence[MethodStats]) -> list[MethodStats]:
    order = list(PAPER_METHODS)
    return sorted(stats, key=lambda m: order.index(m.method) if m.method in order else len(order))


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _rounds(n: int) -> list[str]:
    # Numbered as every ttc output numbers rounds, from 1 (the paper's R0 is R1 here).
    return [f"R{t + 1}" for t in range(n)]


def per_round_coverage(
    suites: Mapping[str, list[MethodStats]], header: Mapping[str, Any]
) -> list[str]:
    """Tables 2, 3 and 7: coverage (%) per round, one table per suite."""
    lines = ["", "## Coverage (%) across rounds: the paper's Tables 2, 3 and 7", ""]
    lines.append(
        "R1 is the warm-up round (the paper's R0: ttc numbers rounds from 1 everywhere); means "
        "over seeds."
    )
    for suite, stats in suites.items():
        which = ROUND_TABLES.get(suite)
        where = f"the paper's {which}" if which else "in the paper as a figure, not a table"
        lines.extend(["", f"### {paper_name(suite, header)} ({where})", ""])
        rows = [
            [
                PAPER_METHODS.get(m.method, m.method),
                *(f"{s.mean:.1f}" for s in m.by_round("coverage")),
            ]
            for m in _rows(stats)
        ]
        lines.extend(_table(["Method", *_rounds(stats[0].rounds)], rows))
    return lines


def samples_table(suites: Mapping[str, list[MethodStats]], header: Mapping[str, Any]) -> list[str]:
    """Table 1: coverage against samples per question on GPQA, Fixed (elim) and Neighbour (adpt)."""
    stats = {m.method: m for m in suites.get("gpqa", [])}
    if "elim" not in stats or "adpt" not in stats:
        return []
    k = int(header.get("k", 1))
    n = stats["elim"].rounds
    lines = ["", "## Coverage (%) vs. number of samples per question: the paper's Table 1", ""]
    lines.append(
        f"{paper_name('gpqa', header)}; Fixed: elim (the same zero-shot prompt every round), "
        f"Neighbour: adpt (solved neighbours' responses); {k} sample(s) per round; an eliminated "
        "question counts as covered at every later sample. Means over seeds."
    )
    if k * n != 8:
        lines.append(
            f"The paper's Table 1 has 8 columns (1 to 8 samples per question): run the grid "
            f"with -R 8 (K = 1) for them; this one has R x K = {n} x {k} = {k * n}."
        )
    lines.append("")
    rows = [
        [name, *(f"{s.mean:.1f}" for s in stats[method].by_round("coverage"))]
        for name, method in (("Fixed", "elim"), ("Neighbour", "adpt"))
    ]
    return lines + _table(["#Samples", *(str(k * (t + 1)) for t in range(n))], rows)


def tokens_table(suites: Mapping[str, list[MethodStats]], header: Mapping[str, Any]) -> list[str]:
    """Table 4: tokens per round (prompt + thinking + response), Elim, Ours and the savings."""
    lines: list[str] = []
    for suite, stats in suites.items():
        found = {m.method: m for m in stats}
        if "elim" not in found or "adpt" not in found:
            continue
        if not lines:
            lines = ["", "## Token usage (prompt + thinking + response) per round: the paper's "
                     "Table 4", "", f"Means over {len(header['seeds'])} seed(s); the paper's "
                     "Table 4 is GPQA-Diamond with Gemini-2.5-flash-lite thinking."]  # fmt: skip
        elim, ours = found["elim"].all_tokens_by_round(), found["adpt"].all_tokens_by_round()
        saved = [e - o for e, o in zip(elim, ours, strict=True)]
        if sum(saved) < 0 and not _thinks(found["adpt"]) and _WHY_NEGATIVE not in lines:
            lines.extend(["", _WHY_NEGATIVE])
        rows = [
            [name, *(f"{v:,.0f}" for v in values), f"{sum(values):,.0f}"]
            for name, values in (("Elim", elim), ("Ours", ours), ("Savings", saved))
        ]
        lines.extend(["", f"### {paper_name(suite, header)}", ""])
        lines.extend(_table(["Method", *_rounds(len(elim)), "Total"], rows))
    return lines


# Why Table 4's savings can be negative: said under it when they are and nothing thought.
_WHY_NEGATIVE = (
    "Savings are negative here: these runs report no thinking tokens (the simulator's default, "
    "`--sim-thinking 0`; a model without reasoning), so every adaptive prompt's demonstrations "
    "(P solved responses) are added input that nothing offsets. The paper's Table 4 model "
    "thinks: thousands of thinking tokens a response, which adpt saves by solving questions in "
    "fewer rounds. Give the simulator thinking tokens (`--sim-thinking 4`: 4 per output token) "
    "to rehearse that configuration."
)


def _thinks(stats: MethodStats) -> bool:
    """Whether any run of the method reported thinking tokens."""
    return any(int(r.summary.get("thinking_tokens", 0) or 0) > 0 for r in stats.runs)


# The presets judged by the agreement of their answers (no oracle), whatever --judge says.
AGREEING = ("sc", "esc", "asc")


def judged_by(stats: Sequence[MethodStats], header: Mapping[str, Any]) -> str:
    """How the methods of a panel are judged: all by consensus, or which by which."""
    everyone = header.get("judge") == "consensus"
    agree = [m.method for m in stats if everyone or m.method in AGREEING]
    truth = [m.method for m in stats if m.method not in agree]
    if not truth:
        return "every method judged by consensus (no oracle)"
    return (
        f"mixes consensus-judged ({', '.join(agree)}) and ground-truth-judged "
        f"({', '.join(truth)}) methods"
    )


_SC_TITLE = "## Accuracy (%) per round: the self-consistency panel (the paper's Figure 7f)"
_SC_NOTE = (
    "Self-consistency picks a final answer, so the paper reports accuracy here; rounds are marked "
    "explicitly. Means over seeds."
)


def accuracy_table(suites: Mapping[str, list[MethodStats]], header: Mapping[str, Any]) -> list[str]:
    """The self-consistency panel: accuracy (%) per round, where `sc` ran."""
    lines: list[str] = []
    for suite, stats in suites.items():
        if not any(m.method == "sc" for m in stats):
            continue
        if not lines:
            lines = ["", _SC_TITLE, "", _SC_NOTE]
        rows = [
            [
                PAPER_METHODS.get(m.method, m.method),
                *(f"{s.mean:.1f}" for s in m.by_round("accuracy")),
            ]
            for m in _rows(stats)
        ]
        heads = [f"Round {t + 1}" for t in range(stats[0].rounds)]
        lines.extend(["", f"### {paper_name(suite, header)}: {judged_by(stats, header)}", ""])
        lines.extend(_table(["Method", *heads], rows))
    return lines


def figure1_row(suites: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """One model's Figure 1 bars: each method's final-round coverage averaged over the benchmarks
    on which all of the four methods ran. `suites`: suite -> method -> mean coverage (%)."""
    common = [s for s in BENCHMARKS if s in suites and all(m in suites[s] for m in FIGURE1_METHODS)]
    means = {m: statistics.fmean(suites[s][m] for s in common) if common else None
             for m in FIGURE1_METHODS}  # fmt: skip
    return {"suites": common, "coverage_pct": means}


def own_means(suites: Mapping[str, list[MethodStats]]) -> dict[str, dict[str, float]]:
    """suite -> method -> mean final-round coverage (%) of this grid."""
    return {s: {m.method: m.final("coverage").mean for m in stats} for s, stats in suites.items()}


def cross_model(dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """Figure 1's rows of other grids (other models), read from their results.json."""
    rows = []
    for folder in dirs:
        path = folder / "results.json"
        try:
            data = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ConfigError(
                f"--cross-model: cannot read {path} ({exc}); name a grid's --out"
            ) from None
        means = {
            suite: {m: cell["coverage_pct"]["mean"] for m, cell in body["methods"].items()}
            for suite, body in data.get("suites", {}).items()
        }
        model = f"{data.get('provider')} / {data.get('model')}"
        rows.append({"model": model, "dir": str(folder), **figure1_row(means)})
    return rows


def figure1_table(rows: Sequence[Mapping[str, Any]], simulated: bool) -> list[str]:
    """Figure 1 as a table: one row per model and, with several, their average."""
    lines = [
        "",
        "## Average final-round coverage (%) over the benchmarks: the paper's Figure 1",
        "",
    ]
    lines.append(
        "Each model's final-round coverage averaged over the benchmarks on which all four methods "
        "ran (the paper: 5 benchmarks, then averaged over its 4 model variants); add other "
        "grids' rows with --cross-model DIR,..."
    )
    if simulated:
        lines.append("A row of the sim provider measures the machinery, not the method.")
    lines.append("")
    heads = ["Model", "Benchmarks", *(PAPER_METHODS[m] for m in FIGURE1_METHODS)]

    def cells(means: Mapping[str, float | None]) -> list[str]:
        return [f"{v:.1f}" if v is not None else "-" for v in (means[m] for m in FIGURE1_METHODS)]

    table = [[r["model"], str(len(r["suites"])), *cells(r["coverage_pct"])] for r in rows]
    if len(rows) > 1:
        table.append([f"average over {len(rows)} models", "", *cells(figure1_average(rows))])
    return lines + _table(heads, table)


def figure1_average(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """The mean of the models' Figure 1 bars (over the models that have one)."""
    out: dict[str, float | None] = {}
    for m in FIGURE1_METHODS:
        values = [r["coverage_pct"][m] for r in rows if r["coverage_pct"][m] is not None]
        out[m] = statistics.fmean(values) if values else None
    return out
