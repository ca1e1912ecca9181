"""`ttc export --format inspect`: a run as an Inspect AI log (`.eval` or `.json`), written with
inspect_ai's own log API (`EvalLog`, `write_eval_log`; the `inspect` extra, imported only here),
so `inspect view` and `read_eval_log` open it.

How a run maps onto a log:
- one sample per question (epoch 1): its input is the question (its id when the suite's
  questions could not be read back), its target the reference answer;
- its messages are every draw of every round in order: a user turn naming the round, the draw
  and the demonstrations shown in its prompt (their ids, and their questions when known), then
  the assistant's response (or the error it ended in) with its verdict, tokens and latency in the
  message's metadata;
- its scores are the run's two judgements of the question: `covered` (some response passed the
  run's judgement) and `accurate` (the run's final answer is right), "C" or "I", the final
  answer and the round it was solved in; the verdict of every draw is in the score's metadata;
- its usage (`model_usage`) is its tokens and cost; the eval's config is the run's config.json
  (task_args: the RunConfig; metadata: the whole file), its results the run's coverage and
  accuracy.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ttc.engine._util._extras import require
from ttc.engine.contract._types import Usage
from ttc.engine.report._samples import RunSamples, SampleRecord

__all__ = ["Question", "write_inspect"]

# A question as the suite holds it: (question text, reference answer).
Question = tuple[str, str]


def _iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat()


def _model_name(run: RunSamples) -> str:
    """Inspect's `provider/model` form."""
    provider = str(run.summary.get("provider") or run.config.get("provider") or "ttc")
    return f"{provider}/{run.run.model}"


def _prompt(s: SampleRecord, questions: Mapping[str, Question]) -> str:
    head = f"round {s.round}, draw {s.k}"
    if s.temperature is not None:
        head += f", temperature {s.temperature:g}"
    if not s.demos:
        return f"[{head}; no demonstrations]"
    lines = [f"[{head}; {len(s.demos)} demonstrations shown in the prompt]"]
    for i, demo in enumerate(s.demos, 1):
        known = questions.get(demo)
        lines.append(f"{i}. {demo}" + ("" if known is None else f": {known[0]}"))
    return "\n".join(lines)


def _verdict(s: SampleRecord) -> dict[str, Any]:
    return {
        "round": s.round,
        "k": s.k,
        "ok": s.ok,
        "error": s.error,
        "score": s.score,
        "answer": s.answer,
        "correct": s.correct,
        "passed": s.passed,
    }


def _usage(il: Any, usage: Usage, cost: float | None) -> Any:
    total = usage.input_tokens + usage.output_tokens + usage.thinking_tokens
    return il.ModelUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=total,
        reasoning_tokens=usage.thinking_tokens or None,
        input_tokens_cache_read=usage.cached_tokens or None,
        total_cost=cost,
    )


def _sum_cost(samples: list[SampleRecord]) -> float | None:
    costs = [s.cost_usd for s in samples if s.ok]
    if not costs or any(c is None for c in costs):
        return None
    return sum(c for c in costs if c is not None)


def _sample(
    il: Any,
    item: str,
    samples: list[SampleRecord],
    run: RunSamples,
    questions: Mapping[str, Question],
) -> Any:
    model = _model_name(run)
    messages: list[Any] = []
    for s in samples:
        meta = {"round": s.round, "k": s.k, "demonstrations": list(s.demos)}
        messages.append(il.ChatMessageUser(content=_prompt(s, questions), metadata=meta))
        reply = s.text if s.ok and s.text is not None else f"[no response: {s.error}]"
        messages.append(
            il.ChatMessageAssistant(
                content=reply,
                model=model,
                metadata={
                    **_verdict(s),
                    "attempts": s.attempts,
                    "retries": s.retries,
                    "input_tokens": s.usage.input_tokens,
                    "output_tokens": s.usage.output_tokens,
                    "thinking_tokens": s.usage.thinking_tokens,
                    "latency_s": s.latency_s,
                    "cost_usd": s.cost_usd,
                    "cached": s.cached,
                },
            )
        )
    result = run.results.get(item, {})
    covered = bool(result.get("covered", any(s.passed for s in samples)))
    accurate = bool(result.get("accurate", False))
    answer = result.get("answer")
    solved = result.get("solved_round")
    verdicts = [_verdict(s) for s in samples]
    scores = {
        "covered": il.Score(
            value="C" if covered else "I",
            answer=answer,
            explanation=f"solved in round {solved}" if solved else "never solved",
            metadata={"solved_round": solved, "verdicts": verdicts},
        ),
        "accurate": il.Score(
            value="C" if accurate else "I",
            answer=answer,
            explanation=f"the run's final answer, from round {result.get('answer_round')}",
        ),
    }
    usage = Usage()
    for s in samples:
        usage = usage + s.usage
    final = result.get("response") or next(
        (s.text for s in reversed(samples) if s.ok and s.text is not None), ""
    )
    question, target = questions.get(item, (item, ""))
    times = [s.at for s in samples if s.at is not None]
    return il.EvalSample(
        id=item,
        epoch=1,
        input=question,
        target=target,
        messages=messages,
        output=il.ModelOutput.from_content(model, final or ""),
        scores=scores,
        metadata={"rounds": sorted({s.round for s in samples}), "draws": len(samples)},
        model_usage={model: _usage(il, usage, _sum_cost(samples))},
        started_at=_iso(min(times)) if times else None,
        completed_at=_iso(max(times)) if times else None,
        # From its first draw's landing to its last's (the run's rounds between them included).
        total_time=round(max(times) - min(times), 3) if times else None,
    )


