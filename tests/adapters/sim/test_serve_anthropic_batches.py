"""`ttc serve`'s Anthropic Message Batches with the official `anthropic` client unchanged, and
`AnthropicBatchAPI` (batch mode's adapter) against it: results, pagination, cancel, failures and
expiries, refusals, and a batch found by its tag. Simulated (the sim model behind the server)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import anthropic
import pytest

from ttc.adapters.providers import SIM_MODEL_SUFFIX, AnthropicBatchAPI, AnthropicProvider
from ttc.adapters.sim import ServeOptions, running_server
from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite
from ttc.engine import BadRequest, Message, Request, Sampling


@pytest.fixture(scope="module")
def gym() -> ReasoningGymSuite:
    return ReasoningGymSuite(per_task=4)


def _requests(gym: ReasoningGymSuite, n: int) -> list[Any]:
    items = gym.items()
    return [{"custom_id": f"q-{i}", "params": {
                "model": "claude-haiku-4-5", "max_tokens": 2000,
                "messages": [{"role": "user", "content": gym.warmup_prompt(items[i])}]}}
            for i in range(n)]  # fmt: skip


async def _ended(client: anthropic.AsyncAnthropic, batch_id: str) -> Any:
    while True:
        batch = await client.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended":
            return batch
        await asyncio.sleep(0.05)


async def test_official_client_message_batches(gym: ReasoningGymSuite) -> None:
    async with running_server(ServeOptions(port=0, batch_delay=0.3), gym) as server:
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="x", max_retries=0)
        async with client:
            created = await client.messages.batches.create(requests=_requests(gym, 6))
            assert created.processing_status == "in_progress"
            assert created.request_counts.processing == 6
            assert created.results_url is None
            batch = await _ended(client, created.id)
            assert (batch.request_counts.succeeded, batch.request_counts.processing) == (6, 0)
            assert batch.results_url == f"{server.url}/v1/messages/batches/{created.id}/results"
            results = [r async for r in await client.messages.batches.results(created.id)]
            more = [await client.messages.batches.create(requests=_requests(gym, 1))
                    for _ in range(4)]  # fmt: skip
            ids = [b.id async for b in client.messages.batches.list(limit=2)]
            first = await client.messages.batches.list(limit=2)
            newer = await client.messages.batches.list(limit=2, before_id=created.id)
        stats = server.stats()
    assert sorted(r.custom_id for r in results) == [f"q-{i}" for i in range(6)]
    assert all(r.result.type == "succeeded" for r in results)
    messages = [r.result.message for r in results if r.result.type == "succeeded"]
    assert all(m.model.endswith(SIM_MODEL_SUFFIX) for m in messages)  # labelled simulated
    assert ids == [b.id for b in reversed(more)] + [created.id]  # newest first, every page
    assert first.has_more
    assert first.last_id == more[-2].id
    assert [b.id for b in newer.data] == [more[1].id, more[0].id]
    assert newer.has_more
    assert stats["by_route"].get("anthropic.generate", 0) == 0
    served = stats["batch"]
    assert served["by_route"]["anthropic.batches.create"] == 5
    assert served["tokens"]["input"] == sum(m.usage.input_tokens for m in messages)
    assert served["tokens"]["output"] == sum(m.usage.output_tokens for m in messages)


async def test_failures_expiry_and_cancel(gym: ReasoningGymSuite) -> None:
    options = ServeOptions(port=0, batch_delay=0.3, batch_fail=0.3, batch_expire=1.0, seed=3)
    async with running_server(options, gym) as server:
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="x", max_retries=0)
        async with client:
            expired = await _ended(
                client, (await client.messages.batches.create(requests=_requests(gym, 12))).id
            )
            lines = await client.messages.batches.results(expired.id)
            kinds = Counter([r.result.type async for r in lines])
    # A batch of a minute: cancelled at once however loaded the machine (a batch of 0.3 s had
    # done a request by the time the cancel came on a busy one).
    async with running_server(ServeOptions(port=0, batch_delay=60.0), gym) as server:
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="x", max_retries=0)
        async with client:
            slow = await client.messages.batches.create(requests=_requests(gym, 5))
            cancelling = await client.messages.batches.cancel(slow.id)
            cancelled = await _ended(client, slow.id)
    counts = expired.request_counts
    said = {"succeeded": counts.succeeded, "errored": counts.errored, "expired": counts.expired}
    assert kinds == Counter({k: v for k, v in said.items() if v})
    assert counts.expired > 0
    assert counts.errored > 0
    assert cancelling.processing_status == "canceling"
    assert cancelling.cancel_initiated_at is not None
    assert cancelled.request_counts.canceled == 5  # cancelled at once: nothing was done


async def test_refusals_are_anthropic_errors(gym: ReasoningGymSuite) -> None:
    async with running_server(ServeOptions(port=0, batch_delay=5), gym) as server:
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="x", max_retries=0)
        async with client:
            bad = [{"custom_id": "has space", "params": {}}]
            with pytest.raises(anthropic.BadRequestError, match="custom_id"):
                await client.messages.batches.create(requests=bad)  # type: ignore[arg-type]
            twice = _requests(gym, 1) * 2
            with pytest.raises(anthropic.BadRequestError, match="repeated"):
                await client.messages.batches.create(requests=twice)
            with pytest.raises(anthropic.NotFoundError):
                await client.messages.batches.retrieve("msgbatch_nope")
            running = await client.messages.batches.create(requests=_requests(gym, 1))
            with pytest.raises(anthropic.AnthropicError, match="results_url"):
                await client.messages.batches.results(running.id)


def _request(gym: ReasoningGymSuite, i: int, **sampling: Any) -> Request:
    prompt = gym.warmup_prompt(gym.items()[i])
    return Request((Message("user", prompt),), Sampling(max_output_tokens=2000, **sampling))


async def test_adapter_results_and_a_batch_found_by_its_tag(gym: ReasoningGymSuite) -> None:
    options = ServeOptions(port=0, batch_delay=0.4)
    async with running_server(options, gym) as server:
        provider = AnthropicProvider("sim", base_url=server.url, api_key="x")
        api = AnthropicBatchAPI(provider, poll_s=(0.05, 0.2))
        other = AnthropicBatchAPI(provider, poll_s=(0.05, 0.2))  # a resumed session's
        try:
            requests = {f"t1-r{i}-k0": _request(gym, i) for i in range(3)}
            requests["t1-r3-k0"] = _request(gym, 3, temperature=1.5)  # the API refuses it
            data = b"".join(api.encode(cid, r) for cid, r in requests.items())
            file_id = await api.upload(data, "ttc-t1-a1-abc.jsonl")
            await api.create(file_id, "ttc-t1-a1-abc")
            decoy = await api.create(await api.upload(data, "x"), "ttc-t1-a2-def")
            # In progress: known only once it ends, so `find` waits for both batches.
            found = await other.find("ttc-t1-a1-abc")
            assert found is not None
            assert found.status == "completed"
            assert found.total == 4
            assert await other.find("ttc-t9-a1-zzz") is None
            assert (await other.find("ttc-t1-a2-def")) == await api.poll(decoy.id)
            results = {r.custom_id: r for r in await api.results(found, requests)}
        finally:
            await api.aclose()
            await other.aclose()
            await provider.aclose()
    assert set(results) == set(requests)
    refused = results.pop("t1-r3-k0")
    assert isinstance(refused.error, BadRequest)
    assert refused.reason == "failed"
    assert all(r.completion is not None for r in results.values())
    assert provider.simulated  # the sim's answers say so, through the synchronous reader
