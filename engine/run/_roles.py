"""The models of a run besides the policy: `judge` (the reward model) and `difficulty` (da).

Each is called through a `RoleCaller` (the engine's limits and retries, its own response cache
view), priced as the policy when it is the same model (`--price` included) and by the price
table otherwise, and accounted apart from the policy in the budget and the reports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ttc.engine.contract._config import RunConfig
from ttc.engine.contract._errors import ConfigError
from ttc.engine.contract._state import RunState
from ttc.engine.contract._types import Provider, Sampling, Usage
from ttc.engine.journal._events import DifficultyRated, Event
from ttc.engine.run._budget import Pricing, RunBudget
from ttc.engine.run._runinfo import describe_roles, judge_stats, role_stats
from ttc.engine.send._cache import ProviderCache, ResponseCache
from ttc.engine.send._prices import Price, price_for
from ttc.engine.send._retry import RetryPolicy
from ttc.engine.strategy._difficulty import Estimates
from ttc.engine.strategy._judges import RoleCaller

_FLAGS = {"judge": "--judge-model", "difficulty": "--difficulty-model"}


class RoleModels:
    """The role models, their prices, callers and usage."""

    def __init__(
        self, providers: Mapping[str, Provider], policy: Provider, price: Price | None
    ) -> None:
        self.providers = dict(providers)
        self.pricing = Pricing(
            price,
            {
                role: price if p.model == policy.model else price_for(p.model)
                for role, p in self.providers.items()
            },
        )
        self.scorer: RoleCaller | None = None  # the reward model, when the judgement has one
        self.rater: RoleCaller | None = None  # the difficulty model (da)
        self.estimates: Estimates | None = None  # its ratings, once a run began

    def wire(
        self,
        cfg: RunConfig,
        retry: RetryPolicy,
        budget: RunBudget,
        cache: ResponseCache | None,
        *,
        scores: bool,
        rates: bool,
    ) -> None:
        """The callers the method needs: `scores` (a reward judgement), `rates` (da)."""
        if scores:
            self.scorer = self._caller("judge", cfg, retry, budget, cache)
        if rates:
            self.rater = self._caller("difficulty", cfg, retry, budget, cache)

    def _caller(
        self,
        role: str,
        cfg: RunConfig,
        retry: RetryPolicy,
        budget: RunBudget,
        cache: ResponseCache | None,
    ) -> RoleCaller:
        provider = self.providers.get(role)
        if provider is None:
            raise ConfigError(f"{_FLAGS[role]}: this method needs a {role} model; none was given")
        return RoleCaller(
            provider,
            cfg.concurrency,
            retry,
            cfg.timeout_s,
            cfg.seed,
            Sampling(temperature=cfg.judge_temperature),
            on_outcome=lambda error: budget.role_outcome(role, error),
            cache=None if cache is None else ProviderCache(cache, provider),
        )

    def start_estimates(
        self,
        known: dict[str, DifficultyRated],
        emit: Callable[[Event], None],
        concurrency: int,
        stopped: Callable[[], bool],
    ) -> None:
        """da's ratings for a run: those in `known` (journaled) are not asked again."""
        if self.rater is not None:
            self.estimates = Estimates(self.rater, emit, known, concurrency, stopped)

    def usage(self, state: RunState) -> dict[str, Usage]:
        """What each role model has consumed so far (journaled calls replayed included)."""
        usage: dict[str, Usage] = {}
        if self.scorer is not None:
            usage["judge"] = state.judge_usage()
        if self.estimates is not None:
            usage["difficulty"] = self.estimates.usage
        return usage

    def costs(self, state: RunState) -> dict[str, float | None]:
        """What each role model's calls cost, by its price (None when it has no known price)."""
        return self.pricing.role_costs(self.usage(state))

    def cost(self, state: RunState) -> float | None:
        """The role models' cost together: 0 with none, None if one of them has no price."""
        costs = self.costs(state).values()
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    def summary(self, state: RunState) -> dict[str, Any]:
        """summary.json's `roles`: each role model, its calls and its cost."""
        calls: dict[str, dict[str, Any]] = {}
        if self.scorer is not None:
            calls["judge"] = judge_stats(state, self.scorer.retries)
        if self.estimates is not None:
            calls["difficulty"] = self.estimates.stats()
        described = describe_roles(self.providers)
        return role_stats(described, calls, self.costs(state), self.pricing)
