"""`ttc serve`'s OpenAI Batch API, checked with the official `openai` client: files, batches,
the sim's answers equal to the synchronous route's, failures and expiry, and the counters kept
apart from the synchronous routes'."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import openai
import orjson
import pytest

from ttc.adapters.sim import ServeOptions, running_server
from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite
from ttc.engine.contract._errors import ConfigError


@pytest.fixture(scope="module")
def gym() -> ReasoningGymSuite:
    return ReasoningGymSuite(per_task=6)


def _lines(gym: ReasoningGymSuite, n: int) -> list[dict[str, Any]]:
    items = gym.items()[:n]
    return [
        {
            "custom_id": f"r1-{item.id}-0",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": "sim",
                "messages": [{"role": "user", "content": gym.warmup_prompt(item)}],
                "seed": 100 + i,
            },
        }
        for i, item in enumerate(items)
    ]


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


async def _until_final(client: openai.AsyncOpenAI, batch_id: str) -> Any:
    for _ in range(200):
        batch = await client.batches.retrieve(batch_id)
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return batch
        await asyncio.sleep(0.05)
    raise AssertionError("the batch never ended")


async def test_official_client_batch_round_trip(gym: ReasoningGymSuite) -> None:
    lines = _lines(gym, 6)
    options = ServeOptions(port=0, batch_delay=0.4)
    async with running_server(options, gym) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url_openai, api_key="x", max_retries=0)
        async with client:
            uploaded = await client.files.create(
                file=("in.jsonl", io.BytesIO(_jsonl(lines))), purpose="batch"
            )
            assert uploaded.purpose == "batch"
            assert uploaded.bytes == len(_jsonl(lines))
            assert (await client.files.retrieve(uploaded.id)).filename == "in.jsonl"
            batch = await client.batches.create(
                input_file_id=uploaded.id,
                endpoint="/v1/chat/completions",
                completion_window="24h",
                metadata={"ttc": "tag-1"},
            )
            assert batch.status == "validating"
            assert batch.request_counts is not None
            assert batch.request_counts.total == 6
            done = await _until_final(client, batch.id)
            assert done.status == "completed"
            assert done.request_counts.completed == 6
            assert done.request_counts.failed == 0
            assert done.error_file_id is None
            assert done.output_file_id is not None
            output = (await client.files.content(done.output_file_id)).read()
            results = [orjson.loads(x) for x in output.splitlines()]
            listed = [b async for b in client.batches.list(limit=10)]
            # The same body, sent synchronously, gets the same answer.
            sync = await client.chat.completions.create(**lines[2]["body"])
        stats = server.stats()
    assert [r["custom_id"] for r in results] == [line["custom_id"] for line in lines]
    assert all(r["response"]["status_code"] == 200 and r["error"] is None for r in results)
    third = results[2]["response"]["body"]
    assert third["choices"][0]["message"]["content"] == sync.choices[0].message.content
    assert [b.id for b in listed] == [batch.id]
    assert listed[0].metadata == {"ttc": "tag-1"}
    # The batch routes are counted apart: the one synchronous call is the only generate.
    assert stats["by_route"] == {"openai.generate": 1}
    assert stats["batch"]["by_route"]["openai.batches.create"] == 1
    assert stats["batch"]["by_route"]["openai.files.upload"] == 1
    assert stats["batch"]["requests_answered"] == 6
    assert stats["batch"]["tokens"]["input"] == sum(
        r["response"]["body"]["usage"]["prompt_tokens"] for r in results
    )


async def test_failures_and_expiry_go_to_the_error_file(gym: ReasoningGymSuite) -> None:
    lines = _lines(gym, 20)
    options = ServeOptions(port=0, batch_delay=0.3, batch_fail=0.3, batch_expire=1.0, seed=3)
    async with running_server(options, gym) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url_openai, api_key="x", max_retries=0)
        async with client:
            uploaded = await client.files.create(
                file=("in.jsonl", io.BytesIO(_jsonl(lines))), purpose="batch"
            )
            batch = await client.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            done = await _until_final(client, batch.id)
            assert done.status == "expired"
            assert done.error_file_id is not None
            errors = [
                orjson.loads(x)
                for x in (await client.files.content(done.error_file_id)).read().splitlines()
            ]
            out = b""
            if done.output_file_id is not None:
                out = (await client.files.content(done.output_file_id)).read()
    ok = [orjson.loads(x) for x in out.splitlines()]
    codes = [e["error"]["code"] if e["error"] else e["response"]["status_code"] for e in errors]
    assert "batch_expired" in codes
    assert 500 in codes
    assert len(ok) + len(errors) == 20
    assert done.request_counts.completed == len(ok)
    assert done.request_counts.failed == len(errors)
    assert {r["custom_id"] for r in ok} | {e["custom_id"] for e in errors} == {
        line["custom_id"] for line in lines
    }
    stats = server.stats()
    assert stats["batch"]["requests_failed"] + stats["batch"]["requests_undone"] == len(errors)


async def test_bad_input_fails_the_batch_and_cancel_keeps_work(gym: ReasoningGymSuite) -> None:
    lines = _lines(gym, 3)
    lines[2]["custom_id"] = lines[0]["custom_id"]
    async with running_server(ServeOptions(port=0, batch_delay=30), gym) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url_openai, api_key="x", max_retries=0)
        async with client:
            bad = await client.files.create(
                file=("bad.jsonl", io.BytesIO(_jsonl(lines))), purpose="batch"
            )
            batch = await client.batches.create(
                input_file_id=bad.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            assert batch.status == "failed"
            assert batch.errors is not None
            assert batch.errors.data is not None
            assert batch.errors.data[0].code == "duplicate_custom_id"
            assert batch.errors.data[0].line == 3
            good = await client.files.create(
                file=("ok.jsonl", io.BytesIO(_jsonl(lines[:2]))), purpose="batch"
            )
            slow = await client.batches.create(
                input_file_id=good.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            cancelled = await client.batches.cancel(slow.id)
            assert cancelled.status == "cancelled"
            assert cancelled.request_counts is not None
            assert cancelled.request_counts.failed == 2  # none was done yet
            with pytest.raises(openai.NotFoundError):
                await client.batches.retrieve("batch_nope")
        assert server.stats()["batch"]["batches"] == 2


def test_batch_flags_are_checked() -> None:
    with pytest.raises(ConfigError, match="--batch-fail"):
        ServeOptions(batch_fail=1.5)
    with pytest.raises(ConfigError, match="--batch-delay"):
        ServeOptions(batch_delay=-1)


@pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")
async def test_official_google_genai_client_batches(gym: ReasoningGymSuite) -> None:
    from google import genai
    from google.genai import types

    items = gym.items()[:5]
    async with running_server(ServeOptions(port=0, batch_delay=0.3), gym) as server:
        options = types.HttpOptions(base_url=server.url, api_version="v1beta")
        client = genai.Client(api_key="x", http_options=options)
        requests = [
            types.InlinedRequest(
                contents=gym.warmup_prompt(item),
                config=types.GenerateContentConfig(seed=7 + i),
                metadata={"key": item.id},
            )
            for i, item in enumerate(items)
        ]
        job = await client.aio.batches.create(
            model="sim", src=requests, config={"display_name": "tag-7"}
        )
        assert job.name is not None
        assert job.state == types.JobState.JOB_STATE_PENDING
        for _ in range(100):
            job = await client.aio.batches.get(name=job.name)
            if job.done:
                break
            await asyncio.sleep(0.05)
        assert job.state == types.JobState.JOB_STATE_SUCCEEDED
        assert job.display_name == "tag-7"
        assert job.dest is not None
        answers = job.dest.inlined_responses or []
        sync = await client.aio.models.generate_content(
            model="sim",
            contents=gym.warmup_prompt(items[1]),
            config=types.GenerateContentConfig(seed=8),
        )
        listed = [j.name async for j in await client.aio.batches.list(config={"page_size": 10})]
        other = await client.aio.batches.create(model="sim", src=requests[:2])
        assert other.name is not None
        await client.aio.batches.cancel(name=other.name)
        cancelled = await client.aio.batches.get(name=other.name)
        stats = server.stats()
    assert [(a.metadata or {}).get("key") for a in answers] == [item.id for item in items]
    assert all(a.response is not None and a.error is None for a in answers)
    assert answers[1].response is not None
    assert answers[1].response.text == sync.text  # the synchronous route's answer
    assert listed == [job.name]
    assert cancelled.state == types.JobState.JOB_STATE_CANCELLED
    assert stats["by_route"] == {"gemini.generate": 1}
    assert stats["batch"]["by_route"]["gemini.batches.create"] == 2


@pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")
# google-genai sends each 8 MB chunk of an upload as raw bytes, which aiohttp warns about.
@pytest.mark.filterwarnings("ignore:Sending a large body directly:ResourceWarning")
async def test_official_google_genai_client_batches_of_a_file(gym: ReasoningGymSuite) -> None:
    from google import genai
    from google.genai import types

    items = gym.items()[:4]
    lines = [
        {"key": f"k-{item.id}",
         "request": {"contents": [{"role": "user", "parts": [{"text": gym.warmup_prompt(item)}]}],
                     "generationConfig": {"seed": 7 + i}}}
        for i, item in enumerate(items)
    ]  # fmt: skip
    async with running_server(ServeOptions(port=0, batch_delay=0.3), gym) as server:
        options = types.HttpOptions(base_url=server.url, api_version="v1beta")
        client = genai.Client(api_key="x", http_options=options).aio
        config = types.UploadFileConfig(mime_type="jsonl", display_name="tag-file")
        uploaded = await client.files.upload(file=io.BytesIO(_jsonl(lines)), config=config)
        assert uploaded.name is not None
        assert uploaded.name.startswith("files/")
        assert uploaded.size_bytes == len(_jsonl(lines))
        job = await client.batches.create(model="sim", src=uploaded.name,
                                          config={"display_name": "tag-f"})  # fmt: skip
        assert job.name is not None
        for _ in range(100):
            job = await client.batches.get(name=job.name)
            if job.done:
                break
            await asyncio.sleep(0.05)
        assert job.state == types.JobState.JOB_STATE_SUCCEEDED
        assert job.dest is not None
        assert job.dest.file_name is not None
        assert job.dest.inlined_responses is None
        raw = await client.files.download(file=job.dest.file_name)
        sync = await client.models.generate_content(
            model="sim", contents=gym.warmup_prompt(items[2]),
            config=types.GenerateContentConfig(seed=9),
        )  # fmt: skip
        # A file over the client's 8 MB chunk goes up in several chunks, and arrives whole.
        big = b"\n" * (9 * 1024 * 1024) + _jsonl(lines[:1])
        chunked = await client.files.upload(file=io.BytesIO(big), config=config)
        with pytest.raises(genai.errors.ClientError):
            await client.batches.create(model="sim", src="files/nope")
        stats = server.stats()
    results = [orjson.loads(x) for x in raw.splitlines()]
    assert [r["key"] for r in results] == [line["key"] for line in lines]
    third = types.GenerateContentResponse.model_validate(results[2]["response"])
    assert third.text == sync.text  # the synchronous route's answer to the same request
    assert chunked.size_bytes == len(big)
    assert stats["batch"]["by_route"]["gemini.files.upload"] == 2 + 3  # two starts, three chunks
    assert stats["batch"]["by_route"]["gemini.files.download"] == 1
    assert stats["by_route"] == {"gemini.generate": 1}


async def test_an_openai_batch_file_over_a_megabyte_is_taken_whole(gym: ReasoningGymSuite) -> None:
    big = _jsonl(_lines(gym, 2)) + b"\n" * (3 * 1024 * 1024)  # past aiohttp's 1 MB default
    async with running_server(ServeOptions(port=0), gym) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url_openai, api_key="x", max_retries=0)
        async with client:
            uploaded = await client.files.create(file=("big.jsonl", big), purpose="batch")
            back = (await client.files.content(uploaded.id)).read()
    assert uploaded.bytes == len(big)
    assert back == big
