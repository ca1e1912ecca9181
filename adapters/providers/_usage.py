"""A server's token counts as the engine can sum them: a count that is no count is unknown.

A usage field is believed only when it is a token count (`ttc.engine.token_count`: an int, not a
bool, from 0 to `MAX_RESPONSE_TOKENS`, ten million). A negative, fractional, textual, null or
absurd value, or one the server left out, is unknown: the response is kept, the count is
estimated from the text as the engine's estimator does (characters / 4: the prompt for input, the
answers for output; 0 for hidden thinking), and the provider says so once per field on the "ttc"
logger, naming itself and the field. Token totals and cost then stay >= 0, and `--max-cost` keeps
counting against a server that lies about its usage.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ttc.adapters.providers._http import Secrets, redact
from ttc.engine import Message
from ttc.engine.send import text_tokens, token_count

__all__ = ["MISSING", "UsageReader", "answer_tokens", "cached_input", "prompt_tokens"]

log = logging.getLogger("ttc")

MISSING = object()
"""A usage field the server did not send (as opposed to one it sent as null)."""


def prompt_tokens(messages: Sequence[Message]) -> int:
    """The estimated input tokens of a request's messages."""
    return text_tokens(sum(len(m.content) for m in messages))


def answer_tokens(texts: Sequence[str]) -> int:
    """The estimated output tokens of a response's answers."""
    return text_tokens(sum(len(t) for t in texts))


class UsageReader:
    """One provider's reader of token counts; each field's first unknown value is logged."""

    def __init__(self, who: str, secret: Secrets) -> None:
        self.who = who
        self._secret = secret
        self._said: set[str] = set()

    def count(self, field: str, value: object) -> int | None:
        """`value` as a token count, or None (unknown, said once for `field`)."""
        n = token_count(value)
        if n is None and field not in self._said:
            self._said.add(field)
            shown = _shown(value, self._secret)
            log.warning(
                "%s: usage %s is %s, not a token count; it is estimated from the text "
                "(characters / 4) instead (said once per run)",
                self.who,
                field,
                shown,
            )
        return n


def cached_input(reader: UsageReader, field: str, value: object, prompt: int) -> int:
    """Cached input tokens (OpenAI `prompt_tokens_details.cached_tokens`, Gemini
    `cached_content_token_count`): absent or null is none; a count that is no count is unknown,
    and taken as none (billed at the full input price: a budget never undercounts); never more
    than the prompt's tokens."""
    if value is None or value is MISSING:
        return 0
    n = reader.count(field, value)
    return 0 if n is None else min(n, prompt)


def _shown(value: object, secret: Secrets) -> str:
    """A server's value as a log line may quote it: short, and never the key."""
    if value is MISSING:
        return "missing"
    if value is None or isinstance(value, int | float):
        text = repr(value)
        return text if len(text) <= 40 else f"a {len(text)}-digit number"
    if isinstance(value, str) and len(value) <= 40:
        return repr(redact(value, secret))
    if isinstance(value, str):
        return f"a {len(value):,}-character string"
    return f"a JSON {type(value).__name__}"
