"""The blocking driver: plain threads and ``select``, no event loop on the reading side.

The same loop as every driver (STYLE.md §10), with a lock instead of an event
loop: the main thread reads stdin with ``select`` (timed out at the core's
next timer), and under the lock feeds the core, drains its actions and
carries them out.  Writes happen under the same lock, so bytes leave in the
order the core produced them.  Sync handlers run on their own daemon threads; async
handlers run on one private asyncio loop in a background thread, so an
embedding program that prefers threads can still register coroutines.
Cancellation cancels an async handler's task and sets ``ctx.cancelled`` for a
sync one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import select
import threading
import time
from collections.abc import Callable
from typing import Any

from ..core import INTERNAL_ERROR, CancelRequest, Close, HandleRequest, Send, StdioServerConnection, Trace
from ..server import Call, Context, Outcome, Server
from ._common import PostingSink, apply_outcome, call_kwargs, change_listener, trace_to_stderr

__all__ = ["serve_blocking"]

CHUNK = 64 * 1024


class _BlockingDriver:
    def __init__(self, server: Server, conn: StdioServerConnection, out_fd: int, trace: bool) -> None:
        self.server = server
        self.conn = conn
        self.session = conn.session
        self.out_fd = out_fd
        self.trace = trace
        self.lock = threading.RLock()
        self.closed = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.loop_thread: threading.Thread | None = None
        self.futures: dict[int, concurrent.futures.Future[None]] = {}
        self.contexts: dict[int, Context] = {}
        self.cancelled: set[int] = set()

    # -- the loop ---------------------------------------------------------

    def post(self, fn: Callable[[], Any]) -> None:
        with self.lock:
            fn()
            self.flush()

    def flush(self) -> None:
        """Drain and perform the core's actions until none are left; the caller holds the lock.

        Everything the drain produced for the peer is written in one go, in
        the order the core produced it.
        """
        out: list[bytes] = []
        while actions := self.conn.next_actions():
            for action in actions:
                if isinstance(action, Send):
                    out.append(action.payload)
                elif isinstance(action, HandleRequest):
                    self.start(action)
                elif isinstance(action, CancelRequest):
                    self.cancelled.add(action.token)
                    ctx = self.contexts.get(action.token)
                    if ctx is not None:
                        ctx._cancel()
                    future = self.futures.get(action.token)
                    if future is not None:
                        future.cancel()
                elif isinstance(action, Close):
                    self.closed.set()
                elif isinstance(action, Trace) and self.trace:
                    trace_to_stderr(action)
        if out:
            self._write(b"".join(out))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
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

    def shutdown(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)

    # -- one request ---------------------------------------------------------

    def _async_loop(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="mcpx-async-handlers", daemon=True)
                thread.start()
                self.loop, self.loop_thread = loop, thread
            return self.loop

    def start(self, action: HandleRequest) -> None:
        """Begin one request (under the lock): answer at once, or hand it to a handler thread or loop."""
        token = action.token
        try:
            invocation = self.server.route(action.method, action.params, action.context)
        except Exception as exc:
            invocation = Outcome.failure(INTERNAL_ERROR, f"Internal error: {exc}")
        if isinstance(invocation, Outcome):
            apply_outcome(self.session, token, invocation)  # drained by flush()'s loop
            return
        ctx = Context(action.context, PostingSink(self.post, self.session))
        self.contexts[token] = ctx
        if invocation.is_async:
            coroutine = self.run_async(token, invocation, ctx)
            self.futures[token] = asyncio.run_coroutine_threadsafe(coroutine, self._async_loop())
        else:
            # A daemon thread per sync call: a handler that never returns must
            # not keep the process alive once the session has closed.
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
        """Report a handler's end to the session (under the lock)."""
        self.contexts.pop(token, None)
        self.futures.pop(token, None)
        if token in self.cancelled:
            self.cancelled.discard(token)
            self.session.discard(token)
        elif outcome is not None:
            apply_outcome(self.session, token, outcome)


def _finish(call: Call, value: object) -> Outcome:
    try:
        return call.finish(value)
    except Exception as exc:
        return call.fail(exc)


def serve_blocking(
    server: Server,
    conn: StdioServerConnection,
    *,
    in_fd: int = 0,
    out_fd: int = 1,
    trace: bool = False,
) -> None:
    """Serve one stdio connection on threads until the peer closes it."""
    driver = _BlockingDriver(server, conn, out_fd, trace)

    unsubscribe = server.add_listener(change_listener(driver.post, conn.session))
    try:
        driver.run(in_fd)
    finally:
        unsubscribe()
        driver.shutdown()
