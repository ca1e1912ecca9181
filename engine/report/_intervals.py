"""Coverage with its uncertainty: each round's coverage with a 95% bootstrap interval over
questions, and the paired difference between methods run on the same questions.

Both come from each run's journal (the first round in which a question had a ground-truth-correct
response) and its results.jsonl (every question's id, so that a question never answered counts as
uncovered). The intervals are `_stats`'s, seeded: a report printed twice says the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ttc.engine._util._records import read_jsonl
from ttc.engine.journal._journal import journal_lines
from ttc.engine.report._stats import Interval, bootstrap_mean, mcnemar_exact, paired_difference
from ttc.engine.report._tables import _table

# Question id -> the first round with a correct response (None: never covered).
Covered = Mapping[str, int | None]


def covered_rounds(run_dir: Path) -> dict[str, int | None]:
    """Each question's first covered round, from the run's results.jsonl and journal."""
    first: dict[str, int | None] = {}
    results = run_dir / "results.jsonl"
    if results.is_file():
        for _, record in read_jsonl(results):
            first[str(record["id"])] = None
    journal = run_dir / "journal.jsonl"
    if journal.is_file():
        for _, event in journal_lines(journal):
            if event["ev"] != "verdict" or not event.get("correct", False):
                continue
            item, t = str(event["item"]), int(event["round"])
            known = first.get(item)
            first[item] = t if known is None else min(known, t)
    return first


def coverage_intervals(covered: Covered, rounds: int, questions: int) -> list[Interval]:
    """Coverage after each round 1..`rounds` and its 95% bootstrap interval over the
    `questions` questions (those the journal never names count as uncovered)."""
    firsts = list(covered.values())
    firsts += [None] * max(0, questions - len(firsts))
    return [
        bootstrap_mean([1.0 if f is not None and f <= t else 0.0 for f in firsts])
        for t in range(1, rounds + 1)
    ]


def paired_table(runs: Mapping[str, Covered], reference: str | None = None) -> str:
    """The final coverage of `reference` (the last method by default) minus each other
    method's, over the questions both ran: the difference in points, its 95% interval (paired
    bootstrap over questions) and McNemar's exact p; "" with fewer than two runs."""
    names = list(runs)
    if len(names) < 2:
        return ""
    ref = reference if reference is not None else names[-1]
    rows = []
    for other in (n for n in names if n != ref):
        common = sorted(runs[ref].keys() & runs[other].keys())
        a = [float(runs[ref][q] is not None) for q in common]
        b = [float(runs[other][q] is not None) for q in common]
        diff = paired_difference(a, b)
        wins = sum(x > y for x, y in zip(a, b, strict=True))
        losses = sum(y > x for x, y in zip(a, b, strict=True))
        rows.append(
            [
                f"{ref} - {other}",
                str(len(common)),
                f"{100 * diff.estimate:+.1f}",
                f"[{100 * diff.lo:+.1f}, {100 * diff.hi:+.1f}]",
                f"{wins}/{losses}",
                f"{mcnemar_exact(wins, losses):.3g}",
            ]
        )
    header = ["final coverage", "questions", "diff pts", "95% CI", "only/only", "McNemar p"]
    return "paired differences on the same questions:\n" + _table(header, rows)


def interval_cells(intervals: Sequence[Interval]) -> list[str]:
    """Each interval as a table cell, in percent: `[35.0, 47.5]`."""
    return [f"[{100 * i.lo:.1f}, {100 * i.hi:.1f}]" for i in intervals]


def interval_table(runs: Mapping[str, Covered], rounds: int, questions: int) -> str:
    """Per method, its coverage after each round with the 95% bootstrap interval."""
    header = ["method", *[f"R{t} coverage % [95% CI]" for t in range(1, rounds + 1)]]
    rows = []
    for method, covered in runs.items():
        cells = coverage_intervals(covered, rounds, questions)
        rows.append(
            [
                method,
                *(f"{100 * c.estimate:.1f} [{100 * c.lo:.1f}, {100 * c.hi:.1f}]" for c in cells),
            ]
        )
    return _table(header, rows)
