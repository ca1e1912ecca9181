"""The resolved configuration of a run, validated before a single request is sent."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ttc.engine._errors import ConfigError
from ttc.engine._types import Sampling

METHODS = ("unif", "elim", "rand", "adpt")
NEIGHBOUR_MODES = ("solved", "fixed")

# Each field's command-line flag, so an error names what the user typed.
FLAGS = {
    "rounds": "--rounds",
    "warmup_rounds": "--warmup",
    "k": "-k",
    "p": "-p",
    "gamma": "--gamma",
    "seed": "--seed",
    "method": "--method",
    "neighbours": "--neighbours",
    "concurrency": "--concurrency",
    "rpm": "--rpm",
    "tpm": "--tpm",
    "timeout_s": "--timeout",
    "max_attempts": "--max-attempts",
    "verifier_workers": "--workers",
    "max_cost_usd": "--max-cost",
    "max_output_tokens": "--max-output-tokens",
}

# Settings that may change when a run is resumed: limits, not the experiment.
OPERATIONAL = frozenset(
    {"concurrency", "rpm", "tpm", "timeout_s", "max_attempts", "verifier_workers",
     "max_cost_usd", "max_output_tokens"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Algorithm 1's parameters (defaults as in the paper) and the scheduler's limits."""

    rounds: int = 4
    warmup_rounds: int = 1
    k: int = 1
    p: int = 3
    gamma: float = 1.0
    seed: int = 0
    method: str = "adpt"
    neighbours: str = "solved"
    concurrency: int = 64
    rpm: float | None = None
    tpm: float | None = None
    timeout_s: float = 300.0
    max_attempts: int = 6
    # Verifier worker processes; 0 judges in the event loop's thread (only for cheap verifiers).
    verifier_workers: int = 2
    # Budgets: dispatching stops cleanly once the run has cost this much or produced this many
    # output tokens (replayed samples count too); the run directory stays resumable.
    max_cost_usd: float | None = None
    max_output_tokens: int | None = None
    sampling: Sampling = field(default_factory=Sampling)

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ConfigError:
            return ConfigError(f"{FLAGS.get(name, name)}: {why}, got {getattr(self, name)!r}")

        for name in ("rounds", "k", "concurrency", "max_attempts"):
            if getattr(self, name) < 1:
                raise bad(name, "must be at least 1")
        if not 0 <= self.warmup_rounds <= self.rounds:
            raise bad("warmup_rounds", f"must be between 0 and --rounds ({self.rounds})")
        if self.p < 0:
            raise bad("p", "must be 0 or more")
        if not 0.0 < self.gamma <= 1.0:
            raise bad("gamma", "must be in (0, 1]")
        if self.method not in METHODS:
            raise bad("method", f"must be one of {', '.join(METHODS)}")
        if self.neighbours not in NEIGHBOUR_MODES:
            raise bad("neighbours", f"must be one of {', '.join(NEIGHBOUR_MODES)}")
        for name in ("rpm", "tpm", "max_cost_usd", "max_output_tokens"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise bad(name, "must be positive")
        if not self.timeout_s > 0:
            raise bad("timeout_s", "must be positive")
        if self.verifier_workers < 0:
            raise bad("verifier_workers", "must be 0 or more")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy, as written to the run directory."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """The inverse of `to_dict`; unknown keys are an error naming the key."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config key(s): {', '.join(unknown)}")
        values = dict(data)
        if isinstance(values.get("sampling"), dict):
            values["sampling"] = Sampling(**values["sampling"])
        return cls(**values)
