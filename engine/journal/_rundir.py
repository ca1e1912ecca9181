"""The run directory: everything one run produced, in one place.

config.json      the resolved config and strategy, provider (and role models), suite, data
                 checksum, package version
journal.jsonl    append-only events: every sample, rating, verdict, retry and round (see _journal),
                 compact (see _frames; `python -m ttc.engine.journal DIR` prints it as JSON lines)
results.jsonl    one line per question: resolved, ỹ, covered, the selected answer and whether it
                 is correct, samples, tokens
summary.json     coverage, accuracy and input/output/thinking tokens per round, the policy's
                 cost, role models' tokens and cost, wall time
embeddings.npy   the question embeddings of this run (with a .json sidecar)
run.log          the run's log lines
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from ttc.engine._util._nofollow import open_file, temp_file
from ttc.engine.contract._errors import ConfigError, WriteError
from ttc.engine.contract._state import QuestionRecord, RoundStats, RunState
from ttc.engine.contract._types import Item, Usage
from ttc.engine.journal._logs import attach, detach
from ttc.engine.send._tokens import billed

_JSON = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS


class _RunLog(logging.FileHandler):
    """run.log; a line it cannot write (a full disk) is dropped without a traceback on the
    terminal: the journal's own write error, or the run's end, says what happened. Opened never
    through a link (`open_file`)."""

    def _open(self) -> Any:
        raw = open_file(Path(self.baseFilename), "ab")
        return io.TextIOWrapper(raw, encoding=self.encoding, errors=self.errors)

    def handleError(self, record: logging.LogRecord) -> None:
        return None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            super().close()


def write_atomic(path: Path, data: bytes | Iterable[bytes]) -> None:
    """Replace `path` with `data` (bytes, or chunks written one by one, so that a large file
    is never held in memory whole); a reader sees the old file or the new, never half."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with temp_file(tmp) as fh:
            if isinstance(data, bytes):
                fh.write(data)
            else:
                for chunk in data:
                    fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        # The old file stays whole; the half-written copy goes (it would only take space).
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise WriteError(path, exc) from exc


def _result_lines(state: RunState) -> Iterator[bytes]:
    rules = state.rules
    for item, rec in zip(state.items, state.records, strict=True):
        resolved = rules.resolved(rec)
        demo = rules.demo(rec)
        chosen = rules.selected(rec)
        record = {
            "id": item.id,
            # Resolved by the run's judgement (for ground truth: solved), and ỹ: the response it
            # shows as a demonstration (for ground truth: the first passing one).
            "solved": resolved,
            "response": None if demo is None else demo.text,
            "solved_round": _resolved_round(rec, resolved),
            # Ground truth: some response is correct (coverage); the selected final answer, and
            # whether it is correct (accuracy).
            "covered": rec.covered,
            "answer": None if chosen is None else chosen.answer,
            "answer_round": None if chosen is None else chosen.round,
            "accurate": chosen is not None and chosen.correct,
            "samples": rec.samples,
            "errors": rec.errors,
            "input_tokens": rec.usage.input_tokens,
            "output_tokens": rec.usage.output_tokens,
            "thinking_tokens": rec.usage.thinking_tokens,
        }
        yield orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


def _resolved_round(rec: QuestionRecord, resolved: bool) -> int | None:
    if not resolved:
        return None
    if rec.accepted is not None:
        return rec.accepted.round
    # Consensus: resolved at the barrier of the round its responses first agreed.
    return rec.consensus_round


def round_row(s: RoundStats) -> dict[str, Any]:
    """One round's totals as summary.json stores them."""
    return {
        "round": s.round,
        "adaptive": s.adaptive,
        "active": s.active,
        "planned": s.planned,
        "requests": s.requests,
        "samples": s.samples,
        "passed": s.passed,
        "newly_solved": s.newly_solved,
        "solved": s.solved,
        "covered": s.covered,
        "coverage": s.coverage,
        "accurate": s.accurate,
        "accuracy": s.accuracy,
        "input_tokens": s.usage.input_tokens,
        "output_tokens": s.usage.output_tokens,
        "thinking_tokens": s.usage.thinking_tokens,
        "errors": s.errors,
        "retries": s.retries,
        "rate_limited": s.rate_limited,
        "wall_s": round(s.wall_s, 3),
        "complete": s.complete,
        "judge_calls": s.judge_calls,
        "judge_input_tokens": s.judge_usage.input_tokens,
        "judge_output_tokens": s.judge_usage.output_tokens,
        "judge_thinking_tokens": s.judge_usage.thinking_tokens,
        "judge_unparsed": s.judge_unparsed,
        "judge_errors": s.judge_errors,
    }


