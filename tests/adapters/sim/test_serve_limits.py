"""`ttc serve` as a server others may call: every body it reads is capped (--max-body-mb: 413,
refused before it is held whole), and `POST /stats/reset` zeroes the counters without breaking
a route (the Batch API's polls went on failing with a 500 after it)."""

from __future__ import annotations

import asyncio
import io

import aiohttp
import openai
import orjson
import pytest

from ttc.adapters.sim import ServeOptions, running_server
from ttc.engine.contract._errors import ConfigError

CAP_MB = 0.01  # 10,000 bytes
BIG = b"x" * 20_000


def _line(cid: str, text: str = "hi") -> bytes:
    body = {"model": "sim", "messages": [{"role": "user", "content": text}]}
    line = {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body}
    return orjson.dumps(line) + b"\n"


async def test_bodies_over_the_cap_are_refused_with_413() -> None:
    async with (
        running_server(ServeOptions(port=0, max_body_mb=CAP_MB, batch_delay=0.1)) as server,
        aiohttp.ClientSession() as http,
    ):
        chat = f"{server.base_url_openai}/chat/completions"
        big_chat = {"model": "m", "messages": [{"role": "user", "content": BIG.decode()}]}
        async with http.post(chat, json=big_chat) as resp:
            assert resp.status == 413
            assert "10,000" in (await resp.json())["error"]["message"]

        # Chunked: no length declared, so the cap is checked as the bytes arrive.
        async def chunks() -> object:
            for _ in range(40):
                yield b" " * 1000

        async with http.post(chat, data=chunks()) as resp:
            assert resp.status == 413
        async with http.post(
            chat, json={"model": "m", "messages": [{"role": "user", "content": "a"}]}
        ) as resp:
            assert resp.status == 200  # the server goes on serving

        client = openai.AsyncOpenAI(base_url=server.base_url_openai, api_key="x", max_retries=0)
        async with client:
            with pytest.raises(openai.APIStatusError) as raised:
                await client.files.create(file=("in.jsonl", io.BytesIO(BIG)), purpose="batch")
            assert raised.value.status_code == 413
            small = await client.files.create(
                file=("in.jsonl", io.BytesIO(_line("a"))), purpose="batch"
            )
            assert small.bytes == len(_line("a"))

        # Gemini's resumable upload: the chunks together are capped, not each alone.
        upload = f"{server.url}/upload/v1beta/files"
        start = {"X-Goog-Upload-Command": "start", "X-Goog-Upload-Protocol": "resumable"}
        async with http.post(upload, json={"file": {"displayName": "f"}}, headers=start) as resp:
            assert resp.status == 200
            url = resp.headers["X-Goog-Upload-URL"]
        part = {"X-Goog-Upload-Command": "upload", "X-Goog-Upload-Offset": "0"}
        async with http.post(url, data=b"x" * 6000, headers=part) as resp:
            assert resp.status == 200
        last = {"X-Goog-Upload-Command": "upload, finalize", "X-Goog-Upload-Offset": "6000"}
        async with http.post(url, data=b"x" * 6000, headers=last) as resp:
            assert resp.status == 413
        declared = {**start, "X-Goog-Upload-Header-Content-Length": "20000"}
        async with http.post(upload, json={"file": {}}, headers=declared) as resp:
            assert resp.status == 413

        anthropic = f"{server.url}/v1/messages/batches"
        body = {"requests": [{"custom_id": "a", "params": {"x": BIG.decode()}}]}
        async with http.post(anthropic, json=body) as resp:
            assert resp.status == 413
            assert (await resp.json())["error"]["type"] == "request_too_large"
        assert server.stats()["batch"]["files"] == 1  # only the small upload was kept


def test_the_cap_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="--max-body-mb"):
        ServeOptions(max_body_mb=0)


async def test_stats_reset_keeps_the_batch_api_working() -> None:
    async with running_server(ServeOptions(port=0, batch_delay=0.3)) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url_openai, api_key="x", max_retries=0)
        async with client, aiohttp.ClientSession() as http:
            f = await client.files.create(
                file=("in.jsonl", io.BytesIO(_line("a") + _line("b"))), purpose="batch"
            )
            batch = await client.batches.create(
                input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            async with http.post(f"{server.url}/stats/reset") as resp:
                assert resp.status == 200
            for _ in range(400):
                batch = await client.batches.retrieve(batch.id)  # a 500 raised here before
                if batch.status == "completed":
                    break
                await asyncio.sleep(0.02)
            assert batch.status == "completed"
            assert batch.request_counts is not None
            assert batch.request_counts.completed == 2
            assert server.stats()["batch"]["prompts"]["unknown"] == 2
            server.reset_stats()
            assert server.stats()["batch"]["prompts"] == {"warmup": 0, "adaptive": 0, "unknown": 0}
