"""`ttc serve`'s Anthropic wire format: the Messages API, Anthropic's error envelope and headers.

    POST /v1/messages    a message (one response per request: the API has no `n`)

Requests are checked as the API checks them (400 `invalid_request_error`): `model`, `max_tokens`
and a non-empty `messages` are required; `temperature` is in [0, 1]; extended thinking
(`thinking: {"type": "enabled", "budget_tokens": B}`) needs 1024 <= B < max_tokens and takes
no `temperature` but 1 and no `top_k`. `stream: true` is answered as Anthropic's events
(`_sse_events`). The API takes no seed, so
each request is a fresh draw of the simulator, numbered by the wire (as sampling at a temperature
above 0 is).

Responses are `{"type": "message", "content": [...], "stop_reason", "usage"}`: a `thinking`
block when the simulator thought (only when the request enables thinking, as Claude does), then
one `text` block; `stop_reason` `end_turn` or
`max_tokens`; `usage.output_tokens` counts the thinking too (as Anthropic bills it), split out
in `usage.output_tokens_details.thinking_tokens`; the cache counts are 0. The `model` is the
requested one plus SIM_MODEL_SUFFIX, so clients can tell the answers are simulated.

Errors are `{"type": "error", "error": {"type", "message"}, "request_id"}`, by status:
400 invalid_request_error, 401 authentication_error, 403 permission_error, 404
not_found_error, 413 request_too_large, 429 rate_limit_error, 500 api_error, 529
overloaded_error (the server's `--fault-503`, as Anthropic says it is overloaded).

Every response carries Anthropic's rate-limit headers (`anthropic_headers`):
`anthropic-ratelimit-requests-{limit,remaining,reset}` and the same for `tokens`,
`input-tokens` and `output-tokens`, limits and remainders per minute, resets as RFC 3339 times
(when the window is back to its full allowance); a 429 adds `retry-after` in whole seconds (when
there is room again). The server keeps one token window (`--tpm`, input + output + thinking), so
the three token families announce that one window: either kind may use what is left.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from ttc.adapters.providers._http import SIM_MODEL_SUFFIX
from ttc.adapters.sim._admission import Admission, Limit, Refusal
from ttc.adapters.sim._wire import (
    Call,
    EmbedCall,
    Invalid,
    Route,
    Vectors,
    integer,
    number,
    string,
)
from ttc.engine import Completion, Message, Sampling

__all__ = ["ANTHROPIC", "ERROR_TYPES", "OVERLOADED", "anthropic_headers", "message_body"]

_ROUTES = {"/v1/messages": Route("POST", "generate", "anthropic.generate")}
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""Anthropic's error type of each status."""
OVERLOADED = 529
"""The status Anthropic answers when it is overloaded (the server's 503 fault on this wire)."""
_THINKING_MIN = 1024
_PREFIX = "anthropic-ratelimit-"


class _Anthropic:
    """Anthropic's routes, bodies and error envelope (its headers: `anthropic_headers`)."""

    name = "anthropic"
    # Not OpenAI's x-ratelimit-* headers: the server asks `anthropic_headers` for this wire's.
    rate_headers = False

    def __init__(self) -> None:
        self._draws = itertools.count(1)
        self._ids = itertools.count(1)

    def route(self, path: str) -> Route | None:
        return _ROUTES.get(path)

    def claims(self, path: str) -> bool:
        return path.startswith("/v1/messages")

    def error(self, status: int, message: str, kind: str = "", code: str | None = None) -> bytes:
        err = {"type": kind or ERROR_TYPES.get(status, "api_error"), "message": message}
        request_id = f"req_sim{next(self._ids):021d}"
        return orjson.dumps({"type": "error", "error": err, "request_id": request_id})

    def refusal(self, refusal: Refusal) -> bytes:
        return self.error(429, refusal.message, "rate_limit_error")

    def parse(self, body: dict[str, Any], route: Route) -> Call:
        call = _parse_messages(body)
        # No seed in this API: every request is its own draw (see the module docstring).
        if call.sampling.seed is None:
            sampling = replace(call.sampling, seed=next(self._draws))
            call = replace(call, sampling=sampling)
        return call

    def body(self, call: Call, completion: Completion, serial: int) -> dict[str, Any]:
        return message_body(call, completion, serial)

    def parse_embed(self, body: dict[str, Any], route: Route) -> EmbedCall:
        raise Invalid("the Anthropic API has no embeddings")

    def embed_body(self, call: EmbedCall, vectors: Vectors, tokens: int) -> dict[str, Any]:
        raise Invalid("the Anthropic API has no embeddings")


ANTHROPIC = _Anthropic()
"""The Anthropic Messages wire format."""


