"""The blocking driver: plain threads and ``select``, no event loop on the reading side.

The same loop as every driver (read → feed → drain → act → re-arm), with a
lock instead of an event loop: a reading thread feeds the core under the lock,
drains its actions and carries them out.  Sync handlers run on their own daemon
threads (a handler that never returns cannot keep the process alive once the
session closed); async handlers run on one private asyncio loop in a background
thread, so an embedding program that prefers threads can still register
coroutines.  Cancellation cancels an async handler's task and sets
``ctx.cancelled`` for a sync one.

``_BlockingRunner`` is what stdio and HTTP share; ``serve_blocking`` reads
stdin with ``select`` (timed out at the core's next timer) and writes stdout
under the lock, in the order the core produced the bytes; ``serve_http_blocking``
accepts sockets on threads, gives each connection a writer thread, and runs
the core's timer on one more.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import itertools
import os
import queue
import select
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..core import (
    INTERNAL_ERROR,
    Answered,
    CancelRequest,
    Close,
    CloseConnection,
    HandleRequest,
    HttpServer,
    Send,
    SendBytes,
    SessionEnded,
    StdioServerConnection,
    Subscribed,
    Trace,
)
from ..core.rounds import Question
from ..server import Call, Context, Deferred, Outcome, Pending, Server
from ._common import (
    Core,
    PostingSink,
    Waiters,
    abandon_deferred,
    apply_outcome,
    call_kwargs,
    change_listener,
    trace_to_stderr,
)

__all__ = ["serve_blocking", "serve_http_blocking"]

CHUNK = 64 * 1024


class _Machine(Protocol):
    def next_actions(self) -> Sequence[object]: ...

    def get_timer(self) -> float | None: ...

    def handle_timer(self, now: float) -> None: ...


_connections = itertools.count(1)


class _BlockingRunner:
    """Requests and cancellation for one core, under one lock."""

    def __init__(self, server: Server, machine: _Machine, core: Core, trace: bool) -> None:
        self.server = server
        self.machine = machine
        self.core = core
        self.trace = trace
        self.lock = threading.RLock()
        self.wake = threading.Condition(self.lock)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.futures: dict[int, concurrent.futures.Future[None]] = {}
        self.contexts: dict[int, Context] = {}
        self.cancelled: set[int] = set()
        self.waiters = Waiters()
        self.deferred: dict[int, Pending] = {}  # requests a Deferred answers later, by token
        self.connection = next(_connections)

    def perform(self, action: object, out: list[Any]) -> None:
        """Carry out a transport action; the subclass knows how."""
        raise NotImplementedError

    def written(self, out: list[Any]) -> None:
        """Everything one drain produced for the transport, in order."""
        raise NotImplementedError

    def clock_in(self) -> None:
        """Hook: tell the core the time before an application call."""

    def post(self, fn: Callable[[], Any]) -> None:
        with self.lock:
            self.clock_in()
            fn()
            self.flush()

    def flush(self) -> None:
        """Drain and perform the core's actions until none are left; the caller holds the lock."""
        out: list[Any] = []
        while actions := self.machine.next_actions():
            for action in actions:
                if isinstance(action, HandleRequest):
                    self.start(action)
                elif isinstance(action, Answered):
                    self.waiters.answered(action)
                elif isinstance(action, CancelRequest):
                    if action.token in self.deferred:
                        self._drop_deferred(action.token)
                        continue
                    self.cancelled.add(action.token)
                    self.waiters.cancelled(action.token)
                    ctx = self.contexts.get(action.token)
                    if ctx is not None:
                        ctx._cancel()
                    future = self.futures.get(action.token)
                    if future is not None:
                        future.cancel()
                elif isinstance(action, Trace):
                    if self.trace or action.event == "internal-error":
                        trace_to_stderr(action)
                elif isinstance(action, Subscribed):
                    self.server.subscribed(action.uri)
                elif isinstance(action, SessionEnded):
                    self.server.session_ended(action.identity)
                else:
                    self.perform(action, out)
        if out:
            self.written(out)
        self.wake.notify_all()  # the timer may have moved

    def run_timer(self, stop: threading.Event) -> None:
        """Call the core's timer when it is due, until ``stop``."""
        with self.lock:
            while not stop.is_set():
                deadline = self.machine.get_timer()
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                self.wake.wait(timeout if timeout is not None else 1.0)
                deadline = self.machine.get_timer()
                if deadline is not None and time.monotonic() >= deadline:
                    self.machine.handle_timer(time.monotonic())
                    self.flush()

    # -- questions -------------------------------------------------------------

    def ask_blocking(self, token: int, questions: list[Question]) -> Answered | None:
        event = threading.Event()
        box: list[Answered | None] = []

        def resolve(answered: Answered | None) -> None:
            box.append(answered)
            event.set()

        with self.lock:
            self.clock_in()
            self.waiters.add(token, self.core.ask(token, questions), resolve)
            self.flush()
        event.wait()
        return box[0]

    async def ask(self, token: int, questions: list[Question]) -> Answered | None:
        """For an async handler on the private handler loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Answered | None] = loop.create_future()

        def settle(answered: Answered | None) -> None:
            if not future.done():
                future.set_result(answered)

        def resolve(answered: Answered | None) -> None:
            loop.call_soon_threadsafe(settle, answered)

        with self.lock:
            self.clock_in()
            self.waiters.add(token, self.core.ask(token, questions), resolve)
            self.flush()
        return await future

    # -- one request ---------------------------------------------------------

    def _async_loop(self) -> asyncio.AbstractEventLoop:
        if self.loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="mcpx-async-handlers", daemon=True).start()
            self.loop = loop
        return self.loop

    def start(self, action: HandleRequest) -> None:
        """Begin one request (under the lock): answer at once, or hand it to a handler thread or loop."""
        token = action.token
        try:
            invocation = self.server.route(action.method, action.params, action.context)
        except Exception as exc:
            invocation = Outcome.failure(INTERNAL_ERROR, f"Internal error: {exc}")
        if isinstance(invocation, Outcome):
            apply_outcome(self.core, token, invocation)  # drained by flush()'s loop
            return
        ctx = Context(action.context, PostingSink(self.post, self.core, self))
        self.contexts[token] = ctx
        if isinstance(invocation, Deferred):
            pending = self.deferred[token] = Pending(
                ctx, self.connection, functools.partial(self._settle, token)
            )
            try:
                invocation.start(pending)
            except Exception as exc:  # a bug in the server must not take the connection down
                self._settle(token, Outcome.failure(INTERNAL_ERROR, f"Internal error: {exc}"))
            return
        if invocation.is_async:
            coroutine = self.run_async(token, invocation, ctx)
            self.futures[token] = asyncio.run_coroutine_threadsafe(coroutine, self._async_loop())
        else:
            threading.Thread(
                target=self.run_sync, args=(token, invocation, ctx), name="mcpx-handler", daemon=True
            ).start()

    async def run_async(self, token: int, call: Call, ctx: Context) -> None:
        try:
            outcome: Outcome | None = _finish(call, await call.fn(**call_kwargs(call, ctx)))
        except asyncio.CancelledError:
            outcome = None
        except Exception as exc:
            outcome = call.fail(exc)
        self.post(lambda: self.finish(token, outcome))

    def run_sync(self, token: int, call: Call, ctx: Context) -> None:
        try:
            outcome = _finish(call, call.fn(**call_kwargs(call, ctx)))
        except Exception as exc:
            outcome = call.fail(exc)
        self.post(lambda: self.finish(token, outcome))

    def finish(self, token: int, outcome: Outcome | None) -> None:
        """Report a handler's end to the core (under the lock)."""
        self.contexts.pop(token, None)
        self.futures.pop(token, None)
        if token in self.cancelled:
            self.cancelled.discard(token)
            self.core.discard(token)
        elif outcome is not None:
            apply_outcome(self.core, token, outcome)

    def _settle(self, token: int, outcome: Outcome) -> None:
        """``Pending.settle``, from any thread: answer deferred request ``token`` once."""

        def settle() -> None:
            if self.deferred.pop(token, None) is not None:
                self.finish(token, outcome)

        self.post(settle)

    def _drop_deferred(self, token: int) -> None:
        """The peer cancelled deferred request ``token`` (under the lock): forgotten, its server told."""
        pending = self.deferred.pop(token)
        self.contexts.pop(token, None)
        self.waiters.cancelled(token)
        self.core.discard(token)
        pending._cancel()

    def abandon_deferred(self) -> None:
        """The connection is gone (under the lock): every deferred request still open is cancelled."""
        abandon_deferred(self.deferred, self.contexts)

    def shutdown(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)


