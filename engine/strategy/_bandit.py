"""The bandit allocation (`--method bandit`): Zuo & Zhu, "Strategic Scaling of Test-Time Compute:
A Bandit Learning Approach" (arXiv 2506.12721, ICLR 2026).

What was read, and where: the stored corpus (search, `pages`) holds the paper's abstract and
introduction (arxiv.org/html/2506.12721v2) and a summary (papernotes.org, ICLR 2026), not its
algorithm boxes. They say: compute allocation over a batch of queries is a pure-exploration
bandit; a query is eliminated once a correct response is found; the rest of each round's budget
goes by an estimate of difficulty made on the fly, more to hard queries and, among those, to the
ones that look solvable, with entropy- and UCB-style rules; +11.10 points over uniform on
MATH-500. The two rules below are this reading, not the paper's exact pseudo-code:

- `entropy`: a question's share of the round grows with the entropy of the answers its responses
  gave so far (a response with no extracted answer counts as an answer of its own). Responses
  that keep agreeing on one wrong answer (entropy 0) mark a question the model is confidently
  wrong on, likely unsolvable: it gets little; scattered answers mark one still being explored.
- `ucb`: the upper confidence bound of a question's success rate. Every active question has no
  success yet (it would be eliminated), so its empirical mean is 0 and the bound is the
  exploration bonus c·sqrt(2 ln N / n_i) (N: responses so far over the active questions, n_i:
  the question's): questions sampled least get most, and compute stops piling onto the ones
  that failed many times.

Each adaptive round spends `per_question` x (unsolved questions) samples, rounded (default K:
the same as elim's round), apportioned by the scores plus a `floor` share each, so that no
question is starved outright. Pure policy: the scores are read off the run state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ttc.engine.contract._policy import Allotment, SolvedView
from ttc.engine.strategy._difficulty import apportion

RULES = ("entropy", "ucb")


def answer_entropy(counts: list[int]) -> float:
    """The entropy (nats) of the answers' empirical distribution."""
    total = sum(counts)
    if total == 0:
        return 0.0
    return -sum(c / total * math.log(c / total) for c in counts if c > 0)


@dataclass(frozen=True, slots=True)
class Bandit:
    """A round's budget over the unsolved questions by an entropy or UCB score (module doc)."""

    rule: str = "entropy"
    per_question: float | None = None
    c: float = 1.0
    floor: float = 0.1
    name: str = "bandit"
    needs_difficulty: bool = False

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rule": self.rule,
            "per_question": self.per_question,
            "c": self.c,
            "floor": self.floor,
        }

    def needs_ratings(self, round_no: int, state: SolvedView, k: int) -> bool:
        return False

    def scores(self, state: SolvedView, rows: list[int]) -> dict[int, float]:
        """Each active question's score by the rule, before the floor is added."""
        if self.rule == "entropy":
            return {row: answer_entropy(state.answer_counts(row)) for row in rows}
        n_all = sum(state.responses(row) for row in rows)
        log_n = math.log(max(n_all, 2))
        return {row: self.c * math.sqrt(2 * log_n / max(state.responses(row), 1)) for row in rows}

    def allocate(self, round_no: int, state: SolvedView, k: int) -> Allotment:
        rows = state.unsolved_rows()
        per = k if self.per_question is None else self.per_question
        total = round(per * len(rows))
        scores = self.scores(state, rows)
        # Scores are brought to a common scale (their largest is 1) before the floor is added.
        top = max(scores.values(), default=0.0) or 1.0
        weights = {row: s / top + self.floor for row, s in scores.items()}
        return {row: n for row, n in apportion(total, weights).items() if n > 0}
