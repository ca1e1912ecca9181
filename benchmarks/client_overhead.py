"""What ttc's client costs per request, against the least a client can do, on a server ttc did
not write.

A minimal aiohttp server (this file's `serve` role: one fixed chat completion, no rate limit, no
latency) runs in its own process. Three clients then send the same `--count` requests to it at
`--concurrency`, one after the other, each in its own process:

- `bare`: one aiohttp session, orjson, `--concurrency` coroutines that post and parse;
- `batch`: `ttc batch` on an OpenAI Batch input of the same requests (limiter, retries, journal,
  output file);
- `engine`: the engine's warm-up round (`unif`, one round) over `--count` generated questions
  through `OpenAIProvider`: prompts, limiter, journal, the verdicts from worker processes; its
  process tunes the garbage collector as the `ttc` command does for `ttc run` and `ttc batch`
  (`ttc.engine.cli.tune_collector`). The bare loop keeps Python's defaults: with the same
  tuning it would spend some 8% less CPU (its collections cost 0.35-0.38 s per 20,000
  requests here).

Each client's CPU (user + system) and peak RSS are its whole process's, read from `wait4` when
it exits (start-up included, as a user pays it: ttc's modules are compiled to bytecode before
the first client starts, as installing a wheel of ttc compiles them, and as the bare loop's
aiohttp was); the engine's verifier processes are not its own and are left out (it reports its
own process's figures). Prints one JSON line with each client's requests per second, CPU seconds
per 1,000 requests and peak RSS, and the ratios to the bare loop measured in the same run. No
model answers: this measures the machinery, never the method.

`--guard X` exits 1 when `ttc batch`'s CPU per request passes X times the bare loop's (CI runs it
on a small count with a wide margin: a regression guard on CPU time, not a timing test).

`--repeat N` runs the clients N times over, in turn (bare, batch, engine, bare, batch, ...), so
that each sitting's ratios are taken within a few seconds: a shared machine's speed drifts by a
quarter from minute to minute here. Each client's figures are then its medians, each ratio the
median of the N sittings' ratios, with its range in `ratio_ranges`.

`--before CHECKOUT` runs another checkout's `ttc batch` (a worktree at an older commit, say) as
client `before`, right after `batch` (and `batch_otel`) in every sitting, on the same input and
server, its checkout first on its PYTHONPATH: the line names its commit and gives its ratios to
the bare loop and to this checkout's `ttc batch` (`batch_req_per_s_vs_before` above 1: this one
is faster; `--clients` must include `batch`). A before and after measured side by side, by one
command.

`--otel` runs `batch` and `engine` a second time each with their spans on (`--otel`: a span per
attempt, exported by the SDK's batch processor over OTLP/HTTP to the reference server, which drops
them), as `batch_otel` and `engine_otel`, with their ratios to the same client with spans off.

    python benchmarks/client_overhead.py [--count 20000] [--concurrency 256] [--repeat N]
        [--guard 2.5] [--otel] [--before CHECKOUT]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

ANSWER = "The answer is \\boxed{42}."


def question(i: int) -> str:
    """The i-th question's text, the same in every client. Here, not in `_sums`, which imports
    ttc: the bare loop imports nothing of ttc."""
    return f"What is {i} plus {i}?"


_BODY = {
    "id": "chatcmpl-0",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28},
}


def serve(port: int) -> None:
    """The reference server: aiohttp, one fixed answer, ready when it prints its URL."""
    from aiohttp import web

    body = orjson.dumps(_BODY)

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="application/json")

    async def traces(request: web.Request) -> web.Response:
        await request.read()  # --otel's spans: taken, and dropped
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/traces", traces)

    def said(*_: object) -> None:
        print("ready", flush=True)

    web.run_app(app, host="127.0.0.1", port=port, print=said, access_log=None)


async def bare(url: str, count: int, concurrency: int) -> None:
    """The plainest client: post, read, parse, next."""
    import aiohttp

    endpoint = url + "/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer unused"}
    next_index = 0
    ok = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal next_index, ok
        while next_index < count:
            i = next_index
            next_index += 1
            body = {"model": "m", "messages": [{"role": "user", "content": question(i)}]}
            async with session.post(endpoint, data=orjson.dumps(body), headers=headers) as r:
                answer = orjson.loads(await r.read())
                ok += r.status == 200 and bool(answer["choices"])

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    if ok != count:
        raise SystemExit(f"bare loop: {ok} of {count} requests answered")


async def engine(url: str, count: int, concurrency: int, out: Path, otel: bool = False) -> None:
    """The engine's warm-up round over `count` questions, then this process's own figures;
    `otel`: with its spans (`SpanObserver`) exported over OTLP/HTTP to the reference server, by
    the SDK's batch processor, as `ttc run --otel` does."""
    from _sums import Sums

    from ttc.adapters import OpenAIProvider
    from ttc.engine import Engine, EngineOptions, RunConfig
    from ttc.engine.cli import tune_collector

    tune_collector()  # the collector as `ttc run` (and `ttc batch`) set it in their process
    suite = Sums(count)
    items = suite.items()
    config = RunConfig(method="unif", rounds=1, concurrency=concurrency, verifier_workers=1)
    provider = OpenAIProvider("m", base_url=url)
    tracer_provider, options = None, EngineOptions()
    if otel:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from ttc.engine.run import SpanObserver

        tracer_provider = TracerProvider()
        exporter = OTLPSpanExporter(endpoint=url.removesuffix("/v1") + "/v1/traces")
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        tracer = tracer_provider.get_tracer("overhead")
        observer = SpanObserver(tracer, provider="openai", model="m", method="unif")
        options = EngineOptions(observer=observer)
    try:
        async with Engine(provider, suite, config, out_dir=out, options=options) as run:
            result = await run.run(items)
    finally:
        await provider.aclose()
        if tracer_provider is not None:
            tracer_provider.shutdown()  # the last spans sent: counted in this process's CPU
    sent = sum(s.requests for s in result.rounds)
    if sent != count or result.coverage != 1.0:
        raise SystemExit(f"engine: {sent} of {count} requests, coverage {result.coverage}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(orjson.dumps({"cpu_s": usage.ru_utime + usage.ru_stime, "rss_kb": usage.ru_maxrss}))


def _run_role(command: Sequence[str], env: dict[str, str]) -> dict[str, Any]:
    """Runs one client to its end: wall seconds, and CPU seconds and peak RSS from wait4."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        # stdout is short (the role's figures); stderr goes to a file, so no pipe fills up. Run
        # from elsewhere than the checkout: `python -m` puts its working folder first on the path,
        # which would load this checkout's ttc over the one PYTHONPATH names.
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=err, env=env, cwd=tempfile.gettempdir()
        ) as proc:
            assert proc.stdout is not None
            out = proc.stdout.read()
            _, status, usage = os.wait4(proc.pid, 0)  # reaped here, for its rusage
            proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            err.seek(0)
            said = err.read().decode(errors="replace")[-3000:]
            raise SystemExit(f"{' '.join(command[:5])} failed ({proc.returncode}):\n{said}")
    figures: dict[str, Any] = {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_kb": usage.ru_maxrss,
    }
    lines = out.decode().strip().splitlines()
    if lines and lines[-1].startswith("{"):
        figures |= orjson.loads(lines[-1])  # the role's own process only (the engine's)
    return figures


def _batch_input(path: Path, count: int) -> None:
    with path.open("wb") as fh:
        for i in range(count):
            body = {"model": "m", "messages": [{"role": "user", "content": question(i)}]}
            line = {"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions"}
            fh.write(orjson.dumps(line | {"body": body}) + b"\n")


def _row(figures: dict[str, Any], count: int) -> dict[str, float]:
    return {
        "req_per_s": round(count / figures["wall_s"], 1),
        "cpu_s_per_1000": round(1000 * figures["cpu_s"] / count, 4),
        "peak_rss_mb": round(figures["rss_kb"] / 1024, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20_000, help="requests per client")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--clients", default="bare,batch,engine", help="which, comma-separated")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="sittings: every client N times, in turn; medians reported (default 1)",
    )
    parser.add_argument(
        "--guard", type=float, default=None, help="fail when batch CPU/request > X × bare's"
    )
    parser.add_argument("--role", choices=("serve", "bare", "engine"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument(
        "--before",
        type=Path,
        metavar="CHECKOUT",
        help="another checkout of ttc (e.g. a worktree at an older commit): its `ttc batch` runs "
        "as client `before`, after `batch` in every sitting",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help="also run each of batch and engine with --otel (spans over OTLP/HTTP to the "
        "reference server), as batch_otel and engine_otel",
    )
    args = parser.parse_args(argv)
    if args.role == "serve":
        serve(args.port)
        return 0
    if args.role == "bare":
        asyncio.run(bare(args.url, args.count, args.concurrency))
        return 0
    if args.role == "engine":
        asyncio.run(engine(args.url, args.count, args.concurrency, Path(args.out), args.otel))
        return 0
    clients = [c for c in args.clients.split(",") if c]
    unknown = set(clients) - {"bare", "batch", "engine"}
    if unknown or "bare" not in clients:
        parser.error(f"--clients: bare and any of batch, engine, got {args.clients!r}")
    if args.repeat < 1:
        parser.error(f"--repeat: at least 1, got {args.repeat}")
    if args.otel:  # each traced client right after its plain one, in the same few seconds
        clients = [t for c in clients for t in ([c, f"{c}_otel"] if c != "bare" else [c])]
    if args.before is not None:
        args.before_module = _cli_module(args.before)
        if args.before_module is None:
            parser.error(f"--before: {args.before} is not a checkout of ttc (no ttc/engine CLI)")
        if "batch" not in clients:
            parser.error(
                "--before: measured beside this checkout's `ttc batch`: add batch to --clients"
            )
        # Right after this checkout's batch (and its traced run: each traced client right
        # after its plain one).
        last = "batch_otel" if "batch_otel" in clients else "batch"
        clients.insert(clients.index(last) + 1, "before")
    return _compare(args, clients)


def _cli_module(checkout: Path) -> str | None:
    """The module that runs the `ttc` command in `checkout` (its place moved once), or None."""
    engine = checkout / "ttc" / "engine"
    if (engine / "cli" / "__main__.py").is_file():
        return "ttc.engine.cli"
    if (engine / "_cli.py").is_file():  # before the command had a package of its own
        return "ttc.engine._cli"
    return None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Compiles every module of the ttc the clients import (symbolic links to folders followed, as
# the checkout's `ttc/` has them), and of the folders named after it, to bytecode beside its
# source.
# Prints how many files it compiled (or found compiled) and how many it could not.
_COMPILE = """
import compileall, os, sys, ttc
done = failed = 0
for root in [*ttc.__path__, *sys.argv[1:]]:
    for folder, _, names in os.walk(root, followlinks=True):
        for name in names:
            if name.endswith(".py"):
                ok = compileall.compile_file(os.path.join(folder, name), quiet=2)
                done, failed = done + bool(ok), failed + (not ok)
print(done, failed)
"""


def _compile_ttc(env: dict[str, str], *, scripts: bool = True) -> dict[str, int]:
    """ttc's modules compiled to bytecode before the first client starts, as installing a
    wheel compiles them: from a fresh checkout, or with PYTHONDONTWRITEBYTECODE set, every
    `ttc batch` and engine process would compile ttc's sources again at start-up (some 0.09 s
    of CPU each here), while the bare loop's aiohttp was compiled when it was installed. The
    bytecode is written beside the sources even under PYTHONDONTWRITEBYTECODE. Where it cannot
    be (a read-only install), the clients compile at start-up as they would for a user: the
    line's `ttc_bytecode` counts the files compiled and those that could not be, and stderr
    says so. `scripts`: this folder's modules too (the bare loop's and the engine's roles)."""
    here = [str(Path(__file__).resolve().parent)] if scripts else []
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE, *here],
        env=env,
        cwd=tempfile.gettempdir(),  # the ttc the clients import, not the working folder's
        capture_output=True,
        text=True,
        check=False,
    )
    words = done.stdout.split()
    if done.returncode != 0 or len(words) != 2:
        print(f"client_overhead: ttc's modules not compiled: {done.stderr[-500:]}", file=sys.stderr)
        return {"compiled": 0, "failed": -1}
    compiled, failed = int(words[0]), int(words[1])
    if failed:
        print(
            f"client_overhead: {failed} of ttc's modules could not be compiled (their clients "
            "compile them at start-up)",
            file=sys.stderr,
        )
    return {"compiled": compiled, "failed": failed}


