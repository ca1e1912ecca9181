"""What a run says of itself: config.json's description, the resume checks (a journal to go on
from, the same experiment), and summary.json's parts beyond the per-round totals (the models, the
role models' calls and cost).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import stat
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from ttc.engine._util._offloop import in_thread
from ttc.engine._util._records import read_json, unreadable
from ttc.engine._util._secrets import redact_argv, redact_url
from ttc.engine.contract._config import FLAGS, OPERATIONAL, PRESETS, RunConfig
from ttc.engine.contract._errors import ConfigError, DataError
from ttc.engine.contract._state import RunState
from ttc.engine.contract._types import Item, Provider, Suite, Usage
from ttc.engine.journal._journal import Replay, Replays, SampleKey
from ttc.engine.journal._lock import LOCK_NAME, RunLock
from ttc.engine.journal._logs import run_logging
from ttc.engine.journal._rundir import RunDir, items_sha256
from ttc.engine.run._budget import Pricing, StopReason
from ttc.engine.strategy._strategy import Strategy
from ttc.retrieval import index_spec

log = logging.getLogger("ttc")

SIM_NOTE = (
    "simulated: these numbers come from the offline sim provider; they measure the engine's "
    "machinery, not the method"
)


def describe_roles(roles: Mapping[str, Provider]) -> dict[str, dict[str, str]]:
    """The role models as config.json and summary.json name them."""
    return {role: {"provider": p.name, "model": p.model} for role, p in sorted(roles.items())}


@dataclasses.dataclass(frozen=True, slots=True)
class RunParts:
    """What a run is made of, as config.json and summary.json describe it."""

    config: RunConfig
    strategy: Strategy
    provider: Provider
    suite: Suite
    roles: Mapping[str, Provider]
    invocation: dict[str, Any] | None = None

    def describe(self, items: Sequence[Item]) -> dict[str, Any]:
        """config.json: everything a resumed run must match, and how the run was asked for."""
        from ttc import __version__

        endpoint = self.provider.endpoint
        return {
            "config": self.config.to_dict(),
            "strategy": self.strategy.describe(),
            "roles": describe_roles(self.roles) or None,
            "provider": self.provider.name,
            "model": self.provider.model,
            # Where the provider sends (None for in-process ones): a rehearsal server and the
            # vendor answer the same model name differently. Never with its credentials.
            "endpoint": None if endpoint is None else redact_url(endpoint),
            "suite": self.suite.name,
            "items": len(items),
            "items_sha256": items_sha256(items),
            # The index --index chose (by size, for auto) and its parameters: approximate search
            # may change the neighbours, so a resumed run must use the same.
            "index": index_spec(self.config.index, len(items)).describe(),
            "invocation": _without_credentials(self.invocation),
            "ttc_version": __version__,
        }

    def check_prices(self, pricing: Pricing) -> None:
        """--max-cost needs the policy's price: refused before anything is written."""
        if self.config.max_cost_usd is not None and pricing.price is None:
            raise ConfigError(
                f"--max-cost: no price is known for model {self.provider.model!r}; give --price"
            )

    def warn_prices(self, pricing: Pricing) -> None:
        """A role model without a price is left out of --max-cost: said once, in run.log."""
        if self.config.max_cost_usd is None:
            return
        for role, price in sorted(pricing.roles.items()):
            if price is None:
                log.warning(
                    "--max-cost: no price is known for the %s model %r; its calls do "
                    "not count towards the budget",
                    role,
                    self.roles[role].model,
                )

    def summary_extra(
        self,
        roles: dict[str, dict[str, Any]],
        pricing: Pricing,
        role_cost: float | None,
        stopped: StopReason | None,
        state: RunState,
        hedged: int = 0,
    ) -> dict[str, Any]:
        """summary.json's fields besides the totals (`roles`: see `role_stats`). `simulated`:
        whether any answer came from the offline simulator, however it reached the run;
        `this_session`: the samples this process sent, those it replayed from the journal, and
        the second copies it sent of stragglers at the ends of rounds (`hedged`: a copy that
        lost the race was cut off, but a provider may bill what it had generated); the rest of
        the summary is the same whether the run was resumed or not."""
        price = pricing.price
        extra: dict[str, Any] = {
            "provider": self.provider.name,
            "model": self.provider.model,
            "suite": self.suite.name,
            "method": self.config.method,
            "judgement": self.strategy.judgement.name,
            "roles": roles,
            # The run's `cost_usd` is the policy model's; the role models' is apart, and the
            # total is both (None when a part has no known price).
            "role_cost_usd": role_cost,
            "rounds_planned": self.config.rounds,
            "stopped": None if stopped is None else stopped.message,
            "price_per_million": None if price is None else dataclasses.asdict(price),
            "this_session": {
                "sent": sum(stats.sent for stats in state.rounds),
                "replayed": sum(stats.replayed for stats in state.rounds),
                "hedged_copies": hedged,
            },
        }
        if self.suite.judging:
            extra["judging"] = dict(self.suite.judging)
        if state.simulated:
            extra["simulated"] = True
            extra["note"] = SIM_NOTE
        return extra