def _finish(call: Call, value: object) -> Outcome:
    try:
        return call.finish(value)
    except Exception as exc:
        return call.fail(exc)


# --------------------------------------------------------------------------
# stdio
# --------------------------------------------------------------------------


class _StdioBlocking(_BlockingRunner):
    def __init__(self, server: Server, conn: StdioServerConnection, out_fd: int, trace: bool) -> None:
        super().__init__(server, conn, conn.session, trace)
        self.conn = conn
        self.out_fd = out_fd
        self.closed = threading.Event()

    def clock_in(self) -> None:
        self.conn.session.advance(time.monotonic())

    def perform(self, action: object, out: list[Any]) -> None:
        if isinstance(action, Send):
            out.append(action.payload)
        elif isinstance(action, Close):
            self.closed.set()

    def written(self, out: list[Any]) -> None:
        view = memoryview(b"".join(out))
        try:
            while view:
                view = view[os.write(self.out_fd, view) :]
        except BrokenPipeError:
            pass  # the peer is gone; the read side will see end of input

    def run(self, in_fd: int) -> None:
        eof = False
        while not self.closed.is_set():
            deadline = self.conn.get_timer()
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            if eof:
                self.closed.wait(timeout if timeout is not None else 0.05)
            else:
                ready, _, _ = select.select([in_fd], [], [], timeout)
                if ready:
                    data = os.read(in_fd, CHUNK)
                    eof = not data
                    with self.lock:
                        self.conn.receive_data(data, now=time.monotonic())
                        self.flush()
            with self.lock:
                deadline = self.conn.get_timer()
                if deadline is not None and time.monotonic() >= deadline:
                    self.conn.handle_timer(time.monotonic())
                    self.flush()


