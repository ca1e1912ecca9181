"""RunSpec → objects: the suite, the policy and role models, the cache, the embedder, the Engine.

The one place that builds an `Engine` (`make_engine`), for `ttc run`, `ttc compare` and
`benchmarks/paper.py` alike. Adapters are imported inside the functions that need them, so that
`ttc report` or `ttc --help` does not pay for loading every vendor's client.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ttc.adapters.providers import VENDOR_URLS
from ttc.engine import (
    ConfigError,
    Embedder,
    Engine,
    EngineOptions,
    Event,
    Item,
    Provider,
    ResponseCache,
    RoundStats,
    RunConfig,
    RunObserver,
    RunState,
    StopReason,
    Suite,
    Usage,
    Verifiers,
)
from ttc.engine.cli._batchmode import policy_price
from ttc.engine.cli._progress import Progress
from ttc.engine.cli._provider_flags import key_named
from ttc.engine.cli._servers import many_from, one_url, replicas
from ttc.engine.cli._spec import (
    AZURE_API_VERSION,
    ProviderSpec,
    RunSpec,
    SuiteSpec,
    check_anthropic_decoding,
)
from ttc.engine.cli._stream_flags import StreamSpec
from ttc.engine.journal import matched_output_tokens
from ttc.engine.journal._rundir import output_tokens_of
from ttc.engine.run import Attempted
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._prices import Price, parse_price
from ttc.engine.strategy import Strategy

# The role models' flags, named in their errors.
ROLE_FLAGS = {"judge": "judge_model", "difficulty": "difficulty_model"}


def make_suite(spec: SuiteSpec) -> Suite:
    """The suite a SuiteSpec names; ConfigError naming the flag when it does not fit. With no
    --data, a Hub suite's file is looked for in the data directory; the Hub is asked only with
    --hub."""
    from ttc.adapters import SuiteOptions
    from ttc.adapters import make_suite as make
    from ttc.adapters.suites import HUB_SUITES, local_data, no_local_data

    options = SuiteOptions(
        per_task=spec.per_task,
        suite_config=spec.suite_config,
        start=spec.lcb_start,
        end=spec.lcb_end,
        visible_tests=spec.allow_visible_tests,
    )
    data = spec.data
    if data is None and spec.name in HUB_SUITES:
        data = local_data(spec.name)
        if data is None and not spec.hub:
            raise ConfigError(no_local_data(spec.name))
    return make(spec.name, data, options)


def suite_and_items(spec: SuiteSpec) -> tuple[Suite, list[Item]]:
    """The suite and its questions, cut to the spec's limit."""
    suite = make_suite(spec)
    items = suite.items()
    if spec.limit is not None:
        items = items[: spec.limit]
    return suite, items


def run_config(
    spec: RunSpec,
    method: str,
    *,
    suite: Suite | None = None,
    items: Sequence[Item] | None = None,
    out: Path | None = None,
) -> RunConfig:
    """The RunConfig of `method`, --match-tokens resolved (see `matched_budget`)."""
    return spec.run_config(method, matched_budget(spec, suite, items, out))


def matched_budget(
    spec: RunSpec,
    suite: Suite | None,
    items: Sequence[Item] | None,
    out: Path | None,
) -> int | None:
    """--match-tokens as output tokens: the stored value on resume, else the named run's.

    The named run is checked to be on `suite`'s `items` when they are given. A resumed run (`out`
    holding its config.json) keeps the budget it started with: the named run is not read again
    (it may have grown, moved or gone since).
    """
    if spec.match_run is None:
        return None
    out = out if out is not None else spec.out
    if spec.resume and out is not None:
        stored = stored_config(Path(out)).get("match_tokens")
        if stored is not None:
            return int(stored)
    if suite is None or items is None:
        return output_tokens_of(Path(spec.match_run))
    return matched_output_tokens(Path(spec.match_run), suite.name, items, spec.seed)


