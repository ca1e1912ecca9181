"""`ttc batch`: an OpenAI Batch API input file, sent through the engine's limits and retries.

Each input line gets exactly one output line in the Batch output format. A response is final; a
request whose retries ran out gets an `error` line and is sent again by a later run on the same
output, which resumes from the journal by itself (a journal of another input is refused). An
interrupted run writes no output, only the journal. This module is the command (flags, Ctrl-C,
what is printed); how requests are sent is `_batchsend`, the files are `_batchio`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ttc.adapters.providers import VENDOR_URLS
from ttc.engine import ConfigError
from ttc.engine._util import redact_argv
from ttc.engine.cli._batchio import journal_path
from ttc.engine.cli._batchmode import add_batch_deadline
from ttc.engine.cli._batchsend import (
    BatchProgress,
    BatchSummary,
    RawProvider,
    SendPolicy,
    run_batch,
)
from ttc.engine.cli._control import BatchSteering, Controller, control_served, socket_path
from ttc.engine.cli._metrics import add_metrics, metrics_served
from ttc.engine.cli._otel import add_otel, traced
from ttc.engine.cli._provider_flags import add_hedge, add_max_response_bytes
from ttc.engine.cli._sharedflags import add_shared_limits, shared_quota
from ttc.engine.cli._usage import natural_float, positive_float, positive_int, ttc_command
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._retry import RetryPolicy

EXIT_INTERRUPTED = 130  # as `ttc run`
EXIT_PROVIDER = 4  # as `ttc run`: the provider refuses the account
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def add_batch_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `ttc batch` (named as those of `ttc run`)."""
    parser.add_argument("input", type=Path, metavar="INPUT", help="OpenAI Batch input JSONL")
    parser.add_argument("--out", type=Path, required=True, help="Batch output JSONL to write")
    parser.add_argument(
        "--base-url", default=VENDOR_URLS["openai"], help="API base URL, ending in /v1"
    )
    parser.add_argument(
        "--model", help="set (or override) every request body's model (default: each body's own)"
    )
    parser.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="the NAME of the environment variable holding the key (not the key)",
    )
    parser.add_argument(
        "--rpm", type=positive_float, help="requests per minute (default: unlimited)"
    )
    parser.add_argument("--tpm", type=positive_float, help="tokens per minute (default: unlimited)")
    parser.add_argument("--concurrency", type=positive_int, default=64, help="requests in flight")
    parser.add_argument("--timeout", type=positive_float, default=300.0, help="seconds per attempt")
    parser.add_argument("--max-attempts", type=positive_int, default=6, help="per request")
    add_hedge(parser, end="the input", batch="--via-batch-api")
    add_max_response_bytes(parser)
    add_shared_limits(parser)
    parser.add_argument(
        "--grace",
        type=natural_float,
        default=30.0,
        help="seconds the first Ctrl-C waits for requests in flight",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on from OUTPUT.journal (automatic when it exists for the same input)",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress log lines")
    add_metrics(parser)
    add_otel(parser)
    # Batch mode (issue 11): the input through the server's own Batch API (`_batchapi`).
    g = parser.add_argument_group("batch API")
    g.add_argument(
        "--via-batch-api",
        action="store_true",
        help="submit the input to the server's Batch API (upload, create, poll, read: half "
        "price, hours not minutes) instead of sending each request; journaled and resumable",
    )
    g.add_argument(
        "--batch-poll", type=positive_float, default=2.0, help="seconds before the first poll"
    )
    add_batch_deadline(g)


async def cmd_batch(args: argparse.Namespace) -> int:
    """`ttc batch INPUT --out OUTPUT`: 0 all lines written; 4 the provider refuses the account
    or requests ended in an error, 130 interrupted (all resumable)."""
    from ttc.adapters import Connection, OpenAIProvider
    from ttc.adapters.providers import require_env_name
    from ttc.engine.cli._provider_flags import key_named

    # Checked here, not by argparse, which would quote the value (it may be a key).
    require_env_name(args.api_key_env, "--api-key-env")
    if args.hedge and args.via_batch_api:
        raise ConfigError(
            "--hedge: the Batch API never sends a request twice (a batch has no stragglers to "
            "copy); drop --hedge or --via-batch-api"
        )
    if args.via_batch_api:  # what sends request by request, which the Batch API does not
        for flag, given in (("--otel", args.otel), ("--shared-limits", args.shared_limits)):
            if given:
                raise ConfigError(
                    f"{flag}: the Batch API is sent as one file, with no request of its own to "
                    f"trace or pace; drop {flag} or --via-batch-api"
                )
    cap = args.max_response_bytes
    # The model goes in each body; the provider's own is only for its messages.
    with key_named("ttc batch"):
        provider = OpenAIProvider(
            args.model or "batch",
            base_url=args.base_url,
            api_key_env=args.api_key_env,
            connection=Connection() if cap is None else Connection(max_response_bytes=cap),
        )
    try:
        if args.via_batch_api:
            from ttc.engine.cli._batchapi import via_batch_api

            return await via_batch_api(args, provider)
        return await batch_main(args, provider)
    finally:
        await provider.aclose()


def _resume_hint(args: argparse.Namespace) -> str:
    argv = getattr(args, "argv", None) or ["batch", str(args.input), "--out", str(args.out)]
    # A credential in --base-url is not printed: the user types it again.
    shown = redact_argv([a for a in argv if a != "--resume"])
    return f"{ttc_command()} {shlex.join([*shown, '--resume'])}"


