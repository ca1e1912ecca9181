"""Run state: one record per question, updated sample by sample, eliminated at the round barrier.

Each question keeps its own progress (samples, tokens, the responses its judgement may select),
so a barrier-free scheduler can later be added without reshaping the state. What a record keeps
is generic: the first accepted response, the most recent, the highest-rewarded, a tally of
extracted answers. Which of them resolves the question, serves as its demonstration ỹ(x) and
is its final answer is the judgement's rule (`ttc.engine.strategy`), read through `RunState`.
"""

from __future__ import annotations

import hashlib
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ttc.engine.contract._errors import DataError
from ttc.engine.contract._fastinit import fast_init
from ttc.engine.contract._types import Item, Usage, normal_answer

# Responses longer than this are kept compressed (zlib's fastest: 3.7x smaller on long reasoning,
# 16 µs to pack 2 kB, 6 µs to unpack): a run keeps a response per question it solved, to show as
# a demonstration, and at a million questions the texts would be most of its memory.
_PACKED_FROM = 512


def _pack(text: str | None) -> str | bytes | None:
    if text is None or len(text) < _PACKED_FROM:
        return text
    return zlib.compress(text.encode(), 1)


@dataclass(frozen=True, slots=True, init=False)
class Pick:
    """One response as the run remembers it: where it came from, what it said, how it was judged.

    `text` is kept only where the judgement may show or report it (long texts compressed);
    `correct` is the ground truth (the suite's verifier at γ) whatever the judgement, for
    coverage and accuracy.
    """

    round: int
    k: int
    packed: str | bytes | None
    answer: str | None
    correct: bool
    reward: float | None

    def __init__(
        self,
        round: int,
        k: int,
        text: str | None,
        answer: str | None,
        correct: bool,
        reward: float | None = None,
    ) -> None:
        # Frozen: set through the slots' descriptors, as `fast_init` sets them (one Pick per
        # sample, some two).
        _PICK_SET[0](self, round)
        _PICK_SET[1](self, k)
        _PICK_SET[2](self, _pack(text))
        _PICK_SET[3](self, answer)
        _PICK_SET[4](self, correct)
        _PICK_SET[5](self, reward)

    @property
    def text(self) -> str | None:
        """The response's text (None where it was not kept)."""
        packed = self.packed
        if isinstance(packed, bytes):
            return zlib.decompress(packed).decode()
        return packed

    @property
    def key(self) -> tuple[int, int]:
        """(round, k): the order of responses, whatever order they landed in."""
        return (self.round, self.k)


# The slots of Pick, in its fields' order.
_PICK_SET = tuple(
    getattr(Pick, name).__set__ for name in ("round", "k", "packed", "answer", "correct", "reward")
)


@dataclass(slots=True)
class Tally:
    """One extracted answer of a question: how many responses gave it, and the first that did."""

    count: int
    first: Pick


@fast_init
@dataclass(frozen=True, slots=True)
class Scored:
    """What a judgement sees of one response: the ground-truth verdict and the reward, if any."""

    item_id: str
    round: int
    k: int
    score: float
    answer: str | None
    # The reward model's score in [0, 1]; None when no reward model judged the response.
    reward: float | None = None


_NO_USAGE = Usage()


@dataclass(slots=True)
class QuestionRecord:
    """Everything the run knows about one question."""

    samples: int = 0
    errors: int = 0
    # One shared zero to start from (Usage is frozen): a large test set's records are built
    # faster, and leave the garbage collector fewer objects to walk.
    usage: Usage = _NO_USAGE
    # The first accepted response in (round, k) order, whatever order the samples landed in.
    accepted: Pick | None = None
    # The most recent response in (round, k) order.
    recent: Pick | None = None
    # The highest reward (the earliest of equals), when a reward model judges.
    best: Pick | None = None
    # Responses (not errors), with or without an extracted answer.
    responses: int = 0
    # An extracted answer's key (the suite's notion of equivalence) -> its tally, when the
    # judgement is self-consistency.
    tally: dict[str, Tally] | None = None
    # The first round with a ground-truth-correct response (coverage), if any.
    covered_round: int | None = None
    # Self-consistency: the round at whose barrier the responses first reached a consensus.
    consensus_round: int | None = None
    # Per-question stopping (ESC): the responses and answer counts at the last round barrier, so
    # that a rule can read the window tallied since.
    window_from: tuple[int, dict[str, int]] | None = None

    @property
    def first_pass(self) -> tuple[int, int, str] | None:
        """(round, k, text) of the first accepted response."""
        a = self.accepted
        return None if a is None or a.text is None else (a.round, a.k, a.text)

    @property
    def covered(self) -> bool:
        return self.covered_round is not None

    def majority(self) -> Tally | None:
        """The most frequent answer; ties go to the answer given first in (round, k) order."""
        if not self.tally:
            return None
        return max(self.tally.values(), key=lambda t: (t.count, (-t.first.round, -t.first.k)))


