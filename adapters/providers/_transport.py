"""Transport failures and unreadable bodies into the engine's error tree, for the adapters that
speak HTTP on aiohttp themselves (OpenAI and compatible servers, Azure, Anthropic)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import aiohttp
import orjson

from ttc.engine import Fatal, ProviderError, Transient, redact

__all__ = ["transport_errors"]


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
