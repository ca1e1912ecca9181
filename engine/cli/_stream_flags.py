"""`--stream`, its timeouts, and `--api`: how answers arrive from an HTTP provider.

`--stream` reads each answer as server-sent events, watched by `--first-byte-timeout` (nothing at
all) and `--stall-timeout` (nothing between two chunks): a stalled stream is retried at once
instead of at the end of `--timeout`, so the attempt's whole wait can be long (its default is
then an hour). Its default follows the vendors' documentation: Anthropic's SDKs refuse a request
they expect to take over ten minutes unless it streams (an expected 3600 s x max_tokens / 128,000,
so above 21,333 tokens of output and thinking), so `--provider anthropic` streams by default
above that; OpenAI and Gemini recommend no default, and ttc streams there only when asked.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ttc.engine import ConfigError, Sampling
from ttc.engine.cli._usage import positive_float

__all__ = ["APIS", "STREAM_TIMEOUT_S", "StreamSpec", "add_stream_flags", "stream_spec"]

APIS = ("chat", "responses")
# The attempt's default wait when streaming: stalls are caught by --stall-timeout instead.
STREAM_TIMEOUT_S = 3600.0
# Anthropic's SDKs: the expected seconds of a request are 3600 x max_tokens / 128,000, and over
# 600 s it must stream; its default output cap is ttc's 8192 plus the thinking budget.
_ANTHROPIC_STREAM_ABOVE = 600 * 128_000 // 3600
_ANTHROPIC_MAX_TOKENS = 8192
FIRST_BYTE_S, STALL_S = 60.0, 30.0


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """The provider's API and whether (and how watchfully) it streams."""

    api: str = "chat"
    stream: bool = False
    first_byte_s: float = FIRST_BYTE_S
    stall_s: float = STALL_S


def add_stream_flags(g: argparse._ActionsContainer) -> None:
    """--api, --stream/--no-stream, --first-byte-timeout, --stall-timeout."""
    g.add_argument(
        "--api",
        choices=APIS,
        default="chat",
        help="openai, azure: chat completions (chat) or the Responses API (responses), batch "
        "mode included (default: chat)",
    )
    g.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="read answers as they are written (server-sent events), a stalled one retried at "
        "once (default: on for anthropic above 21,333 max_tokens, as "
        "Anthropic's SDKs require; off elsewhere)",
    )
    g.add_argument(
        "--first-byte-timeout",
        type=positive_float,
        default=FIRST_BYTE_S,
        help=f"with --stream: seconds until the answer's first byte (default: {FIRST_BYTE_S:g})",
    )
    g.add_argument(
        "--stall-timeout",
        type=positive_float,
        default=STALL_S,
        help=f"with --stream: seconds without a byte before a stream counts as stalled and is "
        f"retried, its partial answer journaled (default: {STALL_S:g})",
    )


def stream_spec(args: argparse.Namespace, sampling: Sampling) -> StreamSpec:
    """The StreamSpec of parsed flags (defaults where a caller's namespace has none)."""
    kind = getattr(args, "provider", "sim")
    api = getattr(args, "api", "chat") or "chat"
    if api != "chat" and kind not in ("openai", "azure"):
        raise ConfigError(f"--api {api}: OpenAI's and Azure's only, not --provider {kind}")
    stream = getattr(args, "stream", None)
    if stream is None:
        stream = kind == "anthropic" and anthropic_should_stream(sampling)
    if stream and kind == "sim":
        raise ConfigError("--stream: not with --provider sim (an API provider's only)")
    return StreamSpec(
        api,
        bool(stream),
        getattr(args, "first_byte_timeout", FIRST_BYTE_S),
        getattr(args, "stall_timeout", STALL_S),
    )


def anthropic_should_stream(sampling: Sampling) -> bool:
    """Whether Anthropic's SDKs would insist on streaming a request of `sampling`."""
    # The max_tokens the adapter sends: --max-tokens, else 8192 plus the thinking budget.
    sent = sampling.max_output_tokens or _ANTHROPIC_MAX_TOKENS + (sampling.thinking_budget or 0)
    return sent > _ANTHROPIC_STREAM_ABOVE
