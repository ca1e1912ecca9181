"""Judgements: when a response is accepted, when a question is resolved, what it shows and answers.

- ground truth (γ): a response is accepted when the suite's verifier scores it >= γ; the question
  is resolved by its first accepted response, which is its ỹ and its final answer.
- reward model (threshold): accepted when an LLM judge's rubric score reaches the threshold share
  of the scale; resolved and ỹ as above; the final answer is the highest-rewarded response.
- noisy (p): another judgement's binary verdict, flipped with probability p; a question with no
  accepted response answers with its most recent response (section 5.3: "if no response is
  marked correct for a query, we fall back to selecting the most recent response"). Only
  accepted responses join the demonstration pool (pool `accepted`, the paper's "the reward model
  determines whether a response is considered solved and whether it is added to the
  demonstration pool"); with pool `latest` such a question shows its most recent response too.
- consensus (share): self-consistency, no oracle; nothing is accepted; resolved at the first round
  barrier where one answer is given by more than `share` of the question's responses (at least
  two; a response with no extracted answer counts against), and resolved for good from then on;
  answers are grouped by the suite's notion of equivalence (`answer_key`); ỹ is the first response
  carrying the majority answer (for a resolved question), and the majority answer is the final one.

"First" and "most recent" are in (round, k) order. The ground-truth verdict of every response is
computed and journaled whatever the judgement, but only coverage and accuracy read it.

The reward model is an LLM (the `judge` role) asked with `RUBRIC`; the run's `RoleCaller`
(`run/_roles`) sends those requests and reads the score into a `RewardResult`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Protocol

from ttc.engine.contract._config import POOLS
from ttc.engine.contract._errors import ConfigError
from ttc.engine.contract._state import Pick, QuestionRecord, Scored
from ttc.engine.contract._types import Usage, Verdict
from ttc.engine.journal._events import Rated
from ttc.engine.strategy._rubric import SCALE

__all__ = [
    "Consensus",
    "GroundTruth",
    "Judgement",
    "Noisy",
    "RewardModel",
    "RewardResult",
    "unit_draw",
]


class Judgement(Protocol):
    """Decides which responses count, which questions are done, and what each one answers."""

    @property
    def name(self) -> str: ...

    @property
    def reward_model(self) -> bool:
        """Whether each response must first be scored by the reward model (the `judge` role)."""
        ...

    @property
    def keeps_recent(self) -> bool:
        """Whether records keep the most recent response's text (a demonstration fallback)."""
        ...

    @property
    def tallies(self) -> bool:
        """Whether records count extracted answers (self-consistency)."""
        ...

    def describe(self) -> dict[str, Any]: ...

    def accepts(self, s: Scored) -> bool: ...

    def resolved(self, rec: QuestionRecord) -> bool: ...

    def close_round(self, rec: QuestionRecord, round_no: int) -> None:
        """At a round barrier: what the round settles for good (the round consensus came)."""
        ...

    def demo(self, rec: QuestionRecord) -> Pick | None: ...

    def selected(self, rec: QuestionRecord) -> Pick | None: ...


@dataclass(frozen=True, slots=True)
class GroundTruth:
    """The suite's verifier against the reference; accepted when the score reaches γ."""

    gamma: float = 1.0
    name: str = "ground-truth"
    reward_model: bool = False
    keeps_recent: bool = False
    tallies: bool = False

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "gamma": self.gamma}

    def close_round(self, rec: QuestionRecord, round_no: int) -> None:
        return None

    def passed(self, verdict: Verdict) -> bool:
        return verdict.score >= self.gamma

    def accepts(self, s: Scored) -> bool:
        return s.score >= self.gamma

    def resolved(self, rec: QuestionRecord) -> bool:
        return rec.accepted is not None

    def demo(self, rec: QuestionRecord) -> Pick | None:
        return rec.accepted

    def selected(self, rec: QuestionRecord) -> Pick | None:
        return rec.accepted or rec.recent


@dataclass(frozen=True, slots=True)
class RewardModel:
    """An LLM judge's rubric score (0-10, as a share of 10); accepted at `threshold`."""

    threshold: float = 0.7
    name: str = "reward-model"
    reward_model: bool = True
    keeps_recent: bool = False
    tallies: bool = False

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "threshold": self.threshold, "scale": SCALE}

    def close_round(self, rec: QuestionRecord, round_no: int) -> None:
        return None

    def accepts(self, s: Scored) -> bool:
        # A float share can land a hair under the threshold (7/10 < 0.7 in binary).
        return s.reward is not None and s.reward >= self.threshold - 1e-9

    def resolved(self, rec: QuestionRecord) -> bool:
        return rec.accepted is not None

    def demo(self, rec: QuestionRecord) -> Pick | None:
        return rec.accepted

    def selected(self, rec: QuestionRecord) -> Pick | None:
        return rec.best or rec.recent


