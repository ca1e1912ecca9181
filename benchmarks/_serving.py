"""Shared by the HTTP benchmarks: `ttc serve` in its own process, and its /stats."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from types import TracebackType
from typing import Any

import orjson


class ServeProcess:
    """`ttc serve --port 0 FLAGS...` in a subprocess (its own core); `url` once it listens."""

    def __init__(self, *flags: str) -> None:
        self.flags = flags
        self.url = ""
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> ServeProcess:
        command = [
            sys.executable,
            "-m",
            "ttc.engine.cli",
            "serve",
            "--port",
            "0",
            *self.flags,
        ]
        proc = self._proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if found:
                self.url = found.group(1)
                return self
        raise RuntimeError("ttc serve did not start:\n" + "".join(seen))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        proc = self._proc
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()

    def stats(self) -> Any:
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as response:
            return orjson.loads(response.read())

    def reset_stats(self) -> None:
        request = urllib.request.Request(self.url + "/stats/reset", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass
