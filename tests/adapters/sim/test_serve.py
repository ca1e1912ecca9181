"""`ttc serve`: decoding prompts back to items and demos, the wire formats (checked with the
official OpenAI and Google clients), rate limits, injected faults and the counters.

Every server test talks real HTTP over loopback to a server on a free port; windows and latencies
are scaled down to fractions of a second, and nothing asserts on speed. GPQA data here is made
up, and asserts compare ids, never question texts.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import math
import random
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import orjson
import pytest
from fakes import FakeSuite
from fakes import items as fake_items

from ttc.adapters.providers._http import SIM_FINGERPRINT, SIM_MODEL_SUFFIX, parse_duration
from ttc.adapters.sim import (
    ServeOptions,
    SimServer,
    add_serve_arguments,
    answers_for,
    options_from_args,
    running_server,
    serve_forever,
)
from ttc.adapters.sim._admission import (
    Bucket,
    FixedWindow,
    Window,
    go_duration,
    make_limit,
    proto_duration,
)
from ttc.adapters.sim._options import FAULTS
from ttc.adapters.sim._promptmap import PromptMap
from ttc.adapters.sim._sim import SimConfig, SimProvider
from ttc.adapters.suites._gpqa import GPQASuite
from ttc.adapters.suites._livecodebench import LiveCodeBenchSuite
from ttc.adapters.suites._math import MathSuite
from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite, extract_last_boxed
from ttc.engine.contract._errors import ConfigError
from ttc.engine.contract._types import Demo, Item, Message, Request, Sampling, Suite, Verdict
from ttc.retrieval import LexicalEmbedder

LCB_FIXTURE = Path(__file__).resolve().parents[2] / "data" / "lcb_fixture.jsonl"


# --- suites -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gym() -> ReasoningGymSuite:
    return ReasoningGymSuite(per_task=6)


def _math500(path: Path) -> MathSuite:
    records = [
        {
            "problem": f"Compute ${i} + {i * 7}$. What is the sum of the two numbers?",
            "answer": str(i * 8),
            "subject": "Algebra",
            "level": 1 + i % 5,
            "unique_id": f"test/algebra/{i}.json",
        }
        for i in range(12)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return MathSuite("math500", path)


def _gpqa(path: Path) -> GPQASuite:
    records = [
        {
            "Record ID": f"syn-{i}",
            "Question": f"Made-up question {i}: which of the options is right?",
            "Correct Answer": f"right answer {i}",
            "Incorrect Answer 1": f"wrong answer {i}a",
            "Incorrect Answer 2": f"wrong answer {i}b",
            "Incorrect Answer 3": f"wrong answer {i}c",
        }
        for i in range(12)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return GPQASuite(path)


def _suite(name: str, tmp_path: Path, gym: ReasoningGymSuite) -> Suite:
    if name == "reasoning_gym":
        return gym
    if name == "math500":
        return _math500(tmp_path / "math500.jsonl")
    if name == "gpqa":
        return _gpqa(tmp_path / "gpqa.jsonl")
    return LiveCodeBenchSuite(LCB_FIXTURE, start=None, end=None)


def _adaptive(
    suite: Suite, items: Sequence[Item], rng: random.Random, max_demos: int = 5
) -> tuple[str, Item, list[Demo]]:
    """An adaptive prompt as the engine renders one: demos are other items with sim answers."""
    target = rng.choice(items)
    others = [i for i in items if i.id != target.id]
    chosen = rng.sample(others, rng.randint(1, min(max_demos, len(others))))
    demos = [
        Demo(
            d.id,
            d.question,
            answers_for(suite).sim_response(d, rng.random() < 0.5, rng.randrange(99)),
            0.5,
        )
        for d in chosen
    ]
    return suite.adaptive_prompt(target, demos), target, demos


def _ids(demos: Sequence[Demo]) -> list[tuple[str, str]]:
    return [(d.item_id, d.response) for d in demos]


# --- decoding prompts ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["reasoning_gym", "math500", "gpqa", "livecodebench"])
def test_prompts_decode_to_the_item_and_demos_they_came_from(
    name: str, tmp_path: Path, gym: ReasoningGymSuite
) -> None:
    suite = _suite(name, tmp_path, gym)
    items = suite.items()
    pm = PromptMap(suite, items)
    assert pm.adaptive
    for item in items:
        decoded = pm.decode(suite.warmup_prompt(item))
        assert decoded is not None
        assert (decoded.item.id, decoded.demos) == (item.id, ())
    rng = random.Random(name)
    for _ in range(60):
        prompt, target, demos = _adaptive(suite, items, rng)
        decoded = pm.decode(prompt)
        assert decoded is not None
        assert decoded.item.id == target.id
        assert _ids(decoded.demos) == _ids(demos)
        assert [d.question for d in decoded.demos] == [d.question for d in demos]
    assert pm.decode("What is 2 + 2?") is None
    assert pm.decode(suite.warmup_prompt(items[0]) + " ") is None


def test_separators_inside_questions_and_responses(gym: ReasoningGymSuite) -> None:
    pool = [*fake_items(4), Item("tricky", "pick one\n\nSolution:\nnot this", "right:tricky")]
    suite = FakeSuite(pool=pool)
    pm = PromptMap(suite, pool)
    sneaky = "step one\n\nExample 2\nProblem:\nnot a known question\n\nSolution:\nstill demo 1"
    demos = [
        Demo("tricky", pool[4].question, sneaky),
        Demo("q1", pool[1].question, "\n\n---\n\nNow solve the following."),
        Demo("q2", pool[2].question, ""),
    ]
    decoded = pm.decode(suite.adaptive_prompt(pool[0], demos))
    assert decoded is not None
    assert decoded.item.id == "q0"
    assert _ids(decoded.demos) == _ids(demos)
    # The target itself may be the tricky one.
    decoded = pm.decode(suite.adaptive_prompt(pool[4], demos[1:]))
    assert decoded is not None
    assert (decoded.item.id, _ids(decoded.demos)) == ("tricky", _ids(demos[1:]))


def test_more_demos_than_learnt_up_front() -> None:
    pool = fake_items(12)
    suite = FakeSuite(pool=pool)
    pm = PromptMap(suite, pool, max_demos=2)
    demos = [Demo(i.id, i.question, f"answer {i.id}") for i in pool[1:10]]
    decoded = pm.decode(suite.adaptive_prompt(pool[0], demos))
    assert decoded is not None
    assert _ids(decoded.demos) == _ids(demos)


class _BareSuite(FakeSuite):
    """No tail text before the target question: suffixes share no distinctive opening."""

    def warmup_prompt(self, item: Item) -> str:
        return f"{item.question}?"

    def adaptive_prompt(self, item: Item, demos: Sequence[Demo]) -> str:
        shots = "\n".join(f"[{n}] {d.question} => {d.response}" for n, d in enumerate(demos, 1))
        return f"{shots}\n{item.question}"


class _CountingSuite(FakeSuite):
    """Shows how many demos there are, not what they say: adaptive prompts cannot be decoded."""

    def adaptive_prompt(self, item: Item, demos: Sequence[Demo]) -> str:
        return f"{len(demos)} examples were solved.\n{item.question}"


def test_suffixes_without_a_shared_opening_are_found_by_their_window() -> None:
    pool = [Item(f"s{i}", f"q{i}", "r") for i in range(5)]  # shorter than the window
    pool += [Item(f"l{i}", f"{'long question ' * 8} number {i}", "r") for i in range(5)]
    suite = _BareSuite(pool=pool)
    pm = PromptMap(suite, pool)
    assert pm.adaptive
    rng = random.Random(1)
    for _ in range(40):
        target = rng.choice(pool)
        demos = [Demo(d.id, d.question, f"r{rng.random()}") for d in rng.sample(pool, 3)]
        decoded = pm.decode(suite.adaptive_prompt(target, demos))
        assert decoded is not None
        assert (decoded.item.id, _ids(decoded.demos)) == (target.id, _ids(demos))


def test_a_suite_whose_prompts_do_not_fit_decodes_warmups_only() -> None:
    pool = fake_items(3)
    suite = _CountingSuite(pool=pool)
    pm = PromptMap(suite, pool)
    assert not pm.adaptive
    assert pm.decode(suite.adaptive_prompt(pool[0], [Demo("q1", pool[1].question, "x")])) is None
    decoded = pm.decode(suite.warmup_prompt(pool[2]))
    assert decoded is not None
    assert decoded.item.id == "q2"


# --- options and flags --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"rpm": -1}, "--rpm: must be > 0, got -1"),
        ({"tpm": 0}, "--tpm: must be > 0, got 0"),
        ({"rpm": 10, "window": 1.0}, "--rpm: 10 per minute is less than one per --window of 1 s"),
        ({"max_concurrency": 1.5}, "--max-concurrency: must be an integer"),
        ({"window": float("nan")}, "--window: must be finite"),
        ({"port": 70000}, "--port: must be in [0, 65535]"),
        ({"latency": -0.1}, "--latency: must be >= 0"),
        ({"fault_reset": 1.5}, "--fault-reset: must be a probability"),
        ({"fault_500": 0.6, "fault_hang": 0.6}, "--fault-*: the fault probabilities sum to 1.2"),
        ({"hang_s": 0}, "--hang-s: must be > 0"),
        ({"seed": True}, "--seed: must be an integer"),
    ],
)
def test_bad_options_name_their_flag(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        ServeOptions(**changes)
    assert str(info.value).startswith(message)


def test_flags_parse_into_options() -> None:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    assert options_from_args(parser.parse_args([])) == ServeOptions()
    argv = "--port 0 --rpm 50 --tpm 900 --max-concurrency 3 --window 2.5 --fault-500 0.1 --seed 4"
    argv += " --limit-kind bucket --reset-means oldest"
    options = options_from_args(parser.parse_args(argv.split()))
    assert options == ServeOptions(
        port=0,
        rpm=50,
        tpm=900,
        max_concurrency=3,
        window=2.5,
        fault_500=0.1,
        seed=4,
        limit_kind="bucket",
        reset_means="oldest",
    )
    with pytest.raises(ConfigError, match="--limit-kind: must be one of sliding, fixed, bucket"):
        ServeOptions(limit_kind="leaky")
    with pytest.raises(ConfigError, match="--rpm: must be > 0"):
        options_from_args(parser.parse_args(["--rpm", "0"]))


def test_duration_formats() -> None:
    assert [go_duration(s) for s in (0.12, 0.0004, 1, 17.28, 360, 3723.5)] == [
        "120ms",
        "1ms",
        "1s",
        "17.28s",
        "6m0s",
        "1h2m3.5s",
    ]
    assert [proto_duration(s) for s in (3, 0.12, 1.5)] == ["3s", "0.120s", "1.500s"]


# --- the server ---------------------------------------------------------------------------------


def _options(**changes: Any) -> ServeOptions:
    return ServeOptions(port=0, **changes)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def _chat(prompt: str, **fields: Any) -> dict[str, Any]:
    return {"model": "gpt-sim", "messages": [{"role": "user", "content": prompt}], **fields}


async def _post(
    http: aiohttp.ClientSession, url: str, body: Any
) -> tuple[int, Any, aiohttp.ClientResponse]:
    async with http.post(url, data=orjson.dumps(body)) as resp:
        raw = await resp.read()
        return resp.status, orjson.loads(raw) if raw else None, resp


async def _eventually(check: Callable[[], bool]) -> None:
    """Waits (up to 5 s) for `check()` to hold: the server's state seen through its counters."""
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


