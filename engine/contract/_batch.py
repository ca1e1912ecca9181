"""Batch mode's contract: a vendor's Batch API as the engine drives it, over typed records.

A provider that can send a round through its vendor's Batch API sets `Provider.batch` to a
`BatchAPI` (the adapters hold the vendor clients: `ttc.adapters`); the engine then sends each
round's samples that the response cache does not answer as batches (`_batch_round`) instead of
one request each. The calls are the control plane (a few per batch), so their cost in CPU does
not matter; every file and batch id is journaled the moment it exists.

    upload(lines) ─► file id ─► create(file id, tag) ─► batch id ─► poll ... final ─► results

A batch's `tag` (a digest of its requests and the round) is attached to it at the vendor
(OpenAI: metadata; Gemini: display name), so that a resumed run finds a batch whose id the
journal lost (a kill between its creation and its journal line) instead of creating another.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass

from ttc.engine.contract._errors import ProviderError
from ttc.engine.contract._types import Completion, Request

__all__ = ["FINAL_STATES", "BatchAPI", "BatchResult", "BatchStatus"]

FINAL_STATES = frozenset({"completed", "failed", "expired", "cancelled"})
"""The states a batch ends in (the vendors' names; Gemini's are mapped to them)."""


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """A batch as its vendor last described it: its state and request counts."""

    id: str
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    # Where its answers and its errors can be read (a file id, or the batch itself).
    output: str | None = None
    errors: str | None = None
    # Why a batch failed as a whole (validation), as the vendor said it.
    message: str = ""

    @property
    def final(self) -> bool:
        """Whether the batch has ended (its results can be read)."""
        return self.status in FINAL_STATES


@dataclass(frozen=True, slots=True)
class BatchResult:
    """One request's result in a batch: its completion, or the error that ended it there.

    `reason` says why a request has no completion, for the journal's counts: `failed` (an error
    inside the batch), `expired` and `cancelled` (its batch ended before it ran)."""

    custom_id: str
    completion: Completion | None = None
    error: ProviderError | None = None
    reason: str = ""


class BatchAPI(abc.ABC):
    """A vendor's Batch API: upload a file of requests, create a batch, poll it, read it.

    Every call raises from the engine's error tree (`RateLimited`, `Transient`, `BadRequest`,
    `Fatal`), translated in the adapter. Settings the host may change: `fallback_sync` (requests
    that failed in a batch go through the synchronous path instead of a new batch), `poll_s`
    (the first and the longest wait between polls: the wait grows by half each poll),
    `deadline_s` (how long a batch is waited for, from when the session began waiting: past it
    the run stops, resumable; the vendors' own window is 24 h, a server may never end one).
    """

    name: str = "batch"
    # A vendor's limits on one batch: requests, and bytes of its input file.
    max_requests: int = 50_000
    max_bytes: int = 200 * 1024 * 1024
    fallback_sync: bool = False
    poll_s: tuple[float, float] = (1.0, 60.0)
    deadline_s: float = 24 * 3600.0

    @abc.abstractmethod
    def encode(self, custom_id: str, request: Request) -> bytes:
        """One request as a line of the batch's input file (newline included). Raises
        ConfigError for a request that batch mode refuses, before anything is submitted."""

    @abc.abstractmethod
    async def upload(self, data: bytes, name: str) -> str:
        """Uploads an input file (JSONL lines of `encode`); its id."""

    @abc.abstractmethod
    async def create(self, file_id: str, tag: str) -> BatchStatus:
        """Creates a batch of an uploaded file, tagged `tag`."""

    @abc.abstractmethod
    async def poll(self, batch_id: str) -> BatchStatus:
        """The batch as it stands."""

    @abc.abstractmethod
    async def results(
        self, status: BatchStatus, requests: Mapping[str, Request]
    ) -> list[BatchResult]:
        """The results of a batch that has ended: answered, failed, or never run (`requests`:
        the requests still waiting for an answer, by custom id)."""

    def reusable(self, file_id: str) -> bool:
        """Whether an uploaded file outlives this process: a resumed run then creates its batch
        from the journaled file instead of uploading the same requests again."""
        return True

    async def find(self, tag: str) -> BatchStatus | None:
        """A batch created with `tag` (whose id a killed run may not have journaled), or None."""
        return None

    async def aclose(self) -> None:
        """Releases the clients; by default nothing."""
        return None