def _without_credentials(invocation: dict[str, Any] | None) -> dict[str, Any] | None:
    """The invocation with every URL credential of its command line redacted."""
    if invocation is None or not isinstance(invocation.get("argv"), list):
        return invocation
    return {**invocation, "argv": redact_argv([str(a) for a in invocation["argv"]])}


def judge_stats(state: RunState, retries: int) -> dict[str, Any]:
    """The reward model's calls over a run: calls, unparsed replies, errors, retries, tokens."""
    u = state.judge_usage()
    return {
        "calls": sum(s.judge_calls for s in state.rounds),
        "unparsed": sum(s.judge_unparsed for s in state.rounds),
        "errors": sum(s.judge_errors for s in state.rounds),
        "retries": retries,
        **usage_fields(u),
    }


def usage_fields(u: Usage) -> dict[str, int]:
    """A usage as summary.json's role entries write it."""
    return {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "thinking_tokens": u.thinking_tokens,
    }


def role_stats(
    described: Mapping[str, dict[str, str]],
    calls: Mapping[str, dict[str, Any]],
    costs: Mapping[str, float | None],
    pricing: Pricing,
) -> dict[str, Any]:
    """What each role model did: its name, its calls and tokens (`calls`), its cost and price."""
    roles: dict[str, Any] = {}
    for role, entry in calls.items():
        price = pricing.roles.get(role)
        roles[role] = {
            **described.get(role, {}),
            **entry,
            "cost_usd": costs.get(role),
            "price_per_million": None if price is None else dataclasses.asdict(price),
        }
    return roles


# The sampling settings' flags, so that a resumed run's mismatch names one of them.
_SAMPLING_FLAGS = {
    "temperature": "--temperature",
    "top_p": "--top-p",
    "top_k": "--top-k",
    "max_output_tokens": "--max-tokens",
    "thinking_budget": "--thinking-budget",
    "reasoning_effort": "--reasoning-effort",
    "verbosity": "--verbosity",
}


def _compared(config: dict[str, Any]) -> dict[str, Any]:
    """A stored config as a resume compares it: the judge in effect (None is the method's own,
    so `--judge truth` resumes a run made without --judge) and each sampling setting alone."""
    flat = {k: v for k, v in config.items() if k != "sampling"}
    if flat.get("judge") is None and flat.get("method") in PRESETS:
        flat["judge"] = RunConfig(method=flat["method"]).judgement
    sampling = config.get("sampling")
    for key, value in (sampling if isinstance(sampling, dict) else {}).items():
        flat[f"sampling.{key}"] = value
    return flat


def check_same_run(before: dict[str, Any], now: dict[str, Any], out: Path | None) -> None:
    """A resumed run must be the same experiment; limits and timeouts may change."""
    # A key the old config lacks was written before the setting existed: its default.
    defaults = _compared(RunConfig().to_dict())
    old_cfg, new_cfg = _compared(before.get("config", {})), _compared(now["config"])
    for key in sorted(set(old_cfg) | set(new_cfg)):
        old, new = old_cfg.get(key, defaults.get(key)), new_cfg.get(key)
        # --index is compared as the index it chose (below): `auto` and its choice are the same.
        if key not in OPERATIONAL and key != "index" and old != new:
            flag = FLAGS.get(key) or _SAMPLING_FLAGS.get(key.removeprefix("sampling."), key)
            raise ConfigError(
                f"{flag}: the run in {out} used {_said(old, flag)}, not {_said(new, flag)}; "
                "a resumed run must match"
            )
    # Runs made before the index was recorded searched exactly.
    flat = {"kind": "flat"}
    old_index, new_index = before.get("index", flat), now.get("index", flat)
    if old_index != new_index:
        raise ConfigError(
            f"--index: the run in {out} searched its neighbours with {old_index}, not "
            f"{new_index}; a resumed run must match (approximate search changes neighbours)"
        )
    _check_same_setup(before, now, out)


def _said(value: Any, flag: str) -> str:
    """A setting as a mismatch quotes it: None (not given) as `no FLAG`."""
    return f"no {flag}" if value is None else repr(value)


# How a resume's mismatch names each part of a run's set-up.
_SETUP_NAMES = {
    "suite": "the suite",
    "items": "a different number of questions:",
    "items_sha256": "different questions (their checksum):",
    "provider": "the provider",
    "model": "the model",
    "strategy": "the strategy",
    "roles": "the role models",
}


