"""The journal's events as typed values: one frozen dataclass per kind, each with its line.

A run's journal (see `_journal`) is these events, encoded by the one codec (`_codec`): each field
is written under its name, in the same order, as every journal written so far, and a field that
differs (another key, a conversion, left out when empty) says so on itself. Decoding asks only
for the fields that replay needs and that every journal had; the rest take defaults, so a run
directory written by an older version still resumes (`EVENTS` reads them back). An observer
(`RunObserver.event`) sees the same values as they are written.

Kinds (`ev`): `start`, `sample` (`SampleLanded` or `SampleFailed`), `verdict`, `judge`,
`difficulty`, `retry` (with a stalled stream's partial answer), `round`, `limiter`, `control`;
batch mode's `batch_file`, `batch`, `batch_state` (`_batch_events`). The `limiter` events come
with their writer, `sample_limiter`: the limiter sampled every second while rounds run, the
run's timeline (`ttc report --timeline`). The `control` events are `ttc ctl`'s changes to a
running run (`steer` applies one; `replay_steered` replays them into a resumed run's limiter).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ttc.engine.contract._state import RoundStats
from ttc.engine.contract._types import Usage
from ttc.engine.journal._batch_events import BatchCreated, BatchFileUploaded, BatchUpdated
from ttc.engine.journal._codec import Codec, Fields, event, spec

if TYPE_CHECKING:
    from ttc.engine.send._limiter import Limiter

__all__ = ["EVENTS", "Event", "Fields", "SampleKey", "replay_steered", "sample_limiter", "steer"]

SampleKey = tuple[int, str, int]


def usage_list(u: Usage) -> list[int]:
    """A usage as the journal writes it: [input, output, thinking], and cached input tokens
    fourth when there are any."""
    line = [u.input_tokens, u.output_tokens, u.thinking_tokens]
    return [*line, u.cached_tokens] if u.cached_tokens else line


def usage_of(raw: Any, batch: bool = False) -> Usage:
    """The inverse of `usage_list` (a TypeError or ValueError for anything else); `batch`: it
    was bought through a Batch API."""
    if not 3 <= len(raw) <= 4:
        raise ValueError(f"usage: expected 3 or 4 counts, got {len(raw)}")
    counts = [int(u) for u in raw]
    usage = Usage(counts[0], counts[1], counts[2], counts[3] if len(counts) == 4 else 0)
    return usage.bought_in_batch() if batch else usage


def _usage_or_none(u: Usage | None) -> list[int] | None:
    return None if u is None else usage_list(u)


def _usage_or_none_of(raw: Any) -> Usage | None:
    return None if raw is None else usage_of(raw)


def _in_batch(u: Usage) -> bool:
    return u.batch is not None


def _strings(raw: Any) -> tuple[str, ...]:
    return tuple(map(str, raw))


# The journal's fields of more than one event.
_USAGE = spec(enc=usage_list, dec=usage_of, required=True)
_DEMOS = spec(enc=list, dec=_strings)
_UNLESS_NONE = spec(omit="none")


@event()
@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run (or a resumed run) began, at wall-clock time `t`."""

    KIND: ClassVar[str] = "start"
    resumed: bool = field(metadata=spec(missing=False))
    t: float = field(metadata=spec(missing=0.0))


@dataclass(frozen=True, slots=True)
class _Keyed:
    """An event about one planned sample: round, item id, and its index k within the round."""

    round: int
    item: str
    k: int

    @property
    def key(self) -> SampleKey:
        """(round, item id, k): how replay finds a sample."""
        return (self.round, self.item, self.k)


# A sample's line: its key, how it was asked, then its outcome.
_SAMPLE_HEAD = ("round", "item", "k", "attempts", "demos", "temperature", "ok")