async def _stats(http: aiohttp.ClientSession, server: SimServer) -> dict[str, Any]:
    async with http.get(f"{server.url}/stats") as resp:
        assert resp.status == 200
        stats: dict[str, Any] = await resp.json()
        return stats


async def test_known_prompts_get_the_simulators_answer(
    gym: ReasoningGymSuite, http: aiohttp.ClientSession
) -> None:
    items = gym.items()
    options = _options(seed=3, sim_ability=0.5, sim_thinking=0.25)
    sim = SimProvider(gym, items, SimConfig(seed=3, ability=0.5, thinking_ratio=0.25))
    rng = random.Random(5)
    async with running_server(options, gym, items) as server:
        assert server.adaptive
        for round_ in range(6):
            prompt, target, demos = _adaptive(gym, items, rng)
            if round_ == 0:
                prompt, demos = gym.warmup_prompt(target), []
            status, body, _ = await _post(
                http, f"{server.base_url_openai}/chat/completions", _chat(prompt, n=2, seed=7)
            )
            assert status == 200
            expected = await sim.generate(
                Request((Message("user", prompt),), Sampling(seed=7), 2, target.id, tuple(demos))
            )
            assert [c["message"]["content"] for c in body["choices"]] == list(expected.texts)
            u = expected.usage
            assert body["usage"]["prompt_tokens"] == u.input_tokens
            assert body["usage"]["completion_tokens"] == u.output_tokens + u.thinking_tokens
            assert body["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
        stats = await _stats(http, server)
        assert stats["prompts"] == {"warmup": 1, "adaptive": 5, "unknown": 0}


async def test_unknown_prompts_get_deterministic_boxed_prose(http: aiohttp.ClientSession) -> None:
    prompt = "Summarise the plot of a novel nobody has written."
    async with running_server(_options(seed=1)) as server:
        url = f"{server.base_url_openai}/chat/completions"
        first = (await _post(http, url, _chat(prompt, seed=2)))[1]
        again = (await _post(http, url, _chat(prompt, seed=2)))[1]
        other = (await _post(http, url, _chat(prompt, seed=3)))[1]
        short = (await _post(http, url, _chat(prompt, max_tokens=5)))[1]
    text = first["choices"][0]["message"]["content"]
    assert text == again["choices"][0]["message"]["content"]
    assert text != other["choices"][0]["message"]["content"]
    assert extract_last_boxed(text) is not None
    assert first["usage"]["prompt_tokens"] == math.ceil(len(prompt) / 4)
    assert first["usage"]["completion_tokens"] > 50
    assert short["choices"][0]["finish_reason"] == "length"
    assert short["usage"]["completion_tokens"] == 5


async def test_official_openai_client(gym: ReasoningGymSuite) -> None:
    import openai

    items = gym.items()
    async with running_server(_options(rpm=1000, tpm=10**7), gym, items) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url_openai, api_key="x", max_retries=0)
        async with client:
            raw = await client.chat.completions.with_raw_response.create(
                model="gpt-5-mini",
                messages=[{"role": "user", "content": gym.warmup_prompt(items[0])}],
                n=3,
                seed=1,
                temperature=0.7,
                max_completion_tokens=4000,
                reasoning_effort="low",
            )
            assert int(raw.headers["x-ratelimit-limit-requests"]) == 1000
            assert int(raw.headers["x-ratelimit-remaining-requests"]) == 999
            completion = raw.parse()
            assert completion.object == "chat.completion"
            assert completion.system_fingerprint == SIM_FINGERPRINT
            assert len(completion.choices) == 3
            assert completion.choices[0].finish_reason == "stop"
            assert completion.usage is not None
            assert completion.usage.prompt_tokens > 0
            verdict = gym.judge(items[0], completion.choices[0].message.content or "")
            assert isinstance(verdict, Verdict)
            texts = ["a question about geometry", "letters in a word"]
            default = await client.embeddings.create(model="text-embedding-3-small", input=texts)
            floats = await client.embeddings.create(
                model="text-embedding-3-small", input=texts[0], encoding_format="float"
            )
        expected = LexicalEmbedder().embed(texts)
        assert [d.index for d in default.data] == [0, 1]
        np.testing.assert_allclose(np.array([d.embedding for d in default.data]), expected)
        np.testing.assert_allclose(floats.data[0].embedding, expected[0], rtol=1e-6)
        assert default.usage.prompt_tokens == sum(math.ceil(len(t) / 4) for t in texts)


