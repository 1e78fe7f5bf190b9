"""The driver loop over the gateway's middle: host calls routed through ``mcpx.core`` Router.

``Router`` (mcpx/core/router.py) decides what happens to a host's call once
the gateway has chosen the upstream that serves it; this module carries its
actions out, with no task per call.  A host request the gateway routes
upstream arrives as a ``Pending`` (the server driver's handle for a
``Deferred`` answer); ``Routes.forward`` asks the pool for an instance, and
when the pool grants one (at once when it runs and has room, later when it
starts) hands the call to the router.  The upstream's answer, read by the
instance's ``Client`` and fed to the router (``Client.link``), settles the
``Pending``: the host's driver writes it.  spec/gateway.md §11.

Which calls take this way: a host's ``tools/call``, ``prompts/get``,
``resources/read``, subscriptions and completions to a stdio upstream, and
``/v1/call`` (``mcpx call``) and ``/v1/complete`` to one: a call without a
host, which ``Routes.call`` carries as a host of its own that has nobody
to ask (``_NoHost``).  The rest keep the awaited path
(``Upstreams.request``): catalog reads, a host's call it asked to run as an
mcpx task, HTTP upstreams (a request per stream, sessions renewed), and, while
``transport.ssePollAfter`` is set, every host call (the host's stream is
closed while it runs).

Keys: the router knows a host call as ``((connection, scope), token)``: the
driver's connection, the host's pool scope (spec/gateway.md §3), and the
request's token, unique on its connection.  The pool knows it by its own
call id.  Rules carried out here, each with its owner:

* **Time.**  The pool times the call (``pool.callTimeout``, from the
  request), pausing while a question is out (``question_pending``); the
  router is given no timeout.  A pool timeout cancels the call upstream
  (``host_cancelled``) and answers the host with the pool's error.
* **Questions** (``AskHost``) are put to the host through its request's
  context, in a task of their own (a person may take minutes); the answer
  or refusal goes back to the router, unless the router withdrew the
  question meanwhile (``WithdrawAsk`` cancels the task).
* **A task** the upstream answers with (2026-07-28, ``resultType: "task"``)
  is followed to its end in a task of its own, as the awaited path does;
  so is a 2025-11-25 upstream's tool that runs only as a task.
* **Cancellation**: the host's cancel (``Pending.on_cancel``) cancels the
  call upstream and releases its instance; nothing is answered.
* **A lost instance** fails its calls with the server's name and last
  words, and tells the pool at once.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from ..client import Client, McpCallError
from ..core import INTERNAL_ERROR, INVALID_PARAMS, LocalProtocolError
from ..core.actions import Answered, HandleRequest, build_request_context
from ..core.client_session import MessageTooLarge, Progress, ServerNotification
from ..core.revisions import NEWEST
from ..core.rounds import Question
from ..core.router import (
    AbandonUpstream,
    AnswerHost,
    AskHost,
    NotifyHost,
    Router,
    SendUpstream,
    UpstreamNotification,
    UpstreamOutcome,
    WithdrawAsk,
    relayed,
    upstream_params,
)
from ..drivers import _batch
from ..server import Context, Outcome, Pending
from ._calls import ask_round, may_need_a_core_task, needs_core_task, run_core_task, task_only_now

if TYPE_CHECKING:
    from ..core.gateway import Route
    from ._instances import _Instances
    from ._server import GatewayServer

__all__ = ["RelayLane", "Routes"]

REQUEST_SCOPE_PREFIX = "request:"
"""The scope keys of requests that name no host (a 2026-07-28 request without a session)."""
HOSTLESS_SCOPE_PREFIX = "v1:"
"""The scope keys of calls without a host (``/v1/call``, ``mcpx call``): each a connection of its own."""
WARM_UP_SCOPE = "mcpx/warm-up"
"""The scope key of the daemon's start-up listing: no host is behind it."""

_HostKey = tuple[int, str]  # (the driver's connection, the host's pool scope)
_hostless_connections = itertools.count(
    -1, -1
)  # connections of calls without a host: never a driver's (those count up)


