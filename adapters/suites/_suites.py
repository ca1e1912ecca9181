"""The suites by name, as `--suite` and `--data` select them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttc.engine import ConfigError, Suite

# name -> (source format, whether --data is needed): the paper's four public test sets come from
# the Hugging Face Hub when no --data is given (`_hub`).
SUITES: dict[str, tuple[str, bool]] = {
    "reasoning_gym": ("generated locally by reasoning-gym", False),
    "math500": (
        "MATH-500 JSONL (problem, answer, unique_id); default: HuggingFaceH4/MATH-500",
        False,
    ),
    "minerva": (
        "MinervaMath JSONL (problem, solution with \\boxed{}, idx); "
        "default: svc-huggingface/minerva-math",
        False,
    ),
    "gpqa": (
        "GPQA CSV/JSONL(.gz) (Question, Correct Answer, Incorrect Answer 1-3); "
        "default: Idavidrein/gpqa gpqa_diamond (gated: HF_TOKEN)",
        False,
    ),
    "livecodebench": (
        "LiveCodeBench code_generation_lite JSONL; default: livecodebench/code_generation_lite",
        False,
    ),
    "custom": ("your JSONL/CSV, described by --suite-config", True),
}
_GENERATED = ("reasoning_gym",)


@dataclass(frozen=True, slots=True)
class SuiteOptions:
    """What the command line can say about a suite besides its name and data."""

    per_task: int = 100
    seed: int = 42
    suite_config: Path | None = None
    start: str | None = "2024-10-05"
    end: str | None = "2025-01-04"
    # Judge code even where the sandbox cannot keep the tests from the programs (recorded).
    visible_tests: bool = False


def make_suite(name: str, data: Path | None, options: SuiteOptions | None = None) -> Suite:
    """The suite `name` over `data` (None: the Hub's copy, for the paper's public test sets);
    ConfigError naming the flag when they do not fit."""
    opts = options or SuiteOptions()
    if name not in SUITES:
        raise ConfigError(f"--suite: unknown suite {name!r}; choose from {', '.join(SUITES)}")
    if SUITES[name][1] and data is None:
        raise ConfigError(f"--data: the {name} suite reads its questions from a file; name it")
    if name in _GENERATED and data is not None:
        raise ConfigError(f"--data: the {name} suite generates its questions; drop --data")
    if data is not None and not data.exists():
        raise ConfigError(f"--data: {data} does not exist")
    if name == "reasoning_gym":
        from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite

        return ReasoningGymSuite(per_task=opts.per_task, seed=opts.seed)
    if name == "livecodebench":
        return _livecodebench(data, opts)
    if name in ("math500", "minerva", "gpqa"):
        return _public(name, data)
    from ttc.adapters.suites._generic import GenericConfig, GenericSuite

    assert data is not None
    if opts.suite_config is None:
        raise ConfigError("--suite-config: the custom suite needs a config file (JSON or TOML)")
    return GenericSuite(data, GenericConfig.from_file(opts.suite_config))


def _public(name: str, data: Path | None) -> Suite:
    """MATH-500, MinervaMath or GPQA over the file `data`, else over the Hub's copy."""
    from ttc.adapters.suites._hub import HUB, load_table
    from ttc.adapters.suites._records import Table

    source: Path | Table = data if data is not None else load_table(name, HUB[name])
    if name == "gpqa":
        from ttc.adapters.suites._gpqa import GPQASuite

        return GPQASuite(source)
    from ttc.adapters.suites._math import MathSuite

    return MathSuite(name, source)


def _livecodebench(data: Path | None, opts: SuiteOptions) -> Suite:
    """LiveCodeBench over the file `data`, else over the Hub's release files for the window."""
    from ttc.adapters.suites._hub import download_lcb
    from ttc.adapters.suites._livecodebench import LiveCodeBenchSuite, window

    visible = opts.visible_tests
    if data is not None:
        return LiveCodeBenchSuite(data, start=opts.start, end=opts.end, visible_tests=visible)
    start, end = window(opts.start, opts.end)
    paths, source = download_lcb(start, end)
    return LiveCodeBenchSuite(paths, start=start, end=end, source=source, visible_tests=visible)


def data_source(suite: Suite) -> dict[str, Any] | None:
    """Where a suite's questions came from, as a run records it: {"file": PATH}, or the Hub's
    dataset and commit; None for a suite that generates them (or is not one of these)."""
    from ttc.adapters.suites._generic import GenericSuite
    from ttc.adapters.suites._gpqa import GPQASuite
    from ttc.adapters.suites._livecodebench import LiveCodeBenchSuite
    from ttc.adapters.suites._math import MathSuite
    from ttc.adapters.suites._mixed import MixedSuite

    if isinstance(suite, MixedSuite):
        return {"sources": dict(suite.source)}
    if isinstance(suite, GenericSuite):
        return {"file": str(suite.path)}
    if isinstance(suite, MathSuite | GPQASuite | LiveCodeBenchSuite):
        return dict(suite.source)
    return None
