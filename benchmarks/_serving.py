"""Shared by the HTTP benchmarks: `ttc serve` in its own process, and its /stats; a
`redis-server` of their own for shared limits."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
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
            _stop(proc)
            if proc.stdout is not None:
                proc.stdout.close()

    def stats(self) -> Any:
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as response:
            return orjson.loads(response.read())

    def reset_stats(self) -> None:
        request = urllib.request.Request(self.url + "/stats/reset", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass


class RedisProcess:
    """A `redis-server` of its own: a free port, a private directory, nothing saved; `url` once it
    answers. For `--shared-limits` (the tests and `quota_saturation.py --clients N`)."""

    def __init__(self, binary: str = "redis-server") -> None:
        self.binary = binary
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> RedisProcess:
        path = shutil.which(self.binary)
        if path is None:
            raise RuntimeError(
                f"{self.binary} is not installed (`make test` installs it: apt-get install "
                "redis-server)"
            )
        self._dir = tempfile.TemporaryDirectory(prefix="ttc-redis-")
        with socket.socket() as probe:  # a free port (the server binds it just after)
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        flags = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        flags += ["--dir", self._dir.name, "--daemonize", "no", "--logfile", ""]
        self._proc = subprocess.Popen(
            [path, *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"redis-server exited {self._proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)
        self.__exit__(None, None, None)
        raise RuntimeError("redis-server did not answer within 30 s")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._proc is not None:
            _stop(self._proc)
        if self._dir is not None:
            self._dir.cleanup()


def _stop(proc: subprocess.Popen[Any]) -> None:
    """Ends a server process: asked first, killed after 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