def _compare(args: argparse.Namespace, clients: list[str]) -> int:
    me = [sys.executable, str(Path(__file__).resolve())]
    # A key as long as a real one: what ttc does with a key (redaction) is part of the cost.
    env = dict(os.environ, OPENAI_API_KEY="sk-overhead-" + "0123456789abcdef" * 3)
    port = _free_port()
    # --otel's spans go to the reference server, which drops them.
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [*me, "--role", "serve", "--port", str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        if "ready" not in server.stdout.readline():
            raise SystemExit("the reference server did not start")
        url = f"http://127.0.0.1:{port}/v1"
        bytecode = _compile_ttc(env)
        envs = {client: env for client in clients}
        before: dict[str, Any] = {}
        if args.before is not None:  # the other checkout's ttc, compiled as this one's is
            path = os.pathsep.join(
                p for p in (str(args.before.resolve()), env.get("PYTHONPATH")) if p
            )
            envs["before"] = dict(env, PYTHONPATH=path)  # first: its ttc, not this one
            before = {
                "path": str(args.before),
                "git": _commit(args.before),
                "ttc_bytecode": _compile_ttc(envs["before"], scripts=False),
            }
        sittings: list[dict[str, dict[str, float]]] = []
        with tempfile.TemporaryDirectory(prefix="ttc-overhead-") as tmp:
            work = Path(tmp)
            _batch_input(work / "in.jsonl", args.count)
            for sitting in range(args.repeat):
                rows: dict[str, dict[str, float]] = {}
                for client in clients:
                    rows[client] = _run_client(client, work / str(sitting), args, url, envs[client])
                    if client.startswith("batch") or client == "before":
                        out = work / str(sitting) / f"{client}.jsonl"
                        _check_batch_output(out, args.count, client)
                sittings.append(rows)
    finally:
        server.terminate()
        server.wait(timeout=10)
    line = _report(sittings, args) | {"ttc_bytecode": bytecode}
    if before:
        line["before_checkout"] = before
    print(orjson.dumps(line).decode())
    if args.guard is not None and "batch_cpu_per_request" in line["ratios"]:
        ratio = line["ratios"]["batch_cpu_per_request"]
        if ratio > args.guard:
            print(
                f"client_overhead: ttc batch costs {ratio:.2f}x the bare loop's CPU per request "
                f"(guard {args.guard:g}x)",
                file=sys.stderr,
            )
            return 1
    return 0


def _run_client(
    client: str, work: Path, args: argparse.Namespace, url: str, env: dict[str, str]
) -> dict[str, float]:
    """One client's run to its end, its files under `work`: its row of figures."""
    work.mkdir(exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    concurrency = str(args.concurrency)
    common = ["--url", url, "--count", str(args.count), "--concurrency", concurrency]
    traced = client.endswith("_otel")
    if client == "bare":
        command = [*me, "--role", "bare", *common]
    elif client.startswith("batch") or client == "before":
        module = args.before_module if client == "before" else "ttc.engine.cli"
        command = [sys.executable, "-m", module, "batch", str(work.parent / "in.jsonl")]
        command += ["--out", str(work / f"{client}.jsonl"), "--base-url", url, "--quiet"]
        command += ["--concurrency", concurrency]
        command += ["--otel"] if traced else []
    else:
        command = [*me, "--role", "engine", *common, "--out", str(work / client)]
        command += ["--otel"] if traced else []
    return _row(_run_role(command, env), args.count)


def _check_batch_output(path: Path, count: int, client: str) -> None:
    answered = 0
    with path.open("rb") as fh:
        for raw in fh:
            answered += orjson.loads(raw)["response"]["status_code"] == 200
    if answered != count:
        who = "ttc batch" if client.startswith("batch") else f"{client}'s ttc batch"
        raise SystemExit(f"{who}: {answered} of {count} requests answered")


def _ratios(rows: dict[str, dict[str, float]]) -> dict[str, float]:
    """One sitting's ratios: each client against the bare loop, the engine against `ttc batch`,
    this checkout's `ttc batch` against the other's (--before), and each traced client against
    its plain one."""
    base = rows["bare"]
    ratios: dict[str, float] = {}
    for client in ("batch", "engine", "before"):
        if client in rows:
            row = rows[client]
            ratios[f"{client}_req_per_s"] = round(row["req_per_s"] / base["req_per_s"], 3)
            ratios[f"{client}_cpu_per_request"] = round(
                row["cpu_s_per_1000"] / base["cpu_s_per_1000"], 3
            )
    if "batch" in rows and "engine" in rows:
        ratios["engine_cpu_per_request_vs_batch"] = round(
            rows["engine"]["cpu_s_per_1000"] / rows["batch"]["cpu_s_per_1000"], 3
        )
    if "batch" in rows and "before" in rows:  # --before: this checkout's against the other's
        ratios["batch_req_per_s_vs_before"] = round(
            rows["batch"]["req_per_s"] / rows["before"]["req_per_s"], 3
        )
        ratios["batch_cpu_per_request_vs_before"] = round(
            rows["batch"]["cpu_s_per_1000"] / rows["before"]["cpu_s_per_1000"], 3
        )
    for client in ("batch", "engine"):  # --otel: each traced client against its plain one
        if f"{client}_otel" in rows and client in rows:
            plain, traced = rows[client], rows[f"{client}_otel"]
            ratios[f"{client}_otel_req_per_s_vs_off"] = round(
                traced["req_per_s"] / plain["req_per_s"], 3
            )
            ratios[f"{client}_otel_cpu_per_request_vs_off"] = round(
                traced["cpu_s_per_1000"] / plain["cpu_s_per_1000"], 3
            )
    return ratios


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


def _report(
    sittings: list[dict[str, dict[str, float]]], args: argparse.Namespace
) -> dict[str, Any]:
    """The JSON line: one sitting's figures as they are; several sittings' as medians (each
    ratio the median of the sittings' own ratios, with its range)."""
    per_sitting = [_ratios(rows) for rows in sittings]
    rows = {
        client: {key: _median([s[client][key] for s in sittings]) for key in row}
        for client, row in sittings[0].items()
    }
    ratios = {key: _median([r[key] for r in per_sitting]) for key in per_sitting[0]}
    line: dict[str, Any] = {
        "benchmark": "client_overhead",
        "server": "aiohttp, one fixed answer, own process (not ttc serve)",
        "count": args.count,
        "concurrency": args.concurrency,
        "repeat": args.repeat,
        "load_1min": round(os.getloadavg()[0], 2),
        "git": _commit(),
        **rows,
        "ratios": ratios,
    }
    if len(sittings) > 1:
        line["ratio_ranges"] = {
            key: [min(r[key] for r in per_sitting), max(r[key] for r in per_sitting)]
            for key in ratios
        }
    return line


def _commit(checkout: Path | None = None) -> str:
    """The commit of `checkout`, by default of the ttc the clients import (PYTHONPATH may name
    another checkout)."""
    if checkout is None:
        import ttc

        checkout = Path(ttc.__file__).resolve().parent.parent
    try:
        found = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=checkout,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return "unknown"
    return found.stdout.strip() or "unknown"


if __name__ == "__main__":
    sys.exit(main())