@event(ok=True, order=(*_SAMPLE_HEAD, "text", "usage", "latency", "simulated", "cached"))
@dataclass(frozen=True, slots=True)
class SampleLanded(_Keyed):
    """A sample's response landed: written as it lands (in that turn of the loop), before it is
    judged."""

    KIND: ClassVar[str] = "sample"
    text: str
    # Bought through a Batch API: `batch: true`, so a resumed run counts it at the batch rate.
    usage: Usage = field(
        metadata=spec(
            enc=usage_list, dec=usage_of, flag=("batch", _in_batch, Usage.bought_in_batch)
        )
    )
    attempts: int = 1
    demos: tuple[str, ...] = field(default=(), metadata=_DEMOS)
    temperature: float | None = field(default=None, metadata=_UNLESS_NONE)
    latency: float = 0.0
    # Answered by the offline simulator (in process, `ttc serve`, or a cache entry of either).
    simulated: bool = field(default=False, metadata=spec(key="sim", omit="empty"))
    # Served from the response cache: no request went out (the timeline draws it apart).
    cached: bool = field(default=False, metadata=spec(key="cache", omit="empty"))


@event(ok=False, order=(*_SAMPLE_HEAD, "error", "message"))
@dataclass(frozen=True, slots=True)
class SampleFailed(_Keyed):
    """A sample ended in an error after its retries (never paid for: sent again on resume)."""

    KIND: ClassVar[str] = "sample"
    error: str = field(metadata=spec(missing="error"))
    message: str = field(metadata=spec(missing=""))
    attempts: int = 1
    demos: tuple[str, ...] = field(default=(), metadata=_DEMOS)
    temperature: float | None = field(default=None, metadata=_UNLESS_NONE)


@event()
@dataclass(frozen=True, slots=True)
class Judged(_Keyed):
    """The verifier's verdict on a landed sample, and whether the run's judgement accepted it."""

    KIND: ClassVar[str] = "verdict"
    score: float
    answer: str | None
    correct: bool = False
    passed: bool = False
    # The reward model's share, when one judged; whether a noisy judgement flipped the verdict.
    reward: float | None = field(default=None, metadata=_UNLESS_NONE)
    flipped: bool | None = field(default=None, metadata=_UNLESS_NONE)


@event(ok="error", order=("round", "item", "k", "ok"))
@dataclass(frozen=True, slots=True)
class Rated(_Keyed):
    """The reward model's rating of a landed sample (`error` set: the call failed)."""

    KIND: ClassVar[str] = "judge"
    reward: float | None = None
    text: str | None = None
    usage: Usage = field(default_factory=Usage, metadata=_USAGE)
    error: str | None = None


