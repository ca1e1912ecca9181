"""`ttc report`'s line on batch mode: a run's batches, their requests, and what was re-sent why,
from the journal's `batch` and `batch_state` events (none: no line)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ttc.engine.journal._batch_events import BatchCreated, BatchUpdated
from ttc.engine.journal._journal import read_events

__all__ = ["batch_line"]

_KINDS = frozenset({BatchCreated.KIND, BatchUpdated.KIND})


def batch_line(journal: Path) -> str | None:
    """One line: batches created, requests in them, re-sent by reason, the longest wait."""
    created: dict[str, BatchCreated] = {}
    resent: Counter[str] = Counter()
    ended: dict[str, BatchUpdated] = {}
    for event in read_events(journal, _KINDS):
        if isinstance(event, BatchCreated):
            created[event.batch_id] = event
        elif isinstance(event, BatchUpdated) and event.status in _FINAL:
            ended[event.batch_id] = event
            resent.update(event.resent)
    if not created:
        return None
    requests = sum(len(b.ids) for b in created.values())
    again = sum(resent.values())
    why = ", ".join(f"{reason} {n}" for reason, n in sorted(resent.items()))
    longest = max((e.waited_s for e in ended.values()), default=0.0)
    states = Counter(e.status for e in ended.values())
    shown = ", ".join(f"{state} {n}" for state, n in sorted(states.items())) or "none ended"
    return (
        f"batch mode: {len(created)} batches ({shown}), {requests:,} requests in them; "
        f"re-sent {again:,}" + (f" ({why})" if why else "") + f"; longest wait {longest:.0f} s"
    )


_FINAL = frozenset({"completed", "failed", "expired", "cancelled"})
