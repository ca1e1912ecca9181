"""How an HTTP provider connects, and the checks every HTTP provider's constructor makes.

A base URL may carry credentials (`http://user:password@host/v1`, `...?key=...`): `BaseURL`
sends them as a server expects (user:password as an HTTP Basic Authorization header, which then
takes the place of a bearer key, as in httpx and the official OpenAI client; a query kept on
every request URL) and shows the URL without them (`ttc.engine.redact_url`) wherever it is
written or printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp

from ttc.adapters.providers._capped import MAX_RESPONSE_BYTES, capped_response, check_cap
from ttc.adapters.providers._sse import Streaming
from ttc.engine import ConfigError
from ttc.engine._util import basic_token, redact_url, url_credentials

__all__ = ["BaseURL", "Connection", "check_provider"]


@dataclass(frozen=True, slots=True)
class Connection:
    """How a provider reaches its server: a caller's session, or one of its own.

    `session`, if given, is used as is and never closed by the provider. Otherwise the provider
    opens one inside the running loop on first use (`open`), its connector holding at most
    `max_connections` sockets (0: no cap; the engine's limiter bounds concurrency), and closes
    it in `aclose`. There is no total timeout: the engine bounds each attempt itself.
    `max_response_bytes` caps every response body read (default 32 MiB; see `_capped`): a
    larger answer fails its request with ResponseTooLarge, read no further than the cap.
    `stream`, if given, has answers streamed where the provider can and watched with its
    first-byte and stall timeouts (`_sse`); None: each answer is read whole.
    """

    session: aiohttp.ClientSession | None = None
    max_connections: int = 0
    connect_timeout_s: float = 30.0
    max_response_bytes: int = MAX_RESPONSE_BYTES
    stream: Streaming | None = None

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
    """The constructor checks every HTTP provider makes: a model, an http(s) URL, a session.
    A bad URL is quoted without its credentials."""
    if not model:
        raise ConfigError(f"{who}: model must not be empty")
    if base_url is not None:
        try:
            parts = urlsplit(base_url)
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:  # e.g. an unclosed [ in the host
            ok = False
        if not ok:
            shown = redact_url(base_url)
            raise ConfigError(f"{who}: base_url must be an http(s) URL, got {shown!r}")
    connection.check(who)


@dataclass(frozen=True, slots=True)
class BaseURL:
    """A checked base URL, split for sending and for showing (see the module docstring).

    `shown` is the URL without its credentials or a trailing slash; `url(path)` is where a
    request to `path` goes (no user information: `authorization` is the Basic Authorization
    header its user:password make), and `secrets` what must be redacted from everything a
    server says.
    """

    shown: str
    root: str
    query: str
    authorization: str | None
    secrets: tuple[str, ...]

    @classmethod
    def parse(cls, url: str) -> BaseURL:
        """Splits `url` (an http(s) URL `check_provider` has accepted)."""
        _, secrets = url_credentials(url)
        parts = urlsplit(url)
        userinfo, at, netloc = parts.netloc.rpartition("@")
        authorization = None
        if at:
            user, _, password = userinfo.partition(":")
            authorization = "Basic " + basic_token(unquote(user), unquote(password))
        root = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        query = f"?{parts.query}" if parts.query else ""
        return cls(redact_url(url.rstrip("/")), root, query, authorization, secrets)

    def url(self, path: str = "") -> str:
        """The URL of `path` (which starts with /) under this base, its query kept."""
        return f"{self.root}{path}{self.query}"