def stored_config(out: Path) -> dict[str, Any]:
    """The `config` of the run directory `out`, or {} when it has none (yet)."""
    try:
        data = orjson.loads((out / "config.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    config = data.get("config") if isinstance(data, dict) else None
    return config if isinstance(config, dict) else {}


def provider_from(spec: ProviderSpec, seed: int, suite: Suite, items: Sequence[Item]) -> Provider:
    """The policy model: the offline simulator (seeded with the run's seed), or a real API."""
    if spec.kind == "sim":
        from ttc.adapters import SimConfig, SimProvider

        cfg = SimConfig(
            seed=seed,
            ability=spec.sim_ability,
            latency_s=spec.sim_latency,
            thinking_ratio=spec.sim_thinking,
            icl_gain=spec.sim_icl_gain,
        )
        return SimProvider(suite, items, cfg)
    if spec.service_tier is not None and spec.kind not in ("openai", "azure"):
        raise ConfigError(f"--service-tier: OpenAI's and Azure's only, not --provider {spec.kind}")
    with key_named(f"--provider {spec.kind}"):
        return api_provider(
            spec.kind,
            spec.model,
            one_url(spec.base_url),
            spec.api_key_env,
            spec.max_response_bytes,
            api_version=spec.api_version,
            service_tier=spec.service_tier,
            streaming=spec.streaming,
        )


def api_provider(
    kind: str,
    model: str | None,
    base_url: str | None,
    api_key_env: str | None,
    max_response_bytes: int | None = None,
    *,
    api_version: str | None = None,
    service_tier: str | None = None,
    streaming: StreamSpec | None = None,
) -> Provider:
    """An OpenAI(-compatible), Gemini, Anthropic or Azure OpenAI provider; a missing model or
    key is a ConfigError. `service_tier` is sent as OpenAI's `service_tier`; `streaming` says
    which API and whether answers stream (`_stream_flags`)."""
    from ttc.adapters import Connection
    from ttc.adapters.providers import Streaming, require_env_name

    if not model:
        raise ConfigError(f"--model: required with --provider {kind}")
    require_env_name(api_key_env, "--api-key-env")
    how = streaming or StreamSpec()
    stream = Streaming(how.first_byte_s, how.stall_s) if how.stream else None
    connection = Connection(stream=stream)
    if max_response_bytes is not None:
        connection = Connection(max_response_bytes=max_response_bytes, stream=stream)
    tier = {"service_tier": service_tier} if service_tier else None
    if kind == "openai":
        from ttc.adapters.providers import OpenAIProvider, OpenAIResponsesProvider

        openai = OpenAIResponsesProvider if how.api == "responses" else OpenAIProvider
        return openai(
            model,
            base_url=base_url or VENDOR_URLS["openai"],
            api_key_env=api_key_env or "OPENAI_API_KEY",
            extra_body=tier,
            connection=connection,
        )
    if kind == "azure":
        from ttc.adapters.providers import AzureOpenAIProvider, AzureResponsesProvider

        if not base_url:
            raise ConfigError(
                "--base-url: required with --provider azure: the resource endpoint, "
                "https://NAME.openai.azure.com"
            )
        azure = AzureResponsesProvider if how.api == "responses" else AzureOpenAIProvider
        return azure(
            model,
            endpoint=base_url,
            api_version=api_version or AZURE_API_VERSION,
            api_key_env=api_key_env or "AZURE_OPENAI_API_KEY",
            extra_body=tier,
            connection=connection,
        )
    if kind == "gemini":
        from ttc.adapters import GeminiProvider

        return GeminiProvider(
            model, base_url=base_url, api_key_env=api_key_env, connection=connection
        )
    if kind == "anthropic":
        from ttc.adapters.providers import AnthropicProvider

        return AnthropicProvider(
            model,
            base_url=base_url or VENDOR_URLS["anthropic"],
            api_key_env=api_key_env or "ANTHROPIC_API_KEY",
            connection=connection,
        )
    raise ConfigError(f"--provider: unknown provider {kind!r}")


def role_provider_from(spec: RunSpec, role: str, suite: Suite, items: Sequence[Item]) -> Provider:
    """The model of a role besides the policy: `judge` (the reward model, --judge-model) or
    `difficulty` (da's rater, --difficulty-model): `sim` (the offline stand-in), or
    `openai:MODEL` / `gemini:MODEL`, which use the run's --base-url and --api-key-env when the
    run's --provider is the same kind (e.g. one vLLM server for both), else the vendor's API."""
    flag = ROLE_FLAGS[role]
    name = (spec.judge_model if role == "judge" else spec.difficulty_model) or "sim"
    if name != "sim":
        kind, _, model = name.partition(":")
        if kind not in ("openai", "gemini") or not model:
            raise ConfigError(
                f"--{flag.replace('_', '-')}: expected sim, openai:MODEL or gemini:MODEL, "
                f"got {name!r}"
            )
        same = spec.provider.kind == kind
        if same and isinstance(urls := spec.provider.base_url, tuple):
            return replicas(kind, model, urls, spec, spec.provider.api_key_env)
        # The run's --api-key-env is this model's only when it is of --provider's kind.
        with key_named(f"--{flag.replace('_', '-')} {name}", "--api-key-env" if same else None):
            return api_provider(
                kind,
                model,
                one_url(spec.provider.base_url) if same else None,
                spec.provider.api_key_env if same else None,
                spec.provider.max_response_bytes,
            )
    from ttc.adapters.sim import SimConfig, SimDifficulty, SimJudge, SimRoleConfig

    # The policy simulator's seed, so the rater sees the same latent difficulties.
    stand_in = SimJudge if role == "judge" else SimDifficulty
    return stand_in(suite, items, SimRoleConfig(seed=spec.seed), SimConfig(seed=spec.seed))


def embedder_from(spec: RunSpec) -> Embedder | Callable[[], Embedder]:
    """--embedder: an API embedder built now, or a factory the engine calls when the method needs
    vectors (after the run's log is attached, so "auto"'s fallback warning lands in run.log)."""
    from ttc.adapters import make_embedder

    if spec.embedder.partition(":")[0] in ("openai", "gemini"):
        with key_named(f"--embedder {spec.embedder}", None):
            return make_embedder(
                spec.embedder,
                base_url=spec.embed_base_url,
                max_response_bytes=spec.provider.max_response_bytes,
            )
    if spec.embedder not in ("auto", "minilm", "lexical"):
        make_embedder(spec.embedder)  # raises the ConfigError naming --embedder
    name = spec.embedder
    return lambda: make_embedder(name, log=logging.getLogger("ttc"))


@dataclass(slots=True)
class Wired:
    """The objects one run sends through, built from a RunSpec; `aclose` closes what it opened."""

    suite: Suite
    provider: Provider  # the policy model as built
    cache: ResponseCache | None = None
    roles: dict[str, Provider] = field(default_factory=dict)  # the role models as built
    price: Price | None = None
    embedder: Embedder | Callable[[], Embedder] | None = None
    # What a host shares between several runs over one wiring (`ttc ablate`'s two arms, each a
    # copy of it): one limiter under the run's limits, and each run's own method instead of its
    # config's preset. None: the engine builds them.
    limiter: Limiter | None = None
    strategy: Strategy | None = None

    async def aclose(self) -> None:
        if self.cache is not None:
            self.cache.close()
        await self.provider.aclose()
        for role in self.roles.values():
            await role.aclose()


@asynccontextmanager
async def wire(
    spec: RunSpec,
    config: RunConfig,
    suite: Suite,
    items: Sequence[Item],
    *,
    provider: Provider | None = None,
    embedder: Embedder | None = None,
) -> AsyncIterator[Wired]:
    """Builds the run's models, cache, price and embedder (`provider` and `embedder`, when
    given, are used instead of the spec's); closes them on the way out."""
    if spec.provider.kind == "anthropic" and provider is None:
        check_anthropic_decoding(spec.sampling)
    policy = provider or many_from(spec) or provider_from(spec.provider, spec.seed, suite, items)
    wired = Wired(suite, policy)
    try:
        if spec.cache is not None:
            wired.cache = ResponseCache(spec.cache)
        for role in config.roles:
            wired.roles[role] = role_provider_from(spec, role, suite, items)
        price = parse_price(spec.price) if spec.price else None
        wired.price = policy_price(policy, price, spec.provider.service_tier, spec.batch)
        wired.embedder = embedder or embedder_from(spec)
        yield wired
    finally:
        if policy.batch is not None:
            await policy.batch.aclose()
        await wired.aclose()


def make_engine(
    config: RunConfig,
    wired: Wired,
    *,
    out: Path,
    resume: bool,
    progress: Progress,
    invocation: dict[str, Any],
    verifiers: Verifiers | None = None,
    observers: Sequence[RunObserver] = (),
) -> Engine:
    """The Engine of one run over wired objects; `verifiers`: a pool shared by several runs;
    `observers`: more observers of the run than its progress (e.g. its metrics). config.json's
    `invocation` also says where the questions came from (`data`: the file, or the Hub's dataset
    and commit)."""
    from ttc.adapters.suites import data_source

    options = EngineOptions(
        price=wired.price,
        observer=Observers(progress, *observers) if observers else progress,
        invocation={**invocation, "data": data_source(wired.suite)},
        verifiers=verifiers,
        cache=wired.cache,
        limiter=wired.limiter,
        strategy=wired.strategy,
    )
    return Engine(
        wired.provider,
        wired.suite,
        config,
        out_dir=out,
        embedder=wired.embedder,
        resume=resume,
        roles=wired.roles,
        options=options,
    )


class Observers(RunObserver):
    """Several observers of one run, each told everything, in order."""

    def __init__(self, *observers: RunObserver) -> None:
        self.observers = observers
        self.traces_attempts = any(o.traces_attempts for o in observers)

    def run_started(
        self, state: RunState, rounds: int, cost: Callable[[Usage], float | None]
    ) -> None:
        for o in self.observers:
            o.run_started(state, rounds, cost)

    def round_started(self, stats: RoundStats) -> None:
        for o in self.observers:
            o.round_started(stats)

    def waiting(self, what: str | None) -> None:
        for o in self.observers:
            o.waiting(what)

    def event(self, event: Event) -> None:
        for o in self.observers:
            o.event(event)

    def attempt(self, attempted: Attempted) -> None:
        for o in self.observers:
            if o.traces_attempts:
                o.attempt(attempted)

    async def run_ended(self, stopped: StopReason | None) -> None:
        for o in self.observers:
            await o.run_ended(stopped)
