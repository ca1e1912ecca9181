"""`--shared-limits redis://HOST:PORT/DB` and `--quota-name` (`ttc run`, `ttc compare`, `ttc
batch`): the flags, and the shared quota they connect to for the length of a command."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ttc.engine.contract import ConfigError
from ttc.engine.send._shared import SharedQuota, quota_key


def add_shared_limits(g: argparse._ActionsContainer) -> None:
    """--shared-limits and --quota-name."""
    g.add_argument(
        "--shared-limits",
        metavar="redis://HOST:PORT/DB",
        help="keep --rpm/--tpm's schedule, token debits and the limits the provider announces in "
        "Redis, shared by every process on the same quota (the same provider, base URL and model, "
        "or --quota-name), so that together they hold the limit as one does",
    )
    g.add_argument(
        "--quota-name",
        help="with --shared-limits: the quota's name, shared by every process that gives it "
        "(default: derived from the provider, base URL and model)",
    )


@asynccontextmanager
async def shared_quota(
    url: str | None,
    name: str | None,
    provider: str,
    base_url: str | tuple[str, ...] | None,
    model: str | None,
) -> AsyncIterator[SharedQuota | None]:
    """The quota `--shared-limits` names, connected (a ConfigError if Redis does not answer), or
    None without the flag; closed on the way out."""
    if url is None:
        if name:  # refused: a command line missing the URL is not run unshared
            raise ConfigError("--quota-name: give --shared-limits too")
        yield None
        return
    first = base_url[0] if isinstance(base_url, tuple) else base_url
    quota = await SharedQuota(url, quota_key(provider, first, model, name)).connect()
    try:
        yield quota
    finally:
        await quota.aclose()
