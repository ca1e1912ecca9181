"""The offline simulator: a seeded, stochastic, in-process stand-in for an LLM.

It exists to exercise the engine's machinery (rounds, limits, retries, journals, verifiers,
retrieval) without an API key. It measures the machinery, never the method: its success model is
a hand-written assumption that similar correct demonstrations help, so no result obtained with it
says anything about whether evolving in-context demonstrations work.

Success model, per request: a question has a latent difficulty d and a hidden skill cluster,
both the simulator's own (`_latent`: the cluster comes from the data's structure, such as the
task or subject, never from an embedder); the base logit is `ability - d`; each demonstration
adds an effect: a correct one from the question's own cluster adds `icl_gain`, one from another
cluster costs `dissimilar_penalty` (off-topic context), a wrong one costs `wrong_demo_penalty`
more, and a demonstration from outside the test set (a fixed few-shot example) belongs to no
cluster and adds nothing; the logit moves by the mean effect; a set temperature T scales it by
(0.3 / T) ** temperature_sensitivity (0.3: the paper's default; hotter sampling pulls every
question towards even odds); each sample succeeds with probability sigmoid(logit). Its length is
lognormal around the question's own typical length, longer when it fails. A sample's text is
filler reasoning prose and the suite's final answer in its real format, correct or plausibly
wrong, so the real verifiers judge it.

Two role stand-ins answer the engine's real role prompts: `SimJudge` (a reward model: a rubric
score correlated with whether the response is right, by the suite's `SimAnswers`, plus noise) and
`SimDifficulty` (a difficulty rating correlated with the latent difficulty, plus noise). Both
sometimes reply with no number at all, as real models do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import numpy.random  # loaded with the module, not on the first call (150 ms on the loop)

from ttc.adapters.sim._answers import answers_for
from ttc.adapters.sim._latent import Latents
from ttc.adapters.sim._prose import prose, stable_hash
from ttc.engine import (
    BadRequest,
    Completion,
    ConfigError,
    Demo,
    Item,
    Provider,
    Request,
    Sampling,
    Suite,
    Usage,
)

__all__ = ["SimConfig", "SimDifficulty", "SimJudge", "SimProvider", "SimRoleConfig", "thought"]

# The temperature at which the simulator's success model is as configured (the paper's default).
REFERENCE_TEMPERATURE = 0.3


@dataclass(frozen=True, slots=True)
class SimConfig:
    """The simulator's knobs.

    seed: base seed of every draw; the same seed and request give the same completion.
    ability: the model's logit offset; higher solves more questions.
    difficulty_mean, difficulty_std: each question's latent difficulty d ~ Normal(mean, std),
        drawn deterministically from (seed, item id) and its cluster.
    cluster_difficulty_share: the share of d's variance that is its cluster's (in [0, 1)).
    fallback_cluster_size: questions per seeded cluster, for items whose data names no skill.
    icl_gain: the logit gain of a correct demonstration from the question's hidden cluster
        (0: demonstrations never help).
    dissimilar_penalty: the logit cost of a demonstration from another cluster.
    wrong_demo_penalty: the logit cost of a demonstration whose answer is wrong.
    mean_output_tokens: the mean output length of a solved response to a question of average
        difficulty; output_tokens_sigma: the log-scale sigma of one response's length around its
        question's typical length.
    length_difficulty: log-length per standard deviation of difficulty (harder: longer).
    question_length_sigma: the log-scale sigma of a question's own typical length.
    failure_length_ratio: how much longer a failed response is than a solved one (>= 1).
    thinking_ratio: thinking tokens reported per output token (0: a non-thinking model).
    temperature_sensitivity: how much a set temperature T moves the logit: it is scaled by
        (0.3 / T) ** temperature_sensitivity; no temperature (the provider default) leaves it.
    latency_s, latency_sigma: each call sleeps a lognormal time with this median and log-scale
        sigma (a heavy tail); latency_s = 0 never sleeps.
    chars_per_token: characters per token, for estimating input tokens and sizing the prose.
    """

    seed: int = 0
    ability: float = 0.0
    difficulty_mean: float = 0.5
    difficulty_std: float = 1.5
    cluster_difficulty_share: float = 0.3
    fallback_cluster_size: float = 20.0
    icl_gain: float = 1.0
    dissimilar_penalty: float = 0.3
    wrong_demo_penalty: float = 0.5
    mean_output_tokens: float = 300.0
    output_tokens_sigma: float = 0.35
    length_difficulty: float = 0.25
    question_length_sigma: float = 0.3
    failure_length_ratio: float = 1.6
    thinking_ratio: float = 0.0
    latency_s: float = 0.0
    latency_sigma: float = 0.8
    chars_per_token: float = 4.0
    temperature_sensitivity: float = 0.5

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "seed":
                if not isinstance(value, int) or isinstance(value, bool):
                    raise ConfigError(f"sim.seed: must be an integer, got {value!r}")
            elif not isinstance(value, int | float) or not math.isfinite(value):
                raise ConfigError(f"sim.{f.name}: must be a finite number, got {value!r}")
        # name -> (the lowest value allowed, whether it is allowed itself)
        bounds = dict.fromkeys(_NONNEGATIVE.split(), (0.0, True))
        bounds |= dict.fromkeys(_POSITIVE.split(), (0.0, False))
        bounds["failure_length_ratio"] = (1.0, True)
        for name, (low, inclusive) in bounds.items():
            value = getattr(self, name)
            if value < low or (value == low and not inclusive):
                sign = ">=" if inclusive else ">"
                raise ConfigError(f"sim.{name}: must be {sign} {low:g}, got {value}")
        if not 0 <= self.cluster_difficulty_share < 1:
            raise ConfigError(
                "sim.cluster_difficulty_share: must be in [0, 1), got "
                f"{self.cluster_difficulty_share}"
            )


_NONNEGATIVE = (
    "difficulty_std icl_gain dissimilar_penalty wrong_demo_penalty output_tokens_sigma "
    "thinking_ratio latency_s latency_sigma temperature_sensitivity length_difficulty "
    "question_length_sigma"
)
_POSITIVE = "mean_output_tokens chars_per_token fallback_cluster_size"


class SimProvider(Provider):
    """An offline stand-in for an LLM that answers in the suite's real format (see module doc)."""

    name = "sim"
    model = "sim-2"
    # Reports built from this provider's numbers say they are simulated.
    simulated = True

    def __init__(
        self, suite: Suite, items: Sequence[Item], config: SimConfig = SimConfig()
    ) -> None:
        self.suite = suite
        self.config = config
        # The knobs that shape answers are part of the model's identity: a response cache or a
        # resumed run must not mix answers of differently configured simulators.
        knobs = dataclasses.asdict(config)
        knobs.pop("latency_s")
        knobs.pop("latency_sigma")
        digest = hashlib.blake2b(repr(sorted(knobs.items())).encode(), digest_size=4).hexdigest()
        self.model = f"sim-2@{digest}"
        self._items = {item.id: item for item in items}
        # The simulator's own hidden clusters, difficulties and lengths (not the engine's embedder).
        self.latents = Latents(items, config)
        self.answers = answers_for(suite)
        self._prose_on = self.answers.sim_prose
        cfg = config
        self._latency_mu = math.log(cfg.latency_s) if cfg.latency_s > 0 else 0.0

    def _item(self, item_id: str) -> Item:
        try:
            return self._items[item_id]
        except KeyError:
            raise BadRequest(f"sim: unknown item id {item_id!r}") from None

    def difficulty(self, item_id: str) -> float:
        """The latent difficulty of an item: a deterministic draw from (seed, item id, cluster)."""
        return self.latents.difficulty(self._item(item_id).id)

    def cluster(self, item_id: str) -> str:
        """The item's hidden skill cluster (see `_latent`)."""
        return self.latents.cluster(self._item(item_id).id)

    def demo_effect(self, target: Item, demo: Demo) -> float:
        """The logit effect of one demonstration on `target` (see the module doc)."""
        cfg = self.config
        demo_item = self._items.get(demo.item_id)
        if demo_item is None:  # from outside the test set: a curated example in no cluster
            return 0.0
        correct = self.answers.sim_is_correct(demo_item, demo.response)
        same = self.latents.cluster(demo_item.id) == self.latents.cluster(target.id)
        effect = 0.0 if same else -cfg.dissimilar_penalty
        if not correct:
            return effect - cfg.wrong_demo_penalty
        return effect + (cfg.icl_gain if same else 0.0)

    def success_probability(self, request: Request) -> float:
        """The probability that one sample of `request` is correct."""
        cfg = self.config
        target = self._item(request.item_id)
        logit = cfg.ability - self.difficulty(target.id)
        if request.demos:
            logit += sum(self.demo_effect(target, d) for d in request.demos) / len(request.demos)
        temperature = request.sampling.temperature
        if temperature is not None:
            logit *= (REFERENCE_TEMPERATURE / max(temperature, 0.05)) ** cfg.temperature_sensitivity
        return 1.0 / (1.0 + math.exp(-logit)) if logit > -700 else 0.0

    async def generate(self, request: Request) -> Completion:
        """Samples `request.n` responses; the same request always gets the same completion."""
        cfg = self.config
        if request.n < 1:
            raise BadRequest(f"sim: n must be >= 1, got {request.n}")
        item = self._item(request.item_id)
        p = self.success_probability(request)
        rng = np.random.default_rng(
            stable_hash(
                cfg.seed, request.item_id, request.sampling.seed, [d.item_id for d in request.demos]
            )
        )
        max_tokens = request.sampling.max_output_tokens
        texts: list[str] = []
        finish: list[str] = []
        output_tokens = 0
        for _ in range(request.n):
            success = bool(rng.random() < p)
            mu = self.latents.length_mu(item.id, success)
            tokens = max(1, round(float(rng.lognormal(mu, cfg.output_tokens_sigma))))
            answer_seed = int(rng.integers(0, 2**31))
            answer = self.answers.sim_response(item, success, answer_seed)
            if max_tokens is not None and tokens > max_tokens:
                # Cut off before the final answer, as a real model that hits its limit is.
                tokens = max_tokens
                texts.append(prose(int(tokens * cfg.chars_per_token), rng))
                finish.append("length")
            elif self._prose_on:
                chars = int(tokens * cfg.chars_per_token) - len(answer) - 2
                text = prose(chars, rng)
                texts.append(f"{text}\n\n{answer}" if text else answer)
                finish.append("stop")
            else:
                texts.append(answer)
                finish.append("stop")
            output_tokens += tokens
        thinking = thought(cfg.thinking_ratio, output_tokens, request.sampling, request.n)
        prompt_chars = sum(len(m.content) for m in request.messages)
        usage = Usage(
            input_tokens=math.ceil(prompt_chars / cfg.chars_per_token),
            output_tokens=output_tokens,
            thinking_tokens=thinking,
        )
        latency = 0.0
        if cfg.latency_s > 0:  # drawn last, so the latency knob never changes the texts
            latency = float(rng.lognormal(self._latency_mu, cfg.latency_sigma))
            await asyncio.sleep(latency)
        return Completion(
            texts=tuple(texts),
            usage=usage,
            finish_reasons=tuple(finish),
            latency_s=latency,
            model=self.model,
        )

    async def aclose(self) -> None:
        """Nothing to release."""


