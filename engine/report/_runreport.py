"""`ttc report`: the per-round table and the coverage plot of one or several run directories,
or of the runs of a `ttc compare` directory (then with its comparison table too).

The numbers come from summary.json (tokens, coverage, accuracy, cost, wall time per round, and
what role models such as a reward judge consumed and cost: apart from the run's cost, which is
the policy model's); errors and retries by kind come from the journal, which records each one
with its kind. A resumed run's journal holds every session: a sample's error counts only if it
is the last word on that sample (a sample that failed and was sent again on resume is judged by
its new outcome), while every retry counts, since each one was an attempt that happened.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttc.engine._util._records import read_json
from ttc.engine.contract._config import PRESETS
from ttc.engine.contract._errors import DataError
from ttc.engine.journal._journal import journal_lines
from ttc.engine.report._batchreport import batch_line
from ttc.engine.report._intervals import (
    coverage_intervals,
    covered_rounds,
    interval_cells,
    paired_table,
)
from ttc.engine.report._plots import check_plot_path
from ttc.engine.report._runplot import SIM_SHORT, labelled, plot_runs, test_set
from ttc.engine.report._tables import _percent, _table, accuracy_of, compare_table

# The keys of a round in summary.json that the table reads.
_ROUND_KEYS = (
    "round",
    "active",
    "solved",
    "coverage",
    "requests",
    "input_tokens",
    "output_tokens",
    "thinking_tokens",
    "wall_s",
)

ErrorCounts = Mapping[int, Mapping[str, int]]


@dataclass(frozen=True, slots=True)
class RunReport:
    """What one run directory says about itself, ready to print or plot."""

    label: str
    path: Path
    method: str
    model: str
    suite: str
    simulated: bool
    complete: bool
    questions: int
    rounds: tuple[Mapping[str, Any], ...]
    wall_s: float
    # Per round number: {error kind: count}.
    errors: ErrorCounts
    retries: ErrorCounts
    judgement: str = "ground-truth"
    # Role models (judge, difficulty): their calls and tokens, as summary.json has them.
    roles: Mapping[str, Mapping[str, Any]] | None = None
    # The run's final counts as summary.json has them (None in summaries that predate them).
    covered: int | None = None
    accurate: int | None = None
    # Each question's first covered round (the journal's verdicts): intervals, paired differences.
    firsts: Mapping[str, int | None] | None = None

    def cost(self, row: Mapping[str, Any]) -> float | None:
        """One round's cost in USD, or None when the run recorded no price."""
        value = row.get("cost_usd")
        return None if value is None else float(value)

    @property
    def cost_usd(self) -> float | None:
        """The run's cost, or None unless every round has one."""
        costs = [self.cost(r) for r in self.rounds]
        if not costs or any(c is None for c in costs):
            return None
        return sum(c for c in costs if c is not None)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise DataError(f"{path}: no such file; is {path.parent} a ttc run directory?")
    return read_json(path)


