"""The event-loop driver: one loop for asyncio, asyncio+uvloop and trio, written on anyio.

The loop is the STYLE.md §10 order and nothing more: read → feed the core →
drain actions → perform them → re-arm the timer.  Performing an action is:

* ``Send`` — queue the bytes for the writer task, which writes them in the
  order the core produced them;
* ``HandleRequest`` — start a task under its own cancel scope that asks the
  ``Server`` how to answer, awaits an async handler on the loop or runs a sync
  one in a worker thread, and reports the outcome to the session;
* ``CancelRequest`` — cancel that scope (a sync handler sees ``ctx.cancelled``);
* ``Close`` — flush the writer and stop.

Requests therefore run concurrently, each under its own cancellation scope,
while notifications and ``initialize`` are handled in line by the core.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..core import INTERNAL_ERROR, CancelRequest, Close, HandleRequest, Send, StdioServerConnection, Trace
from ..server import Call, Context, Outcome, Server
from ._common import PostingSink, apply_outcome, call_kwargs, change_listener, trace_to_stderr

__all__ = ["ByteReader", "ByteWriter", "serve_connection"]


class ByteReader(Protocol):
    async def receive(self) -> bytes:
        """The next bytes; ``b""`` at end of input."""
        ...


class ByteWriter(Protocol):
    async def send(self, data: bytes) -> None: ...

    async def aclose(self) -> None: ...


class _Driver:
    def __init__(
        self,
        server: Server,
        conn: StdioServerConnection,
        writer: ByteWriter,
        tg: anyio.abc.TaskGroup,
        trace: bool,
    ) -> None:
        self.server = server
        self.conn = conn
        self.session = conn.session
        self.writer = writer
        self.tg = tg
        self.trace = trace
        self.scopes: dict[int, anyio.CancelScope] = {}
        self.contexts: dict[int, Context] = {}
        self.cancelled: set[int] = set()
        send, receive = anyio.create_memory_object_stream[bytes | None](math.inf)
        self.outbox: MemoryObjectSendStream[bytes | None] = send
        self.inbox: MemoryObjectReceiveStream[bytes | None] = receive
        self.timer_changed = anyio.Event()
        self.timer: float | None = None
        self.loop_thread = threading.get_ident()
        self.token = anyio.lowlevel.current_token()
        self.closed = False

    # -- the loop ---------------------------------------------------------

    def flush(self) -> None:
        """Drain the core's actions and carry them out (never awaits)."""
        for action in self.conn.next_actions():
            if isinstance(action, Send):
                self.outbox.send_nowait(action.payload)
            elif isinstance(action, HandleRequest):
                self.tg.start_soon(self.run_request, action)
            elif isinstance(action, CancelRequest):
                self.cancelled.add(action.token)
                scope = self.scopes.get(action.token)
                if scope is not None:
                    scope.cancel()
                ctx = self.contexts.get(action.token)
                if ctx is not None:
                    ctx._cancel()
            elif isinstance(action, Close):
                self.closed = True
                self.outbox.send_nowait(None)
            elif isinstance(action, Trace) and self.trace:
                trace_to_stderr(action)
        timer = self.conn.get_timer()
        if timer != self.timer:
            self.timer = timer
            self.timer_changed.set()

    def post(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` against the core on the loop, from any thread, then flush."""
        if threading.get_ident() == self.loop_thread:
            fn()
            self.flush()
            return

        def on_loop() -> None:
            fn()
            self.flush()

        anyio.from_thread.run_sync(on_loop, token=self.token)

    async def read_loop(self, reader: ByteReader) -> None:
        while True:
            data = await reader.receive()
            self.conn.receive_data(data, now=time.monotonic())
            self.flush()
            if not data:
                return

    async def write_loop(self) -> None:
        async for payload in self.inbox:
            chunks = [payload]
            while chunks[-1] is not None:
                try:
                    chunks.append(self.inbox.receive_nowait())
                except anyio.WouldBlock:
                    break
            data = b"".join(c for c in chunks if c is not None)
            try:
                if data:
                    await self.writer.send(data)
            except OSError:
                # The peer stopped reading: nothing more can reach it.
                self.tg.cancel_scope.cancel()
                return
            if chunks[-1] is None:
                await self.writer.aclose()
                self.tg.cancel_scope.cancel()
                return

    async def timer_loop(self) -> None:
        while True:
            self.timer_changed = anyio.Event()
            deadline = self.timer
            if deadline is None:
                await self.timer_changed.wait()
                continue
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                await self.timer_changed.wait()
                continue
            self.conn.handle_timer(time.monotonic())
            self.flush()

    # -- one request ---------------------------------------------------------

    async def run_request(self, action: HandleRequest) -> None:
        token = action.token
        try:
            invocation = self.server.route(action.method, action.params, action.context)
        except Exception as exc:  # a bug in routing must not take the connection down
            invocation = Outcome.failure(INTERNAL_ERROR, f"Internal error: {exc}")
        if isinstance(invocation, Outcome):
            self.finish(token, invocation)
            return
        ctx = Context(action.context, PostingSink(self.post, self.session))
        self.contexts[token] = ctx
        outcome: Outcome | None = None
        with anyio.CancelScope() as scope:
            self.scopes[token] = scope
            if token in self.cancelled:
                scope.cancel()
            outcome = await self.invoke(invocation, ctx)
        self.scopes.pop(token, None)
        self.contexts.pop(token, None)
        if token in self.cancelled:
            # The session dropped this request when it asked for the cancel.
            self.cancelled.discard(token)
            self.session.discard(token)
            self.flush()
            return
        assert outcome is not None
        self.finish(token, outcome)

    async def invoke(self, call: Call, ctx: Context) -> Outcome:
        kwargs = call_kwargs(call, ctx)
        try:
            if call.is_async:
                value = await call.fn(**kwargs)
            else:
                value = await anyio.to_thread.run_sync(
                    functools.partial(call.fn, **kwargs), abandon_on_cancel=True
                )
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            return call.fail(exc)
        try:
            return call.finish(value)
        except Exception as exc:
            return call.fail(exc)

    def finish(self, token: int, outcome: Outcome) -> None:
        apply_outcome(self.session, token, outcome)
        self.flush()


async def serve_connection(
    server: Server,
    conn: StdioServerConnection,
    reader: ByteReader,
    writer: ByteWriter,
    *,
    trace: bool = False,
) -> None:
    """Serve one connection until the peer closes it and the core says Close."""
    async with anyio.create_task_group() as tg:
        driver = _Driver(server, conn, writer, tg, trace)

        unsubscribe = server.add_listener(change_listener(driver.post, conn.session))
        try:
            tg.start_soon(driver.write_loop)
            tg.start_soon(driver.timer_loop)
            await driver.read_loop(reader)
            # End of input: the write loop ends the task group once the core
            # has drained and said Close.
        finally:
            unsubscribe()