# google-genai subclasses aiohttp.ClientSession, which aiohttp 3.14 discourages with a warning.
@pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")
async def test_official_google_client(gym: ReasoningGymSuite, http: aiohttp.ClientSession) -> None:
    from google import genai
    from google.genai import types

    items = gym.items()
    async with running_server(_options(sim_thinking=0.5), gym, items) as server:
        client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=server.url)).aio
        config = types.GenerateContentConfig(
            candidate_count=2,
            seed=4,
            temperature=0.2,
            max_output_tokens=3000,
            thinking_config=types.ThinkingConfig(thinking_budget=10_000),
        )
        response = await client.models.generate_content(
            model="gemini-2.5-flash-lite", contents=gym.warmup_prompt(items[1]), config=config
        )
        assert response.candidates is not None
        assert len(response.candidates) == 2
        assert response.candidates[0].finish_reason == types.FinishReason.STOP
        # The model asked for, marked: a report can tell the simulator from Google.
        assert response.model_version == "gemini-2.5-flash-lite" + SIM_MODEL_SUFFIX
        usage = response.usage_metadata
        assert usage is not None
        assert usage.prompt_token_count
        assert usage.thoughts_token_count
        assert usage.total_token_count == (
            usage.prompt_token_count
            + (usage.candidates_token_count or 0)
            + usage.thoughts_token_count
        )
        embedded = await client.models.embed_content(
            model="gemini-embedding-001",
            contents=[types.Content(parts=[types.Part(text=t)]) for t in ("one", "another text")],
        )
        assert embedded.embeddings is not None
        assert len(embedded.embeddings) == 2
        values = embedded.embeddings[1].values
        np.testing.assert_allclose(values or [], LexicalEmbedder().embed(["another text"])[0])
        await client.aclose()
        # The v1beta prefix answers too.
        status, body, _ = await _post(
            http,
            f"{server.url}/v1beta/models/gemini-2.0-flash:generateContent",
            {"contents": [{"role": "user", "parts": [{"text": gym.warmup_prompt(items[2])}]}]},
        )
        assert status == 200
        assert body["candidates"][0]["content"]["role"] == "model"
        assert "thoughtsTokenCount" in body["usageMetadata"]
        stats = await _stats(http, server)
        assert stats["prompts"]["warmup"] == 2
        assert stats["by_route"] == {"gemini.generate": 2, "gemini.embed": 1}


