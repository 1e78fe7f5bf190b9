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

``_Runner``, here, is the part both transports share (requests, timers,
posting from threads); ``serve_connection`` (``_async_stdio``) runs it over
one stdio connection and ``serve_http`` (``_async_http``) over sockets
accepted by anyio listeners.
"""

from __future__ import annotations

import contextvars
import dis
import functools
import inspect
import itertools
import threading
import time
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from ..core import INTERNAL_ERROR, Answered, CancelRequest, HandleRequest, SessionEnded, Subscribed, Trace
from ..core.rounds import Question
from ..server import Call, Context, Deferred, Outcome, Pending, Server
from . import _batch
from ._common import Core, PostingSink, Waiters, abandon_deferred, apply_outcome, call_kwargs, trace_to_stderr

__all__ = ["ByteReader", "ByteWriter", "RequestWatch"]


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


class RequestRelay(Protocol):
    """An application that can send some requests on by itself, answering them through the runner.

    ``take`` is offered each request before the server routes it: ``True``
    when the relay took it (it answers with ``answer_relayed`` on the
    runner), ``False`` to leave it to the server.  A request the relay took is the relay's until it answers it, or
    until the runner asks for it back with ``promote(key)`` (the key the
    relay put in ``runner.relayed``): then the relay makes it a request the
    server answers through a ``Pending`` (``runner.defer_relayed``), as if
    it had been routed so from the start.  A gateway's relay lane
    (spec/gateway.md §11).
    """

    def take(self, runner: Any, action: HandleRequest) -> bool: ...

    def promote(self, key: Any) -> None: ...


class _Machine(Protocol):
    def next_actions(self) -> Sequence[object]: ...

    def get_timer(self) -> float | None: ...

    def handle_timer(self, now: float) -> None: ...


_connections = itertools.count(1)


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
        self.relay: RequestRelay | None = server.relay_lane()  # offered each request first
        self.relayed: dict[int, Any] = {}  # token -> the relay's key, for requests the relay took

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
                if action.token in self.relayed:  # the relay's: handed back first, then dropped as any
                    self._promote(action.token)
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
        relay = self.relay
        if relay is not None and token not in self.cancelled and relay.take(self, action):
            if self.watch is not None:
                self.watch.started(action.context.request_id)
            return
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

    def defer_relayed(self, action: HandleRequest) -> Pending:
        """A request the relay took, now answered through a ``Pending`` as a ``Deferred``'s (``promote``).

        Its watch was told it started when the relay took it.
        """
        token = action.token
        pending = Pending.of(
            action.context, self.sink, self.connection, functools.partial(self._settle, token)
        )
        self.deferred[token] = pending
        return pending

    def _promote(self, token: int) -> None:
        """Ask the relay for request ``token`` back: from now on it is a deferred request."""
        key = self.relayed.pop(token)
        assert self.relay is not None  # only a relay puts keys in ``relayed``
        self.relay.promote(key)

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
        self._answered()

    def answer_relayed(self, action: HandleRequest, result: Mapping[str, Any]) -> None:
        """The relay's answer to ``action``, a request it took (``RequestRelay``): answered as any."""
        del self.relayed[action.token]
        self.clock_in()
        self.core.respond(action.token, result)
        if self.watch is not None:
            self.request_ended(self.watch, action.context.request_id)
        self._answered()

    def _answered(self) -> None:
        """An answer is in the core: drained now, or once at the end of the chunk of answers being read."""
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
        """The connection is gone: every deferred request still open is cancelled for its server.

        A request the relay holds is handed back first, and cancelled as any.
        """
        for token in list(self.relayed):
            self._promote(token)
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
