"""OpenAI chat completions, and every OpenAI-compatible server, over our own aiohttp session.

Requests go out on one `aiohttp.ClientSession` with orjson at both ends, not through the SDK
client, which costs 10-20x more CPU per request. The engine owns retries and timeouts: nothing
here retries or sleeps. Failures become the engine's error tree in `_translate` (transport) and
`status_error` (statuses, see `ttc.adapters.providers._http`):

    aiohttp / HTTP                                          ttc
    ─────────────────────────────────────────────────────   ──────────────────────────────────
    401, 403, and any status with code insufficient_quota,
      billing_hard_limit_reached, account_deactivated,
      invalid_api_key (the account is refused)              Fatal(stops_run=True)
    429                                                     RateLimited(retry_after, rate)
    408, 409, 500, 502, 503, 504 and any other 5xx           Transient
    ClientConnectionError (ServerDisconnectedError, ...),
      ClientPayloadError, IncompleteReadError, resets       Transient
    a body over the cap (Connection.max_response_bytes,
      --max-response-bytes; read no further)                ResponseTooLarge (a BadRequest)
    2xx with a truncated or non-JSON body                   Transient("truncated body")
    2xx without choices, or with an `error` object          Transient("empty choices")
      (/embeddings: without data)                           Transient("empty data")
    400, 404, 413, 422 and other 4xx                        BadRequest (server's message)
    InvalidURL                                              Fatal
    a stream (Connection.stream) with no first byte, or     Stalled (a Transient), its text
      silent between chunks (`_sse`)                          so far kept for the journal

A choice whose content is null reads as "" with the server's finish reason (`tool_calls`), or,
when the model refused, as its `refusal` text with the finish reason "refusal". Usage that is no
token count (negative, not an int, null, missing, absurd) is unknown and estimated from the text
(`ttc.adapters.providers._usage`); the response is kept.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from ttc.adapters.providers._capped import read_capped
from ttc.adapters.providers._connection import BaseURL, Connection, check_provider
from ttc.adapters.providers._http import (
    OPENAI_BASE_URL,
    SIM_FINGERPRINT,
    MissingKey,
    api_key_from,
    error_message,
    loads_or_text,
    rate_info,
    redact,
    require_env_name,
    status_error,
)
from ttc.adapters.providers._responses import responses_body, responses_output
from ttc.adapters.providers._sse import post_stream
from ttc.adapters.providers._streams import ChatAssembly, ResponsesAssembly
from ttc.adapters.providers._transport import TransportErrors
from ttc.adapters.providers._usage import (
    MISSING,
    UsageReader,
    answer_tokens,
    cached_input,
    prompt_tokens,
)
from ttc.engine import (
    BadRequest,
    Completion,
    Fatal,
    Provider,
    ProviderError,
    RateInfo,
    Request,
    Transient,
    Usage,
)
from ttc.engine._util import order_secrets, redact_parsed

__all__ = ["OpenAIProvider", "OpenAIResponsesProvider"]

_OPENAI_HOST = "api.openai.com"


@dataclass(frozen=True, slots=True)
class _UsageNames:
    """Where a body's usage keeps its counts: chat completions' names or the Responses API's."""

    prompt: str
    output: str
    output_details: str
    prompt_details: str


_CHAT = _UsageNames(
    "prompt_tokens", "completion_tokens", "completion_tokens_details", "prompt_tokens_details"
)
_RESPONSES = _UsageNames(
    "input_tokens", "output_tokens", "output_tokens_details", "input_tokens_details"
)


