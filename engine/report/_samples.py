"""A run directory's samples, read back from its journal for the exports (`_parquet`,
`_inspect`): one typed record per planned sample, with its verdict, its retries and its cost.

A resumed run's journal holds every session: a sample is its last word (a sample that failed and
was sent again on resume is its new outcome), and its verdict the last one written for it. Its
retries are every `retry` event of its key, since each was an attempt that happened (as
`ttc report` counts them). The cost is the run's price (summary.json's `price_per_million`)
applied to the sample's usage, as the run priced it; None when the run had no price.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttc.engine._util._records import read_json, read_jsonl
from ttc.engine.contract._types import Usage
from ttc.engine.journal._events import (
    Judged,
    Retried,
    SampleFailed,
    SampleKey,
    SampleLanded,
)
from ttc.engine.journal._journal import decode, journal_lines
from ttc.engine.report._runreport import RunReport, load_run
from ttc.engine.send._prices import Price

_KINDS = frozenset({SampleLanded.KIND, Judged.KIND, Retried.KIND})


@dataclass(frozen=True, slots=True)
class SampleRecord:
    """One planned sample of a run: how it was asked, what came back, how it was judged."""

    round: int
    item: str
    k: int
    attempts: int
    demos: tuple[str, ...]
    temperature: float | None
    ok: bool
    # The response (None: the sample ended in `error` after its retries).
    text: str | None
    error: str | None
    usage: Usage
    latency_s: float
    simulated: bool
    cached: bool
    # The wall-clock time its line was written (the journal's `at`; None in a journal without).
    at: float | None
    # Its verdict (None: never judged, e.g. it failed, or the run stopped before its verdict).
    score: float | None = None
    answer: str | None = None
    correct: bool | None = None
    passed: bool | None = None
    # Its failed attempts that were retried: how many, and the seconds they waited in all.
    retries: int = 0
    backoff_s: float = 0.0
    cost_usd: float | None = None

    @property
    def key(self) -> SampleKey:
        """(round, item id, k), as the journal keys it."""
        return (self.round, self.item, self.k)


@dataclass(frozen=True, slots=True)
class RunSamples:
    """A run directory read for export: its report (summary and config), its samples in the
    order they were planned, its config.json, summary.json and results.jsonl (by question id;
    empty when the run wrote none yet), and when it started and ended (wall clock)."""

    run: RunReport
    config: dict[str, Any]
    summary: dict[str, Any]
    results: dict[str, dict[str, Any]]
    samples: tuple[SampleRecord, ...]
    started_at: float | None
    ended_at: float | None


def _price(summary: dict[str, Any]) -> Price | None:
    raw = summary.get("price_per_million")
    if not isinstance(raw, dict):
        return None
    names = {f.name for f in dataclasses.fields(Price)}
    return Price(**{k: v for k, v in raw.items() if k in names})


def read_samples(path: Path) -> RunSamples:
    """Reads one run directory (not a `ttc compare` directory: see `run_dirs`) for export."""
    run = load_run(path)
    config = read_json(run.path / "config.json")
    summary = read_json(run.path / "summary.json")
    price = _price(summary)
    journal = run.path / "journal.jsonl"
    landed: dict[SampleKey, tuple[SampleLanded | SampleFailed, float | None]] = {}
    verdicts: dict[SampleKey, Judged] = {}
    retries: dict[SampleKey, list[Retried]] = {}
    times: list[float] = []
    # Each line's `at` is not an event field: read alongside the typed event.
    for lineno, fields in journal_lines(journal):
        at = fields.get("at")
        if isinstance(at, int | float):
            times.append(float(at))
        if fields["ev"] not in _KINDS:
            continue
        event = decode(fields, f"{journal}:{lineno}")
        if isinstance(event, SampleLanded | SampleFailed):
            landed[event.key] = (event, float(at) if isinstance(at, int | float) else None)
            verdicts.pop(event.key, None)  # a sample sent again is judged again
        elif isinstance(event, Judged):
            verdicts[event.key] = event
        elif isinstance(event, Retried):
            retries.setdefault(event.key, []).append(event)
    samples = [
        _record(event, at, verdicts.get(key), retries.get(key, []), price)
        for key, (event, at) in landed.items()
    ]
    samples.sort(key=lambda s: s.key)
    results_path = run.path / "results.jsonl"
    results = (
        {str(r.get("id")): r for _, r in read_jsonl(results_path)} if results_path.is_file() else {}
    )
    return RunSamples(
        run,
        config,
        summary,
        results,
        tuple(samples),
        min(times) if times else None,
        max(times) if times else None,
    )


def _record(
    event: SampleLanded | SampleFailed,
    at: float | None,
    verdict: Judged | None,
    retried: list[Retried],
    price: Price | None,
) -> SampleRecord:
    if isinstance(event, SampleLanded):
        ok, text, error, usage = True, event.text, None, event.usage
        latency, simulated, cached = event.latency, event.simulated, event.cached
    else:
        ok, text, error, usage = False, None, event.error, Usage()
        latency, simulated, cached = 0.0, False, False
    return SampleRecord(
        round=event.round,
        item=event.item,
        k=event.k,
        attempts=event.attempts,
        demos=event.demos,
        temperature=event.temperature,
        ok=ok,
        text=text,
        error=error,
        usage=usage,
        latency_s=latency,
        simulated=simulated,
        cached=cached,
        at=at,
        score=None if verdict is None else verdict.score,
        answer=None if verdict is None else verdict.answer,
        correct=None if verdict is None else verdict.correct,
        passed=None if verdict is None else verdict.passed,
        retries=len(retried),
        backoff_s=round(sum(r.delay for r in retried), 3),
        cost_usd=None if price is None or not ok else price.cost(usage),
    )
