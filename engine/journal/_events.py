"""The journal's events as typed values: one frozen dataclass per kind, each with its line.

A run's journal (see `_journal`) is these events, encoded: `encode()` gives the JSON object of a
line with the same field names, in the same order, as every journal written so far, and
`decode()` reads one back. Decoding asks only for the fields that replay needs and that every
journal had; the rest take defaults, so a run directory written by an older version still
resumes. An observer (`RunObserver.event`) sees the same values as they are written.

Kinds (`ev`): `start`, `sample` (`SampleLanded` or `SampleFailed`), `verdict`, `judge`,
`difficulty`, `retry`, `round`, `limiter`; batch mode's `batch_file`, `batch`, `batch_state`
(`_batch_events`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ttc.engine.contract._state import RoundStats
from ttc.engine.contract._types import Usage
from ttc.engine.journal._batch_events import BatchCreated, BatchFileUploaded, BatchUpdated

SampleKey = tuple[int, str, int]
# A decoded line: the JSON object of one journal line.
Fields = dict[str, Any]


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


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run (or a resumed run) began, at wall-clock time `t`."""

    KIND: ClassVar[str] = "start"
    resumed: bool
    t: float

    def encode(self) -> Fields:
        """The event's journal line, as a JSON object."""
        return {"ev": self.KIND, "resumed": self.resumed, "t": self.t}

    @classmethod
    def decode(cls, d: Fields) -> RunStarted:
        """The event a journal line holds."""
        return cls(bool(d.get("resumed", False)), float(d.get("t", 0.0)))


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

    def _head(self, kind: str) -> Fields:
        return {"ev": kind, "round": self.round, "item": self.item, "k": self.k}


def _key(d: Fields) -> tuple[int, str, int]:
    return int(d["round"]), str(d["item"]), int(d["k"])


@dataclass(frozen=True, slots=True)
class SampleLanded(_Keyed):
    """A sample's response landed: written the moment it lands, before it is judged."""

    KIND: ClassVar[str] = "sample"
    text: str
    usage: Usage
    attempts: int = 1
    demos: tuple[str, ...] = ()
    temperature: float | None = None
    latency: float = 0.0
    # Answered by the offline simulator (in process, `ttc serve`, or a cache entry of either).
    simulated: bool = False

    def encode(self) -> Fields:
        """The event's journal line, as a JSON object."""
        line = _sample_head(self, self.attempts, self.demos, self.temperature)
        line.update(ok=True, text=self.text, usage=usage_list(self.usage), latency=self.latency)
        if self.simulated:
            line["sim"] = True
        if self.usage.batch is not None:  # bought through a Batch API: the batch rate
            line["batch"] = True
        return line


@dataclass(frozen=True, slots=True)
class SampleFailed(_Keyed):
    """A sample ended in an error after its retries (never paid for: sent again on resume)."""

    KIND: ClassVar[str] = "sample"
    error: str
    message: str
    attempts: int = 1
    demos: tuple[str, ...] = ()
    temperature: float | None = None

    def encode(self) -> Fields:
        """The event's journal line, as a JSON object."""
        line = _sample_head(self, self.attempts, self.demos, self.temperature)
        line.update(ok=False, error=self.error, message=self.message)
        return line


def _sample_head(
    ev: _Keyed, attempts: int, demos: tuple[str, ...], temperature: float | None
) -> Fields:
    line = ev._head("sample")
    line.update(attempts=attempts, demos=list(demos))
    if temperature is not None:
        line["temperature"] = temperature
    return line


def decode_sample(d: Fields) -> SampleLanded | SampleFailed:
    """A `sample` line: landed (`ok`) or failed."""
    key = _key(d)
    attempts = int(d.get("attempts", 1))
    demos = tuple(str(x) for x in d.get("demos", ()))
    temperature = None if d.get("temperature") is None else float(d["temperature"])
    if d["ok"]:
        text, latency = str(d["text"]), float(d.get("latency", 0.0))
        usage = usage_of(d["usage"], bool(d.get("batch", False)))
        simulated = bool(d.get("sim", False))
        return SampleLanded(*key, text, usage, attempts, demos, temperature, latency, simulated)
    error, message = str(d.get("error", "error")), str(d.get("message", ""))
    return SampleFailed(*key, error, message, attempts, demos, temperature)


@dataclass(frozen=True, slots=True)
class Judged(_Keyed):
    """The verifier's verdict on a landed sample, and whether the run's judgement accepted it."""

    KIND: ClassVar[str] = "verdict"
    score: float
    answer: str | None
    correct: bool = False
    passed: bool = False
    # The reward model's share, when one judged; whether a noisy judgement flipped the verdict.
    reward: float | None = None
    flipped: bool | None = None

    def encode(self) -> Fields:
        """The event's journal line, as a JSON object."""
        line = self._head(self.KIND)
        line.update(score=self.score, answer=self.answer, correct=self.correct, passed=self.passed)
        if self.reward is not None:
            line["reward"] = self.reward
        if self.flipped is not None:
            line["flipped"] = self.flipped
        return line

    @classmethod
    def decode(cls, d: Fields) -> Judged:
        """The event a journal line holds."""
        answer = d.get("answer")
        reward = d.get("reward")
        flipped = d.get("flipped")
        return cls(
            *_key(d),
            float(d["score"]),
            None if answer is None else str(answer),
            bool(d.get("correct", False)),
            bool(d.get("passed", False)),
            None if reward is None else float(reward),
            None if flipped is None else bool(flipped),
        )


