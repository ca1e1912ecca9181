"""`ttc batch`: an OpenAI Batch API input file, sent through the engine's limits and retries.

    INPUT.jsonl ─► scan (every line validated, sha256) ─► journal (resume: skip final results)
       └─► lazy reader ─► bounded queue ─► workers ─► Sender.call_with_retry ─► post_json
                                                       └─► journal.record (one line, at once)
    every request landed ─► OUTPUT.jsonl in input order (temporary file, then rename)

Each input line gets exactly one output line in the Batch output format. A response (a 2xx
that is an answer, or a 4xx other than 429, recorded as OpenAI does) is final; a request whose
retries ran out (429, 5xx, timeouts, resets, a 2xx with no `choices` or `data` or with an
`error` object) or that failed fatally gets an `error` line and is sent again by a later run on
the same output, which resumes from the journal by itself (a journal of another input is
refused). An interrupted run writes no output, only the journal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import secrets
import shlex
import signal
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import orjson

from ttc.engine._errors import ConfigError, Fatal, ProviderError, RateLimited
from ttc.engine._limiter import Limiter
from ttc.engine._retry import RetryPolicy
from ttc.engine._scheduler import Sender
from ttc.engine._types import Provider, RateInfo
from ttc.engine.cli._batchio import (
    BatchJob,
    BatchJournal,
    iter_jobs,
    journal_path,
    scan_input,
    tally,
    usage_tokens,
)

log = logging.getLogger("ttc")

EXIT_INTERRUPTED = 130  # as `ttc run`
EXIT_PROVIDER = 4  # as `ttc run`: the provider refuses the account
OPENAI_BASE_URL = "https://api.openai.com/v1"

PostResult = tuple[int, Any, RateInfo | None]


class RawProvider(Protocol):
    """An endpoint that POSTs a JSON body as is (e.g. `ttc.adapters.OpenAIProvider`).

    `path` is relative to the provider's base URL (which ends in /v1). It raises RateLimited,
    Transient or Fatal for failures, a 2xx that is no answer among them (Transient: no `choices`
    for /chat/completions and /completions, no `data` for /embeddings, an `error` object), and
    returns (status, parsed body, rate) for a 2xx answer or for a request refused as bad (a 4xx
    other than 429), which is recorded, not retried.
    """

    async def post_json(self, path: str, body: dict[str, Any]) -> PostResult: ...


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """How a batch ended; `output` is None when it was interrupted (the journal holds it all)."""

    total: int
    sent: int  # requests that landed in this run
    replayed: int  # requests with a final result from an earlier run
    counts: Mapping[str, int]  # results by status code ("200", "400") or "error:<kind>"
    tokens: int
    rate_limited: int  # 429s met in this run
    retries: int
    wall_s: float
    output: Path | None
    journal: Path
    # Why the provider refused the account (a bad key, a quota), when it stopped the batch.
    refusal: str | None = None

    @property
    def interrupted(self) -> bool:
        return self.output is None

    @property
    def answered(self) -> int:
        return sum(n for k, n in self.counts.items() if k.startswith("2"))

    @property
    def errors(self) -> int:
        return sum(n for k, n in self.counts.items() if k.startswith("error:"))

    @property
    def refused(self) -> int:
        return sum(self.counts.values()) - self.answered - self.errors


class BatchProgress:
    """Counts a batch as it goes and logs a line every `every_s` seconds."""

    def __init__(self, every_s: float = 10.0) -> None:
        self.every_s = every_s
        self.total = self.done = self.sent = self.errors = self.tokens = 0
        self.rate_limited = self.retries = 0
        self._seen: deque[tuple[float, int]] = deque()  # (time, sent) for the achieved rate
        self._ticker: asyncio.Task[None] | None = None

    def start(self, total: int, done: int) -> None:
        """Begin logging (call inside the running loop)."""
        self.total, self.done = total, done
        self._seen.append((time.monotonic(), 0))
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    def retried(self, error: ProviderError) -> None:
        self.retries += 1
        self.rate_limited += isinstance(error, RateLimited)

    def landed(self, tokens: int, error: ProviderError | None) -> None:
        self.sent += 1
        self.done += 1
        self.tokens += tokens
        if error is not None:
            self.errors += 1
            self.rate_limited += isinstance(error, RateLimited)

    def per_minute(self) -> float:
        """Requests landed per minute over about the last minute."""
        now = time.monotonic()
        self._seen.append((now, self.sent))
        while len(self._seen) > 2 and self._seen[1][0] <= now - 60:
            self._seen.popleft()
        (t0, n0), (t1, n1) = self._seen[0], self._seen[-1]
        return (n1 - n0) * 60 / (t1 - t0) if t1 > t0 else 0.0

    def line(self) -> str:
        return (
            f"batch {self.done:,}/{self.total:,} | {self.per_minute():.0f} req/min | "
            f"429s {self.rate_limited} retries {self.retries} | errors {self.errors} | "
            f"tokens {self.tokens:,}"
        )

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.every_s)
            log.info("%s", self.line())

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None


class _Estimator:
    """A request's tokens for the TPM limit: its text / 4 plus its output cap (or the mean)."""

    def __init__(self) -> None:
        self.mean_output = 512.0
        self._seen = 0

    def estimate(self, job: BatchJob) -> int:
        body = job.body
        text = next((body[k] for k in ("messages", "input", "prompt") if k in body), None)
        prompt = len(orjson.dumps(text)) // 4 if text is not None else 0
        if job.url == "/v1/embeddings":
            return prompt
        cap = next(
            (
                v
                for k in ("max_completion_tokens", "max_tokens", "max_output_tokens")
                if isinstance(v := body.get(k), int) and v > 0
            ),
            None,
        )
        n = body.get("n")
        per_choice = cap if cap is not None else self.mean_output
        return prompt + math.ceil(per_choice * (n if isinstance(n, int) and n > 0 else 1))

    def account(self, result: PostResult) -> tuple[int, RateInfo | None]:
        """The tokens a response used, and its rate headers; feeds the mean output."""
        _, body, rate = result
        usage = body.get("usage") if isinstance(body, dict) else None
        if isinstance(usage, dict):
            out = usage.get("completion_tokens", usage.get("output_tokens"))
            if isinstance(out, int):
                self._seen += 1
                self.mean_output += (out - self.mean_output) / self._seen
        return usage_tokens(body), rate


