"""`ttc ctl DIR status|pause|resume|set`: steering a running `ttc run` or `ttc batch` through a
unix socket beside its files, served on the run's own loop.

Where: `DIR/control.sock` in a run directory; `OUT.ctl` beside `ttc batch`'s `--out OUT`. Who:
the socket is made owner-only (0600) at once, the server answers only a peer of its own user
(SO_PEERCRED, where the platform has it) and serves nothing from a directory that others may
write in (they could put their own socket in its place); the client connects only to a socket of
its own user. A unix socket's path is at most about 107 bytes (sun_path): a longer one is reached
through a symlink to its directory in a private (0700) temporary directory, on both sides.

One request a connection, one JSON line each way: `{"action": "set", "rpm": 600}` in, `{"ok":
true, "status": {...}}` out (every action answers with the status after it). `pause` holds every
new request at the limiter's gate (those in flight finish); `resume` lets them go on; `set`
changes the RPM, TPM or concurrency in force. `ttc run` journals each change (`control` events:
the timeline marks them, and a resumed run replays its `set`s), as `ttc batch` does in its own
journal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket
import stat
import struct
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson

from ttc.engine.cli._usage import positive_float, positive_int
from ttc.engine.contract import ConfigError
from ttc.engine.journal._events import STEERS, LimitsSteered, replay_steered, steer
from ttc.engine.send._limiter import Limiter

log = logging.getLogger("ttc")

SOCKET = "control.sock"
MAX_SUN_PATH = 100  # bytes; Linux allows 107 (108 with the NUL), macOS 103
MAX_REQUEST = 4096  # bytes of one request line


def socket_path(target: Path) -> Path:
    """The control socket of a run directory, or of `ttc batch`'s output file."""
    if target.is_dir():
        return target / SOCKET
    return target.with_name(target.name + ".ctl")


@contextlib.contextmanager
def reachable(path: Path) -> Iterator[str]:
    """A path to `path` that fits a unix socket address: itself, or (too long) the same file
    through a symlink to its directory in a private temporary directory, removed afterwards."""
    if len(os.fsencode(path)) <= MAX_SUN_PATH:
        yield str(path)
        return
    private = tempfile.mkdtemp(prefix="ttc-ctl-")  # 0700: no one else may swap the link
    link = os.path.join(private, "d")
    os.symlink(path.parent.resolve(), link)
    try:
        yield os.path.join(link, path.name)
    finally:
        os.unlink(link)
        os.rmdir(private)


class Controller:
    """What `ttc ctl` steers: the limiter, how a change is applied (and journaled), and what the
    status says of the work (`progress`: done, total and the achieved rate)."""

    def __init__(
        self,
        limiter: Limiter,
        apply: Callable[[LimitsSteered], None],
        progress: Callable[[], dict[str, Any]],
    ) -> None:
        self.limiter = limiter
        self.apply = apply
        self.progress = progress

    def status(self) -> dict[str, Any]:
        """The limits in force, requests in flight, paused or not, and the progress."""
        lim = self.limiter
        return {
            "pid": os.getpid(),
            "rpm": lim.rpm,
            "tpm": lim.tpm,
            "concurrency": lim.max_concurrency,
            "concurrency_cap": lim.concurrency_cap,
            "in_flight": lim.in_flight,
            "paused": lim.paused,
            "shared_limits": lim.shared is not None,
            **self.progress(),
        }

    def handle(self, request: Any) -> dict[str, Any]:
        """One request's answer."""
        if not isinstance(request, dict) or request.get("action") not in (*STEERS, "status"):
            return {"ok": False, "error": f"expected an action of {('status', *STEERS)}"}
        action = request["action"]
        if action != "status":
            try:
                change = LimitsSteered(
                    action,
                    _number(request.get("rpm"), float),
                    _number(request.get("tpm"), float),
                    _number(request.get("concurrency"), int),
                )
                if action == "set" and change.describe() == "set":
                    raise ConfigError("set: give --rpm, --tpm or --concurrency")
                self.apply(change)
            except (ConfigError, TypeError, ValueError) as exc:
                return {"ok": False, "error": str(exc)}
            log.info("ttc ctl: %s", change.describe())
        return {"ok": True, "status": self.status()}


def _number(value: Any, kind: type[float] | type[int]) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"expected a number > 0, got {value!r}")
    if kind is int and value != int(value):
        raise ValueError(f"expected an integer, got {value!r}")
    return kind(value)


def _others_may_write(directory: Path) -> bool:
    """Whether another user could put a file of theirs where the socket goes: a directory of
    someone else's (root's aside, as /tmp), or one they may write in without the sticky bit."""
    st = directory.stat()
    if st.st_uid not in (os.getuid(), 0):
        return True
    return bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)) and not st.st_mode & stat.S_ISVTX


def _peer_uid(sock: socket.socket | None) -> int | None:
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    return int(struct.unpack("3i", raw)[1])


def _bound(path: Path) -> socket.socket | None:
    """A socket bound at `path`, owner-only; None (and logged why) where it must not be."""
    try:
        unsafe = _others_may_write(path.parent)
    except OSError as exc:
        log.warning("ttc ctl: not served: %s", exc)
        return None
    if unsafe:
        log.warning("ttc ctl: not served: others may write in %s", path.parent)
        return None
    if path.is_socket():
        if _answers(path):
            log.warning("ttc ctl: not served: another process serves %s", path)
            return None
        try:
            path.unlink()  # left by a process that was killed
        except OSError as exc:  # another user's, in a sticky directory
            log.warning("ttc ctl: not served: %s", exc)
            return None
    with reachable(path) as where:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(where)
            os.chmod(where, 0o600)
        except OSError as exc:
            sock.close()
            log.warning("ttc ctl: not served: %s: %s", path, exc)
            return None
    return sock