def _share(il: Any, name: str, value: float) -> Any:
    return il.EvalScore(
        name=name,
        scorer=name,
        metrics={"accuracy": il.EvalMetric(name="accuracy", value=value)},
    )


def build_log(run: RunSamples, questions: Mapping[str, Question]) -> Any:
    """The run as an `inspect_ai.log.EvalLog`."""
    il = _inspect()
    by_item: dict[str, list[SampleRecord]] = {}
    for s in run.samples:
        by_item.setdefault(s.item, []).append(s)
    # The questions in results.jsonl's order (the run's), then any only the journal names.
    order = [i for i in run.results if i in by_item] + [i for i in by_item if i not in run.results]
    samples = [_sample(il, item, by_item[item], run, questions) for item in order]
    model = _model_name(run)
    total = Usage()
    for s in run.samples:
        total = total + s.usage
    n = run.run.questions or len(samples)
    covered = run.run.covered if run.run.covered is not None else 0
    accurate = run.run.accurate if run.run.accurate is not None else 0
    created = _iso(run.started_at) or datetime.now(UTC).isoformat()
    spec = il.EvalSpec(
        created=created,
        task=f"ttc/{run.run.method}",
        task_args=dict(run.config.get("config", {})),
        dataset=il.EvalDataset(name=run.run.suite, samples=n, sample_ids=order),
        model=model,
        config=il.EvalConfig(epochs=1),
        metadata={"ttc": run.config, "simulated": run.run.simulated, "run_dir": str(run.run.path)},
    )
    return il.EvalLog(
        status="success" if run.run.complete else "cancelled",
        eval=spec,
        plan=il.EvalPlan(
            steps=[
                il.EvalPlanStep(
                    solver=f"ttc {run.run.method}", params=run.config.get("strategy", {})
                )
            ]
        ),
        results=il.EvalResults(
            total_samples=n,
            completed_samples=len(samples),
            scores=[
                _share(il, "covered", covered / n if n else 0.0),
                _share(il, "accurate", accurate / n if n else 0.0),
            ],
        ),
        stats=il.EvalStats(
            started_at=created,
            completed_at=_iso(run.ended_at) or created,
            model_usage={model: _usage(il, total, run.run.cost_usd)},
        ),
        samples=samples,
    )


def _inspect() -> Any:
    """The inspect_ai names the export uses, gathered from their public modules."""
    log = require("inspect_ai.log", "inspect")
    model = require("inspect_ai.model", "inspect")
    scorer = require("inspect_ai.scorer", "inspect")
    names = {
        name: getattr(log, name)
        for name in (
            "EvalConfig",
            "EvalDataset",
            "EvalLog",
            "EvalMetric",
            "EvalPlan",
            "EvalPlanStep",
            "EvalResults",
            "EvalSample",
            "EvalScore",
            "EvalSpec",
            "EvalStats",
        )
    }
    for name in ("ChatMessageAssistant", "ChatMessageUser", "ModelOutput", "ModelUsage"):
        names[name] = getattr(model, name)
    return SimpleNamespace(Score=scorer.Score, **names)


async def write_inspect(run: RunSamples, out: Path, questions: Mapping[str, Question]) -> int:
    """Writes the run to `out` (`.eval` or `.json`, by its suffix); returns its sample count
    (inspect_ai's async writer: its sync one runs a loop of its own, not inside this one)."""
    log = build_log(run, questions)
    out.parent.mkdir(parents=True, exist_ok=True)
    await require("inspect_ai.log", "inspect").write_eval_log_async(log, str(out))
    return len(log.samples or [])
