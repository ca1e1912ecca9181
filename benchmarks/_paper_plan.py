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

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ttc.adapters.suites import (
    DATA_FILES,
    MIXED_SOURCES,
    HubUnavailable,
    MixedSuite,
    data_dir,
    data_source,
)
from ttc.engine import ConfigError, Item, RunConfig, Sampling, Suite
from ttc.engine.cli import BatchSpec, ProviderSpec, RunSpec, SuiteSpec, suite_and_items
from ttc.engine.contract import OPERATIONAL
from ttc.engine.journal import items_sha256
from ttc.engine.strategy import preset

REPO = Path(__file__).resolve().parents[1]
# Where `ttc run` looks too: $TTC_DATA_DIR, else ../shared/data beside the project.
DATA_DIR = data_dir()
LCB_FIXTURE = REPO / "tests" / "data" / "lcb_fixture.jsonl"
# `--lcb-data fixture`: the 7-problem test fixture above, all its dates.
FIXTURE = "fixture"
# Each suite's file under --data-dir (DATA_FILES, the layout of ../shared/data); a file not there
# is read from the Hugging Face Hub only with --hub.
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
    # --hub: a suite with no local file is read from the Hugging Face Hub (else: an error, or for
    # LiveCodeBench with sim, the built-in fixture).
    hub: bool = False
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
    sim_icl_gain: float = 1.0
    cache: Path | None = None
    # --price as typed (the list price; None: the price table's), and --batch's settings.
    price: str | None = None
    batch: BatchSpec | None = None
    # Other grids (other models) whose results join Figure 1's table.
    cross: tuple[Path, ...] = ()
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
            sim_icl_gain=self.sim_icl_gain,
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
            price=self.price,
            batch=self.batch,
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

    @property
    def source(self) -> str:
        """Where the questions came from, in a few words: a file, the Hub, or generated."""
        return describe_source(data_source(self.suite))


def describe_source(source: Mapping[str, Any] | None) -> str:
    """A run's recorded data source (`data_source`) in a few words."""
    if source is None:
        return "generated"
    if "sources" in source:  # a mixed suite: each of its sources
        return "; ".join(f"{k}: {describe_source(v)}" for k, v in source["sources"].items())
    if "file" in source:
        return str(source["file"])
    where = "/".join(str(source[k]) for k in ("config", "split") if source.get(k))
    files = ",".join(source.get("files") or ())
    revision = source.get("revision")
    at = f"@{str(revision)[:12]}" if revision else " (from the local cache)"
    return f"hf://datasets/{source['hub']}{at}" + (f" {where or files}" if where or files else "")


