"""The engine's one token estimator: what a request will cost before it is sent, and what it cost.

The TPM limiter charges a request's estimate when it starts and corrects the charge once its
usage is known (`Limiter.reconcile`), so the estimate only has to be close, never exact: a
prompt's characters / 4 (about four characters a token in English and code), plus, per sample,
its output cap if it has one, else the running mean of the outputs seen so far (thinking
included: both are billed as output). The first requests, before any output has been seen, guess
`first_output` tokens.

A server's usage is only believed when it is a token count (`token_count`): an int, not a bool,
from 0 to `MAX_RESPONSE_TOKENS`. Anything else (negative, a float, a string, null, ten million
tokens for one response) is unknown, and the adapter estimates it from the text as this estimator
does (`text_tokens`), so that token totals and cost stay >= 0 and budgets keep counting.
"""

from __future__ import annotations

import math

from ttc.engine.contract._types import Usage

__all__ = [
    "CHARS_PER_TOKEN",
    "MAX_RESPONSE_TOKENS",
    "TokenEstimator",
    "billed",
    "text_tokens",
    "token_count",
]

CHARS_PER_TOKEN = 4
# No real response is billed this many tokens: the largest context windows hold about 2 million,
# and the largest outputs (65,536 tokens) times a generous n stay below it.
MAX_RESPONSE_TOKENS = 10_000_000


def token_count(value: object) -> int | None:
    """`value` if it is a token count a server can mean (an int, not a bool, from 0 to
    MAX_RESPONSE_TOKENS), else None: unknown."""
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        return None  # (a parsed body's counts are plain ints: the first test settles them)
    return value if 0 <= value <= MAX_RESPONSE_TOKENS else None


def text_tokens(chars: int) -> int:
    """Tokens of `chars` characters of text, as the estimator counts them."""
    return max(0, chars) // CHARS_PER_TOKEN


def billed(usage: Usage) -> int:
    """The tokens a completed request counts against a tokens-per-minute limit."""
    return usage.input_tokens + usage.output_tokens + usage.thinking_tokens


class TokenEstimator:
    """A request's tokens for the TPM limit: prompt characters / 4 plus the expected output."""

    def __init__(self, first_output: float = 512.0) -> None:
        self.mean_output = first_output
        self._seen = 0

    def expected_output(self) -> int:
        """The running mean of output tokens per sample, rounded up."""
        return math.ceil(self.mean_output)

    def prompt(self, chars: int) -> int:
        """Tokens of a prompt (or any input) of `chars` characters."""
        return text_tokens(chars)

    def estimate(self, prompt_chars: int, *, cap: int | None = None, n: int = 1) -> int:
        """Tokens of a request whose prompt has `prompt_chars` characters, for `n` samples of at
        most `cap` output tokens each (None: as many as the mean)."""
        per_sample = cap if cap is not None and cap > 0 else self.mean_output
        return self.prompt(prompt_chars) + math.ceil(per_sample * max(1, n))

    def observe(self, output_tokens: int) -> None:
        """Feeds one response's output tokens (thinking included) into the running mean."""
        self._seen += 1
        self.mean_output += (output_tokens - self.mean_output) / self._seen

    def observe_usage(self, usage: Usage) -> None:
        """Feeds one completion's usage: its output and thinking tokens."""
        self.observe(usage.output_tokens + usage.thinking_tokens)