def _check_same_setup(before: dict[str, Any], now: dict[str, Any], out: Path | None) -> None:
    """The same test set, models and strategy, sent to the same endpoint."""
    for key in ("suite", "items", "items_sha256", "provider", "model", "strategy", "roles"):
        if before.get(key) != now.get(key):
            raise ConfigError(
                f"--resume: the run in {out} had {_SETUP_NAMES.get(key, key)} "
                f"{before.get(key)!r}, now {now.get(key)!r}"
            )
    # Runs made before endpoints were recorded have none: nothing to compare. Those made before
    # credentials were redacted may hold them: compared, and quoted, without.
    old_end, new_end = _shown(before.get("endpoint")), _shown(now["endpoint"])
    if "endpoint" in before and old_end != new_end:
        raise ConfigError(
            f"--base-url: the run in {out} was sent to "
            f"{old_end!r}, not {new_end!r}; a resumed run must match"
        )


def _shown(endpoint: Any) -> Any:
    """An endpoint as it may be quoted: without the credentials of its URL."""
    return redact_url(endpoint) if isinstance(endpoint, str) else endpoint


def run_begun(out_dir: Path | str) -> bool:
    """Whether `out_dir` holds a run that was begun (its config.json or its journal): a caller
    that goes on with a run if there is one, and starts it if not, passes this as `resume`."""
    rundir = RunDir(Path(out_dir))
    return rundir.config_path.exists() or rundir.journal_path.exists()


def require_journal(rundir: RunDir) -> None:
    """A resume goes on from the journal: with none, or an empty one, it would buy every sample
    again, so it is refused instead."""
    path = rundir.journal_path
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ConfigError(f"nothing to resume: {path} is missing") from None
    except OSError as exc:
        raise unreadable(path, exc) from None
    if stat.S_ISDIR(info.st_mode):
        raise DataError(f"{path}: is a directory, not a file")
    if info.st_size == 0:
        raise ConfigError(f"nothing to resume: {path} is empty")


async def open_rundir(
    stack: contextlib.AsyncExitStack, rundir: RunDir, description: dict[str, Any], *, resume: bool
) -> MutableMapping[SampleKey, Replay]:
    """Checks the run directory (what can be refused is refused before anything is written),
    takes its lock, writes config.json and opens run.log, each undone by `stack`; returns the
    journal's samples on resume. The files are read and written in a thread: parsing a large
    journal takes seconds, and the host's loop goes on meanwhile."""
    await in_thread(check_rundir, rundir, description, resume=resume)
    # One writer per run directory, before anything is written to it; the lock names its
    # holder once the journal has been read (a corrupt one is refused touching nothing).
    lock = RunLock.of_dir(rundir.path).acquire(announce=False)
    stack.callback(lock.release)
    done = await in_thread(prepare_rundir, rundir, description, resume=resume)
    lock.announce()
    stack.enter_context(run_logging(rundir))
    return done


def check_rundir(rundir: RunDir, description: dict[str, Any], *, resume: bool) -> None:
    """What can be refused before anything is written, the lock included: an --out that is a
    file, a resume with no journal to go on from, a config.json that cannot be read, or
    another experiment's."""
    if rundir.path.exists() and not rundir.path.is_dir():
        raise ConfigError(f"--out: {rundir.path} exists and is not a directory")
    if not resume:
        require_made_by_ttc(rundir)
        return
    require_journal(rundir)
    if rundir.config_path.exists():
        before = read_json(rundir.config_path)
        if not isinstance(before.get("config", {}), dict):
            raise DataError(f"{rundir.config_path}: field 'config': expected a JSON object")
        check_same_run(before, description, rundir.path)


def require_made_by_ttc(rundir: RunDir) -> None:
    """A run starts in a new or empty directory, or in one ttc made (its config.json, written
    first): a directory someone else filled may hold links planted where the run writes, or
    files the run would mix with its own."""
    path = rundir.path
    if not path.is_dir() or rundir.config_path.exists() or rundir.journal_path.exists():
        return
    # The lock, and the temporary file of a first write that a kill cut short, are ttc's.
    foreign = sorted(
        p.name
        for p in path.iterdir()
        if p.name != LOCK_NAME and not (p.name.startswith(".") and p.name.endswith(".tmp"))
    )
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise ConfigError(
            f"--out: {path} is not empty ({shown}) and holds no ttc run (no config.json); "
            "pick a new or empty directory"
        )


def prepare_rundir(
    rundir: RunDir, description: dict[str, Any], *, resume: bool
) -> MutableMapping[SampleKey, Replay]:
    """Under the run's lock, after `check_rundir`: returns the journal's samples on resume (a
    DataError naming the line of a corrupt one, before anything is written) and writes
    config.json when the directory has none yet."""
    if not resume:
        if rundir.journal_path.exists():
            raise ConfigError(
                f"--out: {rundir.path} already holds a run; "
                "resume it (--resume) or pick a new directory"
            )
        rundir.write_config(description)
        return {}
    done = Replays.read(rundir.journal_path)
    # A journal with no config.json: the warm-up another method shared (`ttc compare`).
    if not rundir.config_path.exists():
        rundir.write_config(description)
    return done
