"""Anthropic's statuses and rate-limit headers in the engine's terms, in one place.

    HTTP status, Anthropic error type                      ttc
    ─────────────────────────────────────────────────────   ──────────────────────────────────
    401 authentication_error, 403 permission_error,
      402 billing_error (any status)                        Fatal(stops_run=True)
    429 rate_limit_error with error.details.error_code
      enforced_spend_limit_reached (the month's cap)        Fatal(stops_run=True)
    429 rate_limit_error                                    RateLimited(retry_after=retry-after,
                                                              else the exhausted limit's reset;
                                                              rate=the anthropic-ratelimit-*)
    529 overloaded_error, 500 api_error, 504, 408, 409       Transient
    400 invalid_request_error, 404, 413 request_too_large   BadRequest (server's message)

Rate-limit headers (`anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
remaining,reset}`, resets as RFC 3339 times) become a `RateInfo`. Anthropic limits input and
output tokens per minute apart (ITPM, OTPM); the engine's limiter has one token bucket, charged
with input + output + thinking tokens. The bucket's limit is the smallest announced token limit:
a total under min(ITPM, OTPM) keeps both kinds under their own, at the price of leaving the
larger limit's surplus unused (`--tpm` sets the bucket by hand). The remaining tokens are the
smallest remainder, and an exhausted family (remaining 0) gives the reset: the gate then waits
for the latest reset among the exhausted ones.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ttc.adapters.providers._http import (
    Secrets,
    header_count,
    parse_duration,
    retry_after,
    status_error,
)
from ttc.engine import Fatal, ProviderError, RateInfo, RateLimited

__all__ = ["anthropic_error", "anthropic_rate_info"]

_PREFIX = "anthropic-ratelimit-"
_TOKEN_FAMILIES = ("tokens", "input-tokens", "output-tokens")
_ACCOUNT_TYPES = frozenset({"authentication_error", "permission_error", "billing_error"})
_SPEND_CAP = "enforced_spend_limit_reached"


def _reset_s(text: str | None, now: float) -> float | None:
    """Seconds until an RFC 3339 time (or a duration, as some proxies send); None if unreadable."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return parse_duration(text)
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


def anthropic_rate_info(headers: Mapping[str, str], *, now: float | None = None) -> RateInfo | None:
    """The anthropic-ratelimit-* headers as a RateInfo (the module docstring), or None."""
    now = time.time() if now is None else now
    families: list[tuple[int | None, int | None, float | None]] = []
    for name in _TOKEN_FAMILIES:
        limit = header_count(headers.get(f"{_PREFIX}{name}-limit"))
        left = header_count(headers.get(f"{_PREFIX}{name}-remaining"))
        reset = _reset_s(headers.get(f"{_PREFIX}{name}-reset"), now)
        if limit is not None or left is not None:
            families.append((limit, left, reset))
    limits = [f[0] for f in families if f[0]]
    lefts = [f[1] for f in families if f[1] is not None]
    spent = [f[2] for f in families if f[1] == 0 and f[2] is not None]
    # The reset that matters: the latest of the exhausted families, else the scarcest one's.
    scarcest = min(families, key=lambda f: math.inf if f[1] is None else f[1], default=None)
    info = RateInfo(
        limit_requests=header_count(headers.get(f"{_PREFIX}requests-limit")) or None,
        limit_tokens=min(limits) if limits else None,
        remaining_requests=header_count(headers.get(f"{_PREFIX}requests-remaining")),
        remaining_tokens=min(lefts) if lefts else None,
        reset_requests_s=_reset_s(headers.get(f"{_PREFIX}requests-reset"), now),
        reset_tokens_s=max(spent) if spent else (scarcest[2] if scarcest else None),
    )
    return None if info == RateInfo() else info


def _error(body: Any) -> dict[str, Any]:
    inner = body.get("error") if isinstance(body, dict) else None
    return inner if isinstance(inner, dict) else {}


def anthropic_error(
    status: int, headers: Mapping[str, str], body: Any, *, who: str, secret: Secrets
) -> ProviderError:
    """The error-tree member of a failed Messages response (the table in the docstring)."""
    error = status_error(status, headers, body, who=who, secret=secret)
    inner = _error(body)
    details = inner.get("details")
    code = details.get("error_code") if isinstance(details, dict) else None
    if inner.get("type") in _ACCOUNT_TYPES:
        return Fatal(str(error), stops_run=True)
    if not isinstance(error, RateLimited):
        return error
    if code == _SPEND_CAP:
        return Fatal(f"{error} (the monthly spend cap: waiting will not help)", stops_run=True)
    rate = anthropic_rate_info(headers)
    wait = retry_after(headers)
    if wait is None and rate is not None:
        exhausted = [
            reset
            for left, reset in (
                (rate.remaining_requests, rate.reset_requests_s),
                (rate.remaining_tokens, rate.reset_tokens_s),
            )
            if left == 0 and reset is not None
        ]
        wait = max(exhausted) if exhausted else None
    return RateLimited(str(error), retry_after=wait, rate=rate)
