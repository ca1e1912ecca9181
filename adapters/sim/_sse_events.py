"""`ttc serve`'s streamed answers: a completion as each wire format's server-sent events.

    openai, azure   chat.completion.chunk objects: a role chunk, content deltas, a finish chunk
                    per choice, the usage in a last chunk without choices when the request set
                    stream_options.include_usage, then `data: [DONE]`
    responses       response.created, output items (a reasoning item's summary deltas, the
                    message's output_text deltas), response.completed (or .incomplete) with the
                    whole response, each with its `event:` name, as OpenAI sends them
    anthropic       message_start, content_block_start/delta/stop (thinking, then text),
                    message_delta (stop_reason, output usage), message_stop, with `event:` names
    gemini          GenerateContentResponse chunks of text; the last with finishReason and
                    usageMetadata (streamGenerateContent?alt=sse)

Texts are cut into pieces of `PIECE` characters, so that a long answer is many events and a
stall (`--fault-stall`) stops it mid-answer. The usage an event carries is the completion's:
a streamed answer is counted exactly as the same answer whole.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from ttc.adapters.providers._http import SIM_FINGERPRINT, SIM_MODEL_SUFFIX
from ttc.adapters.sim._wire import Call
from ttc.adapters.sim._wire_anthropic import message_body
from ttc.adapters.sim._wire_gemini import usage_metadata
from ttc.adapters.sim._wire_openai import chat_body
from ttc.adapters.sim._wire_responses import response_body, response_output
from ttc.engine import Completion

__all__ = ["PIECE", "events"]

PIECE = 48
"""Characters of text per event."""
SSE = "text/event-stream"


def _pieces(text: str) -> list[str]:
    return [text[i : i + PIECE] for i in range(0, len(text), PIECE)] or [""]


def _data(obj: Any, name: str | None = None) -> bytes:
    head = b"event: " + name.encode() + b"\n" if name else b""
    return head + b"data: " + orjson.dumps(obj) + b"\n\n"


def events(wire: str, call: Call, completion: Completion, serial: int) -> list[bytes]:
    """The events of `completion` in wire format `wire` (see the module docstring)."""
    if wire == "responses":
        return _responses(call, completion, serial)
    if wire == "anthropic":
        return _anthropic(call, completion, serial)
    if wire == "gemini":
        return _gemini(call, completion, serial)
    return _chat(call, completion, serial)


def _chat(call: Call, completion: Completion, serial: int) -> list[bytes]:
    whole = chat_body(call, completion, serial)
    head = {
        "id": whole["id"],
        "object": "chat.completion.chunk",
        "created": whole["created"],
        "model": whole["model"],
        "system_fingerprint": SIM_FINGERPRINT,
    }

    def chunk(index: int, delta: dict[str, Any], reason: str | None = None) -> bytes:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": reason}
        return _data({**head, "choices": [choice]})

    out: list[bytes] = []
    for choice in whole["choices"]:
        i = choice["index"]
        out.append(chunk(i, {"role": "assistant", "content": "", "refusal": None}))
        out.extend(chunk(i, {"content": p}) for p in _pieces(choice["message"]["content"]))
        out.append(chunk(i, {}, choice["finish_reason"]))
    if call.stream_usage:
        out.append(_data({**head, "choices": [], "usage": whole["usage"]}))
    out.append(b"data: [DONE]\n\n")
    return out


def _responses(call: Call, completion: Completion, serial: int) -> list[bytes]:
    whole = response_body(call.model, completion, serial)
    seq = iter(range(1 << 30))

    def event(kind: str, **fields: Any) -> bytes:
        return _data({"type": kind, "sequence_number": next(seq), **fields}, kind)

    started = {**whole, "status": "in_progress", "output": [], "usage": None}
    out = [event("response.created", response=started)]
    for index, item in enumerate(response_output(completion, serial)):
        shell = {**item, "summary": []} if item["type"] == "reasoning" else {**item, "content": []}
        out.append(event("response.output_item.added", output_index=index, item=shell))
        ids = {"item_id": item["id"], "output_index": index}
        if item["type"] == "reasoning":
            text = item["summary"][0]["text"]
            at = {**ids, "summary_index": 0}
            part: dict[str, Any] = {"type": "summary_text", "text": ""}
            out.append(event("response.reasoning_summary_part.added", **at, part=part))
            for p in _pieces(text):
                out.append(event("response.reasoning_summary_text.delta", **at, delta=p))
            out.append(event("response.reasoning_summary_text.done", **at, text=text))
        else:
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            at = {**ids, "content_index": 0}
            out.append(event("response.content_part.added", **at, part=part))
            for p in _pieces(text):
                out.append(event("response.output_text.delta", **at, delta=p, logprobs=[]))
            out.append(event("response.output_text.done", **at, text=text, logprobs=[]))
            out.append(event("response.content_part.done", **at, part=item["content"][0]))
        out.append(event("response.output_item.done", output_index=index, item=item))
    final = "response.completed" if whole["status"] == "completed" else "response.incomplete"
    out.append(event(final, response=whole))
    return out


def _anthropic(call: Call, completion: Completion, serial: int) -> list[bytes]:
    whole = message_body(call, completion, serial)
    usage = whole["usage"]
    start = {**whole, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    out = [_data({"type": "message_start", "message": start}, "message_start")]
    for index, block in enumerate(whole["content"]):
        kind = block["type"]
        empty: dict[str, str] = {"type": "text", "text": ""}
        if kind == "thinking":
            empty = {"type": "thinking", "thinking": "", "signature": ""}
        out.append(
            _data(
                {"type": "content_block_start", "index": index, "content_block": empty},
                "content_block_start",
            )
        )
        field = "thinking" if kind == "thinking" else "text"
        for p in _pieces(block[field]):
            delta = {"type": f"{field}_delta", field: p}
            out.append(
                _data(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    "content_block_delta",
                )
            )
        if kind == "thinking":
            delta = {"type": "signature_delta", "signature": block["signature"]}
            out.append(
                _data(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    "content_block_delta",
                )
            )
        out.append(_data({"type": "content_block_stop", "index": index}, "content_block_stop"))
    stop = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
    end = {k: v for k, v in usage.items() if k in ("output_tokens", "output_tokens_details")}
    out.append(_data({"type": "message_delta", "delta": stop, "usage": end}, "message_delta"))
    out.append(_data({"type": "message_stop"}, "message_stop"))
    return out


def _gemini(call: Call, completion: Completion, serial: int) -> list[bytes]:
    finish = {"length": "MAX_TOKENS"}
    version = call.model + SIM_MODEL_SUFFIX
    out: list[bytes] = []
    for i, text in enumerate(completion.texts):
        for p in _pieces(text):
            candidate = {"content": {"role": "model", "parts": [{"text": p}]}, "index": i}
            out.append(_data({"candidates": [candidate], "modelVersion": version}))
    usage = usage_metadata(completion.usage)
    last = [
        {
            "content": {"role": "model", "parts": [{"text": ""}]},
            "finishReason": finish.get(reason, "STOP"),
            "index": i,
        }
        for i, reason in enumerate(completion.finish_reasons)
    ]
    out.append(
        _data(
            {
                "candidates": last,
                "usageMetadata": usage,
                "modelVersion": version,
                "responseId": f"sim{serial:021d}",
                "createTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        )
    )
    return out
