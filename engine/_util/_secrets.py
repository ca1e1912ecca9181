"""Credentials are never written or printed: the API key, and any credential inside a URL.

A URL may carry credentials in two places, and both are taken out of everything a run writes
(config.json, the journal, results, summaries, `ttc batch`'s output and journal, run.log) and
prints, while the request itself still carries them:

- the user information (`http://user:password@host/v1`): replaced whole by `REDACTED`;
- a query parameter whose name says it is one (`key`, `api-key`, `api_key`, `apikey`, `token`,
  `access_token`, `sig`, `auth`, `code`, and any name ending in key, token, secret, password,
  passwd or signature; `-` and `_` alike): its value replaced by `REDACTED`.

`URL_REDACTED` is a bare word because brackets in a URL's host part read as an IPv6 address.

Text a server sends back (answers, error messages, whole `ttc batch` bodies) has every secret
replaced by `REDACTED` ("[redacted]"): the key, the URL's password (or its user name when there is
no password: then it is the credential), both as typed and percent-decoded, the HTTP Basic token
they make, and each credential query value. A secret shorter than `MIN_SECRET` characters is not
looked for in free text (it would cut every answer to pieces); it is still taken out of URLs.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import unquote, unquote_plus

__all__ = [
    "MIN_SECRET",
    "REDACTED",
    "URL_REDACTED",
    "OrderedSecrets",
    "basic_token",
    "is_credential_param",
    "order_secrets",
    "redact",
    "redact_argv",
    "redact_json",
    "redact_parsed",
    "redact_url",
    "url_credentials",
    "withheld",
]

REDACTED = "[redacted]"
URL_REDACTED = "REDACTED"
MIN_SECRET = 4

_EXACT = frozenset({"key", "apikey", "api_key", "token", "access_token", "sig", "auth", "code"})
_ENDINGS = ("key", "token", "secret", "password", "passwd", "signature")
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#]*)(.*)\Z", re.DOTALL)

Secrets = str | Iterable[str] | None
"""One secret, several, or none."""


def is_credential_param(name: str) -> bool:
    """Whether a query parameter of this name carries a credential (see the module docstring)."""
    norm = unquote_plus(name).strip().lower().replace("-", "_")
    return norm in _EXACT or norm.endswith(_ENDINGS)


def basic_token(user: str, password: str) -> str:
    """The token HTTP Basic auth sends for user:password (Latin-1, else UTF-8): what a provider
    sends after "Basic ", and what an echoing server shows."""
    raw = f"{user}:{password}"
    try:
        data = raw.encode("latin-1")
    except UnicodeEncodeError:
        data = raw.encode("utf-8")
    return base64.b64encode(data).decode("ascii")


def _userinfo_secrets(userinfo: str) -> list[str]:
    user, has_password, password = userinfo.partition(":")
    if not has_password or not password:
        return [userinfo, unquote(userinfo)]
    return [password, unquote(password), basic_token(unquote(user), unquote(password))]


def _query(query: str, found: list[str]) -> str:
    """`query` with every credential value replaced, those values added to `found`."""
    pairs = []
    for pair in query.split("&"):
        name, eq, value = pair.partition("=")
        if eq and value and is_credential_param(name):
            found.extend((value, unquote_plus(value)))
            value = URL_REDACTED
        pairs.append(f"{name}{eq}{value}")
    return "&".join(pairs)


def url_credentials(url: str) -> tuple[str, tuple[str, ...]]:
    """`url` with its credentials replaced by URL_REDACTED, and the secrets they were (as typed,
    decoded, and as a Basic token). A string that is not a URL is returned as is, with none."""
    shown, found = _credentials(url)
    return shown, tuple(dict.fromkeys(s for s in found if s and s != URL_REDACTED))


def withheld(url: str) -> bool:
    """Whether `url` is one shown without its credentials (they were redacted when stored)."""
    return URL_REDACTED in _credentials(url)[1]


def _credentials(url: str) -> tuple[str, list[str]]:
    match = _URL.match(url)
    if match is None:
        return url, []
    scheme, netloc, rest = match.groups()
    found: list[str] = []
    userinfo, at, host = netloc.rpartition("@")
    if at:
        found.extend(_userinfo_secrets(userinfo))
        netloc = f"{URL_REDACTED}@{host}"
    path, question, tail = rest.partition("?")
    if question:
        query, hash_, fragment = tail.partition("#")
        rest = f"{path}?{_query(query, found)}{hash_}{fragment}"
    return f"{scheme}{netloc}{rest}", found


def redact_url(url: str) -> str:
    """`url` with its credentials replaced by URL_REDACTED."""
    return url_credentials(url)[0]


class OrderedSecrets(tuple[str, ...]):
    """Secrets already as redaction takes them (`order_secrets`): used as they are. Also holds
    what `redact_parsed` asks of them for every response: their UTF-8 bytes, and whether JSON
    can spell each only as itself or with \\u escapes (`_plain`)."""

    encoded: tuple[bytes, ...]
    plain: bool

    def __new__(cls, secrets: Iterable[str] = ()) -> OrderedSecrets:
        self = super().__new__(cls, secrets)
        # As a key from the environment that is no UTF-8 would appear in a body's bytes.
        self.encoded = tuple(s.encode("utf-8", "surrogateescape") for s in self)
        self.plain = all(_plain(s) for s in self)
        return self


def order_secrets(secrets: Secrets) -> OrderedSecrets:
    """`secrets` put in redaction's order once, for a holder that redacts every response (a
    provider): each `redact` then skips the sort. Kept by the holder, never in a shared cache."""
    if isinstance(secrets, OrderedSecrets):
        return secrets
    items = [secrets] if isinstance(secrets, str) else list(secrets or ())
    # Longest first, so that a secret holding another is replaced whole.
    return OrderedSecrets(sorted({s for s in items if len(s) >= MIN_SECRET}, key=len, reverse=True))


def redact(text: str, secrets: Secrets) -> str:
    """`text` with every occurrence of each secret replaced by REDACTED."""
    for secret in order_secrets(secrets):
        text = text.replace(secret, REDACTED)
    return text


def redact_json(value: Any, secrets: Secrets) -> Any:
    """A copy of a parsed JSON value with every secret redacted from its strings (keys
    included). Iterative: a body nested a thousand deep is no RecursionError."""
    found = order_secrets(secrets)
    if not found:
        return value
    root = _shell(value, found)
    if not isinstance(value, dict | list):
        return root
    stack = [(value, root)]
    while stack:
        source, copy = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            child = _shell(item, found)
            if isinstance(copy, dict):
                copy[redact(str(key), found)] = child
            else:
                copy.append(child)
            if isinstance(item, dict | list):
                stack.append((item, child))
    return root


def redact_parsed(raw: bytes, value: Any, secrets: Secrets) -> Any:
    """`redact_json(value, secrets)` for a value parsed from the JSON bytes `raw`, without the
    walk when `raw` cannot hold a secret: none is in its bytes, and no escape could spell one
    (no \\u escape, and no secret holds a character that has an escape of its own, a quote,
    a slash, a backslash or a control character). Every response body passes here, and walking
    each one cost `ttc batch` a tenth of its CPU."""
    found = order_secrets(secrets)
    if not found:
        return value
    if not found.plain or b"\\u" in raw:
        return redact_json(value, found)
    for secret in found.encoded:
        if secret in raw:
            return redact_json(value, found)
    return value


def _plain(secret: str) -> bool:
    """Whether JSON can spell `secret` only as itself or with \\u escapes."""
    return not any(c in '"\\/' or c < " " for c in secret)


def _shell(value: Any, secrets: Sequence[str]) -> Any:
    """An empty container of `value`'s kind, or `value` itself redacted."""
    if isinstance(value, dict):
        return {}
    if isinstance(value, list):
        return []
    return redact(value, secrets) if isinstance(value, str) else value


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with the credentials of every URL in it (`URL` or `--flag=URL`) redacted."""
    out = []
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if eq and flag.startswith("--"):
            out.append(f"{flag}={redact_url(value)}")
        else:
            out.append(redact_url(arg))
    return out