class _NoHost:
    """The ``RequestSink`` of a call without a host (``/v1/call``, ``mcpx call``): its progress to the caller.

    Nobody can be asked anything: a question is refused upstream with an
    error that says so (the broker is where such questions will wait).  Log
    messages have nobody to reach.
    """

    __slots__ = ("on_progress",)

    def __init__(self, on_progress: Callable[[Progress], None] | None) -> None:
        self.on_progress = on_progress

    def progress(self, token: int, progress: float, total: float | None, message: str | None) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress(handle=token, progress=progress, total=total, message=message))

    def log(self, token: int, level: str, data: Any, logger: str | None) -> None:
        pass

    def close_stream(self, token: int) -> None:
        pass

    def promote(self, token: int) -> None:
        pass

    async def ask(self, token: int, questions: list[Question]) -> Answered | None:
        raise _nobody_to_ask(questions)

    def ask_blocking(self, token: int, questions: list[Question]) -> Answered | None:
        raise _nobody_to_ask(questions)


def _nobody_to_ask(questions: list[Question]) -> McpCallError:
    asked = ", ".join(sorted({q.method for q in questions}))
    return McpCallError(
        {
            "code": INTERNAL_ERROR,
            "message": f"the server asked {asked} during a call through /v1 (or mcpx call), which has no "
            "host to ask; not asked. Call the tool from an MCP host that can answer it",
        }
    )


class _Routed:
    """One host call on its way: from the pool's grant to the host's answer."""

    __slots__ = (
        "asks",
        "call_id",
        "finish",
        "follow",
        "host",
        "instance",
        "method",
        "params",
        "pending",
        "per_request",
        "reword",
        "routed",
        "scope_key",
        "server",
        "timeout",
        "token",
        "verbatim",
    )

    def __init__(
        self,
        call_id: str,
        pending: Pending,
        host: _HostKey,
        server: str,
        method: str,
        params: Mapping[str, Any],
        finish: Callable[[Mapping[str, Any]], Any] | None,
        scope_key: str,
        per_request: bool,
        timeout: float | None,
        verbatim: bool,
        reword: Callable[[int, str], str] | None,
    ) -> None:
        self.call_id = call_id
        self.pending = pending
        self.token = pending.token  # the pending request's
        self.host = host
        self.server = server
        self.method = method
        self.params = params
        self.finish = finish  # the upstream's result as the host gets it; ``None``: as it is
        self.scope_key = scope_key
        # A 2026-07-28 request over HTTP, or a call without a host: its scope ends with it.
        self.per_request = per_request
        self.timeout = timeout  # the caller's own bound, under pool.callTimeout
        self.verbatim = verbatim  # the upstream's result with its envelope (a caller that is no MCP host)
        self.reword = reword  # an upstream error's message for the host
        self.instance: int | None = None
        self.routed = False  # the router holds it
        self.asks: dict[int, anyio.CancelScope] | None = None  # questions out to the host (made at the first)
        self.follow: anyio.CancelScope | None = None  # an upstream task being followed, or a core task run

    def finished(self, result: Mapping[str, Any]) -> Mapping[str, Any]:
        """The upstream's result as the host gets it."""
        finish = self.finish
        return result if finish is None else finish(result)


class _Relayed:
    """A host call the relay lane sent: its host's runner and request, its pool call, where it runs."""

    __slots__ = (
        "action",
        "call_id",
        "finish",
        "instance",
        "params",
        "per_request",
        "reword",
        "runner",
        "scope_key",
        "server",
    )

    def __init__(
        self,
        runner: Any,
        action: HandleRequest,
        call_id: str,
        instance: int,
        server: str,
        params: Mapping[str, Any],
        finish: Callable[[Mapping[str, Any]], Any] | None,
        reword: Callable[[int, str], str] | None,
        scope_key: str,
        per_request: bool,
    ) -> None:
        self.runner = runner  # the host's runner, stdio or HTTP
        self.action = action
        self.call_id = call_id
        self.instance = instance
        self.server = server
        self.params = params  # as sent upstream
        self.finish = finish
        self.reword = reword
        self.scope_key = scope_key
        self.per_request = per_request  # its scope ends with it (a 2026-07-28 request over HTTP)


