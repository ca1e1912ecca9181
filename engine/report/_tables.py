"""Tables from per-round totals (the `rounds` list of summary.json); the plots are in _plots."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

RoundRow = Mapping[str, Any]


def accuracy_of(r: RoundRow) -> float | None:
    """A round's accuracy; None for a summary written before accuracy was recorded."""
    value = r.get("accuracy")
    return None if value is None else float(value)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def round_table(rounds: Sequence[RoundRow]) -> str:
    """The per-round table: round, active, solved, coverage, accuracy, requests, output tokens.

    `solved` counts the questions the judgement resolved; coverage (some response correct) and
    accuracy (the selected answer correct) are by ground truth.
    """
    header = ["round", "active", "solved", "coverage %", "accuracy %", "requests", "output tokens"]
    rows = [
        [
            str(r["round"]) + ("" if r["adaptive"] else " (warm-up)"),
            str(r["active"]),
            str(r["solved"]),
            f"{100 * r['coverage']:.1f}",
            _percent(accuracy_of(r)),
            str(r["requests"] + r.get("replayed", 0)),
            f"{r['output_tokens']:,}",
        ]
        for r in rounds
    ]
    return _table(header, rows)


def compare_table(runs: Mapping[str, Sequence[RoundRow]]) -> str:
    """Per method: coverage and accuracy after each round, then total output tokens and requests."""
    n_rounds = max((len(r) for r in runs.values()), default=0)
    header = [
        "method",
        *[f"R{i + 1} cov %" for i in range(n_rounds)],
        *[f"R{i + 1} acc %" for i in range(n_rounds)],
        "output tokens",
        "requests",
    ]
    rows = []
    for method, rounds in runs.items():
        cov = [f"{100 * r['coverage']:.1f}" for r in rounds]
        cov += [""] * (n_rounds - len(cov))
        acc = [_percent(accuracy_of(r)) for r in rounds]
        acc += [""] * (n_rounds - len(acc))
        out = sum(int(r["output_tokens"]) for r in rounds)
        req = sum(int(r["requests"]) + int(r.get("replayed", 0)) for r in rounds)
        rows.append([method, *cov, *acc, f"{out:,}", str(req)])
    return _table(header, rows)
