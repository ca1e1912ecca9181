"""How much an approximate index changes the neighbours, and what it saves: `--index` measured.

Generates Reasoning Gym questions (decimal_arithmetic and letter_counting, half each, as
`memory_100k.py`), embeds them with the lexical embedder, marks a seeded `--solved` share of them
solved, and builds the index of solved questions of each kind. Then, for `--queries` unsolved
questions drawn with the same seed, it compares each kind's top-p neighbours with the exact ones
(`flat`): recall@p (the share of the exact top-p an index also returns) and the mean cosine of the
neighbours it returns against the exact ones'. Times are the build (training and adding the
solved questions) and the search of those queries as one batch, as a round's planning does, with
an estimate for a whole round (every unsolved question). Prints one JSON line.

    python benchmarks/index_recall.py [--questions 200000] [--solved 0.6] [--queries 2000] [-p 3]

No provider and no verifier: this measures retrieval alone, on real questions and a real
embedder, not simulated answers.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time

import numpy as np
import orjson

from ttc.adapters import LexicalEmbedder, ReasoningGymSuite
from ttc.retrieval import SolvedIndex, index_spec

TASKS = ("decimal_arithmetic", "letter_counting")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=200_000)
    parser.add_argument("--solved", type=float, default=0.6, help="share of questions solved")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("-p", type=int, default=3, help="neighbours per question")
    parser.add_argument("--kinds", default="ivf,hnsw", help="approximate kinds to compare")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.questions < 10 or not 0 < args.solved < 1 or args.queries < 1 or args.p < 1:
        parser.error("--questions >= 10, --solved in (0, 1), --queries >= 1 and -p >= 1")
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    suite = ReasoningGymSuite(per_task=math.ceil(args.questions / len(TASKS)), tasks=TASKS)
    questions = [item.question for item in suite.items()[: args.questions]]
    generated = time.perf_counter()
    vectors = LexicalEmbedder().embed(questions)
    embedded = time.perf_counter()
    del questions
    n = vectors.shape[0]
    rng = random.Random(args.seed)
    rows = list(range(n))
    rng.shuffle(rows)
    cut = round(args.solved * n)
    solved, unsolved = sorted(rows[:cut]), rows[cut:]
    queries = sorted(unsolved[: args.queries])

    def measure(kind: str) -> tuple[SolvedIndex, dict[str, object]]:
        spec = index_spec(kind, n)
        t0 = time.perf_counter()
        index = SolvedIndex(vectors, spec)
        index.add(solved)
        t1 = time.perf_counter()
        found = index.search(queries, args.p)
        t2 = time.perf_counter()
        per_query = (t2 - t1) / len(queries)
        return index, {
            "index": spec.describe(),
            "build_s": round(t1 - t0, 2),
            "search_s": round(t2 - t1, 3),
            "round_search_s_estimate": round(per_query * len(unsolved), 1),
            "_found": found,
        }

    _, exact = measure("flat")
    want = exact.pop("_found")
    assert isinstance(want, list)
    results = {"flat": exact}
    for kind in [k.strip() for k in args.kinds.split(",") if k.strip()]:
        _, got = measure(kind)
        found = got.pop("_found")
        assert isinstance(found, list)
        hits = [
            len({r for r, _ in g} & {r for r, _ in w}) / max(1, len(w))
            for g, w in zip(found, want, strict=True)
        ]
        got["recall_at_p"] = round(float(np.mean(hits)), 4)
        got["mean_cosine"] = round(float(np.mean([s for g in found for _, s in g])), 4)
        results[kind] = got
    results["flat"]["mean_cosine"] = round(float(np.mean([s for w in want for _, s in w])), 4)
    line = {
        "benchmark": "index_recall",
        "simulated": False,
        "note": "retrieval alone: real Reasoning Gym questions, the lexical embedder, no provider",
        "questions": n,
        "solved": len(solved),
        "queries": len(queries),
        "p": args.p,
        "dim": int(vectors.shape[1]),
        "kinds": results,
        "generation_s": round(generated - started, 1),
        "embedding_s": round(embedded - generated, 1),
        "wall_s": round(time.perf_counter() - started, 1),
        "loadavg_1m": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
    }
    sys.stdout.write(orjson.dumps(line).decode() + "\n")


if __name__ == "__main__":
    main()
