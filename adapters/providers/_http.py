"""What the HTTP adapters share: API keys, rate-limit headers, retry hints, and status classes.

`status_error` is the one mapping from an HTTP error status to the engine's error tree; each
adapter's translating context manager feeds it the status, headers and body of a failed response:

    401, 403, or, whatever the status, a code that       Fatal(stops_run=True): the account
      refuses the account: OpenAI insufficient_quota,      is refused, so every further
      billing_hard_limit_reached, billing_not_active,      request would be too
      account_deactivated, invalid_api_key; Google
      API_KEY_INVALID, PERMISSION_DENIED, UNAUTHENTICATED
    429 / RESOURCE_EXHAUSTED, a per-day QuotaFailure     Fatal(stops_run=True)
    429 "Resource Unavailable" (OpenAI's flex tier        Transient: the vendor lacks capacity,
      lacks capacity; code resource_unavailable)            not our quota; backoff, not billed
    429 / RESOURCE_EXHAUSTED                             RateLimited(retry_after=retry-after-ms
                                                           | Retry-After | Google RetryInfo
                                                           | x-ratelimit-reset-* at 0, capped)
    408, 409, 5xx                                        Transient
    other 4xx (400, 404, 413, 422, ...)                  BadRequest, with the server's message
    anything else (3xx)                                  Fatal

A daily quota does not come back in seconds: Google says which quota ran out in a
google.rpc.QuotaFailure detail, `{"violations": [{"quotaId":
"GenerateRequestsPerDayPerProjectPerModel-FreeTier", "quotaMetric": ...}]}`, and an id or metric
naming "PerDay" stops the run rather than waiting out the RetryInfo that comes with it.

The wait a 429 asks for is passed on as the server said it; the engine's `RetryPolicy` honours it
only in (0, 60] seconds (as the official OpenAI client does) and backs off by itself otherwise.

Every parser of a header or retry hint returns None for a value it cannot read (garbage,
negative, NaN, infinite), never raises. Messages never carry the API key nor a credential of the
base URL: server text passes through `redact` (`ttc.engine.redact`) before it is quoted.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import orjson

from ttc.adapters.providers._vendors import OPENAI_BASE_URL
from ttc.engine import (
    BadRequest,
    ConfigError,
    Fatal,
    ProviderError,
    RateInfo,
    RateLimited,
    Transient,
)
from ttc.engine._util import redact

__all__ = [
    "NOT_AN_ENV_NAME",
    "OPENAI_BASE_URL",
    "SIM_FINGERPRINT",
    "SIM_MODEL_SUFFIX",
    "Secrets",
    "api_key_from",
    "error_message",
    "google_retry_delay",
    "header_count",
    "is_env_name",
    "is_local_url",
    "loads_or_text",
    "parse_duration",
    "rate_info",
    "redact",
    "require_env_name",
    "retry_after",
    "status_error",
]

# How `ttc serve` marks answers from its offline simulator, so that providers (and the reports
# of their runs) can tell a rehearsal from the vendor: OpenAI's `system_fingerprint`, and a
# suffix of Gemini's `modelVersion`.
SIM_FINGERPRINT = "fp_ttc_sim"
SIM_MODEL_SUFFIX = "-ttc-sim"
NOT_AN_ENV_NAME = "expected the NAME of an environment variable (letters, digits, _), not a key"

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
# Longest unit first, so "20ms" is 20 milliseconds and not 20 minutes and a stray "s".
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|ns|h|m|s)")
_MESSAGE_LIMIT = 300
# The key, or every secret of a provider (its key and its URL's credentials).
Secrets = str | Sequence[str] | None
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Codes and reasons that refuse the account, not the request (see the module docstring).
_ACCOUNT_CODES = frozenset(
    {
        "insufficient_quota",
        "billing_hard_limit_reached",
        "billing_not_active",
        "account_deactivated",
        "invalid_api_key",
        "API_KEY_INVALID",
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
    }
)


def parse_duration(text: str | None) -> float | None:
    """Seconds in a duration such as "1s", "6m0s", "20ms", "1h2m3.5s", "1.5s" or "2"; else None."""
    if text is None:
        return None
    s = text.strip().lower()
    if not s:
        return None
    try:
        plain = float(s)
    except ValueError:
        pass
    else:
        return plain if math.isfinite(plain) and plain >= 0 else None
    total, pos = 0.0, 0
    for match in _DURATION_PART.finditer(s):
        if match.start() != pos:
            return None
        total += float(match[1]) * _UNITS[match[2]]
        pos = match.end()
    # Enough digits overflow to inf.
    return total if pos == len(s) and math.isfinite(total) else None


def header_count(text: str | None) -> int | None:
    """A header's non-negative count (a float is floored), or None when it is no count."""
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value >= 0 else None