async def test_rpm_limit_answers_429_with_headers_and_recovers(
    http: aiohttp.ClientSession,
) -> None:
    # 300 per minute over a 0.4 s window: 2 per window; headers speak per minute.
    async with running_server(_options(rpm=300, window=0.4)) as server:
        url = f"{server.base_url_openai}/chat/completions"
        for remaining in ("150", "0"):
            status, _, resp = await _post(http, url, _chat("hello"))
            assert status == 200
            assert resp.headers["x-ratelimit-remaining-requests"] == remaining
        status, body, resp = await _post(http, url, _chat("hello"))
        assert status == 429
        assert body["error"]["type"] == "requests"
        assert body["error"]["code"] == "rate_limit_exceeded"
        assert resp.headers["Retry-After"] == "1"
        wait_ms = int(resp.headers["retry-after-ms"])
        assert 0 < wait_ms <= 400
        assert resp.headers["x-ratelimit-limit-requests"] == "300"
        assert resp.headers["x-ratelimit-remaining-requests"] == "0"
        assert resp.headers["x-ratelimit-reset-requests"].endswith("ms")
        gemini = f"{server.url}/v1beta/models/gemini-2.5-pro:generateContent"
        status, body, _ = await _post(http, gemini, {"contents": [{"parts": [{"text": "hi"}]}]})
        assert status == 429
        assert body["error"]["status"] == "RESOURCE_EXHAUSTED"
        (detail,) = body["error"]["details"]
        assert detail["@type"] == "type.googleapis.com/google.rpc.RetryInfo"
        assert detail["retryDelay"].endswith("s")
        await asyncio.sleep(wait_ms / 1000 + 0.05)
        assert (await _post(http, url, _chat("hello")))[0] == 200
        stats = await _stats(http, server)
        assert stats["rate_limited_by"]["requests"] == 2
        assert stats["by_status"] == {"200": 3, "429": 2}


