"""The engine's error tree. Adapters translate vendor errors into it in one place each.

    TtcError
    ├── ConfigError          a bad setting, named by its flag or key; raised before any request
    ├── DataError            a bad dataset line, named by file, line and field
    ├── VerifierError        the verifier processes could not start: the run stops
    └── ProviderError        one attempt of one request failed
        ├── RateLimited      429 / quota: retry, no sooner than `retry_after`
        ├── Transient        5xx, reset, timeout, truncated body: retry with backoff
        │   └── Stalled      a stream that stopped mid-answer: its partial text kept, not judged
        ├── BadRequest       the request itself is wrong: do not retry this request
        │   └── ResponseTooLarge  its answer is over the response cap: it would be again
        └── Fatal            auth, unknown model, garbage from the provider: do not retry;
                             `stops_run` when the account itself is refused (key, quota)

The engine owns every retry; providers never sleep or loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ttc.engine.contract._types import RateInfo, Usage


class TtcError(Exception):
    """Base of every error ttc raises on purpose."""


class ConfigError(TtcError):
    """A configuration value is wrong; the message names the flag or key."""


class DataError(TtcError):
    """A dataset is malformed; the message names the file, the line and the field."""


class ProviderError(TtcError):
    """One attempt of a request failed."""

    retryable: bool = False
    kind: str = "error"


class RateLimited(ProviderError):
    """The provider refused for rate or quota; `retry_after` (seconds) is a floor, if given."""

    retryable = True
    kind = "rate_limited"

    def __init__(
        self,
        message: str = "rate limited",
        retry_after: float | None = None,
        rate: RateInfo | None = None,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        # The response's rate-limit headers, when it had them (limits, remaining, resets).
        self.rate = rate


class Transient(ProviderError):
    """A failure that another attempt may not meet: 5xx, resets, timeouts, truncated bodies."""

    retryable = True
    kind = "transient"


class Stalled(Transient):
    """A streamed answer that stopped arriving (no first byte, or no chunk for the stall timeout).

    Retried as any Transient; `partial` holds each sample's text received so far and `usage` its
    tokens, estimated (the usage event comes last and never came), for the journal's record: a
    partial answer is never judged nor cached."""

    def __init__(
        self, message: str, partial: tuple[str, ...] = (), usage: Usage | None = None
    ) -> None:
        super().__init__(message)
        self.partial = partial
        self.usage = usage


class BadRequest(ProviderError):
    """The provider rejected this request as malformed; retrying it would fail the same way."""

    kind = "bad_request"


class ResponseTooLarge(BadRequest):
    """The response body is over the cap on what is read (`--max-response-bytes`). The reading
    stopped at the cap, so nothing beyond it was held; asking again would bring as much again."""

    kind = "too_large"


class Fatal(ProviderError):
    """Authentication, a missing model, or an answer the adapter cannot read.

    `stops_run`: the failure is the account's, not the request's (a bad or revoked key, an
    exhausted quota or billing): every further request would fail the same way, so the engine
    stops dispatching and leaves the run resumable instead of spending the test set on refusals.
    """

    kind = "fatal"

    def __init__(self, message: str = "fatal", *, stops_run: bool = False) -> None:
        super().__init__(message)
        self.stops_run = stops_run


class WriteError(TtcError):
    """A file of the run (its directory, the journal, the response cache) could not be written:
    a full disk, a quota, a read-only mount. What was written before stays, and the run resumes
    once the cause is gone."""

    def __init__(self, path: object, error: OSError | str) -> None:
        why = error if isinstance(error, str) else (error.strerror or str(error))
        super().__init__(f"cannot write {path}: {why}")
        self.path = str(path)
        self.errno = None if isinstance(error, str) else error.errno


class VerifierError(TtcError):
    """Responses cannot be judged: the verifier processes could not start (or died while
    starting), or the suite's judge raised (a bug in it). Every response would be scored 0, so
    the run stops instead, resumable, with the likely cause in the message."""


def describe_failure(exc: BaseException) -> str:
    """One line on why a run failed: ttc's own errors say it themselves; anything else is a bug
    in code the run called (a provider, a suite, an embedder), named with its type."""
    if isinstance(exc, TtcError):
        return str(exc)
    return f"{type(exc).__name__}: {exc} (raised by code the run called)"
