"""Sitting at a quota: `ttc batch` (or the engine) against `ttc serve --rpm --window`.

`ttc serve` enforces `--rpm` over a window shrunk to `--window` seconds (6 s: 300 requests per
window at 3,000 RPM), counted as `--kinds` say (one line each; all five by default): a sliding
window whose reset is its newest entry leaving (`sliding-newest`, OpenAI's wording) or its
oldest (`sliding-oldest`), a fixed window restarting every 6 s (`fixed`), a token bucket of 300
refilling 50 a second whose reset is the time to full (`bucket-newest`) or to one more
(`bucket-oldest`). It answers after a lognormal latency (median 0.8 s, sigma 0.6) and sends
OpenAI's `x-ratelimit-*` headers, scaled to a minute, on every response. `--faults`
adds the issue's faults: 2% 500s, 2% 503s, 1% connection resets, 1% truncated 200 bodies and
0.5% hangs, with a 10 s client timeout. The client sends `--minutes` (1) of requests at `--rpm`:

- `--client batch` (the default) runs `ttc batch INPUT --rpm R --concurrency 128 --timeout 10`
  as its own process, as the issue's author did, on generic chat requests (`--hedge`: with
  `--hedge`, the stragglers' copies);
- `--client engine` runs `unif` over Reasoning Gym in this process through `OpenAIProvider`, in
  one round (`--rounds` more), configured with the same `--rpm` (`--learn`: no limit at all, it
  starts from the server's `x-ratelimit-limit-requests`);
  `--clients N` runs N of them at once, each with its share of the requests and `--rpm R
  --shared-limits` on a redis-server of the benchmark's own: one quota held by N processes
  (`sending_fraction_of_limit`: the rate the server saw from the first request to the last);
- `--client loop` is a bare client in this process (128 workers posting through
  `OpenAIProvider.post_json`, a retry after any fault, a 429's retry-after, no hedging) whose rate
  is held by `--limiter`: `own` (ttc's `Limiter`, learning the window from the headers),
  `aiolimiter` (aiolimiter's `AsyncLimiter`, a bucket of `--bucket-s` of the rate at 98% of it)
  or `aiolimiter-window` (an `AsyncLimiter` of the server's own window: its budget per window).

One JSON line per kind, limit and case (twenty by default: five kinds, 600 and 3,000 RPM, clean
and faulty).
Reported, as the issue measures it: `fraction_of_limit`, the answered requests over the time
from the first request the server saw to the client's exit, per minute, over the limit (60 s is
the ideal for a minute's worth; a sliding window admits a whole window at once, so a client can
score above 1.0). Also the 429s the server answered, the answers it served in full
(`server_answers`: above `answered` when a hedged copy and its original both answered), the
answers it served to a prompt it had answered before (`server_answered_again`: every prompt is
its own, so a request served twice), and,
for the engine, its own measure (answers over the rounds' wall time, barriers included), the
window the limiter learnt and the stragglers it copied. `where_the_time_went` splits the time
from the first request to the exit as the server saw it (`diagnosis`). The answers come from the
offline simulator: this measures the machinery, never the method.

    python benchmarks/quota_saturation.py          # ttc batch: 600 and 3,000 RPM, clean and faulty
    python benchmarks/quota_saturation.py --rpm 3000 --faults on
    python benchmarks/quota_saturation.py --client engine --rpm 600 [--faults off] [--learn]
    python benchmarks/quota_saturation.py --rpm 3000 --minutes 5 --kinds bucket-newest,fixed
    python benchmarks/quota_saturation.py --client loop --limiter aiolimiter --rpm 3000
    python benchmarks/quota_saturation.py --clients 4 --rpm 1200 --kinds sliding-newest --faults off
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from _serving import RedisProcess, ServeProcess
from aiolimiter import AsyncLimiter

from ttc.adapters import OpenAIProvider, ReasoningGymSuite
from ttc.engine import Engine, Limiter, ProviderError, RateLimited, RunConfig

FAULTS = {"500": 0.02, "503": 0.02, "reset": 0.01, "truncated": 0.01, "hang": 0.005}
KEY_ENV = "TTC_QUOTA_BENCH_KEY"
KINDS = ("sliding-newest", "sliding-oldest", "fixed", "bucket-newest", "bucket-oldest")


def batch_input(path: Path, n: int, tag: str = "") -> None:
    """`n` chat requests in the Batch input format (generic prompts: the sim answers prose; each
    its own, `tag` telling clients apart, so the server's `answered_again` finds any sent twice)."""
    with path.open("wb") as out:
        for i in range(n):
            text = f"Say hello, {tag}{i}."
            body = {"model": "sim", "messages": [{"role": "user", "content": text}]}
            line = {"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions"}
            out.write(orjson.dumps({**line, "body": body}) + b"\n")


def run_batch(url: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """`ttc batch` in its own process (`--clients` of them, each with its share of the requests,
    on one quota shared through `--shared` Redis); what they answered, and when the last
    exited."""
    clients = args.clients
    started = time.time()
    procs = []
    for c in range(clients):
        inp, out = tmp / f"input{c}.jsonl", tmp / f"output{c}.jsonl"
        batch_input(inp, args.requests // clients + (c < args.requests % clients), f"{c}-")
        command = [sys.executable, "-m", "ttc.engine.cli", "batch", str(inp), "--out", str(out)]
        command += ["--base-url", url + "/v1", "--api-key-env", KEY_ENV, "--quiet"]
        command += ["--rpm", str(args.rpm), "--concurrency", str(args.concurrency)]
        command += ["--timeout", str(args.timeout)]
        if args.shared:
            command += ["--shared-limits", args.shared]
        if args.hedge:
            command += ["--hedge"]
        env = {**os.environ, KEY_ENV: "sk-sim"}
        procs.append(
            subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        )
    answered, twice = 0, 0
    for c, proc in enumerate(procs):
        stdout, stderr = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"ttc batch exited {proc.returncode}:\n{stdout!r}\n{stderr!r}")
        lines = [
            orjson.loads(line) for line in (tmp / f"output{c}.jsonl").read_bytes().splitlines()
        ]
        ids = Counter(line["custom_id"] for line in lines)
        answered += len(
            {
                line["custom_id"]
                for line in lines
                if line["response"] is not None and line["response"]["status_code"] == 200
            }
        )
        twice += sum(1 for n in ids.values() if n > 1)
    return {
        "started": started,
        "exited": time.time(),
        "answered": answered,
        "answered_twice": twice,
        **({"clients": clients, "shared_limits": "redis"} if args.shared else {}),
        **({"hedge": True} if args.hedge else {}),
    }


async def engine_run(url: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """`unif` over Reasoning Gym in this process; what it answered, and when it ended."""
    suite = ReasoningGymSuite(per_task=args.per_task)
    items = suite.items()
    config = RunConfig(
        method="unif",
        rounds=args.rounds,
        concurrency=args.concurrency,
        rpm=None if args.learn else args.rpm,
        timeout_s=args.timeout,
        verifier_workers=1,
    )
    started = time.time()
    provider = OpenAIProvider("sim", base_url=url + "/v1")
    try:
        async with Engine(provider, suite, config, out_dir=out) as engine:
            await engine.verifiers.ready()
            result = await engine.run(items)
            limiter = engine.limiter
    finally:
        await provider.aclose()
    exited = time.time()
    window = limiter.window
    rounds_wall = sum(s.wall_s for s in result.rounds)
    answered = sum(s.samples - s.errors for s in result.rounds)
    return {
        "started": started,
        "exited": exited,
        "answered": answered,
        "engine_wall_s": round(rounds_wall, 2),
        "engine_fraction": round(answered / rounds_wall * 60 / args.rpm, 4),
        "window_learnt": None
        if window is None
        else {"seconds": round(window.seconds, 3), "budget": window.budget, "kind": window.kind},
        "stragglers_copied": limiter.stragglers.hedges,
        "concurrency_cuts": limiter.cuts,
    }


def aio_bucket(args: argparse.Namespace) -> Any:
    """The `AsyncLimiter` that `--limiter` names, or None for ttc's own `Limiter`."""
    if args.limiter == "own":
        return None
    rate = args.rpm / 60
    if args.limiter == "aiolimiter":
        # A bucket of a fraction of a second of the rate (98% of it, as ttc's pace) absorbs the
        # loop's lateness; any window then holds at most the limit plus that fraction.
        return AsyncLimiter(0.98 * rate * args.bucket_s, args.bucket_s)
    return AsyncLimiter(math.floor(rate * args.window), args.window)


async def post_once(
    provider: OpenAIProvider, own: Limiter, bucket: Any, body: dict[str, Any], seconds: float
) -> bool:
    """One attempt through the rate holder: whether it was answered (a 429 waits its
    retry-after)."""
    async with contextlib.AsyncExitStack() as stack:
        ticket = None
        if bucket is None:
            ticket = await stack.enter_async_context(own.slot())
        else:
            await bucket.acquire()
        try:
            async with asyncio.timeout(seconds):
                _, _, info = await provider.post_json("/chat/completions", body)
        except RateLimited as exc:
            if ticket is not None:
                own.rate_limited(ticket, exc.rate)
            await asyncio.sleep(min(60.0, exc.retry_after or 1.0))
            return False
        except (ProviderError, TimeoutError):
            return False
        if ticket is not None:
            own.succeeded(info)
        return True


async def loop_run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    """A bare client: `--concurrency` workers, each request retried until answered; the rate
    held by `--limiter`. What it answered, and when it ended."""
    provider = OpenAIProvider("sim", base_url=url + "/v1", api_key="sk-sim")
    own = Limiter(rpm=args.rpm, max_concurrency=args.concurrency)
    bucket = aio_bucket(args)
    todo = iter(range(args.requests))
    answered = 0

    async def worker() -> None:
        nonlocal answered
        for i in todo:
            body = {"model": "sim", "messages": [{"role": "user", "content": f"Say hello, {i}."}]}
            while not await post_once(provider, own, bucket, body, args.timeout):
                pass
            answered += 1

    started = time.time()
    try:
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    finally:
        await provider.aclose()
    window = own.window if bucket is None else None
    return {
        "started": started,
        "exited": time.time(),
        "answered": answered,
        "limiter": args.limiter,
        **({"bucket_s": args.bucket_s} if args.limiter == "aiolimiter" else {}),
        "window_learnt": None
        if window is None
        else {"seconds": round(window.seconds, 3), "budget": window.budget, "kind": window.kind},
    }


def diagnosis(
    stats: dict[str, Any], answered: int, exited: float, rpm: int, window: float, timeout: float
) -> dict[str, Any]:
    """Where the time from the first request to the exit went, in seconds, as the server saw it.

    A sliding window admits `budget` requests at once and then `rate` per second, so `answered`
    requests need at least `(answered - budget) / rate` seconds of sending (`ideal_sending_s`).
    The requests the server saw are split at the second by which 99% had arrived: the `bulk`,
    which takes `extra_requests_s` for the requests beyond one per answer (retries of faults,
    429s, stragglers' copies: a rate unit each) and `slower_than_window_s` for sending below what
    the window admits (pacing headroom, a gate closed on `remaining` 0, the loop's lateness);
    then the `late` 1% (retries after a hang's timeout or a backoff), the `tail` from the last
    request to the last response, and the `exit` after it. `last_hang_s`: when the last request
    drawn to hang arrived; its retry comes no sooner than the timeout after it, so the run
    lasts at least `hang_floor_s` (unless a copy of it, `--hedge`, was answered) whatever the
    quota allows.
    """
    rate = rpm / 60
    budget = int(rpm * window / 60)
    sent = stats["requests"]
    first, last_request = stats["first_request_at"], stats["last_request_at"]
    faults = sum(stats["by_fault"].values())
    copies = sent - answered - faults - stats["rate_limited"]
    seen, bulk_s, bulk = 0, 0.0, 0
    for second, count in enumerate(stats["per_second"]):
        seen += count
        if seen >= 0.99 * sent:
            bulk_s, bulk = float(second + 1), seen
            break
    return {
        "ideal_sending_s": round(max(0.0, (answered - budget) / rate), 2),
        "extra_requests": {"faults": faults, "http_429": stats["rate_limited"], "copies": copies},
        "extra_requests_s": round((sent - answered) / rate, 2),
        "bulk_s": bulk_s,
        "slower_than_window_s": round(bulk_s - max(0.0, (bulk - budget) / rate), 2),
        "late_s": round(max(0.0, last_request - first - bulk_s), 2),
        "tail_s": round(stats["last_response_at"] - last_request, 2),
        "exit_s": round(exited - stats["last_response_at"], 2),
        **(
            {
                "last_hang_s": round(stats["last_hang_at"] - first, 2),
                "hang_floor_s": round(stats["last_hang_at"] - first + timeout, 2),
            }
            if stats.get("last_hang_at")
            else {}
        ),
    }


def server_flags(args: argparse.Namespace) -> list[str]:
    kind, _, means = args.kind.partition("-")
    flags = ["--rpm", str(args.rpm), "--window", str(args.window), "--seed", str(args.seed)]
    flags += ["--limit-kind", kind, "--reset-means", means or "newest"]
    flags += ["--latency", str(args.latency), "--latency-sigma", str(args.latency_sigma)]
    flags += ["--per-task", str(args.per_task), "--quiet"]
    if args.faults:
        for kind, p in FAULTS.items():
            flags += [f"--fault-{kind}", str(p)]
    return flags


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--client", choices=("batch", "engine", "loop"), default="batch")
    parser.add_argument(
        "--kinds",
        type=lambda text: text.split(","),
        default=list(KINDS),
        help=f"the server's kinds of limit, comma-separated: one line each ({','.join(KINDS)})",
    )
    parser.add_argument(
        "--limiter",
        choices=("own", "aiolimiter", "aiolimiter-window"),
        default="own",
        help="loop: what holds the rate (see above)",
    )
    parser.add_argument(
        "--bucket-s", type=float, default=0.2, help="loop: aiolimiter's bucket, seconds of rate"
    )
    parser.add_argument(
        "--minutes", type=float, default=1.0, help="how many minutes of requests (1)"
    )
    parser.add_argument(
        "--rpm",
        type=lambda text: [int(x) for x in text.split(",")],
        default=[600, 3000],
        help="the server's limits per minute, comma-separated: one line each (600,3000)",
    )
    parser.add_argument(
        "--faults",
        choices=("both", "on", "off"),
        default="both",
        help="the issue's faults (see above): a clean line and a faulty one (both), or one",
    )
    parser.add_argument("--requests", type=int, help="how many (default: --minutes of --rpm)")
    parser.add_argument("--window", type=float, default=6.0, help="the server's window, seconds")
    parser.add_argument("--latency", type=float, default=0.8, help="median latency, seconds")
    parser.add_argument("--latency-sigma", type=float, default=0.6)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per attempt")
    parser.add_argument("--seed", type=int, default=0, help="the server's faults and latencies")
    parser.add_argument(
        "--clients",
        type=int,
        default=1,
        help="batch: N `ttc batch` processes splitting the requests, sharing one quota through "
        "a redis-server of their own (--shared-limits; N > 1 only)",
    )
    parser.add_argument(
        "--hedge",
        action="store_true",
        help="batch: ttc batch --hedge (stragglers' copies once the input has run out; each a "
        "request the server may answer twice)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="engine: rounds the requests span")
    parser.add_argument(
        "--learn", action="store_true", help="engine: no --rpm, learnt from the headers"
    )
    args = parser.parse_args()
    unknown = set(args.kinds) - set(KINDS)
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(sorted(unknown))} (known: {', '.join(KINDS)})")
    if args.clients < 1 or (args.clients > 1 and args.client != "batch"):
        parser.error("--clients: at least 1, and more than 1 only with --client batch")
    return args


def main() -> None:
    parsed = parse()
    cases = {"both": [False, True], "on": [True], "off": [False]}[parsed.faults]
    for kind in parsed.kinds:
        for rpm in parsed.rpm:
            for faults in cases:
                changed = {"rpm": rpm, "faults": faults, "kind": kind}
                args = argparse.Namespace(**{**vars(parsed), **changed})
                args.requests = parsed.requests or round(rpm * parsed.minutes)
                # Reasoning Gym has 4 tasks: enough questions for one request each, every round.
                args.per_task = math.ceil(args.requests / args.rounds / 4)
                measure(args)


def measure(args: argparse.Namespace) -> None:
    """One line: the client against `ttc serve` at `args.rpm`, with or without the faults."""
    with contextlib.ExitStack() as stack:
        redis = stack.enter_context(RedisProcess()) if args.clients > 1 else None
        args.shared = None if redis is None else redis.url
        line = measured(args)
    sys.stdout.write(orjson.dumps(line).decode() + "\n")


def measured(args: argparse.Namespace) -> dict[str, Any]:
    """The client against `ttc serve` at `args.rpm`: its line."""
    with ServeProcess(*server_flags(args)) as server, tempfile.TemporaryDirectory() as tmp:
        if args.client == "batch":
            seen = run_batch(server.url, args, Path(tmp))
        elif args.client == "loop":
            seen = asyncio.run(loop_run(server.url, args))
        else:
            seen = asyncio.run(engine_run(server.url, args, Path(tmp) / "run"))
        stats = server.stats()
    first = stats["first_request_at"]
    exited = seen.pop("exited")
    wall = exited - first
    answered = seen["answered"]
    line = {
        "benchmark": "quota_saturation",
        "simulated": True,
        "note": "ttc serve answers with the sim model: measures the machinery, not the method",
        "client": args.client,
        "limit_kind": args.kind,
        "limit_rpm": args.rpm,
        "server_window_s": args.window,
        "latency_median_s": args.latency,
        "latency_sigma": args.latency_sigma,
        "faults": FAULTS if args.faults else None,
        "timeout_s": args.timeout,
        "seed": args.seed,
        "requests": args.requests,
        "load_average_1m": round(os.getloadavg()[0], 2),
        **(
            {"engine_rpm_setting": None if args.learn else args.rpm}
            if args.client == "engine"
            else {}
        ),
        "answered": answered,
        "first_request_to_exit_s": round(wall, 2),
        "fraction_of_limit": round(answered / wall * 60 / args.rpm, 4),
        # The rate the server saw while requests came (first to last; no start-up or last
        # answers' latency): what N clients sharing one quota hold together.
        "sending_fraction_of_limit": round(
            (stats["requests"] - 1) / max(1e-9, stats["last_request_at"] - first) * 60 / args.rpm,
            4,
        ),
        "startup_s": round(first - seen.pop("started"), 2),
        "last_response_to_exit_s": round(first + wall - stats["last_response_at"], 2),
        "server_requests": stats["requests"],
        "server_answers": stats["ok"],
        "server_answered_again": stats["answered_again"],
        "server_faults": {k: v for k, v in stats["by_fault"].items() if v},
        "http_429": stats["rate_limited"],
        "share_429": round(stats["rate_limited"] / max(1, stats["requests"]), 4),
        **seen,
        "where_the_time_went": diagnosis(
            stats, answered, exited, args.rpm, args.window, args.timeout
        ),
    }
    return line


if __name__ == "__main__":
    main()
