"""The response cache: stable keys, faithful round trips, batched commits, shared files."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ttc.engine import (
    Completion,
    ConfigError,
    Demo,
    Message,
    Provider,
    Request,
    Sampling,
    Transient,
    Usage,
)
from ttc.engine.contract import Stalled
from ttc.engine.send._cache import CachingProvider, ProviderCache, ResponseCache, cache_key
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._retry import RetryPolicy
from ttc.engine.send._sender import Job, Sender

REQUEST = Request(
    messages=(Message("system", "Be brief."), Message("user", "What is 2+2?")),
    sampling=Sampling(
        temperature=0.7,
        top_p=0.95,
        top_k=40,
        seed=1234,
        max_output_tokens=512,
        thinking_budget=1024,
        reasoning_effort="low",
        verbosity="low",
    ),
    n=1,
    item_id="q0",
    demos=(Demo("q1", "What is 1+1?", "2", 0.9),),
)
# The key of REQUEST. If this changes, every cache on every machine stops matching: bump
# KEY_VERSION on purpose, never by accident.
GOLDEN_KEY = "04ed9a8f12370b6ab345cda3cf8cb8e70bc7690b7f04fad8c527dea8df916430"
# The same request before `verbosity` existed: an unset field leaves older keys as they were.
GOLDEN_KEY_WITHOUT_VERBOSITY = "6135d05c19878d30704ba1877b197c43817b789fd50410966c49c3dd83d69d71"

COMPLETION = Completion(
    texts=("4", "four ✓"),
    usage=Usage(input_tokens=11, output_tokens=22, thinking_tokens=33),
    finish_reasons=("stop", "length"),
    latency_s=1.25,
    model="m-2025-01-01",
)


def key(request: Request = REQUEST, **overrides: Any) -> str:
    args: dict[str, Any] = {"provider": "openai", "model": "m", "sample_index": 0}
    args.update(overrides)
    return cache_key(args["provider"], args["model"], request, args["sample_index"])


# ---- keys


def test_key_is_pinned() -> None:
    assert key() == GOLDEN_KEY
    older = dataclasses.replace(REQUEST.sampling, verbosity=None)
    assert cache_key("openai", "m", dataclasses.replace(REQUEST, sampling=older), 0) == (
        GOLDEN_KEY_WITHOUT_VERBOSITY
    )


def test_key_is_the_same_in_another_process() -> None:
    script = textwrap.dedent(
        """
        from ttc.engine import Demo, Message, Request, Sampling
        from ttc.engine.send._cache import cache_key
        r = Request(
            (Message("system", "Be brief."), Message("user", "What is 2+2?")),
            Sampling(0.7, 0.95, 40, 1234, 512, 1024, "low", "low"),
        )
        print(cache_key("openai", "m", r, 0))
        """
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == key()


def _with_messages(*messages: Message) -> Request:
    return dataclasses.replace(REQUEST, messages=messages)


def _with_sampling(**changes: Any) -> Request:
    return dataclasses.replace(REQUEST, sampling=dataclasses.replace(REQUEST.sampling, **changes))


def _variants() -> list[tuple[str, Request]]:
    system, user = REQUEST.messages
    out = [
        ("message content", _with_messages(system, Message("user", "What is 2+3?"))),
        ("message role", _with_messages(Message("user", "Be brief."), user)),
        ("extra message", _with_messages(system, user, Message("user", ""))),
        ("dropped message", _with_messages(user)),
        ("n", dataclasses.replace(REQUEST, n=2)),
    ]
    changed: dict[str, Any] = {
        "temperature": 0.8,
        "top_p": 0.9,
        "top_k": 41,
        "seed": 1235,
        "max_output_tokens": 513,
        "thinking_budget": 1025,
        "reasoning_effort": "high",
        "verbosity": "high",
    }
    # Every Sampling field must be covered, including ones added later.
    assert set(changed) == {f.name for f in dataclasses.fields(Sampling)}
    for name, value in changed.items():
        out.append((f"sampling.{name}", _with_sampling(**{name: value})))
        out.append((f"sampling.{name}=None", _with_sampling(**{name: None})))
    return out


VARIANTS = _variants()


@pytest.mark.parametrize(("what", "request_"), VARIANTS, ids=[w for w, _ in VARIANTS])
def test_key_changes_with_the_request(what: str, request_: Request) -> None:
    assert key(request_) != key(), what


@pytest.mark.parametrize("override", [{"provider": "gemini"}, {"model": "m2"}, {"sample_index": 1}])
def test_key_changes_with_provider_model_and_sample_index(override: dict[str, Any]) -> None:
    assert key(**override) != key()


def test_key_ignores_item_id_and_demos() -> None:
    other = dataclasses.replace(REQUEST, item_id="q99", demos=())
    assert key(other) == key()


def test_key_is_an_int_temperature_like_a_float_one() -> None:
    as_int = dataclasses.replace(REQUEST, sampling=Sampling(temperature=1, top_p=1))
    as_float = dataclasses.replace(REQUEST, sampling=Sampling(temperature=1.0, top_p=1.0))
    assert key(as_int) == key(as_float)


def test_key_cannot_confuse_message_boundaries() -> None:
    a = dataclasses.replace(REQUEST, messages=(Message("user", "ab"), Message("user", "c")))
    b = dataclasses.replace(REQUEST, messages=(Message("user", "a"), Message("user", "bc")))
    assert key(a) != key(b)


# ---- the store


def test_round_trip_preserves_every_field(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    with ResponseCache(path) as cache:
        cache.put("k", COMPLETION)
        assert cache.get("k") == COMPLETION  # from the pending batch
        cache.flush()
        assert cache.get("k") == COMPLETION  # from the file
        assert cache.get("missing") is None
    with ResponseCache(path) as cache:
        got = cache.get("k")
    assert got == COMPLETION
    assert got is not None
    assert isinstance(got.texts, tuple)
    assert isinstance(got.finish_reasons, tuple)


def test_round_trip_of_an_empty_completion(tmp_path: Path) -> None:
    empty = Completion(texts=("",), usage=Usage())
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        cache.put("k", empty)
        cache.flush()
        assert cache.get("k") == empty


def test_put_replaces(tmp_path: Path) -> None:
    other = dataclasses.replace(COMPLETION, texts=("5",))
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        cache.put("k", COMPLETION)
        cache.flush()
        cache.put("k", other)
        cache.flush()
        assert cache.get("k") == other
        assert len(cache) == 1


def test_writes_are_batched_until_flush(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    with ResponseCache(path) as writer, ResponseCache(path) as reader:
        writer.put("k", COMPLETION)
        assert reader.get("k") is None  # not committed yet
        writer.flush()
        assert reader.get("k") == COMPLETION


def test_a_batch_commits_itself_when_full(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    with ResponseCache(path, flush_every=3) as writer, ResponseCache(path) as reader:
        writer.put("a", COMPLETION)
        writer.put("b", COMPLETION)
        assert len(reader) == 0
        writer.put("c", COMPLETION)
        assert len(reader) == 3
        writer.put("d", COMPLETION)
        assert len(reader) == 3
        assert len(writer) == 4  # counts its own pending put


def test_an_old_batch_commits_on_the_next_put(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    with ResponseCache(path, flush_after_s=0.0) as writer, ResponseCache(path) as reader:
        writer.put("a", COMPLETION)
        assert reader.get("a") == COMPLETION


def test_close_commits_and_reopen_sees_it(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "c.sqlite3"
    cache = ResponseCache(path)
    for i in range(300):  # one automatic batch of 256, then 44 pending
        cache.put(f"k{i}", COMPLETION)
    cache.close()
    cache.close()  # harmless
    with ResponseCache(path) as again:
        assert len(again) == 300
        assert again.get("k299") == COMPLETION


def test_two_caches_on_one_file_see_each_others_writes(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    other = dataclasses.replace(COMPLETION, texts=("other",))
    with ResponseCache(path) as a, ResponseCache(path) as b:
        a.put("from-a", COMPLETION)
        b.put("from-b", other)
        a.flush()
        b.flush()
        assert b.get("from-a") == COMPLETION
        assert a.get("from-b") == other
        assert len(a) == len(b) == 2


def test_several_processes_write_one_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    ResponseCache(path).close()  # create it once, so the writers race only on rows
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from ttc.engine import Completion, Usage
        from ttc.engine.send._cache import ResponseCache
        name = sys.argv[2]
        with ResponseCache(Path(sys.argv[1]), flush_every=7) as cache:
            for i in range(500):
                cache.put(f"{name}-{i}", Completion((name,), Usage(i, i, i)))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), f"w{w}"]) for w in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    with ResponseCache(path) as cache:
        assert len(cache) == 2000
        assert cache.get("w3-499") == Completion(("w3",), Usage(499, 499, 499))


def _garble(path: Path) -> None:
    """Overwrites every page after the first two: the header still reads, the rows do not."""
    data = bytearray(path.read_bytes())
    assert len(data) > 3 * 4096
    data[2 * 4096 :] = b"\x5a" * (len(data) - 2 * 4096)
    path.write_bytes(bytes(data))


def _filled(path: Path, n: int = 300) -> None:
    with ResponseCache(path) as cache:
        for i in range(n):
            cache.put(f"k{i}", Completion((f"answer {i}" * 20,), Usage(i, i, i)))


def _aside(path: Path) -> list[Path]:
    """The files a corrupt cache was moved aside to (not their WAL files)."""
    found = path.parent.glob(f"{path.name}.corrupt-*")
    return sorted(p for p in found if not p.name.endswith(("-wal", "-shm")))


@pytest.mark.parametrize(
    "content", [b"this is not a database, just some text\n" * 100, b"\x00\xff" * 4096]
)
def test_a_file_that_is_not_sqlite_is_moved_aside_and_a_fresh_cache_used(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "c.sqlite3"
    path.write_bytes(content)
    with ResponseCache(path) as cache:
        assert cache.get("k") is None
        cache.put("k", Completion(("fresh",), Usage(1, 2, 3)))
    with ResponseCache(path) as cache:
        assert cache.get("k") == Completion(("fresh",), Usage(1, 2, 3))
    (moved,) = _aside(path)
    assert moved.read_bytes() == content  # kept as it was, for whoever wants to look
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert str(path) in warning
    assert moved.name in warning
    assert "\n" not in warning


def test_a_cache_found_corrupt_by_a_lookup_mid_run_is_moved_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "c.sqlite3"
    _filled(path)
    cache = ResponseCache(path)  # opens cleanly: the header is whole
    _garble(path)
    assert cache.get("k7") is None  # SQLite: "database disk image is malformed"
    assert len(_aside(path)) == 1
    assert any("malformed" in r.getMessage() for r in caplog.records)
    cache.put("k7", Completion(("again",), Usage(1, 1, 1)))
    cache.close()
    with ResponseCache(path) as fresh:
        assert len(fresh) == 1
        assert fresh.get("k7") == Completion(("again",), Usage(1, 1, 1))


def test_a_cache_found_corrupt_by_a_commit_keeps_what_was_pending(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    _filled(path)
    cache = ResponseCache(path, flush_every=10_000)
    _garble(path)
    for i in range(300, 310):
        cache.put(f"k{i}", Completion(("new",), Usage(i, i, i)))
    cache.close()  # the commit meets the damage; the batch goes to a fresh file
    assert len(_aside(path)) == 1
    with ResponseCache(path) as fresh:
        assert len(fresh) == 10
        assert fresh.get("k305") == Completion(("new",), Usage(305, 305, 305))


def test_a_cache_another_process_already_replaced_is_not_moved_again(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    _filled(path)
    first, second = ResponseCache(path), ResponseCache(path)
    _garble(path)
    assert first.get("k1") is None  # moves the file aside, opens a fresh one
    first.put("mine", Completion(("kept",), Usage(1, 1, 1)))
    first.flush()
    assert second.get("k2") is None  # its connection still reads the damaged file
    assert len(_aside(path)) == 1  # the fresh file the first one made stays where it is
    assert second.get("mine") == Completion(("kept",), Usage(1, 1, 1))
    first.close()
    second.close()


def test_a_directory_in_place_of_the_cache_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    path.mkdir()
    with pytest.raises(ConfigError, match="--no-cache") as info:
        ResponseCache(path)
    assert str(path) in str(info.value)
    assert path.is_dir()
    assert _aside(path) == []


def test_a_cache_of_another_schema_version_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version=99")
    conn.close()
    with pytest.raises(ConfigError, match="schema version 99") as info:
        ResponseCache(path)
    assert str(path) in str(info.value)
    assert "--no-cache" in str(info.value)


# ---- the caching provider


@dataclass
class CountingProvider(Provider):
    """Answers `echo:<last message>`; fails requests whose last message is `fail`, once each."""

    name: str = "counting"
    model: str = "counting-1"
    simulated: bool = True
    endpoint: str | None = None
    calls: int = 0
    failed: set[str] = field(default_factory=set)
    closed: bool = False

    async def generate(self, request: Request) -> Completion:
        self.calls += 1
        text = request.messages[-1].content
        if text.startswith("fail") and text not in self.failed:
            self.failed.add(text)
            raise Transient("503")
        return Completion((f"echo:{text}",) * request.n, Usage(3, 5, 7), ("stop",) * request.n)

    async def aclose(self) -> None:
        self.closed = True


def requests(n: int, prefix: str = "q") -> list[Request]:
    return [
        Request((Message("user", f"{prefix}{i}"),), Sampling(seed=i), item_id=f"{prefix}{i}")
        for i in range(n)
    ]


async def test_a_second_pass_sends_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    inner = CountingProvider()
    with ResponseCache(path) as cache:
        provider = CachingProvider(inner, cache)
        first = [await provider.generate(r) for r in requests(10)]
        assert (inner.calls, provider.hits, provider.misses) == (10, 0, 10)
        second = [await provider.generate(r) for r in requests(10)]
        assert (inner.calls, provider.hits, provider.misses) == (10, 10, 10)
        assert second == first
    # Another run, another process's worth of objects: still nothing sent.
    inner2 = CountingProvider()
    with ResponseCache(path) as cache:
        provider = CachingProvider(inner2, cache)
        third = [await provider.generate(r) for r in requests(10)]
    assert inner2.calls == 0
    assert third == first


async def test_another_model_is_not_served_from_the_cache(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        a = CachingProvider(CountingProvider(model="a"), cache)
        b = CachingProvider(CountingProvider(model="b"), cache)
        for r in requests(3):
            await a.generate(r)
            await b.generate(r)
        assert (a.misses, b.misses, a.hits, b.hits) == (3, 3, 0, 0)


async def test_another_endpoint_is_not_served_from_the_cache(tmp_path: Path) -> None:
    # A rehearsal against `ttc serve` with the real model name must not answer the real run.
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        rehearsal = CountingProvider(model="gpt-4.1-mini", endpoint="http://127.0.0.1:8000/v1")
        real = CountingProvider(model="gpt-4.1-mini", endpoint="https://api.openai.com/v1")
        a, b = CachingProvider(rehearsal, cache), CachingProvider(real, cache)
        for r in requests(3):
            await a.generate(r)
            await b.generate(r)
        assert (a.misses, b.misses, b.hits) == (3, 3, 0)


async def test_cached_answers_do_not_wait_for_the_rate_limit(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        inner = CountingProvider()
        provider = CachingProvider(inner, cache)
        for r in requests(5):
            await provider.generate(r)
        # One request per minute: were the cached answers paced, this would take 4 minutes.
        limiter = Limiter(rpm=1, headroom=0.0)
        sender = Sender(inner, limiter, RetryPolicy(), 10.0, cache=ProviderCache(cache, inner))
        async with asyncio.timeout(5):
            for i, r in enumerate(requests(5)):
                outcome = await sender.send_with_retry(Job(i, 1, 0, r, est_tokens=10))
                assert outcome.completion is not None
        assert sender.cache is not None
        assert (sender.cache.hits, sender.cache.misses) == (5, 0)
        assert inner.calls == 5  # only the first pass, through the wrapper


async def test_the_sender_looks_up_before_the_limiter_and_stores_what_it_buys(
    tmp_path: Path,
) -> None:
    inner = CountingProvider()
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        responses = ProviderCache(cache, inner)
        limiter = Limiter(rpm=1, headroom=0.0)
        sender = Sender(inner, limiter, RetryPolicy(base_delay=0.0), 10.0, cache=responses)
        first = await sender.send_with_retry(Job(0, 1, 0, requests(1)[0], est_tokens=10))
        # The second pass is answered before the one-per-minute limiter could let it through.
        async with asyncio.timeout(5):
            again = await sender.send_with_retry(Job(0, 1, 0, requests(1)[0], est_tokens=10))
        assert again.completion == first.completion
        unpaced = Sender(inner, Limiter(), RetryPolicy(base_delay=0.0), 10.0, cache=responses)
        failing = await unpaced.send_with_retry(Job(1, 1, 0, requests(1, "fail")[0], 10))
        stored = len(cache)
    assert failing.completion is not None
    assert failing.attempts == 2
    assert inner.calls == 3
    # Attempts sent count as misses, failed ones too; only the two answers are stored.
    assert (responses.hits, responses.misses, stored) == (1, 3, 2)


async def test_errors_are_not_cached(tmp_path: Path) -> None:
    inner = CountingProvider()
    request = requests(1, prefix="fail")[0]
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        provider = CachingProvider(inner, cache)
        with pytest.raises(Transient):
            await provider.generate(request)
        assert len(cache) == 0
        done = await provider.generate(request)  # the retry goes to the provider
        assert done.texts == ("echo:fail0",)
        assert await provider.generate(request) == done
    assert inner.calls == 2
    assert (provider.hits, provider.misses) == (1, 2)


async def test_a_request_for_several_samples_is_one_entry(tmp_path: Path) -> None:
    inner = CountingProvider()
    request = dataclasses.replace(requests(1)[0], n=3)
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        provider = CachingProvider(inner, cache)
        first = await provider.generate(request)
        assert await provider.generate(request) == first
        assert len(first.texts) == 3
        assert len(cache) == 1
    assert inner.calls == 1


async def test_it_is_a_provider_that_forwards_what_it_declares(tmp_path: Path) -> None:
    inner = CountingProvider(endpoint="http://127.0.0.1:9/v1", simulated=False)
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        provider = CachingProvider(inner, cache)
        assert isinstance(provider, Provider)
        assert (provider.name, provider.model) == ("counting", "counting-1")
        assert (provider.endpoint, provider.simulated) == ("http://127.0.0.1:9/v1", False)
        inner.simulated = True  # a remote provider learns it from its first answer
        assert provider.simulated is True
        with pytest.raises(AttributeError):
            _ = provider.calls  # type: ignore[attr-defined]


async def test_aclose_flushes_the_cache_and_leaves_the_provider_open(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    inner = CountingProvider()
    with ResponseCache(path) as cache, ResponseCache(path) as reader:
        provider = CachingProvider(inner, cache)
        await provider.generate(requests(1)[0])
        assert len(reader) == 0
        await provider.aclose()
        assert len(reader) == 1
    assert inner.closed is False


async def test_the_engine_takes_the_cache_and_a_second_run_sends_nothing(tmp_path: Path) -> None:
    """`EngineOptions(cache=...)`: the policy's requests are answered from the cache on a second
    run (none reaches the provider, none waits for a rate-limit slot), with the same results."""
    from fakes import FakeSuite, ScriptedProvider, items

    from ttc.engine import Engine, EngineOptions, RunConfig

    config = RunConfig(method="elim", rounds=2, verifier_workers=0)
    results = []
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        for run in range(2):
            provider = ScriptedProvider()
            suite = FakeSuite(pool=items(6))
            # One request per minute: a second run that waited for slots would not end in time.
            limiter = Limiter(rpm=1 if run else None, headroom=0.0)
            options = EngineOptions(cache=cache, limiter=limiter)
            async with asyncio.timeout(20):
                result = await Engine(provider, suite, config, options=options).run()
            results.append([(r.samples, r.usage, r.accepted) for r in result.records])
            sent = len(provider.history)
            assert (sent > 0) if run == 0 else (sent == 0)
    assert results[0] == results[1]


def test_a_cache_written_before_the_simulated_label_gains_it_and_keeps_its_entries(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE responses (key TEXT PRIMARY KEY, texts TEXT NOT NULL, finish_reasons TEXT "
        "NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, "
        "thinking_tokens INTEGER NOT NULL, latency_s REAL NOT NULL, model TEXT NOT NULL, "
        "created_at REAL NOT NULL)"
    )
    conn.execute(
        "INSERT INTO responses VALUES ('old', '[\"4\"]', '[\"stop\"]', 1, 2, 0, 0.1, 'm', 0)"
    )
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()
    with ResponseCache(path) as cache:
        old = cache.get("old")
        assert old is not None
        assert old.texts == ("4",)
        assert not old.simulated
        cache.put("sim", Completion(("5",), Usage(1, 1), ("stop",), simulated=True))
        cache.flush()
    with ResponseCache(path) as cache:
        answer = cache.get("sim")
        assert answer is not None
        assert answer.simulated


# ---- truncated answers


@dataclass
class CuttingProvider(Provider):
    """Answers within the request's output limit: cut ("length") under 10 tokens, else whole;
    or stalls mid-stream when `stall` is set, once."""

    name: str = "cutting"
    model: str = "cutting-1"
    calls: int = 0
    stall: bool = False

    async def generate(self, request: Request) -> Completion:
        self.calls += 1
        if self.stall:
            self.stall = False
            raise Stalled("stream stalled", ("The answer is",), Usage(3, 3, 0))
        limit = request.sampling.max_output_tokens
        cut = limit is not None and limit < 10
        text = "The answer is" if cut else "The answer is 4."
        return Completion(
            (text,), Usage(3, limit if cut and limit else 5), ("length" if cut else "stop",)
        )


def _limited(limit: int | None) -> Request:
    return Request((Message("user", "2+2?"),), Sampling(seed=1, max_output_tokens=limit))


async def test_a_truncated_answer_is_never_served_to_a_request_that_asked_for_more(
    tmp_path: Path,
) -> None:
    inner = CuttingProvider()
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        provider = CachingProvider(inner, cache)
        cut = await provider.generate(_limited(5))
        assert cut.finish_reasons == ("length",)
        # The same request, the same limit: the cut answer is its answer, served as cut.
        assert await provider.generate(_limited(5)) == cut
        assert inner.calls == 1
        # More tokens asked for, or the provider's default: sent, answered whole.
        more = await provider.generate(_limited(100))
        default = await provider.generate(_limited(None))
        assert (more.finish_reasons, default.finish_reasons) == (("stop",), ("stop",))
        assert inner.calls == 3
        # The whole answers are served from the cache in turn; the cut one never in their place.
        assert await provider.generate(_limited(100)) == more
        assert await provider.generate(_limited(None)) == default
        assert await provider.generate(_limited(5)) == cut
        assert inner.calls == 3
        # Kept apart: not under the key a finished answer to that request would have.
        assert cache.get(provider.responses.key(_limited(5))) is None
        assert cache.get(provider.responses.cut_key(_limited(5))) == cut


async def test_a_cut_answer_under_no_limit_is_not_kept_nor_one_cached_before_the_rule(
    tmp_path: Path,
) -> None:
    inner = CuttingProvider()
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        responses = ProviderCache(cache, inner)
        cut = Completion(("The answer is",), Usage(3, 9), ("length",))
        responses.store(_limited(None), cut)  # cut by a limit nobody asked for
        assert len(cache) == 0
        # An entry written before the rule, a cut answer among the finished ones.
        cache.put(responses.key(_limited(None)), cut)
        assert responses.lookup(_limited(None)) is None
        cache.put(responses.key(_limited(5)), cut)  # its own limit: still its answer
        assert responses.lookup(_limited(5)) == cut


async def test_a_stalled_stream_is_not_cached(tmp_path: Path) -> None:
    inner = CuttingProvider(stall=True)
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        responses = ProviderCache(cache, inner)
        sender = Sender(inner, Limiter(), RetryPolicy(base_delay=0.0), 10.0, cache=responses)
        outcome = await sender.send_with_retry(Job(0, 1, 0, _limited(100), est_tokens=10))
        assert outcome.attempts == 2
        assert outcome.completion is not None
        assert outcome.completion.texts == ("The answer is 4.",)
        assert responses.lookup(_limited(100)) == outcome.completion
        assert len(cache) == 1
