"""The resolved configuration of a run, validated before a single request is sent."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ttc.engine.contract._errors import ConfigError
from ttc.engine.contract._types import Sampling

# The paper's main comparison (what `ttc compare` runs).
METHODS = ("unif", "elim", "rand", "adpt")
# Every named method `--method` accepts: the main four, then the appendix and ablation presets.
PRESETS = (*METHODS, "da", "temp", "fixed-icl", "sc", "esc", "asc", "bandit")
# bandit: how a round's budget is spread over the unsolved questions (`--bandit-rule`).
BANDIT_RULES = ("entropy", "ucb")
# The presets that stop each question by the agreement of its answers, judged with no oracle.
AGREEMENT = ("sc", "esc", "asc")
NEIGHBOUR_MODES = ("solved", "fixed")
# `truth`: the suite's verifier at γ; `reward`: an LLM judge; `consensus`: self-consistency.
JUDGES = ("truth", "reward", "consensus")
# A noisy judge's demonstration pool: `accepted`, only the responses it accepted (the paper's
# words); `latest`, also each unaccepted question's most recent response.
POOLS = ("accepted", "latest")
# The FAISS index of solved questions (`--index`; ttc.retrieval builds each kind).
INDEXES = ("auto", "flat", "ivf", "hnsw")

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
    "index": "--index",
    "concurrency": "--concurrency",
    "rpm": "--rpm",
    "tpm": "--tpm",
    "timeout_s": "--timeout",
    "max_attempts": "--max-attempts",
    "verifier_workers": "--workers",
    "max_cost_usd": "--max-cost",
    "max_output_tokens": "--max-output-tokens",
    "judge": "--judge",
    "judge_threshold": "--judge-threshold",
    "judge_temperature": "--judge-temperature",
    "noise": "--noise",
    "pool": "--pool",
    "consensus": "--consensus",
    "fewshot": "--fewshot",
    "match_tokens": "--match-tokens",
    "temp_step": "temp_step",
    "asc_threshold": "--asc-threshold",
    "bandit_rule": "--bandit-rule",
    "bandit_budget": "--bandit-budget",
    "bandit_c": "--bandit-c",
    "bandit_floor": "--bandit-floor",
    "hedge": "--hedge",
}

# Settings that may change when a run is resumed: limits, not the experiment.
OPERATIONAL = frozenset(
    {
        "concurrency",
        "rpm",
        "tpm",
        "timeout_s",
        "max_attempts",
        "verifier_workers",
        "max_cost_usd",
        "max_output_tokens",
        "hedge",
    }
)


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
    # The FAISS index of solved questions (INDEXES): exact `flat`, approximate `ivf` or `hnsw`,
    # or `auto` (exact up to 100,000 questions). Approximate search may change the neighbours.
    index: str = "auto"
    concurrency: int = 64
    rpm: float | None = None
    tpm: float | None = None
    timeout_s: float = 300.0
    max_attempts: int = 6
    # Verifier worker processes; 0 judges in the event loop's thread (only for cheap verifiers).
    verifier_workers: int = 2
    # Budgets: dispatching stops cleanly once the run has cost this much (the role models' calls
    # included) or the policy model has produced this many output tokens (replayed samples count
    # too); the run directory stays resumable.
    max_cost_usd: float | None = None
    max_output_tokens: int | None = None
    sampling: Sampling = field(default_factory=Sampling)
    # How responses are judged; None: the method's own (`consensus` for sc, else `truth`).
    judge: str | None = None
    # The reward judge: a response is accepted at this share of the rubric's maximum score.
    judge_threshold: float = 0.7
    # The role models' (judge, difficulty rater) sampling temperature; None: their API's default.
    judge_temperature: float | None = None
    # Each binary verdict is flipped with this probability (section 5.3's noisy reward: 0.05).
    noise: float = 0.0
    # A noisy judge's demonstration pool (POOLS): the accepted responses only, or also the most
    # recent response of each question it has not accepted. Either way such a question's final
    # answer is its most recent response.
    pool: str = "accepted"
    # Self-consistency: resolved once one answer is given by more than this share of a
    # question's responses (the paper: "a consensus over 75%").
    consensus: float = 0.75
    # fixed-icl: the few-shot file (JSONL of {"question", "response"}); None: the suite's default.
    fewshot: str | None = None
    # unif and da: the output tokens to match (another run's total), instead of R x K per question.
    match_tokens: int | None = None
    # temp: the temperature rises by this much each round (from --temperature, default 0.3).
    temp_step: float = 0.4
    # asc: a question stops once P(its leading answer beats the second) exceeds this.
    asc_threshold: float = 0.95
    # bandit: its rule (BANDIT_RULES), samples per unsolved question per round on average (None:
    # K), the UCB's exploration constant, and each question's floor share.
    bandit_rule: str = "entropy"
    bandit_budget: float | None = None
    bandit_c: float = 1.0
    bandit_floor: float = 0.1
    # Stragglers at the end of a round get a second copy of their request (`--hedge`): the
    # first answer is kept, but a provider bills both, and each copy spends quota. Off unless
    # asked for, so that no request is sent twice unless its first attempt failed.
    hedge: bool = False

    def __post_init__(self) -> None:
        self._check_sizes()
        self._check_limits()
        self._check_method()
        self._check_judge()
        self._check_extras()

    def _bad(self, name: str, why: str) -> ConfigError:
        """The error for field `name`, naming its flag and the value given."""
        return ConfigError(f"{FLAGS.get(name, name)}: {why}, got {getattr(self, name)!r}")

    def _check_sizes(self) -> None:
        """Rounds, samples, demonstrations and γ."""
        bad = self._bad
        for name in ("rounds", "k", "concurrency", "max_attempts"):
            if getattr(self, name) < 1:
                raise bad(name, "must be at least 1")
        if not 0 <= self.warmup_rounds <= self.rounds:
            raise bad("warmup_rounds", f"must be between 0 and --rounds ({self.rounds})")
        if self.p < 0:
            raise bad("p", "must be 0 or more")
        if not 0.0 < self.gamma <= 1.0:
            raise bad("gamma", "must be in (0, 1]")
        if self.neighbours not in NEIGHBOUR_MODES:
            raise bad("neighbours", f"must be one of {', '.join(NEIGHBOUR_MODES)}")
        if self.index not in INDEXES:
            raise bad("index", f"must be one of {', '.join(INDEXES)}")

    def _check_limits(self) -> None:
        """The scheduler's limits and the budgets."""
        bad = self._bad
        for name in ("rpm", "tpm", "max_cost_usd", "max_output_tokens"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise bad(name, "must be positive")
        if not self.timeout_s > 0:
            raise bad("timeout_s", "must be positive")
        if self.verifier_workers < 0:
            raise bad("verifier_workers", "must be 0 or more")

    def _check_method(self) -> None:
        """The method flags, and the combinations of them that mean something."""
        bad = self._bad
        if self.method not in PRESETS:
            raise bad("method", f"must be one of {', '.join(PRESETS)}")
        if self.judge is not None and self.judge not in JUDGES:
            raise bad("judge", f"must be one of {', '.join(JUDGES)}")
        if self.method == "sc" and self.judge not in (None, "consensus"):
            raise bad("judge", "sc is judged by consensus; drop --judge or use another method")
        if self.method in ("esc", "asc") and self.judge is not None:
            raise bad("judge", f"{self.method} is judged by its own stopping rule; drop --judge")
        if not 0.5 < self.asc_threshold < 1.0:
            raise bad("asc_threshold", "must be in (0.5, 1)")
        self._check_bandit()

    def _check_bandit(self) -> None:
        """bandit's rule and numbers."""
        bad = self._bad
        if self.bandit_rule not in BANDIT_RULES:
            raise bad("bandit_rule", f"must be one of {', '.join(BANDIT_RULES)}")
        if self.bandit_budget is not None and not (
            self.bandit_budget > 0 and math.isfinite(self.bandit_budget)
        ):
            raise bad("bandit_budget", "must be a positive number")
        for name in ("bandit_c", "bandit_floor"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise bad(name, "must be a finite number >= 0")

    def _check_judge(self) -> None:
        """The judgement's settings: threshold, noise, consensus, role temperature."""
        bad = self._bad
        if not 0.0 < self.judge_threshold <= 1.0:
            raise bad("judge_threshold", "must be in (0, 1]")
        if not 0.0 <= self.noise < 1.0:
            raise bad("noise", "must be in [0, 1)")
        if self.noise and self.judgement in ("consensus", "esc", "asc"):
            raise bad("noise", "flips binary verdicts; a consensus judge gives none")
        if self.pool not in POOLS:
            raise bad("pool", f"must be one of {', '.join(POOLS)}")
        if self.pool != "accepted" and not self.noise:
            raise bad("pool", "only a noisy judge (--noise) shows responses it did not accept")
        if not 0.0 < self.consensus < 1.0:
            raise bad("consensus", "must be in (0, 1): a consensus is more than this share")
        if self.judge_temperature is not None and not (
            self.judge_temperature >= 0.0 and math.isfinite(self.judge_temperature)
        ):
            raise bad("judge_temperature", "must be a finite number >= 0")

    def _check_extras(self) -> None:
        """The few-shot file (fixed-icl), a matched token budget (unif, da), temp's step,
        hedging."""
        bad = self._bad
        if not isinstance(self.hedge, bool):
            raise bad("hedge", "must be true or false")
        if self.fewshot is not None and self.method != "fixed-icl":
            raise bad("fewshot", "only the fixed-icl method shows a fixed few-shot prompt")
        if self.match_tokens is not None:
            if self.method not in ("unif", "da"):
                raise bad("match_tokens", "only unif and da take a matched token budget")
            if not self.match_tokens > 0:
                raise bad("match_tokens", "the matched run produced no output tokens")
            if self.warmup_rounds < 1:
                raise bad(
                    "match_tokens", "needs --warmup >= 1 (the warm-up measures tokens per sample)"
                )
        if not (self.temp_step >= 0 and math.isfinite(self.temp_step)):
            raise bad("temp_step", "must be a finite number >= 0")

    @property
    def judgement(self) -> str:
        """The judge in effect: --judge, or the method's own."""
        if self.judge is not None:
            return self.judge
        if self.method in ("esc", "asc"):
            return self.method
        return "consensus" if self.method == "sc" else "truth"

    @property
    def roles(self) -> tuple[str, ...]:
        """The models besides the policy that this method asks: `judge`, `difficulty`."""
        needed = []
        if self.judgement == "reward":
            needed.append("judge")
        if self.method == "da":
            needed.append("difficulty")
        return tuple(needed)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy, as written to the run directory."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """The inverse of `to_dict`; unknown keys are an error naming the key, missing keys take
        their defaults (a run directory written before a field existed)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config key(s): {', '.join(unknown)}")
        values = dict(data)
        if isinstance(values.get("sampling"), dict):
            values["sampling"] = Sampling(**values["sampling"])
        return cls(**values)
