"""The host's event-loop lag while an Engine runs 20,000 questions through `sim`, and resumes.

A host coroutine sleeps 1 ms in a loop and records how late each wake-up comes (the lag every
other coroutine of the host would see), while an Engine with a run directory (journal on) runs
in the same loop. Four phases, each measured alone:

    pool             `async with Engine(...)`: the verifier processes starting and stopping
    run              a fresh run, stopped with `engine.stop()` once (1 + --stop-at) x the
                     questions have landed: part way through round 2 (a host interrupting it)
    resume           `resume=True` of that run, to its end: the journal is parsed and replayed,
                     the rest is sent, results.jsonl and summary.json are written
    resume_finished  `resume=True` of the finished run: the whole journal is parsed and replayed

Method `adpt` (warm-up, then elimination with similar solved demonstrations), K=1, the lexical
embedder, two verifier processes with the real reasoning-gym scorers, the offline simulator at
zero latency: the run is bound by the machinery alone. Prints one JSON line: per phase, the lag
in ms (p50, p99 and max of every wake-up; `lag_ms_by_round` the same per round, round 0 being the
run's set-up), the late wake-ups (over 10 ms) with the share of their time the loop thread was
running (the rest it waited for the GIL, held by another thread, or for a CPU), the garbage
collector's pauses, and the requests per second (new requests over the phase's wall time, the
journal's parsing and the final results included). Targets: p99 <= 10 ms and max <= 50 ms in the
three engine phases, at >= 1,000 requests/s in `run` and `resume`. Simulated: it measures the
machinery, never the method.

As a latency-minded service does, the host freezes its start-up heap (`gc.freeze()` once the
imports are done and the test set is generated: some 260,000 objects for 20,000 questions), so
that the collector's full collections walk only what was made since. `--no-gc-freeze` measures
without: each full collection then walks the host's whole heap (100-180 ms on a 2-core machine),
a pause the engine's allocations set off but cannot shorten. The host also imports
numpy.random at start-up: the sim provider would on its first call (some 150 ms on the loop).
`--tune-collector` has the host also raise the collector's young generation as the `ttc`
command does in its own process (`ttc.engine.cli.tune_collector`).

    python benchmarks/loop_lag.py [--size 20000] [--rounds 4] [--no-gc-freeze | --tune-collector]
                                  [--blame]

`--blame` prints to stderr the callbacks that held the loop for 10 ms or more, heaviest first,
each named by where its task resumed and where it stopped next: where the lag comes from.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import os
import platform
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy.random  # noqa: F401 - the sim provider imports it on its first call: at start-up here
import orjson

from ttc.adapters import LexicalEmbedder, ReasoningGymSuite, SimConfig, SimProvider
from ttc.engine import (
    Engine,
    EngineOptions,
    Event,
    Item,
    RoundStats,
    RunConfig,
    RunObserver,
    RunResult,
    SampleLanded,
)

TASKS = ("decimal_arithmetic", "letter_counting")
TARGETS = {"p99_ms": 10.0, "max_ms": 50.0, "requests_per_s": 1000.0}
PROBE_S = 0.001
BLAME_MS = 10.0


@dataclass
class Phase:
    """What one phase recorded: the probe's lags (ms), the collector's pauses (ms)."""

    lags: list[float] = field(default_factory=list)
    by_round: defaultdict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    # (lag, the loop thread's CPU time meanwhile) of each wake-up later than BLAME_MS: a loop
    # thread that did not run all that time waited for the GIL or for a CPU.
    late: list[tuple[float, float]] = field(default_factory=list)
    gc_ms: list[float] = field(default_factory=list)
    gc_full: int = 0
    wall_s: float = 0.0
    requests: int | None = None


class Probe:
    """The host: a coroutine that sleeps PROBE_S at a time and records how late it wakes.

    It also times every garbage collection (gc.callbacks), filed under the phase it fell in.
    """

    def __init__(self) -> None:
        self.phases: dict[str, Phase] = {}
        self.phase: Phase | None = None
        self.round = 0  # the round in progress (0: the run's set-up)
        self._entered = 0.0
        self.gc_total = 0.0  # ms of every collection so far
        self._gc_started = 0.0
        self._stop = False

    def enter(self, name: str | None) -> Phase | None:
        """Files what follows under phase `name` (None: under none); the time since the last
        call goes to the phase it was filed under."""
        now = time.perf_counter()
        if self.phase is not None:
            self.phase.wall_s += now - self._entered
        self._entered, self.round = now, 0
        self.phase = None if name is None else self.phases.setdefault(name, Phase())
        return self.phase

    async def run(self) -> None:
        while not self._stop:
            before, cpu = time.perf_counter(), time.thread_time()
            await asyncio.sleep(PROBE_S)
            late = max(0.0, time.perf_counter() - before - PROBE_S) * 1000
            if self.phase is not None:
                self.phase.lags.append(late)
                self.phase.by_round[self.round].append(late)
                if late > BLAME_MS:
                    self.phase.late.append((late, (time.thread_time() - cpu) * 1000))

    def stop(self) -> None:
        self._stop = True

    def on_gc(self, stage: str, info: dict[str, int]) -> None:
        if stage == "start":
            self._gc_started = time.perf_counter()
            return
        ms = (time.perf_counter() - self._gc_started) * 1000
        self.gc_total += ms
        if self.phase is not None:
            self.phase.gc_ms.append(ms)
            self.phase.gc_full += info["generation"] == 2


class Blame:
    """Times every callback the loop runs. One that holds the loop for BLAME_MS or more is filed
    under where its task resumed and where it stopped next (the innermost frames of each), with
    the garbage collector's share of it; `report` prints the heaviest."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.total: defaultdict[str, float] = defaultdict(float)
        self.worst: dict[str, float] = {}
        self.gc: defaultdict[str, float] = defaultdict(float)
        self.count: Counter[str] = Counter()
        self._original = asyncio.events.Handle._run

    def install(self) -> None:
        original, blame = self._original, self

        def timed(handle: asyncio.Handle) -> None:
            resumed = _where(handle)
            gc_before = blame.probe.gc_total
            started = time.perf_counter()
            original(handle)
            ms = (time.perf_counter() - started) * 1000
            if ms >= BLAME_MS:
                key = f"{resumed}  =>  {_where(handle)}"
                blame.total[key] += ms
                blame.worst[key] = max(blame.worst.get(key, 0.0), ms)
                blame.count[key] += 1
                blame.gc[key] += blame.probe.gc_total - gc_before

        asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]

    def report(self, top: int = 20) -> None:
        for key, ms in sorted(self.total.items(), key=lambda kv: -kv[1])[:top]:
            sys.stderr.write(
                f"{ms:8.0f} ms ({self.count[key]:5d}x, worst {self.worst[key]:6.1f}, gc "
                f"{self.gc[key]:6.0f})  {key}\n"
            )


