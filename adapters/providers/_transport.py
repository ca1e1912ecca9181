"""Transport failures and unreadable bodies into the engine's error tree, for the adapters that
speak HTTP on aiohttp themselves (OpenAI and compatible servers, Azure, Anthropic)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import aiohttp
import orjson

from ttc.engine import Fatal, ProviderError, Transient
from ttc.engine._util import redact

__all__ = ["TransportErrors", "sdk_errors"]


class TransportErrors:
    """Transport failures and unreadable bodies into the error tree, for the aiohttp adapters:
    an invalid URL is Fatal, a connection or read failure and a body that is no JSON (truncated)
    are Transient; the provider's own errors pass as they are.

    A `with` block, and a class rather than a generator: it holds no state of its own, so a
    provider makes one and enters it around every request (a generator's context manager is
    made afresh per use, some 0.8 µs of every request)."""

    __slots__ = ("base_url", "name", "secrets")

    def __init__(self, name: str, base_url: str, secrets: Sequence[str]) -> None:
        self.name, self.base_url, self.secrets = name, base_url, secrets

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None or isinstance(exc, ProviderError):
            return
        if isinstance(exc, aiohttp.InvalidURL):
            # `from None`: aiohttp's message quotes the URL with the credentials of its query.
            raise Fatal(f"{self.name}: invalid URL {self.base_url!r}") from None
        if isinstance(exc, aiohttp.ClientError | asyncio.IncompleteReadError | ConnectionError):
            said = redact(str(exc), self.secrets)
            raise Transient(f"{self.name}: {type(exc).__name__}: {said}") from exc
        if isinstance(exc, orjson.JSONDecodeError):
            raise Transient(f"{self.name}: truncated body (not JSON): {exc}") from exc


StatusError = Callable[..., ProviderError]  # (status, headers, body, who=, secret=) -> error


@contextmanager
def sdk_errors(
    who: str,
    secrets: Sequence[str],
    sdk: Any,
    base: type[Exception],
    to_error: StatusError,
) -> Iterator[None]:
    """A vendor SDK's errors into the error tree, for the batch adapters' control calls: a status
    through the wire's own table (`to_error`), a connection or timeout Transient, anything else
    the SDK raises (`base`, its root error) Fatal. `sdk` is the `openai` or `anthropic` module,
    whose error classes share their names."""
    try:
        yield
    except sdk.APIStatusError as exc:
        headers: Mapping[str, str] = dict(exc.response.headers)
        raise to_error(exc.status_code, headers, exc.body, who=who, secret=secrets) from None
    except (sdk.APIConnectionError, sdk.APITimeoutError) as exc:
        said = redact(str(exc), secrets)
        raise Transient(f"{who} batch: {type(exc).__name__}: {said}") from None
    except base as exc:
        raise Fatal(f"{who} batch: {redact(str(exc), secrets)}") from None
