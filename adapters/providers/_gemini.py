"""Gemini through google-genai, on an aiohttp session that we own and limit.

google-genai (3.4) sends every async request through a caller's session given as
`HttpOptions(aiohttp_client=...)` and never closes it. Its own retries are off:
`HttpRetryOptions(attempts=1)` stops its tenacity loop and also its hidden reconnect-after-sleep
on aiohttp connection errors, and `automatic_continuation=False` keeps one call one request.
The SDK is imported on first use: it takes a second to import. Failures become the engine's error
tree in `_translate`, with statuses mapped by `ttc.adapters.providers._http.status_error`:

    google.genai / aiohttp                                  ttc
    ─────────────────────────────────────────────────────   ──────────────────────────────────
    APIError 401, 403, or status PERMISSION_DENIED or
      UNAUTHENTICATED, or reason API_KEY_INVALID            Fatal(stops_run=True)
    APIError RESOURCE_EXHAUSTED with a per-day quota
      (QuotaFailure quotaId "...PerDay...")                 Fatal(stops_run=True)
    APIError 429, or status RESOURCE_EXHAUSTED              RateLimited(retry_after=RetryInfo)
    APIError 408, 409, 5xx (ServerError)                    Transient
    APIError 400, 404 and other 4xx (ClientError)           BadRequest (server's message)
    aiohttp.ClientError, IncompleteReadError, resets        Transient
    a body over the cap (Connection.max_response_bytes),
      on a session the provider opened (see `_capped`)      ResponseTooLarge (a BadRequest)
    a truncated or non-JSON body (JSONDecodeError)          Transient
    a response the SDK cannot validate                      Fatal
    no candidates                                           Transient("empty candidates")
    no candidates, prompt blocked                           BadRequest

A response whose `modelVersion` ends in `SIM_MODEL_SUFFIX` came from `ttc serve`'s offline
simulator: the provider then says so in `simulated`, as the OpenAI one does.

Usage: Gemini's JSON leaves out counts that are 0, so a missing count is 0, except the prompt's
(never 0) and the answer's when there is answer text: those are unknown, as is a negative or
absurd count, and are estimated from the text (`ttc.adapters.providers._usage`), the response
kept. A count that is not an integer at all never reaches us: the SDK's pydantic model refuses
the whole response (Fatal, "unreadable response").

With a `Connection.stream` the call is `generate_content_stream` (streamGenerateContent,
`alt=sse`): each chunk awaited under the stream's first-byte and stall timeouts (`_sse`), a
stall a `Stalled` with the text so far, the chunks merged into the response one call returns.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus

import aiohttp

from ttc.adapters.providers._connection import BaseURL, Connection, check_provider
from ttc.adapters.providers._http import (
    SIM_MODEL_SUFFIX,
    MissingKey,
    Secrets,
    api_key_from,
    is_local_url,
    redact,
    require_env_name,
    status_error,
)
from ttc.adapters.providers._sse import Streaming, timed
from ttc.adapters.providers._usage import (
    MISSING,
    UsageReader,
    answer_tokens,
    cached_input,
    prompt_tokens,
)
from ttc.adapters.providers._vendors import GEMINI_BASE_URL
from ttc.engine import (
    BadRequest,
    Completion,
    Fatal,
    Message,
    Provider,
    ProviderError,
    Request,
    Transient,
    Usage,
)
from ttc.engine._util import order_secrets, url_credentials
from ttc.engine.contract import Stalled

if TYPE_CHECKING:
    from google import genai
    from google.genai import types

__all__ = ["GEMINI_BASE_URL", "GEMINI_KEY_ENVS", "GeminiProvider"]

GEMINI_KEY_ENVS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
# google-genai refuses to start without a key; a self-hosted server ignores this one.
_NO_KEY = "no-key"
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length"}


@contextmanager
def gemini_errors(
    who: str, secret: Secrets, transport: tuple[type[BaseException], ...]
) -> Iterator[None]:
    """Turns google-genai's failures into the error tree (the table in the module docstring):
    the one translation of this adapter, for the provider (on aiohttp) and the embedder (on the
    SDK's httpx), which differ only in their `transport` errors."""
    import pydantic
    from google.genai import errors

    try:
        yield
    except ProviderError:
        raise
    except errors.APIError as exc:
        status = 429 if exc.status == "RESOURCE_EXHAUSTED" else int(exc.code or 0)
        headers: Any = getattr(exc.response, "headers", None) or {}
        # `from None`: the SDK's message repeats the server's body, which may quote the key.
        raise status_error(status, headers, exc.details, who=who, secret=secret) from None
    except transport as exc:
        said = redact(str(exc), secret)
        raise Transient(f"{who}: {type(exc).__name__}: {said}") from exc
    except pydantic.ValidationError as exc:
        said = redact(str(exc), secret)
        raise Fatal(f"{who}: unreadable response: {said}") from exc
    except json.JSONDecodeError as exc:
        raise Transient(f"{who}: truncated body (not JSON): {exc}") from exc


class GeminiProvider(Provider):
    """Gemini `generateContent` through google-genai, one request per call.

    The key comes from `api_key`, else `api_key_env`, else GEMINI_API_KEY, else GOOGLE_API_KEY;
    a local `base_url` may go without one (`api_key_env` is a name: a value that looks like a key
    is a ConfigError that does not repeat it); a `key=` in `base_url`'s query (Google's own
    way to pass it) is taken out of the URL and is the key when no other is given, sent as the
    SDK sends keys. `api_version` None is the SDK's default (v1). `endpoint` is where requests
    go: `base_url` or Google's, without a trailing slash. Credentials in `base_url`
    (user:password, sent as a Basic Authorization header; another credential in the query, kept
    on every request) are never shown: `base_url` and `endpoint` hold the URL without them, and
    the key and every URL credential are redacted from what the server says. `connection` says
    whose session carries the requests (see `Connection`; None: our own).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        api_version: str | None = None,
        name: str = "gemini",
        connection: Connection | None = None,
    ) -> None:
        connection = connection or Connection()
        check_provider(name, model, base_url, connection)
        require_env_name(api_key_env, f"{name}: api_key_env")
        envs = (api_key_env,) if api_key_env else GEMINI_KEY_ENVS
        sdk_url, url_key = _split_key(base_url)
        key = api_key_from(api_key, envs) or url_key
        if key is None and not (base_url is not None and is_local_url(base_url)):
            raise MissingKey(name, envs)
        self.model = model
        self.name = name
        # The SDK gets the URL without user information; its user:password go as a header.
        base = BaseURL.parse(sdk_url) if sdk_url is not None else None
        self._sdk_url = base.url() if base is not None else None
        self._sdk_headers = (
            {"Authorization": base.authorization} if base and base.authorization else None
        )
        shown, url_secrets = url_credentials(base_url) if base_url else (None, ())
        self.base_url = shown
        # Where requests go, so that caches and resume checks tell a rehearsal from the vendor.
        self.endpoint = (shown or GEMINI_BASE_URL).rstrip("/")
        self.api_version = api_version
        # True once a response shows it came from `ttc serve` (the offline simulator).
        self.simulated = False
        self._key = key
        self._secrets = order_secrets(((key,) if key else ()) + url_secrets)
        self._connection = connection
        self._session = connection.session
        self._owns_session = connection.session is None
        self._client: genai.Client | None = None
        self._usage = UsageReader(name, self._secrets)

    def __repr__(self) -> str:
        return (
            f"GeminiProvider(model={self.model!r}, base_url={self.base_url!r}, name={self.name!r})"
        )

    async def generate(self, request: Request) -> Completion:
        """One generateContent call with candidate_count = n; raises from the error tree."""
        client = self._genai()
        config = self._config(request)
        contents = _contents(request.messages)
        start = time.perf_counter()
        streaming = self._connection.stream
        with self._translate():
            if streaming is not None:
                stream = client.aio.models.generate_content_stream(
                    model=self.model, contents=contents, config=config
                )
                response = await self._streamed(stream, streaming, request)
            else:
                response = await client.aio.models.generate_content(
                    model=self.model, contents=contents, config=config
                )
        return self._completion(response, time.perf_counter() - start, request)

    async def _streamed(
        self,
        started: Awaitable[AsyncIterator[types.GenerateContentResponse]],
        streaming: Streaming,
        request: Request,
    ) -> types.GenerateContentResponse:
        """streamGenerateContent's chunks, each awaited under the stream's timeouts
        (`_sse.Streaming`), merged into the response a whole call would have returned."""
        from google.genai import types

        texts: dict[int, list[str]] = {}
        last: dict[int, types.Candidate] = {}
        final = types.GenerateContentResponse()

        def stalled() -> Stalled:
            partial = tuple("".join(texts.get(i, ())) for i in range(max(texts, default=-1) + 1))
            usage = Usage(prompt_tokens(request.messages), answer_tokens(partial))
            what = f"stalled: nothing for {streaming.stall_s:g}s" if texts else "no first byte"
            return Stalled(f"{self.name}: stream {what}", partial, usage)

        stream = await timed(streaming.first_byte_s, started, stalled)
        chunks = aiter(stream)
        wait = streaming.first_byte_s
        try:
            while True:
                try:
                    chunk = await timed(wait, anext(chunks), stalled)
                except StopAsyncIteration:
                    break
                wait = streaming.stall_s
                final = chunk
                for position, candidate in enumerate(chunk.candidates or []):
                    index = candidate.index if candidate.index is not None else position
                    parts = candidate.content.parts if candidate.content else None
                    texts.setdefault(index, []).append(_text(parts))
                    last[index] = candidate
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                with suppress(Exception):
                    await close()
        merged = [
            c.model_copy(
                update={
                    "content": types.Content(
                        role="model", parts=[types.Part(text="".join(texts[i]))]
                    ),
                    "index": i,
                }
            )
            for i, c in sorted(last.items())
        ]
        return final.model_copy(update={"candidates": merged})

    async def aclose(self) -> None:
        """Closes the SDK client, and the session if this provider created it."""
        client, self._client = self._client, None
        if client is not None:
            await client.aio.aclose()  # its own (unused) httpx pool; never our session
            client.close()
        if self._owns_session and self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _genai(self) -> genai.Client:
        """The SDK client on our session, built on first use inside the running loop."""
        if self._client is None:
            from google import genai
            from google.genai import types

            if self._session is None or (self._owns_session and self._session.closed):
                self._session = self._connection.open(self.name)
            options = types.HttpOptions(
                base_url=self._sdk_url,
                api_version=self.api_version,
                headers=self._sdk_headers,
                retry_options=types.HttpRetryOptions(attempts=1),
                aiohttp_client=self._session,
            )
            self._client = genai.Client(
                vertexai=False, api_key=self._key or _NO_KEY, http_options=options
            )
        return self._client

    def _config(self, request: Request) -> types.GenerateContentConfig:
        from google.genai import types

        s = request.sampling
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        thinking = None
        if s.thinking_budget is not None:
            thinking = types.ThinkingConfig(thinking_budget=s.thinking_budget)
        return types.GenerateContentConfig(
            system_instruction=system or None,
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            seed=s.seed,
            candidate_count=request.n,
            max_output_tokens=s.max_output_tokens,
            thinking_config=thinking,
            automatic_continuation=False,
        )

    def _translate(self) -> AbstractContextManager[None]:
        transport = (aiohttp.ClientError, asyncio.IncompleteReadError, ConnectionError)
        return gemini_errors(self.name, self._secrets, transport)

    def _completion(
        self, response: types.GenerateContentResponse, latency: float, request: Request
    ) -> Completion:
        if (response.model_version or "").endswith(SIM_MODEL_SUFFIX):
            # `ttc serve` answers with the offline simulator: reports must say so.
            self.simulated = True
        candidates = sorted(
            enumerate(response.candidates or []),
            key=lambda p: (p[1].index if p[1].index is not None else p[0], p[0]),
        )
        if not candidates:
            feedback = response.prompt_feedback
            if feedback is not None and feedback.block_reason is not None:
                reason = getattr(feedback.block_reason, "value", feedback.block_reason)
                raise BadRequest(f"{self.name}: prompt blocked: {reason}")
            raise Transient(f"{self.name}: empty candidates")
        # An echoing server must not get the key into the journal: every string kept is redacted.
        texts = tuple(
            redact(_text(c.content.parts if c.content else None), self._secrets)
            for _, c in candidates
        )
        reasons = tuple(redact(_finish(c.finish_reason), self._secrets) for _, c in candidates)
        return Completion(
            texts=texts,
            usage=self._read_usage(response.usage_metadata, request, texts),
            finish_reasons=reasons,
            latency_s=latency,
            model=redact(response.model_version or self.model, self._secrets),
        )

    def _read_usage(
        self,
        meta: types.GenerateContentResponseUsageMetadata | None,
        request: Request,
        texts: tuple[str, ...],
    ) -> Usage:
        """The usage of a response, each count that is no count estimated (module docstring)."""
        read = self._usage.count
        prompt = read("promptTokenCount", MISSING if meta is None else meta.prompt_token_count)
        output_count = None if meta is None else meta.candidates_token_count
        if output_count is None and meta is not None and not any(texts):
            output_count = 0  # no answer text: the count left out is a 0
        output = read("candidatesTokenCount", MISSING if meta is None else output_count)
        thoughts = None if meta is None else meta.thoughts_token_count
        prompt = prompt_tokens(request.messages) if prompt is None else prompt
        cached = None if meta is None else meta.cached_content_token_count
        return Usage(
            prompt,
            answer_tokens(texts) if output is None else output,
            0 if thoughts is None else read("thoughtsTokenCount", thoughts) or 0,
            cached_input(self._usage, "cachedContentTokenCount", cached, prompt),
        )


def _split_key(url: str | None) -> tuple[str | None, str | None]:
    """`url` without a `key=` query parameter, and that key (None: there is none)."""
    if url is None or "?" not in url:
        return url, None
    head, _, query = url.partition("?")
    query, hash_, fragment = query.partition("#")
    key, kept = None, []
    for pair in query.split("&"):
        name, eq, value = pair.partition("=")
        if eq and unquote_plus(name) == "key" and value:
            key = unquote_plus(value)
        else:
            kept.append(pair)
    rest = "&".join(p for p in kept if p)
    return head + (f"?{rest}" if rest else "") + hash_ + fragment, key


def _text(parts: Sequence[types.Part] | None) -> str:
    """A candidate's answer: its text parts joined, thought summaries left out."""
    return "".join(p.text for p in parts or () if p.text and not p.thought)


def _finish(reason: Any) -> str:
    """A finish reason in the engine's words where they agree ("stop", "length")."""
    if reason is None:
        return ""
    value = str(getattr(reason, "value", reason))
    return _FINISH.get(value, value.lower())


def _contents(messages: Sequence[Message]) -> list[types.ContentDict]:
    """Chat messages as Gemini contents (system messages go to system_instruction)."""
    return [
        {"role": "model" if m.role == "assistant" else "user", "parts": [{"text": m.content}]}
        for m in messages
        if m.role != "system"
    ]
