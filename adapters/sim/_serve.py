"""`ttc serve`: a local OpenAI- and Gemini-compatible API server answered by the offline `sim`.

Routes (aiohttp on 127.0.0.1, orjson bodies, no access log):

    POST /v1/chat/completions                          OpenAI chat completion
    POST /v1/embeddings                                OpenAI embeddings (float or base64)
    POST /{v1,v1beta}/models/{model}:generateContent   Gemini generateContent
    POST /{v1,v1beta}/models/{model}:batchEmbedContents, :embedContent   Gemini embeddings
    GET  /stats, POST /stats/reset                     counters (module `_Stats`)

A prompt rendered by the served suite is decoded (`PromptMap`) into its item and demos and
answered by `SimProvider`, so the suite's verifier judges the answers as it judges the
simulator's; any other prompt gets generic prose ending in a `\\boxed{}` answer, deterministic in
the prompt and seed. Embeddings are `LexicalEmbedder` vectors (256 dims).

A request on a model route goes: parse (400) → concurrency, RPM, TPM over a sliding window of
`--window` seconds (429) → a fault drawn from a seeded RNG → lognormal latency → answer.
`--rpm` and `--tpm` are per minute, as vendors state them; a window of W seconds admits W/60 of
them, so tests and benchmarks can shrink the minute. A request's tokens (input + output +
thinking) enter the TPM window when its response is sent; requests enter the RPM window when
admitted. Faults touch generation routes only.

Two waits are announced, as OpenAI means them:

    x-ratelimit-reset-requests, -tokens    the time until the window is back to its full
      (every OpenAI response)                allowance: its newest entry leaves
    Retry-After, retry-after-ms (a 429),   the time until the window has room again: its oldest
      Google RetryInfo, "try again in"       entries leave until it holds less than the limit
                                             (for requests, the oldest one)

Answers say they are simulated: OpenAI bodies carry `system_fingerprint` SIM_FINGERPRINT and
Gemini bodies a `modelVersion` of the requested model plus SIM_MODEL_SUFFIX.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import inspect
import math
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import orjson
from aiohttp import web

from ttc.adapters.providers._http import SIM_FINGERPRINT, SIM_MODEL_SUFFIX
from ttc.adapters.sim._promptmap import PromptMap
from ttc.adapters.sim._prose import prose, stable_hash
from ttc.adapters.sim._sim import SimConfig, SimProvider
from ttc.engine import (
    Completion,
    ConfigError,
    Item,
    LexicalEmbedder,
    Message,
    Request,
    Sampling,
    Suite,
    Usage,
)

__all__ = [
    "FAULTS",
    "ServeOptions",
    "SimServer",
    "add_serve_arguments",
    "options_from_args",
    "running_server",
    "serve_forever",
]

FAULTS: tuple[str, ...] = ("500", "503", "reset", "truncated", "hang", "empty")
"""The injectable faults, as named by their `--fault-*` flags and in `/stats`."""

HOST = "127.0.0.1"
_MAX_N = 128


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """The server's settings; each field is the flag `--field-name` (see `add_serve_arguments`)."""

    port: int = 8000
    rpm: int | None = None
    tpm: int | None = None
    max_concurrency: int | None = None
    window: float = 60.0
    latency: float = 0.0
    latency_sigma: float = 0.8
    fault_500: float = 0.0
    fault_503: float = 0.0
    fault_reset: float = 0.0
    fault_truncated: float = 0.0
    fault_hang: float = 0.0
    fault_empty: float = 0.0
    hang_s: float = 3600.0
    seed: int = 0
    sim_ability: float = 0.0
    sim_thinking: float = 0.0

    def __post_init__(self) -> None:
        def flag(name: str) -> str:
            return "--" + name.replace("_", "-")

        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("port", "seed", "rpm", "tpm", "max_concurrency"):
                ok = value is None and f.name not in ("port", "seed")
                if not ok and (not isinstance(value, int) or isinstance(value, bool)):
                    raise ConfigError(f"{flag(f.name)}: must be an integer, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{flag(f.name)}: must be a number, got {value!r}")
            elif not math.isfinite(value):
                raise ConfigError(f"{flag(f.name)}: must be finite, got {value!r}")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port: must be in [0, 65535] (0: any free port), got {self.port}")
        for name in ("rpm", "tpm", "max_concurrency", "window", "hang_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{flag(name)}: must be > 0, got {value}")
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and _per_window(value, self.window) < 1:
                raise ConfigError(
                    f"{flag(name)}: {value} per minute is less than one per --window of "
                    f"{self.window:g} s"
                )
        for name in ("latency", "latency_sigma", "sim_thinking"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{flag(name)}: must be >= 0, got {getattr(self, name)}")
        for kind in FAULTS:
            p = self.fault(kind)
            if not 0 <= p <= 1:
                raise ConfigError(f"--fault-{kind}: must be a probability in [0, 1], got {p}")
        total = sum(self.fault(kind) for kind in FAULTS)
        if total > 1 + 1e-9:
            raise ConfigError(f"--fault-*: the fault probabilities sum to {total:g}; must be <= 1")

    def fault(self, kind: str) -> float:
        """The probability of fault `kind` (one of FAULTS)."""
        value: float = getattr(self, "fault_" + kind)
        return value


_HELP = {
    "port": "port on 127.0.0.1 (0: pick a free one)",
    "rpm": "requests per minute, enforced over each --window (default: unlimited)",
    "tpm": "tokens per minute: requests are admitted while the window holds fewer",
    "max_concurrency": "requests in flight (default: unlimited)",
    "window": "the sliding rate-limit window in seconds; it admits window/60 of --rpm and --tpm",
    "latency": "median latency in seconds (lognormal; 0: answer at once)",
    "latency_sigma": "log-scale sigma of the latency (a heavier tail when larger)",
    "fault_500": "probability of a 500 error",
    "fault_503": "probability of a 503 error",
    "fault_reset": "probability of closing the connection mid-body",
    "fault_truncated": "probability of a 200 with truncated JSON",
    "fault_hang": "probability of never answering (until the client leaves or --hang-s)",
    "fault_empty": "probability of a 200 with no choices / candidates",
    "hang_s": "how long a hanging request waits before the connection is dropped",
    "seed": "seed of the simulator, the faults and the latencies",
    "sim_ability": "the simulator's ability (logit offset; higher solves more)",
    "sim_thinking": "thinking tokens reported per output token",
}


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the server's flags: --port, --rpm, --tpm, --max-concurrency, --window, --latency,
    --latency-sigma, --fault-{500,503,reset,truncated,hang,empty}, --hang-s, --seed,
    --sim-ability, --sim-thinking. Values are checked by `ServeOptions` (ConfigError naming the
    flag); the suite flags (--suite, --data, --limit...) are the caller's."""
    group = parser.add_argument_group("server")
    defaults = ServeOptions()
    for f in fields(ServeOptions):
        default = getattr(defaults, f.name)
        kind: type = int if f.name in ("port", "seed", "rpm", "tpm", "max_concurrency") else float
        shown = "unlimited" if default is None else f"{default:g}"
        group.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            type=kind,
            default=default,
            help=f"{_HELP[f.name]} (default: {shown})",
        )