class Rules(Protocol):
    """What the state asks of a judgement (see `ttc.engine.strategy._judges`)."""

    @property
    def keeps_recent(self) -> bool: ...

    @property
    def tallies(self) -> bool: ...

    def resolved(self, rec: QuestionRecord) -> bool: ...

    def close_round(self, rec: QuestionRecord, round_no: int) -> None: ...

    def demo(self, rec: QuestionRecord) -> Pick | None: ...

    def selected(self, rec: QuestionRecord) -> Pick | None: ...


class _FirstAccepted:
    """The ground-truth rules, for a state built without a judgement."""

    keeps_recent = False
    tallies = False

    def resolved(self, rec: QuestionRecord) -> bool:
        return rec.accepted is not None

    def close_round(self, rec: QuestionRecord, round_no: int) -> None:
        return None

    def demo(self, rec: QuestionRecord) -> Pick | None:
        return rec.accepted

    def selected(self, rec: QuestionRecord) -> Pick | None:
        return rec.accepted or rec.recent


@dataclass(slots=True)
class RoundStats:
    """Totals of one round, as the per-round table and summary.json report them."""

    round: int
    adaptive: bool
    active: int = 0
    planned: int = 0
    # Samples sent to the provider (or answered by the response cache), by any session.
    requests: int = 0
    samples: int = 0
    # Samples the judgement accepted.
    passed: int = 0
    newly_solved: int = 0
    # Questions the judgement has resolved (eliminated under elimination), at the barrier.
    solved: int = 0
    # Ground truth at the barrier: questions with a correct response, and with a correct
    # selected answer.
    covered: int = 0
    coverage: float = 0.0
    accurate: int = 0
    accuracy: float = 0.0
    usage: Usage = field(default_factory=Usage)
    errors: int = 0
    retries: int = 0
    rate_limited: int = 0
    # This session's part of `requests`: those it sent, and those its journal already held (sent
    # by an earlier session). Not in summary.json's rounds, which a resumed run writes as an
    # uninterrupted one would.
    sent: int = 0
    replayed: int = 0
    wall_s: float = 0.0
    # The reward model's calls on this round's responses (journaled calls replayed included).
    judge_calls: int = 0
    judge_usage: Usage = field(default_factory=Usage)
    judge_unparsed: int = 0
    judge_errors: int = 0
    # False while the round runs, and for a round the run was stopped in.
    complete: bool = False

    def describe(self, rounds: int) -> str:
        """The round's log line at its barrier."""
        journal = f" ({self.replayed} from the journal)" if self.replayed else ""
        return (
            f"round {self.round}/{rounds}: {self.active} active, {self.requests} requests"
            f"{journal}, {self.solved} solved ({100 * self.coverage:.1f}%), "
            f"{self.usage.output_tokens} output tokens"
        )


