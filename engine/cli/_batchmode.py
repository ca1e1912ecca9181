"""Batch mode on the command line: `--batch` and its flags, and the Batch API it attaches to the
policy model's provider (`Provider.batch`), for `ttc run`, `ttc compare` and `ttc resume` (which
keeps the run's own command line, `--batch` included)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ttc.engine import BatchAPI, ConfigError, Provider
from ttc.engine.cli._usage import positive_float
from ttc.engine.send._prices import Price, flex_price_for, parse_batch_discount, price_for

DEADLINE_S = 24 * 3600.0

__all__ = [
    "BatchSpec",
    "add_batch_deadline",
    "add_batch_flags",
    "attach_batch",
    "batch_price",
    "batch_spec",
]


@dataclass(frozen=True, slots=True)
class BatchSpec:
    """How a run uses its provider's Batch API."""

    # Requests a batch did not answer: a new batch ("batch") or the synchronous path ("sync").
    fallback: str = "batch"
    # --batch-discount: the share off the list price (None: the price table's batch rate).
    discount: float | None = None
    # The first wait between polls (it grows by half each poll, up to a minute).
    poll_s: float = 2.0
    # --batch-deadline: how long a batch is waited for before the run stops (resumable).
    deadline_s: float = DEADLINE_S


def add_batch_flags(p: argparse.ArgumentParser) -> None:
    """The batch-mode flags, in their own group."""
    g = p.add_argument_group("batch mode (the provider's Batch API: half price, a round waits)")
    g.add_argument(
        "--batch",
        action="store_true",
        help="send each round's samples (those the cache does not answer) through the "
        "provider's Batch API (openai, gemini, anthropic), billed at the batch rate",
    )
    g.add_argument(
        "--batch-fallback",
        choices=("batch", "sync"),
        default="batch",
        help="requests that failed in a batch, or whose batch expired or was cancelled: in a "
        "new batch, or through the synchronous path",
    )
    g.add_argument(
        "--batch-discount",
        type=_discount,
        default=None,
        help="the share off the list price a batch's tokens get (default: 0.5, the vendors')",
    )
    g.add_argument(
        "--batch-poll",
        type=positive_float,
        default=2.0,
        help="seconds before a batch's first poll; each wait is half again as long, up to 60",
    )
    add_batch_deadline(g)


def add_batch_deadline(g: argparse._ArgumentGroup) -> None:
    """--batch-deadline, of `ttc run --batch` and `ttc batch --via-batch-api`."""
    g.add_argument(
        "--batch-deadline",
        type=duration,
        default="24h",  # a string default goes through `duration` too
        metavar="TIME",
        help="how long to wait for a batch (e.g. 90m, 24h; a number alone: seconds) before "
        "stopping, resumable: a server may keep one in progress forever (default: 24h, the "
        "vendors' own window)",
    )


def duration(text: str) -> float:
    """A --batch-deadline: seconds, or a number with a unit s, m or h."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    unit = units.get(text[-1:].lower()) if text else None
    try:
        value = float(text[:-1] if unit else text) * (unit or 1.0)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a time such as 90m or 24h, got {text!r}")
    return value


def _discount(text: str) -> float:
    try:
        return parse_batch_discount(text)
    except ConfigError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}") from None


def batch_spec(args: argparse.Namespace) -> BatchSpec | None:
    """The batch mode the flags ask for, or None without --batch."""
    if not getattr(args, "batch", False):
        return None
    if getattr(args, "hedge", False):
        raise ConfigError(
            "--hedge: batch mode never sends a request twice (a batch has no stragglers to "
            "copy); drop --hedge or --batch"
        )
    return BatchSpec(args.batch_fallback, args.batch_discount, args.batch_poll, args.batch_deadline)


def attach_batch(provider: Provider, spec: BatchSpec) -> None:
    """Sets `provider.batch` to its vendor's Batch API (ConfigError for a provider with none)."""
    from ttc.adapters import GeminiProvider, OpenAIProvider
    from ttc.adapters.providers import (
        AnthropicBatchAPI,
        AnthropicProvider,
        AzureOpenAIProvider,
        GeminiBatchAPI,
        OpenAIBatchAPI,
    )

    poll = (spec.poll_s, max(60.0, spec.poll_s))
    sync = spec.fallback == "sync"
    if isinstance(provider, AzureOpenAIProvider):  # its batches need a global-batch deployment
        raise ConfigError(
            "--batch: Azure OpenAI's Batch API is not supported; run without "
            "--batch, or use --provider openai, gemini or anthropic"
        )
    api: BatchAPI
    if isinstance(provider, OpenAIProvider):
        api = OpenAIBatchAPI(provider, fallback_sync=sync, poll_s=poll)
    elif isinstance(provider, GeminiProvider):
        api = GeminiBatchAPI(provider, fallback_sync=sync, poll_s=poll)
    elif isinstance(provider, AnthropicProvider):
        api = AnthropicBatchAPI(provider, fallback_sync=sync, poll_s=poll)
    else:
        raise ConfigError(
            f"--batch: the {provider.name} provider has no Batch API; use --provider openai, "
            "gemini or anthropic (a rehearsal: `ttc serve`, then --provider openai --base-url URL)"
        )
    api.deadline_s = spec.deadline_s
    provider.batch = api


def batch_price(price: Price | None, model: str, spec: BatchSpec | None) -> Price | None:
    """The run's price with --batch-discount applied (None: the table's, unchanged)."""
    if spec is None or spec.discount is None:
        return price
    base = price or price_for(model)
    return None if base is None else base.with_batch_discount(spec.discount)


def policy_price(
    policy: Provider, price: Price | None, service_tier: str | None, batch: BatchSpec | None
) -> Price | None:
    """The policy's price (`price`: --price, the list price) at its tier's rate (flex: when no
    --price) and, in batch mode, at the batch rate; batch mode attaches the Batch API."""
    if price is None and service_tier == "flex":
        price = flex_price_for(policy.model)  # None: the list price
    if batch is not None:
        attach_batch(policy, batch)
    return batch_price(price, policy.model, batch)
