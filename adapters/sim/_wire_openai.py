"""`ttc serve`'s OpenAI wire format: chat completions and embeddings, OpenAI's error envelope.

    POST /v1/chat/completions    a chat completion (`n` choices)
    POST /v1/embeddings          embeddings, as floats or base64

Responses carry `system_fingerprint` SIM_FINGERPRINT, so clients can tell they are simulated, and
OpenAI's x-ratelimit-* headers.
"""

from __future__ import annotations

import base64
import time
from typing import Any

import orjson

from ttc.adapters.providers._http import SIM_FINGERPRINT
from ttc.adapters.sim._admission import Refusal
from ttc.adapters.sim._wire import (
    Call,
    EmbedCall,
    Invalid,
    Route,
    Vectors,
    count,
    integer,
    number,
    string,
)
from ttc.engine import Completion, Message, Sampling

__all__ = ["OPENAI", "chat_body"]

_ROUTES = {
    "/v1/chat/completions": Route("POST", "generate", "openai.generate"),
    "/v1/embeddings": Route("POST", "embed", "openai.embed"),
}


class _OpenAI:
    """OpenAI's routes, bodies, error envelope and rate-limit headers."""

    name = "openai"
    rate_headers = True

    def route(self, path: str) -> Route | None:
        return _ROUTES.get(path)

    def claims(self, path: str) -> bool:
        return False  # the server's default envelope is OpenAI's anyway

    def error(self, status: int, message: str, kind: str = "", code: str | None = None) -> bytes:
        if not kind:
            kind = "server_error" if status >= 500 else "invalid_request_error"
        err = {"message": message, "type": kind, "param": None, "code": code}
        return orjson.dumps({"error": err})

    def refusal(self, refusal: Refusal) -> bytes:
        kind = "tokens" if refusal.kind == "tokens" else "requests"
        return self.error(429, refusal.message, kind, "rate_limit_exceeded")

    def parse(self, body: dict[str, Any], route: Route) -> Call:
        return _parse_chat(body)

    def body(self, call: Call, completion: Completion, serial: int) -> dict[str, Any]:
        return chat_body(call, completion, serial)

    def parse_embed(self, body: dict[str, Any], route: Route) -> EmbedCall:
        return _parse_embed(body)

    def embed_body(self, call: EmbedCall, vectors: Vectors, tokens: int) -> dict[str, Any]:
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode()
                if call.base64
                else v,
            }
            for i, v in enumerate(vectors)
        ]
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return {"object": "list", "data": data, "model": call.model, "usage": usage}


OPENAI = _OpenAI()
"""The OpenAI wire format."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    if content is None:
        return ""
    raise Invalid("messages[].content: expected a string or an array of content parts")


def _parse_chat(body: dict[str, Any]) -> Call:
    model = string(body, "model", "")
    if not model:
        raise Invalid("model: required")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise Invalid("messages: expected a non-empty array")
    messages: list[Message] = []
    prompt: str | None = None
    for m in raw:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise Invalid("messages[]: expected objects with a role")
        message = Message(m["role"], _text(m.get("content")))
        messages.append(message)
        if message.role == "user":
            prompt = message.content
    max_tokens = integer(body, "max_completion_tokens", "", 1)
    if max_tokens is None:
        max_tokens = integer(body, "max_tokens", "", 1)
    sampling = Sampling(
        temperature=number(body, "temperature", ""),
        top_p=number(body, "top_p", ""),
        top_k=integer(body, "top_k", ""),
        seed=integer(body, "seed", ""),
        max_output_tokens=max_tokens,
        reasoning_effort=string(body, "reasoning_effort", ""),
        verbosity=string(body, "verbosity", ""),
    )
    n = count(integer(body, "n", ""), "n")
    text = messages[-1].content if prompt is None else prompt
    options = body.get("stream_options")
    usage = isinstance(options, dict) and options.get("include_usage") is True
    return Call(tuple(messages), text, sampling, n, model, body.get("stream") is True, usage)


def chat_body(call: Call, c: Completion, serial: int) -> dict[str, Any]:
    finish = {"length": "length"}
    u = c.usage
    return {
        "id": f"chatcmpl-sim{serial:021d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": call.model,
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": finish.get(reason, "stop"),
            }
            for i, (text, reason) in enumerate(zip(c.texts, c.finish_reasons, strict=True))
        ],
        "usage": {
            "prompt_tokens": u.input_tokens,
            # OpenAI counts reasoning tokens inside completion_tokens.
            "completion_tokens": u.output_tokens + u.thinking_tokens,
            "total_tokens": u.input_tokens + u.output_tokens + u.thinking_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": u.thinking_tokens},
        },
        "system_fingerprint": SIM_FINGERPRINT,
    }


def _parse_embed(body: dict[str, Any]) -> EmbedCall:
    model = string(body, "model", "") or ""
    raw = body.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise Invalid("input: expected a string or a non-empty array of strings")
    fmt = string(body, "encoding_format", "") or "float"
    if fmt not in ("float", "base64"):
        raise Invalid(f"encoding_format: expected 'float' or 'base64', got {fmt!r}")
    return EmbedCall(texts, integer(body, "dimensions", "", 1), model, fmt == "base64")