def _rounds(path: Path, summary: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    rounds = summary.get("rounds", [])
    if not isinstance(rounds, list):
        raise DataError(f"{path}: 'rounds' is not a list")
    for i, row in enumerate(rounds):
        if not isinstance(row, dict):
            raise DataError(f"{path}: round #{i + 1} is not an object")
        missing = [k for k in _ROUND_KEYS if k not in row]
        if missing:
            raise DataError(f"{path}: round #{i + 1} lacks {missing[0]!r}")
    if rounds and not rounds[-1].get("complete", True):
        # A round stopped before its barrier never counted its solved questions; what the run had
        # solved when it stopped is the summary's own count.
        solved = summary.get("solved", rounds[-1]["solved"])
        coverage = summary.get("coverage", rounds[-1]["coverage"])
        rounds[-1] = {**rounds[-1], "solved": solved, "coverage": coverage}
    return tuple(rounds)


def _error_counts(path: Path) -> tuple[ErrorCounts, ErrorCounts]:
    """Final sample errors and retries per round and kind, from the journal at `path`."""
    last: dict[tuple[int, str, int], dict[str, Any]] = {}
    retries: dict[int, Counter[str]] = {}
    for lineno, event in journal_lines(path):
        kind = event["ev"]
        if kind not in ("sample", "retry"):
            continue
        try:
            t = int(event["round"])
            if kind == "sample":
                last[(t, str(event["item"]), int(event["k"]))] = event
            else:
                retries.setdefault(t, Counter())[str(event["error"])] += 1
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{path}:{lineno}: {kind} event lacks a valid {exc}") from None
    errors: dict[int, Counter[str]] = {}
    for (t, _, _), event in last.items():
        if not event.get("ok", False):
            errors.setdefault(t, Counter())[str(event.get("error", "error"))] += 1
    return _plain(errors), _plain(retries)


def _plain(counts: Mapping[int, Counter[str]]) -> dict[int, dict[str, int]]:
    return {t: dict(sorted(c.items())) for t, c in sorted(counts.items())}


def load_run(path: Path) -> RunReport:
    """Reads a run directory (summary.json, config.json, journal.jsonl) into a `RunReport`."""
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"{path}: no such run directory")
    summary = _read_json(path / "summary.json")
    rounds = _rounds(path / "summary.json", summary)
    config = _read_json(path / "config.json")
    journal = path / "journal.jsonl"
    if not journal.is_file():
        raise DataError(f"{journal}: no such file; is {path} a ttc run directory?")
    errors, retries = _error_counts(journal)
    method = str(summary.get("method") or config.get("config", {}).get("method", "?"))
    run = RunReport(
        label=method,
        path=path,
        method=method,
        model=str(summary.get("model", config.get("model", "?"))),
        suite=str(summary.get("suite", config.get("suite", "?"))),
        simulated=bool(summary.get("simulated", False)),
        complete=bool(summary.get("complete", False)),
        questions=int(summary.get("questions", config.get("items", 0))),
        rounds=rounds,
        wall_s=float(summary.get("wall_s", 0.0)),
        errors=errors,
        retries=retries,
        judgement=str(summary.get("judgement", "ground-truth")),
        roles=summary.get("roles") or None,
        covered=_int_or_none(summary.get("covered")),
        accurate=_int_or_none(summary.get("accurate")),
        firsts=covered_rounds(path),
    )
    return labelled([run])[0]


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _kinds(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in counts.items() if n) or "-"


