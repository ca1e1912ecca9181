"""The `ttc` command line's flags: one parser, its sub-commands and their typed values.

A bad value is one line naming the flag (`Parser`), never a usage dump; numbers are checked for
range (NaN included) as `_usage`'s typed values parse them; every help shows its default."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from pathlib import Path

import ttc
from ttc.engine import PRESETS
from ttc.engine.cli._batchmode import add_batch_flags
from ttc.engine.cli._executor import add_executor_flags
from ttc.engine.cli._metrics import add_metrics
from ttc.engine.cli._otel import add_otel
from ttc.engine.cli._provider_flags import add_provider_flags
from ttc.engine.cli._spec import PROTOCOLS, SUITES
from ttc.engine.cli._usage import (
    Parser,
    RawDescriptionHelp,
    date,
    natural_float,
    natural_int,
    number,
    parse_limit,
    positive_float,
    positive_int,
    share,
    ttc_command,
)
from ttc.engine.contract import INDEXES, JUDGES, NEIGHBOUR_MODES
from ttc.engine.contract._config import POOLS


def add_suite(g: argparse._ArgumentGroup, suite: str | None = "reasoning_gym") -> None:
    """The test-set flags; `suite` None: --suite's default is said where it is assumed."""
    g.add_argument(
        "--suite",
        choices=SUITES,
        default=suite,
        help="task suite" if suite else "task suite (default: reasoning_gym, named when assumed)",
    )
    g.add_argument(
        "--data",
        type=Path,
        help="the suite's data file (default for math500, minerva, gpqa: its file in the data "
        "directory, $TTC_DATA_DIR or ../shared/data beside the project; custom needs one)",
    )
    g.add_argument(
        "--hub",
        action="store_true",
        help="with no --data and no file in the data directory, read the Hugging Face Hub's "
        "copy (math500, minerva, gpqa, livecodebench); without it nothing is downloaded",
    )
    g.add_argument("--suite-config", type=Path, help="JSON/TOML config of a custom suite")
    g.add_argument(
        "--per-task",
        type=positive_int,
        default=100,
        help="Reasoning Gym problems per task (default: 100, the paper's 400 in all)",
    )
    g.add_argument(
        "--lcb-start",
        type=date,
        default="2024-10-05",
        help="LiveCodeBench: first release date (default: 2024-10-05, the paper's window)",
    )
    g.add_argument(
        "--lcb-end",
        type=date,
        default="2025-01-04",
        help="LiveCodeBench: last release date, included",
    )
    g.add_argument(
        "--allow-visible-tests",
        action="store_true",
        help="LiveCodeBench: judge even where the sandbox cannot keep the test cases from the "
        "programs (no private root, no Landlock); summary.json records it",
    )


