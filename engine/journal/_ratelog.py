"""The send path's state over a run: the limiter sampled every second while rounds run, as
`LimiterSampled` events in the journal (each line with its wall-clock time), from which
`ttc report --timeline` draws requests in flight against the adaptive cap, and the limits in
force (configured, or learned from the provider's headers) over the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ttc.engine.journal._events import Event, LimiterSampled
from ttc.engine.send._limiter import Limiter

# Seconds between samples: a ten-hour run writes 36,000 short lines (about 3 MB).
EVERY_S = 1.0


async def sample_limiter(
    limiter: Limiter, emit: Callable[[Event], None], every_s: float = EVERY_S
) -> None:
    """Emits the limiter's state now and every `every_s` seconds, until cancelled."""
    while True:
        emit(LimiterSampled(limiter.in_flight, limiter.concurrency_cap, limiter.rpm, limiter.tpm))
        await asyncio.sleep(every_s)
