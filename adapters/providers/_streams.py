"""Each wire format's streamed events assembled into the body its whole answer would have had.

The providers read a streamed answer (`_sse.read_stream`) into one of these, then parse the
assembled `body()` with the very code that reads an unstreamed one, so a streamed and a whole
answer cannot be read differently:

    OpenAI chat completions   chunks of `choices[].delta` (content, refusal, finish_reason),
                              the usage in a last chunk with no choices (stream_options.
                              include_usage), then `data: [DONE]`
    OpenAI Responses          response.output_text.delta, response.reasoning_summary_text.delta;
                              the whole response in response.completed (or .incomplete, .failed)
    Anthropic Messages        message_start (usage.input_tokens), content_block_start/_delta
                              (text_delta, thinking_delta), message_delta (stop_reason,
                              usage.output_tokens), message_stop

An `error` event (Anthropic's overload mid-stream, OpenAI's `error`) is a Transient. What was
received before a stall is `partial()`, its tokens `estimate()`d from the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ttc.adapters.providers._usage import answer_tokens, prompt_tokens
from ttc.engine import Message, Transient, Usage

__all__ = ["AnthropicAssembly", "ChatAssembly", "ResponsesAssembly"]


class _Texts:
    """Texts growing by index, and the estimate of their tokens."""

    def __init__(self, who: str, messages: Sequence[Message]) -> None:
        self.who = who
        self.messages = messages
        self.parts: dict[int, list[str]] = {}
        self.thought: dict[int, list[str]] = {}
        self.done = False

    def add(self, index: int, text: str, thought: bool = False) -> None:
        (self.thought if thought else self.parts).setdefault(index, []).append(text)

    def text(self, index: int, thought: bool = False) -> str:
        return "".join((self.thought if thought else self.parts).get(index, ()))

    def partial(self) -> tuple[str, ...]:
        count = max([*self.parts, *self.thought], default=-1) + 1
        return tuple(self.text(i) for i in range(count))

    def estimate(self) -> Usage:
        thought = [self.text(i, True) for i in self.thought]
        return Usage(
            prompt_tokens(self.messages), answer_tokens(self.partial()), answer_tokens(thought)
        )

    def error(self, event: dict[str, Any]) -> Transient:
        error = event.get("error")
        said = error.get("message") if isinstance(error, dict) else error
        return Transient(f"{self.who}: an error event in the stream: {str(said)[:300]}")


class ChatAssembly(_Texts):
    """OpenAI chat completion chunks."""

    def __init__(self, who: str, messages: Sequence[Message]) -> None:
        super().__init__(who, messages)
        self.reasons: dict[int, str] = {}
        self.refusals: dict[int, list[str]] = {}
        self.head: dict[str, Any] = {}
        self.usage: Any = None

    def feed(self, event: dict[str, Any]) -> None:
        if event.get("error") is not None:
            raise self.error(event)
        if not self.head:
            self.head = {k: event.get(k) for k in ("id", "model", "system_fingerprint")}
        if event.get("usage") is not None:
            self.usage = event["usage"]
        for choice in event.get("choices") or ():
            index = choice.get("index", 0)
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.add(index, delta["content"])
            else:
                self.parts.setdefault(index, [])
            if delta.get("refusal"):
                self.refusals.setdefault(index, []).append(delta["refusal"])
            if choice.get("finish_reason"):
                self.reasons[index] = choice["finish_reason"]

    def body(self) -> dict[str, Any]:
        """The chat completion these chunks make."""
        choices = []
        for index in sorted(self.parts):
            refusal = "".join(self.refusals.get(index, ())) or None
            text = self.text(index)
            message = {"role": "assistant", "content": text if text or not refusal else None}
            message["refusal"] = refusal
            choices.append(
                {"index": index, "message": message, "finish_reason": self.reasons.get(index)}
            )
        body = {**self.head, "choices": choices}
        if self.usage is not None:
            body["usage"] = self.usage
        return body


class ResponsesAssembly(_Texts):
    """OpenAI Responses API events."""

    _FINAL = ("response.completed", "response.incomplete", "response.failed")

    def __init__(self, who: str, messages: Sequence[Message]) -> None:
        super().__init__(who, messages)
        self.response: dict[str, Any] = {}

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "error":
            raise self.error(event)
        if kind == "response.output_text.delta":
            self.add(0, str(event.get("delta") or ""))
        elif kind == "response.reasoning_summary_text.delta":
            self.add(0, str(event.get("delta") or ""), thought=True)
        elif kind in self._FINAL:
            response = event.get("response")
            self.response = response if isinstance(response, dict) else {}
            self.done = True

    def body(self) -> dict[str, Any]:
        """The response the final event carried."""
        return self.response


class AnthropicAssembly(_Texts):
    """Anthropic Messages events."""

    def __init__(self, who: str, messages: Sequence[Message]) -> None:
        super().__init__(who, messages)
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] = {}

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "error":
            raise self.error(event)
        if kind == "message_start":
            self.message = dict(event.get("message") or {})
            self.usage.update(self.message.get("usage") or {})
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            self.blocks[int(event.get("index", len(self.blocks)))] = block
        elif kind == "content_block_delta":
            self._delta(int(event.get("index", 0)), event.get("delta") or {})
        elif kind == "message_delta":
            self.message.update(event.get("delta") or {})
            self.usage.update(event.get("usage") or {})
        elif kind == "message_stop":
            self.done = True

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        for field in ("text", "thinking"):
            if isinstance(delta.get(field), str):
                block[field] = block.get(field, "") + delta[field]
                self.add(0, delta[field], thought=field == "thinking")

    def body(self) -> dict[str, Any]:
        """The message these events make."""
        content = [self.blocks[i] for i in sorted(self.blocks)]
        return {**self.message, "content": content, "usage": self.usage}
