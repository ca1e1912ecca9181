"""Why an attempt waited before it went out, for a host that traces attempts (`--otel`).

A limiter slot waits, in order, for a place under the concurrency cap, the gate (closed by a
server's retry-after or an exhausted quota), one request unit (the RPM pace, or the server's
request window once learnt from its headers) and its tokens (the TPM pace: the token debt of the
requests before it). A limiter asked to time its slots (`Limiter.timing`) measures each step and
leaves the slot's `Waited` in the attempt's context (`watch_wait`, set by the sender), where the
sender reads it when it tells its `AttemptHook` of the attempt; untimed (the default), a slot
measures nothing. A retry's backoff is the sender's, and it passes that on itself.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

from ttc.engine.contract._errors import ProviderError

__all__ = ["AttemptHook", "Waited", "last_wait", "note_wait", "watch_wait"]


@dataclass(frozen=True, slots=True)
class Waited:
    """One limiter slot: when it was asked for and granted (wall clock, ns since the epoch) and
    the seconds of that wait spent at each step."""

    asked_ns: int
    granted_ns: int
    concurrency_s: float
    gate_s: float
    window_s: float
    tokens_s: float

    def reason(self, backoff_s: float = 0.0) -> str | None:
        """The step that held the attempt longest ("concurrency", "gate", "window", "tokens" or
        "backoff"), or None if it did not wait."""
        steps = {
            "backoff": backoff_s,
            "concurrency": self.concurrency_s,
            "gate": self.gate_s,
            "window": self.window_s,
            "tokens": self.tokens_s,
        }
        name, seconds = max(steps.items(), key=lambda kv: kv[1])
        return name if seconds > 0 else None


# The wait of the attempt under way in this task: a box the sender sets before each attempt it
# traces (`watch_wait`) and the attempt's first granted slot fills. A box, not a value, because a
# hedged attempt takes its slot in a task of its own, which sees the same box.
_BOX: ContextVar[list[Waited | None] | None] = ContextVar("ttc_attempt_wait", default=None)


def watch_wait() -> None:
    """Starts an attempt's watch: the next slot this task (or a task it starts) is granted by a
    timing limiter is its wait."""
    _BOX.set([None])


def note_wait(waited: Waited) -> None:
    """A timing limiter's granted slot: the attempt's wait, unless a slot was granted first."""
    box = _BOX.get()
    if box is not None and box[0] is None:
        box[0] = waited


def last_wait() -> Waited | None:
    """The wait of the attempt this task watches (None: none watched, or not timed)."""
    box = _BOX.get()
    return None if box is None else box[0]


AttemptHook = Callable[[int, object, ProviderError | None, float], None]
"""Told of each attempt as it ends: its number, its result (None if it failed), its error, and
the backoff it waited before it (its wait for the limiter is `last_wait()`)."""
