"""One quota shared by many processes (`--shared-limits redis://HOST:PORT/DB`): the limiter's RPM
schedule, its TPM debits and refunds, and what the provider's headers announced, kept in Redis.

Each process alone paces at the limit and sees the others only as a window that fills faster than
its own requests explain; two of them settle below the limit. Shared, every process takes its
request slots from one schedule in one Redis hash, so N clients together hold the limit as one
does:
- `next`: when the next request may start (seconds, Redis's own clock). A slot is reserved by
  one Lua script, atomically: `max(next, now)`, and `next` moves one interval on. The caller
  then sleeps until its slot (a delay, not a time: the hosts' clocks need not agree).
- `tokens`: the TPM bucket's "empty at" time (the limiter's GCRA): a request's estimated tokens
  are debited when it takes its slot and corrected (either way) once its usage is known.
- `rpm`, `tpm`: the strictest limits the provider's headers announced to any client, and
  `gate`: until when the provider said nothing is left (every client waits it out).
Slots are taken when a request is about to be sent, never for a request that still queues for a
place, so a process that dies holds at most the slots it reserved; the hash expires a period after
its last reservation ends, so nothing of a dead client's outlives it. The key is derived from the
provider, its base URL and the model (hashed; the API key is never part of it) unless
`--quota-name` names it. Redis unreachable is an error (one line at start), never a silent fall
back to local limits: N clients each pacing alone at the limit would overrun it N times.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ttc.engine.contract._errors import ConfigError

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["SharedQuota", "quota_key"]

PREFIX = "ttc:quota:"
CONNECTIONS = 8  # to Redis, per process
LATE_S = 0.1  # how late after its slot a request may still go (at least two intervals)

# KEYS[1]: the quota's hash. ARGV: rpm, tpm (0: none), period (s), headroom, tokens, now is
# Redis's. Returns the delay until the slot (s, as a string: Lua numbers become integers).
_TAKE = """
local key = KEYS[1]
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local period, headroom, tokens = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local h = redis.call('HMGET', key, 'next', 'tokens', 'rpm', 'tpm', 'gate')
local nxt, empty = tonumber(h[1]) or 0, tonumber(h[2]) or 0
local lr, lt, gate = tonumber(h[3]), tonumber(h[4]), tonumber(h[5]) or 0
if lr and (rpm == 0 or lr < rpm) then rpm = lr end
if lt and (tpm == 0 or lt < tpm) then tpm = lt end
local at = math.max(now, gate)
if tpm > 0 and tokens > 0 then
  local rate = tpm * (1 - headroom) / period
  local burst = math.max(1, tpm * headroom)
  at = math.max(at, empty - (burst - math.min(tokens, burst)) / rate)
  empty = math.max(empty, at) + tokens / rate
  redis.call('HSET', key, 'tokens', string.format('%.6f', empty))
end
if rpm > 0 then
  at = math.max(at, nxt)
  nxt = at + period / (rpm * (1 - headroom))
  redis.call('HSET', key, 'next', string.format('%.6f', nxt))
end
local last = math.max(nxt, empty, gate, now)
redis.call('PEXPIRE', key, math.ceil((last - now + period) * 1000))
return string.format('%.6f', at - now)
"""

# A TPM correction: ARGV tokens (negative: a refund), tpm (the caller's), period, headroom. Never
# refunds into the past.
_CHARGE = """
local key = KEYS[1]
local tokens, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local period, headroom = tonumber(ARGV[3]), tonumber(ARGV[4])
local lt = tonumber(redis.call('HGET', key, 'tpm'))
if lt and (tpm == 0 or lt < tpm) then tpm = lt end
if tpm <= 0 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local empty = tonumber(redis.call('HGET', key, 'tokens')) or 0
local rate = tpm * (1 - headroom) / period
empty = math.max(math.max(empty, now) + tokens / rate, now)
redis.call('HSET', key, 'tokens', string.format('%.6f', empty))
redis.call('PEXPIRE', key, math.ceil((empty - now + period) * 1000))
return 1
"""

# What a response announced: ARGV rpm, tpm (0: not announced), gate seconds from now (0: none),
# period. Limits only ever come down; the gate only ever moves later.
_LEARN = """
local key = KEYS[1]
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local wait, period = tonumber(ARGV[3]), tonumber(ARGV[4])
local h = redis.call('HMGET', key, 'rpm', 'tpm', 'gate')
local lr, lt = tonumber(h[1]), tonumber(h[2])
if rpm > 0 and (not lr or rpm < lr) then redis.call('HSET', key, 'rpm', rpm) end
if tpm > 0 and (not lt or tpm < lt) then redis.call('HSET', key, 'tpm', tpm) end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local gate = tonumber(h[3]) or 0
if wait > 0 and now + wait > gate then
  gate = now + wait
  redis.call('HSET', key, 'gate', string.format('%.6f', gate))