@dataclass(frozen=True, slots=True)
class Noisy:
    """Another judgement whose binary verdict flips with probability `p`.

    The flip of a response is a draw seeded by (seed, item, round, k), so a resumed run flips the
    same ones. As in the paper's noisy-reward ablation, a question with no accepted response
    answers with its most recent response; `pool` says whether it also shows that response as
    a demonstration (`latest`) or only accepted responses are shown (`accepted`).
    """

    inner: GroundTruth | RewardModel
    p: float
    seed: int
    pool: str = "accepted"
    tallies: bool = False

    def __post_init__(self) -> None:
        if self.pool not in POOLS:
            raise ConfigError(f"--pool: must be one of {', '.join(POOLS)}, got {self.pool!r}")

    @property
    def keeps_recent(self) -> bool:
        # Only a `latest` pool shows the most recent response's text.
        return self.pool == "latest"

    @property
    def name(self) -> str:
        return f"noisy-{self.inner.name}"

    @property
    def reward_model(self) -> bool:
        return self.inner.reward_model

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "p": self.p, "pool": self.pool, "inner": self.inner.describe()}

    def close_round(self, rec: QuestionRecord, round_no: int) -> None:
        return None

    def flipped(self, s: Scored) -> bool:
        return unit_draw(self.seed, "noise", s.item_id, s.round, s.k) < self.p

    def accepts(self, s: Scored) -> bool:
        return self.inner.accepts(s) != self.flipped(s)

    def resolved(self, rec: QuestionRecord) -> bool:
        return rec.accepted is not None

    def demo(self, rec: QuestionRecord) -> Pick | None:
        if self.pool == "latest":
            return rec.accepted or rec.recent
        return rec.accepted

    def selected(self, rec: QuestionRecord) -> Pick | None:
        return rec.accepted or rec.recent


@dataclass(frozen=True, slots=True)
class Consensus:
    """Self-consistency: no oracle. A question is resolved at the first round barrier where one
    answer is given by more than `share` of its responses (the paper: "a consensus over 75%"),
    with at least `min_responses` responses; it stays resolved, whatever later rounds sample.
    Every response counts in the denominator, those with no extracted answer too. ỹ is the first
    response carrying the majority answer; the majority answer is the final one."""

    share: float = 0.75
    min_responses: int = 2
    name: str = "consensus"
    reward_model: bool = False
    keeps_recent: bool = False
    tallies: bool = True

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "share": self.share,
            "over": True,
            "min_responses": self.min_responses,
        }

    def accepts(self, s: Scored) -> bool:
        return False

    def reached(self, rec: QuestionRecord) -> bool:
        """Whether the responses so far agree: one answer from more than `share` of them."""
        top = rec.majority()
        total = rec.responses
        # "Over": strictly; the tolerance keeps 3 of 4 at share 0.75 from passing by rounding.
        return (
            top is not None
            and total >= self.min_responses
            and top.count > self.share * total + 1e-9
        )

    def close_round(self, rec: QuestionRecord, round_no: int) -> None:
        if rec.consensus_round is None and self.reached(rec):
            rec.consensus_round = round_no

    def resolved(self, rec: QuestionRecord) -> bool:
        return rec.consensus_round is not None

    def demo(self, rec: QuestionRecord) -> Pick | None:
        if not self.resolved(rec):
            return None
        top = rec.majority()
        return None if top is None else top.first

    def selected(self, rec: QuestionRecord) -> Pick | None:
        top = rec.majority()
        return None if top is None else top.first


def unit_draw(seed: int, *parts: object) -> float:
    """A uniform draw in [0, 1) fixed by `seed` and `parts`, the same in every process."""
    key = "/".join(map(str, (seed, *parts))).encode()
    digest = hashlib.blake2b(key, digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


@dataclass(frozen=True, slots=True)
class RewardResult:
    """One reward-model call: the share it gave (None: unparsed, or the call failed)."""

    reward: float | None
    text: str | None
    usage: Usage
    error: str | None = None

    @property
    def unparsed(self) -> bool:
        return self.error is None and self.reward is None

    def to_event(self, round_no: int, item_id: str, k: int) -> Rated:
        """The journal's `judge` event for this call on sample (round, item, k)."""
        return Rated(round_no, item_id, k, self.reward, self.text, self.usage, self.error)

    @classmethod
    def from_event(cls, event: Rated) -> RewardResult:
        """The call a journaled `judge` event records (a failed one too: it stays failed)."""
        if event.error is not None:
            return cls(None, None, Usage(), event.error)
        return cls(event.reward, event.text, event.usage)
