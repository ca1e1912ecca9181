"""Allocation: how many samples each question gets in an adaptive round.

Every question K (uniform, Best-of-N), the unresolved ones K (elimination), or a
difficulty-proportional share of a budget (difficulty-aware, Appendix B).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ttc.engine.contract._policy import Allotment, SolvedView
from ttc.engine.strategy._difficulty import (
    NEUTRAL,
    adaptive_measure,
    apportion,
    round_budget,
    samples_for_tokens,
    warmup_measure,
)

log = logging.getLogger("ttc")


@dataclass(frozen=True, slots=True)
class Uniform:
    """Every question, every round (Best-of-N); nothing is ever eliminated.

    With `match_tokens`, N is a number of rounds: as many as make the expected output tokens
    match (the warm-up's mean tokens per sample × questions × K per round, rounded, from 1 to R);
    the rounds after the N-th sample nothing, so the last coverage carries forward (section 5).
    """

    rounds: int = 0
    warmup: int = 1
    match_tokens: int | None = None
    name: str = "uniform"
    needs_difficulty: bool = False

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "match_tokens": self.match_tokens}

    def needs_ratings(self, round_no: int, state: SolvedView, k: int) -> bool:
        return False

    def rounds_matched(self, state: SolvedView, k: int) -> int:
        """N: the rounds whose expected output tokens come closest to `match_tokens`."""
        assert self.match_tokens is not None
        answered, tokens = warmup_measure(state.rounds, self.warmup)
        if answered == 0 or tokens == 0:
            return self.rounds
        per_round = tokens / answered * state.n * k
        return max(1, min(self.rounds, round(self.match_tokens / per_round)))

    def allocate(self, round_no: int, state: SolvedView, k: int) -> Allotment:
        if self.match_tokens is not None:
            last = self.rounds_matched(state, k)
            if round_no == self.warmup + 1:
                log.info(
                    "unif matched to %s output tokens: %d round(s) of K=%d per question",
                    f"{self.match_tokens:,}",
                    last,
                    k,
                )
            if round_no > last:
                return {}
        return dict.fromkeys(range(state.n), k)


@dataclass(frozen=True, slots=True)
class Elimination:
    """Only questions not yet resolved, K samples each."""

    name: str = "elimination"
    needs_difficulty: bool = False

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def needs_ratings(self, round_no: int, state: SolvedView, k: int) -> bool:
        return False

    def allocate(self, round_no: int, state: SolvedView, k: int) -> Allotment:
        return dict.fromkeys(state.unsolved_rows(), k)


@dataclass(frozen=True, slots=True)
class DifficultyAware:
    """The adaptive rounds' budget, spread over unresolved questions in proportion to their
    estimated difficulty (Appendix B; the rules are in `ttc.engine.strategy._difficulty`).

    With `match_tokens` the budget is output tokens (the matched run's, less this run's warm-up),
    turned into samples before each round at the mean output tokens of the adaptive samples so
    far; without, it is (R - R_warm) x K x the questions the warm-up left unresolved, in samples.
    """

    rounds: int
    warmup: int
    match_tokens: int | None = None
    name: str = "difficulty-aware"
    needs_difficulty: bool = True

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "match_tokens": self.match_tokens,
            "budget": "output tokens" if self.match_tokens is not None else "samples",
            "rating": "1-10",
            "neutral": NEUTRAL,
        }

    def target_tokens(self, state: SolvedView) -> int:
        """The output tokens for the adaptive rounds: the matched run's less the warm-up's."""
        assert self.match_tokens is not None
        return self.match_tokens - warmup_measure(state.rounds, self.warmup)[1]

    def samples_left(self, round_no: int, state: SolvedView, k: int) -> int:
        """Samples for round `round_no` and the adaptive rounds after it."""
        planned, answered, spent = adaptive_measure(state.rounds, round_no)
        if self.match_tokens is None:
            unresolved = state.n - state.rounds[self.warmup - 1].solved if self.warmup else state.n
            return max(0, (self.rounds - self.warmup) * k * unresolved - planned)
        # Tokens per sample: the adaptive samples' so far, or before any, the warm-up's.
        measured = (answered, spent) if answered else warmup_measure(state.rounds, self.warmup)
        return samples_for_tokens(self.target_tokens(state) - spent, *measured)

    def needs_ratings(self, round_no: int, state: SolvedView, k: int) -> bool:
        return self.samples_left(round_no, state, k) > 0

    def allocate(self, round_no: int, state: SolvedView, k: int) -> Allotment:
        left = self.samples_left(round_no, state, k)
        if round_no == self.warmup + 1:
            self._announce(state, left)
        this_round = round_budget(left, self.rounds - round_no + 1)
        weights = {row: state.difficulty.get(row, NEUTRAL) for row in state.unsolved_rows()}
        return {row: c for row, c in apportion(this_round, weights).items() if c > 0}

    def _announce(self, state: SolvedView, samples: int) -> None:
        if self.match_tokens is None:
            log.info("da: %s samples for the adaptive rounds", f"{samples:,}")
            return
        target = self.target_tokens(state)
        warm = self.match_tokens - target
        if target <= 0:
            log.warning(
                "da: the matched run's %s output tokens are at or below this run's warm-up's "
                "%s: no adaptive samples and no difficulty ratings",
                f"{self.match_tokens:,}",
                f"{warm:,}",
            )
            return
        log.info(
            "da: matched to %s output tokens: %s for the adaptive rounds after the warm-up's "
            "%s, about %s samples (re-estimated each round from the tokens per sample so far)",
            f"{self.match_tokens:,}",
            f"{target:,}",
            f"{warm:,}",
            f"{samples:,}",
        )
        if samples == 0:
            log.warning("da: %s tokens buy no whole sample: no adaptive samples", f"{target:,}")


@dataclass(frozen=True, slots=True)
class Listed:
    """The questions named (rows), K samples each in every adaptive round, whether or not they
    have been resolved since: the paired ablation samples each of its questions in both arms
    (`ttc ablate`), so that every pair has both of its samples."""

    rows: tuple[int, ...]
    name: str = "listed"
    needs_difficulty: bool = False

    def describe(self) -> dict[str, Any]:
        # The rows themselves: a resumed ablation must sample the same questions.
        return {"name": self.name, "rows": list(self.rows)}

    def needs_ratings(self, round_no: int, state: SolvedView, k: int) -> bool:
        return False

    def allocate(self, round_no: int, state: SolvedView, k: int) -> Allotment:
        return dict.fromkeys(self.rows, k)
