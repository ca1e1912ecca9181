"""Worker processes the event loop talks to over pipes, with no thread in the parent.

`Workers(n, setup, args, handle)` starts `n` processes (multiprocessing's `spawn`: no loop, no
sockets, no threads inherited), each running `setup(*args)` and then `handle(request)` for one
request at a time; `await workers.call(request)` is `handle(request)`'s result (or what it
raised) from the first worker free. Each worker has one socket pair; the parent's end is read and
written by the event loop itself (`add_reader`, `add_writer`, non-blocking), in frames of a
length and a pickle.

Why not `ProcessPoolExecutor`: it feeds its processes through two threads of the parent (a
manager and a queue feeder) that take the GIL from the event loop for every batch, and its
round trips cost the engine some 5% of its CPU per request at full speed; here a round trip is
two pickles and two system calls on the loop.

A worker that exits (killed, out of memory, or before its set-up finished) breaks the whole
set, as a process pool breaks: every call waiting on it fails with `WorkersBroken`, and so does
every later call; the owner starts a new set. `close` ends the pipes (a worker exits on their
end) and `join` reaps the processes, killing any that have not exited within a few seconds.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import multiprocessing
import os
import pickle
import struct
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

__all__ = ["Workers", "WorkersBroken"]

_LENGTH = struct.Struct(">Q")
_READ = 1 << 20
# How long `join` waits for workers to exit once their pipes are closed, before it kills them.
_JOIN_S = 5.0


class WorkersBroken(RuntimeError):
    """A worker process exited: this set of workers can answer no more calls."""


def _serve(
    conn: Connection,
    setup: Callable[..., None],
    args: tuple[Any, ...],
    handle: Callable[[Any], Any],
) -> None:
    """A worker's main: `setup(*args)`, a frame saying it is ready, then a reply frame for each
    request frame, `(True, result)` or `(False, exception)`, until the parent closes its end."""
    fd = conn.fileno()
    setup(*args)
    try:
        _send(fd, pickle.dumps(True))
        while (frame := _receive(fd)) is not None:
            try:
                reply: tuple[bool, Any] = (True, handle(pickle.loads(frame)))
            except Exception as exc:
                reply = (False, exc)
            try:
                data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # an unpicklable result or error: said, not a dead worker
                failed = RuntimeError(f"a worker's reply cannot be sent: {exc!r}")
                data = pickle.dumps((False, failed))
            _send(fd, data)
    except (BrokenPipeError, ConnectionResetError):
        return  # the parent closed its end (a run that stopped early): quietly, as at its end


def _send(fd: int, payload: bytes) -> None:
    view = memoryview(_LENGTH.pack(len(payload)) + payload)
    while view:  # os.write may write less than asked
        view = view[os.write(fd, view) :]


def _receive(fd: int) -> bytes | None:
    """One frame's payload, read whole (blocking: a worker has nothing else to do); None once
    the parent has closed its end."""
    head = _exactly(fd, _LENGTH.size)
    return None if head is None else _exactly(fd, _LENGTH.unpack(head)[0])


def _exactly(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, _READ))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class _Worker:
    """One process and the parent's end of its pipe."""

    __slots__ = ("conn", "fd", "inbox", "outbox", "process", "ready", "reply", "up")

    def __init__(self, process: BaseProcess, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.fd = conn.fileno()  # -1 once closed: never unwatched again (the number is reused)
        self.inbox = bytearray()
        self.outbox = bytearray()
        self.up = False  # its set-up is done: every frame from now on is a reply
        self.ready: asyncio.Future[None] | None = None  # made in each loop bound until `up`
        self.reply: asyncio.Future[Any] | None = None  # the call it is answering


class Workers:
    """`n` worker processes, started at once; calls queue for the first worker free."""

    def __init__(
        self,
        n: int,
        setup: Callable[..., None],
        args: tuple[Any, ...],
        handle: Callable[[Any], Any],
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._workers: list[_Worker] = []
        for _ in range(max(1, n)):
            mine, theirs = ctx.Pipe(duplex=True)
            process = ctx.Process(target=_serve, args=(theirs, setup, args, handle), daemon=True)
            process.start()
            theirs.close()  # the child has its own copy; ours would hide its exit
            os.set_blocking(mine.fileno(), False)
            self._workers.append(_Worker(process, mine))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: collections.deque[_Worker] = collections.deque()
        self._queue: collections.deque[tuple[bytes, asyncio.Future[Any]]] = collections.deque()
        self._broken: str | None = None
        self._closed = False
        self._set_up = 0  # workers that have said they are ready

    @property
    def started(self) -> bool:
        """Whether every worker has run its set-up (a set broken since still says so)."""
        return self._set_up == len(self._workers)

    async def ready(self) -> None:
        """Waits until every worker has run its set-up; WorkersBroken if one exited first."""
        self._bind()
        # Shielded: a cancelled caller must not cancel the futures every caller shares. Only
        # those still setting up: one already up may hold a future of a loop that has ended.
        waits = [asyncio.shield(w.ready) for w in self._workers if not w.up and w.ready]
        await asyncio.gather(*waits)

    async def call(self, request: Any) -> Any:
        """`handle(request)` in the first worker free: its result, or what it raised."""
        self._bind()
        loop = self._loop
        assert loop is not None
        fut: asyncio.Future[Any] = loop.create_future()
        self._queue.append((pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL), fut))
        self._dispatch()
        return await fut

    def close(self) -> None:
        """Closes the pipes (each worker exits at their end); calls waiting are cancelled."""
        if self._closed:
            return
        self._closed = True
        for w in self._workers:
            self._unwatch(w)
            w.conn.close()
            w.fd = -1
            for fut in (w.ready, w.reply):
                if fut is not None and not fut.done():
                    fut.cancel()
        while self._queue:
            self._queue.popleft()[1].cancel()
        self._broken = self._broken or "closed"

    def join(self) -> None:
        """Blocks until every worker has exited (killed after `_JOIN_S`): call after `close`,
        in a thread."""
        for w in self._workers:
            w.process.join(_JOIN_S)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()

    def _bind(self) -> None:
        """Watches the pipes from the running loop (the first loop to use the set, or a later
        one once nothing is in flight on the one before)."""
        if self._broken is not None:
            raise WorkersBroken(self._broken)
        loop = asyncio.get_running_loop()
        if loop is self._loop:
            return
        if self._loop is not None:
            # A loop that ended with calls its callers gave up (done futures) left nothing here.
            self._queue = collections.deque((d, f) for d, f in self._queue if not f.done())
            if self._queue or any(w.reply and not w.reply.done() for w in self._workers):
                raise RuntimeError("these workers have calls waiting in another event loop")
            for w in self._workers:
                self._unwatch(w)
        self._loop = loop
        for w in self._workers:
            if not w.up:  # a future of this loop (one of a loop that ended cannot be set)
                w.ready = loop.create_future()
            loop.add_reader(w.fd, self._readable, w)
            if w.outbox:
                loop.add_writer(w.fd, self._writable, w)

    def _unwatch(self, w: _Worker) -> None:
        loop = self._loop
        if w.fd >= 0 and loop is not None and not loop.is_closed():
            loop.remove_reader(w.fd)
            loop.remove_writer(w.fd)

    def _dispatch(self) -> None:
        while self._queue and self._idle:
            data, fut = self._queue.popleft()
            if fut.done():  # its caller was cancelled before it was sent
                continue
            w = self._idle.popleft()
            w.reply = fut
            self._write(w, _LENGTH.pack(len(data)) + data)

    def _write(self, w: _Worker, data: bytes) -> None:
        if not w.outbox:
            try:
                n = os.write(w.fd, data)
            except BlockingIOError:
                n = 0
            except OSError:
                self._died(w)
                return
            if n == len(data):
                return
            data = data[n:]
            assert self._loop is not None
            self._loop.add_writer(w.fd, self._writable, w)
        w.outbox += data

    def _writable(self, w: _Worker) -> None:
        try:
            n = os.write(w.fd, w.outbox)
        except BlockingIOError:
            return
        except OSError:
            self._died(w)
            return
        del w.outbox[:n]
        if not w.outbox and self._loop is not None:
            self._loop.remove_writer(w.fd)

    def _readable(self, w: _Worker) -> None:
        try:
            data = os.read(w.fd, _READ)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the worker exited
            self._died(w)
            return
        inbox = w.inbox
        inbox += data
        while len(inbox) >= _LENGTH.size:
            (n,) = _LENGTH.unpack_from(inbox)
            end = _LENGTH.size + n
            if len(inbox) < end:
                break
            payload = bytes(inbox[_LENGTH.size : end])
            del inbox[:end]
            try:
                message = pickle.loads(payload)
            except Exception as exc:  # (an exception class the parent cannot rebuild, say)
                message = (False, RuntimeError(f"a worker's reply cannot be read: {exc!r}"))
            self._received(w, message)

    def _received(self, w: _Worker, message: Any) -> None:
        if not w.up:  # its first frame: its set-up is done
            w.up = True
            self._set_up += 1
            if w.ready is not None and not w.ready.done():
                w.ready.set_result(None)
        else:
            ok, value = message
            fut, w.reply = w.reply, None
            if fut is not None and not fut.done():  # (a cancelled caller's reply is dropped)
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(value)
        self._idle.append(w)
        self._dispatch()

    def _died(self, w: _Worker) -> None:
        """A worker exited: the set is broken, and every call on it fails."""
        code = w.process.exitcode
        self._broken = "a worker process exited" + (f" ({code})" if code is not None else "")
        self._unwatch(w)
        with contextlib.suppress(OSError):
            w.conn.close()
        w.fd = -1
        broken = WorkersBroken(self._broken)
        for other in self._workers:
            if other.ready is not None and not other.ready.done():
                other.ready.set_exception(broken)
                other.ready.exception()  # said by `ready` if awaited, never logged if not
            if other.reply is not None and not other.reply.done():
                other.reply.set_exception(broken)
            other.reply = None
        while self._queue:
            fut = self._queue.popleft()[1]
            if not fut.done():
                fut.set_exception(broken)
        self._idle.clear()