class OpenAIProvider(Provider):
    """Chat completions from OpenAI or any OpenAI-compatible server at `base_url`.

    The API key comes from `api_key`, else the environment variable `api_key_env` (a name: a
    value that looks like a key is a ConfigError that does not repeat it); only api.openai.com
    insists on one. Credentials in `base_url` are sent as the server expects (`BaseURL`) and
    never shown: `base_url` and `endpoint` (where requests go, without a trailing slash) hold
    the URL without them, and the key and every URL credential are redacted from what the
    server says (answers, messages, raw bodies), so an echoing server cannot get them written.
    `connection` says whose session carries the requests (see `Connection`; None: our own).
    `send_top_k` None sends top_k everywhere but api.openai.com, which rejects it. `extra_body`
    is merged into every request body last (e.g. vLLM's `chat_template_kwargs`). A
    `connection` with `stream` streams every answer and watches it with its timeouts (`_sse`).
    `api` is the class's: chat completions here, the Responses API in `OpenAIResponsesProvider`.
    """

    api = "chat"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = OPENAI_BASE_URL,
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        name: str = "openai",
        send_top_k: bool | None = None,
        extra_body: Mapping[str, Any] | None = None,
        connection: Connection | None = None,
    ) -> None:
        connection = connection or Connection()
        check_provider(name, model, base_url, connection)
        self.stream = connection.stream
        require_env_name(api_key_env, f"{name}: api_key_env")
        self.model = model
        self.name = name
        # True once a response shows it came from `ttc serve` (the offline simulator).
        self.simulated = False
        self._base = BaseURL.parse(base_url)
        self.base_url = self._base.shown
        # Where requests go, so that caches and resume checks tell a rehearsal from the vendor.
        self.endpoint = self.base_url
        is_openai = urlsplit(base_url).hostname == _OPENAI_HOST
        key = api_key_from(api_key, [api_key_env] if api_key_env else [])
        if key is None and is_openai:
            raise MissingKey(name, [api_key_env] if api_key_env else [], f" for {_OPENAI_HOST}")
        self._key = key
        self._secrets = order_secrets(((key,) if key else ()) + self._base.secrets)
        # Entered around every request (`_translate`): made once, as the usage reader is.
        self._transport = TransportErrors(name, self.base_url, self._secrets)
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._base.authorization is not None:
            self._headers["Authorization"] = self._base.authorization
        elif key is not None:
            self._headers["Authorization"] = f"Bearer {key}"
        self.send_top_k = (not is_openai) if send_top_k is None else send_top_k
        self.extra_body = dict(extra_body or {})
        self._connection = connection
        self._session = connection.session
        self._owns_session = connection.session is None
        self._usage = UsageReader(name, self._secrets)

    def __repr__(self) -> str:
        return (
            f"OpenAIProvider(model={self.model!r}, base_url={self.base_url!r}, name={self.name!r})"
        )

    async def generate(self, request: Request) -> Completion:
        """One chat completion with `request.n` choices; raises from the error tree."""
        if self.stream is not None or self.api != "chat":
            return await self._generate_other(request)
        payload = orjson.dumps(self._body(request))
        start = time.perf_counter()
        with self._translate():
            status, headers, raw = await self._send("/chat/completions", payload)
            if not 200 <= status < 300:
                raise status_error(
                    status, headers, loads_or_text(raw), who=self.name, secret=self._secrets
                )
            data = orjson.loads(raw)
        return self._completion(data, rate_info(headers), time.perf_counter() - start, request)

    async def _generate_other(self, request: Request) -> Completion:
        """A streamed chat completion, or a response of the Responses API (streamed or not)."""
        responses = self.api == "responses"
        body = self.request_body(request)
        start = time.perf_counter()
        url = self.responses_url() if responses else self._base.url("/chat/completions")
        with self._translate():
            if self.stream is None:
                status, headers, raw = await self._post(url, orjson.dumps(body))
                if not 200 <= status < 300:
                    parsed = loads_or_text(raw)
                    raise status_error(status, headers, parsed, who=self.name, secret=self._secrets)
                data = orjson.loads(raw)
            else:
                body["stream"] = True
                if not responses:
                    body["stream_options"] = {"include_usage": True}
                assembly: ChatAssembly | ResponsesAssembly
                assembly = (ResponsesAssembly if responses else ChatAssembly)(
                    self.name, request.messages
                )
                headers = await post_stream(
                    self._client(),
                    url,
                    orjson.dumps(body),
                    self._headers,
                    assembly,
                    self.stream,
                    self._connection.max_response_bytes,
                    self._refused,
                )
                data = assembly.body()
        latency = time.perf_counter() - start
        if responses:
            return self._response_completion(data, rate_info(headers), latency, request)
        return self._completion(data, rate_info(headers), latency, request)

    def request_body(self, request: Request) -> dict[str, Any]:
        """The body of `request` in this provider's API (the batch files' too)."""
        if self.api == "responses":
            return responses_body(self.model, request, self.extra_body)
        return self._body(request)

    def responses_url(self) -> str:
        """Where the Responses API is: /responses under the base URL."""
        return self._base.url("/responses")

    def _refused(self, status: int, headers: Mapping[str, str], raw: bytes) -> ProviderError:
        parsed = loads_or_text(raw)
        return status_error(status, headers, parsed, who=self.name, secret=self._secrets)

    def _response_completion(
        self, data: Any, rate: RateInfo | None, latency: float, request: Request
    ) -> Completion:
        """A Completion from a Responses API response."""
        text, reason, summary = responses_output(data, self.name)
        if data.get("system_fingerprint") == SIM_FINGERPRINT:
            self.simulated = True  # `ttc serve` says so as on its chat completions
        text = redact(text, self._secrets)
        usage = self._read_usage(data.get("usage", MISSING), request, (text,), _RESPONSES, summary)
        return Completion(
            texts=(text,),
            usage=usage,
            finish_reasons=(redact(reason, self._secrets),),
            latency_s=latency,
            model=redact(str(data.get("model") or self.model), self._secrets),
            rate=rate,
        )

    async def post_json(
        self, path: str, body: Mapping[str, Any]
    ) -> tuple[int, Any, RateInfo | None]:
        """POSTs `body` to `base_url + path` as is, for batch tools; what comes back has the
        key and the URL's credentials redacted from its strings.

        Raises RateLimited, Transient and Fatal exactly as `generate` does, including for a 2xx
        that is no answer: a body that is not a JSON object, or one with an `error` object, or,
        for a path ending in /completions, no (or empty) `choices`, or, for /embeddings, no
        (or empty) `data`. Any other status (a 4xx bad request) is returned as (status, parsed
        body or text, rate) to be recorded.
        """
        payload = orjson.dumps(body)
        path = path if path.startswith("/") else "/" + path
        with self._translate():
            status, headers, raw = await self._send(path, payload)
            rate = rate_info(headers)
            if 200 <= status < 300:
                data = orjson.loads(raw)
                self._check_answer(path, data)
                return status, redact_parsed(raw, data, self._secrets), rate
            parsed = loads_or_text(raw)
            error = status_error(status, headers, parsed, who=self.name, secret=self._secrets)
            if isinstance(error, BadRequest):
                return status, redact_parsed(raw, parsed, self._secrets), rate
            raise error

    async def aclose(self) -> None:
        """Closes the session if this provider created it."""
        if self._owns_session and self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _client(self) -> aiohttp.ClientSession:
        """The session, created on first use inside the running loop."""
        session = self._session
        if session is None or (self._owns_session and session.closed):
            session = self._session = self._connection.open(self.name)
        return session

    async def _send(self, path: str, payload: bytes) -> tuple[int, Mapping[str, str], bytes]:
        """One POST; the status, headers and whole body of its response, read no further than
        the connection's cap (ResponseTooLarge past it)."""
        cap = self._connection.max_response_bytes
        async with self._client().post(
            self._base.url(path), data=payload, headers=self._headers
        ) as response:
            raw = await read_capped(response, cap, self.name)
            return response.status, response.headers, raw

    async def _post(self, url: str, payload: bytes) -> tuple[int, Mapping[str, str], bytes]:
        """`_send` to a whole URL (the Responses API's, which Azure keeps elsewhere)."""
        cap = self._connection.max_response_bytes
        async with self._client().post(url, data=payload, headers=self._headers) as response:
            raw = await read_capped(response, cap, self.name)
            return response.status, response.headers, raw

    def _translate(self) -> contextlib.AbstractContextManager[None]:
        """Transport failures and unreadable bodies into the error tree (`TransportErrors`)."""
        return self._transport

    def _body(self, request: Request) -> dict[str, Any]:
        s = request.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "n": request.n,
        }
        for key, value in (
            ("temperature", s.temperature),
            ("top_p", s.top_p),
            ("seed", s.seed),
            ("max_completion_tokens", s.max_output_tokens),
            ("reasoning_effort", s.reasoning_effort),
            ("verbosity", s.verbosity),
        ):
            if value is not None:
                body[key] = value
        if s.top_k is not None and self.send_top_k:
            body["top_k"] = s.top_k
        body.update(self.extra_body)
        return body

    def _check_answer(self, path: str, data: Any) -> None:
        """Transient unless a 2xx body is an answer (see `post_json`)."""
        if not isinstance(data, dict):
            raise Transient(f"{self.name}: truncated body (a JSON {type(data).__name__})")
        field = _ANSWER_FIELD.get(path[path.rfind("/") :])
        items = data.get(field) if field else None
        if field and (not isinstance(items, list) or not items):
            problem = f"empty {field}"
        elif isinstance(data.get("error"), dict):
            problem = "an error in a 2xx body"
        else:
            return
        said = error_message(data, self._secrets) if data.get("error") else ""
        raise Transient(f"{self.name}: {problem}" + (f": {said}" if said else ""))

    def _completion(
        self, data: Any, rate: RateInfo | None, latency: float, request: Request
    ) -> Completion:
        """A Completion from a parsed 200 body; Transient if it has no choices."""
        if isinstance(data, dict) and data.get("system_fingerprint") == SIM_FINGERPRINT:
            # `ttc serve` answers with the offline simulator: reports must say so.
            self.simulated = True
        choices: Any = data.get("choices") if isinstance(data, dict) else None
        if not choices or not isinstance(choices, list) or isinstance(data.get("error"), dict):
            self._check_answer("/chat/completions", data)  # raises, saying what is wrong
        secrets = self._secrets
        # An echoing server must not get the key into the journal: every string it sends that
        # is kept is redacted.
        try:
            if len(choices) == 1:  # one sample per request: nothing to order, no loop
                text, reason = _answer(choices[0])
                texts: tuple[str, ...] = (redact(text, secrets),)
                reasons: tuple[str, ...] = (redact(reason, secrets),)
            else:
                answers = [_answer(c) for _, c in sorted(enumerate(choices), key=_choice_order)]
                texts = tuple([redact(text, secrets) for text, _ in answers])
                reasons = tuple([redact(reason, secrets) for _, reason in answers])
        except (AttributeError, TypeError, ValueError) as exc:
            raise Fatal(f"{self.name}: unreadable completion: {exc}") from exc
        return Completion(
            texts,
            self._read_usage(data.get("usage", MISSING), request, texts),
            reasons,
            latency,
            redact(str(data.get("model") or self.model), secrets),
            rate,
        )

    def _read_usage(
        self,
        raw: Any,
        request: Request,
        texts: tuple[str, ...],
        names: _UsageNames = _CHAT,
        summary: str | None = None,
    ) -> Usage:
        """The usage of a body (chat completions' field names, or the Responses API's), each
        count that is no count estimated (see the docstring); `summary`, a reasoning summary
        whose tokens stand for thinking where the output is not counted."""
        usage = raw if isinstance(raw, dict) else {}
        read = self._usage.count
        prompt = read(names.prompt, usage.get(names.prompt, MISSING))
        completion = read(names.output, usage.get(names.output, MISSING))
        details = usage.get(names.output_details)
        reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
        # Absent or null reasoning tokens are none (models that do not reason send no details).
        thinking = 0 if reasoning is None else read("reasoning_tokens", reasoning) or 0
        if completion is None and reasoning is None and summary is not None:
            thinking = answer_tokens([summary])
        prompt = prompt_tokens(request.messages) if prompt is None else prompt
        cached = usage.get(names.prompt_details)
        cached = cached.get("cached_tokens") if isinstance(cached, dict) else None
        return Usage(
            prompt,
            answer_tokens(texts) if completion is None else max(0, completion - thinking),
            thinking,
            cached_input(self._usage, "cached_tokens", cached, prompt),
        )


