"""A suite whose judge reports on the process it runs in, for the Ray verifier tests: it lives in
a module of its own because Ray's workers import it (the tests put this folder on their path).

A response is a command: `where` (the worker's pid, whether it judges in its main thread, and the
sandbox's protections there), `alarm` (whether `signal.alarm` interrupts a judge), `timeouts`
(whether math-verify's timeouts are on), `kernel:PROGRAM` (a program run in the sandbox with the
audit guard off: the kernel's layers alone), `slow:S` (S seconds, then the reference's score),
`die` (the worker exits), `raise` (a bug in the judge); a response holding a fenced program is
judged by LiveCodeBench on the item's tests; anything else scores 1 iff it is the reference.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from fakes import FakeSuite

from ttc.adapters import LiveCodeBenchSuite
from ttc.adapters.sandbox import RunOptions, SandboxUnavailable, protections, run_python
from ttc.engine import Item, Verdict

FIXTURE = Path(__file__).resolve().parent / "data" / "lcb_fixture.jsonl"
PREPARED = "probe suite prepared"


class _Alarm(Exception):
    pass


def _ring(signum: int, frame: FrameType | None) -> None:
    raise _Alarm


def _alarm() -> str:
    previous = signal.signal(signal.SIGALRM, _ring)
    signal.alarm(1)
    try:
        time.sleep(5)
        return "no alarm"
    except _Alarm:
        return "alarm fired"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class ProbeSuite(FakeSuite):
    """See the module docstring."""

    name: str = "probe"
    lcb: LiveCodeBenchSuite = field(default_factory=lambda: LiveCodeBenchSuite(FIXTURE, None, None))

    def prepare(self) -> None:
        self.lcb.prepare()
        logging.getLogger("ttc").warning(PREPARED)

    def judge(self, item: Item, response: str) -> Verdict:
        command, _, arg = response.partition(":")
        if "```" in response:
            return self.lcb.judge(item, response)
        if command == "where":
            main = threading.current_thread() is threading.main_thread()
            where = {"pid": os.getpid(), "main_thread": main, "protections": protections()}
            return Verdict(1.0, json.dumps(where))
        if command == "alarm":
            return Verdict(1.0, _alarm())
        if command == "timeouts":
            from ttc.adapters.suites._math import _timeouts

            return Verdict(1.0, str(_timeouts()))
        if command == "kernel":
            result = run_python(arg, "", RunOptions(timeout_s=10.0, audit_guard=False))
            return Verdict(1.0, result.stdout, result.stderr[-500:])
        if command == "slow":
            time.sleep(float(arg))
            return Verdict(float(item.reference == "1"), item.reference)
        if command == "die":
            os._exit(1)
        if command == "raise":
            raise ValueError("a bug in the judge")
        return Verdict(float(response == item.reference), response)


@dataclass
class NoSandboxSuite(FakeSuite):
    """A suite whose verifiers cannot be set up: as LiveCodeBench on a node where no sandboxed
    Python runs."""

    name: str = "no-sandbox"

    def prepare(self) -> None:
        raise SandboxUnavailable("sandbox: no Python >= 3.10 interpreter runs under the sandbox")
