"""Anthropic's Messages API (Claude) over our own aiohttp session, not the `anthropic` client.

Requests go out on one `aiohttp.ClientSession` with orjson at both ends, as the OpenAI adapter's
do: the official client costs several times the CPU per request (`benchmarks/anthropic_cpu.py`).
Nothing here retries or sleeps. Failures become the engine's error tree in `_translate`
(transport: as the OpenAI adapter's) and `anthropic_error` (statuses and Anthropic's error
types: the table is in `ttc.adapters.providers._anthropic_errors`); a 2xx with no content is
Transient("empty content"), one that is not JSON Transient("truncated body").

Sent: `model`, `max_tokens` (required by the API: `--max-tokens`, else DEFAULT_MAX_TOKENS plus
the thinking budget), `messages` (system messages as the top-level `system`), `temperature`,
`top_p`, `top_k`, and `thinking: {"type": "enabled", "budget_tokens": B}` for a thinking budget
B > 0. With thinking on, the API takes no temperature but 1, no top_k, and a top_p only in
[0.95, 1]: those are left out (the run's log says so once). The API has no `n` nor `seed`: a
request asks for one response (n > 1 is a BadRequest).

Usage: input = `input_tokens` + `cache_creation_input_tokens` + `cache_read_input_tokens` (all
the prompt's tokens), of which the cache reads are `cached_tokens` (priced at the cached rate;
cache writes, billed at 1.25 times the input price, are priced as input); thinking =
`output_tokens_details.thinking_tokens`, else the thinking blocks' text / 4 (Anthropic bills
thinking as output and counts it in `output_tokens`); output = `output_tokens` - thinking. A
count that is no count is estimated (`_usage`). A model name ending in SIM_MODEL_SUFFIX is `ttc
serve`'s simulator: `simulated` then says so.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from ttc.adapters.providers._anthropic_errors import anthropic_error, anthropic_rate_info
from ttc.adapters.providers._capped import read_capped
from ttc.adapters.providers._connection import BaseURL, Connection, check_provider
from ttc.adapters.providers._http import (
    SIM_MODEL_SUFFIX,
    MissingKey,
    api_key_from,
    loads_or_text,
    redact,
    require_env_name,
)
from ttc.adapters.providers._sse import Streaming, post_stream
from ttc.adapters.providers._streams import AnthropicAssembly
from ttc.adapters.providers._transport import TransportErrors
from ttc.adapters.providers._usage import MISSING, UsageReader, answer_tokens, prompt_tokens
from ttc.adapters.providers._vendors import ANTHROPIC_BASE_URL
from ttc.engine import (
    BadRequest,
    Completion,
    Provider,
    ProviderError,
    RateInfo,
    Request,
    Sampling,
    Transient,
    Usage,
)
from ttc.engine._util import order_secrets
from ttc.engine.send import text_tokens

__all__ = ["ANTHROPIC_BASE_URL", "ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "AnthropicProvider"]

ANTHROPIC_VERSION = "2023-06-01"
"""The `anthropic-version` header: the Messages API's one stable version."""
DEFAULT_MAX_TOKENS = 8192
"""Output tokens per request when none is given: within every current Claude model's maximum."""
_HOST = "api.anthropic.com"
log = logging.getLogger("ttc")


