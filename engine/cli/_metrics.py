"""Live metrics of `ttc run`, `ttc compare` and `ttc batch` (`--metrics-port N`), in the
Prometheus text format through prometheus-client (`_prometheus`), served at
`http://ADDR:N/metrics` in a thread of their own until the command ends.

Every series is labelled with the run's `method` (`batch` for `ttc batch`), so the four runs of
`ttc compare` stay apart; `role` is the model's: policy, judge (a reward model) or difficulty
(da's rater); `ttc batch`'s requests are the policy's. Counters move as things happen (a run's
events, seen as a `RunObserver`; `ttc batch`'s sends); the limiter's gauges are read when the
endpoint is scraped.

    ttc_requests_total{method,role,outcome}      attempts that ended: ok, or the error kind
                                                 (rate_limited: a 429; transient, bad_request,
                                                 too_large, fatal)
    ttc_tokens_total{method,role,kind}           tokens of answered attempts: input, output,
                                                 thinking
    ttc_retries_total{method,role,kind}          failed attempts that are retried, by error kind
    ttc_rate_limited_total{method,role}          attempts refused with a 429
    ttc_round{method}                            the round under way
    ttc_in_flight{method}                        requests in flight (the limiter's slots in use)
    ttc_concurrency_cap{method}                  the adaptive concurrency cap in force
    ttc_concurrency_max{method}                  its ceiling (--concurrency)
    ttc_concurrency_cuts_total{method}           rate-limit episodes that cut the cap
    ttc_limit_requests_per_minute{method,source} configured: --rpm; learned: a stricter limit the
    ttc_limit_tokens_per_minute{method,source}   server announced (x-ratelimit-*), now in force
    ttc_cache_hits_total{method}                 samples answered by the response cache
    ttc_model_info{method,role,model}            1 for each model a run uses

What is counted is what this process did: a resumed run's samples replayed from its journal are
not counted again. A sample answered by the response cache counts as an `ok` request with its
tokens (as in summary.json); `ttc_cache_hits_total` says how many were. A role model's calls
count once each, by how they ended: their retries are not seen. In `ttc batch`, a 4xx other than
429 is an answer (recorded as OpenAI does) and counts as `bad_request`.

This module holds the flags and the start, and imports prometheus-client only when asked to
serve, so that a missing package is one line that says how to install it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ttc.engine import ConfigError
from ttc.engine.cli._usage import number

if TYPE_CHECKING:
    from ttc.engine.cli._prometheus import Metrics


def add_metrics(g: argparse._ActionsContainer) -> None:
    """--metrics-port and --metrics-addr (ttc run, compare and batch)."""
    g.add_argument(
        "--metrics-port",
        type=number(int, 0, high=65535),
        metavar="N",
        help="serve live metrics (requests by outcome, tokens, 429s, retries, in flight, the "
        "concurrency cap, the limits) in the Prometheus text format at http://ADDR:N/metrics "
        "while the command runs; 0: any free port, said on stderr (default: none served)",
    )
    g.add_argument(
        "--metrics-addr",
        default="127.0.0.1",
        metavar="ADDR",
        help="the address the metrics are served on (0.0.0.0: every interface)",
    )


@contextmanager
def metrics_served(port: int | None, addr: str = "127.0.0.1") -> Iterator[Metrics | None]:
    """A command's live metrics, served on `addr:port` while the block runs (the URL is said on
    stderr); None when `port` is None (no --metrics-port). Without prometheus-client, a
    ConfigError that says how to install it; a port that cannot be had, one naming the flag."""
    if port is None:
        yield None
        return
    try:
        from ttc.engine.cli._prometheus import Metrics, served
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "prometheus_client":
            raise
        raise ConfigError(
            "--metrics-port: needs the prometheus-client package, which is not installed: "
            "pip install prometheus-client"
        ) from None
    metrics = Metrics()
    with served(metrics, port, addr) as url:
        print(f"ttc: metrics at {url}", file=sys.stderr)
        yield metrics