@contextlib.asynccontextmanager
async def control_served(path: Path, controller: Controller) -> AsyncIterator[Path | None]:
    """Serves `controller` on the socket at `path` for the length of the block (None: not
    served, and logged why: a directory others may write in, or another process serving)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            uid = _peer_uid(writer.get_extra_info("socket"))
            if uid is not None and uid != os.getuid():
                return
            async with asyncio.timeout(10):
                line = await reader.readline()
            try:
                request = orjson.loads(line)
            except orjson.JSONDecodeError:
                request = None
            writer.write(orjson.dumps(controller.handle(request)) + b"\n")
            await writer.drain()
        except (OSError, TimeoutError, ValueError):
            pass  # a client that went away or said too much: nothing changed
        finally:
            writer.close()

    sock = _bound(path)
    if sock is None:
        yield None
        return
    server = await asyncio.start_unix_server(serve, sock=sock, limit=MAX_REQUEST)
    try:
        yield path
    finally:
        server.close()
        with contextlib.suppress(OSError):
            os.unlink(path)
        await server.wait_closed()


def _answers(path: Path) -> bool:
    with reachable(path) as where, socket.socket(socket.AF_UNIX) as probe:
        probe.settimeout(2)
        try:
            probe.connect(where)
        except OSError:
            return False
        return True


def ask(path: Path, request: dict[str, Any], timeout_s: float = 10.0) -> dict[str, Any]:
    """Sends one request to the socket at `path`; its answer (a ConfigError if none)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        raise ConfigError(f"ttc ctl: no control socket at {path}: is the run going?") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise ConfigError(f"ttc ctl: {path} is not a socket")
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ConfigError(f"ttc ctl: {path} is not owner-only of this user: not used")
    with reachable(path) as where, socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.connect(where)
            sock.sendall(orjson.dumps(request) + b"\n")
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                reply += chunk
        except OSError as exc:
            raise ConfigError(f"ttc ctl: {path}: no answer ({exc}): is the run going?") from None
    try:
        answer: dict[str, Any] = orjson.loads(reply)
    except orjson.JSONDecodeError:
        raise ConfigError(f"ttc ctl: {path}: no answer: is the run going?") from None
    return answer


def add_ctl_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `ttc ctl`."""
    parser.add_argument(
        "target",
        type=Path,
        metavar="DIR",
        help="the run directory (ttc run), or the --out file (ttc batch)",
    )
    parser.add_argument("action", choices=("status", *STEERS), help="what to do")
    parser.add_argument("--rpm", type=positive_float, help="set: requests per minute")
    parser.add_argument("--tpm", type=positive_float, help="set: tokens per minute")
    parser.add_argument("--concurrency", type=positive_int, help="set: requests in flight")
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    parser.add_argument("--quiet", "-q", action="store_true", help="no log lines")


async def cmd_ctl(args: argparse.Namespace) -> int:
    """`ttc ctl DIR ACTION`: 0 done, 2 refused (nothing running, or a bad change)."""
    given = {k: getattr(args, k) for k in ("rpm", "tpm", "concurrency")}
    given = {k: v for k, v in given.items() if v is not None}
    if given and args.action != "set":
        raise ConfigError(f"ttc ctl {args.action}: --rpm, --tpm and --concurrency go with set")
    if args.action == "set" and not given:
        raise ConfigError("ttc ctl set: give --rpm, --tpm or --concurrency")
    request = {"action": args.action, **given}
    answer = await asyncio.to_thread(ask, socket_path(args.target), request)
    if not answer.get("ok"):
        raise ConfigError(f"ttc ctl {args.action}: {answer.get('error', 'refused')}")
    status = answer["status"]
    if args.json:
        sys.stdout.write(orjson.dumps(status).decode() + "\n")
    else:
        print(status_text(args.target, status))
    return 0


def status_text(target: Path, s: dict[str, Any]) -> str:
    """The status, as `ttc ctl status` prints it."""

    def limit(value: Any) -> str:
        return "unlimited" if value is None else f"{value:g}"

    shared = " (shared through Redis)" if s.get("shared_limits") else ""
    done = f"{s.get('done', 0):,}/{s.get('total', 0):,}"
    where = f" in round {s['round']}/{s['rounds']}" if s.get("round") else ""
    return "\n".join(
        [
            f"{target}: {'PAUSED' if s['paused'] else 'running'} (pid {s['pid']})",
            f"  limits: rpm {limit(s['rpm'])}, tpm {limit(s['tpm'])}{shared}, concurrency "
            f"{s['concurrency']} (adaptive cap {s['concurrency_cap']})",
            f"  rate: {s.get('per_minute', 0.0):.0f} requests/min; in flight: {s['in_flight']}",
            f"  done: {done}{where}",
        ]
    )


class _Appends(Protocol):
    def append(self, event: LimitsSteered) -> int: ...


class BatchSteering:
    """`ttc batch`'s side: a change goes to the limiter and, while it is open, to the batch's
    journal, from which a resumed batch replays its `set`s (`opened`)."""

    def __init__(self, limiter: Limiter) -> None:
        self.limiter = limiter
        self.journal: _Appends | None = None

    def opened(self, journal: _Appends | None, steered: Sequence[LimitsSteered] = ()) -> None:
        """The journal is open (`steered`: the changes it holds) or, None, closed."""
        self.journal = journal
        replayed = replay_steered(self.limiter, steered)
        if replayed is not None:
            log.info("limits as `ttc ctl set` left them: %s", replayed.describe())

    def apply(self, change: LimitsSteered) -> None:
        """Applies `change`, and journals it."""
        steer(self.limiter, change)
        if self.journal is not None:
            self.journal.append(change)
