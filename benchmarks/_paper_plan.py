"""The plan of `benchmarks/paper.py`'s grid: options, test sets, run directories, run order,
and which methods share a warm-up.

Per (suite, seed) the warm-up source (elim, when it is in the grid) runs first; every other
method whose warm-up is the same experiment replays the source's warm-up samples instead of
sending them. A method shares when its warm-up rounds have the same K, number of rounds and
sampling parameters as the source's (`warmup_signature`): warm-up prompts are always the suite's
zero-shot prompt (the engine samples every question zero-shot in the warm-up, whatever the
intervention; fixed-icl's few-shot prompt and the ICL demonstrations start in round two), the
seed is the cell's, and the judgement (ground truth, reward model, consensus, noise) does not
change what is sampled. So with the paper's decoding (temperature 0.3) every preset shares,
`temp` included: its schedule starts at the configured temperature. Without a temperature
(e.g. an OpenAI reasoning model) `temp` does not share: its round one samples at 0.3, the
others at the provider's default.

Methods with a matched budget (`unif`, `da`) run after the run they match (`--match-to`; the
paper: elim) and take its output tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ttc.engine import OPERATIONAL, ConfigError, Item, RunConfig, Sampling, Suite, items_sha256
from ttc.engine.cli import ProviderSpec, RunSpec, SuiteSpec, suite_and_items
from ttc.engine.strategy import preset

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = REPO.parent / "shared" / "data"
LCB_FIXTURE = REPO / "tests" / "data" / "lcb_fixture.jsonl"
# Where each suite's file lives under --data-dir (the layout of ../shared/data).
DATA_FILES = {
    "math500": Path("math500") / "test.jsonl",
    "minerva": Path("minerva_math") / "test.jsonl",
    "gpqa": Path("gpqa_diamond") / "gpqa_diamond.jsonl.gz",
}
MATCHED = ("unif", "da")


@dataclass(frozen=True, slots=True)
class GridOptions:
    """Everything the grid needs, resolved from the command line."""

    suites: tuple[str, ...]
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    out: Path
    sampling: Sampling
    limits: Mapping[str, int | None]
    provider: str = "sim"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    per_task: int = 100
    data_dir: Path = DATA_DIR
    lcb_data: Path | None = None
    lcb_start: str | None = "2024-10-05"
    lcb_end: str | None = "2025-01-04"
    rounds: int = 4
    warmup: int = 1
    k: int = 1
    p: int = 3
    gamma: float = 1.0
    neighbours: str = "solved"
    judge: str | None = None
    judge_threshold: float = 0.7
    # The role models: `sim` (the stand-ins), `openai:MODEL` or `gemini:MODEL`.
    judge_model: str = "sim"
    difficulty_model: str = "sim"
    judge_temperature: float | None = None
    noise: float = 0.0
    consensus: float = 0.75
    fewshot: Path | None = None
    match_to: str = "elim"
    embedder: str = "auto"
    workers: int = 2
    concurrency: int = 64
    rpm: float | None = None
    tpm: float | None = None
    timeout_s: float = 300.0
    max_attempts: int = 6
    # The sim provider's knobs (its seed is each run's).
    sim_ability: float = 0.0
    sim_thinking: float = 0.0
    sim_latency: float = 0.0
    cache: Path | None = None
    argv: tuple[str, ...] = ()

    @property
    def simulated(self) -> bool:
        return self.provider == "sim"

    @property
    def policy(self) -> ProviderSpec:
        """The policy model of every run."""
        return ProviderSpec(
            kind=self.provider,
            model=self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            sim_ability=self.sim_ability,
            sim_latency=self.sim_latency,
            sim_thinking=self.sim_thinking,
        )

    def spec(self, method: str, seed: int, suite: SuiteSpec | None = None) -> RunSpec:
        """What one run of the grid is wired from (a resume: the grid goes on where it was)."""
        return RunSpec(
            suite=suite or SuiteSpec(),
            provider=self.policy,
            method=method,
            rounds=self.rounds,
            warmup_rounds=self.warmup,
            k=self.k,
            p=self.p,
            gamma=self.gamma,
            seed=seed,
            neighbours=self.neighbours,
            concurrency=self.concurrency,
            rpm=self.rpm,
            tpm=self.tpm,
            timeout_s=self.timeout_s,
            max_attempts=self.max_attempts,
            verifier_workers=self.workers,
            sampling=self.sampling,
            judge=self.judge,
            judge_threshold=self.judge_threshold,
            judge_temperature=self.judge_temperature,
            noise=self.noise,
            consensus=self.consensus,
            # Only fixed-icl shows a few-shot prompt; the others' configs are refused with one.
            fewshot=self.fewshot if method == "fixed-icl" else None,
            judge_model=self.judge_model,
            difficulty_model=self.difficulty_model,
            embedder=self.embedder,
            cache=self.cache,
            resume=True,
            argv=self.argv,
        )

    def config(self, method: str, seed: int, match_tokens: int | None = None) -> RunConfig:
        """The RunConfig of one run; `match_tokens` counts only for the matched methods."""
        matched = match_tokens if method in MATCHED else None
        return self.spec(method, seed).run_config(method, matched)


@dataclass(frozen=True, slots=True)
class LoadedSuite:
    """A suite, the questions the grid runs, and what to tell the user about its data."""

    name: str
    suite: Suite
    items: list[Item]
    data: Path | None
    note: str | None = None
    spec: SuiteSpec = field(default_factory=SuiteSpec)


def load_suite(opts: GridOptions, name: str) -> LoadedSuite:
    """The suite `name`, its data found under --data-dir (or --lcb-data), cut to its limit."""
    note = None
    data: Path | None = None
    start, end = opts.lcb_start, opts.lcb_end
    if name in DATA_FILES:
        data = opts.data_dir / DATA_FILES[name]
        if not data.exists():
            raise ConfigError(
                f"--data-dir: {data} does not exist; the {name} suite reads its questions from "
                f"{DATA_FILES[name]} under --data-dir (default {DATA_DIR})"
            )
    elif name == "livecodebench":
        data = opts.lcb_data
        if data is None:
            data, start, end = LCB_FIXTURE, None, None
            note = (
                f"livecodebench: no --lcb-data, so {LCB_FIXTURE.relative_to(REPO)} is used: a "
                "7-problem test fixture (all its dates), not the benchmark"
            )
    spec = SuiteSpec(
        name=name,
        data=data,
        per_task=opts.per_task,
        lcb_start=start,
        lcb_end=end,
        limit=opts.limits.get(name),
    )
    suite, items = suite_and_items(spec)
    if not items:
        raise ConfigError(f"--suites {name}: the test set is empty")
    return LoadedSuite(name, suite, items, data, note, spec)


def cell_dir(out: Path, suite: str, seed: int, method: str) -> Path:
    return out / suite / f"seed{seed}" / method


def read_summary(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "summary.json"
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the run's summary ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a summary")
    return data


def run_complete(run_dir: Path) -> bool:
    path = run_dir / "summary.json"
    return path.is_file() and bool(read_summary(run_dir).get("complete"))


def check_same(run_dir: Path, config: RunConfig, ls: LoadedSuite, model: str | None) -> None:
    """A finished run is reused only if it is the experiment this grid asks for: the same
    config (limits aside), test set and model (`model`: None when it cannot be known)."""
    path = run_dir / "config.json"
    try:
        before = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the run's config ({exc})") from None
    # A key the old config lacks was written before the setting existed: its default.
    defaults = RunConfig().to_dict()
    old, new = before.get("config", {}), config.to_dict()
    for key in sorted((set(old) | set(new)) - OPERATIONAL):
        if old.get(key, defaults.get(key)) != new.get(key):
            raise ConfigError(
                f"--out: {run_dir} holds a finished run with {key}={old.get(key)!r}, not "
                f"{new.get(key)!r}; use another --out for another experiment"
            )
    theirs = (before.get("suite"), before.get("items_sha256"))
    if theirs != (ls.suite.name, items_sha256(ls.items)):
        raise ConfigError(
            f"--out: {run_dir} holds a finished run on another test set ({before.get('items')} "
            f"{before.get('suite')} questions; now {len(ls.items)} {ls.suite.name}); use another "
            "--out for another experiment"
        )
    if model is not None and before.get("model") != model:
        raise ConfigError(
            f"--out: {run_dir} holds a finished run of model {before.get('model')!r}, not "
            f"{model!r}; use another --out for another experiment"
        )


def skip_reason(opts: GridOptions, suite: str, method: str) -> str | None:
    """Why `method` does not run on `suite`, or None."""
    if method == "fixed-icl" and opts.fewshot is None:
        from ttc.engine.strategy import DEFAULT_FOR

        if suite not in DEFAULT_FOR:
            return f"fixed-icl has no default few-shot prompt for {suite}; give --fewshot"
    return None


def plan_methods(opts: GridOptions, suite: str) -> list[str]:
    """The order of one (suite, seed): the warm-up source, the others, then the matched ones."""
    source = warmup_source(opts, suite)
    first = [source] if source is not None else []
    rest = [m for m in opts.methods if m not in first]
    matched = [m for m in rest if m in MATCHED and opts.match_to != "none"]
    return first + [m for m in rest if m not in matched] + matched


def warmup_source(opts: GridOptions, suite: str) -> str | None:
    """The method whose warm-up the others replay: elim if it runs, else the first that runs."""
    if opts.warmup < 1:
        return None
    runnable = [m for m in opts.methods if skip_reason(opts, suite, m) is None]
    if "elim" in runnable:
        return "elim"
    unmatched = [m for m in runnable if m not in MATCHED or opts.match_to == "none"]
    return unmatched[0] if unmatched else None


def warmup_signature(opts: GridOptions, suite: str, method: str) -> tuple[Any, ...]:
    """What determines a method's warm-up samples besides the questions and the provider."""
    config = opts.config(method, 0, 1)
    strategy = preset(config, suite)
    rounds = range(1, config.warmup_rounds + 1)
    sampling = tuple(strategy.intervention.sampling(t, config.sampling) for t in rounds)
    return (config.k, config.warmup_rounds, sampling)


def same_warmup(opts: GridOptions, suite: str, method: str) -> bool:
    source = warmup_source(opts, suite)
    if source is None:
        return False
    return warmup_signature(opts, suite, method) == warmup_signature(opts, suite, source)