class RelayLane:
    """``RequestRelay`` (mcpx/drivers/_async.py) for the hosts one gateway view serves (stdio and ``/mcp``).

    A host's ``tools/call`` the view routes to a running stdio instance with
    room (``GatewayServer.relay_route``, ``Pool.acquire_now``) goes to the
    router at once, without the server's ``Deferred``, a ``Pending`` or a
    ``_Routed``: the router's bytes are written to the instance, and its
    plain answer (``Router.take_answer``) is the host's answer, written by
    the host's runner.  Anything else about such a call — a question, a log
    message, an error, a cancel, a timeout, a lost instance — first makes it
    a routed call like any other (``Routes.promote``), and the usual rules
    carry it from there.  spec/gateway.md §11.
    """

    __slots__ = ("routes", "view")

    def __init__(self, view: GatewayServer, routes: Routes) -> None:
        self.view = view
        self.routes = routes

    def take(self, runner: Any, action: HandleRequest) -> bool:
        if action.method != "tools/call" or action.context.progress_token is not None:
            return False
        target = self.view.relay_route(action.params, action.context)
        return target is not None and self.routes.relay(runner, action, *target)

    def promote(self, key: Any) -> None:
        self.routes.promote(key)


class _Link:
    """``UpstreamLink`` for one instance: its client's reads go to the router."""

    __slots__ = ("instance", "routes")

    def __init__(self, routes: Routes, instance: int) -> None:
        self.routes = routes
        self.instance = instance

    def received(self, obj: Any) -> None:
        routes = self.routes
        router = routes.router
        answer = router.take_answer(self.instance, obj, now=time.monotonic())
        if answer is not None:
            routes.answered_now(*answer)
            if not router.has_actions:
                return
        # What the router makes of a chunk of answers is carried out once, at the chunk's end (the
        # answers it settles are written then in any case); a message read outside one, at once.
        if not routes.dispatch_due:
            routes.dispatch_due = True
            if not _batch.at_chunk_end(routes.dispatch_at_chunk_end):
                routes.dispatch_at_chunk_end()

    def drain(self) -> None:
        routes = self.routes
        if self.instance in routes.clients:
            routes.router.drain(self.instance)
            routes.dispatch()

    def lost(self, reason: str) -> None:
        self.routes.lost(self.instance, reason)