def rate_info(headers: Mapping[str, str]) -> RateInfo | None:
    """The x-ratelimit-* headers of a response (OpenAI's names), or None if it sent none."""
    said = [headers.get(name) for name in _RATE_HEADERS]
    if said == _NONE_SAID:  # most servers (and every local one) send none: nothing to parse
        return None
    limit_requests, limit_tokens, remaining_requests, remaining_tokens, reset_r, reset_t = said
    info = RateInfo(
        limit_requests=header_count(limit_requests),
        limit_tokens=header_count(limit_tokens),
        remaining_requests=header_count(remaining_requests),
        remaining_tokens=header_count(remaining_tokens),
        reset_requests_s=parse_duration(reset_r),
        reset_tokens_s=parse_duration(reset_t),
    )
    return None if info == RateInfo() else info


_RATE_HEADERS = (
    "x-ratelimit-limit-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
)
_NONE_SAID = [None] * len(_RATE_HEADERS)


def retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, else `Retry-After` (seconds or an HTTP-date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
        except ValueError:
            pass
        else:
            if math.isfinite(value) and value >= 0:
                return value
    text = headers.get("retry-after")
    if text is None:
        return None
    seconds = parse_duration(text)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(text.strip())
        if when.tzinfo is None:  # an HTTP-date is always GMT; a naive one is malformed but clear
            return None
        return max(0.0, when.timestamp() - (time.time() if now is None else now))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _reset_hint(rate: RateInfo | None) -> float | None:
    """When a bucket is empty, the time until it has room again; the longest if both are.

    OpenAI's `x-ratelimit-reset-*` is the time until the limit is fully replenished, but its
    quotas refill continuously: one request has room after 60 / limit-requests seconds, and
    about a thousand tokens after 60 * 1000 / limit-tokens (the limits are per minute). Each
    reset is capped there when the limit is known, never raised above the reset itself.
    """
    if rate is None:
        return None
    waits: list[float] = []
    for remaining, reset, limit, unit in (
        (rate.remaining_requests, rate.reset_requests_s, rate.limit_requests, 1),
        (rate.remaining_tokens, rate.reset_tokens_s, rate.limit_tokens, 1000),
    ):
        if remaining == 0 and reset is not None:
            waits.append(min(reset, 60 * unit / limit) if limit else reset)
    return max(waits) if waits else None


def _walk(value: Any) -> Any:
    """Every dict inside a parsed JSON value, depth first."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _seconds(value: Any) -> float | None:
    """A finite, non-negative number of seconds (a number or a numeric string), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def google_retry_delay(body: Any) -> float | None:
    """The `retryDelay` ("3s", "1.5s") of a google.rpc.RetryInfo detail in an error body.

    None when there is none or it cannot be read; a malformed delay never raises.
    """
    for obj in _walk(body):
        kind = obj.get("@type")
        if isinstance(kind, str) and kind.endswith("google.rpc.RetryInfo"):
            delay = obj.get("retryDelay")
            if isinstance(delay, str):
                return parse_duration(delay)
            if isinstance(delay, dict):  # the proto form {"seconds": 3, "nanos": 500000000}
                seconds = _seconds(delay.get("seconds", 0))
                nanos = _seconds(delay.get("nanos", 0))
                if seconds is None or nanos is None:
                    return None
                total = seconds + nanos / 1e9
                return total if math.isfinite(total) else None
            return None
    return None


def _daily_quotas(body: Any) -> list[str]:
    """The per-day quotas a google.rpc.QuotaFailure detail of an error body says ran out."""
    found: list[str] = []
    for obj in _walk(body):
        kind = obj.get("@type")
        violations = obj.get("violations")
        if not (isinstance(kind, str) and kind.endswith("google.rpc.QuotaFailure")):
            continue
        for violation in violations if isinstance(violations, list) else ():
            if not isinstance(violation, dict):
                continue
            names = [violation.get("quotaId"), violation.get("quotaMetric")]
            if any(isinstance(n, str) and "perday" in n.lower() for n in names):
                found.append(str(violation.get("quotaId") or violation.get("quotaMetric")))
    return found


def _error_object(body: Any) -> dict[str, Any]:
    """The error object of an error body: OpenAI's and Google's `{"error": {...}}`, or the body."""
    if isinstance(body, list) and len(body) == 1:  # Google sometimes wraps it in a list
        body = body[0]
    if isinstance(body, dict):
        inner = body.get("error")
        return inner if isinstance(inner, dict) else body
    return {}


def error_message(body: Any, secret: Secrets = None, limit: int = _MESSAGE_LIMIT) -> str:
    """The server's own words about an error, redacted and truncated to `limit` characters."""
    obj = _error_object(body)
    said: Any = obj.get("message") or obj.get("detail") or obj.get("error")
    if said is None:
        said = body if isinstance(body, str) else ""
    text = said if isinstance(said, str) else orjson.dumps(said).decode()
    text = redact(" ".join(text.split()), secret)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _codes(body: Any) -> set[str]:
    """The machine-readable codes of an error body: code, type, status and every detail reason."""
    obj = _error_object(body)
    codes = {str(obj[k]) for k in ("code", "type", "status") if obj.get(k) is not None}
    codes.update(str(d["reason"]) for d in _walk(obj.get("details")) if d.get("reason"))
    return codes


def status_error(
    status: int,
    headers: Mapping[str, str],
    body: Any,
    *,
    who: str,
    secret: Secrets = None,
) -> ProviderError:
    """The error-tree member for a failed HTTP response (the table in the module docstring)."""
    codes = _codes(body)
    said = error_message(body, secret)
    lowered = said.lower()
    message = f"{who}: HTTP {status}" + (f": {said}" if said else "")
    if status in (401, 403) or codes & _ACCOUNT_CODES:
        return Fatal(message, stops_run=True)
    if status == 429 and ("resource_unavailable" in codes or "resource unavailable" in lowered):
        return Transient(f"{message} (the flex tier's capacity: retried with backoff)")
    if status == 429 or "RESOURCE_EXHAUSTED" in codes:
        daily = _daily_quotas(body)
        if daily:
            quotas = redact(", ".join(sorted(set(daily))), secret)
            return Fatal(f"{message} (daily quota {quotas}: waiting will not help)", stops_run=True)
        rate = rate_info(headers)
        wait = retry_after(headers)
        if wait is None:
            wait = google_retry_delay(body)
        if wait is None:
            wait = _reset_hint(rate)
        return RateLimited(message, retry_after=wait, rate=rate)
    if status in (408, 409) or 500 <= status < 600:
        return Transient(message)
    if 400 <= status < 500:
        return BadRequest(message)
    return Fatal(message)


def loads_or_text(raw: bytes) -> Any:
    """A response body parsed as JSON, or as text if it is not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace")


def api_key_from(api_key: str | None, env_names: Sequence[str]) -> str | None:
    """`api_key` if given, else the first non-empty environment variable of `env_names`."""
    if api_key and api_key.strip():
        return api_key.strip()
    for name in env_names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


class MissingKey(ConfigError):
    """No API key: none was passed and none of the variables `envs` is set (or each is empty).
    The message is the library's; a command line names its own flag from `envs`."""

    def __init__(self, who: str, envs: Sequence[str], where: str = "") -> None:
        self.envs = tuple(envs)
        fix = f"set {' or '.join(self.envs)} or pass api_key" if self.envs else "pass api_key"
        super().__init__(f"{who}: no API key{where}: {fix}")


def require_env_name(value: str | None, label: str) -> None:
    """Refuses an `api_key_env` that is not a variable's name, naming `label` (a flag or a
    constructor argument) but never the value: a value that is not a name may be the key."""
    if value and not is_env_name(value):
        raise ConfigError(f"{label}: {NOT_AN_ENV_NAME}")


def is_env_name(name: str) -> bool:
    """Whether `name` can be an environment variable's name and does not look like a key.

    A Gemini key ("AIza" and 35 letters, digits, - and _) often has no "-", so the name's
    syntax alone lets one through: a long name mixing lower and upper case and digits is refused.
    """
    if not _ENV_NAME.fullmatch(name):
        return False
    keyish = (
        len(name) >= 20
        and any(c.islower() for c in name)
        and any(c.isupper() for c in name)
        and any(c.isdigit() for c in name)
    )
    return not keyish


def is_local_url(url: str) -> bool:
    """Whether `url` points at this machine or a private network (a self-hosted server)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local