def _ignore_retry(*_: object) -> None:
    """The Sender's per-job hook is unused: `call_with_retry` takes its own."""


async def run_batch(
    input_path: Path | str,
    output_path: Path | str,
    provider: RawProvider,
    *,
    limiter: Limiter,
    retry: RetryPolicy,
    timeout_s: float,
    resume: bool = False,
    model: str | None = None,
    progress: BatchProgress | None = None,
    stop: asyncio.Event | None = None,
) -> BatchSummary:
    """Sends every request of `input_path` not yet final in the journal; writes `output_path`.

    Raises DataError (bad input, named by line) or ConfigError before any request. Setting
    `stop` ends dispatching: requests in flight land, and the summary says `interrupted`.
    """
    input_path, output_path = Path(input_path), Path(output_path)
    if input_path.resolve() == output_path.resolve():
        raise ConfigError(f"--out: {output_path} is the input file")
    scan = scan_input(input_path, need_model=model is None)
    progress = progress or BatchProgress()
    stop = stop or asyncio.Event()
    refused: list[str] = []  # an account-wide refusal stops the batch (a bad key, a quota)
    estimator = _Estimator()
    # The engine's Sender only calls `provider.generate` in `send_with_retry`, unused here.
    sender = Sender(cast(Provider, provider), limiter, retry, timeout_s, _ignore_retry)
    started = time.perf_counter()
    with BatchJournal(journal_path(output_path), scan).open(resume=resume) as journal:
        pending = scan.count - journal.replayed
        if journal.replayed:
            log.info(
                "%s: %d of %d requests have a final result",
                journal.path,
                journal.replayed,
                scan.count,
            )

        async def send(job: BatchJob) -> None:
            body = job.body if model is None else {**job.body, "model": model}
            path = job.url.removeprefix("/v1")

            def hook(attempt: int, error: ProviderError, delay: float) -> None:
                progress.retried(error)
                log.debug(
                    "%s: attempt %d: %s; retry in %.1fs", job.custom_id, attempt, error, delay
                )

            async def call() -> PostResult:
                return await provider.post_json(path, body)

            # One name first: unpacking at once makes mypy infer T | None for the result.
            outcome = await sender.call_with_retry(
                estimator.estimate(job), call, estimator.account, hook
            )
            result, error, attempts = outcome
            out: dict[str, Any] = {
                "id": f"batch_req_{secrets.token_hex(16)}",
                "custom_id": job.custom_id,
            }
            if result is not None:
                status, data, _ = result
                out["response"] = {
                    "status_code": status,
                    # The raw interface returns no headers, so the request id is ours.
                    "request_id": f"req_{secrets.token_hex(16)}",
                    "body": data,
                }
                out["error"] = None
            else:
                assert error is not None
                out["response"] = None
                out["error"] = {"code": error.kind, "message": str(error)}
                if isinstance(error, Fatal) and error.stops_run and not refused:
                    refused.append(str(error)[:300])
                    log.warning("stopping: the provider refuses: %s", refused[0])
                    stop.set()
            journal.record(job.index, out, final=result is not None, attempts=attempts)
            progress.landed(usage_tokens(result[1]) if result else 0, error)

        progress.start(scan.count, journal.replayed)
        try:
            await _dispatch(journal, scan.path, send, limiter.max_concurrency, pending, stop)
        finally:
            await progress.stop()
        interrupted = progress.sent < pending
        counts, tokens = tally(journal, None if interrupted else output_path)
    return BatchSummary(
        total=scan.count,
        sent=progress.sent,
        replayed=journal.replayed,
        counts=dict(counts),
        tokens=tokens,
        rate_limited=progress.rate_limited,
        retries=progress.retries,
        wall_s=time.perf_counter() - started,
        output=None if interrupted else output_path,
        journal=journal.path,
        refusal=refused[0] if refused else None,
    )