def options_from_args(args: argparse.Namespace) -> ServeOptions:
    """The `ServeOptions` of parsed arguments (ConfigError naming the flag of a bad value)."""
    return ServeOptions(**{f.name: getattr(args, f.name) for f in fields(ServeOptions)})


# Rate limits


class _Window:
    """A sliding window of (time, amount) entries and their running total; O(1) amortised."""

    __slots__ = ("amounts", "limit", "span", "times", "total")

    def __init__(self, limit: int, span: float) -> None:
        self.limit = limit
        self.span = span
        self.times: deque[float] = deque()
        self.amounts: deque[int] = deque()
        self.total = 0

    def prune(self, now: float) -> None:
        horizon = now - self.span
        times, amounts = self.times, self.amounts
        while times and times[0] <= horizon:
            times.popleft()
            self.total -= amounts.popleft()

    def add(self, now: float, amount: int) -> None:
        if amount > 0:
            self.times.append(now)
            self.amounts.append(amount)
            self.total += amount

    def full(self, now: float) -> float:
        """Seconds until the window is back to its full allowance: the newest entry leaves."""
        return max(0.0, self.times[-1] + self.span - now) if self.times else 0.0

    def room(self, now: float) -> float:
        """Seconds until the window admits again: the oldest entries leave until its total is
        below the limit (for requests, one unit each, until the oldest entry leaves)."""
        excess = self.total - self.limit
        if excess < 0:
            return 0.0
        for time_, amount in zip(self.times, self.amounts, strict=True):
            excess -= amount
            if excess < 0:
                return max(0.0, time_ + self.span - now)
        return 0.0


def _per_window(per_minute: int, window: float) -> int:
    """What a window of `window` seconds admits of a per-minute limit."""
    return math.floor(per_minute * window / 60 + 1e-9)