def test_window_full_is_the_newest_entry_leaving_room_the_oldest() -> None:
    requests = Window(limit=2, span=10.0)
    assert (requests.full(0.0), requests.room(0.0)) == (0.0, 0.0)
    requests.add(0.0, 1)
    requests.add(4.0, 1)
    # Full allowance once the request at 4 leaves; room for one more once the one at 0 does.
    assert (requests.full(5.0), requests.room(5.0)) == (9.0, 5.0)
    tokens = Window(limit=100, span=10.0)
    for at, amount in ((0.0, 20), (2.0, 30), (4.0, 90)):
        tokens.add(at, amount)
    # 140 held, 100 allowed: the entries at 0 and 2 must both leave before it holds fewer.
    assert (tokens.full(5.0), tokens.room(5.0)) == (9.0, 7.0)
    tokens.prune(12.5)
    assert (tokens.total, tokens.room(12.5), tokens.full(12.5)) == (90, 0.0, 1.5)


def test_a_sliding_windows_reset_may_mean_its_oldest_entry_leaving() -> None:
    requests = Window(limit=2, span=10.0, oldest=True)
    assert requests.reset(0.0) == 0.0
    requests.add(0.0, 1)
    requests.add(4.0, 1)
    assert (requests.reset(5.0), requests.full(5.0), requests.left(5.0)) == (5.0, 9.0, 0)
    assert (requests.reset(11.0), requests.left(11.0)) == (3.0, 1)


def test_a_fixed_window_restarts_every_span_and_resets_at_the_restart() -> None:
    window = FixedWindow(limit=2, span=10.0, start=3.0)  # restarts at 13, 23, 33 ...
    window.add(4.0, 1)
    window.add(12.0, 1)
    assert (window.left(12.5), window.reset(12.5), window.room(12.5)) == (0, 0.5, 0.5)
    assert (window.left(13.0), window.reset(13.0)) == (2, 10.0)
    window.add(13.0, 1)
    assert (window.left(40.0), window.reset(40.0)) == (2, 3.0)  # two restarts passed