async def _dispatch(
    journal: BatchJournal,
    input_path: Path,
    send: Callable[[BatchJob], Awaitable[None]],
    workers: int,
    pending: int,
    stop: asyncio.Event | None,
) -> None:
    """A bounded producer/consumer: the input is read only as fast as workers take requests."""
    workers = max(1, min(workers, pending))
    todo: asyncio.Queue[BatchJob | None] = asyncio.Queue(maxsize=2 * workers)

    def stopped() -> bool:
        return stop is not None and stop.is_set()

    async def worker() -> None:
        while (job := await todo.get()) is not None:
            if not stopped():  # queued before the stop: not sent
                await send(job)

    try:
        async with asyncio.TaskGroup() as tg:
            for _ in range(workers):
                tg.create_task(worker())
            for job in iter_jobs(input_path, journal.final):
                if stopped():
                    break
                await todo.put(job)
            for _ in range(workers):
                await todo.put(None)
    except BaseExceptionGroup as group:
        # One failure (a full disk, say) reads better as itself than as a group of one.
        if len(group.exceptions) == 1 and isinstance(group.exceptions[0], Exception):
            raise group.exceptions[0] from None
        raise


def _positive(kind: type[int] | type[float], zero: bool = False) -> Callable[[str], Any]:
    word = ("an integer" if kind is int else "a number") + (" >= 0" if zero else " > 0")

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {word}, got {text!r}") from None
        # Written so that NaN, which fails every comparison, is refused too.
        if not ((value >= 0 if zero else value > 0) and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"expected {word}, got {text!r}")
        return value

    return parse


