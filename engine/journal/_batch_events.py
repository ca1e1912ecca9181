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

__all__ = ["BatchCreated", "BatchFileUploaded", "BatchUpdated"]

Fields = dict[str, Any]


@dataclass(frozen=True, slots=True)
class BatchFileUploaded:
    """An input file of a round's batch, uploaded."""

    KIND: ClassVar[str] = "batch_file"
    round: int
    tag: str
    file_id: str
    requests: int
    bytes: int

    def encode(self) -> Fields:
        """The event's journal line, as a JSON object."""
        return {
            "ev": self.KIND,
            "round": self.round,
            "tag": self.tag,
            "file": self.file_id,
            "requests": self.requests,
            "bytes": self.bytes,
        }

    @classmethod
    def decode(cls, d: Fields) -> BatchFileUploaded:
        """The event a journal line holds."""
        return cls(
            int(d["round"]),
            str(d["tag"]),
            str(d["file"]),
            int(d.get("requests", 0)),
            int(d.get("bytes", 0)),
        )


@dataclass(frozen=True, slots=True)
class BatchCreated:
    """A batch created for a round's samples (`ids`: their custom ids)."""

    KIND: ClassVar[str] = "batch"
    round: int
    tag: str
    batch_id: str
    file_id: str
    ids: tuple[str, ...]
    attempt: int = 1

    def encode(self) -> Fields:
        """The event's journal line, as a JSON object."""
        return {
            "ev": self.KIND,
            "round": self.round,
            "tag": self.tag,
            "batch": self.batch_id,
            "file": self.file_id,
            "attempt": self.attempt,
            "ids": list(self.ids),
        }

    @classmethod
    def decode(cls, d: Fields) -> BatchCreated:
        """The event a journal line holds."""
        ids = tuple(str(x) for x in d["ids"])
        return cls(
            int(d["round"]),
            str(d["tag"]),
            str(d["batch"]),
            str(d.get("file", "")),
            ids,
            int(d.get("attempt", 1)),
        )


@dataclass(frozen=True, slots=True)
class BatchUpdated:
    """A batch's new state; at its end, the requests re-sent by reason."""

    KIND: ClassVar[str] = "batch_state"
    round: int
    batch_id: str
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    waited_s: float = 0.0
    resent: dict[str, int] = field(default_factory=dict)

    def encode(self) -> Fields:
        """The event's journal line, as a JSON object."""
        line: Fields = {
            "ev": self.KIND,
            "round": self.round,
            "batch": self.batch_id,
            "status": self.status,
            "total": self.total,
            "completed": self.completed,
            "failed": self.failed,
            "waited_s": self.waited_s,
        }
        if self.resent:
            line["resent"] = dict(self.resent)
        return line

    @classmethod
    def decode(cls, d: Fields) -> BatchUpdated:
        """The event a journal line holds."""
        resent = {str(k): int(v) for k, v in dict(d.get("resent") or {}).items()}
        return cls(
            int(d["round"]),
            str(d["batch"]),
            str(d["status"]),
            int(d.get("total", 0)),
            int(d.get("completed", 0)),
            int(d.get("failed", 0)),
            float(d.get("waited_s", 0.0)),
            resent,
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
