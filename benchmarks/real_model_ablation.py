"""The method's effect on a real model, measured in pairs: a warm-up round over MATH-500's
easiest questions, then `ttc ablate` on those it left unsolved (issue 36's recipe).

    python benchmarks/real_model_ablation.py --base-url http://127.0.0.1:8081/v1 \
        --model qwen2.5-coder-0.5b-instruct --out runs/real-ablation [--levels 1,2]
        [--limit 40] [--rounds 1] [--max-tokens 320] [--temperature 0.7] [--concurrency 4]
        [--provider openai|gemini|anthropic|azure --api-key-env VAR]

Any server `ttc run --provider openai` speaks to (vLLM, llama.cpp's `llama-server`, SGLang) or
a vendor's API. The questions of the chosen MATH-500 levels are written to OUT/questions.jsonl
(read from --data, else the data directory: $TTC_DATA_DIR or ../shared/data), the warm-up is
`ttc run --rounds 1` into OUT/run, and the ablation `ttc ablate OUT/run`: each question the
warm-up left unsolved sampled with its solved neighbours as demonstrations and without, the
same sampling seed per pair. Both steps are resumable: the same command again goes on where it
stopped and buys nothing twice. Prints one JSON line: the paired effect (with minus without),
its 95% interval, McNemar's exact p-value and the pairs, beside the warm-up's coverage. A user
with a GPU or keys raises --limit (all 133 level 1-2 questions, or --levels 1,2,3,4,5 for all
500) and --rounds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from ttc.adapters.suites import local_data
from ttc.engine._util import redact_url


def _questions(source: Path, levels: set[int], out: Path) -> int:
    """Writes the questions of `levels` to `out`; how many."""
    kept = []
    for number, line in enumerate(source.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise SystemExit(f"{source}:{number}: not a JSON line ({e})") from None
        if row.get("level") in levels:
            kept.append(line)
    if not kept:
        raise SystemExit(f"{source}: no question of levels {sorted(levels)}")
    out.write_bytes(b"\n".join(kept) + b"\n")
    return len(kept)


def _ttc(*args: str) -> None:
    command = [sys.executable, "-m", "ttc.engine.cli", *args]
    done = subprocess.run(command, check=False)
    # 3: stopped by a budget; the ablation is still read from what was done.
    if done.returncode not in (0, 3):
        raise SystemExit(f"ttc {args[0]} failed (exit {done.returncode})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--provider", default="openai")
    parser.add_argument("--api-key-env", default=None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=None, help="MATH-500's test.jsonl")
    parser.add_argument("--levels", default="1,2", help="MATH levels, comma-separated")
    parser.add_argument("--limit", type=int, default=40, help="warm-up questions")
    parser.add_argument("--rounds", type=int, default=1, help="ablation rounds (pairs each)")
    parser.add_argument("--max-tokens", type=int, default=320)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per attempt")
    args = parser.parse_args(argv)
    try:
        levels = {int(x) for x in args.levels.split(",")}
    except ValueError:
        parser.error(f"--levels: integers, comma-separated, got {args.levels!r}")
    source = args.data or local_data("math500")
    if source is None or not source.is_file():
        parser.error("--data: MATH-500's test.jsonl is not in the data directory; give its path")
    args.out.mkdir(parents=True, exist_ok=True)
    questions = args.out / "questions.jsonl"
    total = _questions(source, levels, questions)
    run = args.out / "run"
    started = time.monotonic()
    flags = ["--provider", args.provider, "--model", args.model, "--base-url", args.base_url]
    if args.api_key_env:
        flags += ["--api-key-env", args.api_key_env]
    flags += ["--max-tokens", str(args.max_tokens), "--temperature", str(args.temperature)]
    flags += ["--concurrency", str(args.concurrency), "--timeout", str(args.timeout)]
    warmup = ["run", "--method", "adpt", "--suite", "math500", "--data", str(questions)]
    warmup += ["--limit", str(args.limit), "--rounds", "1", "--out", str(run), *flags]
    if (run / "config.json").exists():
        warmup.append("--resume")
    if not (run / "summary.json").exists():
        _ttc(*warmup)
    _ttc("ablate", str(run), "--rounds", str(args.rounds))
    summary: dict[str, Any] = orjson.loads((run / "summary.json").read_bytes())
    ablation: dict[str, Any] = orjson.loads((run / "ablation.json").read_bytes())
    line = {
        "benchmark": "real_model_ablation",
        # From the run: a `ttc serve` behind --base-url is the simulator too.
        "simulated": bool(summary.get("simulated")) or bool(ablation.get("simulated")),
        "model": args.model,
        "base_url": redact_url(args.base_url),
        "suite": f"math500 levels {sorted(levels)} ({total} questions, first {args.limit})",
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "warmup_coverage": summary.get("coverage"),
        **{k: ablation.get(k) for k in ("pairs", "questions", "with", "without", "effect")},
        "ci95": ablation.get("ci95"),
        "p_value": ablation.get("p_value"),
        "wall_s_this_call": round(time.monotonic() - started, 1),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    print(orjson.dumps(line).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