class Routes:
    """Host calls through the router to the linked instances of ``upstreams`` (see the module docstring)."""

    def __init__(self, upstreams: _Instances, capabilities: Mapping[str, Any]) -> None:
        self.upstreams = upstreams
        self.router = Router(capabilities=capabilities)
        self.clients: dict[Hashable, Client] = {}  # linked instances, by instance id
        self._servers: dict[int, str] = {}  # instance -> its server's name
        self._may_task: set[int] = set()  # 2025-11-25 instances, whose tools may run only as tasks
        self._calls: dict[str, _Routed] = {}  # by pool call id
        self._by_key: dict[tuple[_HostKey, int], _Routed] = {}  # by the router's key
        self._asks: dict[int, _Routed] = {}  # ask id -> its call
        self._relayed: dict[tuple[_HostKey, int], _Relayed] = {}  # the relay lane's calls, by router key
        self._relay_calls: dict[str, tuple[_HostKey, int]] = {}  # their router keys, by pool call id
        self._ids = itertools.count(1)
        self._dispatching = False
        self.dispatch_due = False  # a dispatch is due at the end of the chunk being read (_Link)
        self._written: set[Client] = set()  # clients sent to during this dispatch

    @property
    def in_flight(self) -> int:
        return len(self._calls) + len(self._relayed)

    def owns(self, call_id: object) -> bool:
        return isinstance(call_id, str) and (call_id in self._calls or call_id in self._relay_calls)

    # -- instances -------------------------------------------------------------------------

    def link(self, instance: int, server: str, client: Client) -> None:
        """A started instance whose client the router drives from now on."""
        self.clients[instance] = client
        self._servers[instance] = server
        if may_need_a_core_task(client, "tools/call"):  # its revision is fixed once linked
            self._may_task.add(instance)
        self.router.add_upstream(instance, client.session)
        client.link(_Link(self, instance))
        self.dispatch()

    def lost(self, instance: int, reason: str) -> None:
        """``instance``'s output ended: its calls fail naming the server; the pool hears of it at once."""
        if self.clients.pop(instance, None) is None:
            return
        server = self._servers.pop(instance)
        self._may_task.discard(instance)
        self.router.upstream_lost(instance, f"server {server!r}: {reason}", now=time.monotonic())
        self.upstreams.instance_lost(instance, f"server {server!r} exited; {reason}")
        self.dispatch()

    # -- host calls --------------------------------------------------------------------------

    def forward(
        self,
        pending: Pending,
        server: str,
        method: str,
        params: Mapping[str, Any],
        finish: Callable[[Mapping[str, Any]], Any] | None,
        scope_key: str,
        per_request: bool,
        timeout: float | None = None,
        verbatim: bool = False,
        reword: Callable[[int, str], str] | None = None,
    ) -> None:
        """Route the host's request to an instance of ``server``; ``pending`` is settled with its answer.

        ``finish`` makes the host's result of the upstream's (``None``: the
        upstream's as it is); ``timeout`` lowers ``pool.callTimeout`` for
        this call (never raises it); ``verbatim`` keeps the upstream's result
        envelope; ``reword`` (``Route.reword``) gives the message of an
        upstream's JSON-RPC error.
        """
        call_id = f"r{next(self._ids)}"
        host: _HostKey = (pending.connection, scope_key)
        rec = _Routed(
            call_id,
            pending,
            host,
            server,
            method,
            params,
            finish,
            scope_key,
            per_request,
            timeout,
            verbatim,
            reword,
        )
        self._calls[call_id] = rec
        self._by_key[(host, rec.token)] = rec
        pending.on_cancel = functools.partial(self._host_cancelled, rec)
        instance = self.upstreams.acquire(server, scope_key, call_id, timeout, pending.request.revision)
        if instance is not None:  # the usual call: a running instance with room (else granted() later)
            self._granted(rec, instance)

    def start(self, route: Route, scope_key: str, per_request: bool, pending: Pending) -> None:
        """``forward`` a ``Route`` the gateway's surface decided (``Deferred.start``, with the route bound)."""
        self.forward(
            pending,
            route.server,
            route.method,
            route.params,
            route.finish if route.rewrite_uris else None,  # else the result is the upstream's as it is
            scope_key,
            per_request,
            reword=route.reword if route.unlisted is not None else None,
        )

    async def call(
        self,
        server: str,
        method: str,
        params: Mapping[str, Any],
        *,
        timeout: float | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> Mapping[str, Any]:
        """A call without a host (``/v1/call``, ``/v1/complete``): the upstream's result, or ``McpCallError``.

        The result is the upstream's, verbatim (``/v1/call`` carries it so,
        envelope and all).  The call is a host of its own to the router and
        the pool: a connection nobody else has (so a connection-scoped server gives it an instance
        that ends with it), declaring no capabilities (a 2026-07-28 upstream
        is told so; ``roots/list`` is answered by mcpx).  It always asks
        for progress, as the awaited path does: ``/v1/events`` shows every
        call's, and ``on_progress`` gets it too.  Cancelled, the call is
        cancelled upstream and its instance released.
        """
        connection = next(_hostless_connections)
        request = build_request_context(1, f"v1{connection}", method, NEWEST, {}, None, None, "v1", {}, None)
        done = anyio.Event()
        answers: list[Outcome] = []

        def settle(outcome: Outcome) -> None:
            answers.append(outcome)
            done.set()

        pending = Pending(Context(request, _NoHost(on_progress)), connection, settle)
        self.forward(
            pending,
            server,
            method,
            params,
            None,
            f"{HOSTLESS_SCOPE_PREFIX}{-connection}",
            True,
            timeout=timeout,
            verbatim=True,
        )
        try:
            await done.wait()
        except anyio.get_cancelled_exc_class():
            pending._cancel()  # as a driver does when its peer gives up
            raise
        outcome = answers[0]
        if outcome.error is not None:
            code, message, data = outcome.error
            raise McpCallError(
                {"code": code, "message": message, **({"data": data} if data is not None else {})}
            )
        assert outcome.result is not None
        return outcome.result

    def granted(self, call_id: str, instance: int) -> None:
        """The pool gave the call ``instance``: it goes upstream."""
        rec = self._calls.get(call_id)
        if rec is not None:
            self._granted(rec, instance)

    def _granted(self, rec: _Routed, instance: int) -> None:
        rec.instance = instance
        client = self.clients.get(instance)
        if client is None or client.session.closed:
            self.upstreams.instance_lost(instance, f"server {rec.server!r} exited")
            self._end(rec, _went_away(rec.server))
            return
        # ``_may_task``: the instance's revision could have such tools (``may_need_a_core_task``).
        if (
            instance in self._may_task
            and rec.method == "tools/call"
            and task_only_now(client, rec.params) is not False
        ):
            # A 2025-11-25 tool that runs only as a task, or one whose tools are not kept yet.
            self._spawn(rec, self._maybe_core_task(rec, client))
            return
        self._send(rec)

    def _send(self, rec: _Routed) -> None:
        request = rec.pending.request
        try:
            self.router.host_request(
                rec.host,
                rec.token,
                rec.method,
                rec.params,
                upstream=rec.instance,
                host_capabilities=request.client_capabilities,
                progress_token=request.progress_token,
                now=time.monotonic(),
                verbatim=rec.verbatim,
            )
        except LocalProtocolError as exc:  # the session cannot send: the server went away
            self._end(
                rec,
                Outcome.failure(
                    INTERNAL_ERROR, f"server {rec.server!r}: {exc}", {"server": rec.server, "kind": "crashed"}
                ),
            )
            return
        except MessageTooLarge as exc:  # mcpx's additions (or the host's own bytes) past the server's limit
            data = {"server": rec.server, "kind": "too-large", "size": exc.size, "limit": exc.limit}
            self._end(rec, Outcome.failure(INVALID_PARAMS, f"Invalid params: {exc}", data))
            return
        except ValueError as exc:  # params no JSON text can carry
            self._end(rec, Outcome.failure(INVALID_PARAMS, f"Invalid params: {exc}"))
            return
        rec.routed = True
        self.dispatch()

    # -- the relay lane ---------------------------------------------------------------------------

    def relay(
        self,
        runner: Any,
        action: HandleRequest,
        server: str,
        params: Mapping[str, Any],
        finish: Callable[[Mapping[str, Any]], Any] | None,
        reword: Callable[[int, str], str] | None,
        scope_key: str,
        per_request: bool,
    ) -> bool:
        """Send the host's call on ``RelayLane``'s way, if an instance takes it at once; ``False``: nothing done.

        The usual way is left to what it alone does: waiting for an
        instance, a 2025-11-25 tool that may run only as a task, a call the
        router cannot send as it is (too large, not JSON; the usual way says
        so).
        """
        call_id = f"r{next(self._ids)}"
        instance = self.upstreams.acquire_now(server, scope_key, call_id, action.context.revision)
        if instance is None:
            return False
        client = self.clients.get(instance)
        token = action.token
        host: _HostKey = (runner.connection, scope_key)
        sent = None
        if (
            client is not None
            and not client.session.closed
            and (instance not in self._may_task or task_only_now(client, params) is False)
        ):
            try:
                sent = self.router.host_request_now(
                    host,
                    token,
                    "tools/call",
                    params,
                    upstream=instance,
                    host_capabilities=action.context.client_capabilities,
                    now=time.monotonic(),
                )
            except (LocalProtocolError, MessageTooLarge, ValueError):
                sent = None
        if sent is None:
            self.upstreams.release(call_id, scope_key if per_request else None)
            return False
        key = (host, token)
        self._relayed[key] = _Relayed(
            runner, action, call_id, instance, server, params, finish, reword, scope_key, per_request
        )
        self._relay_calls[call_id] = key
        runner.relayed[token] = key
        assert client is not None  # it took the call
        client.send_soon(sent[1])  # a linked instance is stdio: one stream
        client.kick()
        return True

    def answered_now(self, host: Hashable, request_id: Any, result: Mapping[str, Any]) -> None:
        """The router's usual answer, handed back (``Router.take_answer``): to the host, its call released."""
        key = (host, request_id)
        relayed_call = self._relayed.pop(key, None)  # type: ignore[arg-type]
        if relayed_call is not None:
            del self._relay_calls[relayed_call.call_id]
            finish = relayed_call.finish
            relayed_call.runner.answer_relayed(
                relayed_call.action, result if finish is None else finish(result)
            )
            self.upstreams.release(
                relayed_call.call_id, relayed_call.scope_key if relayed_call.per_request else None
            )
            return
        rec = self._by_key.get(key)  # type: ignore[arg-type]
        if rec is not None:
            rec.routed = False
            self._end(rec, Outcome.success(rec.finished(result)))

    def promote(self, key: Any) -> _Routed | None:
        """The relay lane's call under router key ``key`` made a routed call: a ``Pending``, a ``_Routed``.

        ``None`` for a key the lane does not hold (answered meanwhile).  The
        host's runner answers it through the ``Pending`` from now on.
        """
        relayed_call = self._relayed.pop(key, None)
        if relayed_call is None:
            return None
        del self._relay_calls[relayed_call.call_id]
        runner, action = relayed_call.runner, relayed_call.action
        runner.relayed.pop(action.token, None)
        pending: Pending = runner.defer_relayed(action)
        rec = _Routed(
            relayed_call.call_id,
            pending,
            key[0],
            relayed_call.server,
            "tools/call",
            relayed_call.params,
            relayed_call.finish,
            relayed_call.scope_key,
            relayed_call.per_request,
            None,
            False,
            relayed_call.reword,
        )
        rec.instance = relayed_call.instance
        rec.routed = True
        self._calls[rec.call_id] = rec
        self._by_key[(rec.host, rec.token)] = rec
        pending.on_cancel = functools.partial(self._host_cancelled, rec)
        return rec

    def _routed(self, key: tuple[_HostKey, int]) -> _Routed | None:
        """The routed call under router key ``key``, the relay lane's made one if need be."""
        rec = self._by_key.get(key)
        return rec if rec is not None or key not in self._relayed else self.promote(key)

    def failed(self, call_id: str, error: Mapping[str, Any]) -> None:
        """The pool ended the call (refused, its instance failed, timed out): the host gets ``error``."""
        rec = self._calls.get(call_id)
        if rec is None:
            relayed_key = self._relay_calls.get(call_id)
            rec = None if relayed_key is None else self.promote(relayed_key)
        if rec is None:
            return
        if rec.routed:
            self.router.host_cancelled(rec.host, rec.token, str(error.get("message", "ended by mcpx")))
        self._end(rec, Outcome.failure(error["code"], error["message"], error.get("data")))
        self.dispatch()

    def _host_cancelled(self, rec: _Routed) -> None:
        """The host cancelled (or its connection ended): cancelled upstream, never answered."""
        if self._calls.get(rec.call_id) is not rec:
            return
        if rec.routed:
            self.router.host_cancelled(rec.host, rec.token, "the host cancelled")
        self._end(rec, None)
        self.dispatch()

    def _end(self, rec: _Routed, outcome: Outcome | None) -> None:
        """Forget ``rec``, release its instance, and answer its host (``None``: nothing to answer)."""
        if self._calls.pop(rec.call_id, None) is None:
            return
        rec.pending.on_cancel = (
            None  # the cycle Pending -> on_cancel -> rec -> Pending, broken: freed at once
        )
        del self._by_key[(rec.host, rec.token)]
        if rec.asks:
            for ask_id, scope in rec.asks.items():
                self._asks.pop(ask_id, None)
                scope.cancel()
            rec.asks.clear()
        if rec.follow is not None:
            rec.follow.cancel()
        if outcome is not None:  # answered first: the release below runs while the host reads it
            rec.pending.settle(outcome)
        self.upstreams.release(rec.call_id, rec.scope_key if rec.per_request else None)

    # -- the router's actions -----------------------------------------------------------------

    def dispatch_at_chunk_end(self) -> None:
        self.dispatch_due = False
        self.dispatch()

    def dispatch(self) -> None:
        """Carry out the router's actions, those they cause included; never re-entered."""
        if self._dispatching:
            return  # the loop below picks up what the nested input queued
        self._dispatching = True
        try:
            while actions := self.router.next_actions():
                for action in actions:
                    self._perform(action)
        finally:
            self._dispatching = False
            if self._written:
                written, self._written = self._written, set()
                for client in written:  # what the router wrote, one write per instance
                    client.kick()

    def _perform(self, action: object) -> None:
        if isinstance(action, SendUpstream):
            client = self.clients.get(action.upstream)
            if client is not None:
                client.send_soon(action.payload)
                self._written.add(client)
        elif isinstance(action, AnswerHost):
            rec = self._routed((action.host, action.request_id))  # type: ignore[arg-type]
            if rec is not None:
                rec.routed = False
                self._answered(rec, action)
        elif isinstance(action, NotifyHost):
            self._notify(action)
        elif isinstance(action, AskHost):
            rec = self._routed((action.host, action.request_id))  # type: ignore[arg-type]
            assert rec is not None  # a question is asked only for a call in flight
            self._ask(rec, action)
        elif isinstance(action, WithdrawAsk):
            rec = self._asks.pop(action.ask_id, None)
            if rec is not None:
                assert rec.asks is not None  # it has this question out
                rec.asks.pop(action.ask_id).cancel()
                self.upstreams.question_pending(rec.call_id, False)
        elif isinstance(action, UpstreamNotification):
            client = self.clients.get(action.upstream)
            if client is not None:  # list changes, resource updates, a copy of each log: the instance's own
                client.take(ServerNotification(method=action.method, params=action.params))
        elif isinstance(action, UpstreamOutcome):
            client = self.clients.get(action.upstream)
            if client is not None:  # one of the client's own requests (a catalog read, a task poll)
                client.take(action.event)
        else:
            assert not isinstance(action, AbandonUpstream), (
                "linked instances are stdio: no streams to abandon"
            )

    def _answered(self, rec: _Routed, answer: AnswerHost) -> None:
        if answer.error is not None:
            error = answer.error
            data = error.get("data")
            if data is None and rec.instance not in self.clients:  # lost: named and kinded, as the pool does
                data = {"server": rec.server, "kind": "crashed"}
            message = error["message"] if rec.reword is None else rec.reword(error["code"], error["message"])
            self._end(rec, Outcome.failure(error["code"], message, data))
            return
        assert answer.result is not None
        result = answer.result
        if result.get("resultType") == "task":  # the upstream made the call a task: follow it to its end
            client = self.clients.get(rec.instance)
            if client is None:
                self._end(rec, _went_away(rec.server))
                return
            self._spawn(rec, self._follow_task(rec, client, result))
            return
        self._end(rec, Outcome.success(rec.finished(result)))

    def _notify(self, note: NotifyHost) -> None:
        host: _HostKey = note.host  # type: ignore[assignment]
        params = note.params
        if note.request_id is not None:  # progress of one call, under the host's own token
            rec = self._routed((host, note.request_id))  # type: ignore[arg-type]
            if rec is not None:
                self.upstreams.published_progress(rec.server, params)
                rec.pending.context.report_progress(
                    params["progress"], params.get("total"), params.get("message")
                )
            return
        # A log message: once to the host, through any of its calls (its level filters).  Looked
        # for among the calls in flight, rather than kept per host on every call: logs are rare.
        rec = next((rec for rec in self._calls.values() if rec.host == host), None)
        if rec is None:  # perhaps a host whose calls the relay lane holds: one of them, routed
            key = next((key for key in self._relayed if key[0] == host), None)
            rec = None if key is None else self.promote(key)
        if rec is not None:
            rec.pending.context.log(params["level"], params.get("data"), params.get("logger"))

    # -- what takes a task: questions, upstream tasks -------------------------------------------

    def _ask(self, rec: _Routed, ask: AskHost) -> None:
        scope = anyio.CancelScope()
        if rec.asks is None:
            rec.asks = {}
        rec.asks[ask.ask_id] = scope
        self._asks[ask.ask_id] = rec
        self.upstreams.question_pending(rec.call_id, True)
        self.upstreams.spawn(self._put_question, rec, ask, scope)

    async def _put_question(self, rec: _Routed, ask: AskHost, scope: anyio.CancelScope) -> None:
        answers: dict[str, Any] | None = None
        refusal: dict[str, Any] | None = None
        with scope:
            try:
                answers = await ask_round(rec.pending.context, ask.requests)
            except McpCallError as exc:
                refusal = {"code": exc.code, "message": exc.message}
                if exc.data is not None:
                    refusal["data"] = exc.data
        if self._asks.get(ask.ask_id) is not rec:
            return  # withdrawn, or its call ended, meanwhile
        del self._asks[ask.ask_id]
        assert rec.asks is not None  # it has this question out
        del rec.asks[ask.ask_id]
        self.upstreams.question_pending(rec.call_id, False)
        now = time.monotonic()
        try:
            if refusal is not None or answers is None:
                self.router.host_refused(rec.host, ask.ask_id, refusal or _NOT_ANSWERED, now=now)
            else:
                self.router.host_answered(rec.host, ask.ask_id, answers, now=now)
        except LocalProtocolError as exc:  # answers the router cannot carry: refused instead
            self.router.host_refused(
                rec.host, ask.ask_id, {"code": INTERNAL_ERROR, "message": str(exc)}, now=now
            )
        self.dispatch()

    def _spawn(self, rec: _Routed, work: Awaitable[Outcome | None]) -> None:
        rec.follow = anyio.CancelScope()
        self.upstreams.spawn(self._run, rec, work, rec.follow)

    async def _run(self, rec: _Routed, work: Awaitable[Outcome | None], scope: anyio.CancelScope) -> None:
        """Await ``work`` for ``rec``; its outcome answers the host (``None``: the router has the call now)."""
        outcome: Outcome | None = None
        with scope:
            try:
                outcome = await work
            except McpCallError as exc:
                outcome = Outcome.failure(exc.code, exc.message, exc.data)
            except Exception as exc:  # a bug here costs this call, not the daemon
                outcome = Outcome.failure(
                    INTERNAL_ERROR, f"internal error in mcpx: {type(exc).__name__}: {exc}"
                )
        if scope.cancel_called or self._calls.get(rec.call_id) is not rec:
            return  # its host cancelled, or the pool ended it: answered (or not) there
        rec.follow = None
        if outcome is not None:
            self._end(rec, outcome)
            self.dispatch()

    async def _follow_task(self, rec: _Routed, client: Client, created: Mapping[str, Any]) -> Outcome:
        final = await self.upstreams.follow_task(client, created, rec.pending.context, rec.call_id)
        return Outcome(result=rec.finished(relayed(final)))

    async def _maybe_core_task(self, rec: _Routed, client: Client) -> Outcome | None:
        """A 2025-11-25 upstream's tool: run as a core task if it runs only so, else routed as any call."""
        if not await needs_core_task(client, rec.method, rec.params):
            if self._calls.get(rec.call_id) is rec:
                rec.follow = None
                self._send(rec)
            return None
        result = await run_core_task(client, upstream_params(rec.params), None)
        return Outcome(result=rec.finished(relayed(result)))


_NOT_ANSWERED = {"code": INTERNAL_ERROR, "message": "the host did not answer"}


def _went_away(server: str) -> Outcome:
    return Outcome.failure(
        INTERNAL_ERROR,
        f"server {server!r}: its process went away; call again to restart it",
        {"server": server, "kind": "crashed"},
    )
