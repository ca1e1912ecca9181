"""`ttc serve`'s settings: `ServeOptions`, its command-line flags, and their checks.

Each option is the flag `--option-name`; a bad value is a ConfigError naming the flag.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, fields

from ttc.engine import ConfigError

__all__ = [
    "FAULTS",
    "LIMIT_KINDS",
    "RESET_MEANINGS",
    "ServeOptions",
    "add_serve_arguments",
    "options_from_args",
    "per_window",
]

FAULTS: tuple[str, ...] = ("500", "503", "reset", "truncated", "hang", "empty", "stall")
"""The injectable faults, as named by their `--fault-*` flags and in `/stats`."""

_INTEGERS = ("port", "seed", "rpm", "tpm", "max_concurrency")

LIMIT_KINDS: tuple[str, ...] = ("sliding", "fixed", "bucket")
"""How `--rpm` and `--tpm` are counted (`_admission`): a sliding window of `--window` seconds, a
fixed window restarting every `--window` seconds, or a token bucket of a window's worth that
refills continuously (OpenAI's description of its own limits)."""

RESET_MEANINGS: tuple[str, ...] = ("newest", "oldest")
"""What `x-ratelimit-reset-*` announces: the time until the limit is back to full (the newest
entry leaves; the bucket is full), or until one more unit is back (the oldest entry leaves;
the bucket has refilled one unit). A fixed window's reset is its end either way."""

_CHOICES: dict[str, tuple[str, ...]] = {"limit_kind": LIMIT_KINDS, "reset_means": RESET_MEANINGS}


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """The server's settings; each field is the flag `--field-name` (see `add_serve_arguments`)."""

    port: int = 8000
    rpm: int | None = None
    tpm: int | None = None
    max_concurrency: int | None = None
    window: float = 60.0
    limit_kind: str = "sliding"
    reset_means: str = "newest"
    latency: float = 0.0
    latency_sigma: float = 0.8
    fault_500: float = 0.0
    fault_503: float = 0.0
    fault_reset: float = 0.0
    fault_truncated: float = 0.0
    fault_hang: float = 0.0
    fault_empty: float = 0.0
    fault_stall: float = 0.0
    hang_s: float = 3600.0
    seed: int = 0
    sim_ability: float = 0.0
    sim_thinking: float = 0.0
    batch_delay: float = 3.0
    batch_fail: float = 0.0
    batch_expire: float = 0.0
    max_body_mb: float = 256.0

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_type(f.name, getattr(self, f.name))
        self._check_limits()
        for kind in FAULTS:
            p = self.fault(kind)
            if not 0 <= p <= 1:
                raise ConfigError(f"--fault-{kind}: must be a probability in [0, 1], got {p}")
        for name in ("batch_fail", "batch_expire"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"{_flag(name)}: must be a probability in [0, 1]")
        total = sum(self.fault(kind) for kind in FAULTS)
        if total > 1 + 1e-9:
            raise ConfigError(f"--fault-*: the fault probabilities sum to {total:g}; must be <= 1")

    def _check_limits(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port: must be in [0, 65535] (0: any free port), got {self.port}")
        for name in ("rpm", "tpm", "max_concurrency", "window", "hang_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{_flag(name)}: must be > 0, got {value}")
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and per_window(value, self.window) < 1:
                raise ConfigError(
                    f"{_flag(name)}: {value} per minute is less than one per --window of "
                    f"{self.window:g} s"
                )
        for name in ("latency", "latency_sigma", "sim_thinking", "batch_delay"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{_flag(name)}: must be >= 0, got {getattr(self, name)}")
        if self.max_body_mb <= 0:
            raise ConfigError(f"--max-body-mb: must be > 0, got {self.max_body_mb}")

    def fault(self, kind: str) -> float:
        """The probability of fault `kind` (one of FAULTS)."""
        value: float = getattr(self, "fault_" + kind)
        return value


_HELP = {
    "port": "port on 127.0.0.1 (0: pick a free one)",
    "rpm": "requests per minute, enforced over each --window",
    "tpm": "tokens per minute: requests are admitted while the window holds fewer",
    "max_concurrency": "requests in flight",
    "window": "the rate-limit window in seconds; it admits window/60 of --rpm and --tpm",
    "limit_kind": "how the limits are counted: a sliding window, a fixed window restarting "
    "every --window, or a token bucket of a window's worth refilling continuously",
    "reset_means": "what x-ratelimit-reset-* announces: the time until the limit is back to "
    "full (newest) or until one more unit is back (oldest)",
    "latency": "median latency in seconds (lognormal; 0: answer at once)",
    "latency_sigma": "log-scale sigma of the latency (a heavier tail when larger)",
    "fault_500": "probability of a 500 error",
    "fault_503": "probability of a 503 error",
    "fault_reset": "probability of closing the connection mid-body",
    "fault_truncated": "probability of a 200 with truncated JSON",
    "fault_hang": "probability of never answering (until the client leaves or --hang-s)",
    "fault_empty": "probability of a 200 with no choices / candidates",
    "fault_stall": "probability of an answer (streamed or whole) that stops halfway and holds "
    "the connection open (until the client leaves or --hang-s)",
    "hang_s": "how long a hanging request waits before the connection is dropped",
    "seed": "seed of the simulator, the faults and the latencies",
    "sim_ability": "the simulator's ability (logit offset; higher solves more)",
    "sim_thinking": "thinking tokens reported per output token",
    "batch_delay": "seconds from a batch's creation until it completes (Batch APIs)",
    "batch_fail": "probability that a request fails inside a batch",
    "batch_expire": "probability that a batch expires with part of its work done",
    "max_body_mb": "the largest request body or upload in MB (10^6 bytes; larger: 413)",
}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _check_type(name: str, value: object) -> None:
    """ConfigError naming the flag unless `value` is of the kind the option `name` takes."""
    if name in _CHOICES:
        if value not in _CHOICES[name]:
            raise ConfigError(
                f"{_flag(name)}: must be one of {', '.join(_CHOICES[name])}, got {value!r}"
            )
    elif name in _INTEGERS:
        ok = value is None and name not in ("port", "seed")
        if not ok and (not isinstance(value, int) or isinstance(value, bool)):
            raise ConfigError(f"{_flag(name)}: must be an integer, got {value!r}")
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{_flag(name)}: must be a number, got {value!r}")
    elif not math.isfinite(value):
        raise ConfigError(f"{_flag(name)}: must be finite, got {value!r}")


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the server's flags: --port, --rpm, --tpm, --max-concurrency, --window, --limit-kind,
    --reset-means, --latency,
    --latency-sigma, --fault-{500,503,reset,truncated,hang,empty,stall}, --hang-s, --seed,
    --sim-ability, --sim-thinking. Values are checked by `ServeOptions` (ConfigError naming the
    flag); the suite flags (--suite, --data, --limit...) are the caller's."""
    group = parser.add_argument_group("server")
    defaults = ServeOptions()
    for f in fields(ServeOptions):
        default = getattr(defaults, f.name)
        if f.name in _CHOICES:
            group.add_argument(
                _flag(f.name),
                dest=f.name,
                choices=_CHOICES[f.name],
                default=default,
                help=f"{_HELP[f.name]} (default: {default})",
            )
            continue
        kind: type = int if f.name in _INTEGERS else float
        shown = "unlimited" if default is None else f"{default:g}"
        group.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            type=kind,
            default=default,
            help=f"{_HELP[f.name]} (default: {shown})",
        )


def options_from_args(args: argparse.Namespace) -> ServeOptions:
    """The `ServeOptions` of parsed arguments (ConfigError naming the flag of a bad value)."""
    return ServeOptions(**{f.name: getattr(args, f.name) for f in fields(ServeOptions)})


def per_window(per_minute: int, window: float) -> int:
    """What a window of `window` seconds admits of a per-minute limit."""
    return math.floor(per_minute * window / 60 + 1e-9)
