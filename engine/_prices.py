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
