"""`ttc serve` streams in each wire format, read by the official clients unchanged and by ttc's
own providers; `--fault-stall` stops a stream halfway and holds it open; the Responses API is
served plain and streamed. Real HTTP over loopback; nothing asserts on speed."""

from __future__ import annotations

import asyncio

import aiohttp
import anthropic
import openai
import pytest

from ttc.adapters.providers import (
    AnthropicProvider,
    Connection,
    GeminiProvider,
    OpenAIProvider,
    OpenAIResponsesProvider,
    Streaming,
)
from ttc.adapters.providers._http import SIM_MODEL_SUFFIX
from ttc.adapters.sim import ServeOptions, SimServer, running_server
from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite
from ttc.engine import Message, Provider, Request, Sampling, Transient
from ttc.engine.contract import Stalled


@pytest.fixture(scope="module")
def gym() -> ReasoningGymSuite:
    return ReasoningGymSuite(per_task=6)


def _request(
    gym: ReasoningGymSuite, max_tokens: int | None = None, thinking: int | None = None
) -> Request:
    item = gym.items()[0]
    messages = (Message("user", gym.warmup_prompt(item)),)
    sampling = Sampling(max_output_tokens=max_tokens, seed=3, thinking_budget=thinking)
    return Request(messages, sampling, item_id=item.id)


async def test_official_openai_client_streams_chat_completions(gym: ReasoningGymSuite) -> None:
    options = ServeOptions(port=0, sim_thinking=0.5)
    async with running_server(options, gym, gym.items()) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url_openai, api_key="x", max_retries=0)
        async with client:
            stream = await client.chat.completions.create(
                model="gpt-5-mini",
                messages=[{"role": "user", "content": gym.warmup_prompt(gym.items()[0])}],
                n=2,
                seed=1,
                stream=True,
                stream_options={"include_usage": True},
            )
            texts = ["", ""]
            reasons: dict[int, str] = {}
            chunks = 0
            usage = None
            async for chunk in stream:
                chunks += 1
                for choice in chunk.choices:
                    texts[choice.index] += choice.delta.content or ""
                    if choice.finish_reason:
                        reasons[choice.index] = choice.finish_reason
                usage = chunk.usage or usage
            whole = await client.chat.completions.create(
                model="gpt-5-mini",
                messages=[{"role": "user", "content": gym.warmup_prompt(gym.items()[0])}],
                n=2,
                seed=1,
            )
    assert chunks > 4  # many events, not one
    assert texts == [c.message.content for c in whole.choices]  # the same answers, streamed
    assert reasons == {0: "stop", 1: "stop"}
    assert usage is not None
    assert whole.usage is not None
    assert usage.completion_tokens == whole.usage.completion_tokens
    details = usage.completion_tokens_details
    assert details is not None
    assert details.reasoning_tokens


async def test_official_openai_client_reads_the_responses_api(gym: ReasoningGymSuite) -> None:
    prompt = gym.warmup_prompt(gym.items()[0])
    async with running_server(ServeOptions(port=0, sim_thinking=0.5), gym, gym.items()) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url_openai, api_key="x", max_retries=0)
        async with client:
            whole = await client.responses.create(
                model="gpt-5", input=prompt, reasoning={"effort": "low", "summary": "auto"}
            )
            stream = await client.responses.create(model="gpt-5", input=prompt, stream=True)
            kinds: list[str] = []
            text = ""
            final = None
            async for event in stream:
                kinds.append(event.type)
                if event.type == "response.output_text.delta":
                    text += event.delta
                if event.type == "response.completed":
                    final = event.response
            cut = await client.responses.create(model="gpt-5", input=prompt, max_output_tokens=16)
        stats = server.stats()
    assert whole.status == "completed"
    assert whole.output_text
    assert whole.usage is not None
    assert whole.usage.output_tokens_details.reasoning_tokens > 0
    assert whole.output[0].type == "reasoning"  # the summary comes first
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert final is not None
    assert final.output_text == text
    assert cut.status == "incomplete"
    assert cut.incomplete_details is not None
    assert cut.incomplete_details.reason == "max_output_tokens"
    assert stats["by_route"] == {"openai.responses": 3}


async def test_official_anthropic_client_streams_messages(gym: ReasoningGymSuite) -> None:
    async with running_server(ServeOptions(port=0, sim_thinking=0.5), gym, gym.items()) as server:
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="x", max_retries=0)
        async with (
            client,
            client.messages.stream(
                model="claude-haiku-4-5",
                max_tokens=30_000,
                messages=[{"role": "user", "content": gym.warmup_prompt(gym.items()[0])}],
                thinking={"type": "enabled", "budget_tokens": 10_000},
            ) as stream,
        ):
            text = ""
            async for event in stream:
                if event.type == "text":
                    text += event.text
            message = await stream.get_final_message()
    assert message.model.endswith(SIM_MODEL_SUFFIX)
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[1].type == "text"
    assert message.content[1].text == text
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens > 0
    assert message.usage.output_tokens > len(text) // 4  # the thinking counted in


