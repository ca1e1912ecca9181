"""What a run needs to be wired, as one typed value: the suite, the policy and role models, the
embedder, the cache, the run directory and every setting of its RunConfig.

The command line makes a RunSpec in one place (`RunSpec.from_args`); `benchmarks/paper.py` makes
them directly. The wiring (`_wiring`) turns a RunSpec into objects and never sees argparse. The
defaults are the command line's, so a RunSpec built by hand behaves as `ttc run` with no flags.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from ttc.engine import ConfigError, RunConfig, Sampling
from ttc.engine.cli._batchmode import BatchSpec, batch_spec
from ttc.engine.cli._executor import ExecutorSpec
from ttc.engine.cli._stream_flags import STREAM_TIMEOUT_S, StreamSpec, stream_spec

SUITES = ("reasoning_gym", "math500", "minerva", "gpqa", "livecodebench", "custom")
PROVIDERS = ("sim", "openai", "gemini", "anthropic", "azure")
SERVICE_TIERS = ("flex", "auto", "default")
AZURE_API_VERSION = "2024-10-21"  # the latest GA inference API (the adapter's default too)
# Seconds per attempt: OpenAI asks flex clients to wait 15 minutes.
TIMEOUT_S, FLEX_TIMEOUT_S = 300.0, 900.0
# `ttc compare`'s protocols: the paper's (unif matched to elim's output tokens, Appendix A's
# decoding) or none (unif samples every round; decoding as the flags say).
PROTOCOLS = ("paper", "none")
# Appendix A's output limits, and the OpenAI models that reason (no temperature, top_p, top_k).
PAPER_MAX_TOKENS = {"gemini": 65_536, "openai": 32_768}
REASONING_MODEL = re.compile(r"^(gpt-5|o\d)")
ANTHROPIC_MIN_THINKING = 1024


def default_timeout(service_tier: str | None, stream: bool) -> float:
    """--timeout's default: an hour when streaming (stalls are caught by --stall-timeout), 15
    minutes for the flex tier, else 5."""
    if stream:
        return STREAM_TIMEOUT_S
    return FLEX_TIMEOUT_S if service_tier == "flex" else TIMEOUT_S


def paper_decoding(provider: str, model: str | None) -> Sampling:
    """Appendix A's decoding for `provider`'s `model`: temperature 0.3, top_p 0.9 and top_k 40,
    at most 65,536 (Gemini) or 32,768 (GPT) output tokens; an OpenAI reasoning model (gpt-5*,
    o*) takes no temperature, top_p or top_k: reasoning effort and verbosity medium instead."""
    limit = PAPER_MAX_TOKENS.get(provider)
    if provider == "openai" and REASONING_MODEL.match(model or ""):
        return Sampling(max_output_tokens=limit, reasoning_effort="medium", verbosity="medium")
    return Sampling(temperature=0.3, top_p=0.9, top_k=40, max_output_tokens=limit)


def given_over(base: Sampling, given: Sampling) -> Sampling:
    """`base` with every setting `given` sets (not None) in its place."""
    set_ = {f.name: getattr(given, f.name) for f in fields(given)}
    return replace(base, **{name: value for name, value in set_.items() if value is not None})


def check_anthropic_decoding(given: Sampling) -> None:
    """Refuses the decoding Anthropic's extended thinking refuses, naming the flag: a budget
    under 1024, one not under --max-tokens, and with it --temperature (but 1), --top-k, or a
    --top-p under 0.95."""
    budget = given.thinking_budget
    if not budget:
        return
    if budget < ANTHROPIC_MIN_THINKING:
        raise ConfigError(
            f"--thinking-budget: Anthropic's extended thinking takes at least "
            f"{ANTHROPIC_MIN_THINKING} tokens (0: off), got {budget}"
        )
    if given.max_output_tokens is not None and given.max_output_tokens <= budget:
        raise ConfigError(
            f"--max-tokens: must be more than --thinking-budget ({budget}) with --provider "
            f"anthropic, got {given.max_output_tokens}"
        )
    if given.temperature is not None and given.temperature != 1:
        raise ConfigError("--temperature: Anthropic takes none but 1 with --thinking-budget")
    if given.top_k is not None:
        raise ConfigError("--top-k: Anthropic takes none with --thinking-budget")
    if given.top_p is not None and given.top_p < 0.95:
        raise ConfigError("--top-p: Anthropic takes one in [0.95, 1] with --thinking-budget")


@dataclass(frozen=True, slots=True)
class SuiteSpec:
    """The test set: a suite, its data file and options, and how many of its questions."""

    name: str = "reasoning_gym"
    data: Path | None = None
    per_task: int = 100
    suite_config: Path | None = None
    # LiveCodeBench's release window (both included); None: no bound.
    lcb_start: str | None = "2024-10-05"
    lcb_end: str | None = "2025-01-04"
    limit: int | None = None
    # Judge code where the sandbox cannot hide the tests from the programs (recorded).
    allow_visible_tests: bool = False
    # --hub: with no --data and no file in the data directory, read the Hugging Face Hub's copy.
    hub: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SuiteSpec:
        """The test-set flags of `run`, `compare`, `verify` and `serve`."""
        return cls(
            name=args.suite,
            data=args.data,
            per_task=args.per_task,
            suite_config=args.suite_config,
            lcb_start=args.lcb_start,
            lcb_end=args.lcb_end,
            limit=args.limit,
            allow_visible_tests=getattr(args, "allow_visible_tests", False),
            hub=bool(getattr(args, "hub", False)),
        )


def one_or_many(urls: list[str] | None) -> str | tuple[str, ...] | None:
    """--base-url as given: None, one URL, or the replicas' URLs (given more than once)."""
    if not urls:
        return None
    return urls[0] if len(urls) == 1 else tuple(urls)


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """The policy model: its kind, model, API and key variable, or the simulator's knobs."""

    kind: str = "sim"
    model: str | None = None
    base_url: str | tuple[str, ...] | None = None  # a tuple: replicas (--base-url repeated)
    # The NAME of the variable holding the key; None: the vendor's usual one.
    api_key_env: str | None = None
    # The cap on a response body read (of every HTTP model and embedder); None: 32 MiB.
    max_response_bytes: int | None = None
    # Azure OpenAI's api-version (None: the adapter's default); OpenAI's service_tier.
    api_version: str | None = None
    service_tier: str | None = None
    # --api, --stream and its timeouts (`_stream_flags`).
    streaming: StreamSpec = field(default_factory=StreamSpec)
    sim_ability: float = 0.0
    sim_latency: float = 0.0
    sim_thinking: float = 0.0
    sim_icl_gain: float = 1.0