def _add_common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("test set")
    add_suite(g)
    add_limit(g)
    g = p.add_argument_group("Algorithm 1")
    g.add_argument("--rounds", "-R", type=positive_int, default=4, help="total rounds R")
    g.add_argument(
        "--warmup", type=natural_int, default=1, help="warm-up rounds R_warm (at most --rounds)"
    )
    g.add_argument("-k", type=positive_int, default=1, help="samples per question per round")
    g.add_argument(
        "-p",
        type=number(int, 1, hint="a prompt with no neighbours is --method elim's"),
        default=3,
        help="neighbours per prompt P",
    )
    g.add_argument("--gamma", type=share, default=1.0, help="elimination threshold γ, in (0, 1]")
    g.add_argument("--seed", type=int, default=0, help="run seed (sampling seeds, rand, sim)")
    g.add_argument(
        "--neighbours",
        choices=NEIGHBOUR_MODES,
        default="solved",
        help="solved: top-P among solved; fixed: fixed once among all",
    )
    g.add_argument(
        "--index",
        choices=INDEXES,
        default="auto",
        help="FAISS index of solved questions: flat (exact), ivf or hnsw (approximate: may change "
        "the neighbours); auto: flat up to 100,000 questions, ivf above",
    )
    g.add_argument(
        "--embedder",
        default="auto",
        help="auto (MiniLM if installed, else lexical), minilm, lexical, openai[:MODEL], "
        "gemini[:MODEL]",
    )
    g.add_argument("--embed-base-url", help="base URL of the openai/gemini embedder's API")
    add_provider_flags(p)
    add_executor_flags(p)
    _add_method_flags(p)
    g = p.add_argument_group("budget, cost and cache")
    g.add_argument(
        "--max-cost",
        type=positive_float,
        help="stop dispatching once the run has cost this many USD, the role models' (judge, "
        "difficulty) calls included (resumable; default: no limit)",
    )
    g.add_argument(
        "--max-output-tokens",
        type=positive_int,
        help="stop dispatching once the policy model has produced this many output tokens "
        "(the role models' tokens do not count; default: no limit)",
    )
    g.add_argument(
        "--price",
        help="USD per million tokens: INPUT,OUTPUT[,THINKING] (default: the model's list price)",
    )
    g.add_argument(
        "--no-cache", action="store_true", help="do not use the response cache (default: use it)"
    )
    g.add_argument(
        "--cache",
        type=Path,
        help="response cache file (default: $TTC_CACHE_DIR or ~/.cache/ttc/responses.sqlite3)",
    )
    g.add_argument(
        "--grace",
        type=natural_float,
        default=30.0,
        help="seconds the first Ctrl-C waits for requests in flight",
    )
    g.add_argument(
        "--live",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a live status line (default: when stderr is a terminal)",
    )
    add_metrics(g)
    add_otel(g)
    add_batch_flags(p)  # batch mode: its flags in one group
    p.add_argument("--out", type=Path, help="run directory (default: runs/<timestamp>-<method>)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="go on with the run in --out: send only the samples it has no response for (`ttc "
        "resume DIR` does this with the run's own flags)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no per-round log lines")


def add_limit(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--limit",
        type=parse_limit,
        metavar="N|all",
        help="use only the first N questions (default: all)",
    )


def _add_method_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("method: judgement, noise, few-shot prompt, matched budget")
    g.add_argument(
        "--judge",
        choices=JUDGES,
        help="truth: the suite's verifier at γ; reward: an LLM reward model; consensus: "
        "self-consistency (default: the method's own: consensus for sc, else truth)",
    )
    g.add_argument(
        "--judge-threshold",
        type=share,
        default=0.7,
        help="reward judge: accepted at this share of the rubric's maximum",
    )
    g.add_argument(
        "--judge-model",
        default="sim",
        help="the reward model: sim, openai:MODEL or gemini:MODEL",
    )
    g.add_argument(
        "--judge-temperature",
        type=natural_float,
        help="the role models' (judge, difficulty) sampling temperature (default: the API's "
        "own; OpenAI's reasoning models accept no other)",
    )
    g.add_argument(
        "--difficulty-model",
        default="sim",
        help="da: the difficulty rater: sim, openai:MODEL or gemini:MODEL",
    )
    g.add_argument(
        "--noise",
        type=number(float, 0, high=0.999999),
        default=0.0,
        help="flip each binary verdict with this probability (the paper: 0.05)",
    )
    g.add_argument(
        "--pool",
        choices=POOLS,
        default="accepted",
        help="a noisy judge's demonstrations: accepted, only the responses it accepted (the "
        "paper); latest, also each unaccepted question's most recent response. Either way that "
        "response is the unaccepted question's final answer",
    )
    g.add_argument(
        "--consensus",
        type=number(float, 0, inclusive=False, high=0.999999),
        default=0.75,
        help="sc: resolved once one answer is given by more than this share of a question's "
        'responses (default: 0.75, the paper\'s "consensus over 75%%")',
    )
    g.add_argument(
        "--asc-threshold",
        type=number(float, 0.5, inclusive=False, high=0.999999),
        default=0.95,
        help="asc: a question stops once the probability that its leading answer beats the "
        "second (Beta criterion) exceeds this (Aggarwal et al. 2023: 0.95)",
    )
    g.add_argument(
        "--bandit-rule",
        choices=("entropy", "ucb"),
        default="entropy",
        help="bandit: spread each round over the unsolved questions by the entropy of their "
        "answers so far, or by a UCB bonus (fewest samples first)",
    )
    g.add_argument(
        "--bandit-budget",
        type=positive_float,
        help="bandit: samples per unsolved question per round, on average (default: K)",
    )
    g.add_argument(
        "--bandit-c", type=natural_float, default=1.0, help="bandit: the UCB's constant c"
    )
    g.add_argument(
        "--bandit-floor",
        type=natural_float,
        default=0.1,
        help="bandit: each question's floor share (of the highest score), so that none starves",
    )
    g.add_argument(
        "--fewshot",
        type=Path,
        help="fixed-icl: JSONL of {question, response} (default for math500/minerva: the "
        "4-shot Minerva prompt, adapted to \\boxed{} answers)",
    )
    g.add_argument(
        "--match-tokens",
        type=Path,
        metavar="RUN_DIR",
        help="unif, da: match the output tokens of the run in RUN_DIR (on the same suite and "
        "test set; a resumed run keeps the budget it started with; default: no matched budget)",
    )


class _Version(argparse.Action):
    """`--version`: the installed version, read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"ttc {ttc.__version__}")
        parser.exit()


def _description() -> str:
    """`ttc --help`: what ttc is, its commands (argparse lists them below), and examples with the
    command that runs ttc from this shell."""
    text = f"""\
ttc {ttc.__version__}: adaptive test-time compute with evolving in-context demonstrations.
It runs a test set through an LLM in rounds, verifies every response, and spends each
further round only on the questions still unsolved, prompting each with the solved
responses of its most similar questions. Offline by default: the `sim` provider, whose
numbers measure the machinery, not the method.

examples:
  # adpt on the first 20 Reasoning Gym questions, offline
  {{ttc}} run --limit 20
  # the paper's four methods sharing one warm-up, offline
  {{ttc}} compare --limit 50
  # a real model (the key is read from OPENAI_API_KEY, or the variable --api-key-env names)
  {{ttc}} run --provider openai --model gpt-4.1-mini --limit 50
  # go on with a stopped run, with a larger budget
  {{ttc}} resume runs/20250101-120000-adpt --max-cost 5

`{{ttc}} COMMAND --help` shows a command's flags, each with its default."""
    return text.format(ttc=ttc_command())


def command_of(argv: Sequence[str]) -> str | None:
    """The sub-command a command line names (its first word), or None (`ttc --help`)."""
    return argv[0] if argv and not argv[0].startswith("-") else None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of `ttc` and all its sub-commands; with `only`, every sub-command is named
    but only that one's flags are added (each command's flags import what they describe:
    `ttc batch` need not load the simulator for `ttc serve`'s)."""

    def wanted(command: str) -> bool:
        return only is None or only == command

    # The description is shown by `ttc --help` alone (it reads the installed version).
    description = _description() if only is None else None
    parser = Parser(prog="ttc", description=description, formatter_class=RawDescriptionHelp)
    parser.add_argument("--version", action=_Version, help="show program's version number and exit")
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=Parser, metavar="COMMAND", title="commands"
    )
    run = sub.add_parser(
        "run", help="run one method over a test set", example="{ttc} run --limit 20"
    )
    if wanted("run"):
        run.add_argument(
            "--method",
            choices=PRESETS,
            default="adpt",
            help="unif, elim, rand, adpt (the paper's comparison); da, temp, fixed-icl, sc "
            "(Appendix B and the ablations of section 5.3); esc, asc (per-question stopping by "
            "agreement: Li et al. 2024, Aggarwal et al. 2023); bandit (Zuo & Zhu 2025)",
        )
        _add_common(run)
        run.add_argument(
            "--dry-run",
            action="store_true",
            help="print the plan's estimated cost (every round at its worst: every question K "
            "times, each request at its output cap) and send nothing",
        )
    cmp = sub.add_parser("compare", help="run unif/elim/rand/adpt sharing one warm-up")
    if wanted("compare"):
        _add_compare(cmp)
    ver = sub.add_parser(
        "verify",
        help="judge responses produced elsewhere with a suite's verifier",
        example="{ttc} verify --suite math500 --data test.jsonl --responses responses.jsonl",
    )
    _add_from(only, "verify", ver)
    res = sub.add_parser(
        "resume",
        help="go on with a stopped run (or compare) in RUN_DIR",
        description="Goes on with the run (or compare) in RUN_DIR, with the command line that "
        "made it plus FLAGS (limits such as --max-cost or --concurrency may change; the "
        "experiment may not).",
        example="{ttc} resume runs/20250101-120000-adpt",
    )
    if wanted("resume"):
        res.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
        extra = res.add_argument(
            "extra",
            nargs=argparse.REMAINDER,
            metavar="FLAGS",
            help="flags to change on the way, e.g. --max-cost 5 or --concurrency 8",
        )
        extra.required = False  # a missing RUN_DIR is named alone

    abl = sub.add_parser(
        "ablate",
        help="the method's effect on a run's model: the questions its warm-up left unsolved, "
        "sampled with and without their demonstrations (paired)",
        description="Samples each question the run in RUN_DIR left unsolved after its warm-up "
        "with its demonstrations and without (the same sampling seed per pair), through the "
        "run's provider, limits and cache, and reports the paired effect: the solve rate with "
        "minus without, its 95% interval and McNemar's exact p-value (RUN_DIR/ablation.json). "
        "Resumable: run it again to go on. Other flags change the run's own on the way (e.g. "
        "--concurrency 4, or --base-url URL when the run's held a credential).",
        example="{ttc} ablate runs/20250101-120000-adpt --rounds 2",
    )
    if wanted("ablate"):
        _add_ablate(abl)
    srv = sub.add_parser(
        "serve",
        help="a local OpenAI- and Gemini-compatible API answered by the sim model, with rate "
        "limits and injected faults (for tests and rehearsals)",
    )
    _add_from(only, "serve", srv)
    bat = sub.add_parser(
        "batch",
        help="send an OpenAI Batch input file to any OpenAI-compatible endpoint, "
        "through the limiter and retries; resumable",
        example="{ttc} batch requests.jsonl --out results.jsonl",
    )
    _add_from(only, "batch", bat)
    ctl = sub.add_parser(
        "ctl",
        help="steer a running ttc run or ttc batch: status, pause, resume, or set --rpm, --tpm "
        "and --concurrency (journaled; a resume keeps them)",
        example="{ttc} ctl runs/20250101-120000-adpt set --rpm 600",
    )
    _add_from(only, "ctl", ctl)
    rep = sub.add_parser(
        "report",
        help="per-round tables and a plot of one or several runs",
        example="{ttc} report runs/20250101-120000-adpt",
    )
    _add_from(only, "report", rep)
    exp = sub.add_parser(
        "export",
        help="a run as an Inspect AI log or Parquet tables, for the field's tools",
        example="{ttc} export runs/20250101-120000-adpt --format parquet --out run.parquet",
    )
    _add_from(only, "export", exp)
    return parser


# The commands whose flags live with their code, loaded only for the command parsed (or help).
_ADDERS = {
    "verify": ("ttc.engine.cli._tools", "add_verify_arguments"),
    "serve": ("ttc.engine.cli._tools", "add_serve_arguments"),
    "batch": ("ttc.engine.cli._batch", "add_batch_arguments"),
    "ctl": ("ttc.engine.cli._control", "add_ctl_arguments"),
    "report": ("ttc.engine.cli._tools", "add_report_arguments"),
    "export": ("ttc.engine.cli._export", "add_export_arguments"),
}


def _add_from(only: str | None, command: str, parser: argparse.ArgumentParser) -> None:
    """Adds `command`'s flags from its module, when that command is wanted."""
    if only is None or only == command:
        module, name = _ADDERS[command]
        getattr(importlib.import_module(module), name)(parser)


def _add_ablate(abl: argparse.ArgumentParser) -> None:
    """`ttc ablate`'s own flags (the run's are given after RUN_DIR, as `ttc resume` takes them)."""
    abl.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory")
    abl.add_argument(
        "--rounds",
        type=positive_int,
        default=1,
        help="ablation rounds: each gives every question one more pair per K (default: 1)",
    )
    abl.add_argument(
        "--limit",
        type=positive_int,
        help="at most this many unsolved questions, the first in the test set (default: all)",
    )
    abl.add_argument("--quiet", "-q", action="store_true", help="no per-round log lines")


def _methods(text: str) -> tuple[str, ...]:
    """`--methods`: a comma list of presets, none twice."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in PRESETS]
    if unknown or not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"expected a comma list of {', '.join(PRESETS)} (each once), got {text!r}"
        )
    return names


def _add_compare(cmp: argparse.ArgumentParser) -> None:
    _add_common(cmp)
    cmp.set_defaults(method=None)  # it runs the main four
    cmp.add_argument(
        "--methods",
        type=_methods,
        metavar="M,...",
        help="the methods compared, a comma list of "
        f"{', '.join(PRESETS)} (default: unif,elim,rand,adpt); elim runs first and the others "
        "share its warm-up",
    )
    cmp.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="paper",
        help="paper: unif matched to elim's output tokens, and Appendix A's decoding where no "
        "flag sets it (temperature 0.3, top_p 0.9, top_k 40; output limits 65536 for gemini, "
        "32768 for openai); none: unif samples every round, decoding as the flags say",
    )