def _go_duration(seconds: float) -> str:
    """OpenAI's duration format: "120ms", "1s", "17.28s", "6m0s", "1h2m3s"."""
    ms = math.ceil(seconds * 1000)
    if ms < 1000:
        return f"{ms}ms"
    h, m, s, frac = ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60, ms % 1000
    sec = f"{s}.{frac:03d}".rstrip("0") if frac else str(s)
    if h:
        return f"{h}h{m}m{sec}s"
    return f"{m}m{sec}s" if m else f"{sec}s"


def _proto_duration(seconds: float) -> str:
    """A protobuf Duration in JSON: "3s", "0.120s"."""
    ms = math.ceil(seconds * 1000)
    return f"{ms // 1000}.{ms % 1000:03d}s" if ms % 1000 else f"{ms // 1000}s"


@dataclass(frozen=True, slots=True)
class _Refusal:
    kind: str  # "requests", "tokens" or "concurrency"
    retry_s: float  # until there is room again (Retry-After), not until the window is full
    message: str


# Stats


class _Stats:
    """The counters of `/stats`; `in_flight` is live, the rest restart at `/stats/reset`."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.reset()

    def reset(self) -> None:
        self.started = time.time()
        self.requests = 0
        self.by_status: dict[int, int] = {}
        self.by_fault = dict.fromkeys(FAULTS, 0)
        self.by_route: dict[str, int] = {}
        self.prompts = {"warmup": 0, "adaptive": 0, "unknown": 0}
        self.ok = 0
        self.tokens = [0, 0, 0]
        self.faulty_tokens = [0, 0, 0]
        self.embedding_tokens = 0
        self.rate_limited = {"requests": 0, "tokens": 0, "concurrency": 0}
        self.max_in_flight = self.in_flight

    def status(self, code: int) -> None:
        self.by_status[code] = self.by_status.get(code, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        def usage(t: list[int]) -> dict[str, int]:
            return {"input": t[0], "output": t[1], "thinking": t[2]}

        return {
            "requests": self.requests,
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "by_fault": dict(self.by_fault),
            "by_route": dict(self.by_route),
            "prompts": dict(self.prompts),
            "ok": self.ok,
            "tokens": usage(self.tokens),
            "faulty_tokens": usage(self.faulty_tokens),
            "embedding_tokens": self.embedding_tokens,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "rate_limited": sum(self.rate_limited.values()),
            "rate_limited_by": dict(self.rate_limited),
            "since_s": round(time.time() - self.started, 3),
        }


# Wire formats


class _Invalid(Exception):
    """A request the API would reject with 400."""


def _number(d: dict[str, Any], key: str, where: str) -> float | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _Invalid(f"{where}{key}: expected a number, got {v!r}")
    return float(v)


def _integer(d: dict[str, Any], key: str, where: str, low: int | None = None) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Invalid(f"{where}{key}: expected an integer, got {v!r}")
    if low is not None and v < low:
        raise _Invalid(f"{where}{key}: must be >= {low}, got {v}")
    return v


def _string(d: dict[str, Any], key: str, where: str) -> str | None:
    v = d.get(key)
    if v is not None and not isinstance(v, str):
        raise _Invalid(f"{where}{key}: expected a string, got {v!r}")
    return v


def _count(n: int | None, where: str) -> int:
    if n is None:
        return 1
    if not 1 <= n <= _MAX_N:
        raise _Invalid(f"{where}: must be in [1, {_MAX_N}], got {n}")
    return n


@dataclass(frozen=True, slots=True)
class _Call:
    """A parsed generation request: what the simulator needs, and the prompt to decode."""

    messages: tuple[Message, ...]
    prompt: str
    sampling: Sampling
    n: int
    model: str


def _openai_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    if content is None:
        return ""
    raise _Invalid("messages[].content: expected a string or an array of content parts")


def _parse_openai_chat(body: dict[str, Any], path_model: str = "") -> _Call:
    model = _string(body, "model", "")
    if not model:
        raise _Invalid("model: required")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise _Invalid("messages: expected a non-empty array")
    messages: list[Message] = []
    prompt: str | None = None
    for m in raw:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _Invalid("messages[]: expected objects with a role")
        message = Message(m["role"], _openai_text(m.get("content")))
        messages.append(message)
        if message.role == "user":
            prompt = message.content
    max_tokens = _integer(body, "max_completion_tokens", "", 1)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", "", 1)
    sampling = Sampling(
        temperature=_number(body, "temperature", ""),
        top_p=_number(body, "top_p", ""),
        top_k=_integer(body, "top_k", ""),
        seed=_integer(body, "seed", ""),
        max_output_tokens=max_tokens,
        reasoning_effort=_string(body, "reasoning_effort", ""),
        verbosity=_string(body, "verbosity", ""),
    )
    n = _count(_integer(body, "n", ""), "n")
    text = messages[-1].content if prompt is None else prompt
    return _Call(tuple(messages), text, sampling, n, model)


def _gemini_text(content: Any, where: str) -> str:
    if not isinstance(content, dict):
        raise _Invalid(f"{where}: expected a Content object")
    parts = content.get("parts", [])
    if not isinstance(parts, list):
        raise _Invalid(f"{where}.parts: expected an array")
    return "".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def _parse_gemini_generate(body: dict[str, Any], model: str) -> _Call:
    contents = body.get("contents")
    if isinstance(contents, dict):
        contents = [contents]
    if not isinstance(contents, list) or not contents:
        raise _Invalid("contents: expected a non-empty array")
    messages: list[Message] = []
    system = body.get("systemInstruction")
    if system is not None:
        messages.append(Message("system", _gemini_text(system, "systemInstruction")))
    prompt: str | None = None
    for content in contents:
        text = _gemini_text(content, "contents[]")
        role = content.get("role") or "user"
        messages.append(Message(str(role), text))
        if role == "user":
            prompt = text
    config = body.get("generationConfig") or {}
    if not isinstance(config, dict):
        raise _Invalid("generationConfig: expected an object")
    where = "generationConfig."
    thinking = config.get("thinkingConfig") or {}
    if not isinstance(thinking, dict):
        raise _Invalid("generationConfig.thinkingConfig: expected an object")
    budget = _integer(thinking, "thinkingBudget", "generationConfig.thinkingConfig.")
    sampling = Sampling(
        temperature=_number(config, "temperature", where),
        top_p=_number(config, "topP", where),
        top_k=_integer(config, "topK", where),
        seed=_integer(config, "seed", where),
        max_output_tokens=_integer(config, "maxOutputTokens", where, 1),
        thinking_budget=budget if budget is not None and budget >= 0 else None,  # -1: dynamic
    )
    n = _count(_integer(config, "candidateCount", where), where + "candidateCount")
    text = messages[-1].content if prompt is None else prompt
    return _Call(tuple(messages), text, sampling, n, model)


def _openai_chat_body(call: _Call, c: Completion, serial: int) -> dict[str, Any]:
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


def _gemini_body(call: _Call, c: Completion, serial: int) -> dict[str, Any]:
    finish = {"length": "MAX_TOKENS"}
    u = c.usage
    usage = {
        "promptTokenCount": u.input_tokens,
        # Gemini counts thoughts apart from the candidates, and omits a zero count.
        "candidatesTokenCount": u.output_tokens,
        "totalTokenCount": u.input_tokens + u.output_tokens + u.thinking_tokens,
    }
    if u.thinking_tokens:
        usage["thoughtsTokenCount"] = u.thinking_tokens
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


def _embed_texts_openai(body: dict[str, Any]) -> tuple[list[str], int | None, bool, str]:
    model = _string(body, "model", "") or ""
    raw = body.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise _Invalid("input: expected a string or a non-empty array of strings")
    fmt = _string(body, "encoding_format", "") or "float"
    if fmt not in ("float", "base64"):
        raise _Invalid(f"encoding_format: expected 'float' or 'base64', got {fmt!r}")
    return texts, _integer(body, "dimensions", "", 1), fmt == "base64", model


def _embed_texts_gemini(body: dict[str, Any], batch: bool) -> tuple[list[str], int | None]:
    requests = body.get("requests") if batch else [body]
    if not isinstance(requests, list) or not requests:
        raise _Invalid("requests: expected a non-empty array")
    texts: list[str] = []
    dims: int | None = None
    for r in requests:
        if not isinstance(r, dict):
            raise _Invalid("requests[]: expected objects")
        texts.append(_gemini_text(r.get("content"), "content"))
        dims = _integer(r, "outputDimensionality", "", 1) or dims
    return texts, dims


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


class _Answerer:
    """Turns a parsed call into a Completion: the sim for the suite's prompts, prose otherwise."""

    def __init__(self, options: ServeOptions, suite: Suite | None, items: Sequence[Item]) -> None:
        self.options = options
        self.map = PromptMap(suite, items) if suite is not None and items else None
        config = SimConfig(
            seed=options.seed, ability=options.sim_ability, thinking_ratio=options.sim_thinking
        )
        self.sim = SimProvider(suite, items, config) if suite is not None and self.map else None
        self._mu = math.log(config.mean_output_tokens) - config.output_tokens_sigma**2 / 2
        self._sigma = config.output_tokens_sigma
        self.embedder = LexicalEmbedder()
        self._embedders = {self.embedder.dim: self.embedder}

    async def answer(self, call: _Call, stats: _Stats) -> Completion:
        decoded = self.map.decode(call.prompt) if self.map is not None else None
        if decoded is None or self.sim is None:
            stats.prompts["unknown"] += 1
            return self._generic(call)
        stats.prompts["adaptive" if decoded.demos else "warmup"] += 1
        request = Request(call.messages, call.sampling, call.n, decoded.item.id, decoded.demos)
        return await self.sim.generate(request)

    def _generic(self, call: _Call) -> Completion:
        """Filler prose and a boxed number, deterministic in the prompt and the seeds."""
        s = call.sampling
        rng = np.random.default_rng(stable_hash(self.options.seed, "serve", call.prompt, s.seed))
        texts: list[str] = []
        finish: list[str] = []
        output = 0
        for _ in range(call.n):
            tokens = max(1, round(float(rng.lognormal(self._mu, self._sigma))))
            answer = f"The final answer is \\boxed{{{int(rng.integers(0, 1000))}}}."
            if s.max_output_tokens is not None and tokens > s.max_output_tokens:
                tokens = s.max_output_tokens
                texts.append(prose(tokens * 4, rng))
                finish.append("length")
            else:
                text = prose(tokens * 4 - len(answer) - 2, rng)
                texts.append(f"{text}\n\n{answer}" if text else answer)
                finish.append("stop")
            output += tokens
        thinking = round(self.options.sim_thinking * output)
        if s.thinking_budget is not None:
            thinking = min(thinking, s.thinking_budget * call.n)
        usage = Usage(_tokens("".join(m.content for m in call.messages)), output, thinking)
        return Completion(tuple(texts), usage, tuple(finish), model="sim-generic")

    def embed(self, texts: list[str], dims: int | None) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Lexical vectors; fewer dimensions are hashed into fewer buckets, not truncated."""
        dim = dims or self.embedder.dim  # at most 256 embedders: larger dims are refused
        embedder = self._embedders.get(dim)
        if embedder is None:
            embedder = self._embedders[dim] = LexicalEmbedder(dim=dim)
        return embedder.embed(texts)


# The two APIs' envelopes

_JSON = "application/json"
_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    405: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
_SERVER_ERRORS = {
    500: "The server had an error while processing your request. (simulated)",
    503: "The server is overloaded or not ready yet. (simulated)",
}


class _OpenAI:
    """OpenAI's error envelope and rate-limit headers."""

    name = "openai"
    rate_headers = True

    @staticmethod
    def error(status: int, message: str, kind: str = "", code: str | None = None) -> bytes:
        if not kind:
            kind = "server_error" if status >= 500 else "invalid_request_error"
        err = {"message": message, "type": kind, "param": None, "code": code}
        return orjson.dumps({"error": err})

    @staticmethod
    def refusal(refusal: _Refusal) -> bytes:
        kind = "tokens" if refusal.kind == "tokens" else "requests"
        return _OpenAI.error(429, refusal.message, kind, "rate_limit_exceeded")

    parse = staticmethod(_parse_openai_chat)
    body = staticmethod(_openai_chat_body)