@dataclass(frozen=True, slots=True)
class SimRoleConfig:
    """The role stand-ins' knobs.

    judge_right, judge_wrong, judge_std: the judge's score (0-10) of a right response is
        Normal(judge_right, judge_std), of a wrong one Normal(judge_wrong, judge_std), rounded
        and clipped.
    rating_std: the difficulty rating is 5.5 + 1.5 z + Normal(0, rating_std), rounded and clipped
        to 1-10, where z is the question's latent difficulty standardised.
    garbage_rate: the share of replies that hold no number at all.
    """

    seed: int = 0
    judge_right: float = 8.5
    judge_wrong: float = 3.0
    judge_std: float = 1.5
    rating_std: float = 1.0
    garbage_rate: float = 0.02

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise ConfigError(f"sim role.{f.name}: must be a finite number, got {value!r}")
        if self.judge_std < 0 or self.rating_std < 0 or not 0 <= self.garbage_rate <= 1:
            raise ConfigError("sim role: the spreads must be >= 0 and garbage_rate in [0, 1]")

    def digest(self) -> str:
        knobs = repr(sorted(dataclasses.asdict(self).items()))
        return hashlib.blake2b(knobs.encode(), digest_size=4).hexdigest()


class _SimRole(Provider):
    """What both role stand-ins share: the policy simulator's items and latent difficulties."""

    name = "sim"
    simulated = True
    kind = "role"

    def __init__(
        self,
        suite: Suite,
        items: Sequence[Item],
        config: SimRoleConfig = SimRoleConfig(),
        sim: SimConfig | None = None,
    ) -> None:
        self.suite = suite
        self.config = config
        # The same latent difficulties as the policy simulator of the same seed.
        self.policy = SimProvider(suite, items, sim or SimConfig(seed=config.seed))
        self.model = f"sim-{self.kind}-1@{config.digest()}"

    def _rng(self, request: Request) -> np.random.Generator:
        text = request.messages[-1].content if request.messages else ""
        return np.random.default_rng(
            stable_hash(self.config.seed, self.kind, request.item_id, request.sampling.seed, text)
        )

    def _reply(self, request: Request, text: str) -> Completion:
        prompt_chars = sum(len(m.content) for m in request.messages)
        usage = Usage(math.ceil(prompt_chars / 4), max(1, math.ceil(len(text) / 4)))
        return Completion((text,), usage, ("stop",), model=self.model)

    async def aclose(self) -> None:
        """Nothing to release."""