def data_sources(outcomes: Sequence[Any]) -> dict[str, str]:
    """Where each suite's questions came from, as its runs recorded it (a file, or the Hugging
    Face Hub's dataset and commit; "generated" for Reasoning Gym). `outcomes`: the grid's cells
    (`_paper_grid.Outcome`: suite, status, path)."""
    sources: dict[str, str] = {}
    for o in outcomes:
        if o.status == "skipped" or o.suite in sources:
            continue
        try:
            config = orjson.loads((o.path / "config.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        invocation = config.get("invocation") if isinstance(config, dict) else None
        if isinstance(invocation, dict) and "data" in invocation:
            sources[o.suite] = describe_source(invocation["data"])
    return sources


def load_suite(opts: GridOptions, name: str) -> LoadedSuite:
    """The suite `name`: its file under --data-dir (or --lcb-data) if there is one, else with
    --hub the Hugging Face Hub's copy, cut to its limit. LiveCodeBench with `sim` is the built-in
    test fixture, with a note, without --hub (or when the Hub cannot be reached); otherwise no
    data is a ConfigError naming the flag to give. Nothing is downloaded without --hub."""
    if name == "mixed":
        return load_mixed(opts)
    data: Path | None = None
    start, end = opts.lcb_start, opts.lcb_end
    if name in DATA_FILES and (opts.data_dir / DATA_FILES[name]).exists():
        data = opts.data_dir / DATA_FILES[name]
    elif name == "livecodebench" and opts.lcb_data is not None:
        data = opts.lcb_data
        if str(data) == FIXTURE:
            return _loaded(opts, name, LCB_FIXTURE, _FIXTURE_NOTE, (None, None))
    if data is None and name in (*DATA_FILES, "livecodebench") and not opts.hub:
        if name == "livecodebench" and opts.simulated:
            note = f"livecodebench: no --lcb-data and no --hub, so {_FIXTURE_NOTE}"
            return _loaded(opts, name, LCB_FIXTURE, note, (None, None))
        raise ConfigError(_no_local(opts, name))
    try:
        loaded = _loaded(opts, name, data, None, (start, end))
    except HubUnavailable as exc:
        if name == "livecodebench" and opts.simulated:
            note = (
                f"livecodebench: the Hub's copy is out of reach ({exc.reason}), so {_FIXTURE_NOTE}"
            )
            return _loaded(opts, name, LCB_FIXTURE, note, (None, None))
        raise ConfigError(_no_data(opts, name, exc)) from None
    if data is None and name in (*DATA_FILES, "livecodebench"):
        why = "no --lcb-data" if name not in DATA_FILES else f"no {DATA_FILES[name]} in --data-dir"
        note = f"{name}: {why}, so the Hugging Face Hub's copy is used: {loaded.source}"
        return dataclasses.replace(loaded, note=note)
    return loaded


def load_mixed(opts: GridOptions) -> LoadedSuite:
    """The failure-mode test set (Table 7): 20 questions of each of LiveCodeBench, MATH-500 and
    GPQA, far apart (`MixedSuite`), each source read as its own suite is (whole, then chosen)."""
    whole = dataclasses.replace(opts, limits={})
    parts = {name: load_suite(whole, name) for name in MIXED_SOURCES}
    suite = MixedSuite({name: ls.suite for name, ls in parts.items()})
    items = suite.items()[: opts.limits.get("mixed")]
    notes = [f"{ls.note}" for ls in parts.values() if ls.note]
    counts = Counter(str(item.meta["source"]) for item in items)
    note = "mixed: " + ", ".join(f"{counts[n]} {n}" for n in MIXED_SOURCES) + " questions"
    spec = SuiteSpec(name="mixed", limit=opts.limits.get("mixed"))
    return LoadedSuite("mixed", suite, items, None, "; ".join([note, *notes]), spec)


_FIXTURE_NOTE = (
    f"{LCB_FIXTURE.relative_to(REPO)} is used: a 7-problem test fixture (all its dates), not the "
    "benchmark; give --lcb-data FILE for the benchmark"
)


def _no_local(opts: GridOptions, name: str) -> str:
    """The one-line error of a suite with no local file, the Hub not allowed."""
    if name == "livecodebench":
        return (
            "--lcb-data: the livecodebench questions have no local file: give --lcb-data FILE "
            "(code_generation_lite JSONL), or --hub to read the Hugging Face Hub's copy"
        )
    missing = opts.data_dir / DATA_FILES[name]
    return (
        f"--data-dir: the {name} questions have no local file ({missing} is not there): give "
        f"--data-dir DIR holding {DATA_FILES[name]} (the default: $TTC_DATA_DIR, else "
        "../shared/data beside the project), or --hub to read the Hugging Face Hub's copy"
    )


def _no_data(opts: GridOptions, name: str, exc: HubUnavailable) -> str:
    """The one-line error of a suite with neither a local file nor the Hub's copy."""
    if name == "livecodebench":
        return exc.message("--lcb-data", "--lcb-data FILE (code_generation_lite JSONL)")
    missing = opts.data_dir / DATA_FILES[name]
    return exc.message(
        "--data-dir", f"--data-dir DIR holding {DATA_FILES[name]} ({missing} is not there)"
    )


def _loaded(
    opts: GridOptions,
    name: str,
    data: Path | None,
    note: str | None,
    window: tuple[str | None, str | None],
) -> LoadedSuite:
    spec = SuiteSpec(
        name=name,
        data=data,
        per_task=opts.per_task,
        lcb_start=window[0],
        lcb_end=window[1],
        limit=opts.limits.get(name),
        hub=opts.hub,
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
