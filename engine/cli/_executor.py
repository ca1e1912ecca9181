"""--executor and --ray-address: where `ttc run` and `ttc compare` verify responses.

`process` (the default) is ttc's own verifier processes (`VerifierPool`, built by the engine);
`ray` is `--workers` Ray actors (`ttc.adapters.executors.RayVerifierPool`), on a local Ray that
ttc starts and stops, or on the cluster at --ray-address. One pool serves every run of a
command (the four of a compare), started before the first and closed after the last. The
executor changes where verdicts are computed, never what they are: config.json's invocation
records it, and `ttc resume DIR --executor ...` may change it.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from ttc.engine import ConfigError, Suite, Verifiers

EXECUTORS = ("process", "ray")


@dataclass(frozen=True, slots=True)
class ExecutorSpec:
    """--executor and --ray-address as given."""

    kind: str = "process"
    ray_address: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ExecutorSpec:
        return cls(args.executor, args.ray_address)

    def describe(self) -> dict[str, Any]:
        """What config.json's invocation records of it."""
        if self.kind == "ray":
            return {"executor": "ray", "ray_address": self.ray_address}
        return {"executor": self.kind}


def add_executor_flags(p: argparse.ArgumentParser) -> None:
    """The verification executor's flags (ttc run and compare), in a group of their own."""
    g = p.add_argument_group("verification executor")
    g.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="process",
        help="process: --workers verifier processes of ttc's own; ray: --workers Ray actors "
        "(pip install 'ttc[ray]'), the code sandbox inside each as in a process",
    )
    g.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="with --executor ray: the Ray cluster to verify on, left running (default: a "
        "local Ray that ttc starts and stops)",
    )


@asynccontextmanager
async def verifiers_for(
    spec: ExecutorSpec, suite: Suite, workers: int
) -> AsyncIterator[Verifiers | None]:
    """The verifier pool of a command's runs, started now and closed on the way out; None for
    `process`, whose pool each engine builds from its config."""
    if spec.kind == "process":
        if spec.ray_address is not None:
            raise ConfigError("--ray-address: only with --executor ray")
        yield None
        return
    if workers == 0:
        raise ConfigError(
            "--executor ray: --workers 0 verifies in ttc's own process; give 1 or more"
        )
    from ttc.adapters.executors import RayVerifierPool

    try:
        pool = RayVerifierPool(suite, workers, spec.ray_address)
    except ConfigError as exc:
        raise ConfigError(f"--executor ray: {exc}") from None
    pool.start()
    try:
        yield pool
    finally:
        await pool.aclose()
