"""Prices per million tokens, so that every run reports what it cost.

The table holds list prices as the vendors published them in 2025 (USD per million tokens).
Reasoning ("thinking") tokens are billed as output tokens by OpenAI and Google, so their price is
the output price. Prices change: `--price INPUT,OUTPUT[,THINKING]` overrides the table, and a
model missing from it costs nothing until a price is given (the summary says so).
"""

from __future__ import annotations

from dataclasses import dataclass

from ttc.engine._errors import ConfigError
from ttc.engine._types import Usage


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million input, output and thinking tokens."""

    input: float
    output: float
    thinking: float

    def cost(self, usage: Usage) -> float:
        """The cost of `usage` in USD."""
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.thinking_tokens * self.thinking
        ) / 1e6


PRICES: dict[str, Price] = {
    "gpt-4.1": Price(2.00, 8.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.40),
    "gpt-5": Price(1.25, 10.00, 10.00),
    "gpt-5-mini": Price(0.25, 2.00, 2.00),
    "gpt-5-nano": Price(0.05, 0.40, 0.40),
    "gemini-2.5-pro": Price(1.25, 10.00, 10.00),
    "gemini-2.5-flash": Price(0.30, 2.50, 2.50),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.40),
}


def parse_price(text: str) -> Price:
    """`INPUT,OUTPUT[,THINKING]` in USD per million tokens (thinking defaults to output)."""
    parts = text.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise ConfigError(
            f"--price: expected INPUT,OUTPUT[,THINKING] in USD, got {text!r}"
        ) from None
    if len(values) not in (2, 3) or any(not (v >= 0) or v == float("inf") for v in values):
        raise ConfigError(f"--price: expected 2 or 3 non-negative numbers, got {text!r}")
    return Price(values[0], values[1], values[2] if len(values) == 3 else values[1])


def price_for(model: str, override: Price | None = None) -> Price | None:
    """The price of `model`: the override, else the table (also for dated model snapshots)."""
    if override is not None:
        return override
    if model in PRICES:
        return PRICES[model]
    # "gpt-4.1-mini-2025-04-14" is priced as "gpt-4.1-mini": the longest known prefix wins.
    known = [name for name in PRICES if model.startswith(name + "-")]
    return PRICES[max(known, key=len)] if known else None


# Anthropic's Claude models (list prices, USD per million tokens, from Anthropic's pricing page;
# thinking is billed as output). Cache reads cost a tenth of the input price (Sonnet 5.5: a
# twentieth, Fable 5.1: a fortieth) and 5-minute cache writes 1.25 times it; the table has no
# cached-input rate yet, so `ttc` prices a response's cache reads and writes as input.
PRICES.update(
    {
        "claude-3-5-haiku": Price(0.80, 4.00, 4.00),
        "claude-3-7-sonnet": Price(3.00, 15.00, 15.00),
        "claude-opus-4-0": Price(15.00, 75.00, 75.00),
        "claude-opus-4-20250514": Price(15.00, 75.00, 75.00),
        "claude-opus-4-1": Price(15.00, 75.00, 75.00),
        "claude-opus-4-5": Price(5.00, 25.00, 25.00),
        "claude-opus-4-6": Price(5.00, 25.00, 25.00),
        "claude-opus-4-7": Price(5.00, 25.00, 25.00),
        "claude-opus-4-8": Price(5.00, 25.00, 25.00),
        "claude-sonnet-4-0": Price(3.00, 15.00, 15.00),
        "claude-sonnet-4-20250514": Price(3.00, 15.00, 15.00),
        "claude-sonnet-4-5": Price(3.00, 15.00, 15.00),
        "claude-sonnet-4-6": Price(3.00, 15.00, 15.00),
        "claude-haiku-4-5": Price(1.00, 5.00, 5.00),
        "claude-opus-5": Price(5.00, 25.00, 25.00),
        "claude-opus-5-5": Price(4.00, 20.00, 20.00),
        "claude-sonnet-5": Price(2.00, 10.00, 10.00),
        "claude-sonnet-5-5": Price(2.00, 10.00, 10.00),
        "claude-haiku-5-5": Price(0.10, 0.50, 0.50),  # prompts up to 100K tokens
        "claude-fable-5": Price(10.00, 50.00, 50.00),
        "claude-fable-5-1": Price(10.00, 50.00, 50.00),
    }
)

FLEX_PRICES: dict[str, Price] = {
    "gpt-5": Price(0.625, 5.00, 5.00),
    "gpt-5-mini": Price(0.125, 1.00, 1.00),
    "gpt-5-nano": Price(0.025, 0.20, 0.20),
    "o3": Price(1.00, 4.00, 4.00),
    "o4-mini": Price(0.55, 2.20, 2.20),
}
"""OpenAI's flex processing tier (`--service-tier flex`): Batch API rates, half the list price,
for the models that offer it."""


def flex_price_for(model: str) -> Price | None:
    """The flex-tier price of `model` (dated snapshots too), or None if it has none."""
    known = [name for name in FLEX_PRICES if model == name or model.startswith(name + "-")]
    return FLEX_PRICES[max(known, key=len)] if known else None