@event(ok="error", order=("item", "ok"))
@dataclass(frozen=True, slots=True)
class DifficultyRated:
    """The difficulty model's rating of a question (da), asked once (`error` set: it failed;
    journals before errors were written hold none: the call failed all the same)."""

    KIND: ClassVar[str] = "difficulty"
    item: str
    rating: float | None = None
    text: str | None = None
    usage: Usage = field(default_factory=Usage, metadata=_USAGE)
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the call was answered (with or without a readable rating)."""
        return self.error is None


@event()
@dataclass(frozen=True, slots=True)
class Retried(_Keyed):
    """One failed attempt of a sample that will be retried after `delay` seconds."""

    KIND: ClassVar[str] = "retry"
    attempt: int = field(metadata=spec(missing=1))
    error: str
    message: str = ""
    delay: float = 0.0
    # A stalled stream's text so far, kept for the record and never judged, and its tokens
    # estimated from the text (`est`: the usage event comes last and never came); left out of
    # the line for every other failure.
    partial: tuple[str, ...] = field(
        default=(), repr=False, metadata=spec(enc=list, dec=_strings, omit="empty")
    )
    estimated: Usage | None = field(
        default=None,
        repr=False,
        metadata=spec(key="est", enc=_usage_or_none, dec=_usage_or_none_of, omit="none"),
    )


@event()
@dataclass(frozen=True, slots=True)
class LimiterSampled:
    """The send path's state, sampled while rounds run (`sample_limiter`): requests in flight,
    the adaptive concurrency cap, and the limits in force (configured, or learned from the
    provider's rate-limit headers; None: none). The run's timeline is drawn from these."""

    KIND: ClassVar[str] = "limiter"
    in_flight: int
    cap: int
    rpm: float | None = None
    tpm: float | None = None


@event()
@dataclass(frozen=True, slots=True)
class LimitsSteered:
    """`ttc ctl` changed a running run: `pause`, `resume` (dispatch goes on) or `set` (the limits
    given; None: that one as it was). A resumed run replays the `set`s into its limiter."""

    KIND: ClassVar[str] = "control"
    action: str
    rpm: float | None = field(default=None, metadata=_UNLESS_NONE)
    tpm: float | None = field(default=None, metadata=_UNLESS_NONE)
    concurrency: int | None = field(default=None, metadata=_UNLESS_NONE)

    def describe(self) -> str:
        """In a few words: `set rpm 600 concurrency 8`, `pause`."""
        given = (("rpm", self.rpm), ("tpm", self.tpm), ("concurrency", self.concurrency))
        return " ".join([self.action, *(f"{k} {v:g}" for k, v in given if v is not None)])


STEERS = ("pause", "resume", "set")


def steer(limiter: Limiter, change: LimitsSteered) -> None:
    """Applies `ttc ctl`'s `change` to `limiter`."""
    if change.action == "pause":
        limiter.pause()
    elif change.action == "resume":
        limiter.unpause()
    elif change.action == "set":
        limiter.retune(change.rpm, change.tpm, change.concurrency)
    else:
        raise ValueError(f"ttc ctl: unknown action {change.action!r} (known: {STEERS})")


def replay_steered(limiter: Limiter, changes: Iterable[LimitsSteered]) -> LimitsSteered | None:
    """A resumed run's limiter as `ttc ctl set` left it (each limit as last set): what was
    replayed, or None if nothing was set. A pause is not replayed: resuming is asking to go on."""
    rpm: float | None = None
    tpm: float | None = None
    concurrency: int | None = None
    for change in changes:
        if change.action == "set":
            rpm = change.rpm if change.rpm is not None else rpm
            tpm = change.tpm if change.tpm is not None else tpm
            concurrency = change.concurrency if change.concurrency is not None else concurrency
    if rpm is None and tpm is None and concurrency is None:
        return None
    if concurrency is not None:  # a resume started for fewer places keeps to them
        concurrency = min(concurrency, limiter.started_with)
    replayed = LimitsSteered("set", rpm, tpm, concurrency)
    steer(limiter, replayed)
    return replayed


# Seconds between limiter samples: a ten-hour run writes 36,000 short lines (about 3 MB).
EVERY_S = 1.0


async def sample_limiter(
    limiter: Limiter, emit: Callable[[Event], None], every_s: float = EVERY_S
) -> None:
    """Emits the limiter's state now and every `every_s` seconds, until cancelled: the run's
    timeline, from which `ttc report --timeline` draws requests in flight against the adaptive
    cap and the limits in force over the run."""
    while True:
        emit(LimiterSampled(limiter.in_flight, limiter.concurrency_cap, limiter.rpm, limiter.tpm))
        await asyncio.sleep(every_s)


@event()
@dataclass(frozen=True, slots=True)
class RoundEnded:
    """A round's totals, written at its barrier."""

    KIND: ClassVar[str] = "round"
    round: int
    active: int
    requests: int
    solved: int
    coverage: float
    errors: int = field(metadata=spec(missing=0))
    retries: int = field(metadata=spec(missing=0))
    wall_s: float = field(metadata=spec(missing=0.0))

    @classmethod
    def of(cls, s: RoundStats) -> RoundEnded:
        """The event of a round's totals at its barrier."""
        return cls(
            s.round,
            s.active,
            s.requests,
            s.solved,
            s.coverage,
            s.errors,
            s.retries,
            round(s.wall_s, 3),
        )


Event = (
    RunStarted
    | SampleLanded
    | SampleFailed
    | Judged
    | Rated
    | DifficultyRated
    | Retried
    | RoundEnded
    | LimiterSampled
    | LimitsSteered
    | BatchFileUploaded
    | BatchCreated
    | BatchUpdated
)

# A run's journal, read back: every kind above.
EVENTS = Codec(
    RunStarted,
    SampleLanded,
    SampleFailed,
    Judged,
    Rated,
    DifficultyRated,
    Retried,
    RoundEnded,
    LimiterSampled,
    BatchFileUploaded,
    BatchCreated,
    BatchUpdated,
    LimitsSteered,
)
