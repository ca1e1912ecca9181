"""What a trivial program costs through the code sandbox, with every layer this machine allows.

Runs `print(1)` through `run_python` N times with the audit guard on and N times with it off, the
two interleaved run by run so that a noisy machine weighs on both alike. Prints one JSON line: the
median and the 90th percentile wall time of each in milliseconds, and which layers are on
(`protections()`: namespaces, private root, seccomp, cgroup, uid, and why any is off).

    python benchmarks/sandbox.py [--runs 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import orjson

from ttc.adapters.sandbox import RunOptions, protections, run_python

_VARIANTS = {"all_layers": True, "without_audit_guard": False}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="runs per setup (default 100)")
    args = parser.parse_args(argv)
    report = protections()
    times: dict[str, list[float]] = {name: [] for name in _VARIANTS}
    for _ in range(args.runs + 3):  # the first three rounds warm up and are dropped
        for name, guard in _VARIANTS.items():
            options = RunOptions(timeout_s=10.0, audit_guard=guard)
            started = time.perf_counter()
            result = run_python("print(1)", "", options)
            times[name].append((time.perf_counter() - started) * 1000)
            if not result.ok or result.stdout != "1\n":
                print(f"{name}: the trivial program failed: {result}", file=sys.stderr)
                return 1
    line: dict[str, object] = {"runs": args.runs}
    for name, samples in times.items():
        kept = sorted(samples[3:])
        line[f"{name}_median_ms"] = round(statistics.median(kept), 2)
        line[f"{name}_p90_ms"] = round(kept[int(0.9 * (len(kept) - 1))], 2)
    line["layers"] = {
        "namespaces": report["namespaces"],
        "private_root": report["private_root"],
        "seccomp": report["seccomp"],
        "cgroup": report["cgroup"],
        "uid": report["uid"],
        "missing": report["missing"],
    }
    print(orjson.dumps(line).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
