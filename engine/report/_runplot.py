"""`ttc report`'s labels and plot: each run named by its method and as much of its path as tells
it from the others, and one panel per test set (coverage on one is not comparable with another).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ttc.engine.report._plots import PlotLine, plot_lines

if TYPE_CHECKING:
    from ttc.engine.report._runreport import RunReport

SIM_SHORT = "simulated: measures the machinery, not the method"


def labelled(runs: Sequence[RunReport]) -> list[RunReport]:
    """The runs, each labelled by its method and as much of its path as tells it from the others
    (`adpt`, `adpt (seed1)`): never the method twice, as a directory named after it would."""
    depth = [0 if r.path.name == r.method else 1 for r in runs]
    while True:
        labels = [_label(r, d) for r, d in zip(runs, depth, strict=True)]
        clash = [i for i, lab in enumerate(labels) if labels.count(lab) > 1]
        deeper = [i for i in clash if depth[i] < len(_where(runs[i]))]
        if not deeper:
            break
        for i in deeper:
            depth[i] += 1
    return [replace(r, label=lab) for r, lab in zip(runs, labels, strict=True)]


def _where(run: RunReport) -> tuple[str, ...]:
    """The run directory's path parts, less a last part that is only the method's name."""
    parts = run.path.resolve().parts[1:]
    return parts[:-1] if parts and parts[-1] == run.method else parts


def _label(run: RunReport, depth: int) -> str:
    where = "/".join(_where(run)[-depth:]) if depth else ""
    return f"{run.method} ({where})" if where else run.method


def test_set(run: RunReport) -> str:
    return f"{run.suite}, {run.questions} questions"


def plot_runs(runs: Sequence[RunReport], path: Path) -> Any:
    """Coverage against cumulative output tokens, one line per run, one panel per test set:
    coverage on one test set is not comparable with coverage on another."""
    panels: dict[str, list[PlotLine]] = {}
    mixed = len({r.simulated for r in runs}) > 1
    for run in runs:
        label = run.label if run.complete else f"{run.label}, stopped"
        if mixed and run.simulated:
            label += ", simulated"
        lines = panels.setdefault(test_set(run), [])
        # Two runs may share a label (the same directory given twice).
        taken = {line.label for ls in panels.values() for line in ls}
        unique, n = label, 1
        while unique in taken:
            n += 1
            unique = f"{label} #{n}"
        same = sum(line.method == run.method for line in lines)
        lines.append(
            PlotLine(
                unique,
                run.method,
                list(itertools.accumulate(float(r["output_tokens"]) for r in run.rounds)),
                [100 * float(r["coverage"]) for r in run.rounds],
                linestyle=("-", "--", ":", "-.")[same % 4],
            )
        )
    models = sorted({r.model for r in runs})
    title = f"coverage vs cumulative output tokens; {', '.join(models)}"
    if len(panels) == 1:
        title += f"; {next(iter(panels))}"
    else:
        title += f"; one panel per test set ({len(panels)}): not comparable across panels"
    if any(r.simulated for r in runs):
        title += f"\n{SIM_SHORT}"
    return plot_lines(panels, path, title, xlabel="cumulative output tokens")
