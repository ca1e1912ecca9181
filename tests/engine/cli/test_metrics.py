"""`--metrics-port`: the Prometheus endpoint of `ttc run` and `ttc batch`, scraped over real HTTP
and parsed with prometheus-client's own parser; its counts equal what the run's journal and
summary say. A run against `ttc serve` with faults and a rate limit (real HTTP on loopback), a
batch against a scripted endpoint, a port in use, a missing package, two commands at once."""

from __future__ import annotations

import argparse
import asyncio
import re
import socket
import sys
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ttc.adapters.sim import ServeOptions, running_server
from ttc.engine import ConfigError, RateInfo, RateLimited, Transient
from ttc.engine.cli import RunSpec, build_parser, main
from ttc.engine.cli import _prometheus as prom
from ttc.engine.cli._batch import add_batch_arguments, batch_main
from ttc.engine.cli._batchio import journal_path
from ttc.engine.cli._commands import Session, cmd_compare, cmd_run
from ttc.engine.cli._metrics import metrics_served
from ttc.engine.cli._wiring import suite_and_items
from ttc.engine.journal import read_journal
from ttc.engine.send import Limiter

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    """Every sample the endpoint serves, by name and labels, read by prometheus-client's parser."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when there is none)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def labelled(samples: Samples, name: str, label: str, **labels: str) -> dict[str, float]:
    """`name`'s samples matching `labels`, by the value of `label` (zeros left out)."""
    want = set(labels.items())
    return {
        dict(ls)[label]: v
        for (n, ls), v in samples.items()
        if n == name and want <= ls and v and label in dict(ls)
    }


@pytest.fixture
def last_scrape(monkeypatch: pytest.MonkeyPatch) -> list[Samples]:
    """The endpoint as it stood when the command ended, scraped just before its server stops."""
    scraped: list[Samples] = []
    stop = prom._stop

    def scrape_then_stop(server: Any, thread: Any) -> None:
        scraped.append(scrape(prom.url_of(server)))
        stop(server, thread)

    monkeypatch.setattr(prom, "_stop", scrape_then_stop)
    return scraped