def _provider(kind: str, server: SimServer, connection: Connection) -> Provider:
    if kind == "anthropic":
        return AnthropicProvider("m", base_url=server.url, connection=connection)
    openai_kind = OpenAIResponsesProvider if kind == "responses" else OpenAIProvider
    return openai_kind("m", base_url=server.base_url_openai, connection=connection)


@pytest.mark.parametrize("kind", ["chat", "responses", "anthropic"])
async def test_a_streamed_answer_is_the_whole_answer(gym: ReasoningGymSuite, kind: str) -> None:
    """ttc's providers read the same completion streamed as whole, usage included."""
    request = _request(gym, thinking=2048 if kind == "anthropic" else None)
    async with running_server(ServeOptions(port=0, sim_thinking=0.5), gym, gym.items()) as server:
        got = []
        for stream in (None, Streaming(5, 5)):
            connection = Connection(stream=stream)
            provider = _provider(kind, server, connection)
            try:
                got.append(await provider.generate(request))
            finally:
                await provider.aclose()
            assert provider.simulated
    whole, streamed = got
    assert streamed.finish_reasons == whole.finish_reasons
    assert streamed.texts[0]
    assert whole.usage.thinking_tokens > 0
    if kind == "anthropic":  # the API takes no seed: each request is its own draw
        assert streamed.usage.input_tokens == whole.usage.input_tokens
        assert streamed.usage.thinking_tokens > 0
        return
    assert streamed.texts == whole.texts
    assert streamed.usage == whole.usage


async def test_the_responses_api_says_an_answer_was_cut(gym: ReasoningGymSuite) -> None:
    async with running_server(ServeOptions(port=0), gym, gym.items()) as server:
        for stream in (None, Streaming(5, 5)):
            provider = OpenAIResponsesProvider(
                "m", base_url=server.base_url_openai, connection=Connection(stream=stream)
            )
            try:
                completion = await provider.generate(_request(gym, max_tokens=16))
            finally:
                await provider.aclose()
            assert completion.finish_reasons == ("length",)
            assert completion.usage.output_tokens == 16


@pytest.mark.parametrize("kind", ["chat", "anthropic"])
async def test_a_stalled_stream_is_a_stalled_error_with_its_partial_text(
    gym: ReasoningGymSuite, kind: str
) -> None:
    options = ServeOptions(port=0, fault_stall=1.0, hang_s=60)
    async with running_server(options, gym, gym.items()) as server:
        connection = Connection(stream=Streaming(first_byte_s=5, stall_s=0.3))
        if kind == "chat":
            provider: OpenAIProvider | AnthropicProvider = OpenAIProvider(
                "m", base_url=server.base_url_openai, connection=connection
            )
        else:
            provider = AnthropicProvider("m", base_url=server.url, connection=connection)
        try:
            with pytest.raises(Stalled) as stalled:
                await provider.generate(_request(gym))
        finally:
            await provider.aclose()
        await asyncio.sleep(0)
        stats = server.stats()
    error = stalled.value
    assert isinstance(error, Transient)  # retried by the engine
    assert "stalled" in str(error)
    assert error.partial
    assert error.partial[0]
    assert error.usage is not None
    assert error.usage.output_tokens > 0
    assert stats["by_fault"]["stall"] == 1
    assert stats["ok"] == 0  # not an answer in full


async def test_a_stalled_whole_body_holds_the_connection_open() -> None:
    async with running_server(ServeOptions(port=0, fault_stall=1.0, hang_s=60)) as server:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        url = server.base_url_openai + "/chat/completions"
        async with aiohttp.ClientSession() as http, http.post(url, json=body) as r:
            assert r.status == 200
            first = await r.content.readany()
            assert first
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await r.content.read()


async def test_gemini_streams_through_google_genai(gym: ReasoningGymSuite) -> None:
    """google-genai's generate_content_stream reads ttc serve's streamGenerateContent; ttc's
    Gemini provider gets the same completion streamed as whole, and a stall is a Stalled."""
    request = _request(gym)
    async with running_server(ServeOptions(port=0, sim_thinking=0.5), gym, gym.items()) as server:
        got = []
        for stream in (None, Streaming(5, 5)):
            provider = GeminiProvider(
                "gemini-2.5-flash", base_url=server.url, connection=Connection(stream=stream)
            )
            try:
                got.append(await provider.generate(request))
            finally:
                await provider.aclose()
            assert provider.simulated
        stats = server.stats()
    whole, streamed = got
    assert streamed.texts == whole.texts
    assert streamed.texts[0]
    assert streamed.usage == whole.usage
    assert whole.usage.thinking_tokens > 0
    assert streamed.finish_reasons == whole.finish_reasons == ("stop",)
    assert stats["by_route"] == {"gemini.generate": 2}
    async with running_server(ServeOptions(port=0, fault_stall=1.0, hang_s=60)) as server:
        provider = GeminiProvider(
            "g", base_url=server.url, connection=Connection(stream=Streaming(5, 0.3))
        )
        try:
            with pytest.raises(Stalled) as stalled:
                await provider.generate(_request(gym))
        finally:
            await provider.aclose()
    assert stalled.value.partial
    assert stalled.value.partial[0]