def test_a_bucket_refills_continuously_and_resets_when_full_or_one_unit_is_back() -> None:
    newest, oldest = Bucket(limit=10, span=5.0), Bucket(limit=10, span=5.0, oldest=True)
    for bucket in (newest, oldest):  # 2 units a second
        assert (bucket.left(0.0), bucket.reset(0.0)) == (10, 0.0)
        for _ in range(10):
            bucket.add(1.0, 1)
        assert (bucket.left(1.0), bucket.room(1.0)) == (0, 0.5)
        assert bucket.left(2.0) == 2.0
    assert (newest.reset(2.0), oldest.reset(2.0)) == (4.0, 0.5)
    assert (newest.reset(5.75), oldest.reset(5.75)) == pytest.approx((0.25, 0.25))
    assert newest.left(100.0) == 10  # never above its size


async def test_each_limit_kind_is_served_with_its_headers(http: aiohttp.ClientSession) -> None:
    # 12 per minute over a 10 s window: 2 per window, on a clock the test moves; a fixed window
    # restarts at 100, 110...; a bucket refills 0.2 a second.
    for kind, means, resets in (
        ("sliding", "oldest", (10.0, 9.5)),
        ("fixed", "newest", (9.5, 9.0)),
        ("bucket", "newest", (5.0, 9.5)),
        ("bucket", "oldest", (5.0, 5.0)),
    ):
        options = _options(rpm=12, window=10.0, limit_kind=kind, reset_means=means)
        clock = [100.5]
        async with running_server(options) as server:
            server._core.gate._now = lambda: clock[0]  # noqa: B023 (used inside this turn)
            server._core.gate.rpm = make_limit(options, 12, 90.0)
            url = f"{server.base_url_openai}/chat/completions"
            seen = []
            for at in (100.5, 101.0):
                clock[0] = at
                status, _, resp = await _post(http, url, _chat(f"hello {at}"))
                assert status == 200
                seen.append(parse_duration(resp.headers["x-ratelimit-reset-requests"]))
            assert tuple(seen) == resets, kind
            assert resp.headers["x-ratelimit-remaining-requests"] == "0"
            clock[0] = 101.5
            assert (await _post(http, url, _chat("refused")))[0] == 429


async def test_a_429_says_when_there_is_room_and_the_headers_when_the_window_is_full(
    http: aiohttp.ClientSession,
) -> None:
    # 12 per minute over a 10 s window: 2 per window, on a clock the test moves.
    async with running_server(_options(rpm=12, window=10.0)) as server:
        clock = [100.0]
        server._core.gate._now = lambda: clock[0]
        url = f"{server.base_url_openai}/chat/completions"
        for at in (100.0, 104.0):
            clock[0] = at
            assert (await _post(http, url, _chat("hello")))[0] == 200
        clock[0] = 105.0
        status, body, resp = await _post(http, url, _chat("hello"))
        assert status == 429
        assert (resp.headers["Retry-After"], resp.headers["retry-after-ms"]) == ("5", "5000")
        assert "Please try again in 5s." in body["error"]["message"]
        assert parse_duration(resp.headers["x-ratelimit-reset-requests"]) == 9.0
        gemini = f"{server.url}/v1beta/models/gemini-2.5-pro:generateContent"
        status, body, _ = await _post(http, gemini, {"contents": [{"parts": [{"text": "hi"}]}]})
        assert status == 429
        assert body["error"]["details"][0]["retryDelay"] == "5s"
        clock[0] = 110.0  # the oldest request has left: room for one
        status, _, resp = await _post(http, url, _chat("hello"))
        assert status == 200
        assert parse_duration(resp.headers["x-ratelimit-reset-requests"]) == 10.0


async def test_tpm_limit_counts_tokens_when_answers_are_sent(http: aiohttp.ClientSession) -> None:
    async with running_server(_options(tpm=15_000, window=0.4)) as server:  # 100 per window
        url = f"{server.base_url_openai}/chat/completions"
        status, body, resp = await _post(http, url, _chat("hello"))
        assert status == 200  # an empty window admits a request whatever its size
        assert body["usage"]["total_tokens"] > 100
        assert resp.headers["x-ratelimit-remaining-tokens"] == "0"
        status, body, resp = await _post(http, url, _chat("hello"))
        assert status == 429
        assert body["error"]["type"] == "tokens"
        assert int(resp.headers["retry-after-ms"]) <= 400
        await asyncio.sleep(int(resp.headers["retry-after-ms"]) / 1000 + 0.05)
        assert (await _post(http, url, _chat("hello")))[0] == 200


