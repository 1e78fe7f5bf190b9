"""The blocking driver: plain threads and ``select``, no event loop on the reading side.

The same loop as every driver (STYLE.md §10), with a lock instead of an event
loop: the main thread reads stdin with ``select`` (timed out at the core's
next timer), and under the lock feeds the core, drains its actions and
carries them out.  Writes happen under the same lock, so bytes leave in the
order the core produced them.  Sync handlers run in a thread pool; async
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
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="mcpx-handler")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.loop_thread: threading.Thread | None = None
        self.futures: dict[int, concurrent.futures.Future[Any]] = {}
        self.contexts: dict[int, Context] = {}
        self.cancelled: set[int] = set()

    # -- the loop ---------------------------------------------------------

    def post(self, fn: Callable[[], Any]) -> None:
        with self.lock:
            fn()
            self.flush()

    def flush(self) -> None:
        """Drain and perform the core's actions; the caller holds the lock."""
        for action in self.conn.next_actions():
            if isinstance(action, Send):
                self._write(action.payload)
            elif isinstance(action, HandleRequest):
                self.pool.submit(self.run_request, action)
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
        self.pool.shutdown(wait=False, cancel_futures=True)
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

    def run_request(self, action: HandleRequest) -> None:
        token = action.token
        try:
            invocation = self.server.route(action.method, action.params, action.context)
        except Exception as exc:
            invocation = Outcome.failure(INTERNAL_ERROR, f"Internal error: {exc}")
        if isinstance(invocation, Call):
            ctx = Context(action.context, PostingSink(self.post, self.session))
            with self.lock:
                self.contexts[token] = ctx
                if token in self.cancelled:
                    ctx._cancel()
            outcome = self.invoke(token, invocation, ctx)
        else:
            outcome = invocation
        with self.lock:
            self.contexts.pop(token, None)
            self.futures.pop(token, None)
            if token in self.cancelled:
                self.cancelled.discard(token)
                self.session.discard(token)
            elif outcome is not None:
                apply_outcome(self.session, token, outcome)
            self.flush()

    def invoke(self, token: int, call: Call, ctx: Context) -> Outcome | None:
        kwargs = call_kwargs(call, ctx)
        try:
            if call.is_async:
                future = asyncio.run_coroutine_threadsafe(call.fn(**kwargs), self._async_loop())
                with self.lock:
                    self.futures[token] = future
                    if token in self.cancelled:
                        future.cancel()
                value = future.result()
            else:
                value = call.fn(**kwargs)
        except concurrent.futures.CancelledError:
            return None
        except Exception as exc:
            return call.fail(exc)
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
