"""The response cache: completed responses on disk, shared by every run that asks the same thing.

A response is keyed by what determines it: provider, model, the full prompt, every sampling
parameter, `n` and the sample index (`cache_key`). The engine folds a sample's (round, k) into
its seed, so a re-run of the same method, or another method sharing the same warm-up, finds its
responses here and buys nothing. What a prompt was *built from* (`item_id`, `demos`) is not
part of the key: the prompt text itself is.

The store is one SQLite file in WAL mode, so several processes can read and write it at once
(a writer waits up to `BUSY_TIMEOUT_S` for another's lock). Writes are batched in memory and
committed every `flush_every` puts, when the oldest pending write is `flush_after_s` old, or on
`flush()` / `close()`, so thousands of puts a second do not each pay a commit and an fsync, and
the write lock is held only for the few milliseconds a batch takes. A crash loses at most the
uncommitted batch; the run's own journal still holds those responses, so a resume never buys
them again.

Lookups run on the event loop's thread: a single-row read by primary key takes microseconds,
far less than handing it to a thread would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import sqlite3
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from ttc.engine._errors import ConfigError
from ttc.engine._types import Completion, Provider, Request, Sampling, Usage

# Bump when the key encoding changes: old entries then simply stop matching.
KEY_VERSION = 1
# Bump when the table changes; a file of another version is refused, not migrated.
SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 5.0

_SAMPLING_FIELDS = tuple(f.name for f in dataclasses.fields(Sampling))
# `temperature=1` from a config file must key like `temperature=1.0`.
_FLOAT_FIELDS = frozenset(f.name for f in dataclasses.fields(Sampling) if "float" in str(f.type))

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    texts TEXT NOT NULL,
    finish_reasons TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    thinking_tokens INTEGER NOT NULL,
    latency_s REAL NOT NULL,
    model TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""
_COLUMNS = (
    "key, texts, finish_reasons, input_tokens, output_tokens, thinking_tokens, latency_s, "
    "model, created_at"
)
_Row = tuple[str, str, str, int, int, int, float, str, float]


def cache_key(provider: str, model: str, request: Request, sample_index: int) -> str:
    """The sha256 hex naming one response: provider, model, prompt, sampling, n, sample index."""
    sampling: dict[str, Any] = {}
    for name in _SAMPLING_FIELDS:
        value = getattr(request.sampling, name)
        # None means "the provider's default", the same as a field that did not exist yet, so
        # leaving it out keeps old keys valid when Sampling grows a new optional field.
        if value is not None:
            sampling[name] = float(value) if name in _FLOAT_FIELDS else value
    payload = {
        "v": KEY_VERSION,
        "provider": provider,
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "sampling": sampling,
        "n": request.n,
        "sample_index": sample_index,
    }
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


class ResponseCache:
    """An on-disk map from `cache_key` to `Completion`, safe for several processes at once."""

    def __init__(self, path: Path, *, flush_every: int = 256, flush_after_s: float = 5.0) -> None:
        self.path = path
        self.flush_every = flush_every
        self.flush_after_s = flush_after_s
        # Written but not yet committed; lookups see them too.
        self._pending: dict[str, _Row] = {}
        self._pending_since = 0.0
        self._conn = self._open(path)
        self._closed = False

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        hint = "delete it, point the cache elsewhere, or run with --no-cache"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"response cache {path}: cannot create its folder ({exc})") from exc
        conn: sqlite3.Connection | None = None
        try:
            # Autocommit mode: this class opens and commits its own transactions.
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("BEGIN IMMEDIATE")
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version == 0:
                conn.execute(_SCHEMA)
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            raise ConfigError(f"response cache {path} is not usable ({exc}); {hint}") from exc
        if version not in (0, SCHEMA_VERSION):
            conn.close()
            raise ConfigError(
                f"response cache {path} has schema version {version}, this ttc writes "
                f"{SCHEMA_VERSION}; {hint}"
            )
        return conn

    def get(self, key: str) -> Completion | None:
        """The stored completion for `key`, exactly as it was put, or None."""
        row = self._pending.get(key)
        if row is None:
            row = self._conn.execute(
                f"SELECT {_COLUMNS} FROM responses WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        _, texts, reasons, inp, out, think, latency, model, _ = row
        return Completion(
            texts=tuple(orjson.loads(texts)),
            usage=Usage(inp, out, think),
            finish_reasons=tuple(orjson.loads(reasons)),
            latency_s=latency,
            model=model,
        )

    def put(self, key: str, completion: Completion) -> None:
        """Store `completion` under `key` (replacing any entry); committed with its batch."""
        if not self._pending:
            self._pending_since = time.monotonic()
        usage = completion.usage
        self._pending[key] = (
            key,
            orjson.dumps(list(completion.texts)).decode(),
            orjson.dumps(list(completion.finish_reasons)).decode(),
            usage.input_tokens,
            usage.output_tokens,
            usage.thinking_tokens,
            completion.latency_s,
            completion.model,
            time.time(),
        )
        due = time.monotonic() - self._pending_since >= self.flush_after_s
        if len(self._pending) >= self.flush_every or due:
            # If another process held the lock past the busy timeout, the batch stays pending and
            # goes with the next one: a put never fails a response that was paid for.
            with contextlib.suppress(sqlite3.OperationalError):
                self.flush()

    def flush(self) -> None:
        """Commit every pending put in one transaction."""
        if not self._pending:
            return
        rows = list(self._pending.values())
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                f"INSERT OR REPLACE INTO responses ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)", rows
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._pending.clear()

    def __len__(self) -> int:
        (committed,) = self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()
        new = sum(
            1
            for key in self._pending
            if self._conn.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone()
            is None
        )
        return int(committed) + new

    def close(self) -> None:
        """Flush and close the file; closing twice is harmless."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._conn.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class CachingProvider:
    """A provider that answers from a `ResponseCache` when it can, and fills it when it cannot.

    `hits` counts requests answered from the cache; `misses` counts requests sent to the inner
    provider (including ones that then failed: errors are never cached). Any other attribute
    (e.g. `simulated`) is read from the inner provider. The caller owns the inner provider and
    the cache; `aclose` only flushes the cache.
    """

    def __init__(self, provider: Provider, cache: ResponseCache) -> None:
        self.provider = provider
        self.cache = cache
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self.provider.name

    @property
    def model(self) -> str:
        return self.provider.model

    def _key(self, request: Request) -> str:
        # One entry per request: the engine sends n=1; for n>1 the whole completion is one entry.
        # A provider at another endpoint (a rehearsal server, a second vLLM host) answers the
        # same model name differently: its endpoint is part of the provider's identity.
        endpoint = getattr(self.provider, "endpoint", None)
        name = self.provider.name if not endpoint else f"{self.provider.name}@{endpoint}"
        return cache_key(name, self.provider.model, request, sample_index=0)

    def lookup(self, request: Request) -> Completion | None:
        """The cached completion for `request`, if any; the engine asks before it waits for a
        rate-limit slot, so answers from the cache never pay for requests per minute."""
        cached = self.cache.get(self._key(request))
        if cached is not None:
            self.hits += 1
        return cached

    async def generate(self, request: Request) -> Completion:
        """The cached completion for `request`, or the inner provider's, stored on the way out."""
        key = self._key(request)
        cached = self.cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        completion = await self.provider.generate(request)
        self.cache.put(key, completion)
        return completion

    async def aclose(self) -> None:
        """Flush the cache; the inner provider is closed by whoever opened it."""
        self.cache.flush()

    def __getattr__(self, name: str) -> Any:
        # Only reached for names this class lacks. Read `provider` through __dict__ so a
        # half-built instance (copy, unpickle) raises AttributeError instead of recursing.
        inner = self.__dict__.get("provider")
        if inner is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(inner, name)
