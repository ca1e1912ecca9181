"""The flags of the provider, its limits and decoding, and of the offline `sim` provider, shared
by `ttc run` and `ttc compare` (`_parser`), and a missing key said as those flags can fix it."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator
from contextlib import contextmanager

from ttc.engine import ConfigError
from ttc.engine.cli._sharedflags import add_shared_limits
from ttc.engine.cli._spec import AZURE_API_VERSION, PROVIDERS, SERVICE_TIERS
from ttc.engine.cli._stream_flags import add_stream_flags
from ttc.engine.cli._usage import (
    natural_float,
    natural_int,
    number,
    positive_float,
    positive_int,
    share,
)


def add_provider_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("provider and limits")
    g.add_argument(
        "--provider",
        choices=PROVIDERS,
        default="sim",
        help="sim (offline); openai (and any OpenAI-compatible server); gemini; anthropic; azure "
        "(Azure OpenAI: --base-url is the resource endpoint, --model the deployment)",
    )
    g.add_argument("--model", help="model name (required with every provider but sim)")
    g.add_argument(
        "--base-url",
        action="append",
        help="API base URL, e.g. http://127.0.0.1:8000/v1 for vLLM or `ttc serve` (default: the "
        "vendor's API); repeated (openai): replicas of one model, each request to the one with "
        "the fewest in flight, one that stops answering drained",
    )
    g.add_argument(
        "--api-key-env",
        help="the NAME of the environment variable holding the API key (default: OPENAI_API_KEY; "
        "gemini: GEMINI_API_KEY or GOOGLE_API_KEY; anthropic: ANTHROPIC_API_KEY; azure: "
        "AZURE_OPENAI_API_KEY, else a bearer token in AZURE_OPENAI_AD_TOKEN)",
    )
    g.add_argument(
        "--api-version",
        help=f"azure: the API version, sent as ?api-version= (default: {AZURE_API_VERSION})",
    )
    g.add_argument(
        "--service-tier",
        choices=SERVICE_TIERS,
        help="openai, azure: service_tier; flex is priced at its rate (half the list price), "
        "waits longer (--timeout 900) and retries its 429 resource-unavailable with backoff",
    )
    g.add_argument("--concurrency", type=positive_int, default=64, help="requests in flight")
    g.add_argument("--rpm", type=positive_float, help="requests per minute (default: unlimited)")
    g.add_argument("--tpm", type=positive_float, help="tokens per minute (default: unlimited)")
    g.add_argument(
        "--timeout",
        type=positive_float,
        help="seconds per attempt (default: 300); with --service-tier flex, 900; with --stream, "
        "3600",
    )
    add_stream_flags(g)
    g.add_argument("--max-attempts", type=positive_int, default=6, help="attempts per sample")
    add_hedge(g)
    add_max_response_bytes(g)
    add_workers(g)
    add_shared_limits(g)
    api = "(default: the API's own)"
    g.add_argument("--temperature", type=natural_float, help=f"sampling temperature {api}")
    g.add_argument("--top-p", type=share, help=f"nucleus top_p, in (0, 1] {api}")
    g.add_argument("--top-k", type=positive_int, help=f"top_k {api}")
    g.add_argument(
        "--max-tokens",
        type=positive_int,
        help=f"output tokens per request {api}; anthropic: 8192 (plus the thinking budget)",
    )
    g.add_argument(
        "--thinking-budget",
        type=natural_int,
        help=f"Gemini, Anthropic: thinking tokens per request {api}; anthropic: >= 1024 turns "
        "extended thinking on (0: off)",
    )
    g.add_argument(
        "--reasoning-effort",
        choices=("minimal", "low", "medium", "high"),
        help=f"OpenAI reasoning models: reasoning_effort {api}",
    )
    g.add_argument(
        "--verbosity",
        choices=("low", "medium", "high"),
        help=f"OpenAI reasoning models: verbosity {api}",
    )
    g = p.add_argument_group("sim provider (offline; measures the machinery, not the method)")
    latency, ability = "median latency in seconds (default: 0, no waiting)", "logit offset of "
    for flag, kind, default, what in (
        ("--sim-latency", natural_float, 0.0, latency),
        ("--sim-ability", number(float, -math.inf), 0.0, ability + "success (higher solves more)"),
        ("--sim-thinking", natural_float, 0.0, "thinking tokens per output token"),
        (
            "--sim-icl-gain",
            natural_float,
            1.0,
            "logit gain of a correct demo of the question's hidden skill cluster (0: none)",
        ),
    ):
        g.add_argument(flag, type=kind, default=default, help=what)


def add_workers(g: argparse._ActionsContainer) -> None:
    """--workers (ttc run, compare and verify)."""
    g.add_argument(
        "--workers",
        type=natural_int,
        default=2,
        help="verifier processes; 0 verifies in ttc's own process (for cheap verifiers only: "
        "math, GPQA, Reasoning Gym)",
    )


def add_hedge(
    g: argparse._ActionsContainer, *, end: str = "a round", batch: str = "--batch"
) -> None:
    g.add_argument(
        "--hedge",
        action="store_true",
        help=f"at the end of {end}, send a second copy of a request far slower than the "
        "others and keep the first answer: a hang no longer holds the end until --timeout, "
        "but each copy is billed and spends quota (default: off: no request is sent twice "
        f"unless its attempt failed); not with {batch}",
    )


def add_max_response_bytes(g: argparse._ActionsContainer) -> None:
    """--max-response-bytes (ttc run, compare and batch)."""
    g.add_argument(
        "--max-response-bytes",
        type=positive_int,
        help="the largest response body read, in bytes (default: 33554432, 32 MiB); reading "
        "stops there and the request fails, not retried",
    )


@contextmanager
def key_named(who: str, flag: str | None = "--api-key-env") -> Iterator[None]:
    """A missing API key said as the command line's user can fix it: the variable that was read,
    and `flag` when it can name another (never a key: only names are quoted)."""
    from ttc.adapters.providers import MissingKey

    try:
        yield
    except MissingKey as exc:
        names = exc.envs
        if not names:
            raise
        one = len(names) == 1
        unset = f"{names[0]} is" if one else f"{' and '.join(names)} are"
        fix = "export it" if one else "export one of them"
        if flag:
            fix += f", or name the variable that holds the key with {flag}"
        raise ConfigError(f"{who}: {unset} empty or not set: {fix}") from exc
