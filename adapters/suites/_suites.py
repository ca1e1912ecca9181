"""The suites by name, as `--suite` and `--data` select them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ttc.engine import ConfigError, Suite

# name -> (source format, whether --data is needed)
SUITES: dict[str, tuple[str, bool]] = {
    "reasoning_gym": ("generated locally by reasoning-gym", False),
    "math500": ("MATH-500 JSONL (problem, answer, unique_id)", True),
    "minerva": ("MinervaMath JSONL (problem, solution with \\boxed{}, idx)", True),
    "gpqa": ("GPQA CSV/JSONL(.gz) (Question, Correct Answer, Incorrect Answer 1-3)", True),
    "livecodebench": ("LiveCodeBench code_generation_lite JSONL", True),
    "custom": ("your JSONL/CSV, described by --suite-config", True),
}


@dataclass(frozen=True, slots=True)
class SuiteOptions:
    """What the command line can say about a suite besides its name and data."""

    per_task: int = 100
    seed: int = 42
    suite_config: Path | None = None
    start: str | None = "2024-10-05"
    end: str | None = "2025-01-04"


def make_suite(name: str, data: Path | None, options: SuiteOptions | None = None) -> Suite:
    """The suite `name` over `data`; ConfigError naming the flag when they do not fit."""
    opts = options or SuiteOptions()
    if name not in SUITES:
        raise ConfigError(f"--suite: unknown suite {name!r}; choose from {', '.join(SUITES)}")
    needs_data = SUITES[name][1]
    if needs_data and data is None:
        raise ConfigError(f"--data: the {name} suite reads its questions from a file; name it")
    if not needs_data and data is not None:
        raise ConfigError(f"--data: the {name} suite generates its questions; drop --data")
    if data is not None and not data.exists():
        raise ConfigError(f"--data: {data} does not exist")
    if name == "reasoning_gym":
        from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite

        return ReasoningGymSuite(per_task=opts.per_task, seed=opts.seed)
    assert data is not None
    if name in ("math500", "minerva"):
        from ttc.adapters.suites import MathSuite

        return MathSuite(name, data)
    if name == "gpqa":
        from ttc.adapters.suites._gpqa import GPQASuite

        return GPQASuite(data)
    if name == "livecodebench":
        from ttc.adapters.suites import LiveCodeBenchSuite

        return LiveCodeBenchSuite(data, start=opts.start, end=opts.end)
    from ttc.adapters.suites._generic import GenericConfig, GenericSuite

    if opts.suite_config is None:
        raise ConfigError("--suite-config: the custom suite needs a config file (JSON or TOML)")
    return GenericSuite(data, GenericConfig.from_file(opts.suite_config))