class AnthropicProvider(Provider):
    """Claude through the Messages API at `base_url` (Anthropic's, or `ttc serve`'s).

    The key comes from `api_key`, else the variable `api_key_env` (a name), and is sent as
    `x-api-key`; only api.anthropic.com insists on one. `base_url` is the API's root, as the
    official client takes it (a trailing /v1 is accepted too); its credentials are sent and
    redacted as the OpenAI adapter's are. `connection`: whose session carries the requests.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = ANTHROPIC_BASE_URL,
        api_key: str | None = None,
        api_key_env: str | None = "ANTHROPIC_API_KEY",
        name: str = "anthropic",
        connection: Connection | None = None,
    ) -> None:
        connection = connection or Connection()
        check_provider(name, model, base_url, connection)
        require_env_name(api_key_env, f"{name}: api_key_env")
        self.model = model
        self.name = name
        self.simulated = False
        self._base = BaseURL.parse(base_url)
        self.base_url = self.endpoint = self._base.shown
        self._path = "/messages" if self._base.root.endswith("/v1") else "/v1/messages"
        key = api_key_from(api_key, [api_key_env] if api_key_env else [])
        if key is None and urlsplit(base_url).hostname == _HOST:
            raise MissingKey(name, [api_key_env] if api_key_env else [], f" for {_HOST}")
        self._secrets = order_secrets(((key,) if key else ()) + self._base.secrets)
        # Entered around every request (`_translate`): made once, as the usage reader is.
        self._transport = TransportErrors(name, self.base_url, self._secrets)
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if key is not None:
            self._headers["x-api-key"] = key
        if self._base.authorization is not None:
            self._headers["Authorization"] = self._base.authorization
        self._connection = connection
        self._session = connection.session
        self._owns_session = connection.session is None
        self._usage = UsageReader(name, self._secrets)
        self._dropped_said = False

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r}, base_url={self.base_url!r})"

    async def generate(self, request: Request) -> Completion:
        """One message; raises from the error tree."""
        if request.n != 1:
            raise BadRequest(f"{self.name}: the Messages API answers one response per request")
        if self._connection.stream is not None:
            return await self._streamed(request, self._connection.stream)
        payload = orjson.dumps(self.body(request))
        start = time.perf_counter()
        with self._translate():
            status, headers, raw = await self._send(payload)
            if not 200 <= status < 300:
                parsed = loads_or_text(raw)
                raise anthropic_error(status, headers, parsed, who=self.name, secret=self._secrets)
            data = orjson.loads(raw)
        rate = anthropic_rate_info(headers)
        return self._completion(data, request, time.perf_counter() - start, rate)

    async def _streamed(self, request: Request, streaming: Streaming) -> Completion:
        """One message streamed (`_streams.AnthropicAssembly`), read as a whole one is."""
        body = {**self.body(request), "stream": True}
        assembly = AnthropicAssembly(self.name, request.messages)
        start = time.perf_counter()
        with self._translate():
            headers = await post_stream(
                self._client(),
                self._base.url(self._path),
                orjson.dumps(body),
                self._headers,
                assembly,
                streaming,
                self._connection.max_response_bytes,
                self._refused,
            )
        rate = anthropic_rate_info(headers)
        return self._completion(assembly.body(), request, time.perf_counter() - start, rate)

    def _refused(self, status: int, headers: Mapping[str, str], raw: bytes) -> ProviderError:
        parsed = loads_or_text(raw)
        return anthropic_error(status, headers, parsed, who=self.name, secret=self._secrets)

    async def aclose(self) -> None:
        """Closes the session if this provider created it."""
        if self._owns_session and self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def body(self, request: Request) -> dict[str, Any]:
        """The Messages request body of `request` (see the module docstring)."""
        s = request.sampling
        system = [m.content for m in request.messages if m.role == "system"]
        turns = [m for m in request.messages if m.role != "system"]
        thinking = s.thinking_budget if s.thinking_budget else None
        max_tokens = s.max_output_tokens or DEFAULT_MAX_TOKENS + (thinking or 0)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": [{"role": m.role, "content": m.content} for m in turns],
        }
        if system:
            body["system"] = "\n\n".join(system)
        for key, value in self._sampling(s, thinking is not None):
            body[key] = value
        if thinking is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": thinking}
        return body

    def _sampling(self, s: Sampling, thinking: bool) -> Iterator[tuple[str, object]]:
        """The sampling fields to send; with thinking on, those the API refuses are left out."""
        fields = (("temperature", s.temperature), ("top_p", s.top_p), ("top_k", s.top_k))
        dropped: list[str] = []
        for key, value in fields:
            if value is None:
                continue
            refused = key == "top_k" or (key == "temperature" and value != 1)
            if thinking and (refused or (key == "top_p" and not 0.95 <= float(value) <= 1)):
                dropped.append(f"{key}={value}")
                continue
            yield key, value
        if dropped and not self._dropped_said:
            self._dropped_said = True
            log.warning(
                "%s: extended thinking takes no %s; not sent (said once per run)",
                self.name,
                ", ".join(dropped),
            )

    def _client(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or (self._owns_session and session.closed):
            session = self._session = self._connection.open(self.name)
        return session

    async def _send(self, payload: bytes) -> tuple[int, Mapping[str, str], bytes]:
        cap = self._connection.max_response_bytes
        url = self._base.url(self._path)
        async with self._client().post(url, data=payload, headers=self._headers) as response:
            raw = await read_capped(response, cap, self.name)
            return response.status, response.headers, raw

    def _translate(self) -> contextlib.AbstractContextManager[None]:
        """Transport failures and unreadable bodies into the error tree (`TransportErrors`)."""
        return self._transport

    def _completion(
        self, data: Any, request: Request, latency: float, rate: RateInfo | None
    ) -> Completion:
        if not isinstance(data, dict):
            raise Transient(f"{self.name}: truncated body (a JSON {type(data).__name__})")
        model = data.get("model")
        if isinstance(model, str) and model.endswith(SIM_MODEL_SUFFIX):
            self.simulated = True  # `ttc serve`'s simulator: reports must say so
        blocks = data.get("content")
        if not isinstance(blocks, list) or not blocks:
            raise Transient(f"{self.name}: empty content")
        text = "".join(_texts(blocks, "text", "text"))
        thought = "".join(_texts(blocks, "thinking", "thinking"))
        text = redact(text, self._secrets)
        reason = redact(str(data.get("stop_reason") or ""), self._secrets)
        return Completion(
            texts=(text,),
            usage=self._read_usage(data.get("usage", MISSING), request, text, thought),
            finish_reasons=(reason,),
            latency_s=latency,
            model=redact(str(model or self.model), self._secrets),
            rate=rate,
        )

    def _read_usage(self, raw: Any, request: Request, text: str, thought: str) -> Usage:
        """Input with the cache's reads and writes; output split into thinking and the rest."""
        usage = raw if isinstance(raw, dict) else {}
        read = self._usage.count
        fresh = read("input_tokens", usage.get("input_tokens", MISSING))
        cache = {"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        for field in cache:
            value = usage.get(field)
            cache[field] = 0 if value is None else read(field, value) or 0  # null, absent: none
        output = read("output_tokens", usage.get("output_tokens", MISSING))
        details = usage.get("output_tokens_details")
        said = details.get("thinking_tokens") if isinstance(details, dict) else None
        thinking = read("thinking_tokens", said) if said is not None else None
        if thinking is None:
            thinking = text_tokens(len(thought)) if thought else 0
        if output is None:
            output = answer_tokens((text,)) + thinking
        return Usage(
            (prompt_tokens(request.messages) if fresh is None else fresh) + sum(cache.values()),
            max(0, output - thinking),
            min(thinking, output),
            cached_tokens=cache["cache_read_input_tokens"],
        )


def _texts(blocks: list[Any], kind: str, field: str) -> Iterator[str]:
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == kind:
            value = block.get(field)
            if isinstance(value, str):
                yield value
