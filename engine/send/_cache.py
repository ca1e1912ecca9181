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

A corrupt cache (a file that is not SQLite, or a damaged one: SQLITE_NOTADB, SQLITE_CORRUPT),
found at open or by any later query, is moved aside to `<name>.corrupt-<time>` (its WAL files
with it) with a one-line warning, and the run goes on with a fresh one: the cache is an
optimisation, and every response bought is in its run's journal too. A file another process has
already replaced is not moved again; that process's fresh cache is opened instead. A cache that
cannot be opened at all (a directory, no permission) or is of another schema is a ConfigError.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import sqlite3
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from ttc.engine.contract._errors import ConfigError, WriteError
from ttc.engine.contract._types import Completion, Provider, Request, Sampling, Usage

# Bump when the key encoding changes: old entries then simply stop matching.
KEY_VERSION = 1
# Bump when the table changes; a file of another version is refused, not migrated.
SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 5.0
# SQLite's names for a write the disk refused (SQLITE_IOERR_WRITE and the like included).
_WRITE_FAILURES = ("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_READONLY")
# SQLite's names for a file that is not a database, or a damaged one.
_CORRUPTION = ("SQLITE_CORRUPT", "SQLITE_NOTADB")

log = logging.getLogger("ttc")


def _has_simulated(conn: sqlite3.Connection) -> bool:
    return any(row[1] == "simulated" for row in conn.execute("PRAGMA table_info(responses)"))


def _refused_write(exc: sqlite3.Error) -> bool:
    name = exc.sqlite_errorname or ""
    return name.startswith(_WRITE_FAILURES)


class CorruptCache(Exception):
    """The cache file is not a database, or a damaged one."""


def is_corrupt(exc: BaseException) -> bool:
    """Whether a SQLite error says the file is not a database, or a damaged one."""
    name = (exc.sqlite_errorname or "") if isinstance(exc, sqlite3.Error) else ""
    return name.startswith(_CORRUPTION)


