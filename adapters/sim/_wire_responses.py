"""`ttc serve`'s OpenAI Responses API: `POST /v1/responses` (and Azure's `/openai/v1/responses`).

Requests take `model`, `input` (a string, or messages whose content is a string or
`input_text` parts), `instructions` (a system message), `max_output_tokens`, `temperature`,
`top_p`, `reasoning: {effort}`, `text: {verbosity}` and `stream`; the API has no `n`.
Responses are `{"object": "response", "status", "output", "usage"}`: a `reasoning` item with a
one-line summary when the simulator thought, then one `message` item with an `output_text` part;
`status` "incomplete" with `incomplete_details.reason` "max_output_tokens" for an answer cut by
the limit. `usage.output_tokens` holds the reasoning, split out in
`output_tokens_details.reasoning_tokens`. Bodies carry `system_fingerprint` SIM_FINGERPRINT (a
field the API does not have, read by ttc alone) so that clients can tell they are simulated.
Errors and rate-limit headers are OpenAI's.
"""

from __future__ import annotations

import time
from typing import Any

from ttc.adapters.providers._http import SIM_FINGERPRINT
from ttc.adapters.sim._admission import Refusal
from ttc.adapters.sim._wire import Call, EmbedCall, Invalid, Route, Vectors, integer, number, string
from ttc.adapters.sim._wire_openai import OPENAI
from ttc.engine import Completion, Message, Sampling

__all__ = ["RESPONSES", "response_body", "response_output"]

_ROUTES = {
    "/v1/responses": Route("POST", "generate", "openai.responses"),
    "/openai/v1/responses": Route("POST", "generate", "azure.responses"),
}


class _Responses:
    """The Responses API's route, bodies and (OpenAI's) error envelope."""

    name = "responses"
    rate_headers = True

    def route(self, path: str) -> Route | None:
        return _ROUTES.get(path)

    def claims(self, path: str) -> bool:
        return False

    def error(self, status: int, message: str, kind: str = "", code: str | None = None) -> bytes:
        return OPENAI.error(status, message, kind, code)

    def refusal(self, refusal: Refusal) -> bytes:
        return OPENAI.refusal(refusal)

    def parse(self, body: dict[str, Any], route: Route) -> Call:
        return _parse(body)

    def body(self, call: Call, completion: Completion, serial: int) -> dict[str, Any]:
        return response_body(call.model, completion, serial)

    def parse_embed(self, body: dict[str, Any], route: Route) -> EmbedCall:
        raise Invalid("the Responses API embeds nothing")

    def embed_body(self, call: EmbedCall, vectors: Vectors, tokens: int) -> dict[str, Any]:
        raise Invalid("the Responses API embeds nothing")


RESPONSES = _Responses()
"""The Responses API wire format."""


def _content(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    raise Invalid(f"{where}: expected a string or an array of content parts")


def _parse(body: dict[str, Any]) -> Call:
    model = string(body, "model", "")
    if not model:
        raise Invalid("model: required")
    if "n" in body:
        raise Invalid("Unknown parameter: 'n'.")
    raw = body.get("input")
    messages: list[Message] = []
    instructions = string(body, "instructions", "")
    if instructions:
        messages.append(Message("system", instructions))
    if isinstance(raw, str):
        raw = [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise Invalid("input: expected a string or a non-empty array")
    prompt: str | None = None
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise Invalid(f"input[{i}]: expected a message with a role")
        message = Message(m["role"], _content(m.get("content"), f"input[{i}].content"))
        messages.append(message)
        if message.role == "user":
            prompt = message.content
    reasoning = body.get("reasoning") or {}
    text = body.get("text") or {}
    if not isinstance(reasoning, dict) or not isinstance(text, dict):
        raise Invalid("reasoning, text: expected objects")
    sampling = Sampling(
        temperature=number(body, "temperature", ""),
        top_p=number(body, "top_p", ""),
        max_output_tokens=integer(body, "max_output_tokens", "", 16),
        reasoning_effort=string(reasoning, "effort", "reasoning."),
        verbosity=string(text, "verbosity", "text."),
    )
    asked = messages[-1].content if prompt is None else prompt
    return Call(tuple(messages), asked, sampling, 1, model, stream=body.get("stream") is True)


def response_output(completion: Completion, serial: int) -> list[dict[str, Any]]:
    """The `output` items of a completion: its reasoning summary (when it thought), its text."""
    u = completion.usage
    text = completion.texts[0] if completion.texts else ""
    output: list[dict[str, Any]] = []
    if u.thinking_tokens:
        summary = f"(simulated reasoning: {u.thinking_tokens} tokens)"
        output.append(
            {
                "id": f"rs_sim{serial:021d}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": summary}],
            }
        )
    part = {"type": "output_text", "text": text, "annotations": []}
    output.append(
        {
            "id": f"msg_sim{serial:021d}",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [part],
        }
    )
    return output


def response_body(model: str, completion: Completion, serial: int) -> dict[str, Any]:
    """The response object of a completion."""
    u = completion.usage
    cut = bool(completion.finish_reasons) and completion.finish_reasons[0] == "length"
    return {
        "id": f"resp_sim{serial:021d}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "error": None,
        "model": model,
        "output": response_output(completion, serial),
        "usage": {
            "input_tokens": u.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": u.output_tokens + u.thinking_tokens,
            "output_tokens_details": {"reasoning_tokens": u.thinking_tokens},
            "total_tokens": u.input_tokens + u.output_tokens + u.thinking_tokens,
        },
        "system_fingerprint": SIM_FINGERPRINT,
    }
