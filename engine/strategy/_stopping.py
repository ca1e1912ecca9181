"""Per-question stopping by agreement, the field's adaptive self-consistency baselines: each
question is sampled round after round (K a round, zero-shot) until its answers agree, judged
with no oracle, as the papers do; the final answer is the majority's.

- Early-Stopping Self-Consistency (ESC; Li et al., "Escape Sky-high Cost: Early-stopping
  Self-Consistency for Multi-step Reasoning", ICLR 2024): samples come in windows (here, a
  round's K samples, or as many rounds' as make two with K = 1); a question stops at the first
  window whose answers are all the same (every sample of it with an extracted answer).
- Adaptive-Consistency (ASC; Aggarwal et al., "Let's Sample Step by Step: Adaptive-Consistency
  for Efficient Reasoning and Coding with LLMs", EMNLP 2023): after each round, the probability
  that the leading answer stays ahead of the second, P(p1 > p2) under a uniform prior, that is
  Beta(v1 + 1, v2 + 1) > 1/2 for the two largest answer counts v1 >= v2 (the paper's Beta
  criterion); the question stops once it exceeds `threshold` (the paper's 0.95).

Both stop at the round barrier (`close_round`), as self-consistency does, so what a round decides
never depends on the order its samples landed in; both stop for good. A question that never
agrees is sampled every round up to --rounds (the papers' sample cap is R x K here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ttc.engine.contract._state import Pick, QuestionRecord, Scored


def _counts(rec: QuestionRecord) -> dict[str, int]:
    return {} if not rec.tally else {key: t.count for key, t in rec.tally.items()}


def beta_lead(v1: int, v2: int) -> float:
    """P(X > 1/2) for X ~ Beta(v1 + 1, v2 + 1): the probability that an answer seen `v1` times
    is more likely than one seen `v2` times (uniform prior). For whole parameters it is a
    binomial tail: P(Binomial(v1 + v2 + 1, 1/2) <= v1), exactly."""
    n = v1 + v2 + 1
    return float(sum(math.comb(n, i) for i in range(v1 + 1)) / 2**n)


@dataclass(frozen=True, slots=True)
class _AgreementRule:
    """What ESC and ASC share: no response is accepted; a question is resolved at the barrier
    its stopping rule first fires, for good; ỹ and the final answer are the majority's first."""

    name: str = "agreement"
    reward_model: bool = False
    keeps_recent: bool = False
    tallies: bool = True

    def accepts(self, s: Scored) -> bool:
        return False

    def stops(self, rec: QuestionRecord) -> bool:  # pragma: no cover (each rule has its own)
        raise NotImplementedError

    def close_round(self, rec: QuestionRecord, round_no: int) -> None:
        if rec.consensus_round is None and self.stops(rec):
            rec.consensus_round = round_no
        # The counts at this barrier: the next window is what is tallied after it.
        rec.window_from = (rec.responses, _counts(rec))

    def resolved(self, rec: QuestionRecord) -> bool:
        return rec.consensus_round is not None

    def demo(self, rec: QuestionRecord) -> Pick | None:
        top = rec.majority() if self.resolved(rec) else None
        return None if top is None else top.first

    def selected(self, rec: QuestionRecord) -> Pick | None:
        top = rec.majority()
        return None if top is None else top.first


@dataclass(frozen=True, slots=True)
class WindowAgreement(_AgreementRule):
    """ESC: stopped at the first round whose `min_window` or more responses all give one answer."""

    min_window: int = 2
    name: str = "esc"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "window": "a round's K samples", "min_window": self.min_window}

    def close_round(self, rec: QuestionRecord, round_no: int) -> None:
        if rec.consensus_round is None and self.stops(rec):
            rec.consensus_round = round_no
        # A window closes once it holds `min_window` responses (with K = 1, two rounds').
        before = rec.window_from[0] if rec.window_from is not None else 0
        if rec.responses - before >= self.min_window:
            rec.window_from = (rec.responses, _counts(rec))

    def stops(self, rec: QuestionRecord) -> bool:
        before, counts = rec.window_from or (0, {})
        size = rec.responses - before
        grew = {key: c - counts.get(key, 0) for key, c in _counts(rec).items()}
        grew = {key: c for key, c in grew.items() if c > 0}
        # Every response of the window has an answer, and it is the same answer.
        return size >= self.min_window and len(grew) == 1 and sum(grew.values()) == size


@dataclass(frozen=True, slots=True)
class BetaStop(_AgreementRule):
    """ASC: stopped once P(leading answer more likely than the second) exceeds `threshold`."""

    threshold: float = 0.95
    name: str = "asc"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "criterion": "beta", "threshold": self.threshold}

    def stops(self, rec: QuestionRecord) -> bool:
        counts = sorted(_counts(rec).values(), reverse=True)
        if not counts:
            return False
        v2 = counts[1] if len(counts) > 1 else 0
        return beta_lead(counts[0], v2) > self.threshold
