"""The event-loop driver: one loop for asyncio, asyncio+uvloop and trio, written on anyio.

The loop is the order every driver keeps and nothing more: read → feed the
core → drain actions → perform them → re-arm the timer; any logic beyond that
belongs in the core.  Performing an action is:

* ``Send`` / ``SendBytes`` — queue the bytes for the connection's writer
  task, which writes them in the order the core produced them;
* ``HandleRequest`` — ask the ``Server`` how to answer; an ``Outcome``, or an
  async handler that cannot suspend (its code holds no ``await``), is
  answered at once, without a task; a ``Deferred`` is started with a
  ``Pending`` handle and answered whenever the server settles it, without a
  task either; anything else runs in a task under its own cancel scope that
  awaits the async handler on the loop or runs a sync one in a worker
  thread, and reports the outcome to the core;
* ``CancelRequest`` — cancel that scope (a sync handler sees ``ctx.cancelled``;
  a deferred request is dropped and its ``Pending.on_cancel`` called);
* ``Close`` / ``CloseConnection`` — flush the writer and close.

``_Runner`` is the part both transports share (requests, timers, posting
from threads); ``serve_connection`` runs it over one stdio connection and
``serve_http`` over sockets accepted by anyio listeners.
"""

from __future__ import annotations

import asyncio
import contextvars
import dis
import functools
import inspect
import itertools
import math
import socket
import threading
import time
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import orjson
import sniffio
from anyio.streams.memory import MemoryObjectReceiveStream

