"""The journal's batch events: every uploaded file and created batch, and each batch's states.

    batch_file    an input file uploaded for round `round` (its id, requests and bytes)
    batch         a batch created: its id, its file, its tag, and the samples it holds (custom
                  ids); `attempt` 1 for a round's first batches, 2 or more for a re-send
    batch_state   a batch's state changed (validating, in_progress, finalizing, completed,
                  failed, expired, cancelled), with its counts and how long it was waited for;
                  at its end, how many of its requests were re-sent and why (`resent`)

A resumed run polls the batches these name and never creates a second batch for samples a
batch already holds (`_batch_round`); `ttc report` counts the re-sent requests from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ttc.engine.journal._codec import event, spec

__all__ = ["BatchCreated", "BatchFileUploaded", "BatchUpdated"]


def _resent(raw: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in dict(raw or {}).items()}


@event()
@dataclass(frozen=True, slots=True)
class BatchFileUploaded:
    """An input file of a round's batch, uploaded."""

    KIND: ClassVar[str] = "batch_file"
    round: int
    tag: str
    file_id: str = field(metadata=spec(key="file"))
    requests: int = field(metadata=spec(missing=0))
    bytes: int = field(metadata=spec(missing=0))


@event(order=("round", "tag", "batch_id", "file_id", "attempt", "ids"))
@dataclass(frozen=True, slots=True)
class BatchCreated:
    """A batch created for a round's samples (`ids`: their custom ids)."""

    KIND: ClassVar[str] = "batch"
    round: int
    tag: str
    batch_id: str = field(metadata=spec(key="batch"))
    file_id: str = field(metadata=spec(key="file", missing=""))
    ids: tuple[str, ...] = field(metadata=spec(enc=list, dec=lambda raw: tuple(map(str, raw))))
    attempt: int = 1


@event()
@dataclass(frozen=True, slots=True)
class BatchUpdated:
    """A batch's new state; at its end, the requests re-sent by reason."""

    KIND: ClassVar[str] = "batch_state"
    round: int
    batch_id: str = field(metadata=spec(key="batch"))
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    waited_s: float = 0.0
    resent: dict[str, int] = field(
        default_factory=dict, metadata=spec(enc=dict, dec=_resent, omit="empty")
    )

    def describe(self) -> str:
        """The batch's state as the progress line and the log say it."""
        text = (
            f"batch {self.batch_id} (round {self.round}): {self.status.replace('_', ' ')}, "
            f"{self.completed}/{self.total} done, {self.failed} failed, "
            f"waited {self.waited_s:.0f} s"
        )
        if self.resent:
            text += "; re-sent " + ", ".join(f"{n} {why}" for why, n in sorted(self.resent.items()))
        return text


BatchEvent = BatchFileUploaded | BatchCreated | BatchUpdated
