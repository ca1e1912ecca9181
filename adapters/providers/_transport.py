"""Transport failures and unreadable bodies into the engine's error tree, for the adapters that
speak HTTP on aiohttp themselves (OpenAI and compatible servers, Azure, Anthropic)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import aiohttp
import orjson

from ttc.engine import Fatal, ProviderError, Transient
from ttc.engine._util import redact

__all__ = ["sdk_errors", "transport_errors"]


@contextmanager
def transport_errors(name: str, base_url: str, secrets: Sequence[str]) -> Iterator[None]:
    """Transport failures and unreadable bodies into the error tree, for the aiohttp adapters:
    an invalid URL is Fatal, a connection or read failure and a body that is no JSON (truncated)
    are Transient; the provider's own errors pass as they are."""
    try:
        yield
    except ProviderError:
        raise
    except aiohttp.InvalidURL:
        # `from None`: aiohttp's message quotes the URL with the credentials of its query.
        raise Fatal(f"{name}: invalid URL {base_url!r}") from None
    except (aiohttp.ClientError, asyncio.IncompleteReadError, ConnectionError) as exc:
        said = redact(str(exc), secrets)
        raise Transient(f"{name}: {type(exc).__name__}: {said}") from exc
    except orjson.JSONDecodeError as exc:
        raise Transient(f"{name}: truncated body (not JSON): {exc}") from exc


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