def _cost(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _sum_kinds(per_round: ErrorCounts, rounds: Sequence[int]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for t in rounds:
        total.update(per_round.get(t, {}))
    return dict(sorted(total.items()))


def _header(run: RunReport) -> str:
    state = "complete" if run.complete else "stopped (resumable)"
    parts = [
        f"{run.label}: {run.suite}, {run.model}",
        str(run.path),
        state,
        f"wall {run.wall_s:.1f} s",
    ]
    if run.judgement != "ground-truth":
        parts.append(f"judged by {run.judgement}")
    if run.simulated:
        parts.append(SIM_SHORT)
    return "; ".join(parts)


def _block(run: RunReport) -> str:
    header = [
        "round",
        "active",
        "solved",
        "coverage %",
        "95% CI",
        "accuracy %",
        "requests",
        "input",
        "output",
        "thinking",
        "cost $",
        "wall s",
        "errors",
        "retries",
    ]
    rows = []
    cis = interval_cells(
        coverage_intervals(run.firsts or {}, len(run.rounds), run.questions) if run.firsts else []
    )
    for i, r in enumerate(run.rounds):
        t = int(r["round"])
        label = str(t)
        if not r.get("adaptive", True):
            label += " (warm-up)"
        if not r.get("complete", True):
            label += " (stopped)"
        rows.append(
            [
                label,
                str(r["active"]),
                str(r["solved"]),
                f"{100 * float(r['coverage']):.1f}",
                cis[i] if i < len(cis) else "-",
                _percent(accuracy_of(r)),
                # A summary of an older version kept the samples a resumed session replayed
                # from its journal apart from its requests.
                str(int(r["requests"]) + int(r.get("replayed", 0))),
                f"{int(r['input_tokens']):,}",
                f"{int(r['output_tokens']):,}",
                f"{int(r['thinking_tokens']):,}",
                _cost(run.cost(r)),
                # A stopped round's wall time was never measured.
                f"{float(r['wall_s']):.2f}" if r.get("complete", True) else "-",
                _kinds(run.errors.get(t, {})),
                _kinds(run.retries.get(t, {})),
            ]
        )
    lines = [_header(run), _table(header, rows), _totals(run)]
    batches = batch_line(run.path / "journal.jsonl")  # batch mode: re-sent requests, and why
    return "\n".join(lines if batches is None else [*lines, batches])


def _totals(run: RunReport) -> str:
    rs = run.rounds
    numbers = [int(r["round"]) for r in rs]
    requests = sum(int(r["requests"]) + int(r.get("replayed", 0)) for r in rs)
    tokens = [
        sum(int(r[k]) for r in rs) for k in ("input_tokens", "output_tokens", "thinking_tokens")
    ]
    last = rs[-1] if rs else {}
    covered = run.covered if run.covered is not None else int(last.get("solved", 0))
    n = run.questions
    coverage = 100 * covered / n if n else 0.0
    accuracy = ""
    if run.accurate is not None:
        accuracy = f"accuracy {100 * run.accurate / n if n else 0.0:.1f}% ({run.accurate}/{n}); "
    cost = run.cost_usd
    return (
        f"total: coverage {coverage:.1f}% ({covered}/{n}); {accuracy}{requests} requests; "
        f"tokens {tokens[0]:,} input, {tokens[1]:,} output, {tokens[2]:,} thinking; "
        f"cost {'-' if cost is None else f'${cost:.4f}'}; "
        f"errors: {_kinds(_sum_kinds(run.errors, numbers))}; "
        f"retries: {_kinds(_sum_kinds(run.retries, numbers))}" + _role_totals(run)
    )


def _role_totals(run: RunReport) -> str:
    """One clause per role model: its calls, tokens, cost (apart from the run's cost above) and
    unreadable replies."""
    parts = []
    for role, r in (run.roles or {}).items():
        cost = r.get("cost_usd")
        parts.append(
            f"; {role} model {r.get('model', '?')}: {int(r.get('calls', 0))} calls, tokens "
            f"{int(r.get('input_tokens', 0)):,} input, {int(r.get('output_tokens', 0)):,} output, "
            f"cost {'-' if cost is None else f'${float(cost):.4f}'}, "
            f"{int(r.get('unparsed', 0))} unparsed, {int(r.get('errors', 0))} failed"
        )
    return "".join(parts)


def report_table(runs: Sequence[RunReport]) -> str:
    """One block per run: a header line, the per-round table, a totals line."""
    return "\n\n".join(_block(run) for run in runs)


def run_dirs(path: Path) -> list[Path]:
    """The run directories `path` names: itself, or the runs of a `ttc compare` directory."""
    path = Path(path)
    if (path / "summary.json").exists() or not (path / "invocation.json").is_file():
        return [path]
    found = [path / m for m in PRESETS if (path / m / "summary.json").is_file()]
    if not found:
        raise DataError(f"{path}: a `ttc compare` directory with no finished run in it yet")
    return found


def _comparison(path: Path, runs: Sequence[RunReport]) -> str:
    """A `ttc compare` directory's own table, and where its plot is."""
    table = compare_table({r.method: r.rounds for r in runs})
    plot = path / "coverage_vs_tokens.png"
    where = f"; its plot: {plot}" if plot.is_file() else ""
    return f"{path}: ttc compare of {', '.join(r.method for r in runs)}{where}\n{table}"


def _same_questions(runs: Sequence[RunReport]) -> list[list[RunReport]]:
    """The runs grouped by test set (suite and questions), groups of two or more only."""
    groups: dict[tuple[str, frozenset[str]], list[RunReport]] = {}
    for run in runs:
        if run.firsts:
            groups.setdefault((run.suite, frozenset(run.firsts)), []).append(run)
    return [g for g in groups.values() if len(g) > 1]


def report(paths: Sequence[Path], plot: Path | None) -> str:
    """Loads every run directory (or `ttc compare` directory); returns the tables' text and
    writes the plot to `plot` if given (its format checked before anything is read)."""
    if plot is not None:
        check_plot_path(plot, "--plot")
    groups = [(Path(p), [load_run(d) for d in run_dirs(Path(p))]) for p in paths]
    runs = labelled([r for _, group in groups for r in group])
    blocks = [report_table(runs)]
    blocks += [_comparison(p, g) for p, g in groups if [p] != [r.path for r in g]]
    for group in _same_questions(runs):
        blocks.append(paired_table({r.label: r.firsts or {} for r in group}))
    if plot is not None:
        plot_runs(runs, plot)
        sets = sorted({test_set(r) for r in runs})
        if len(sets) > 1:
            blocks.append(
                f"note: the runs are on {len(sets)} test sets ({'; '.join(sets)}); the plot has "
                "one panel per test set, since coverage on one is not comparable with another"
            )
    return "\n\n".join(blocks)