async def test_concurrency_limit(http: aiohttp.ClientSession) -> None:
    options = _options(max_concurrency=1, latency=1.0, latency_sigma=0.0)
    async with running_server(options) as server:
        url = f"{server.base_url_openai}/chat/completions"
        first = asyncio.create_task(_post(http, url, _chat("slow")))
        await _eventually(lambda: server.stats()["in_flight"] == 1)
        status, body, resp = await _post(http, url, _chat("second"))
        assert status == 429
        assert "concurrent" in body["error"]["message"]
        assert "Retry-After" in resp.headers
        assert (await first)[0] == 200
        stats = server.stats()
        assert (stats["max_in_flight"], stats["in_flight"]) == (1, 0)
        assert stats["rate_limited_by"]["concurrency"] == 1


# A hang and a stall hold the connection: test_serve_stream.py and the test below see them.
@pytest.mark.parametrize("kind", [k for k in FAULTS if k not in ("hang", "stall")])
async def test_each_fault_is_what_a_client_sees(kind: str, http: aiohttp.ClientSession) -> None:
    async with running_server(_options(**{f"fault_{kind}": 1.0})) as server:
        url = f"{server.base_url_openai}/chat/completions"
        async with http.post(url, data=orjson.dumps(_chat("hello"))) as resp:
            if kind == "reset":
                assert resp.status == 200
                with pytest.raises(aiohttp.ClientPayloadError):
                    await resp.read()
                raw = b""
            else:
                raw = await resp.read()
        if kind in ("500", "503"):
            assert resp.status == int(kind)
            assert orjson.loads(raw)["error"]["type"] == "server_error"
        elif kind == "truncated":
            assert resp.status == 200
            with pytest.raises(orjson.JSONDecodeError):
                orjson.loads(raw)
        elif kind == "empty":
            body = orjson.loads(raw)
            assert resp.status == 200
            assert body["choices"] == []
        gemini = f"{server.url}/v1/models/gemini-2.5-flash:generateContent"
        async with http.post(gemini, data=b'{"contents": [{"parts": [{"text": "hi"}]}]}') as resp:
            if kind == "empty":
                assert (await resp.json())["candidates"] == []
            elif kind in ("500", "503"):
                body = await resp.json()
                assert body["error"]["status"] == {"500": "INTERNAL", "503": "UNAVAILABLE"}[kind]
        stats = await _stats(http, server)
        assert stats["by_fault"][kind] == 2
        assert stats["ok"] == 0
        assert stats["tokens"] == {"input": 0, "output": 0, "thinking": 0}
        if kind in ("reset", "truncated", "empty"):
            assert stats["faulty_tokens"]["input"] > 0


async def test_a_hang_is_abandoned_without_wedging_the_server(
    http: aiohttp.ClientSession,
) -> None:
    async with running_server(_options(fault_hang=1.0)) as server:
        url = f"{server.base_url_openai}/chat/completions"
        with pytest.raises(TimeoutError):
            async with http.post(
                url, data=orjson.dumps(_chat("hi")), timeout=aiohttp.ClientTimeout(total=0.3)
            ) as resp:
                await resp.read()
        # The handler is cancelled once the connection is gone.
        await _eventually(lambda: server.stats()["in_flight"] == 0)
        stats = await _stats(http, server)
        assert stats["by_fault"]["hang"] == 1
        assert stats["first_request_at"] <= stats["last_hang_at"] <= time.time()
        # Another one still hangs when the server shuts down: it is dropped at once.
        pending = asyncio.create_task(_post(http, url, _chat("again")))
        await _eventually(lambda: server.stats()["in_flight"] == 1)
    with pytest.raises(aiohttp.ClientError):
        await pending


async def test_a_hang_ends_after_hang_s_with_a_dropped_connection(
    http: aiohttp.ClientSession,
) -> None:
    async with running_server(_options(fault_hang=1.0, hang_s=0.2)) as server:
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await _post(http, f"{server.base_url_openai}/chat/completions", _chat("hi"))
        await _eventually(lambda: server.stats()["in_flight"] == 0)
        assert server.stats()["by_status"] == {}


async def test_faults_follow_the_seed(http: aiohttp.ClientSession) -> None:
    async def statuses(seed: int) -> list[int]:
        options = _options(fault_500=0.3, fault_503=0.3, seed=seed)
        async with running_server(options) as server:
            url = f"{server.base_url_openai}/chat/completions"
            return [(await _post(http, url, _chat("x")))[0] for _ in range(24)]

    first = await statuses(1)
    assert first == await statuses(1)
    assert first != await statuses(2)
    assert set(first) == {200, 500, 503}