class SimJudge(_SimRole):
    """A stand-in reward model: reads the response out of the engine's rubric prompt and scores
    it 0-10, higher when the suite's `SimAnswers` says it is right, with noise."""

    kind = "judge"

    async def generate(self, request: Request) -> Completion:
        from ttc.engine.strategy import SCALE, split_rubric

        item = self.policy._item(request.item_id)
        parts = split_rubric(request.messages[-1].content) if request.messages else None
        if parts is None:
            raise BadRequest("sim judge: the prompt is not the engine's rubric")
        rng = self._rng(request)
        cfg = self.config
        if rng.random() < cfg.garbage_rate:
            return self._reply(request, "The response is hard to assess without more context.")
        right = self.policy.answers.sim_is_correct(item, parts[1])
        mean = cfg.judge_right if right else cfg.judge_wrong
        score = int(min(SCALE, max(0, round(float(rng.normal(mean, cfg.judge_std))))))
        verdict = "appears correct" if score >= SCALE // 2 else "appears incorrect"
        return self._reply(request, f"The final answer {verdict}.\nScore: {score}")


class SimDifficulty(_SimRole):
    """A stand-in difficulty model: a 1-10 rating that grows with the question's latent
    difficulty, with noise."""

    kind = "difficulty"

    async def generate(self, request: Request) -> Completion:
        sim = self.policy.config
        d = self.policy.difficulty(self.policy._item(request.item_id).id)
        rng = self._rng(request)
        cfg = self.config
        if rng.random() < cfg.garbage_rate:
            return self._reply(request, "It depends on the background of the solver.")
        z = (d - sim.difficulty_mean) / sim.difficulty_std if sim.difficulty_std else 0.0
        rating = 5.5 + 1.5 * z + float(rng.normal(0.0, cfg.rating_std))
        return self._reply(request, f"Difficulty: {int(min(10, max(1, round(rating))))}")


# Thinking tokens per output token of a request that turns thinking on (a thinking budget above
# 0) when no ratio is set (`thinking_ratio`, `ttc serve --sim-thinking`): a thinking model asked
# to think does, about as much as it writes, within its budget.
ASKED_THINKING_RATIO = 1.0


def thought(ratio: float, output_tokens: int, sampling: Sampling, n: int) -> int:
    """The thinking tokens of a completion of `output_tokens`: `ratio` per output token, or
    ASKED_THINKING_RATIO when none is set and the request asks for thinking; at most its
    thinking budget per sample."""
    budget = sampling.thinking_budget
    if not ratio and budget is not None and budget > 0:
        ratio = ASKED_THINKING_RATIO
    thinking = round(ratio * output_tokens)
    return thinking if budget is None else min(thinking, budget * n)
