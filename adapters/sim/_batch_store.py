"""What `ttc serve` keeps of its Batch APIs: stored files, batch records, and the counters.

The records are OpenAI's objects (`as_object` gives the JSON the official client reads); the
Gemini routes (`_batch_gemini`) present the same records in Google's shape.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_BATCH_BYTES", "MAX_BATCH_REQUESTS", "BatchRecord", "BatchStats", "StoredFile"]

MAX_BATCH_REQUESTS = 50_000
"""OpenAI: the most requests one batch input file may hold."""
MAX_BATCH_BYTES = 200 * 1024 * 1024
"""OpenAI: the largest batch input file (200 MB)."""

_FINAL = ("completed", "failed", "expired", "cancelled")


@dataclass(slots=True)
class StoredFile:
    """An uploaded (or produced) file."""

    id: str
    data: bytes
    filename: str
    purpose: str
    created_at: int = field(default_factory=lambda: int(time.time()))

    def as_object(self) -> dict[str, Any]:
        """OpenAI's file object."""
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
        }


@dataclass(slots=True)
class BatchRecord:
    """A batch: its status, its counts and the files it produced."""

    id: str
    input_file_id: str
    endpoint: str
    created_at: float
    metadata: dict[str, Any] | None = None
    status: str = "validating"
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] | None = None
    times: dict[str, int] = field(default_factory=dict)

    @property
    def final(self) -> bool:
        """Whether the batch has ended (completed, failed, expired or cancelled)."""
        return self.status in _FINAL

    def start(self) -> None:
        """Validated: in progress."""
        if self.status == "validating":
            self.status = "in_progress"
            self.times["in_progress_at"] = int(time.time())

    def fail(self, code: str, message: str, line: int) -> None:
        """Refused at validation."""
        self.errors = [{"code": code, "message": message, "param": None, "line": line or None}]
        self.end("failed")

    def end(self, status: str) -> None:
        """Ends in `status`, with its time."""
        now = int(time.time())
        if status in ("completed", "expired"):
            self.times["finalizing_at"] = now
        if status == "cancelled":
            self.times["cancelling_at"] = now
        self.status = status
        self.times[f"{status}_at"] = now

    def as_object(self) -> dict[str, Any]:
        """OpenAI's batch object."""
        created = int(self.created_at)
        obj: dict[str, Any] = {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": None if self.errors is None else {"object": "list", "data": self.errors},
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": created,
            "expires_at": created + 86400,
            "request_counts": {
                "total": self.total,
                "completed": self.completed,
                "failed": self.failed,
            },
            "metadata": self.metadata,
        }
        for name in (
            "in_progress_at",
            "finalizing_at",
            "completed_at",
            "failed_at",
            "expired_at",
            "cancelling_at",
            "cancelled_at",
        ):
            obj[name] = self.times.get(name)
        return obj


@dataclass(slots=True)
class BatchStats:
    """The batch routes' counters, apart from the synchronous routes' (`/stats` → `batch`)."""

    by_route: dict[str, int] = field(default_factory=dict)
    files: int = 0
    batches: int = 0
    answered: int = 0
    failed: int = 0
    undone: int = 0
    tokens: list[int] = field(default_factory=lambda: [0, 0, 0])

    def route(self, name: str) -> None:
        """One call of a batch route."""
        self.by_route[name] = self.by_route.get(name, 0) + 1

    def count_tokens(self, body: dict[str, Any]) -> None:
        """The usage of one answered request's body (OpenAI's chat completion, or a response
        of the Responses API)."""
        usage = body.get("usage")
        if not isinstance(usage, dict):
            return
        responses = "output_tokens" in usage
        details = usage.get("output_tokens_details" if responses else "completion_tokens_details")
        thinking = int((details or {}).get("reasoning_tokens") or 0)
        self.tokens[0] += int(usage.get("input_tokens" if responses else "prompt_tokens") or 0)
        output = usage.get("output_tokens" if responses else "completion_tokens")
        self.tokens[1] += int(output or 0) - thinking
        self.tokens[2] += thinking

    def count_gemini(self, body: dict[str, Any]) -> None:
        """The usage of one answered request's body (Gemini's GenerateContentResponse)."""
        usage = body.get("usageMetadata")
        if not isinstance(usage, dict):
            return
        self.tokens[0] += int(usage.get("promptTokenCount") or 0)
        self.tokens[1] += int(usage.get("candidatesTokenCount") or 0)
        self.tokens[2] += int(usage.get("thoughtsTokenCount") or 0)

    def as_dict(self) -> dict[str, Any]:
        """The counters as `/stats` shows them."""
        return {
            "by_route": dict(self.by_route),
            "files": self.files,
            "batches": self.batches,
            "requests_answered": self.answered,
            "requests_failed": self.failed,
            "requests_undone": self.undone,
            "tokens": dict(zip(("input", "output", "thinking"), self.tokens, strict=True)),
        }

    def reset(self) -> None:
        """Zeroes the counters."""
        self.by_route.clear()
        self.files = self.batches = self.answered = self.failed = self.undone = 0
        self.tokens[:] = [0, 0, 0]
