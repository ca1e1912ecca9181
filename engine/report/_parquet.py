"""`ttc export --format parquet`: a run (or every run of a `ttc compare` directory) as two
Parquet files a dataframe library reads as they are: one row per journaled sample (`--out`),
and one row per round (the same name with `.rounds.parquet` for `.parquet`).

Each column has one Arrow type, nullable where the journal may not know the value (a sample
that failed has no verdict; a run with no price has no cost). Every row names its run's method,
so the runs of a `ttc compare` directory share one file and group by `method`. pyarrow (the
`parquet` extra) is imported only here, when the export is asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ttc.engine._util._extras import require
from ttc.engine.report._samples import RunSamples

__all__ = ["rounds_path", "write_parquet"]


def _sample_schema(pa: Any) -> Any:
    return pa.schema(
        [
            ("method", pa.string()),
            ("question_id", pa.string()),
            ("round", pa.int32()),
            ("k", pa.int32()),
            ("attempts", pa.int32()),
            ("demonstrations", pa.list_(pa.string())),
            ("temperature", pa.float64()),
            ("ok", pa.bool_()),
            ("error", pa.string()),
            ("input_tokens", pa.int64()),
            ("output_tokens", pa.int64()),
            ("thinking_tokens", pa.int64()),
            ("cached_tokens", pa.int64()),
            ("latency_s", pa.float64()),
            ("retries", pa.int32()),
            ("backoff_s", pa.float64()),
            ("score", pa.float64()),
            ("answer", pa.string()),
            ("correct", pa.bool_()),
            ("passed", pa.bool_()),
            ("cost_usd", pa.float64()),
            ("simulated", pa.bool_()),
            ("cached", pa.bool_()),
            ("landed_at", pa.timestamp("ms", tz="UTC")),
            ("response", pa.large_string()),
        ]
    )


def _round_schema(pa: Any) -> Any:
    return pa.schema(
        [
            ("method", pa.string()),
            ("round", pa.int32()),
            ("adaptive", pa.bool_()),
            ("complete", pa.bool_()),
            ("active", pa.int32()),
            ("solved", pa.int32()),
            ("coverage", pa.float64()),
            ("accuracy", pa.float64()),
            ("requests", pa.int64()),
            ("input_tokens", pa.int64()),
            ("output_tokens", pa.int64()),
            ("thinking_tokens", pa.int64()),
            ("cost_usd", pa.float64()),
            ("wall_s", pa.float64()),
            ("errors", pa.int64()),
            ("retries", pa.int64()),
        ]
    )


def _when(at: float | None) -> datetime | None:
    return None if at is None else datetime.fromtimestamp(at, UTC)


def _sample_rows(run: RunSamples) -> list[dict[str, Any]]:
    method = run.run.method
    return [
        {
            "method": method,
            "question_id": s.item,
            "round": s.round,
            "k": s.k,
            "attempts": s.attempts,
            "demonstrations": list(s.demos),
            "temperature": s.temperature,
            "ok": s.ok,
            "error": s.error,
            "input_tokens": s.usage.input_tokens,
            "output_tokens": s.usage.output_tokens,
            "thinking_tokens": s.usage.thinking_tokens,
            "cached_tokens": s.usage.cached_tokens,
            "latency_s": s.latency_s,
            "retries": s.retries,
            "backoff_s": s.backoff_s,
            "score": s.score,
            "answer": s.answer,
            "correct": s.correct,
            "passed": s.passed,
            "cost_usd": s.cost_usd,
            "simulated": s.simulated,
            "cached": s.cached,
            "landed_at": _when(s.at),
            "response": s.text,
        }
        for s in run.samples
    ]


def _opt(row: Mapping[str, Any], key: str, kind: type) -> Any:
    value = row.get(key)
    return None if value is None else kind(value)


def _round_rows(run: RunSamples) -> list[dict[str, Any]]:
    rows = []
    for r in run.run.rounds:
        t = int(r["round"])
        rows.append(
            {
                "method": run.run.method,
                "round": t,
                "adaptive": bool(r.get("adaptive", True)),
                "complete": bool(r.get("complete", True)),
                "active": int(r["active"]),
                "solved": int(r["solved"]),
                "coverage": float(r["coverage"]),
                "accuracy": _opt(r, "accuracy", float),
                # A summary of an older version kept replayed samples apart from requests.
                "requests": int(r["requests"]) + int(r.get("replayed", 0)),
                "input_tokens": int(r["input_tokens"]),
                "output_tokens": int(r["output_tokens"]),
                "thinking_tokens": int(r["thinking_tokens"]),
                "cost_usd": _opt(r, "cost_usd", float),
                "wall_s": float(r["wall_s"]),
                "errors": sum(run.run.errors.get(t, {}).values()),
                "retries": sum(run.run.retries.get(t, {}).values()),
            }
        )
    return rows


def rounds_path(out: Path) -> Path:
    """Where the per-round table of `--out` goes: RUN.parquet -> RUN.rounds.parquet."""
    stem = out.name[: -len(".parquet")] if out.name.endswith(".parquet") else out.name
    return out.with_name(f"{stem}.rounds.parquet")


def write_parquet(runs: Sequence[RunSamples], out: Path) -> tuple[Path, Path, int, int]:
    """Writes the samples of `runs` to `out` and their rounds beside it; returns both paths
    and their row counts."""
    pa = require("pyarrow", "parquet")
    pq = require("pyarrow.parquet", "parquet")

    samples = [row for run in runs for row in _sample_rows(run)]
    rounds = [row for run in runs for row in _round_rows(run)]
    out.parent.mkdir(parents=True, exist_ok=True)
    other = rounds_path(out)
    pq.write_table(pa.Table.from_pylist(samples, schema=_sample_schema(pa)), out)
    pq.write_table(pa.Table.from_pylist(rounds, schema=_round_schema(pa)), other)
    return out, other, len(samples), len(rounds)