def busy_port() -> socket.socket:
    """A socket listening on a free port, which no one else can then serve on."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


# --- ttc run -----------------------------------------------------------------------------------


async def test_a_run_serves_what_its_journal_and_summary_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, last_scrape: list[Samples]
) -> None:
    monkeypatch.setenv("TTC_TEST_KEY", "sk-test")
    out = tmp_path / "run"
    argv = [
        "run", "--method", "elim", "--per-task", "4", "--limit", "40", "--rounds", "2",
        "--embedder", "lexical", "--workers", "0", "--no-cache", "-q",
        "--concurrency", "16", "--tpm", "10000000", "--timeout", "5", "--max-attempts", "6",
        "--metrics-port", "0", "--out", str(out),
    ]  # fmt: skip
    # 10 requests per 1 s window, and faults: the run's first burst of 16 meets 429s (then its
    # limiter learns the limit from the headers), and faults are retried.
    options = ServeOptions(port=0, rpm=600, window=1.0, latency=0.01, fault_500=0.1,
                           fault_503=0.05, fault_truncated=0.05, seed=3)  # fmt: skip
    args = build_parser().parse_args(argv)
    suite, items = suite_and_items(RunSpec.from_args(args).suite)
    async with running_server(options, suite, items) as server:
        argv += ["--provider", "openai", "--model", "sim", "--api-key-env", "TTC_TEST_KEY",
                 "--base-url", server.base_url_openai]  # fmt: skip
        args = build_parser().parse_args(argv)
        assert await cmd_run(RunSpec.from_args(args, argv), Session()) == 0

    [got] = last_scrape
    events = list(read_journal(out / "journal.jsonl"))
    summary = orjson.loads((out / "summary.json").read_bytes())
    landed = [e for e in events if e["ev"] == "sample" and e["ok"]]
    failed = Counter(e["error"] for e in events if e["ev"] == "sample" and not e["ok"])
    retried = Counter(e["error"] for e in events if e["ev"] == "retry")
    run = {"method": "elim", "role": "policy"}

    assert labelled(got, "ttc_requests_total", "outcome", **run) == {
        "ok": len(landed),
        **(failed + retried),
    }
    assert labelled(got, "ttc_retries_total", "kind", **run) == dict(retried)
    assert sum(retried.values()) == sum(r["retries"] for r in summary["rounds"]) > 0
    limited = failed["rate_limited"] + retried["rate_limited"]
    assert value(got, "ttc_rate_limited_total", **run) == limited > 0
    assert value(got, "ttc_concurrency_cuts_total", method="elim") >= 1
    for kind in ("input", "output", "thinking"):
        assert value(got, "ttc_tokens_total", kind=kind, **run) == summary[f"{kind}_tokens"]
    assert value(got, "ttc_round", method="elim") == 2
    # The limiter as it stood: nothing in flight, the cap within its ceiling, the limits.
    assert value(got, "ttc_in_flight", method="elim") == 0
    assert value(got, "ttc_concurrency_max", method="elim") == 16
    assert 1 <= value(got, "ttc_concurrency_cap", method="elim") <= 16
    assert labelled(got, "ttc_limit_requests_per_minute", "source") == {"learned": 600}
    assert labelled(got, "ttc_limit_tokens_per_minute", "source") == {"configured": 1e7}
    models = labelled(got, "ttc_model_info", "model", method="elim")
    assert models == {"sim": 1}


async def test_compare_counts_each_method_apart(tmp_path: Path, last_scrape: list[Samples]) -> None:
    out = tmp_path / "cmp"
    # --protocol none: unif samples every round (matched to elim, it would send nothing more).
    argv = ["compare", "--limit", "12", "--rounds", "2", "--embedder", "lexical", "--workers",
            "0", "--no-cache", "-q", "--metrics-port", "0", "--protocol", "none",
            "--out", str(out)]  # fmt: skip
    args = build_parser().parse_args(argv)
    assert await cmd_compare(RunSpec.from_args(args, argv), Session()) == 0
    [got] = last_scrape
    for method in ("elim", "unif", "rand", "adpt"):
        events = read_journal(out / method / "journal.jsonl")
        # The other methods replay elim's warm-up (round 1) from their journals: not sent again.
        sent = [e for e in events if e["ev"] == "sample" and (method == "elim" or e["round"] > 1)]
        assert value(got, "ttc_requests_total", method=method, outcome="ok") == len(sent) > 0
        output = sum(e["usage"][1] for e in sent)
        assert value(got, "ttc_tokens_total", method=method, kind="output") == output
        assert value(got, "ttc_round", method=method) == 2


async def test_a_reward_models_calls_count_under_its_role(
    tmp_path: Path, last_scrape: list[Samples]
) -> None:
    out = tmp_path / "run"
    argv = ["run", "--judge", "reward", "--limit", "8", "--rounds", "2", "--embedder", "lexical",
            "--workers", "0", "--no-cache", "-q", "--metrics-port", "0",
            "--out", str(out)]  # fmt: skip
    args = build_parser().parse_args(argv)
    assert await cmd_run(RunSpec.from_args(args, argv), Session()) == 0
    [got] = last_scrape
    judge = orjson.loads((out / "summary.json").read_bytes())["roles"]["judge"]
    calls = [e for e in read_journal(out / "journal.jsonl") if e["ev"] == "judge"]
    role = {"method": "adpt", "role": "judge"}
    assert value(got, "ttc_requests_total", outcome="ok", **role) == len(calls) == judge["calls"]
    for kind in ("input", "output", "thinking"):
        assert value(got, "ttc_tokens_total", kind=kind, **role) == judge[f"{kind}_tokens"]
    assert labelled(got, "ttc_model_info", "role", method="adpt") == {"policy": 1, "judge": 1}


async def test_a_port_in_use_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    sock = busy_port()
    port = sock.getsockname()[1]
    refused = pytest.raises(ConfigError, match=rf"^--metrics-port: .*:{port}: .*in use")
    with sock, refused, metrics_served(port):
        pytest.fail("served on a port in use")


def test_run_refuses_a_port_in_use_before_writing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with busy_port() as sock:
        port = str(sock.getsockname()[1])
        code = main(["run", "--limit", "2", "--no-cache", "--out", "r", "--metrics-port", port])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("ttc: error: --metrics-port: cannot serve metrics on 127.0.0.1:")
    assert not (tmp_path / "r").exists()


def test_without_prometheus_client_the_error_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "ttc.engine.cli._prometheus")
    assert main(["run", "--limit", "2", "--no-cache", "--out", "r", "--metrics-port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "ttc: error: --metrics-port: needs the prometheus-client package, which is not "
        "installed: pip install prometheus-client"
    ]
    assert not (tmp_path / "r").exists()


def test_two_commands_in_one_process_count_apart() -> None:
    first, second = prom.Metrics(), prom.Metrics()
    first.start("adpt", "policy")
    second.start("adpt", "policy")
    first.ended("adpt", "policy", "ok")
    second.ended("adpt", "policy", RateLimited.kind)
    with prom.served(first, 0, "127.0.0.1") as url_1, prom.served(second, 0, "127.0.0.1") as url_2:
        assert url_1 != url_2
        one, two = scrape(url_1), scrape(url_2)
    assert labelled(one, "ttc_requests_total", "outcome") == {"ok": 1}
    assert labelled(two, "ttc_requests_total", "outcome") == {"rate_limited": 1}
    assert value(two, "ttc_rate_limited_total") == 1


async def test_a_limit_set_with_ttc_ctl_is_labelled_set_not_learned() -> None:
    metrics = prom.Metrics()
    limiter = Limiter(rpm=600, tpm=1e6)
    metrics.watch("adpt", limiter, 600, 1e6)
    limiter.retune(rpm=300)  # `ttc ctl set --rpm 300`
    limiter.observe(RateInfo(limit_tokens=500_000))  # a server announcing a stricter TPM
    with prom.served(metrics, 0, "127.0.0.1") as url:
        got = scrape(url)
    assert labelled(got, "ttc_limit_requests_per_minute", "source") == {
        "configured": 600,
        "set": 300,
    }
    assert labelled(got, "ttc_limit_tokens_per_minute", "source") == {
        "configured": 1e6,
        "learned": 500_000,
    }


def test_the_flags_are_on_run_compare_and_batch() -> None:
    parser = build_parser()
    for command in ("run", "compare"):
        args = parser.parse_args([command, "--metrics-port", "9100"])
        assert (args.metrics_port, args.metrics_addr) == (9100, "127.0.0.1")
    args = parser.parse_args(["batch", "in.jsonl", "--out", "o", "--metrics-port", "0"])
    assert (args.metrics_port, args.metrics_addr) == (0, "127.0.0.1")
    assert parser.parse_args(["run"]).metrics_port is None


# --- ttc batch ---------------------------------------------------------------------------------

CHAT = "/v1/chat/completions"
USAGE = {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14,
         "completion_tokens_details": {"reasoning_tokens": 4}}  # fmt: skip


class Endpoint:
    """Answers 200 (with USAGE) unless scripted: a status, an error, or "hang"; requests named
    `held*` wait for `gate`."""

    def __init__(self, script: dict[str, list[Any]]) -> None:
        self.script = script
        self.calls: list[str] = []
        self.held = 0
        self.gate = asyncio.Event()

    async def post_json(self, path: str, body: dict[str, Any]) -> tuple[int, Any, None]:
        name = str(body["messages"][0]["content"])
        self.calls.append(name)
        if name.startswith("held"):
            self.held += 1
            await self.gate.wait()
        steps = self.script.get(name)
        step = steps.pop(0) if steps else 200
        if isinstance(step, Exception):
            raise step
        if step == "hang":
            await asyncio.Event().wait()
        if step == 200:
            return 200, {"choices": [{"message": {"content": "hi"}}], "usage": USAGE}, None
        return int(step), {"error": {"message": "bad"}}, None


def batch_args(tmp_path: Path, names: list[str], *flags: str) -> argparse.Namespace:
    lines = [
        {"custom_id": n, "method": "POST", "url": CHAT,
         "body": {"model": "m", "messages": [{"role": "user", "content": n}]}}
        for n in names
    ]  # fmt: skip
    (tmp_path / "in.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    parser = argparse.ArgumentParser()
    add_batch_arguments(parser)
    return parser.parse_args([str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "out.jsonl"),
                              "--concurrency", "4", "--timeout", "0.5", "--max-attempts", "3",
                              *flags])  # fmt: skip


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition never held")


def journal_results(tmp_path: Path) -> list[dict[str, Any]]:
    lines = journal_path(tmp_path / "out.jsonl").read_bytes().splitlines()
    return [e for e in map(orjson.loads, lines) if e["ev"] == "result"]


async def test_a_batch_serves_counts_equal_to_its_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], last_scrape: list[Samples]
) -> None:
    script: dict[str, list[Any]] = {
        "limited": [RateLimited("slow down"), 200],
        "flaky": [Transient("503"), Transient("reset"), 200],
        "refused": [400],
        "broken": [Transient("500"), Transient("500"), Transient("500")],  # retries run out
        "hung": ["hang", 200],  # a timeout (never seen by the endpoint), then an answer
    }
    args = batch_args(tmp_path, [*script, "a", "b", "c"], "--metrics-port", "0", "--timeout", "0.5")
    endpoint = Endpoint(script)
    assert await batch_main(args, endpoint) == 4  # "broken" ended in an error
    [got] = last_scrape

    results = journal_results(tmp_path)
    statuses = Counter(str((r["out"]["response"] or {}).get("status_code")) for r in results)
    assert statuses == {"200": 6, "400": 1, "None": 1}  # "broken" ended in an error
    attempts = sum(r["attempts"] for r in results)
    batch = {"method": "batch", "role": "policy"}
    outcomes = labelled(got, "ttc_requests_total", "outcome", **batch)
    assert outcomes == {"ok": 6, "bad_request": 1, "rate_limited": 1, "transient": 6}
    assert sum(outcomes.values()) == attempts == len(endpoint.calls)
    retries = labelled(got, "ttc_retries_total", "kind", **batch)
    assert retries == {"rate_limited": 1, "transient": 5}
    assert sum(retries.values()) == attempts - len(results)
    assert value(got, "ttc_rate_limited_total", **batch) == 1
    output = [orjson.loads(x) for x in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    usages = [o["response"]["body"].get("usage") for o in output if o["response"]]
    usages = [u for u in usages if u is not None]  # a 400's body has none
    assert len(usages) == 6
    tokens = labelled(got, "ttc_tokens_total", "kind", **batch)
    assert tokens == {"input": 5 * 6, "output": 5 * 6, "thinking": 4 * 6}
    assert sum(tokens.values()) == sum(u["total_tokens"] for u in usages)
    out = capsys.readouterr().out
    assert f"429s 1, retries {sum(retries.values()):.0f};" in out  # as the summary says
    assert value(got, "ttc_in_flight") == 0
    assert value(got, "ttc_concurrency_max", method="batch") == 4


async def test_a_batch_is_served_while_it_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = batch_args(tmp_path, ["a", "b", "c", "held1", "held2"], "--metrics-port", "0",
                      "--rpm", "6000", "--timeout", "60")  # fmt: skip
    endpoint = Endpoint({})
    task = asyncio.create_task(batch_main(args, endpoint))
    await until(lambda: endpoint.held == 2 and len(endpoint.calls) == 5)
    url = re.findall(r"ttc: metrics at (http://127\.0\.0\.1:\d+/metrics)", capsys.readouterr().err)
    live = await asyncio.to_thread(scrape, url[0])  # the server answers from its own thread
    assert value(live, "ttc_in_flight", method="batch") == 2
    assert value(live, "ttc_requests_total", outcome="ok") == 3
    assert value(live, "ttc_tokens_total", kind="input") == 5 * 3
    assert labelled(live, "ttc_limit_requests_per_minute", "source") == {"configured": 6000}
    endpoint.gate.set()
    assert await task == 0
    with pytest.raises(urllib.error.URLError, match="refused"):  # served no longer
        scrape(url[0])


async def test_a_batch_on_a_port_in_use_sends_nothing(tmp_path: Path) -> None:
    endpoint = Endpoint({})
    with busy_port() as sock:
        args = batch_args(tmp_path, ["a"], "--metrics-port", str(sock.getsockname()[1]))
        with pytest.raises(ConfigError, match=r"^--metrics-port: cannot serve metrics on"):
            await batch_main(args, endpoint)
    assert endpoint.calls == []
    assert not journal_path(tmp_path / "out.jsonl").exists()