class _Gemini:
    """Google's error envelope (google.rpc.Status) and RetryInfo."""

    name = "gemini"
    rate_headers = False

    @staticmethod
    def error(status: int, message: str, kind: str = "", code: str | None = None) -> bytes:
        err = {"code": status, "message": message, "status": _GOOGLE_STATUS.get(status, "UNKNOWN")}
        return orjson.dumps({"error": err})

    @staticmethod
    def refusal(refusal: _Refusal) -> bytes:
        retry = {
            "@type": "type.googleapis.com/google.rpc.RetryInfo",
            "retryDelay": _proto_duration(refusal.retry_s),
        }
        err = {
            "code": 429,
            "message": refusal.message,
            "status": "RESOURCE_EXHAUSTED",
            "details": [retry],
        }
        return orjson.dumps({"error": err})

    parse = staticmethod(_parse_gemini_generate)
    body = staticmethod(_gemini_body)


_Wire = type[_OpenAI] | type[_Gemini]
_Handler = Callable[[web.BaseRequest, _Wire, str], Awaitable[web.StreamResponse]]


class _Server:
    """The request handler and its state: limits, fault and latency draws, counters."""

    def __init__(self, options: ServeOptions, suite: Suite | None, items: Sequence[Item]) -> None:
        self.options = options
        self.answerer = _Answerer(options, suite, items)
        self.stats = _Stats()
        self._now = asyncio.get_running_loop().time
        w = options.window
        self._rpm = _Window(_per_window(options.rpm, w), w) if options.rpm else None
        self._tpm = _Window(_per_window(options.tpm, w), w) if options.tpm else None
        cumulative = 0.0
        self._faults: list[tuple[float, str]] = []
        for kind in FAULTS:
            if options.fault(kind) > 0:
                cumulative += options.fault(kind)
                self._faults.append((cumulative, kind))
        # Separate streams, so that turning latency on leaves the sequence of faults alone.
        self._fault_rng = random.Random(f"fault/{options.seed}")
        self._latency_rng = random.Random(f"latency/{options.seed}")
        self._latency_mu = math.log(options.latency) if options.latency > 0 else 0.0
        self._serial = 0
        self.closing = asyncio.Event()
        # path -> (method, handler, wire, the route's name in /stats; None: not counted)
        self._exact: dict[str, tuple[str, _Handler, _Wire, str | None]] = {
            "/v1/chat/completions": ("POST", self._generate, _OpenAI, "openai.generate"),
            "/v1/embeddings": ("POST", self._embed, _OpenAI, "openai.embed"),
            "/stats": ("GET", self._get_stats, _OpenAI, None),
            "/stats/reset": ("POST", self._reset_stats, _OpenAI, None),
        }
        self._gemini: dict[str, tuple[str, _Handler, _Wire, str | None]] = {
            "generateContent": ("POST", self._generate, _Gemini, "gemini.generate"),
            "batchEmbedContents": ("POST", self._embed, _Gemini, "gemini.embed"),
            "embedContent": ("POST", self._embed, _Gemini, "gemini.embed"),
        }

    # Dispatch

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path
        entry = self._exact.get(path)
        model = ""
        if entry is None:
            # /{v1,v1beta}/models/{model}:{action}; model names hold dots and dashes.
            version, _, rest = path[1:].partition("/models/")
            model, _, action = rest.rpartition(":")
            gemini = version in ("v1", "v1beta")
            entry = self._gemini.get(action) if gemini and model and "/" not in model else None
            if entry is None:
                wire: _Wire = _Gemini if gemini and rest else _OpenAI
                self.stats.requests += 1
                return self._reply(404, wire.error(404, f"Invalid URL ({request.method} {path})"))
        method, handler, wire, route = entry
        if route is not None:
            stats = self.stats
            stats.requests += 1
            stats.by_route[route] = stats.by_route.get(route, 0) + 1
        if request.method != method:
            body = wire.error(405, f"Method {request.method} not allowed on {path}")
            return self._reply(405, body, {"Allow": method})
        return await handler(request, wire, model)

    def _reply(
        self, status: int, body: bytes, headers: dict[str, str] | None = None
    ) -> web.Response:
        self.stats.status(status)
        return web.Response(body=body, status=status, headers=headers, content_type=_JSON)

    async def _json(self, request: web.BaseRequest) -> dict[str, Any]:
        raw = await request.content.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise _Invalid(f"the body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise _Invalid("the body must be a JSON object")
        return body

    # Limits

    def _admit(self) -> _Refusal | None:
        opts = self.options
        if opts.max_concurrency is not None and self.stats.in_flight >= opts.max_concurrency:
            # When a place frees is unknowable; one second of the (scaled) minute.
            message = f"Too many concurrent requests: limit {opts.max_concurrency}."
            return _Refusal("concurrency", opts.window / 60, message)
        now = self._now()
        rpm, tpm = self._rpm, self._tpm
        if rpm is not None:
            rpm.prune(now)
            if rpm.total >= rpm.limit:
                wait = rpm.room(now)
                message = (
                    f"Rate limit reached on requests per window ({opts.window:g} s): Limit "
                    f"{rpm.limit}, Used {rpm.total}, Requested 1. Please try again in "
                    f"{_go_duration(wait)}."
                )
                return _Refusal("requests", wait, message)
        if tpm is not None:
            tpm.prune(now)
            if tpm.total >= tpm.limit:
                wait = tpm.room(now)
                message = (
                    f"Rate limit reached on tokens per window ({opts.window:g} s): Limit "
                    f"{tpm.limit}, Used {tpm.total}. Please try again in {_go_duration(wait)}."
                )
                return _Refusal("tokens", wait, message)
        if rpm is not None:
            rpm.add(now, 1)
        return None

    def _refuse(self, wire: _Wire, refusal: _Refusal) -> web.Response:
        self.stats.rate_limited[refusal.kind] += 1
        headers = self._rate_headers() if wire.rate_headers else {}
        if wire.rate_headers:
            headers["Retry-After"] = str(math.ceil(refusal.retry_s))
            headers["retry-after-ms"] = str(math.ceil(refusal.retry_s * 1000))
        return self._reply(429, wire.refusal(refusal), headers)

    def _rate_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        now = self._now()
        per_minute = 60 / self.options.window
        limits = (
            (self._rpm, self.options.rpm, "requests"),
            (self._tpm, self.options.tpm, "tokens"),
        )
        for window, limit, unit in limits:
            if window is not None:
                window.prune(now)
                # Per minute, as OpenAI announces them, whatever the window.
                left = max(0, window.limit - window.total)
                headers[f"x-ratelimit-limit-{unit}"] = str(limit)
                headers[f"x-ratelimit-remaining-{unit}"] = str(math.floor(left * per_minute))
                headers[f"x-ratelimit-reset-{unit}"] = _go_duration(window.full(now))
        return headers

    def _enter(self) -> None:
        stats = self.stats
        stats.in_flight += 1
        if stats.in_flight > stats.max_in_flight:
            stats.max_in_flight = stats.in_flight

    async def _delay(self) -> None:
        if self.options.latency > 0:
            sigma = self.options.latency_sigma
            await asyncio.sleep(self._latency_rng.lognormvariate(self._latency_mu, sigma))

    # Routes

    async def _generate(
        self, request: web.BaseRequest, wire: _Wire, model: str
    ) -> web.StreamResponse:
        try:
            body = await self._json(request)
            call = wire.parse(body, model)
        except _Invalid as exc:
            return self._reply(400, wire.error(400, str(exc)))
        refusal = self._admit()
        if refusal is not None:
            return self._refuse(wire, refusal)
        self._enter()
        try:
            fault: str | None = None
            if self._faults:
                draw = self._fault_rng.random()
                fault = next((kind for edge, kind in self._faults if draw < edge), None)
            await self._delay()
            if fault is not None:
                self.stats.by_fault[fault] += 1
            if fault == "hang":
                return await self._hang(request)
            if fault in ("500", "503"):
                status = int(fault)
                return self._reply(status, wire.error(status, _SERVER_ERRORS[status]))
            if fault == "empty":
                usage = Usage(_tokens("".join(m.content for m in call.messages)))
                completion = Completion((), usage, ())
            else:
                completion = await self.answerer.answer(call, self.stats)
            self._serial += 1
            payload = wire.body(call, completion, self._serial)
            u = completion.usage
            if self._tpm is not None:
                self._tpm.add(self._now(), u.input_tokens + u.output_tokens + u.thinking_tokens)
            headers = self._rate_headers() if wire.rate_headers else None
            counted = self.stats.tokens if fault is None else self.stats.faulty_tokens
            counted[0] += u.input_tokens
            counted[1] += u.output_tokens
            counted[2] += u.thinking_tokens
            data = orjson.dumps(payload)
            if fault is None:
                self.stats.ok += 1
            elif fault == "truncated":
                data = data[: len(data) // 2]
            elif fault == "reset":
                return await self._reset(request, data, headers)
            return self._reply(200, data, headers)
        finally:
            self.stats.in_flight -= 1

    async def _hang(self, request: web.BaseRequest) -> web.StreamResponse:
        """Waits until the client leaves (the handler is cancelled), --hang-s, or shutdown."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.closing.wait(), self.options.hang_s)
        return self._drop(request, web.StreamResponse(status=504))

    async def _reset(
        self, request: web.BaseRequest, data: bytes, headers: dict[str, str] | None
    ) -> web.StreamResponse:
        """Sends the headers and half the body, then drops the connection."""
        self.stats.status(200)
        response = web.StreamResponse(status=200, headers=headers)
        response.content_type = _JSON
        response.content_length = len(data)
        await response.prepare(request)
        await response.write(data[: len(data) // 2])
        return self._drop(request, response)

    @staticmethod
    def _drop(request: web.BaseRequest, response: web.StreamResponse) -> web.StreamResponse:
        # aiohttp then fails to finish the response on the closed transport, quietly.
        if request.transport is not None:
            request.transport.abort()
        return response

    async def _embed(self, request: web.BaseRequest, wire: _Wire, model: str) -> web.Response:
        try:
            body = await self._json(request)
            if wire is _Gemini:
                texts, dims = _embed_texts_gemini(body, batch=request.path.endswith("Contents"))
                b64 = False
            else:
                texts, dims, b64, model = _embed_texts_openai(body)
            if dims is not None and dims > self.answerer.embedder.dim:
                raise _Invalid(f"dimensions: at most {self.answerer.embedder.dim}, got {dims}")
        except _Invalid as exc:
            return self._reply(400, wire.error(400, str(exc)))
        refusal = self._admit()
        if refusal is not None:
            return self._refuse(wire, refusal)
        self._enter()
        try:
            await self._delay()
            vectors = self.answerer.embed(texts, dims)
            tokens = sum(_tokens(t) for t in texts)
            if self._tpm is not None:
                self._tpm.add(self._now(), tokens)
            self.stats.embedding_tokens += tokens
            payload: dict[str, Any]
            if wire is _Gemini and request.path.endswith("Contents"):
                payload = {"embeddings": [{"values": v} for v in vectors]}
            elif wire is _Gemini:
                payload = {"embedding": {"values": vectors[0]}}
            else:
                data = [
                    {
                        "object": "embedding",
                        "index": i,
                        "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode()
                        if b64
                        else v,
                    }
                    for i, v in enumerate(vectors)
                ]
                usage = {"prompt_tokens": tokens, "total_tokens": tokens}
                payload = {"object": "list", "data": data, "model": model, "usage": usage}
            headers = self._rate_headers() if wire.rate_headers else None
            return self._reply(200, orjson.dumps(payload, option=_NUMPY), headers)
        finally:
            self.stats.in_flight -= 1

    async def _get_stats(self, request: web.BaseRequest, wire: _Wire, model: str) -> web.Response:
        return web.Response(body=orjson.dumps(self.stats.as_dict()), content_type=_JSON)

    async def _reset_stats(self, request: web.BaseRequest, wire: _Wire, model: str) -> web.Response:
        self.stats.reset()
        return web.Response(body=orjson.dumps(self.stats.as_dict()), content_type=_JSON)


_NUMPY = orjson.OPT_SERIALIZE_NUMPY


class SimServer:
    """A running server: where it listens, and its counters."""

    def __init__(self, core: _Server, port: int) -> None:
        self._core = core
        self.port = port
        self.url = f"http://{HOST}:{port}"
        self.base_url_openai = f"{self.url}/v1"
        self.options = core.options
        # Whether the suite's adaptive prompts decode (else only warm-up prompts are its own).
        self.adaptive = core.answerer.map is not None and core.answerer.map.adaptive

    def stats(self) -> dict[str, Any]:
        """The counters `GET /stats` returns."""
        return self._core.stats.as_dict()

    def reset_stats(self) -> None:
        """Zeroes the counters, as `POST /stats/reset` does."""
        self._core.stats.reset()


@contextlib.asynccontextmanager
async def running_server(
    options: ServeOptions, suite: Suite | None = None, items: Sequence[Item] | None = None
) -> AsyncIterator[SimServer]:
    """Serves on 127.0.0.1 while the block runs (`options.port` 0: a free port).

    `items` default to `suite.items()`; without a suite every prompt gets the generic answer.
    """
    chosen: list[Item] = list(items) if items is not None else []
    if items is None and suite is not None:
        chosen = suite.items()
    core = _Server(options, suite, chosen)
    low = web.Server(core.handle, handler_cancellation=True, access_log=None)
    runner = web.ServerRunner(low, shutdown_timeout=2.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, HOST, options.port)
        await site.start()
        port = int(runner.addresses[0][1])
        yield SimServer(core, port)
    finally:
        core.closing.set()  # hanging requests give up at once
        await runner.cleanup()


async def serve_forever(
    options: ServeOptions,
    suite: Suite | None,
    items: Sequence[Item] | None,
    *,
    on_ready: Callable[[SimServer], object] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serves until `stop` is set (or cancelled); `on_ready(server)` (sync or async) runs once it
    listens. On the way out, hanging requests give up at once and the rest get 2 s."""
    async with running_server(options, suite, items) as server:
        if on_ready is not None:
            result = on_ready(server)
            if inspect.isawaitable(result):
                await result
        await (stop or asyncio.Event()).wait()