def _text(content: Any, where: str) -> str:
    """A message's text: a string, or the text of its text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    raise Invalid(f"{where}: expected a string or an array of content blocks")


def _messages(body: dict[str, Any]) -> tuple[list[Message], str | None]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise Invalid("messages: expected a non-empty array")
    messages: list[Message] = []
    system = body.get("system")
    if system is not None:
        messages.append(Message("system", _text(system, "system")))
    prompt: str | None = None
    for i, m in enumerate(raw):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("user", "assistant"):
            raise Invalid(f"messages.{i}.role: expected 'user' or 'assistant'")
        message = Message(role, _text(m.get("content"), f"messages.{i}.content"))
        messages.append(message)
        if role == "user":
            prompt = message.content
    return messages, prompt


def _thinking(body: dict[str, Any], max_tokens: int) -> int:
    """The thinking budget of an enabled `thinking`, checked as the API checks it; 0 when it is
    not enabled (Claude thinks only when asked to)."""
    thinking = body.get("thinking")
    if thinking is None:
        return 0
    if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "disabled"):
        raise Invalid("thinking: expected {'type': 'enabled', 'budget_tokens': N} or disabled")
    if thinking["type"] == "disabled":
        return 0
    budget = integer(thinking, "budget_tokens", "thinking.")
    if budget is None or budget < _THINKING_MIN:
        raise Invalid(f"thinking.budget_tokens: must be >= {_THINKING_MIN}, got {budget}")
    if budget >= max_tokens:
        raise Invalid(
            f"max_tokens must be greater than thinking.budget_tokens ({max_tokens} <= {budget})"
        )
    temperature = number(body, "temperature", "")
    if temperature is not None and temperature != 1:
        raise Invalid("temperature may only be set to 1 when thinking is enabled")
    if body.get("top_k") is not None:
        raise Invalid("top_k is not supported when thinking is enabled")
    return budget


def _parse_messages(body: dict[str, Any]) -> Call:
    model = string(body, "model", "")
    if not model:
        raise Invalid("model: Field required")
    max_tokens = integer(body, "max_tokens", "", 1)
    if max_tokens is None:
        raise Invalid("max_tokens: Field required")
    messages, prompt = _messages(body)
    temperature = number(body, "temperature", "")
    if temperature is not None and not 0 <= temperature <= 1:
        raise Invalid(f"temperature: must be in [0, 1], got {temperature:g}")
    sampling = Sampling(
        temperature=temperature,
        top_p=number(body, "top_p", ""),
        top_k=integer(body, "top_k", "", 1),
        max_output_tokens=max_tokens,
        thinking_budget=_thinking(body, max_tokens),
    )
    text = messages[-1].content if prompt is None else prompt
    return Call(tuple(messages), text, sampling, 1, model, stream=body.get("stream") is True)


def message_body(call: Call, c: Completion, serial: int) -> dict[str, Any]:
    u = c.usage
    content: list[dict[str, Any]] = []
    if u.thinking_tokens and c.texts:
        thought = f"(simulated thinking: {u.thinking_tokens} tokens)"
        content.append({"type": "thinking", "thinking": thought, "signature": "ttc-sim"})
    content.extend({"type": "text", "text": t} for t in c.texts[:1])
    reason = c.finish_reasons[0] if c.finish_reasons else "stop"
    usage: dict[str, Any] = {
        "input_tokens": u.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        # Anthropic bills thinking as output: output_tokens holds both.
        "output_tokens": u.output_tokens + u.thinking_tokens,
        "service_tier": "standard",
    }
    if u.thinking_tokens:
        usage["output_tokens_details"] = {"thinking_tokens": u.thinking_tokens}
    return {
        "id": f"msg_sim{serial:021d}",
        "type": "message",
        "role": "assistant",
        "model": call.model + SIM_MODEL_SUFFIX,
        "content": content,
        "stop_reason": "max_tokens" if reason == "length" else "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


def _rfc3339(seconds_from_now: float) -> str:
    when = datetime.now(UTC) + timedelta(seconds=seconds_from_now)
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")


def _family(
    headers: dict[str, str], name: str, window: Limit, limit: int, now: float, scale: float
) -> None:
    left = window.left(now)
    headers[f"{_PREFIX}{name}-limit"] = str(limit)
    headers[f"{_PREFIX}{name}-remaining"] = str(math.floor(left * scale))
    headers[f"{_PREFIX}{name}-reset"] = _rfc3339(window.reset(now))


def anthropic_headers(gate: Admission, refusal: Refusal | None = None) -> dict[str, str]:
    """Anthropic's rate-limit headers of a response (a 429's with `retry-after`)."""
    headers: dict[str, str] = {}
    options = gate.options
    now = asyncio.get_running_loop().time()  # the clock the server's gate runs on
    scale = 60 / options.window  # per minute, as Anthropic announces them, whatever the window
    if gate.rpm is not None and options.rpm is not None:
        _family(headers, "requests", gate.rpm, options.rpm, now, scale)
    if gate.tpm is not None and options.tpm is not None:
        for name in ("tokens", "input-tokens", "output-tokens"):
            _family(headers, name, gate.tpm, options.tpm, now, scale)
    if refusal is not None:
        headers["retry-after"] = str(max(1, math.ceil(refusal.retry_s)))
    return headers
