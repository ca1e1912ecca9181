"""Why a run stops early, and the run budget that decides it.

A run stops dispatching (requests in flight finish and are recorded; the run directory stays
resumable) for one of three kinds of reason, each with the exit code `ttc` gives it:

- `PROVIDER` (4): the provider refuses the account (a bad key, an exhausted quota), or a long
  streak of samples, or of a role model's calls, failed with no answer between them;
- `BUDGET` (3): --max-cost or --max-output-tokens reached;
- `INTERRUPTED` (130): the host asked (Ctrl-C, `Engine.stop`);
- `FAILED` (1): an error that is not the provider's ended the run (the verifier processes
  could not start, an error in a suite's or provider's code); it is raised to the caller too.

The reason is a value (`StopReason`), never a string parsed back: its message is what
summary.json's `stopped` says, its kind says the exit code.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ttc.engine.contract._config import RunConfig
from ttc.engine.contract._errors import Fatal, ProviderError
from ttc.engine.contract._state import RunState
from ttc.engine.contract._types import Usage
from ttc.engine.send._prices import Price

log = logging.getLogger("ttc")

# A stop for the provider's reasons starts with this (the message summary.json keeps).
PROVIDER_STOP = "the provider refuses"
# Samples (or a role model's calls) failing in a row, none answered between them, that stop a run.
FAILURE_STREAK = 32


class StopKind(enum.Enum):
    """The kinds of reason a run stops early; each value is the exit code of `ttc run`."""

    FAILED = 1
    BUDGET = 3
    PROVIDER = 4
    INTERRUPTED = 130

    @property
    def exit_code(self) -> int:
        """The exit code of `ttc run` stopped for this kind of reason."""
        return int(self.value)


@dataclass(frozen=True, slots=True)
class StopReason:
    """Why a run stopped dispatching: its kind (and so its exit code) and a readable message."""

    kind: StopKind
    message: str

    def __str__(self) -> str:
        return self.message

    @property
    def exit_code(self) -> int:
        """The exit code of `ttc run` stopped for this reason."""
        return self.kind.exit_code

    @classmethod
    def provider(cls, why: str) -> StopReason:
        """The provider refuses (the message starts with PROVIDER_STOP)."""
        return cls(StopKind.PROVIDER, f"{PROVIDER_STOP}: {why}")

    @classmethod
    def budget(cls, why: str) -> StopReason:
        """A budget (--max-cost, --max-output-tokens) is reached."""
        return cls(StopKind.BUDGET, why)

    @classmethod
    def failed(cls, why: str) -> StopReason:
        """An error that is not the provider's ended the run (it is raised too)."""
        return cls(StopKind.FAILED, f"failed: {why}")

    @classmethod
    def interrupted(cls, why: str = "interrupted") -> StopReason:
        """The host asked the run to stop."""
        return cls(StopKind.INTERRUPTED, why)


@dataclass(frozen=True, slots=True)
class Pricing:
    """The prices of a run: the policy model's and each role model's (None: unknown)."""

    price: Price | None
    roles: Mapping[str, Price | None]

    def cost(self, usage: Usage) -> float | None:
        """What the policy's `usage` cost (None when the model has no known price)."""
        return None if self.price is None else self.price.cost(usage)

    def role_costs(self, usage: Mapping[str, Usage]) -> dict[str, float | None]:
        """What each role model's usage cost, by its price (None when it has no known price)."""
        costs: dict[str, float | None] = {}
        for role, u in usage.items():
            price = self.roles.get(role)
            costs[role] = None if price is None else price.cost(u)
        return costs


class RunBudget:
    """Tracks what stops a run (failure streaks, cost, output tokens) and keeps the first reason."""

    def __init__(
        self,
        config: RunConfig,
        pricing: Pricing,
        role_usage: Callable[[RunState], dict[str, Usage]] = lambda state: {},
    ) -> None:
        self.config = config
        self.pricing = pricing
        self.role_usage = role_usage
        self.stopped: StopReason | None = None
        self._failure_streak = 0
        self._role_streaks: dict[str, int] = {}

    def is_stopped(self) -> bool:
        """Whether the run has stopped dispatching."""
        return self.stopped is not None

    def stop(self, reason: StopReason) -> None:
        """Stop dispatching for `reason` (the first reason given stands)."""
        if self.stopped is None:
            self.stopped = reason
            log.warning("stopping: %s; requests in flight are finishing", reason)

    def sample_failed(self, error: ProviderError) -> None:
        """A sample ended in an error. An account-wide refusal (a bad key, an exhausted quota),
        or a long streak of failures with no answer between them (a wrong --base-url or model),
        stops dispatching: the rest of the test set would only collect the same refusal."""
        self._failure_streak += 1
        if isinstance(error, Fatal) and error.stops_run:
            self.stop(StopReason.provider(str(error)[:300]))
        elif self._failure_streak >= FAILURE_STREAK:
            self.stop(
                StopReason.provider(
                    f"{self._failure_streak} samples in a row failed (last: {str(error)[:300]})"
                )
            )

    def sample_answered(self) -> None:
        """A sample got a response: the failure streak is over."""
        self._failure_streak = 0

    def role_failed(self, role: str, error: ProviderError) -> None:
        """A role model's call failed after its retries. As for samples, an account-wide refusal
        or a long streak of failures stops the run: a judge (or rater) that cannot answer would
        otherwise turn the method into another one (every response scored 0, every rating
        neutral) without a word."""
        streak = self._role_streaks[role] = self._role_streaks.get(role, 0) + 1
        if isinstance(error, Fatal) and error.stops_run:
            self.stop(StopReason.provider(f"the {role} model: {str(error)[:300]}"))
        elif streak >= FAILURE_STREAK:
            self.stop(
                StopReason.provider(
                    f"{streak} {role} model calls in a row failed (last: {str(error)[:300]})"
                )
            )

    def role_answered(self, role: str) -> None:
        """A role model's call was answered: its failure streak is over."""
        self._role_streaks[role] = 0

    def role_outcome(self, role: str, error: ProviderError | None) -> None:
        """A role model's call ended: answered (None), or failed after its retries."""
        if error is None:
            self.role_answered(role)
        else:
            self.role_failed(role, error)

    def role_costs(self, state: RunState) -> dict[str, float | None]:
        """What each role model's calls cost so far (None when it has no known price)."""
        return self.pricing.role_costs(self.role_usage(state))

    def check(self, state: RunState) -> None:
        """Stops the run once it reaches --max-cost (the policy's calls and the role models'
        together) or --max-output-tokens (the policy's output tokens only)."""
        cfg = self.config
        if cfg.max_cost_usd is None and cfg.max_output_tokens is None:
            return
        usage = state.total_usage()
        if cfg.max_output_tokens is not None and usage.output_tokens >= cfg.max_output_tokens:
            self.stop(StopReason.budget(f"--max-output-tokens {cfg.max_output_tokens:,} reached"))
        cost = self.pricing.cost(usage)
        if cfg.max_cost_usd is not None and cost is not None:
            cost += sum(c for c in self.role_costs(state).values() if c is not None)
            if cost >= cfg.max_cost_usd:
                self.stop(StopReason.budget(f"--max-cost ${cfg.max_cost_usd:g} reached"))