class OpenAIResponsesProvider(OpenAIProvider):
    """OpenAI's Responses API (`POST /responses`, see `_responses`) in place of chat
    completions: one answer per request, its reasoning summary read, batch mode's lines too."""

    api = "responses"

    def __repr__(self) -> str:
        return f"OpenAIResponsesProvider(model={self.model!r}, base_url={self.base_url!r})"


# The field a 2xx body must hold, non-empty, to be an answer, by the path's last part.
_ANSWER_FIELD = {"/completions": "choices", "/embeddings": "data"}


def _choice_order(pair: tuple[int, Any]) -> tuple[int, int]:
    """Choices sort by their `index`, or by position where a server leaves it out."""
    position, choice = pair
    index = choice.get("index")
    return (index if isinstance(index, int) else position, position)


def _answer(choice: Mapping[str, Any]) -> tuple[str, str]:
    """A choice's text and finish reason; a refusal in place of content is the text."""
    message = choice.get("message") or {}
    reason = str(choice.get("finish_reason") or "")
    refusal = message.get("refusal")
    if message.get("content") is None and isinstance(refusal, str):
        return refusal, "refusal"
    if not reason and message.get("tool_calls"):
        reason = "tool_calls"
    return _content(message), reason


def _content(message: Mapping[str, Any]) -> str:
    """A message's text: a string, None (""), or a list of text parts joined."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    raise TypeError(f"message content is a {type(content).__name__}")
