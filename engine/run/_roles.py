"""The models of a run besides the policy: `judge` (the reward model) and `difficulty` (da).

Each is called through a `RoleCaller` (the engine's limits and retries, its own response cache
view), priced as the policy when it is the same model (`--price` included) and by the price
table otherwise, and accounted apart from the policy in the budget and the reports. What they
are asked and how their replies are read is the strategy's (`strategy/_rubric`, the reward
model's rubric; `strategy/_difficulty`, the difficulty prompt and rating); the asking, its
journal and its replay on resume are here (`RoleCaller`, `Estimates`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ttc.engine._util._pool import bounded
from ttc.engine.contract._config import RunConfig
from ttc.engine.contract._errors import ConfigError, ProviderError
from ttc.engine.contract._state import RunState
from ttc.engine.contract._types import Item, Message, Provider, Request, Sampling, Usage
from ttc.engine.journal._events import DifficultyRated, Event
from ttc.engine.run._budget import Pricing, RunBudget
from ttc.engine.run._runinfo import describe_roles, judge_stats, role_stats
from ttc.engine.send._cache import ProviderCache, ResponseCache
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._prices import Price, price_for
from ttc.engine.send._retry import RetryPolicy
from ttc.engine.send._sender import Job, Sender
from ttc.engine.send._tokens import TokenEstimator
from ttc.engine.strategy._difficulty import NEUTRAL, parse_rating, prompt
from ttc.engine.strategy._judges import RewardResult, unit_draw
from ttc.engine.strategy._rubric import parse_score, rubric

log = logging.getLogger("ttc")

# Role models are sampled at their API's defaults unless a temperature is given
# (`--judge-temperature`): OpenAI's reasoning models refuse any temperature but their default.
ROLE_SAMPLING = Sampling()
_FLAGS = {"judge": "--judge-model", "difficulty": "--difficulty-model"}


class RoleCaller:
    """Sends one role's requests (judge, difficulty) through their own limiter and the engine's
    retry policy; a role's calls never queue behind the policy model's.

    Each call's outcome is reported to `on_outcome` (None when answered, else the error its
    retries ended in), so the engine can stop a run whose role model keeps failing. `cache`
    answers calls asked before, ahead of the limiter.
    """

    def __init__(
        self,
        provider: Provider,
        concurrency: int,
        retry: RetryPolicy,
        timeout_s: float,
        seed: int,
        sampling: Sampling = ROLE_SAMPLING,
        *,
        on_outcome: Callable[[ProviderError | None], None] = lambda error: None,
        cache: ProviderCache | None = None,
    ) -> None:
        self.provider = provider
        self.seed = seed
        self.sampling = sampling
        self.retries = 0
        self.on_outcome = on_outcome
        limiter = Limiter(None, None, concurrency)
        self.sender = Sender(provider, limiter, retry, timeout_s, self._on_retry, cache=cache)
        # A judge's reply is a short rating: guess 64 tokens until replies have been seen.
        self.tokens = TokenEstimator(first_output=64)

    def _on_retry(self, job: Job, attempt: int, error: ProviderError, delay: float) -> None:
        self.retries += 1

    async def ask(self, item: Item, prompt: str, *key: object) -> tuple[str | None, Usage, str]:
        """(reply text, usage, error): text None when the call failed after its retries."""
        seed = int(unit_draw(self.seed, "role", item.id, *key) * 2**31)
        sampling = replace(self.sampling, seed=seed)
        request = Request((Message("user", prompt),), sampling, 1, item.id)
        job = Job(-1, 0, 0, request, self.tokens.estimate(len(prompt)))
        outcome = await self.sender.send_with_retry(job)
        if outcome.completion is None:
            assert outcome.error is not None
            self.on_outcome(outcome.error)
            return None, Usage(), f"{outcome.error.kind}: {outcome.error}"[:300]
        self.on_outcome(None)
        self.tokens.observe_usage(outcome.completion.usage)
        return outcome.completion.texts[0], outcome.completion.usage, ""

    async def score(self, item: Item, round_no: int, k: int, response: str) -> RewardResult:
        """The reward model's rating of one response."""
        text, usage, error = await self.ask(item, rubric(item.question, response), round_no, k)
        if text is None:
            return RewardResult(None, None, usage, error)
        return RewardResult(parse_score(text), text, usage)


class Estimates:
    """Asks the difficulty model once per question; journaled, and replayed on resume."""

    def __init__(
        self,
        caller: RoleCaller,
        emit: Callable[[DifficultyRated], None],
        known: Mapping[str, DifficultyRated],
        concurrency: int,
        stopped: Callable[[], bool] = lambda: False,
    ) -> None:
        self.caller = caller
        self.emit = emit
        self.known = known
        self.concurrency = concurrency
        self.stopped = stopped
        self.usage = Usage()
        self.calls = 0
        self.unparsed = 0
        self.errors = 0

    def stats(self) -> dict[str, Any]:
        u = self.usage
        return {
            "calls": self.calls,
            "unparsed": self.unparsed,
            "errors": self.errors,
            "retries": self.caller.retries,
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "thinking_tokens": u.thinking_tokens,
        }

    async def rate(self, state: RunState, rows: Sequence[int]) -> None:
        """Fills `state.difficulty` for `rows`: from the journal where it has them, else asked."""
        todo = []
        for row in rows:
            event = self.known.get(state.items[row].id)
            if event is None:
                todo.append(row)
            elif not event.ok:
                self._failed(state, row)  # settled as it was: neutral, never asked again
            else:
                self._account(state, row, event)
        await bounded(todo, lambda row: self._ask(state, row), self.concurrency)
        if self.unparsed or self.errors:
            log.warning(
                "difficulty: %d replies without a rating and %d failed calls got the neutral %g",
                self.unparsed,
                self.errors,
                NEUTRAL,
            )

    async def _ask(self, state: RunState, row: int) -> None:
        if self.stopped():
            return  # the run is stopping: a resumed run asks for what is missing
        item: Item = state.items[row]
        text, usage, error = await self.caller.ask(item, prompt(item.question), "difficulty")
        if text is None:
            self.emit(DifficultyRated(item.id, error=error))
            self._failed(state, row)
            return
        event = DifficultyRated(item.id, parse_rating(text), text[:2000], usage)
        self.emit(event)
        self._account(state, row, event)

    def _failed(self, state: RunState, row: int) -> None:
        self.errors += 1
        state.difficulty[row] = NEUTRAL

    def _account(self, state: RunState, row: int, event: DifficultyRated) -> None:
        self.calls += 1
        self.usage = self.usage + event.usage
        rating = event.rating
        if rating is None:
            self.unparsed += 1
            log.info("difficulty: no rating in the reply for %s", state.items[row].id)
        state.difficulty[row] = NEUTRAL if rating is None else float(rating)


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