def _where(handle: asyncio.Handle) -> str:
    """The innermost frames of the task a callback steps (or the callback's name)."""
    callback = handle._callback  # type: ignore[attr-defined]
    task = getattr(callback, "__self__", None)
    if not isinstance(task, asyncio.Task):
        return getattr(callback, "__qualname__", repr(callback))[:80]
    frames = []
    awaited: Any = task.get_coro()
    while awaited is not None and getattr(awaited, "cr_frame", None) is not None:
        frames.append(awaited.cr_frame)
        awaited = awaited.cr_await
    if not frames:
        return f"{task.get_name()} (done)"
    return " < ".join(
        f"{Path(f.f_code.co_filename).name}:{f.f_lineno} {f.f_code.co_name}"
        for f in reversed(frames[-3:])
    )


@dataclass(frozen=True)
class Outcome:
    """What one run ended with."""

    rounds: int
    complete: bool
    requests_per_round: list[int]


class Watch(RunObserver):
    """Files the probe's lags under the round in progress; with `stop_after`, stops the engine
    once that many samples have landed (the host interrupting a run)."""

    def __init__(self, probe: Probe, stop_after: int | None) -> None:
        self.probe = probe
        self.stop_after = stop_after
        self.engine: Engine | None = None
        self.landed = 0

    def round_started(self, stats: RoundStats) -> None:
        self.probe.round = stats.round

    def event(self, event: Event) -> None:
        if isinstance(event, SampleLanded):
            self.landed += 1
            if self.landed == self.stop_after and self.engine is not None:
                self.engine.stop("the benchmark stops the run part way through")


def generate(size: int) -> tuple[ReasoningGymSuite, list[Item]]:
    """`size` Reasoning Gym questions, half of each task, interleaved."""
    suite = ReasoningGymSuite(per_task=math.ceil(size / len(TASKS)), tasks=TASKS)
    return suite, suite.items()[:size]


def requests_of(result: RunResult) -> int:
    """The requests this phase sent (not those its journal held)."""
    return sum(stats.sent for stats in result.rounds)


async def one_run(
    args: argparse.Namespace,
    probe: Probe,
    out: Path,
    name: str,
    *,
    resume: bool,
    stop_after: int | None = None,
) -> Outcome:
    """One Engine over the test set: its pool's start and shutdown filed under `pool`, its
    `run` under `name`."""
    suite, items = args.generated
    config = RunConfig(method=args.method, rounds=args.rounds, k=1, verifier_workers=2)
    provider = SimProvider(suite, items, SimConfig(seed=1, latency_s=0.0))
    observer = Watch(probe, stop_after)
    options = EngineOptions(observer=observer)
    probe.enter("pool")
    engine = Engine(
        provider,
        suite,
        config,
        out_dir=out,
        embedder=LexicalEmbedder(),
        resume=resume,
        options=options,
    )
    observer.engine = engine
    async with engine:
        await engine.verifiers.ready()
        phase = probe.enter(name)
        assert phase is not None
        result = await engine.run(items)
        probe.enter("pool")
        phase.requests = requests_of(result)
    probe.enter(None)
    # What the line reports of the run, and nothing more: a host that kept every result would
    # make each collection of the garbage collector longer, and that is the host's to weigh.
    return Outcome(len(result.rounds), result.complete, [s.sent for s in result.rounds])


