"""`ttc verify`: judge responses produced elsewhere with a suite's verifier.

Input: one JSON object per line, `{"id": <question id>, "response": <text>}` (`text` is accepted
for `response`). Output: one verdict line per input line, in input order:
`{"line", "id", "score", "answer", "passed", "detail"}`. Every line is checked before anything
is judged, so a bad line costs nothing but its error message.

The responses go to the verifier processes in batches, up to one batch per worker at a time, so
every worker is busy; the verdicts are written in input order all the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from ttc.engine._util._pool import bounded
from ttc.engine._util._records import read_jsonl
from ttc.engine.contract._errors import DataError
from ttc.engine.contract._types import Item, Suite, Verdict
from ttc.engine.journal._rundir import write_atomic
from ttc.engine.run._verify import VerifierPool

BATCH = 64
"""The most responses sent to a worker at once (fewer when that leaves a worker idle)."""


@dataclass(frozen=True, slots=True)
class RescoreSummary:
    """Totals of one `ttc verify`."""

    judged: int
    passed: int
    out: Path


def read_responses(path: Path, items: dict[str, Item]) -> list[tuple[int, Item, str]]:
    """(line number, item, response) per line; DataError naming file, line and field otherwise."""
    rows: list[tuple[int, Item, str]] = []
    for lineno, record in read_jsonl(path):
        item_id = record.get("id")
        if not isinstance(item_id, str | int) or isinstance(item_id, bool):
            raise DataError(f"{path}:{lineno}: field 'id' is missing or not a string")
        text = record.get("response", record.get("text"))
        if not isinstance(text, str):
            raise DataError(f"{path}:{lineno}: field 'response' is missing or not a string")
        item = items.get(str(item_id))
        if item is None:
            raise DataError(f"{path}:{lineno}: field 'id': {item_id!r} is not in the suite")
        rows.append((lineno, item, text))
    return rows


async def rescore(
    suite: Suite, responses: Path, out: Path, *, workers: int = 2, gamma: float = 1.0
) -> RescoreSummary:
    """Judges every response of `responses` and writes one verdict line each to `out`."""
    items = {item.id: item for item in suite.items()}
    rows = read_responses(responses, items)
    pool = VerifierPool(suite, workers)
    pool.start()
    # Batches small enough that each worker gets one, and at most one in flight per worker
    # (the engine's bounded pool); the verdicts are put back in batch order.
    size = max(1, min(BATCH, -(-len(rows) // max(1, workers))))
    chunks = [rows[start : start + size] for start in range(0, len(rows), size)]
    judged: dict[int, list[Verdict]] = {}

    async def judge(entry: tuple[int, list[tuple[int, Item, str]]]) -> None:
        index, chunk = entry
        judged[index] = await pool.judge_many([(item, text) for _, item, text in chunk])

    try:
        await bounded(enumerate(chunks), judge, max(1, workers))
    finally:
        await pool.aclose()
    batches = [judged[index] for index in range(len(chunks))]
    lines: list[bytes] = []
    passed = 0
    for chunk, verdicts in zip(chunks, batches, strict=True):
        for (lineno, item, _), verdict in zip(chunk, verdicts, strict=True):
            ok = verdict.score >= gamma
            passed += ok
            lines.append(
                orjson.dumps(
                    {
                        "line": lineno,
                        "id": item.id,
                        "score": verdict.score,
                        "answer": verdict.answer,
                        "passed": ok,
                        "detail": verdict.detail,
                    }
                )
            )
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, b"".join(line + b"\n" for line in lines))
    return RescoreSummary(len(rows), passed, out)
