"""The run directory: the journal's events and their codec (one for every journal, `ttc batch`'s
too), the writer, replay, the lock, the per-run logs, the wall clock over sessions and the
limiter's timeline."""

from ttc.engine.journal._batch_events import BatchCreated, BatchFileUploaded, BatchUpdated
from ttc.engine.journal._codec import encode
from ttc.engine.journal._events import (
    DifficultyRated,
    Event,
    Judged,
    LimiterSampled,
    Rated,
    Retried,
    RoundEnded,
    RunStarted,
    SampleFailed,
    SampleLanded,
)
from ttc.engine.journal._journal import (
    Journal,
    Replay,
    completed_samples,
    decode,
    journal_text,
    read_events,
    read_journal,
)
from ttc.engine.journal._rundir import items_sha256, matched_output_tokens

__all__ = [
    "BatchCreated",
    "BatchFileUploaded",
    "BatchUpdated",
    "DifficultyRated",
    "Event",
    "Journal",
    "Judged",
    "LimiterSampled",
    "Rated",
    "Replay",
    "Retried",
    "RoundEnded",
    "RunStarted",
    "SampleFailed",
    "SampleLanded",
    "completed_samples",
    "decode",
    "encode",
    "items_sha256",
    "journal_text",
    "matched_output_tokens",
    "read_events",
    "read_journal",
]