async def test_stats_count_what_clients_could_count(
    gym: ReasoningGymSuite, http: aiohttp.ClientSession
) -> None:
    items = gym.items()
    async with running_server(_options(sim_thinking=0.5), gym, items) as server:
        url = f"{server.base_url_openai}/chat/completions"
        totals = [0, 0, 0]
        for item, n in zip(items[:3], (1, 2, 3), strict=True):
            status, body, _ = await _post(http, url, _chat(gym.warmup_prompt(item), n=n))
            assert status == 200
            u = body["usage"]
            thinking = u["completion_tokens_details"]["reasoning_tokens"]
            totals[0] += u["prompt_tokens"]
            totals[1] += u["completion_tokens"] - thinking
            totals[2] += thinking
        await _post(http, url, {"messages": []})
        stats = await _stats(http, server)
        assert stats["tokens"] == dict(zip(("input", "output", "thinking"), totals, strict=True))
        assert stats["requests"] == 4
        assert stats["ok"] == 3
        assert stats["answered_again"] == 0
        status, _, _ = await _post(http, url, _chat(gym.warmup_prompt(items[0])))
        assert status == 200
        assert (await _stats(http, server))["answered_again"] == 1  # a prompt answered twice
        assert stats["by_status"] == {"200": 3, "400": 1}
        assert stats["by_route"] == {"openai.generate": 4}
        assert stats["max_in_flight"] == 1
        assert stats["in_flight"] == 0
        async with http.post(f"{server.url}/stats/reset") as resp:
            assert resp.status == 200
        stats = await _stats(http, server)
        assert stats["requests"] == stats["ok"] == stats["max_in_flight"] == 0
        assert stats["tokens"] == {"input": 0, "output": 0, "thinking": 0}
        assert stats["by_status"] == {}
        assert stats["by_route"] == {}
        status, _, _ = await _post(http, f"{server.base_url_openai}/embeddings", {"input": "xy"})
        assert status == 200
        stats = await _stats(http, server)
        assert stats["requests"] == 1
        assert stats["embedding_tokens"] == 1
        assert stats["by_route"] == {"openai.embed": 1}


async def test_bad_routes_methods_and_bodies(http: aiohttp.ClientSession) -> None:
    async with running_server(_options()) as server:
        for path in ("/v1/nope", "/v2/models/x:generateContent", "/v1beta/models/x:explode"):
            async with http.post(server.url + path, data=b"{}") as resp:
                assert resp.status == 404
                assert "error" in await resp.json()
        async with http.get(f"{server.base_url_openai}/chat/completions") as resp:
            assert resp.status == 405
        url = f"{server.base_url_openai}/chat/completions"
        async with http.post(url, data=b'{"model": "m", "messages": [') as resp:
            assert resp.status == 400
            error = (await resp.json())["error"]
            assert error["type"] == "invalid_request_error"
            assert "not valid JSON" in error["message"]
        for body in (_chat("x", n=0), _chat("x", temperature="hot"), {"model": "m"}, [1]):
            status, answer, _ = await _post(http, url, body)
            assert status == 400
            assert answer["error"]["message"]
        gemini = f"{server.url}/v1beta/models/gemini-2.5-flash:generateContent"
        status, answer, _ = await _post(http, gemini, {"contents": "hi"})
        assert status == 400
        assert answer["error"]["status"] == "INVALID_ARGUMENT"
        status, answer, _ = await _post(
            http, f"{server.base_url_openai}/embeddings", {"input": "x", "dimensions": 9999}
        )
        assert status == 400


async def test_embeddings_honour_dimensions_and_base64(http: aiohttp.ClientSession) -> None:
    async with running_server(_options()) as server:
        url = f"{server.base_url_openai}/embeddings"
        body = {
            "model": "m",
            "input": ["alpha beta gamma delta epsilon"],
            "dimensions": 16,
            "encoding_format": "base64",
        }
        status, answer, _ = await _post(http, url, body)
    assert status == 200
    vector = np.frombuffer(base64.b64decode(answer["data"][0]["embedding"]), dtype="<f4")
    assert vector.shape == (16,)
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)


async def test_serve_forever_until_cancelled(http: aiohttp.ClientSession) -> None:
    ready: asyncio.Future[SimServer] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve_forever(_options(), None, None, on_ready=ready.set_result))
    server = await ready
    assert server.base_url_openai == f"http://127.0.0.1:{server.port}/v1"
    assert (await _post(http, f"{server.base_url_openai}/chat/completions", _chat("hi")))[0] == 200
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(aiohttp.ClientConnectionError):
        await _post(http, f"{server.base_url_openai}/chat/completions", _chat("hi"))