class _CtrlC:
    """First Ctrl-C (or SIGTERM): `stop` is set, so no new requests; those in flight land for up
    to `grace_s`, then `task` is cancelled. Second: `task` is cancelled at once."""

    def __init__(self, task: asyncio.Task[Any], stop: asyncio.Event, grace_s: float) -> None:
        self.task, self.stop, self.grace_s = task, stop, grace_s
        self.loop = asyncio.get_running_loop()
        self.timer: asyncio.TimerHandle | None = None

    def pressed(self) -> None:
        if self.stop.is_set():
            self.task.cancel()
            return
        self.stop.set()
        print(
            f"\nttc: stopping: no new requests; waiting up to {self.grace_s:g} s for those in "
            "flight (Ctrl-C again to stop at once)",
            file=sys.stderr,
        )
        self.timer = self.loop.call_later(self.grace_s, self.task.cancel)

    def __enter__(self) -> _CtrlC:
        for sig in SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                self.loop.add_signal_handler(sig, self.pressed)
        return self

    def __exit__(self, *_: object) -> None:
        if self.timer is not None:
            self.timer.cancel()
        for sig in SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                self.loop.remove_signal_handler(sig)


async def batch_main(args: argparse.Namespace, provider: RawProvider) -> int:
    """`cmd_batch` with the provider given: signals, the run, and what is printed."""
    shared = shared_quota(args.shared_limits, args.quota_name, "openai", args.base_url, args.model)
    async with shared as quota:
        with metrics_served(args.metrics_port, args.metrics_addr) as metrics:
            limiter = Limiter(args.rpm, args.tpm, args.concurrency)
            limiter.hedge = args.hedge
            if quota is not None:
                limiter.share(quota)
            progress: BatchProgress | None = None
            if metrics is not None:  # counted as it is sent, the limiter read when scraped
                provider, progress = metrics.batch(provider, args.model)
                metrics.watch("batch", limiter, args.rpm, args.tpm)
            async with traced(bool(getattr(args, "otel", False)), "batch") as tracing:
                if tracing is not None:  # why each attempt waited, on its span
                    limiter.timing = True
                attempts = None if tracing is None else tracing.batch_attempts("openai")
                retry = RetryPolicy(max_attempts=args.max_attempts)
                steering = BatchSteering(limiter)
                policy = SendPolicy(limiter, retry, args.timeout, attempts, steering)
                progress = progress or BatchProgress()
                controller = Controller(limiter, steering.apply, _counts(progress))
                async with control_served(socket_path(args.out), controller):  # `ttc ctl OUT`
                    return await _batch_main(args, provider, policy, progress)


def _counts(progress: BatchProgress) -> Callable[[], dict[str, Any]]:
    def counts() -> dict[str, Any]:
        return {"done": progress.done, "total": progress.total, "per_minute": progress.per_minute()}

    return counts


async def _batch_main(
    args: argparse.Namespace,
    provider: RawProvider,
    policy: SendPolicy,
    progress: BatchProgress | None,
) -> int:
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_batch(
            args.input,
            args.out,
            provider,
            policy,
            resume=args.resume,
            model=args.model,
            progress=progress,
            stop=stop,
        )
    )
    summary: BatchSummary | None = None
    with _CtrlC(task, stop, args.grace):
        try:
            summary = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # cancelled from outside, not by our own Ctrl-C
    return _ending(args, summary)


def _ending(args: argparse.Namespace, summary: BatchSummary | None) -> int:
    """What is printed when the batch ends (or stops), and the exit code."""
    hint = _resume_hint(args)
    journal = journal_path(Path(args.out))
    if summary is not None and summary.refusal is not None:
        print(
            f"ttc: stopped: the provider refuses: {summary.refusal}; results so far are in "
            f"{journal}; go on with: {hint}",
            file=sys.stderr,
        )
        return EXIT_PROVIDER
    if summary is None or summary.interrupted:
        so_far = (
            ""
            if summary is None
            else f" ({sum(summary.counts.values()):,} of {summary.total:,} requests have a result)"
        )
        print(
            f"ttc: interrupted; results so far are in {journal}{so_far}; go on with: {hint}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    print_summary(summary)
    if summary.errors:
        commonest = ""
        if summary.cause is not None:
            why, count = summary.cause
            share = "all" if count == summary.errors else f"{count:,}"
            commonest = f" ({share} of them: {why})"
        print(
            f"ttc: {summary.errors:,} requests ended in an error{commonest}; send them again "
            f"with: {hint}",
            file=sys.stderr,
        )
        return EXIT_PROVIDER
    return 0


def print_summary(summary: BatchSummary) -> None:
    """The final counts: by status, tokens, rate limits, wall time, and where the output is."""
    by_status = ", ".join(f"{k} {n:,}" for k, n in sorted(summary.counts.items()))
    print(
        f"batch: {summary.total:,} requests: {summary.answered:,} answered, "
        f"{summary.refused:,} refused (4xx), {summary.errors:,} errors [{by_status}]"
    )
    print(
        f"sent {summary.sent:,} this run, {summary.replayed:,} final from the journal; "
        f"429s {summary.rate_limited}, retries {summary.retries}; tokens {summary.tokens:,}; "
        f"{summary.wall_s:.1f} s"
    )
    print(f"output: {summary.output}")