class RunDir:
    """Paths and writers of one run directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def journal_path(self) -> Path:
        return self.path / "journal.jsonl"

    @property
    def embeddings_path(self) -> Path:
        return self.path / "embeddings.npy"

    @property
    def summary_path(self) -> Path:
        return self.path / "summary.json"

    @property
    def results_path(self) -> Path:
        return self.path / "results.jsonl"

    @property
    def config_path(self) -> Path:
        return self.path / "config.json"

    def attach_log(self) -> logging.Handler:
        """Send the records of the run in this context to run.log, until `detach_log` (see
        `_logs.run_logging`: other runs' lines stay out, the host's logging as it was)."""
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            handler = _RunLog(self.path / "run.log", encoding="utf-8")
        except OSError as exc:
            raise WriteError(self.path / "run.log", exc) from exc
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        attach(handler)
        return handler

    def detach_log(self, handler: logging.Handler) -> None:
        detach(handler)
        handler.close()

    def write_config(self, description: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomic(self.config_path, orjson.dumps(description, option=_JSON))

    def finished(self) -> bool:
        """Whether summary.json is there and says the run completed (False if unreadable)."""
        try:
            summary = orjson.loads(self.summary_path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return False
        return isinstance(summary, dict) and summary.get("complete") is True

    def write_results(
        self,
        state: RunState,
        extra: dict[str, Any],
        wall_s: float,
        cost: Callable[[Usage], float | None] = lambda usage: None,
    ) -> None:
        """results.jsonl (one line per question) and summary.json (per-round totals). Blocking
        (a large run's results take a while, and are fsynced): the engine calls it in a thread."""
        write_atomic(self.results_path, _result_lines(state))
        total = state.total_usage()
        n = state.n
        covered, accurate = state.covered_count(), state.accurate_count()
        policy_cost, role_cost = cost(total), extra.get("role_cost_usd", 0.0)
        summary = {
            **extra,
            "questions": n,
            "solved": state.solved_count(),
            "covered": covered,
            "coverage": covered / n if n else 0.0,
            "accurate": accurate,
            "accuracy": accurate / n if n else 0.0,
            "rounds_completed": sum(s.complete for s in state.rounds),
            "complete": bool(state.rounds)
            and all(s.complete for s in state.rounds)
            and len(state.rounds) == extra.get("rounds_planned", len(state.rounds)),
            "input_tokens": total.input_tokens,
            "output_tokens": total.output_tokens,
            "thinking_tokens": total.thinking_tokens,
            "wall_s": round(wall_s, 3),
            # Over the run's wall time (every session's): requests and the policy's tokens.
            **achieved(sum(s.requests for s in state.rounds), billed(total), wall_s),
            # The policy model's cost; with the role models' (`role_cost_usd`): `total_cost_usd`.
            "cost_usd": policy_cost,
            "total_cost_usd": None
            if policy_cost is None or role_cost is None
            else policy_cost + role_cost,
            "rounds": [{**round_row(s), "cost_usd": cost(s.usage)} for s in state.rounds],
        }
        write_atomic(self.summary_path, orjson.dumps(summary, option=_JSON))


def achieved(requests: int, tokens: int, wall_s: float) -> dict[str, float | None]:
    """summary.json's achieved rates: requests and tokens per minute of wall time."""
    minutes = wall_s / 60
    return {
        "achieved_rpm": round(requests / minutes, 1) if minutes > 0 else None,
        "achieved_tpm": round(tokens / minutes, 1) if minutes > 0 else None,
    }


def items_sha256(items: Sequence[Item]) -> str:
    """The checksum of a test set as config.json records it (ids, questions, references)."""
    digest = hashlib.sha256()
    for item in items:
        digest.update(f"{item.id}\0{item.question}\0{item.reference}\n".encode())
    return digest.hexdigest()


def matched_output_tokens(run_dir: Path, suite: str, items: Sequence[Item], seed: int) -> int:
    """The output tokens of the run in `run_dir`, to match a budget to them; refused unless that
    run had the same suite and test set (its seed may differ: logged)."""
    path = Path(run_dir) / "config.json"
    try:
        config = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"--match-tokens: {path} does not exist; name a run directory") from None
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ConfigError(f"--match-tokens: cannot read {path} ({exc})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"--match-tokens: {path} is not a run's config")
    if config.get("suite") != suite:
        raise ConfigError(
            f"--match-tokens: the run in {run_dir} was on the {config.get('suite')!r} suite, "
            f"not {suite!r}; match a run on the same test set"
        )
    if config.get("items_sha256") != items_sha256(items):
        raise ConfigError(
            f"--match-tokens: the run in {run_dir} had another test set ({config.get('items')} "
            f"questions, a different checksum; this run has {len(items)}); match a run on the "
            "same test set (same --data, --limit, --per-task)"
        )
    theirs = (
        config.get("config", {}).get("seed") if isinstance(config.get("config"), dict) else None
    )
    if theirs != seed:
        logging.getLogger("ttc").warning(
            "--match-tokens: the run in %s used seed %s, this run seed %s",
            run_dir,
            theirs,
            seed,
        )
    return output_tokens_of(run_dir)


def output_tokens_of(run_dir: Path) -> int:
    """The output tokens another run produced (its summary.json), to match a budget to them."""
    path = Path(run_dir) / "summary.json"
    try:
        summary = orjson.loads(path.read_bytes())
        tokens = int(summary["output_tokens"])
    except FileNotFoundError:
        raise ConfigError(f"--match-tokens: {path} does not exist; name a run directory") from None
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"--match-tokens: cannot read output_tokens from {path} ({exc})"
        ) from None
    if not summary.get("complete", False):
        logging.getLogger("ttc").warning(
            "--match-tokens: the run in %s did not complete; matching its %s output tokens so far",
            run_dir,
            f"{tokens:,}",
        )
    return tokens