def file_id(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`, or None: which file a name holds now."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def move_aside(path: Path, why: str) -> Path:
    """Renames the corrupt cache `path` (and its WAL files) to `<name>.corrupt-<time>`, warns in
    one line; ConfigError if it cannot be renamed."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    try:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{path}{suffix}", f"{target}{suffix}")
    except OSError as exc:
        raise ConfigError(
            f"response cache {path} is corrupt ({why}) and cannot be moved aside "
            f"({exc.strerror or exc}); delete it, or run with --no-cache"
        ) from None
    log.warning(
        "response cache %s is corrupt (%s): moved aside to %s; going on with a fresh cache",
        path,
        why,
        target.name,
    )
    return target


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
    created_at REAL NOT NULL,
    simulated INTEGER NOT NULL DEFAULT 0
)
"""
# Added to schema 1 after its first release: a file without it gains it (older writers, which
# name their columns, leave it 0), so the version stays and no cache is refused for it.
_SIMULATED = "ALTER TABLE responses ADD COLUMN simulated INTEGER NOT NULL DEFAULT 0"
_COLUMNS = (
    "key, texts, finish_reasons, input_tokens, output_tokens, thinking_tokens, latency_s, "
    "model, created_at, simulated"
)
_Row = tuple[str, str, str, int, int, int, float, str, float, int]


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
        self._file: tuple[int, int] | None = None  # (device, inode) of the file opened
        try:
            self._conn = self._open(path)
        except CorruptCache as exc:
            move_aside(path, str(exc))
            self._conn = self._open(path)
        self._closed = False

    def _open(self, path: Path) -> sqlite3.Connection:
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
            elif version == SCHEMA_VERSION and not _has_simulated(conn):
                conn.execute(_SIMULATED)
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            if is_corrupt(exc):
                raise CorruptCache(str(exc)) from None
            raise ConfigError(f"response cache {path} is not usable ({exc}); {hint}") from None
        self._file = file_id(path)
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
            row = self._fetch(f"SELECT {_COLUMNS} FROM responses WHERE key = ?", (key,))
        if row is None:
            return None
        _, texts, reasons, inp, out, think, latency, model, _, simulated = row
        try:
            return Completion(
                texts=tuple(orjson.loads(texts)),
                usage=Usage(inp, out, think),
                finish_reasons=tuple(orjson.loads(reasons)),
                latency_s=latency,
                model=model,
                simulated=bool(simulated),
            )
        except (orjson.JSONDecodeError, TypeError, ValueError) as exc:
            self._recover(f"an entry that cannot be read: {exc}")
            return None

    def _fetch(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        """One row of a query; a corrupt file is moved aside and the query asked of a fresh one."""
        try:
            return self._conn.execute(sql, args).fetchone()
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc):
                raise
            self._recover(str(exc))
            return self._conn.execute(sql, args).fetchone()

    def _recover(self, why: str) -> None:
        """Found corrupt mid-run: moved aside (unless another process did already), reopened."""
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        if self._file is not None and file_id(self.path) == self._file:
            move_aside(self.path, why)
        try:
            self._conn = self._open(self.path)
        except CorruptCache as exc:
            raise ConfigError(f"response cache {self.path} is corrupt ({exc}) again") from None

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
            int(completion.simulated),
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
        try:
            self._commit(rows)
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc):
                raise
            self._recover(str(exc))
            self._commit(rows)
        self._pending.clear()

    def _commit(self, rows: list[_Row]) -> None:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                f"INSERT OR REPLACE INTO responses ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)", rows
            )
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            # A full disk (or a read-only one): the rows stay pending; every response is in its
            # run's journal too, so nothing bought is lost.
            if isinstance(exc, sqlite3.Error) and _refused_write(exc):
                raise WriteError(self.path, str(exc)) from exc
            raise

    def __len__(self) -> int:
        (committed,) = self._fetch("SELECT COUNT(*) FROM responses")
        new = sum(
            1
            for key in self._pending
            if self._fetch("SELECT 1 FROM responses WHERE key = ?", (key,)) is None
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


TRUNCATED = frozenset({"length", "max_tokens", "MAX_TOKENS"})
"""The finish reasons of an answer cut by its output limit: OpenAI's (chat completions, and the
Responses API's as its adapter reads it), Anthropic's and Gemini's."""


def truncated(completion: Completion) -> bool:
    """Whether any answer of `completion` was cut by its output limit."""
    return any(reason in TRUNCATED for reason in completion.finish_reasons)


class ProviderCache:
    """A `ResponseCache` as one provider sees it: keyed by its identity, with hits and misses.

    A truncated answer (`truncated`: finish reason length) is kept apart from finished ones,
    under a key of its own that holds the output limit that cut it, and is served only to a
    request with that very limit: never as a finished answer, nor to a request that asked for
    more tokens (or for the provider's default, which may be more). One cut under the default
    limit (none asked) is not kept: what cut it is not known. A stream cut by a stall never
    reaches the cache: it is an error (`Stalled`), and errors are not cached.

    The `Sender` looks a request up here before it waits for a rate-limit slot, so answers from
    the cache never pay for requests per minute, and stores each completion it buys. `hits`
    counts requests answered from the cache; `misses` counts attempts sent to the provider
    (failed ones too: errors are never cached).
    """

    def __init__(self, cache: ResponseCache, provider: Provider) -> None:
        self.cache = cache
        # A provider at another endpoint (a rehearsal server, a second vLLM host) answers the
        # same model name differently: its endpoint is part of the provider's identity.
        endpoint = provider.endpoint
        self.identity = provider.name if not endpoint else f"{provider.name}@{endpoint}"
        self.model = provider.model
        self.hits = 0
        self.misses = 0

    def key(self, request: Request) -> str:
        """The cache key of `request`: one entry per request, n > 1 samples included."""
        return cache_key(self.identity, self.model, request, sample_index=0)

    def cut_key(self, request: Request) -> str:
        """Where a truncated answer to `request` is kept (see the class docstring)."""
        return cache_key(self.identity + "#cut", self.model, request, sample_index=0)

    def lookup(self, request: Request) -> Completion | None:
        """The cached completion for `request`, if any (counted as a hit)."""
        limited = request.sampling.max_output_tokens is not None
        cached = self.cache.get(self.key(request))
        if cached is not None and not limited and truncated(cached):
            cached = None  # kept with the finished ones before the rule: cut by an unknown limit
        if cached is None and limited:
            cached = self.cache.get(self.cut_key(request))
        if cached is not None:
            self.hits += 1
        return cached

    def count_miss(self) -> None:
        """One attempt goes to the provider."""
        self.misses += 1

    def store(self, request: Request, completion: Completion) -> None:
        """Keeps a completion the provider returned; a truncated one apart, if at all."""
        if not truncated(completion):
            self.cache.put(self.key(request), completion)
        elif request.sampling.max_output_tokens is not None:
            self.cache.put(self.cut_key(request), completion)

    def flush(self) -> None:
        """Commits what is pending."""
        self.cache.flush()


class CachingProvider(Provider):
    """A provider answering from a `ResponseCache` when it can, and filling it when it cannot.

    For callers that take a provider and nothing else. The engine does not need it: it takes the
    cache itself (`EngineOptions(cache=...)`) and hands it to each model's `Sender`, so that
    answers from the cache skip the rate limits; through this wrapper they would not. It
    forwards exactly the inner provider's identity (`name`, `model`, `endpoint`) and its
    `simulated` capability, nothing else. `hits` and `misses` are those of `responses`. The
    caller owns the inner provider and the cache; `aclose` only flushes the cache.
    """

    def __init__(self, provider: Provider, cache: ResponseCache) -> None:
        self.provider = provider
        self.responses = ProviderCache(cache, provider)
        self.name = provider.name
        self.model = provider.model
        self.endpoint = provider.endpoint

    @property
    def cache(self) -> ResponseCache:
        """The shared response cache."""
        return self.responses.cache

    @property
    def simulated(self) -> bool:
        """The inner provider's: a remote one learns it from its first answer."""
        return self.provider.simulated

    @simulated.setter
    def simulated(self, value: bool) -> None:
        self.provider.simulated = value

    @property
    def hits(self) -> int:
        """Requests answered from the cache."""
        return self.responses.hits

    @property
    def misses(self) -> int:
        """Attempts sent to the inner provider."""
        return self.responses.misses

    async def generate(self, request: Request) -> Completion:
        """The cached completion for `request`, or the inner provider's, stored on the way out."""
        cached = self.responses.lookup(request)
        if cached is not None:
            return cached
        self.responses.count_miss()
        completion = await self.provider.generate(request)
        self.responses.store(request, completion)
        return completion

    async def aclose(self) -> None:
        """Flush the cache; the inner provider is closed by whoever opened it."""
        self.responses.flush()