from ..core import (
    INTERNAL_ERROR,
    Answered,
    AppRequest,
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
from . import _batch
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

__all__ = [
    "AppHandler",
    "AppResponse",
    "ByteReader",
    "ByteWriter",
    "RequestWatch",
    "serve_connection",
    "serve_http",
]


class ByteReader(Protocol):
    """Where a connection's bytes come from.

    A reader may also have ``push(consumer)``: from then on each chunk goes
    to ``consumer`` as it arrives (asyncio's pipes, in their own callback),
    and ``receive`` returns what came before, then ``b""`` at the end.
    """

    async def receive(self) -> bytes:
        """The next bytes; ``b""`` at end of input."""
        ...


class ByteWriter(Protocol):
    """Where a connection's bytes go.

    A writer may also have ``write_nowait(data) -> bool``: take ``data`` now
    without waiting, or say it cannot (``False``: use ``send``).  The stdio
    loop uses it to write an answer from the task that produced it.
    """

    async def send(self, data: bytes) -> None: ...

    async def aclose(self) -> None: ...


class RequestWatch(Protocol):
    """Told when a request starts running in the application and when it has been answered (or dropped)."""

    def started(self, request_id: str | int) -> None: ...

    def ended(self, request_id: str | int) -> None: ...


class _Machine(Protocol):
    def next_actions(self) -> Sequence[object]: ...

    def get_timer(self) -> float | None: ...

    def handle_timer(self, now: float) -> None: ...


_connections = itertools.count(1)


class _Runner:
    """Requests, cancellation, timers and cross-thread posts for one core on one anyio loop."""

    def __init__(self, server: Server, machine: _Machine, core: Core, tg: anyio.abc.TaskGroup, trace: bool):
        self.server = server
        self.machine = machine
        self.core = core
        self.tg = tg
        self.trace = trace
        self.scopes: dict[int, anyio.CancelScope] = {}
        self.contexts: dict[int, Context] = {}
        self.cancelled: set[int] = set()
        self.timer_changed = anyio.Event()
        self.timer: float | None = None
        self.loop_thread = threading.get_ident()
        self.token = anyio.lowlevel.current_token()
        self.waiters = Waiters()
        self.watch: RequestWatch | None = None
        self.deferred: dict[int, Pending] = {}  # requests a Deferred answers later, by token
        self.flush_due = False  # a flush is due at the end of the chunk being read (_settle)
        self.sink = PostingSink(self.post, self.core, self)  # every handler's Context reports through it
        self.connection = next(_connections)

    def perform(self, action: object) -> None:
        """Carry out a transport action (bytes, closing); the subclass knows how."""
        raise NotImplementedError

    def flush(self) -> None:
        """Drain the core's actions and carry them out (never awaits).

        Requests start once the rest of their batch is carried out (as a task
        would); what answering them at once queues is drained in turn.
        """
        actions = self.machine.next_actions()
        while actions:
            requests = self._perform_all(actions)
            if not requests:
                break
            for request in requests:
                self.start_request(request)
            actions = self.machine.next_actions()
        # The timer loop sleeps until ``timer``; it is woken only for an earlier deadline.  A
        # later one (each request moves the core's deadlines) waits for the loop to wake as
        # planned and look again: no wake-up per request.
        timer = self.machine.get_timer()
        if timer is not None and (self.timer is None or timer < self.timer):
            self.timer = timer
            self.timer_changed.set()

    def _perform_all(self, actions: Sequence[object]) -> list[HandleRequest]:
        """Carry out everything but the requests; returns those, in order."""
        requests: list[HandleRequest] = []
        for action in actions:
            if isinstance(action, HandleRequest):
                requests.append(action)
            elif isinstance(action, Answered):
                self.waiters.answered(action)
            elif isinstance(action, CancelRequest):
                if action.token in self.deferred:
                    self._drop_deferred(action.token)
                    continue
                self.cancelled.add(action.token)
                self.waiters.cancelled(action.token)
                scope = self.scopes.get(action.token)
                if scope is not None:
                    scope.cancel()
                ctx = self.contexts.get(action.token)
                if ctx is not None:
                    ctx._cancel()
            elif isinstance(action, Trace):
                if self.trace or action.event == "internal-error":
                    trace_to_stderr(action)
            elif isinstance(action, Subscribed):
                self.server.subscribed(action.uri)
            elif isinstance(action, SessionEnded):
                self.server.session_ended(action.identity)
            else:
                self.perform(action)
        return requests

    def clock_in(self) -> None:
        """Hook: tell the core the time before an application call."""

    def post(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` against the core on the loop, from any thread, then flush."""
        if threading.get_ident() == self.loop_thread:
            self.clock_in()
            fn()
            self.flush()
            return

        def on_loop() -> None:
            self.clock_in()
            fn()
            self.flush()

        anyio.from_thread.run_sync(on_loop, token=self.token)

    async def ask(self, token: int, questions: list[Question]) -> Answered | None:
        """For an async handler on this loop: ask, then wait for the ``Answered`` action."""
        event = anyio.Event()
        box: list[Answered | None] = []

        def resolve(answered: Answered | None) -> None:
            box.append(answered)
            event.set()

        self.clock_in()
        ask_id = self.core.ask(token, questions)
        self.waiters.add(token, ask_id, resolve)
        self.flush()
        await event.wait()
        return box[0]

    def ask_blocking(self, token: int, questions: list[Question]) -> Answered | None:
        """For a sync handler in a worker thread: the same, waiting on a threading event."""
        event = threading.Event()
        box: list[Answered | None] = []

        def resolve(answered: Answered | None) -> None:
            box.append(answered)
            event.set()

        def start() -> None:
            self.clock_in()
            self.waiters.add(token, self.core.ask(token, questions), resolve)
            self.flush()

        anyio.from_thread.run_sync(start, token=self.token)
        event.wait()
        return box[0]

    async def timer_loop(self) -> None:
        while True:
            self.timer_changed = anyio.Event()
            deadline = self.timer = self.machine.get_timer()
            if deadline is None:
                await self.timer_changed.wait()
                continue
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                await self.timer_changed.wait()
                continue
            due = self.machine.get_timer()
            if due is not None and time.monotonic() >= due:
                self.machine.handle_timer(time.monotonic())
                self.flush()

    def start_request(self, action: HandleRequest) -> None:
        """Answer ``action`` now if nothing in it can wait; otherwise start its task.

        Routing never waits, and neither does an async handler whose code holds
        no ``await`` (``_never_suspends``): it runs to its end in one step, so
        running it here, in a copy of the context a task would have, answers
        the same thing without the cost of a task and a cancel scope.  A request
        cancelled before it started goes to its task, which drops it as ever.
        Call ``flush`` afterwards: the answer is queued in the core.
        """
        token = action.token
        try:
            invocation = self.server.route(action.method, action.params, action.context)
        except Exception as exc:  # a bug in routing must not take the connection down
            invocation = Outcome.failure(INTERNAL_ERROR, f"Internal error: {exc}")
        if token in self.cancelled and isinstance(invocation, Deferred):
            self.cancelled.discard(token)  # dropped before it started: nothing to start
            self.core.discard(token)
            return
        if token not in self.cancelled:
            if isinstance(invocation, Outcome):
                self.clock_in()
                apply_outcome(self.core, token, invocation)
                return
            if isinstance(invocation, Deferred):
                self._defer(action, invocation)
                return
            if invocation.is_async and _never_suspends(invocation.fn):
                self._answer_now(action, invocation)
                return
        assert not isinstance(invocation, Deferred)
        self.tg.start_soon(self.run_request, action, invocation)

    # -- deferred requests: started here, settled by the server when its answer comes ----------

    def _defer(self, action: HandleRequest, deferred: Deferred) -> None:
        token = action.token
        pending = Pending.of(
            action.context, self.sink, self.connection, functools.partial(self._settle, token)
        )
        self.deferred[token] = pending  # a cancel reaches its context (if one was made) through it
        if self.watch is not None:
            self.watch.started(action.context.request_id)
        try:
            deferred.start(pending)
        except Exception as exc:  # a bug in the server must not take the connection down
            self._settle(token, Outcome.failure(INTERNAL_ERROR, f"Internal error: {exc}"))

    def _settle(self, token: int, outcome: Outcome) -> None:
        """``Pending.settle``: answer the deferred request ``token`` (ignored once settled or dropped)."""
        if threading.get_ident() != self.loop_thread:
            self.post(functools.partial(self._settle, token, outcome))  # back here, on the loop
            return
        pending = self.deferred.pop(token, None)
        if pending is None:
            return
        self.clock_in()
        apply_outcome(self.core, token, outcome)
        if self.watch is not None:
            self.request_ended(self.watch, pending.request.request_id)
        if self.flush_due:
            return
        if _batch.many():  # a chunk of upstream answers settles many: drained once, at its end
            self.flush_due = _batch.at_chunk_end(self._flush_due)
        else:  # a lone answer (or none read): written now, the rest of the work after
            self.flush()

    def _flush_due(self) -> None:
        self.flush_due = False
        self.flush()

    def _drop_deferred(self, token: int) -> None:
        """The peer cancelled deferred request ``token``: the core forgets it; the server is told."""
        pending = self.deferred.pop(token)
        self.waiters.cancelled(token)
        self.core.discard(token)
        if self.watch is not None:
            self.watch.ended(pending.request.request_id)  # nothing will be written for it
        pending._cancel()

    def abandon_deferred(self) -> None:
        """The connection is gone: every deferred request still open is cancelled for its server."""
        abandon_deferred(self.deferred, self.contexts)

    def _answer_now(self, action: HandleRequest, call: Call) -> None:
        watch = self.watch
        request_id = action.context.request_id
        if watch is not None:
            watch.started(request_id)
        try:
            ctx = None
            if call.context_param is not None:
                ctx = Context(action.context, self.sink)
            outcome = _run_to_end(call, call.kwargs if ctx is None else call_kwargs(call, ctx))
            self.clock_in()
            apply_outcome(self.core, action.token, outcome)
        finally:
            if watch is not None:
                self.request_ended(watch, request_id)

    async def run_request(self, action: HandleRequest, invocation: Call | Outcome) -> None:
        token = action.token
        if isinstance(invocation, Outcome):
            self.finish(token, invocation)
            return
        watch = self.watch
        if watch is not None:
            watch.started(action.context.request_id)
        try:
            await self._run_call(token, invocation, Context(action.context, self.sink))
        finally:
            if watch is not None:
                self.request_ended(watch, action.context.request_id)

    def request_ended(self, watch: RequestWatch, request_id: str | int) -> None:
        """The request's answer (if any) is queued: tell ``watch`` (a transport may wait until it is written)."""
        watch.ended(request_id)

    async def _run_call(self, token: int, invocation: Call, ctx: Context) -> None:
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
            # The core dropped this request when it asked for the cancel.
            self.cancelled.discard(token)
            self.clock_in()
            self.core.discard(token)
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
        self.clock_in()
        apply_outcome(self.core, token, outcome)
        self.flush()


# Opcodes through which a coroutine can give control back to its event loop.
_SUSPENDING_OPS: frozenset[str] = frozenset(
    {"GET_AWAITABLE", "BEFORE_ASYNC_WITH", "GET_AITER", "GET_ANEXT", "END_ASYNC_FOR", "SEND", "YIELD_VALUE"}
)


@functools.lru_cache(maxsize=1024)
def _code_never_suspends(code: types.CodeType) -> bool:
    if not code.co_flags & inspect.CO_COROUTINE:
        return False
    return not any(op.opname in _SUSPENDING_OPS for op in dis.get_instructions(code))


def _never_suspends(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is an ``async def`` whose body never awaits: its coroutine ends at the first step."""
    if type(fn) is types.MethodType:
        fn = fn.__func__
    if type(fn) is not types.FunctionType:
        return False  # a partial, a callable object: nothing to read
    return _code_never_suspends(fn.__code__)


def _run_to_end(call: Call, kwargs: dict[str, Any]) -> Outcome:
    """Run an async handler that never suspends, as ``_Runner.invoke`` would await it."""
    try:
        coro = call.fn(**kwargs)
        try:
            contextvars.copy_context().run(coro.send, None)  # what a new task would run it in
        except StopIteration as stop:
            value = stop.value
        else:  # pragma: no cover - _never_suspends read the code: it has no await to stop at
            coro.close()
            raise RuntimeError(f"{call.fn!r} suspended although its code holds no await")
    except Exception as exc:
        return call.fail(exc)
    try:
        return call.finish(value)
    except Exception as exc:
        return call.fail(exc)


# --------------------------------------------------------------------------
# stdio
# --------------------------------------------------------------------------


class _StdioRunner(_Runner):
    def __init__(self, server: Server, conn: StdioServerConnection, tg: anyio.abc.TaskGroup, trace: bool):
        super().__init__(server, conn, conn.session, tg, trace)
        self.conn = conn
        # Payloads for the write loop, in the core's order; None: close once they are out.  A
        # list and an event rather than a memory stream: the write loop takes everything queued
        # at once, and waking it costs one event per batch instead of a checkpoint per item.
        self.queued: list[bytes | None] = []
        self.wake: anyio.Event | None = None  # set by perform while the write loop waits
        self.unwritten: list[str | int] = []  # ended requests whose answers are queued, not yet written
        self.nowait: Callable[[bytes], bool] | None = None  # the writer's write_nowait, if it has one
        self.kicking = False  # a _write_now is scheduled

    def clock_in(self) -> None:
        self.conn.session.advance(time.monotonic())

    def request_ended(self, watch: RequestWatch, request_id: str | int) -> None:
        self.unwritten.append(request_id)  # the write loop tells the watch once the answer is out

    def perform(self, action: object) -> None:
        if isinstance(action, Send):
            self.queued.append(action.payload)
        elif isinstance(action, Close):
            self.queued.append(None)

    def flush(self) -> None:
        super().flush()
        if self.queued:
            self._kick()

    def _kick(self) -> None:
        """Write what is queued now if the writer can take it at once; else wake the write loop.

        Only while the write loop waits (it writes in order; one writer at a
        time) and only bytes, never a Close: written here, an answer costs
        no wake-up of another task.
        """
        if self.wake is None or self.kicking:
            return  # the write loop is writing (it takes the rest when done), or a write is due
        if self.nowait is not None:
            # At the end of the chunk being read (or once the loop has run what is ready): one
            # write for everything queued by then, as the write loop would, without its wake-up.
            self.kicking = True
            _batch.due(self._write_now, stream=True)
            return
        self._wake_writer()

    def _write_now(self) -> None:
        self.kicking = False
        if not self.queued or self.wake is None:
            return
        nowait = self.nowait
        if nowait is not None and None not in self.queued and nowait(b"".join(self.queued)):  # type: ignore[arg-type]
            self.queued = []
            written, self.unwritten = self.unwritten, []
            if self.watch is not None:
                for request_id in written:
                    self.watch.ended(request_id)
            return
        self._wake_writer()

    def _wake_writer(self) -> None:
        wake = self.wake
        if wake is not None:
            self.wake = None
            wake.set()

    async def read_loop(self, reader: ByteReader) -> None:
        push = getattr(reader, "push", None)
        if push is not None:  # chunks come in the pipe's callback; receive waits for the end alone
            push(self.take)
        while True:
            data = await reader.receive()
            self.take(data)
            if not data:
                return

    def take(self, data: bytes) -> None:
        """One chunk of input (``b""``: the end of it)."""
        # What it makes (answers, upstream calls) is written once, at the end; a lone request (the
        # host makes one call at a time) goes upstream at once.
        with _batch.reading(alone=not self.deferred and data.count(b"\n") == 1):
            self.conn.receive_data(data, now=time.monotonic())
            self.flush()

    async def write_loop(self, writer: ByteWriter) -> None:
        self.nowait = getattr(writer, "write_nowait", None)  # only asyncio's writers have one
        while True:
            if not self.queued:
                wake = self.wake = anyio.Event()
                await wake.wait()
                continue
            chunks, self.queued = self.queued, []
            closing = None in chunks
            if closing:
                chunks = chunks[: chunks.index(None)]  # nothing queued after Close is written
            data = b"".join(chunks)  # type: ignore[arg-type]  # no None left
            # Every id here had its answer queued before it was listed, so the answer is in
            # ``data`` or was written before it.
            written, self.unwritten = self.unwritten, []
            try:
                if data:
                    await writer.send(data)
            except OSError:
                # The peer stopped reading: nothing more can reach it.
                self.tg.cancel_scope.cancel()
                return
            if self.watch is not None:
                for request_id in written:
                    self.watch.ended(request_id)
            if closing:
                await writer.aclose()
                self.tg.cancel_scope.cancel()
                return


async def serve_connection(
    server: Server,
    conn: StdioServerConnection,
    reader: ByteReader,
    writer: ByteWriter,
    *,
    trace: bool = False,
    watch: RequestWatch | None = None,
) -> None:
    """Serve one stdio connection until the peer closes it and the core says Close.

    ``watch`` is told of every request the application runs, when it starts
    and once it has been answered (the daemon mirrors them for its shim).
    """
    runner: _StdioRunner | None = None
    try:
        async with anyio.create_task_group() as tg:
            runner = _StdioRunner(server, conn, tg, trace)
            runner.watch = watch
            unsubscribe = server.add_listener(change_listener(runner.post, conn.session))
            try:
                tg.start_soon(runner.write_loop, writer)
                tg.start_soon(runner.timer_loop)
                await runner.read_loop(reader)
                # End of input: the write loop ends the task group once the core
                # has drained and said Close.
            finally:
                unsubscribe()
    finally:
        if runner is not None:  # the connection is over: nothing still deferred can be answered
            runner.abandon_deferred()


# --------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppResponse:
    """The answer to an ``AppRequest``: a whole body, or (``stream``) chunks written as they come."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    stream: AsyncIterator[bytes] | None = None


AppHandler = Callable[[AppRequest], Awaitable[AppResponse]]
"""Serves ``HttpConfig.app_paths`` next to MCP on the same listener (the daemon's /v1)."""


class _Outbox(Protocol):
    def send_nowait(self, item: bytes | None) -> None: ...


class _HttpRunner(_Runner):
    def __init__(
        self, server: Server, http: HttpServer, tg: anyio.abc.TaskGroup, trace: bool, app: AppHandler | None
    ):
        super().__init__(server, http, http, tg, trace)
        self.http = http
        self.app = app
        self.outboxes: dict[int, _Outbox] = {}  # by connection: bytes to write; None: close once written
        self.closed: anyio.Event | None = None  # set by each asyncio connection's end while the server stops
        self.ids = itertools.count(1)

    async def run_app(self, request: AppRequest) -> None:
        """One application request: its handler's answer, or a JSON 500 that says what broke."""
        try:
            if self.app is None:
                raise LookupError(f"nothing serves {request.target} here")
            answer = await self.app(request)
        except Exception as exc:  # a handler's bug costs its request, not the listener
            body = orjson.dumps({"error": {"code": "internal", "message": f"{type(exc).__name__}: {exc}"}})
            answer = AppResponse(500, body)
        self.clock_in()
        if answer.stream is None:
            self.http.app_respond(
                request.conn,
                answer.status,
                answer.body,
                content_type=answer.content_type,
                headers=answer.headers,
            )
            self.flush()
            return
        self.http.app_respond_start(
            request.conn, answer.status, content_type=answer.content_type, headers=answer.headers
        )
        self.flush()
        try:
            async for chunk in answer.stream:
                if request.conn not in self.outboxes:
                    break  # the client went away
                self.http.app_respond_data(request.conn, chunk)
                self.flush()
        finally:
            self.http.app_respond_end(request.conn)
            self.flush()
            aclose = getattr(answer.stream, "aclose", None)
            if aclose is not None:  # the stream may hold a subscription: let go of it
                with anyio.CancelScope(shield=True):
                    await aclose()

    def clock_in(self) -> None:
        self.http.advance(time.monotonic())

    def perform(self, action: object) -> None:
        if isinstance(action, SendBytes):
            box = self.outboxes.get(action.conn)
            if box is not None:
                box.send_nowait(action.data)
        elif isinstance(action, CloseConnection):
            box = self.outboxes.get(action.conn)
            if box is not None:
                box.send_nowait(None)
        elif isinstance(action, AppRequest):
            self.tg.start_soon(self.run_app, action)

    async def handle(self, stream: anyio.abc.ByteStream) -> None:
        """One accepted connection: read into the core; a writer task drains its bytes."""
        conn = next(self.ids)
        send, receive = anyio.create_memory_object_stream[bytes | None](math.inf)
        self.outboxes[conn] = send
        self.http.connection_made(conn, time.monotonic())
        self.flush()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._write, conn, stream, receive, tg.cancel_scope)
            try:
                while True:
                    try:
                        data = await stream.receive(65536)
                    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        data = b""
                    with _batch.reading():  # the upstream calls it makes: written once, at the end
                        self.http.receive_data(conn, data, time.monotonic())
                        self.flush()
                    if not data:
                        break
                # The client finished sending; keep writing until the core closes.
                await anyio.sleep_forever()
            finally:
                self.outboxes.pop(conn, None)
                self.http.connection_lost(conn, time.monotonic())
                self.flush()

    async def _write(
        self,
        conn: int,
        stream: anyio.abc.ByteStream,
        inbox: MemoryObjectReceiveStream[bytes | None],
        scope: anyio.CancelScope,
    ) -> None:
        try:
            async for data in inbox:
                chunks = [data]
                while chunks[-1] is not None:
                    try:
                        chunks.append(inbox.receive_nowait())
                    except anyio.WouldBlock:
                        break
                payload = b"".join(c for c in chunks if c is not None)
                if payload:
                    await stream.send(payload)
                if chunks[-1] is None:
                    break
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            with anyio.CancelScope(shield=True):
                await stream.aclose()
            scope.cancel()


class _TransportBox:
    """An asyncio connection's outbox: bytes written once per chunk of input (or loop turn), then closed."""

    __slots__ = ("closing", "pending", "scheduled", "transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.pending: list[bytes] = []
        self.closing = False
        self.scheduled = False

    def send_nowait(self, item: bytes | None) -> None:
        if item is None:
            self.closing = True
        else:
            self.pending.append(item)
        if not self.scheduled:
            self.scheduled = True
            _batch.due(self.write)

    def write(self) -> None:
        self.scheduled = False
        transport = self.transport
        if self.pending and not transport.is_closing():
            data = b"".join(self.pending)
            self.pending.clear()
            transport.write(data)  # what the socket does not take now, asyncio's transport keeps
        if self.closing:
            transport.close()  # after what is buffered is written


class _HttpProtocol(asyncio.Protocol):
    """One connection accepted by asyncio: read in the transport's callback, no task per connection.

    The same steps as ``_HttpRunner.handle``: the bytes to the core, the
    core's actions carried out; at end of input the connection stays open
    for the core to finish writing and close it.
    """

    def __init__(self, runner: _HttpRunner) -> None:
        self.runner = runner
        self.conn = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        runner = self.runner
        self.conn = next(runner.ids)
        # A stream transport (uvloop's are not asyncio.Transport subclasses, but have its methods).
        runner.outboxes[self.conn] = _TransportBox(transport)  # type: ignore[arg-type]
        runner.http.connection_made(self.conn, time.monotonic())
        runner.flush()

    def data_received(self, data: bytes) -> None:
        runner = self.runner
        with _batch.reading():  # the answers and upstream calls it makes: written once, at the end
            runner.http.receive_data(self.conn, data, time.monotonic())
            runner.flush()

    def eof_received(self) -> bool:
        runner = self.runner
        runner.http.receive_data(self.conn, b"", time.monotonic())
        runner.flush()
        return True  # keep writing until the core closes

    def connection_lost(self, exc: Exception | None) -> None:
        runner = self.runner
        if runner.outboxes.pop(self.conn, None) is not None:
            runner.http.connection_lost(self.conn, time.monotonic())
            runner.flush()
        if runner.closed is not None:
            runner.closed.set()


async def _close_served(runner: _HttpRunner, servers: list[asyncio.AbstractServer]) -> None:
    """Stop accepting, close every connection (what is queued written first), and wait until each is closed.

    asyncio closes a transport's socket on the loop's next turn
    (``connection_lost``): without the wait a server that stops with its
    loop would leave its clients' connections open, unanswered.
    """
    for served in servers:
        served.close()
    boxes = [box for box in runner.outboxes.values() if isinstance(box, _TransportBox)]
    for box in boxes:
        box.write()
        box.transport.close()
    closed = runner.closed = anyio.Event()
    with anyio.move_on_after(2.0):  # a close asyncio does not report: give up, the loop ends anyway
        while any(isinstance(box, _TransportBox) for box in runner.outboxes.values()):
            await closed.wait()
            closed = runner.closed = anyio.Event()


def _raw_sockets(listeners: list[anyio.abc.Listener[anyio.abc.ByteStream]]) -> list[Any] | None:
    """The listening sockets, when asyncio can serve them itself: plain sockets on asyncio, else ``None``."""
    try:
        if sniffio.current_async_library() != "asyncio":
            return None
    except sniffio.AsyncLibraryNotFoundError:
        return None
    sockets = []
    for listener in listeners:
        if not isinstance(listener, anyio.abc.SocketListener):
            return None  # TLS, or another wrapper: anyio serves it
        sockets.append(listener.extra(anyio.abc.SocketAttribute.raw_socket))
    return sockets


async def serve_http(
    server: Server,
    http: HttpServer,
    listeners: list[anyio.abc.Listener[anyio.abc.ByteStream]],
    *,
    trace: bool = False,
    started: Callable[[], None] | None = None,
    app: AppHandler | None = None,
) -> None:
    """Serve ``http`` on ``listeners`` until cancelled; ``app`` answers ``HttpConfig.app_paths``.

    On asyncio, plain sockets are accepted and read by asyncio itself
    (``_HttpProtocol``: a callback per chunk rather than a task per
    connection, and writes made once per chunk); on trio, and for TLS, by
    anyio (``_HttpRunner.handle``).
    """
    raw = _raw_sockets(listeners)
    servers: list[asyncio.AbstractServer] = []
    async with anyio.create_task_group() as tg:
        runner = _HttpRunner(server, http, tg, trace, app)
        unsubscribe = server.add_listener(change_listener(runner.post, http))
        try:
            tg.start_soon(runner.timer_loop)
            if raw is not None:
                loop = asyncio.get_running_loop()
                for sock in raw:
                    factory = functools.partial(_HttpProtocol, runner)
                    if sock.family == socket.AF_UNIX:
                        servers.append(await loop.create_unix_server(factory, sock=sock))
                    else:
                        servers.append(await loop.create_server(factory, sock=sock))
            else:
                for listener in listeners:
                    tg.start_soon(listener.serve, runner.handle)
            if started is not None:
                started()
            await anyio.sleep_forever()
        finally:
            unsubscribe()
            if raw is not None:
                with anyio.CancelScope(shield=True):
                    await _close_served(runner, servers)
            runner.abandon_deferred()