@dataclass(frozen=True, slots=True)
class Rated(_Keyed):
    """The reward model's rating of a landed sample (`error` set: the call failed)."""

    KIND: ClassVar[str] = "judge"
    reward: float | None = None
    text: str | None = None
    usage: Usage = field(default_factory=Usage)
    error: str | None = None

    def encode(self) -> Fields:
        """The event's journal line, as a JSON object."""
        line = self._head(self.KIND)
        if self.error is not None:
            line.update(ok=False, error=self.error)
        else:
            line.update(ok=True, reward=self.reward, text=self.text, usage=usage_list(self.usage))
        return line

    @classmethod
    def decode(cls, d: Fields) -> Rated:
        """The event a journal line holds."""
        if not d.get("ok"):
            return cls(*_key(d), error=str(d.get("error") or "error"))
        reward, text = d.get("reward"), d.get("text")
        return cls(
            *_key(d),
            None if reward is None else float(reward),
            None if text is None else str(text),
            usage_of(d["usage"]),
        )


@dataclass(frozen=True, slots=True)
class DifficultyRated:
    """The difficulty model's rating of a question (da), asked once (`error` set: it failed)."""

    KIND: ClassVar[str] = "difficulty"
    item: str
    rating: float | None = None
    text: str | None = None
    usage: Usage = field(default_factory=Usage)
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the call was answered (with or without a readable rating)."""
        return self.error is None

    def encode(self) -> Fields:
        """The event's journal line, as a JSON object."""
        line: Fields = {"ev": self.KIND, "item": self.item}
        if self.error is not None:
            line.update(ok=False, error=self.error)
        else:
            line.update(ok=True, rating=self.rating, text=self.text, usage=usage_list(self.usage))
        return line

    @classmethod
    def decode(cls, d: Fields) -> DifficultyRated:
        """The event a journal line holds."""
        item = str(d["item"])
        if not d.get("ok"):
            # Journals before errors were written hold none: the call failed all the same.
            return cls(item, error=str(d.get("error") or "error"))
        rating, text = d.get("rating"), d.get("text")
        return cls(
            item,
            None if rating is None else float(rating),
            None if text is None else str(text),
            usage_of(d["usage"]),
        )


@dataclass(frozen=True, slots=True)
class Retried(_Keyed):
    """One failed attempt of a sample that will be retried after `delay` seconds."""

    KIND: ClassVar[str] = "retry"
    attempt: int
    error: str
    message: str = ""
    delay: float = 0.0

    def encode(self) -> Fields:
        """The event's journal line, as a JSON object."""
        line = self._head(self.KIND)
        line.update(attempt=self.attempt, error=self.error, message=self.message, delay=self.delay)
        return line

    @classmethod
    def decode(cls, d: Fields) -> Retried:
        """The event a journal line holds."""
        attempt = int(d.get("attempt", 1))
        return cls(
            *_key(d),
            attempt,
            str(d["error"]),
            str(d.get("message", "")),
            float(d.get("delay", 0.0)),
        )


@dataclass(frozen=True, slots=True)
class LimiterSampled:
    """The send path's state, sampled while rounds run (`_ratelog`): requests in flight, the
    adaptive concurrency cap, and the limits in force (configured, or learned from the
    provider's rate-limit headers; None: none). The run's timeline is drawn from these."""

    KIND: ClassVar[str] = "limiter"
    in_flight: int
    cap: int
    rpm: float | None = None
    tpm: float | None = None

    def encode(self) -> Fields:
        """The event's journal line, as a JSON object."""
        return {
            "ev": self.KIND,
            "in_flight": self.in_flight,
            "cap": self.cap,
            "rpm": self.rpm,
            "tpm": self.tpm,
        }

    @classmethod
    def decode(cls, d: Fields) -> LimiterSampled:
        """The event a journal line holds."""
        rpm, tpm = d.get("rpm"), d.get("tpm")
        rpm = None if rpm is None else float(rpm)
        return cls(int(d["in_flight"]), int(d["cap"]), rpm, None if tpm is None else float(tpm))


@dataclass(frozen=True, slots=True)
class RoundEnded:
    """A round's totals, written at its barrier."""

    KIND: ClassVar[str] = "round"
    round: int
    active: int
    requests: int
    solved: int
    coverage: float
    errors: int
    retries: int
    wall_s: float

    def encode(self) -> Fields:
        """The event's journal line, as a JSON object."""
        return {
            "ev": self.KIND,
            "round": self.round,
            "active": self.active,
            "requests": self.requests,
            "solved": self.solved,
            "coverage": self.coverage,
            "errors": self.errors,
            "retries": self.retries,
            "wall_s": self.wall_s,
        }

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

    @classmethod
    def decode(cls, d: Fields) -> RoundEnded:
        """The event a journal line holds."""
        return cls(
            int(d["round"]),
            int(d["active"]),
            int(d["requests"]),
            int(d["solved"]),
            float(d["coverage"]),
            int(d.get("errors", 0)),
            int(d.get("retries", 0)),
            float(d.get("wall_s", 0.0)),
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
    | BatchFileUploaded
    | BatchCreated
    | BatchUpdated
)
