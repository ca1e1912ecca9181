"""Why a run stops early, and the run budget that decides it.

A run stops dispatching (requests in flight finish and are recorded; the run directory stays
resumable) for one of three kinds of reason, each with the exit code `ttc` gives it:

- `PROVIDER` (4): the provider refuses the account (a bad key, an exhausted quota), or a streak
  of samples (a share of those a round plans, at most FAILURE_STREAK), or of a role model's
  calls, failed with no answer between them, or the run's first FIRST_ATTEMPTS attempts all
  failed for one reason;
- `BUDGET` (3): --max-cost or --max-output-tokens reached. Each request's worst case
  (`_worstcase`) is reserved before it is sent (`RunBudget.admit`) and released once its usage
  is accounted (`settle`): a request goes out only while what was spent and what is reserved
  stay under the budget, so it is never passed by more than one request's worst case (the role
  models' calls are counted once made, not reserved);
- `INTERRUPTED` (130): the host asked (Ctrl-C, `Engine.stop`);
- `FAILED` (1): an error that is not the provider's ended the run (the verifier processes
  could not start, an error in a suite's or provider's code); it is raised to the caller too.

The reason is a value (`StopReason`), never a string parsed back: its message is what
summary.json's `stopped` says, its kind says the exit code.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ttc.engine.contract._config import RunConfig
from ttc.engine.contract._errors import Fatal, ProviderError
from ttc.engine.contract._state import RunState
from ttc.engine.contract._types import Usage
from ttc.engine.run._worstcase import Worst
from ttc.engine.send._prices import Price

log = logging.getLogger("ttc")

# A stop for the provider's reasons starts with this (the message summary.json keeps).
PROVIDER_STOP = "the provider refuses"
# Samples (or a role model's calls) failing in a row, none answered between them, that stop a run
# at most; a round of few samples stops sooner: after FAILURE_SHARE of the samples it plans (at
# least FAILURE_STREAK_MIN), so that a run of 5 samples never fails them all without a word.
FAILURE_STREAK = 32
FAILURE_SHARE = 0.25
FAILURE_STREAK_MIN = 3
# A run whose first this many attempts (retries included) all failed for one reason, before any
# answer, stops at once, naming it: a wrong --base-url, model or key fails every attempt alike.
# A rate limit is not such a reason (the server answers; the limiter waits it out).
FIRST_ATTEMPTS = 8


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


class FirstAttempts:
    """Watches a run's attempts until the first answer: if its first FIRST_ATTEMPTS attempts all
    failed for one reason (a rate limit is none), the run should stop, naming it."""

    def __init__(self) -> None:
        self._causes: Counter[str] | None = Counter()  # None once decided

    def failed(self, error: ProviderError) -> str | None:
        """An attempt failed: the reason to stop the run, once, if it should; else None."""
        causes = self._causes
        if causes is None or error.kind == "rate_limited":
            return None
        causes[cause(error)] += 1
        if causes.total() < FIRST_ATTEMPTS:
            return None
        self._causes = None
        if len(causes) > 1:
            return None
        return f"the first {FIRST_ATTEMPTS} attempts all failed, none answered: {cause(error)}"

    def answered(self) -> None:
        """An attempt was answered: the run reaches its provider."""
        self._causes = None


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
        self._streak_limit = FAILURE_STREAK
        self._role_streaks: dict[str, int] = {}
        # The causes of the samples that failed for good in this session (a resume sends them
        # again), and of the attempts before the first answer (None once one came).
        self.failures: Counter[str] = Counter()
        self._first = FirstAttempts()
        # The worst cases of the requests in flight, by sample key, and their totals.
        self._reserved: dict[object, Worst] = {}
        self._reserved_cost = 0.0
        self._reserved_output = 0
        self._settled: asyncio.Event | None = None  # set when a reservation ends, or a stop

    @property
    def reserves(self) -> bool:
        """Whether requests are reserved before they are sent: the run has a budget."""
        return self.config.max_cost_usd is not None or self.config.max_output_tokens is not None

    def is_stopped(self) -> bool:
        """Whether the run has stopped dispatching."""
        return self.stopped is not None

    def stop(self, reason: StopReason) -> None:
        """Stop dispatching for `reason` (the first reason given stands)."""
        if self.stopped is None:
            self.stopped = reason
            log.warning("stopping: %s; requests in flight are finishing", reason)
            if self._settled is not None:
                self._settled.set()  # a request waiting for room is not sent

    def expect(self, planned: int) -> None:
        """A round plans `planned` samples: the failure streak that stops the run is a share of
        them (FAILURE_SHARE, at least FAILURE_STREAK_MIN, at most FAILURE_STREAK), counted
        from the round's start."""
        share = math.ceil(FAILURE_SHARE * planned)
        self._streak_limit = min(FAILURE_STREAK, max(FAILURE_STREAK_MIN, share))
        # A streak is counted within a round: the last failures of one round (its hardest
        # samples, landing last) and the first of the next are no sign of a broken endpoint,
        # which fails a share of every round's samples anyway.
        self._failure_streak = 0

    def attempt_failed(self, error: ProviderError) -> None:
        """An attempt of a sample failed (retried or not). Before the run's first answer, the
        first FIRST_ATTEMPTS attempts failing for one reason stop it at once, naming it."""
        why = self._first.failed(error)
        if why is not None:
            self.stop(StopReason.provider(why))

    def sample_failed(self, error: ProviderError) -> None:
        """A sample ended in an error (its last attempt's). An account-wide refusal (a bad key,
        an exhausted quota), or a streak of failures with no answer between them (a wrong
        --base-url or model), stops dispatching: the rest of the test set would only collect
        the same refusal."""
        self.attempt_failed(error)
        self.failures[cause(error)] += 1
        self._failure_streak += 1
        if isinstance(error, Fatal) and error.stops_run:
            self.stop(StopReason.provider(str(error)[:300]))
        elif self._failure_streak >= self._streak_limit:
            self.stop(
                StopReason.provider(
                    f"{self._failure_streak} samples in a row failed (last: {str(error)[:300]})"
                )
            )

    def sample_answered(self) -> None:
        """A sample got a response: the failure streak is over."""
        self._failure_streak = 0
        self._first.answered()

    def failed_for_good(self) -> str | None:
        """A line on the samples that failed for good in this session (how many, the commonest
        cause), or None if none did."""
        if not self.failures:
            return None
        (top, count), total = self.failures.most_common(1)[0], self.failures.total()
        share = "all" if count == total else f"{count:,}"
        return f"{total:,} samples failed for good ({share} of them: {top})"

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

    def spent(self, state: RunState) -> float | None:
        """What the run cost so far, the policy's calls and the role models' together (None:
        the policy model has no known price)."""
        cost = self.pricing.cost(state.total_usage())
        if cost is None:
            return None
        return cost + sum(c for c in self.role_costs(state).values() if c is not None)

    def check(self, state: RunState) -> None:
        """Stops the run once it reaches --max-cost (the policy's calls and the role models'
        together) or --max-output-tokens (the policy's output tokens only)."""
        cfg = self.config
        if cfg.max_cost_usd is None and cfg.max_output_tokens is None:
            return
        usage = state.total_usage()
        if cfg.max_output_tokens is not None and usage.output_tokens >= cfg.max_output_tokens:
            self.stop(StopReason.budget(f"--max-output-tokens {cfg.max_output_tokens:,} reached"))
        if cfg.max_cost_usd is not None:
            cost = self.spent(state)
            if cost is not None and cost >= cfg.max_cost_usd:
                self.stop(StopReason.budget(f"--max-cost ${cfg.max_cost_usd:g} reached"))

    def _room(self, state: RunState) -> bool:
        """Whether what was spent and what is reserved leave room under every budget."""
        cfg = self.config
        if cfg.max_output_tokens is not None:
            spent = state.total_usage().output_tokens + self._reserved_output
            if spent >= cfg.max_output_tokens:
                return False
        if cfg.max_cost_usd is not None:
            cost = self.spent(state)
            if cost is not None and cost + self._reserved_cost >= cfg.max_cost_usd:
                return False
        return True

    async def admit(self, state: RunState, key: object, worst: Worst) -> bool:
        """Reserves request `key`'s worst case once the budgets have room for it (what was spent
        and what is reserved under each), waiting for requests in flight to settle while they
        have none; False once the run stops (the request is not sent)."""
        while True:
            self.check(state)
            if self.stopped is not None:
                return False
            if self._room(state):
                break
            if self._settled is None:
                self._settled = asyncio.Event()
            self._settled.clear()
            await self._settled.wait()
        self._reserved[key] = worst
        self._reserved_cost += worst.cost or 0.0
        self._reserved_output += worst.output_tokens
        return True

    def settle(self, key: object) -> None:
        """Request `key` is accounted (its usage counts as spent): its reservation ends."""
        worst = self._reserved.pop(key, None)
        if worst is None:
            return
        self._reserved_cost = max(0.0, self._reserved_cost - (worst.cost or 0.0))
        self._reserved_output -= worst.output_tokens
        if self._settled is not None:
            self._settled.set()


def cause(error: ProviderError) -> str:
    """What an error says, as the failure tallies count it: its kind and message."""
    return f"{error.kind}: {str(error)[:300]}"