end
local ttl = redis.call('PTTL', key)
local want = math.ceil((math.max(gate, now) - now + period) * 1000)
if ttl < want then redis.call('PEXPIRE', key, want) end
return 1
"""


def quota_key(provider: str, base_url: str | None, model: str | None, name: str | None) -> str:
    """The Redis key of a quota: `--quota-name`'s, or a hash of provider, base URL and model
    (never the key: processes on one quota need not share a secret to find it)."""
    if name:
        return f"{PREFIX}name:{name}"
    ident = "\n".join((provider, (base_url or "").rstrip("/"), model or "*"))
    return PREFIX + hashlib.sha256(ident.encode()).hexdigest()[:32]


def shown_url(url: str) -> str:
    """`url` without a password, to print."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class SharedQuota:
    """A quota kept in Redis under `key`: slots taken from its shared schedule, tokens debited
    and refunded, announced limits and waits shared. `connect()` first; `aclose()` at the end."""

    def __init__(self, url: str, key: str, *, timeout_s: float = 5.0) -> None:
        self.url = url
        self.key = key
        self._timeout_s = timeout_s
        self._client: Redis | None = None
        self._scripts: dict[str, Any] = {}
        # Corrections and announcements go out without holding up the response that made them.
        self._pending: set[asyncio.Task[None]] = set()
        self.missed = 0  # slots woken too late to keep, and taken again

    async def connect(self) -> SharedQuota:
        """Connects and checks that Redis answers: a ConfigError in one line if not."""
        try:
            import redis.asyncio as aioredis
        except ImportError as exc:  # the extra is not installed
            raise ConfigError(
                "--shared-limits needs the redis client: pip install 'ttc[shared]'"
            ) from exc
        try:
            # A few connections, waited for: every request waiting for a slot is one script
            # call, and a pool that opens one connection per caller refuses the 101st.
            pool = aioredis.BlockingConnectionPool.from_url(
                self.url,
                max_connections=CONNECTIONS,
                timeout=None,
                socket_connect_timeout=self._timeout_s,
                socket_timeout=self._timeout_s,
            )
            client = aioredis.Redis.from_pool(pool)
        except ValueError as exc:
            raise ConfigError(f"--shared-limits: not a Redis URL: {shown_url(self.url)}") from exc
        self._client = client
        try:
            await client.ping()
        except Exception as exc:
            await self.aclose()
            raise self._unreachable(exc) from exc
        for name, lua in (("take", _TAKE), ("charge", _CHARGE), ("learn", _LEARN)):
            self._scripts[name] = client.register_script(lua)
        return self

    def _unreachable(self, exc: BaseException) -> ConfigError:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return ConfigError(
            f"--shared-limits: Redis at {shown_url(self.url)} is unreachable ({why}); the "
            "limits are not applied locally instead: start Redis or drop --shared-limits"
        )

    async def _call(self, name: str, *args: float) -> Any:
        try:
            return await self._scripts[name](keys=[self.key], args=[_arg(a) for a in args])
        except (KeyError, AttributeError):
            raise ConfigError("--shared-limits: the quota is not connected") from None
        except Exception as exc:
            if isinstance(exc, ConfigError | asyncio.CancelledError):
                raise
            raise self._unreachable(exc) from exc

    async def take(
        self, rpm: float | None, tpm: float | None, tokens: int, period: float, headroom: float
    ) -> None:
        """Reserves the next slot of the shared schedule (and `tokens` of the TPM bucket), paced
        at `(1 - headroom)` of the strictest limits known, and waits for it."""
        loop = asyncio.get_running_loop()
        # A slot is only good when it is kept: a request sent well after its slot (a loaded
        # loop woke it late) lands among the slots after it, and a server's window then holds
        # one more than the schedule put in it. It takes a new slot instead; the one it missed
        # stays empty, which no window minds.
        tolerance = LATE_S if not rpm else max(LATE_S, 2 * period / (rpm * (1 - headroom)))
        while True:
            delay = await self.reserve(rpm, tpm, tokens, period, headroom)
            if delay <= 0:
                return
            due = loop.time() + delay
            await asyncio.sleep(delay)
            if loop.time() - due <= tolerance or not rpm:
                return
            self.missed += 1
            tokens = 0  # its tokens were debited with the missed slot

    async def reserve(
        self, rpm: float | None, tpm: float | None, tokens: int, period: float, headroom: float
    ) -> float:
        """`take` without the wait: the seconds from now until the slot reserved."""
        return float(await self._call("take", rpm or 0, tpm or 0, period, headroom, tokens))

    def charge(self, tokens: int, tpm: float | None, period: float, headroom: float) -> None:
        """Corrects a request's TPM debit by `tokens` (negative: a refund), in the background."""
        self._background(self._call("charge", tokens, tpm or 0, period, headroom))

    def learn(self, rpm: float | None, tpm: float | None, wait_s: float, period: float) -> None:
        """Shares announced limits (they only come down) and a wait (the gate), in the
        background."""
        self._background(self._call("learn", rpm or 0, tpm or 0, wait_s, period))

    def _background(self, call: Any) -> None:
        async def run() -> None:
            # Failed: the next slot taken says Redis is gone, to the request that needs it.
            with contextlib.suppress(ConfigError):
                await call

        task = asyncio.get_running_loop().create_task(run())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def aclose(self) -> None:
        """Waits for the corrections under way, then closes the connection."""
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=self._timeout_s)
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def _arg(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(float(value)) if math.isfinite(value) else "0"
