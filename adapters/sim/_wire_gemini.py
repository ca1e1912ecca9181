"""`ttc serve`'s Gemini wire format: generateContent and embeddings, Google's error envelope.

    POST /{v1,v1beta}/models/{model}:generateContent
    POST /{v1,v1beta}/models/{model}:streamGenerateContent   the same as server-sent events
    POST /{v1,v1beta}/models/{model}:batchEmbedContents, :embedContent

Responses carry a `modelVersion` of the requested model plus SIM_MODEL_SUFFIX, so clients can tell
they are simulated; a 429 carries a google.rpc.RetryInfo, as Google's does, and no headers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson

from ttc.adapters.providers._http import SIM_MODEL_SUFFIX
from ttc.adapters.sim._admission import Refusal, proto_duration
from ttc.adapters.sim._wire import (
    Call,
    EmbedCall,
    Invalid,
    Route,
    Vectors,
    count,
    integer,
    number,
)
from ttc.engine import Completion, Message, Sampling, Usage

__all__ = ["GEMINI", "usage_metadata"]

_ACTIONS = {
    "generateContent": ("generate", "gemini.generate"),
    "streamGenerateContent": ("generate", "gemini.generate"),
    "batchEmbedContents": ("embed", "gemini.embed"),
    "embedContent": ("embed", "gemini.embed"),
}
_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    405: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class _Gemini:
    """Google's routes, bodies, error envelope (google.rpc.Status) and RetryInfo."""

    name = "gemini"
    rate_headers = False

    def route(self, path: str) -> Route | None:
        # /{v1,v1beta}/models/{model}:{action}; model names hold dots and dashes.
        version, _, rest = path[1:].partition("/models/")
        model, _, action = rest.rpartition(":")
        known = _ACTIONS.get(action)
        if version not in ("v1", "v1beta") or not model or "/" in model or known is None:
            return None
        return Route("POST", known[0], known[1], model, action)

    def claims(self, path: str) -> bool:
        version, _, rest = path[1:].partition("/models/")
        return version in ("v1", "v1beta") and bool(rest)

    def error(self, status: int, message: str, kind: str = "", code: str | None = None) -> bytes:
        err = {"code": status, "message": message, "status": _GOOGLE_STATUS.get(status, "UNKNOWN")}
        return orjson.dumps({"error": err})

    def refusal(self, refusal: Refusal) -> bytes:
        retry = {
            "@type": "type.googleapis.com/google.rpc.RetryInfo",
            "retryDelay": proto_duration(refusal.retry_s),
        }
        err = {
            "code": 429,
            "message": refusal.message,
            "status": "RESOURCE_EXHAUSTED",
            "details": [retry],
        }
        return orjson.dumps({"error": err})

    def parse(self, body: dict[str, Any], route: Route) -> Call:
        call = _parse_generate(body, route.model)
        return replace(call, stream=True) if route.variant == "streamGenerateContent" else call

    def body(self, call: Call, completion: Completion, serial: int) -> dict[str, Any]:
        return _generate_body(call, completion, serial)

    def parse_embed(self, body: dict[str, Any], route: Route) -> EmbedCall:
        batch = route.variant == "batchEmbedContents"
        texts, dims = _parse_embed(body, batch)
        return EmbedCall(texts, dims, route.model, batch=batch)

    def embed_body(self, call: EmbedCall, vectors: Vectors, tokens: int) -> dict[str, Any]:
        if call.batch:
            return {"embeddings": [{"values": v} for v in vectors]}
        return {"embedding": {"values": vectors[0]}}


GEMINI = _Gemini()
"""The Gemini wire format."""


def _text(content: Any, where: str) -> str:
    if not isinstance(content, dict):
        raise Invalid(f"{where}: expected a Content object")
    parts = content.get("parts", [])
    if not isinstance(parts, list):
        raise Invalid(f"{where}.parts: expected an array")
    return "".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def _parse_generate(body: dict[str, Any], model: str) -> Call:
    contents = body.get("contents")
    if isinstance(contents, dict):
        contents = [contents]
    if not isinstance(contents, list) or not contents:
        raise Invalid("contents: expected a non-empty array")
    messages: list[Message] = []
    system = body.get("systemInstruction")
    if system is not None:
        messages.append(Message("system", _text(system, "systemInstruction")))
    prompt: str | None = None
    for content in contents:
        text = _text(content, "contents[]")
        role = content.get("role") or "user"
        messages.append(Message(str(role), text))
        if role == "user":
            prompt = text
    config = body.get("generationConfig") or {}
    if not isinstance(config, dict):
        raise Invalid("generationConfig: expected an object")
    where = "generationConfig."
    thinking = config.get("thinkingConfig") or {}
    if not isinstance(thinking, dict):
        raise Invalid("generationConfig.thinkingConfig: expected an object")
    budget = integer(thinking, "thinkingBudget", "generationConfig.thinkingConfig.")
    sampling = Sampling(
        temperature=number(config, "temperature", where),
        top_p=number(config, "topP", where),
        top_k=integer(config, "topK", where),
        seed=integer(config, "seed", where),
        max_output_tokens=integer(config, "maxOutputTokens", where, 1),
        thinking_budget=budget if budget is not None and budget >= 0 else None,  # -1: dynamic
    )
    n = count(integer(config, "candidateCount", where), where + "candidateCount")
    text = messages[-1].content if prompt is None else prompt
    return Call(tuple(messages), text, sampling, n, model)


def usage_metadata(u: Usage) -> dict[str, int]:
    """A response's `usageMetadata`, whole or as a stream's last chunk says it."""
    usage = {
        "promptTokenCount": u.input_tokens,
        # Gemini counts thoughts apart from the candidates, and omits a zero count.
        "candidatesTokenCount": u.output_tokens,
        "totalTokenCount": u.input_tokens + u.output_tokens + u.thinking_tokens,
    }
    if u.thinking_tokens:
        usage["thoughtsTokenCount"] = u.thinking_tokens
    return usage


def _generate_body(call: Call, c: Completion, serial: int) -> dict[str, Any]:
    finish = {"length": "MAX_TOKENS"}
    usage = usage_metadata(c.usage)
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": finish.get(reason, "STOP"),
                "index": i,
            }
            for i, (text, reason) in enumerate(zip(c.texts, c.finish_reasons, strict=True))
        ],
        "usageMetadata": usage,
        "modelVersion": call.model + SIM_MODEL_SUFFIX,
        "responseId": f"sim{serial:021d}",
    }


def _parse_embed(body: dict[str, Any], batch: bool) -> tuple[list[str], int | None]:
    requests = body.get("requests") if batch else [body]
    if not isinstance(requests, list) or not requests:
        raise Invalid("requests: expected a non-empty array")
    texts: list[str] = []
    dims: int | None = None
    for r in requests:
        if not isinstance(r, dict):
            raise Invalid("requests[]: expected objects")
        texts.append(_text(r.get("content"), "content"))
        dims = integer(r, "outputDimensionality", "", 1) or dims
    return texts, dims
