"""Server-sent events read however the bytes arrive: split anywhere, CRLF, comments, [DONE]."""

from __future__ import annotations

import pytest

from ttc.adapters.providers._sse import Streaming, _Events
from ttc.adapters.providers._streams import AnthropicAssembly, ChatAssembly
from ttc.engine import ConfigError, Message, Transient

CHAT = (
    b": keep-alive\r\n\r\n"
    b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"Hel"}}]}\r\n\r\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"length"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


@pytest.mark.parametrize("size", [1, 7, len(CHAT)])
def test_events_split_anywhere_read_the_same(size: int) -> None:
    assembly = ChatAssembly("openai", (Message("user", "hi"),))
    events = _Events(assembly)
    pieces = [CHAT[i : i + size] for i in range(0, len(CHAT), size)]
    done = [events.take(p) for p in pieces]
    assert done[-1] is True
    assert not any(done[:-1])
    body = assembly.body()
    assert body["choices"][0]["message"]["content"] == "Hello"
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 2
    assert assembly.partial() == ("Hello",)


def test_an_anthropic_stream_ends_at_message_stop_and_an_error_event_is_transient() -> None:
    assembly = AnthropicAssembly("anthropic", (Message("user", "What is two plus two?"),))
    events = _Events(assembly)
    assert not events.take(
        b'event: message_start\ndata: {"type":"message_start","message":{"model":"m",'
        b'"usage":{"input_tokens":5}}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"4"}}\n\n'
    )
    assert assembly.partial() == ("4",)
    assert assembly.estimate().input_tokens > 0
    with pytest.raises(Transient, match="overloaded"):
        events.take(
            b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
            b'"message":"overloaded"}}\n\n'
        )
    ended = AnthropicAssembly("anthropic", (Message("user", "hi"),))
    assert _Events(ended).take(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    assert ended.done


def test_streaming_timeouts_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="--stall-timeout"):
        Streaming(stall_s=0)
