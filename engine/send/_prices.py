"""Prices per million tokens, so that every run reports what it cost.

The table holds list prices as the vendors published them in 2025 (USD per million tokens).
Reasoning ("thinking") tokens are billed as output tokens by OpenAI and Google, so their price is
the output price. Prices change: `--price INPUT,OUTPUT[,THINKING]` overrides the table, and a
model missing from it costs nothing until a price is given (the summary says so).

Two more rates per model: cached input (tokens the provider served from its prompt cache:
OpenAI's `cached_tokens`, Gemini's `cached_content_token_count`; a quarter of the input price
for OpenAI's GPT-4.1 family, a tenth for GPT-5, a quarter for Gemini 2.5, as listed in 2025), and
the batch rate: both vendors bill a Batch API's tokens at half the list price (`batch` = 0.5,
the share of the list price paid; `--batch-discount D` makes it 1 - D). A usage's `batch` part
is priced at the batch rate, the rest at the list price; its cached tokens at the cached rate.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ttc.engine.contract._errors import ConfigError
from ttc.engine.contract._types import Usage


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million input, output and thinking tokens; per million cached input tokens (None:
    the input price); and the share of these prices a Batch API's tokens cost."""

    input: float
    output: float
    thinking: float
    cached_input: float | None = None
    batch: float = 0.5

    def cost(self, usage: Usage) -> float:
        """The cost of `usage` in USD: its batch part at the batch rate, the rest at the list
        price, cached input tokens at the cached rate."""
        bought = usage.batch
        if bought is None:
            return self._list(usage)
        rest = Usage(
            max(0, usage.input_tokens - bought.input_tokens),
            max(0, usage.output_tokens - bought.output_tokens),
            max(0, usage.thinking_tokens - bought.thinking_tokens),
            max(0, usage.cached_tokens - bought.cached_tokens),
        )
        return self._list(rest) + self.batch * self._list(bought)

    def _list(self, usage: Usage) -> float:
        cached = min(usage.cached_tokens, usage.input_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return (
            (usage.input_tokens - cached) * self.input
            + cached * cached_rate
            + usage.output_tokens * self.output
            + usage.thinking_tokens * self.thinking
        ) / 1e6

    def with_batch_discount(self, discount: float) -> Price:
        """This price with a Batch API's tokens `discount` off the list price (0.5: half)."""
        return replace(self, batch=1.0 - discount)


PRICES: dict[str, Price] = {
    "gpt-4.1": Price(2.00, 8.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.40, 0.025),
    "gpt-5": Price(1.25, 10.00, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.40, 0.005),
    "gemini-2.5-pro": Price(1.25, 10.00, 10.00, 0.31),
    "gemini-2.5-flash": Price(0.30, 2.50, 2.50, 0.075),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.40, 0.025),
}


def parse_batch_discount(text: str) -> float:
    """`--batch-discount D`: the share off the list price a Batch API's tokens get, in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"--batch-discount: expected a number in [0, 1), got {text!r}") from None
    if not 0 <= value < 1:
        raise ConfigError(f"--batch-discount: expected a number in [0, 1), got {text!r}")
    return value


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


def price_with_discount(price: Price | None, discount: float | None) -> Price | None:
    """`price` with `--batch-discount` applied, when one was given."""
    if price is None or discount is None:
        return price
    return price.with_batch_discount(discount)


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
# thinking is billed as output). Cache reads (`cached_input`) cost a tenth of the input price
# (Sonnet 5.5: a twentieth, Fable 5.1: a fortieth); 5-minute cache writes cost 1.25 times it,
# which the table does not split: they are priced as input.
PRICES.update(
    {
        "claude-3-5-haiku": Price(0.80, 4.00, 4.00, 0.08),
        "claude-3-7-sonnet": Price(3.00, 15.00, 15.00, 0.3),
        "claude-opus-4-0": Price(15.00, 75.00, 75.00, 1.5),
        "claude-opus-4-20250514": Price(15.00, 75.00, 75.00, 1.5),
        "claude-opus-4-1": Price(15.00, 75.00, 75.00, 1.5),
        "claude-opus-4-5": Price(5.00, 25.00, 25.00, 0.5),
        "claude-opus-4-6": Price(5.00, 25.00, 25.00, 0.5),
        "claude-opus-4-7": Price(5.00, 25.00, 25.00, 0.5),
        "claude-opus-4-8": Price(5.00, 25.00, 25.00, 0.5),
        "claude-sonnet-4-0": Price(3.00, 15.00, 15.00, 0.3),
        "claude-sonnet-4-20250514": Price(3.00, 15.00, 15.00, 0.3),
        "claude-sonnet-4-5": Price(3.00, 15.00, 15.00, 0.3),
        "claude-sonnet-4-6": Price(3.00, 15.00, 15.00, 0.3),
        "claude-haiku-4-5": Price(1.00, 5.00, 5.00, 0.1),
        "claude-opus-5": Price(5.00, 25.00, 25.00, 0.5),
        "claude-opus-5-5": Price(4.00, 20.00, 20.00, 0.4),
        "claude-sonnet-5": Price(2.00, 10.00, 10.00, 0.2),
        "claude-sonnet-5-5": Price(2.00, 10.00, 10.00, 0.1),
        "claude-haiku-5-5": Price(0.10, 0.50, 0.50, 0.01),  # prompts up to 100K tokens
        "claude-fable-5": Price(10.00, 50.00, 50.00, 1),
        "claude-fable-5-1": Price(10.00, 50.00, 50.00, 0.25),
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
