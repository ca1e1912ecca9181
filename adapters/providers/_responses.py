"""OpenAI's Responses API (`POST /v1/responses`, `--api responses`): its request and its answer.

OpenAI serves its newer reasoning models first through this API. Its shapes differ from chat
completions' where ttc reads them:

    request      `input` (the messages), `max_output_tokens`, `reasoning: {effort, summary:
                 "auto"}` (only when a reasoning effort is asked for: other models refuse it),
                 `text: {verbosity}`, `store: false` (nothing kept on OpenAI's side); no `n`:
                 one answer per request
    answer       `output`: `reasoning` items (their `summary[].text`, the reasoning summary) and
                 a `message` with `output_text` (or `refusal`) parts; `status` completed, or
                 incomplete with `incomplete_details.reason` max_output_tokens (finish reason
                 "length"), or failed (a Transient)
    usage        `input_tokens` (`input_tokens_details.cached_tokens`), `output_tokens` with
                 the reasoning inside (`output_tokens_details.reasoning_tokens`)

The reasoning summary is read for the thinking tokens' estimate when the usage has none; the
answer judged is the message's text only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ttc.engine import BadRequest, Request, Transient

__all__ = ["responses_body", "responses_output"]


def responses_body(model: str, request: Request, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The request body of `request`; BadRequest for n > 1 (the API answers once)."""
    if request.n != 1:
        raise BadRequest(f"the Responses API answers once per request, not n={request.n}")
    s = request.sampling
    body: dict[str, Any] = {
        "model": model,
        "input": [{"role": m.role, "content": m.content} for m in request.messages],
        "store": False,
    }
    for key, value in (
        ("temperature", s.temperature),
        ("top_p", s.top_p),
        ("max_output_tokens", s.max_output_tokens),
    ):
        if value is not None:
            body[key] = value
    if s.reasoning_effort is not None:
        body["reasoning"] = {"effort": s.reasoning_effort, "summary": "auto"}
    if s.verbosity is not None:
        body["text"] = {"verbosity": s.verbosity}
    body.update(extra)
    return body


def responses_output(data: Any, who: str) -> tuple[str, str, str]:
    """The answer's text, finish reason and reasoning summary; Transient for a failed or empty
    response."""
    if not isinstance(data, dict) or not isinstance(data.get("output"), list):
        raise Transient(f"{who}: a response without output")
    status = data.get("status")
    if status == "failed" or isinstance(data.get("error"), dict):
        error = data.get("error") or {}
        said = error.get("message", "") if isinstance(error, dict) else ""
        raise Transient(f"{who}: the response failed: {str(said)[:300]}")
    texts, refusals, summary = _items(data["output"])
    reason = "stop"
    if status == "incomplete":
        details = data.get("incomplete_details") or {}
        said = details.get("reason") if isinstance(details, dict) else None
        reason = "length" if said == "max_output_tokens" else str(said or "incomplete")
    if not texts and refusals:
        return "".join(refusals), "refusal", "\n".join(summary)
    return "".join(texts), reason, "\n".join(summary)


def _items(output: list[Any]) -> tuple[list[str], list[str], list[str]]:
    """The output texts, refusals and reasoning summaries of a response's `output` items."""
    texts: list[str] = []
    refusals: list[str] = []
    summary: list[str] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "reasoning":
            parts = item.get("summary") or ()
            summary.extend(str(p.get("text") or "") for p in parts if isinstance(p, dict))
        elif item.get("type") == "message":
            for part in item.get("content") or ():
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "output_text":
                    texts.append(str(part.get("text") or ""))
                elif part.get("type") == "refusal":
                    refusals.append(str(part.get("refusal") or ""))
    return texts, refusals, summary