def add_batch_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `ttc batch` (named as those of `ttc run`)."""
    parser.add_argument("input", type=Path, metavar="INPUT", help="OpenAI Batch input JSONL")
    parser.add_argument("--out", type=Path, required=True, help="Batch output JSONL to write")
    parser.add_argument("--base-url", default=OPENAI_BASE_URL, help="API base URL, ending in /v1")
    parser.add_argument("--model", help="set (or override) every request body's model")
    parser.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="the NAME of the environment variable holding the key (not the key)",
    )
    parser.add_argument("--rpm", type=_positive(float), help="requests per minute")
    parser.add_argument("--tpm", type=_positive(float), help="tokens per minute")
    parser.add_argument("--concurrency", type=_positive(int), default=64, help="requests in flight")
    parser.add_argument(
        "--timeout", type=_positive(float), default=300.0, help="seconds per attempt"
    )
    parser.add_argument("--max-attempts", type=_positive(int), default=6, help="per request")
    parser.add_argument(
        "--grace",
        type=_positive(float, zero=True),
        default=30.0,
        help="seconds the first Ctrl-C waits for requests in flight",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on from OUTPUT.journal (automatic when it exists for the same input)",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress log lines")


async def cmd_batch(args: argparse.Namespace) -> int:
    """`ttc batch INPUT --out OUTPUT`: 0 all lines written; 4 the provider refuses the account,
    130 interrupted (both resumable)."""
    from ttc.adapters.providers._http import require_env_name
    from ttc.adapters.providers._openai import OpenAIProvider

    # Checked here, not by argparse, which would quote the value (it may be a key).
    require_env_name(args.api_key_env, "--api-key-env")
    # The model goes in each body; the provider's own is only for its messages.
    provider = OpenAIProvider(
        args.model or "batch", base_url=args.base_url, api_key_env=args.api_key_env
    )
    try:
        return await batch_main(args, provider)
    finally:
        await provider.aclose()


def _resume_hint(args: argparse.Namespace) -> str:
    argv = getattr(args, "argv", None) or ["batch", str(args.input), "--out", str(args.out)]
    return "ttc " + shlex.join([a for a in argv if a != "--resume"] + ["--resume"])


async def batch_main(args: argparse.Namespace, provider: RawProvider) -> int:
    """`cmd_batch` with the provider given: signals, the run, and what is printed."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_batch(
            args.input,
            args.out,
            provider,
            limiter=Limiter(args.rpm, args.tpm, args.concurrency),
            retry=RetryPolicy(max_attempts=args.max_attempts),
            timeout_s=args.timeout,
            resume=args.resume,
            model=args.model,
            stop=stop,
        )
    )
    timer: asyncio.TimerHandle | None = None

    def on_signal() -> None:
        # First Ctrl-C: no new requests, those in flight land for up to --grace; second: at once.
        nonlocal timer
        if stop.is_set():
            task.cancel()
            return
        stop.set()
        print(
            f"\nttc: stopping: no new requests; waiting up to {args.grace:g} s for those in "
            "flight (Ctrl-C again to stop at once)",
            file=sys.stderr,
        )
        timer = loop.call_later(args.grace, task.cancel)

    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, on_signal)
    summary: BatchSummary | None = None
    try:
        summary = await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # cancelled from outside, not by our own Ctrl-C
    finally:
        if timer is not None:
            timer.cancel()
        for sig in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
    hint = _resume_hint(args)
    if summary is not None and summary.refusal is not None:
        print(
            f"ttc: stopped: the provider refuses: {summary.refusal}; results so far are in "
            f"{journal_path(Path(args.out))}; go on with: {hint}",
            file=sys.stderr,
        )
        return EXIT_PROVIDER
    if summary is None or summary.interrupted:
        so_far = (
            ""
            if summary is None
            else (
                f" ({sum(summary.counts.values()):,} of {summary.total:,} requests have a result)"
            )
        )
        print(
            f"ttc: interrupted; results so far are in {journal_path(Path(args.out))}{so_far}; "
            f"go on with: {hint}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    print_summary(summary)
    if summary.errors:
        print(f"{summary.errors:,} requests ended in an error; send them again with: {hint}")
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