def percentiles(lags: list[float]) -> dict[str, Any]:
    """p50, p99 and max of some lags (ms), and how many there were."""
    ordered = sorted(lags)

    def pct(q: float) -> float:
        return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 2) if ordered else 0.0

    return {"p50": pct(0.5), "p99": pct(0.99), "max": pct(1.0), "wakeups": len(ordered)}


def summary(phase: Phase) -> dict[str, Any]:
    line: dict[str, Any] = {
        "wall_s": round(phase.wall_s, 3),
        "lag_ms": percentiles(phase.lags),
        # Round 0: the run's set-up; the last round holds the results written after it.
        "lag_ms_by_round": {
            str(t): {k: v for k, v in percentiles(lags).items() if k != "p50"}
            for t, lags in sorted(phase.by_round.items())
        },
        "late": {
            "wakeups": len(phase.late),
            "loop_cpu_share": round(
                sum(c for _, c in phase.late) / sum(x for x, _ in phase.late), 2
            )
            if phase.late
            else None,
        },
        "gc": {
            "collections": len(phase.gc_ms),
            "full": phase.gc_full,
            "max_ms": round(max(phase.gc_ms, default=0.0), 2),
            "total_ms": round(sum(phase.gc_ms), 1),
        },
    }
    if phase.requests is not None:
        line["requests"] = phase.requests
        line["requests_per_s"] = (
            round(phase.requests / phase.wall_s, 1) if phase.requests and phase.wall_s else None
        )
    return line


async def bench(args: argparse.Namespace, tmp: Path) -> tuple[Probe, Blame | None, dict[str, Any]]:
    probe = Probe()
    gc.callbacks.append(probe.on_gc)
    blame = Blame(probe) if args.blame else None
    if blame is not None:
        blame.install()
    probing = asyncio.create_task(probe.run())
    try:
        size = len(args.generated[1])
        run = tmp / "run"
        first = await one_run(
            args, probe, run, "run", resume=False, stop_after=size + int(args.stop_at * size)
        )
        second = await one_run(args, probe, run, "resume", resume=True)
        third = await one_run(args, probe, run, "resume_finished", resume=True)
    finally:
        probe.stop()
        await probing
        gc.callbacks.remove(probe.on_gc)
        if blame is not None:
            blame.uninstall()
    facts = {
        "stopped_in_round": first.rounds,
        "complete": second.complete and third.complete,
        "requests_per_round": second.requests_per_round,
        "journal_mb": round((run / "journal.jsonl").stat().st_size / 2**20, 1),
    }
    return probe, blame, facts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20_000, help="questions (default 20000)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--method", default="adpt", help="the method (default adpt)")
    parser.add_argument(
        "--stop-at",
        type=float,
        default=0.25,
        help="stop the first run once this share of the questions has landed in round 2 "
        "(default 0.25)",
    )
    parser.add_argument("--blame", action="store_true", help="print where the loop stalled")
    parser.add_argument(
        "--no-gc-freeze",
        dest="freeze",
        action="store_false",
        help="measure without gc.freeze() after the host's start-up",
    )
    parser.add_argument(
        "--tune-collector",
        action="store_true",
        help="the host tunes its collector as the ttc command does (ttc.engine.cli."
        "tune_collector: the start-up heap frozen, a young generation of 10,000)",
    )
    args = parser.parse_args()
    if args.size < 1 or args.rounds < 2:
        parser.error("--size must be at least 1 and --rounds at least 2")
    if not 0 < args.stop_at < 1:
        parser.error("--stop-at must be between 0 and 1")
    load_start = os.getloadavg()[0]
    args.generated = generate(args.size)
    if args.tune_collector:
        from ttc.engine.cli import tune_collector

        tune_collector()
    elif args.freeze:
        gc.freeze()
    with tempfile.TemporaryDirectory(prefix="ttc-loop-lag-") as tmp:
        probe, blame, facts = asyncio.run(bench(args, Path(tmp)))
    phases = {name: summary(phase) for name, phase in probe.phases.items()}
    measured = [phases[name] for name in ("run", "resume", "resume_finished")]
    met = all(
        p["lag_ms"]["p99"] <= TARGETS["p99_ms"] and p["lag_ms"]["max"] <= TARGETS["max_ms"]
        for p in measured
    ) and all((p["requests_per_s"] or 0) >= TARGETS["requests_per_s"] for p in measured[:2])
    line = {
        "benchmark": "loop_lag",
        "simulated": True,
        "note": "sim provider at zero latency: measures the machinery, not the method",
        "suite": f"reasoning_gym {'+'.join(TASKS)}",
        "method": args.method,
        "embedder": "lexical",
        "verifier_workers": 2,
        "questions": args.size,
        "rounds": args.rounds,
        "host_gc_freeze": args.freeze or args.tune_collector,
        "host_gc_young_generation": gc.get_threshold()[0],
        **facts,
        "phases": phases,
        "targets": TARGETS,
        "targets_met": met,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_1m": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
    }
    sys.stdout.write(orjson.dumps(line).decode() + "\n")
    if blame is not None:
        blame.report()


if __name__ == "__main__":
    main()