@dataclass(frozen=True, slots=True)
class RunSpec:
    """Everything a run (or each run of a compare) is wired from; defaults as `ttc run`'s."""

    suite: SuiteSpec = field(default_factory=SuiteSpec)
    provider: ProviderSpec = field(default_factory=ProviderSpec)
    # None for `ttc compare`, which runs the main four methods.
    method: str | None = "adpt"
    # Algorithm 1 and the scheduler's limits, as RunConfig names them.
    rounds: int = 4
    warmup_rounds: int = 1
    k: int = 1
    p: int = 3
    gamma: float = 1.0
    seed: int = 0
    neighbours: str = "solved"
    index: str = "auto"
    concurrency: int = 64
    rpm: float | None = None
    tpm: float | None = None
    timeout_s: float = 300.0
    max_attempts: int = 6
    hedge: bool = False
    verifier_workers: int = 2
    max_cost_usd: float | None = None
    max_output_tokens: int | None = None
    sampling: Sampling = field(default_factory=Sampling)
    # The method flags.
    judge: str | None = None
    judge_threshold: float = 0.7
    judge_temperature: float | None = None
    noise: float = 0.0
    pool: str = "accepted"
    consensus: float = 0.75
    # asc: its Beta stopping rule's threshold (--asc-threshold).
    asc_threshold: float = 0.95
    # bandit: --bandit-rule, --bandit-budget, --bandit-c, --bandit-floor.
    bandit_rule: str = "entropy"
    bandit_budget: float | None = None
    bandit_c: float = 1.0
    bandit_floor: float = 0.1
    fewshot: Path | None = None
    # --match-tokens: the run directory whose output tokens unif and da match.
    match_run: Path | None = None
    # The role models: `sim` (the stand-ins), `openai:MODEL` or `gemini:MODEL`.
    judge_model: str = "sim"
    difficulty_model: str = "sim"
    embedder: str = "auto"
    embed_base_url: str | None = None
    # --price as typed (INPUT,OUTPUT[,THINKING]); parsed when the run is wired, as before.
    price: str | None = None
    # The response cache file; None: no cache.
    cache: Path | None = None
    # The run directory; None: not named (`ttc run --resume` with no --out is refused).
    out: Path | None = None
    resume: bool = False
    # `ttc run --dry-run`: the plan's worst-case cost printed, nothing sent.
    dry_run: bool = False
    live: bool = False
    grace_s: float = 30.0
    # --metrics-port (0: any free port; None: no metrics served) and the address it binds.
    metrics_port: int | None = None
    metrics_addr: str = "127.0.0.1"
    # --otel: the command's spans sent over OTLP/HTTP (`_otel`).
    otel: bool = False
    # The command line that made the run, without --resume (for `ttc resume`).
    argv: tuple[str, ...] = ()
    # `ttc compare`'s protocol (PROTOCOLS); None for `ttc run`.
    protocol: str | None = None
    # `ttc compare --methods`: the methods compared (None: unif, elim, rand, adpt).
    methods: tuple[str, ...] | None = None
    # --batch: the provider's Batch API (None: every request synchronously).
    batch: BatchSpec | None = None
    # --executor, --ray-address: where responses are verified.
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)
    # --shared-limits (a Redis URL) and --quota-name: the rate limits shared by many processes.
    shared_limits: str | None = None
    quota_name: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace, argv: Sequence[str] = ()) -> RunSpec:
        """The spec of `ttc run` or `ttc compare` from its parsed flags."""
        method: str | None = args.method
        protocol: str | None = getattr(args, "protocol", None)
        sampling = Sampling(
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            max_output_tokens=args.max_tokens,
            thinking_budget=args.thinking_budget,
            reasoning_effort=args.reasoning_effort,
            verbosity=args.verbosity,
        )
        if protocol == "paper":  # a decoding flag given still wins
            base = paper_decoding(args.provider, args.model)
            if args.provider == "anthropic" and args.thinking_budget:  # see check_anthropic_...
                base = replace(base, temperature=None, top_p=None, top_k=None)
            sampling = given_over(base, sampling)
        streaming = stream_spec(args, sampling)
        return cls(
            suite=SuiteSpec.from_args(args),
            provider=ProviderSpec(
                kind=args.provider,
                model=args.model,
                base_url=one_or_many(args.base_url),
                api_key_env=args.api_key_env,
                max_response_bytes=args.max_response_bytes,
                api_version=args.api_version,
                service_tier=args.service_tier,
                streaming=streaming,
                sim_ability=args.sim_ability,
                sim_latency=args.sim_latency,
                sim_thinking=args.sim_thinking,
                sim_icl_gain=args.sim_icl_gain,
            ),
            method=method,
            rounds=args.rounds,
            warmup_rounds=args.warmup,
            k=args.k,
            p=args.p,
            gamma=args.gamma,
            seed=args.seed,
            neighbours=args.neighbours,
            index=args.index,
            concurrency=args.concurrency,
            rpm=args.rpm,
            tpm=args.tpm,
            timeout_s=args.timeout or default_timeout(args.service_tier, streaming.stream),
            max_attempts=args.max_attempts,
            hedge=args.hedge,
            verifier_workers=args.workers,
            max_cost_usd=args.max_cost,
            max_output_tokens=args.max_output_tokens,
            sampling=sampling,
            judge=args.judge,
            judge_threshold=args.judge_threshold,
            judge_temperature=args.judge_temperature,
            noise=args.noise,
            pool=args.pool,
            consensus=args.consensus,
            asc_threshold=getattr(args, "asc_threshold", 0.95),
            bandit_rule=getattr(args, "bandit_rule", "entropy"),
            bandit_budget=getattr(args, "bandit_budget", None),
            bandit_c=getattr(args, "bandit_c", 1.0),
            bandit_floor=getattr(args, "bandit_floor", 0.1),
            fewshot=args.fewshot,
            match_run=args.match_tokens,
            judge_model=args.judge_model,
            difficulty_model=args.difficulty_model,
            embedder=args.embedder,
            embed_base_url=args.embed_base_url,
            price=args.price,
            cache=None if args.no_cache else cache_path(args.cache),
            # A new run's directory is named now, so an interrupt can always say where it is.
            out=args.out or (None if args.resume else default_out(method or "compare")),
            resume=args.resume,
            dry_run=bool(getattr(args, "dry_run", False)),
            live=sys.stderr.isatty() if args.live is None else bool(args.live),
            grace_s=args.grace,
            metrics_port=args.metrics_port,
            metrics_addr=args.metrics_addr,
            otel=bool(getattr(args, "otel", False)),
            argv=tuple(argv),
            protocol=protocol,
            methods=getattr(args, "methods", None),
            batch=batch_spec(args),
            executor=ExecutorSpec.from_args(args),
            shared_limits=args.shared_limits,
            quota_name=args.quota_name,
        )

    @property
    def label(self) -> str:
        """The run's name in a default run directory: its method, or `compare`."""
        return self.method or "compare"

    def run_config(self, method: str, match_tokens: int | None = None) -> RunConfig:
        """The RunConfig of `method` (validated: a bad combination is a ConfigError)."""
        return RunConfig(
            rounds=self.rounds,
            warmup_rounds=self.warmup_rounds,
            k=self.k,
            p=self.p,
            gamma=self.gamma,
            seed=self.seed,
            method=method,
            neighbours=self.neighbours,
            index=self.index,
            concurrency=self.concurrency,
            rpm=self.rpm,
            tpm=self.tpm,
            timeout_s=self.timeout_s,
            max_attempts=self.max_attempts,
            verifier_workers=self.verifier_workers,
            max_cost_usd=self.max_cost_usd,
            max_output_tokens=self.max_output_tokens,
            sampling=self.sampling,
            judge=self.judge,
            judge_threshold=self.judge_threshold,
            judge_temperature=self.judge_temperature,
            noise=self.noise,
            pool=self.pool,
            consensus=self.consensus,
            asc_threshold=self.asc_threshold,
            bandit_rule=self.bandit_rule,
            bandit_budget=self.bandit_budget,
            bandit_c=self.bandit_c,
            bandit_floor=self.bandit_floor,
            fewshot=None if self.fewshot is None else str(self.fewshot),
            match_tokens=match_tokens,
            hedge=self.hedge,
        )


def cache_path(given: Path | None) -> Path:
    """--cache, else $TTC_CACHE_DIR/responses.sqlite3, else ~/.cache/ttc/responses.sqlite3."""
    if given is not None:
        return Path(given)
    root = os.environ.get("TTC_CACHE_DIR") or Path.home() / ".cache" / "ttc"
    return Path(root) / "responses.sqlite3"


def default_out(label: str) -> Path:
    """runs/<timestamp>-<label>, with a suffix when that exists already."""
    base = Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{label}"
    path, i = base, 1
    while path.exists():
        i += 1
        path = base.with_name(f"{base.name}-{i}")
    return path