def serve_blocking(
    server: Server,
    conn: StdioServerConnection,
    *,
    in_fd: int = 0,
    out_fd: int = 1,
    trace: bool = False,
) -> None:
    """Serve one stdio connection on threads until the peer closes it."""
    driver = _StdioBlocking(server, conn, out_fd, trace)
    unsubscribe = server.add_listener(change_listener(driver.post, conn.session))
    try:
        driver.run(in_fd)
    finally:
        unsubscribe()
        with driver.lock:
            driver.abandon_deferred()
        driver.shutdown()


# --------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------


class _HttpBlocking(_BlockingRunner):
    def __init__(self, server: Server, http: HttpServer, trace: bool) -> None:
        super().__init__(server, http, http, trace)
        self.http = http
        self.writers: dict[int, queue.SimpleQueue[bytes | None]] = {}
        self.ids = itertools.count(1)

    def clock_in(self) -> None:
        self.http.advance(time.monotonic())

    def perform(self, action: object, out: list[Any]) -> None:
        if isinstance(action, SendBytes | CloseConnection):
            out.append(action)

    def written(self, out: list[Any]) -> None:
        for action in out:
            box = self.writers.get(action.conn)
            if box is not None:
                box.put(action.data if isinstance(action, SendBytes) else None)

    def accept_loop(self, listener: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self.serve_one, args=(sock,), name="mcpx-http-conn", daemon=True).start()

    def serve_one(self, sock: socket.socket) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            # Small responses must not wait for the client's delayed ACK (Nagle).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = next(self.ids)
        box: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        writer = threading.Thread(target=self._write, args=(sock, box), name="mcpx-http-write", daemon=True)
        with self.lock:
            self.writers[conn] = box
            self.http.connection_made(conn, time.monotonic())
            self.flush()
        writer.start()
        try:
            while True:
                try:
                    data = sock.recv(CHUNK)
                except OSError:
                    data = b""
                with self.lock:
                    self.http.receive_data(conn, data, time.monotonic())
                    self.flush()
                if not data:
                    break
            writer.join()
        finally:
            with self.lock:
                self.writers.pop(conn, None)
                self.http.connection_lost(conn, time.monotonic())
                self.flush()
            box.put(None)
            sock.close()

    @staticmethod
    def _write(sock: socket.socket, box: queue.SimpleQueue[bytes | None]) -> None:
        try:
            while (data := box.get()) is not None:
                # Everything already queued goes out in one write (a response's
                # head and body together), as the event-loop drivers do.
                chunks = [data]
                while not box.empty():
                    more = box.get_nowait()
                    if more is None:
                        sock.sendall(b"".join(chunks))
                        return
                    chunks.append(more)
                sock.sendall(b"".join(chunks))
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def serve_http_blocking(
    server: Server,
    http: HttpServer,
    listeners: list[socket.socket],
    *,
    trace: bool = False,
    stop: threading.Event | None = None,
    started: Callable[[], None] | None = None,
) -> None:
    """Serve ``http`` on listening sockets with threads until ``stop`` is set."""
    stop = stop or threading.Event()
    driver = _HttpBlocking(server, http, trace)
    unsubscribe = server.add_listener(change_listener(driver.post, http))
    timer = threading.Thread(target=driver.run_timer, args=(stop,), name="mcpx-http-timer", daemon=True)
    timer.start()
    acceptors = [
        threading.Thread(target=driver.accept_loop, args=(sock, stop), name="mcpx-http-accept", daemon=True)
        for sock in listeners
    ]
    for thread in acceptors:
        thread.start()
    if started is not None:
        started()
    try:
        stop.wait()
    finally:
        unsubscribe()
        for sock in listeners:
            sock.close()
        with driver.lock:
            driver.abandon_deferred()
            driver.wake.notify_all()
        driver.shutdown()
