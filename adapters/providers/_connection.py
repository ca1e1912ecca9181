"""How an HTTP provider connects, and the checks every HTTP provider's constructor makes."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from ttc.adapters.providers._capped import MAX_RESPONSE_BYTES, capped_response, check_cap
from ttc.engine import ConfigError

__all__ = ["Connection", "check_provider"]


@dataclass(frozen=True, slots=True)
class Connection:
    """How a provider reaches its server: a caller's session, or one of its own.

    `session`, if given, is used as is and never closed by the provider. Otherwise the provider
    opens one inside the running loop on first use (`open`), its connector holding at most
    `max_connections` sockets (0: no cap; the engine's limiter bounds concurrency), and closes
    it in `aclose`. There is no total timeout: the engine bounds each attempt itself.
    `max_response_bytes` caps every response body read (default 32 MiB; see `_capped`): a
    larger answer fails its request with ResponseTooLarge, read no further than the cap.
    """

    session: aiohttp.ClientSession | None = None
    max_connections: int = 0
    connect_timeout_s: float = 30.0
    max_response_bytes: int = MAX_RESPONSE_BYTES

    def check(self, who: str) -> None:
        """Refuses settings no session can have, naming the provider."""
        if self.max_connections < 0:
            raise ConfigError(f"{who}: max_connections must be >= 0, got {self.max_connections}")
        check_cap(self.max_response_bytes, who)

    def open(self, who: str) -> aiohttp.ClientSession:
        """A new session with these limits, its bodies capped in the words of provider `who`
        (call inside the running loop)."""
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.max_connections),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout_s),
            response_class=capped_response(self.max_response_bytes, who),
        )


def check_provider(who: str, model: str, base_url: str | None, connection: Connection) -> None:
    """The constructor checks every HTTP provider makes: a model, an http(s) URL, a session."""
    if not model:
        raise ConfigError(f"{who}: model must not be empty")
    if base_url is not None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"{who}: base_url must be an http(s) URL, got {base_url!r}")
    connection.check(who)
