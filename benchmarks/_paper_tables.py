"""`benchmarks/paper.py`'s results.md and results.json: final-round coverage, accuracy and tokens
per suite and method (the paper's Figure 8 as a table), adpt's gains (Tables 5-6), then every other
table of the paper in its own shape (`_paper_shapes`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from _paper_shapes import (
    accuracy_table,
    figure1_average,
    figure1_row,
    figure1_table,
    judged_by,
    own_means,
    paper_name,
    per_round_coverage,
    samples_table,
    tokens_table,
)
from _paper_stats import (
    SIM_BANNER,
    MethodStats,
    Stat,
    differences,
    gains,
    suite_name,
    warmup_sampling,
)

# Tables 5-6 name the methods adpt is compared with by a letter.
GAIN_LETTERS = {"unif": "U", "elim": "E", "rand": "R"}


def figure1_rows(
    suites: Mapping[str, list[MethodStats]],
    header: Mapping[str, Any],
    cross: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Figure 1's rows: this grid's model first, then the other grids'."""
    mine = {"model": f"{header['provider']} / {header['model']}", "dir": "this grid"}
    return [{**mine, **figure1_row(own_means(suites))}, *(dict(row) for row in cross)]


def table_json(
    suites: Mapping[str, list[MethodStats]],
    header: Mapping[str, Any],
    cross: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    rows = figure1_rows(suites, header, cross)
    return {
        **header,
        "std": "sample standard deviation over seeds (n - 1); null for one seed",
        "suites": {
            suite: {
                "methods": {m.method: m.json() for m in stats},
                "adpt_gain_points": {k: v.json() for k, v in gains(stats).items()},
                "minus_unif_points": {k: v.json() for k, v in differences(stats, "unif").items()},
                "minus_elim_points": {k: v.json() for k, v in differences(stats, "elim").items()},
                "warmup_sampling_pct": _sampling(stats, int(header.get("k", 1))),
            }
            for suite, stats in suites.items()
        },
        "figure1": {"models": rows, "average": figure1_average(rows)},
    }


def _sampling(stats: Sequence[MethodStats], k: int) -> dict[str, float] | None:
    """pass@1, pass@K and maj@K of the model on a suite, from the first run with K > 1 samples
    per question in its warm-up (every method of a seed shares it), mean over its seeds."""
    for m in stats:
        found = [v for r in m.runs if (v := warmup_sampling(r, k)) is not None]
        if found:
            return {key: sum(f[key] for f in found) / len(found) for key in found[0]}
    return None


def interval_tables(
    suites: Mapping[str, list[MethodStats]], shown: Sequence[str], header: Mapping[str, Any]
) -> list[str]:
    """Final-round coverage with its 95% interval over seeds (Student's t), each method's paired
    difference against unif and elim, and, with K > 1, pass@k and maj@k of the warm-up."""
    lines = ["", "## Final-round coverage with 95% intervals over seeds", ""]
    lines.append(
        "Mean [95% t-interval over seeds] in %; then each method minus unif and minus elim, "
        "in points, paired by seed (the same questions and warm-up). One seed: no interval. "
        "`ttc report` and `ttc compare` give intervals over questions for one run."
    )
    lines.append("")
    judged = {judged_by(stats, header) for stats in suites.values()}
    if any(j.startswith("mixes") or j.startswith("every") for j in judged):
        lines.extend(["", f"Judgements: {'; '.join(sorted(judged))}; coverage is ground truth."])
        lines.append("")
    lines.append("| suite | method | coverage % | − unif (points) | − elim (points) |")
    lines.append("| --- | --- | --- | --- | --- |")
    for suite, stats in suites.items():
        vs_unif, vs_elim = differences(stats, "unif"), differences(stats, "elim")
        for m in (s for s in stats if s.method in shown):
            u = vs_unif[m.method].interval_text(2, signed=True) if m.method in vs_unif else "-"
            e = vs_elim[m.method].interval_text(2, signed=True) if m.method in vs_elim else "-"
            cov = m.final("coverage").interval_text(percent=True)
            lines.append(f"| {suite_name(suite, header)} | {m.method} | {cov} | {u} | {e} |")
    k = int(header.get("k", 1))
    rows = [(suite, v) for suite, stats in suites.items() if (v := _sampling(stats, k)) is not None]
    if rows:
        lines.extend(["", f"## pass@k and maj@k of the warm-up (K = {k})", ""])
        lines.append(
            f"Over each question's {k} warm-up samples: unbiased pass@1 and pass@{k} (Chen et "
            f"al. 2021), and maj@{k} (the most common answer is right), in %, mean over seeds."
        )
        lines.append("")
        lines.append(f"| suite | questions | pass@1 | pass@{k} | maj@{k} |")
        lines.append("| --- | --- | --- | --- | --- |")
        for suite, v in rows:
            lines.append(
                f"| {suite_name(suite, header)} | {v['questions']:.0f} | {v['pass@1']:.1f} | "
                f"{v[f'pass@{k}']:.1f} | {v[f'maj@{k}']:.1f} |"
            )
    return lines


def _spread(header: Mapping[str, Any]) -> str:
    if len(header["seeds"]) == 1:
        return f"1 seed ({header['seeds'][0]}), so no spread"
    return "mean ± std over seeds (sample std; a cell marked 1 seed has no spread)"


def table_markdown(
    suites: Mapping[str, list[MethodStats]],
    methods: Sequence[str],
    header: Mapping[str, Any],
    cross: Sequence[Mapping[str, Any]] = (),
) -> str:
    title = "# Final-round coverage and accuracy"
    if header.get("simulated"):
        title += f": {SIM_BANNER}"
    lines = [title, ""]
    lines.append(
        f"{header['provider']} / {header['model']}; seeds {header['seeds']}; "
        f"R = {header['rounds']}; {_spread(header)}; coverage and accuracy in %, gains in points."
    )
    if header.get("matched"):
        lines.append(f"Matched budgets: {header['matched']}.")
    if header.get("cost_usd") is not None:
        how = f" (batch mode: {header['batch']})" if header.get("batch") else ""
        lines.append(f"Cost: ${header['cost_usd']:.4f} for these runs{how}.")
    shown = [m for m in methods if any(s.method == m for st in suites.values() for s in st)]
    # With one seed in the whole grid the line above says so once; no cell repeats it.
    one_seed = len(header["seeds"]) == 1

    def text(stat: Stat, digits: int = 1) -> str:
        return f"{stat.mean:.{digits}f}" if one_seed else stat.text(digits)

    def block(name: str, cell: Any) -> None:
        lines.extend(["", f"## {name}", ""])
        lines.append("| suite | " + " | ".join(shown) + " |")
        lines.append("| --- |" + " --- |" * len(shown))
        for suite, stats in suites.items():
            found = {s.method: s for s in stats}
            row = [cell(found[m]) if m in found else "-" for m in shown]
            lines.append(f"| {suite_name(suite, header)} | " + " | ".join(row) + " |")

    block("Final-round coverage (%): the paper's Figure 8", lambda s: text(s.final("coverage")))
    block("Final-round accuracy (%)", lambda s: text(s.final("accuracy")))
    block("Output tokens per run (mean)", lambda s: f"{s.total('output_tokens').mean:,.0f}")
    others = [m for m in shown if m != "adpt"]
    if "adpt" in shown and others:
        lines.extend(["", "## Coverage improvement of adpt (points): the paper's Tables 5–6", ""])
        lines.append(
            "Final-round coverage of Ours (Adpt) minus each method's, paired by seed; "
            "U/E/R = Uniform/Elimination/Random."
        )
        lines.append("")
        heads = [GAIN_LETTERS.get(m, m) for m in others]
        lines.append("| Benchmark | " + " | ".join(heads) + " |")
        lines.append("| --- |" + " --- |" * len(others))
        for suite, stats in suites.items():
            g = gains(stats)
            row = [text(g[m], 2) if m in g else "-" for m in others]
            lines.append(f"| {paper_name(suite, header)} | " + " | ".join(row) + " |")
    lines += interval_tables(suites, shown, header)
    lines += per_round_coverage(suites, header)
    lines += samples_table(suites, header)
    lines += tokens_table(suites, header)
    lines += accuracy_table(suites, header)
    rows = figure1_rows(suites, header, cross)
    lines += figure1_table(rows, bool(header.get("simulated")))
    return "\n".join(lines) + "\n"


def write_tables(
    suites: Mapping[str, list[MethodStats]],
    methods: Sequence[str],
    header: Mapping[str, Any],
    out: Path,
    cross: Sequence[Mapping[str, Any]] = (),
) -> tuple[Path, Path]:
    md, js = out / "results.md", out / "results.json"
    md.write_text(table_markdown(suites, methods, header, cross), encoding="utf-8")
    js.write_bytes(orjson.dumps(table_json(suites, header, cross), option=orjson.OPT_INDENT_2))
    return md, js
