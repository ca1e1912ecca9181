"""What a request, and a whole run's plan, can cost at worst: what the run budget reserves
before a request is sent, and what `ttc run --dry-run` prints.

A request's worst case is its prompt's estimate (characters / 4, as the token estimator counts
them) and its output cap (`--max-tokens`, plus a thinking budget when one is set, per sample), at
the model's price. A request with no output cap has no worst case: its output is taken as the
running mean of the outputs seen so far (`TokenEstimator`), so the bound it gives is an
estimate, not a ceiling.

A plan's worst case is every round's: every question sampled K times in every round (an adaptive
round samples only the unresolved questions, so a run costs this or less), a warm-up round at its
zero-shot prompt, an adaptive round of a method that shows demonstrations at a prompt with P of
them, each response as long as the output cap allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ttc.engine.contract._config import RunConfig
from ttc.engine.contract._types import Demo, Item, Request, Sampling, Suite, Usage
from ttc.engine.send._prices import Price
from ttc.engine.send._tokens import CHARS_PER_TOKEN, TokenEstimator, text_tokens

__all__ = ["PlanCost", "RoundCost", "Worst", "plan_cost", "worst_of"]


@dataclass(frozen=True, slots=True)
class Worst:
    """A request's worst case: its usage (prompt estimate, output and thinking caps) and its
    cost at the price (None: no known price)."""

    usage: Usage
    cost: float | None

    @property
    def output_tokens(self) -> int:
        """The output tokens it may produce, as --max-output-tokens counts them."""
        return self.usage.output_tokens


def _output_cap(sampling: Sampling, outputs: TokenEstimator) -> int:
    cap = sampling.max_output_tokens
    return cap if cap is not None and cap > 0 else outputs.expected_output()


def worst_of(request: Request, price: Price | None, outputs: TokenEstimator) -> Worst:
    """`request`'s worst case at `price`: its prompt's estimate plus, per sample, its output cap
    (the running mean of outputs when it has none) and its thinking budget."""
    prompt = text_tokens(sum(len(m.content) for m in request.messages))
    n = max(1, request.n)
    thinking = request.sampling.thinking_budget or 0
    usage = Usage(prompt, _output_cap(request.sampling, outputs) * n, thinking * n)
    return Worst(usage, None if price is None else price.cost(usage))


@dataclass(frozen=True, slots=True)
class RoundCost:
    """One round of a plan at its worst: its requests, their usage and cost (None: no price)."""

    round: int
    requests: int
    usage: Usage
    cost: float | None


@dataclass(frozen=True, slots=True)
class PlanCost:
    """A run's plan at its worst, round by round; `capped` is False when requests have no
    output cap (their output is a guess, not a ceiling)."""

    rounds: tuple[RoundCost, ...]
    capped: bool

    @property
    def requests(self) -> int:
        """The requests of every round."""
        return sum(r.requests for r in self.rounds)

    @property
    def usage(self) -> Usage:
        """The usage of every round."""
        total = Usage()
        for r in self.rounds:
            total = total + r.usage
        return total

    @property
    def cost(self) -> float | None:
        """The cost of every round (None: no known price)."""
        costs = [r.cost for r in self.rounds]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)


def plan_cost(
    config: RunConfig,
    suite: Suite,
    items: Sequence[Item],
    price: Price | None,
    *,
    demonstrations: bool,
) -> PlanCost:
    """The worst case of running `items` by `config` at `price`: every question K times a round;
    an adaptive round's prompt shows P demonstrations when the method shows any."""
    outputs = TokenEstimator()
    sampling = config.sampling
    cap = _output_cap(sampling, outputs)
    longest = "x" * (cap * CHARS_PER_TOKEN)  # a demonstration's response at the output cap
    warm = adaptive = 0
    for item in items:
        warm += len(suite.warmup_prompt(item))
        if demonstrations and config.rounds > config.warmup_rounds:
            demos = [Demo(item.id, item.question, longest)] * config.p
            adaptive += len(suite.adaptive_prompt(item, demos))
    n = len(items) * config.k
    thinking = (sampling.thinking_budget or 0) * n
    rounds = []
    for t in range(1, config.rounds + 1):
        chars = warm if t <= config.warmup_rounds or not demonstrations else adaptive
        usage = Usage(text_tokens(chars) * config.k, cap * n, thinking)
        rounds.append(RoundCost(t, n, usage, None if price is None else price.cost(usage)))
    capped = sampling.max_output_tokens is not None and sampling.max_output_tokens > 0
    return PlanCost(tuple(rounds), capped)
