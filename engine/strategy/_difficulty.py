"""Difficulty-aware allocation (DA, Appendix B): an LLM rates each question's difficulty once, and
the adaptive rounds' budget goes to the unresolved questions in proportion to their ratings.

The paper's DA (after Wang et al. 2025) asks a model (Gemini-3-flash) for a per-question
difficulty estimate and allocates computation proportionally, keeping "approximately the same
total token usage as the Elim baseline". Here:

- the rating: `PROMPT` asks for 1 (trivial) to 10 (extremely hard); `parse_rating` reads it; a
  reply with no rating (or a call that failed) gets `NEUTRAL`, the middle of the scale, and is
  counted and logged. Ratings are asked once, at the first adaptive round, for the questions the
  warm-up left unresolved, and journaled (`difficulty` events, failed calls too): a resumed run
  does not ask again, so its allocation is the one the first session made. The asking is the
  run's (`run/_roles.Estimates`); this module is the policy: the prompt, the rating, the budget.
- the budget, matched to another run's output tokens T (`--match-tokens`, as the paper does),
  is in tokens: T minus this run's warm-up output tokens. Before each adaptive round it is
  turned into samples by the mean output tokens of the adaptive samples answered so far (the
  warm-up's mean before there are any), so the run lands near T even when the questions left
  (the harder ones) answer at greater length. A T at or below the warm-up's tokens leaves
  nothing: a warning, and neither samples nor ratings.
- without a matched run, what Elim would spend is unknown; the budget is then in samples:
  (R - R_warm) x K x the questions unresolved after the warm-up (what Elim would spend if it
  solved nothing, an upper bound).
- each adaptive round spends its share of what is left (ceil(left / rounds left)), apportioned
  over the still-unresolved questions in proportion to their ratings by largest remainders
  (ties to the lower row): whole samples, the total preserved, a question may get 0. A question
  solved early stops drawing; what it would have drawn goes to the others in later rounds, so
  the budget is spent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ttc.engine.contract._state import RoundStats

LOW, HIGH = 1, 10
NEUTRAL = (LOW + HIGH) / 2

PROMPT = (
    "Estimate how difficult the following problem is for a strong language model to answer "
    "correctly. Do not solve it.\n"
    "\n"
    "Problem:\n"
    "{question}\n"
    "\n"
    f"Rate its difficulty from {LOW} (trivial) to {HIGH} (extremely hard). End your reply with "
    'one line of the form "Difficulty: N".'
)

_LINE = re.compile(r"difficulty\s*(?:rating)?\s*[:=]\s*\**\s*(\d+(?:\.\d+)?)", re.I)
_FRACTION = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(?:/|out of)\s*10(?!\d|\.\d)", re.I)
_NUMBER = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)(?![\d.])")


def prompt(question: str) -> str:
    """The difficulty model's prompt for one question."""
    return PROMPT.format(question=question)


def parse_rating(text: str) -> float | None:
    """The rating in a reply: the last `Difficulty: N`, else `N/10`, else a lone number; None
    when there is none in [1, 10]."""
    value: str | None = None
    if (found := _LINE.findall(text)) or (found := _FRACTION.findall(text)):
        value = found[-1]
    elif len(found := _NUMBER.findall(text.strip())) == 1 and len(text.strip()) <= 8:
        value = found[0]
    if value is None:
        return None
    rating = float(value)
    return rating if LOW <= rating <= HIGH else None


def apportion(total: int, weights: Mapping[int, float]) -> dict[int, int]:
    """`total` whole units over the keys in proportion to `weights` (largest remainders; ties to
    the lower key): the counts sum to `total` exactly, and each is 0 or more."""
    if total <= 0 or not weights:
        return {key: 0 for key in weights}
    exact = {key: Fraction(w) if w > 0 else Fraction(0) for key, w in weights.items()}
    mass = sum(exact.values(), Fraction(0))
    if mass == 0:  # nothing to go by: equal shares
        exact = {key: Fraction(1) for key in weights}
        mass = Fraction(len(exact))
    quotas = {key: total * w / mass for key, w in exact.items()}
    counts = {key: int(q) for key, q in quotas.items()}  # floor: quotas are >= 0
    short = total - sum(counts.values())
    by_remainder = sorted(quotas, key=lambda key: (-(quotas[key] - counts[key]), key))
    for key in by_remainder[:short]:
        counts[key] += 1
    return counts


def warmup_measure(rounds: Sequence[RoundStats], warmup: int) -> tuple[int, int]:
    """(answered samples, output tokens) of the warm-up rounds."""
    rounds = rounds[:warmup]
    answered = sum(s.samples - s.errors for s in rounds)
    return answered, sum(s.usage.output_tokens for s in rounds)


def adaptive_measure(rounds: Sequence[RoundStats], before: int) -> tuple[int, int, int]:
    """(planned samples, answered samples, output tokens) of the adaptive rounds before round
    `before`."""
    done = [s for s in rounds if s.adaptive and s.round < before]
    answered = sum(s.samples - s.errors for s in done)
    return sum(s.planned for s in done), answered, sum(s.usage.output_tokens for s in done)


def samples_for_tokens(tokens: int, answered: int, produced: int) -> int:
    """How many samples `tokens` output tokens buy at `produced / answered` tokens a sample."""
    if tokens <= 0 or answered <= 0 or produced <= 0:
        return 0
    return round(tokens * answered / produced)


def round_budget(left: int, rounds_left: int) -> int:
    """This round's share of `left` samples with `rounds_left` rounds to go (front-loaded)."""
    return -(-left // rounds_left) if rounds_left > 0 and left > 0 else 0