class RunState:
    """The per-question records of a run, indexed by row (the item's position)."""

    def __init__(
        self,
        items: Sequence[Item],
        rules: Rules | None = None,
        answer_key: Callable[[str], str] | None = None,
    ) -> None:
        self.items = list(items)
        self.rows = {item.id: row for row, item in enumerate(self.items)}
        if len(self.rows) != len(self.items):
            counts = Counter(item.id for item in self.items)
            dup = next(item_id for item_id, c in counts.items() if c > 1)
            raise DataError(f"duplicate item id {dup!r}")
        self.rules: Rules = rules or _FirstAccepted()
        # Which extracted answers self-consistency counts as one: the suite's `answer_key`,
        # else the answer with its whitespace collapsed.
        self.answer_key = answer_key or normal_answer
        self.records = [QuestionRecord() for _ in self.items]
        self.rounds: list[RoundStats] = []
        # Difficulty-aware allocation: each question's estimated difficulty, by row.
        self.difficulty: dict[int, float] = {}
        # Whether any answer came from the offline simulator: live, from the response cache or
        # replayed from the journal. Reports built from such numbers say they are simulated.
        self.simulated = False

    @property
    def n(self) -> int:
        return len(self.items)

    def is_solved(self, row: int) -> bool:
        """Whether the judgement has resolved the question (elimination drops it)."""
        return self.rules.resolved(self.records[row])

    def unsolved_rows(self) -> list[int]:
        resolved = self.rules.resolved
        return [row for row, rec in enumerate(self.records) if not resolved(rec)]

    def solved_rows(self) -> list[int]:
        resolved = self.rules.resolved
        return [row for row, rec in enumerate(self.records) if resolved(rec)]

    def solved_count(self) -> int:
        resolved = self.rules.resolved
        return sum(resolved(rec) for rec in self.records)

    def has_demo(self, row: int) -> bool:
        """Whether the question is in the demonstration pool (it has a ỹ)."""
        return self.demo(row) is not None

    def demo_rows(self) -> list[int]:
        demo = self.rules.demo
        return [row for row, rec in enumerate(self.records) if demo(rec) is not None]

    def responses(self, row: int) -> int:
        """The responses (not errors) a question has had."""
        return self.records[row].responses

    def answer_counts(self, row: int) -> list[int]:
        """How many of its responses gave each answer; a response without an extracted answer
        (or any, when the judgement keeps no tally) counts as one of its own."""
        rec = self.records[row]
        counts = [t.count for t in (rec.tally or {}).values()]
        return counts + [1] * (rec.responses - sum(counts))

    def demo(self, row: int) -> Pick | None:
        """The response a question shows as a demonstration, if it has one."""
        return self.rules.demo(self.records[row])

    def response(self, row: int) -> str | None:
        """ỹ(x) of a question, if it has one: the response it shows as a demonstration."""
        pick = self.demo(row)
        return None if pick is None else pick.text

    def selected(self, row: int) -> Pick | None:
        """The question's final answer, by the judgement's rule."""
        return self.rules.selected(self.records[row])

    def close_round(self, round_no: int) -> None:
        """The round barrier: the judgement settles what the round decided for good."""
        close = self.rules.close_round
        for rec in self.records:
            close(rec, round_no)

    def covered_count(self) -> int:
        return sum(rec.covered_round is not None for rec in self.records)

    def accurate_count(self) -> int:
        selected = self.rules.selected
        return sum(bool((p := selected(rec)) and p.correct) for rec in self.records)

    def record_error(self, row: int, usage: Usage) -> None:
        """Account one sample that ended in an error."""
        rec = self.records[row]
        rec.samples += 1
        rec.errors += 1
        rec.usage = rec.usage + usage

    def record_sample(
        self,
        row: int,
        round_no: int,
        k: int,
        text: str,
        usage: Usage,
        scored: Scored,
        correct: bool,
        accepted: bool,
    ) -> bool:
        """Account one judged response; True when it makes the question newly accepted."""
        rec = self.records[row]
        rec.samples += 1
        rec.responses += 1
        rec.usage = rec.usage + usage
        rules = self.rules
        key = (round_no, k)
        if correct and (rec.covered_round is None or round_no < rec.covered_round):
            rec.covered_round = round_no
        if rec.recent is None or key > rec.recent.key:
            kept = text if rules.keeps_recent else None
            rec.recent = Pick(round_no, k, kept, scored.answer, correct, scored.reward)
        reward = scored.reward
        if reward is not None:
            best = rec.best
            if best is None or (reward, (-round_no, -k)) > (best.reward, (-best.round, -best.k)):
                rec.best = Pick(round_no, k, text, scored.answer, correct, reward)
        if rules.tallies and scored.answer is not None:
            group = self.answer_key(scored.answer)
            _count(rec, group, Pick(round_no, k, text, scored.answer, correct, reward))
        if not accepted:
            return False
        was = rec.accepted is not None
        if rec.accepted is None or key < rec.accepted.key:
            rec.accepted = Pick(round_no, k, text, scored.answer, correct, reward)
        return not was

    def total_usage(self) -> Usage:
        total = Usage()
        for stats in self.rounds:
            total = total + stats.usage
        return total

    def judge_usage(self) -> Usage:
        total = Usage()
        for stats in self.rounds:
            total = total + stats.judge_usage
        return total


def _count(rec: QuestionRecord, key: str, pick: Pick) -> None:
    if rec.tally is None:
        rec.tally = {}
    tally = rec.tally.get(key)
    if tally is None:
        rec.tally[key] = Tally(1, pick)
        return
    tally.count += 1
    if pick.key < tally.first.key:
        tally.first = pick


def sample_seed(run_seed: int, item_id: str, round_no: int, k: int) -> int:
    """The sampling seed of one planned sample: stable across processes, fits in 31 bits."""
    digest = hashlib.blake2b(f"{run_seed}/{item_id}/{round_no}/{k}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big") & 0x7FFFFFFF


def count_into(state: RunState, stats: RoundStats) -> None:
    """The barrier's counts: resolved, covered and accurate questions, as the state stands."""
    state.close_round(stats.round)
    stats.requests = stats.replayed + stats.sent
    n = state.n
    stats.solved = state.solved_count()
    stats.covered = state.covered_count()
    stats.accurate = state.accurate_count()
    stats.coverage = stats.covered / n if n else 0.0
    stats.accuracy = stats.accurate / n if n else 0.0
    i = next((i for i, s in enumerate(state.rounds) if s is stats), len(state.rounds))
    stats.newly_solved = stats.solved - (state.rounds[i - 1].solved if i > 0 else 0)
