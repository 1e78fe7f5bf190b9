"""The daemon's MCP server: the gateway surface (mcpx/core/gateway.py) over the pool.

It plugs into mcpx's server session like any ``mcpx.server.Server``: the
session speaks every revision to the host, and ``route`` answers the methods
the gateway owns — tools, prompts, resources — from a ``GatewaySurface`` built
over the upstreams' catalogs, sending what the surface routes to the upstream
that owns it (spec/gateway.md §1, §2).  Upstream results come back verbatim
(URIs rewritten in gateway mode); an upstream's JSON-RPC error is relayed as
that error.  In gateway mode mcpx's own tool list is fixed, so
``tools.listChanged`` is false; only pass-through makes it true.

Catalogs, theory of operation.  What each server offers is read once and
kept (``_Known``); a request never lists on its way.  A call (``tools/call``,
``prompts/get``, ``resources/read``, ``completion/complete``, subscriptions)
is routed by the catalogs last read, and waits only for one never read yet
(the first request of a fresh daemon).  A listing (a ``*/list``, and the
discovery tools ``mcpx_servers``/``mcpx_search``/``mcpx_describe``) reads a
catalog again only once its ``ttlMs`` ran out.  Catalogs are also read again
in the background, from a running instance and never through the pool: when
a server announces a list change, when an instance starts, and when a
positive ``ttlMs`` runs out.  Every change of a catalog bumps a generation,
and the surface (with the pass-through tools' hints) is built once per
generation.  Reads of one server are one at a time: a request that needs one
shares the read in flight.

A host's listing waits for a catalog not read yet (a server still starting)
no longer than ``list_wait`` (``mcp.listWait``), and never longer than the
read itself (the start timeout bounds it): the read goes on in the
background, the listing is served without that server, and ``mcpx_servers``
shows it as ``starting``.  When a catalog some listing was served without
arrives, hosts are told exactly as of an upstream's own change
(``_changed``: unsolicited to a legacy host, on its listen stream to a
2026-07-28 one), for each list it adds to (spec/gateway.md §5).

Modules: what the session asks of the server, and the answering, are here;
the catalogs — kept, read, refreshed, and the surface built over them — are
the layer ``GatewayServer`` stands on, ``_catalogs._Catalogs``.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import anyio
import anyio.abc

from ..client import McpCallError
from ..core import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, RequestContext, Revision, ToolHints
from ..core.gateway import Answer, Collision, GatewayError, GatewaySurface, OwnResource, Page, Route
from ..core.gateway_uris import mcpx_uri
from ..core.revisions import TASKS_EXTENSION
from ..core.router import relayed, upstream_params
from ..server import Call, Context, Deferred, Invocation, Outcome
from ._catalogs import _OWN_SUPPORT, _Catalogs, _ready, scope_key
from ._routing import WARM_UP_SCOPE, RelayLane

__all__ = ["GatewayServer"]


_LISTS = {
    "tools/list": "list_tools",
    "prompts/list": "list_prompts",
    "resources/list": "list_resources",
    "resources/templates/list": "list_resource_templates",
}


_ROUTED = frozenset({"tools/call", "prompts/get", "resources/read"})


_PASSED = frozenset(
    {"resources/subscribe", "resources/unsubscribe", "completion/complete"}
)  # pass-through only


_NEEDS_CATALOGS = frozenset({"mcpx_servers", "mcpx_search", "mcpx_describe"})


_VIEWS = 64  # distinct pass-through choices of hosts one daemon keeps a surface for


_BY_ARGUMENTS: Final[Any] = object()  # a relay target: mcpx_call, whose server its arguments name
_UNSEEN: Final[Any] = object()

RelayTarget = tuple[
    str,
    Mapping[str, Any],
    Callable[[Mapping[str, Any]], Any] | None,
    Callable[[int, str], str] | None,
    str,
    bool,
]
"""Where the relay lane sends a call: (server, the params upstream, the result's finish, an upstream
error's message for the host (``Route.reword``), the pool scope, whether the scope is the call's
alone: ``scope_key``); ``None``: as the upstream said it."""


_WARM_UP = WARM_UP_SCOPE
"""The scope key of the start-up listing (no host connection is behind it)."""


def _report_collisions(collisions: Sequence[Collision], method: str, ctx: Context) -> None:
    """Tell the host listing ``method`` what in that list is offered under aliases, as a log message.

    A ``warning`` of logger ``mcpx``, on the listing request: the session
    sends it only to a host that asked for log messages at that level — a
    legacy host by ``logging/setLevel`` (MCP 2025-11-25 server/utilities/
    logging), a 2026-07-28 host by its request's log level — and drops it
    otherwise.  Sent with the first page, so a host hears of it once per
    listing.  ``mcpx_servers`` and ``/v1/servers`` report the same.
    """
    if not collisions:
        return
    ctx.log(
        "warning",
        {
            "message": f"{method}: " + "; ".join(c.describe() for c in collisions),
            "collisions": [c.to_json() for c in collisions],
        },
        logger="mcpx",
    )


def _completion_route(surface: GatewaySurface, params: Mapping[str, Any]) -> Route | GatewayError:
    """``completion/complete`` in pass-through: to the upstream that owns the prompt or resource named."""
    ref = params.get("ref")
    if not isinstance(ref, Mapping):
        return GatewayError(
            code=INVALID_PARAMS, message="Invalid params: completion/complete needs params.ref, an object"
        )
    if ref.get("type") == "ref/prompt":
        decided = surface.get_prompt({"name": ref.get("name")})
        if isinstance(decided, GatewayError):
            return decided
        server, key, value = decided.server, "name", decided.name
    else:
        routed = surface.route_resource({"uri": ref.get("uri")})
        if not isinstance(routed, Route):
            return (
                routed
                if isinstance(routed, GatewayError)
                else GatewayError(code=INVALID_PARAMS, message="no completions here")
            )
        server, key, value = routed.server, "uri", routed.uri
    if value != ref.get(key):  # an alias, or an mcpx:// form: the upstream is asked in its own words
        params = {**params, "ref": {**ref, key: value}}
    return Route(server=server, method="completion/complete", params=dict(params), rewrite_uris=False)


def _outcome(value: Mapping[str, Any] | GatewayError) -> Outcome:
    if isinstance(value, GatewayError):
        return Outcome.failure(value.code, value.message, value.data)
    return Outcome(result=dict(value))


def _as_outcome(value: Any) -> Outcome:
    assert isinstance(value, Outcome)
    return value


def _failure(exc: BaseException) -> Outcome:
    if isinstance(exc, McpCallError):  # the upstream's own error, or the pool's naming the server
        return Outcome.failure(exc.code, exc.message, exc.data)
    return Outcome.failure(INTERNAL_ERROR, f"internal error in mcpx: {type(exc).__name__}: {exc}")


class GatewayServer(_Catalogs):
    """mcpx's own MCP server in front of ``upstreams``; ``passthrough`` names servers offered as themselves.

    ``for_passthrough`` gives the same gateway with another pass-through
    list, for a host that chose its own (``mcpx serve --passthrough``): one
    view per distinct list, sharing the catalogs, their reads and refreshes;
    each builds its own surface and tells its own hosts of changes.
    """

    def for_passthrough(self, names: Sequence[str]) -> GatewayServer:
        """This gateway as a host that chose ``names`` as its pass-through servers is served by.

        ``()`` is the gateway's own tools only.  Raises ``ValueError`` naming
        the configured servers when one of ``names`` is not one of them (or
        is named twice), and when ``_VIEWS`` other lists are in use already.
        """
        chosen = tuple(names)
        view = self._shared.views.get(chosen)
        if view is not None:
            assert isinstance(view, GatewayServer)  # every view is one (the first is the gateway itself)
            return view
        configured = ", ".join(self._servers) or "none"
        unknown = [name for name in chosen if name not in self.upstreams.servers]
        if unknown:
            raise ValueError(
                f"--passthrough names {', '.join(unknown)}, not a server of the daemon (configured: {configured})"
            )
        if len(set(chosen)) != len(chosen):
            raise ValueError(f"--passthrough names a server twice: {', '.join(chosen)}")
        if len(self._shared.views) >= _VIEWS:
            raise ValueError(
                f"the daemon serves {_VIEWS} different pass-through lists already; restart it (`mcpx stop`) "
                "or give the hosts fewer different lists"
            )
        view = copy.copy(self)  # shares the catalogs (_known), the pool and _shared
        view.passthrough = chosen
        view._built, view.tool_hints = None, view._new_hints()
        view._listeners = []  # its own hosts' sessions
        view._relay_cache = (None, {})  # its own surface's targets
        view._relay_ready = False
        self._shared.views[chosen] = view
        view._current()  # its hints, before its first host's first call is judged
        watched = sorted({name for each in self._shared.views for name in each})
        self.upstreams.watch(watched, self._upstream_changed, self._upstream_resource_updated)
        return view

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {
            "logging": {},
            "tools": {"listChanged": bool(self.passthrough)},
            "prompts": {"listChanged": bool(self.passthrough)},
            "resources": {"subscribe": bool(self.passthrough), "listChanged": bool(self.passthrough)},
        }
        if self.passthrough:  # subscriptions and completions go to the upstream that owns the name
            caps["completions"] = {}
            # Pass-through tools may run as tasks (their own execution.taskSupport): 2025-11-25
            # spells it as a capability, 2026-07-28 as an extension; the session keeps each for its own.
            caps["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
            caps["extensions"] = {TASKS_EXTENSION: {}}
        return caps

    async def warm(self) -> None:
        """List the upstreams once at start (pass-through), then keep the catalogs fresh until cancelled.

        The daemon runs this in its task group for its life.  The session asks
        ``task_support`` and the HTTP binding ``header_params`` before the
        request is routed, from the catalogs last seen; without the start-up
        listing the first call of a fresh daemon would see none.  A failure is
        left to the first request that lists, which reports it.  The task
        group held here runs the refreshes mcpx makes of its own accord
        (``_catalog_stale``, ``_keep_fresh``); without it a catalog is read
        again only when a listing finds it stale.
        """
        async with anyio.create_task_group() as tg:
            self._background = tg
            try:
                if self.passthrough:
                    try:
                        await self.surface(full=True, scope_key=_WARM_UP)
                    finally:  # connection-scoped instances started for it stop
                        self.upstreams.scope_ended(_WARM_UP)
                await anyio.sleep_forever()
            finally:
                self._background = None

    def _upstream_changed(self, server: str, kind: str) -> None:
        """A pass-through upstream's list changed: so did the gateway's (spec/gateway.md §5, list changes).

        Legacy hosts get the notification unsolicited, 2026-07-28 ones on
        their ``subscriptions/listen`` streams; the session decides which.
        Only the hosts of views that pass ``server`` through hear of it.
        """
        for view in self._views_passing(server):
            view._changed(kind)

    def _upstream_resource_updated(self, server: str, uri: str) -> None:
        """A pass-through upstream's resource changed: its subscribers among the hosts hear of it."""
        for view in self._views_passing(server):
            view.notify_resource_updated(uri)  # pass-through offers upstream URIs as they are,
            view.notify_resource_updated(mcpx_uri(server, uri))  # and each also as mcpx://<server>/<uri>

    def subscribed(self, uri: str) -> None:
        """A host subscribed to ``uri``: the pass-through upstream that owns it is subscribed too.

        The owner is found in the catalogs last seen (the session asks
        without waiting), as ``resources/read`` would route the URI.
        """
        surface = self.last_surface
        if not self.passthrough or surface is None:
            return
        decided = surface.route_resource({"uri": uri}, "resources/subscribe")
        if isinstance(decided, Route) and isinstance(decided.params.get("uri"), str):
            self.upstreams.subscribe(decided.server, decided.params["uri"])

    def session_ended(self, identity: str) -> None:
        """A legacy host's HTTP session ended: what the pool started for it (its scope) goes (spec/gateway.md §3)."""
        self.upstreams.scope_ended(identity)

    def _new_hints(self) -> ToolHints:
        """The tool hints of this view, before any catalog is read (spec/gateway.md §6).

        The gateway's own tools say what they declare (``mcpx_call``:
        optional).  A pass-through tool not seen yet (the start-up listing
        still running, or a name the upstream does not list) is
        ``"optional"``, since the upstream decides: its call becomes a task of
        mcpx's if the upstream answers with one.  ``_current`` adds the
        pass-through tools of the catalogs last seen, and their
        ``x-mcp-header`` arguments.
        """
        return ToolHints(task_support=dict(_OWN_SUPPORT), unknown="optional" if self.passthrough else None)

    def route(self, method: str, params: Mapping[str, Any], context: RequestContext) -> Invocation:
        if method not in _LISTS and method not in _ROUTED and not (method in _PASSED and self.passthrough):
            return super().route(method, params, context)
        now = self._route_now(method, params, context)
        if now is not None:
            return now

        async def serve(ctx: Context) -> Outcome:
            return await self._serve(method, params, context, ctx)

        return Call(
            fn=serve,
            kwargs={},
            is_async=True,
            context_param="ctx",
            finish=_as_outcome,
            fail=_failure,
        )

    def _route_now(
        self, method: str, params: Mapping[str, Any], context: RequestContext
    ) -> Outcome | Deferred | None:
        """A call decided without waiting, from the catalogs last read; ``None``: the awaited path serves it.

        The usual call: the catalogs it is routed by are read, so the surface
        decides at once; what it answers itself is an ``Outcome``, and what
        it routes to a stdio upstream is a ``Deferred`` the router carries
        (``Routes.forward``).  A listing, a catalog never read yet, a host's
        call to run as an mcpx task, an HTTP upstream, or SSE polling take
        the awaited path (mcpx/gateway/_routing.py says why).
        """
        task = params.get("task")
        if method in _LISTS or self.sse_poll_after > 0 or (task is not None and isinstance(task, Mapping)):
            return None
        if self.upstreams.routes is None:
            return None
        servers, listing = self._needs_catalogs(method, params)
        if listing:
            return None
        for name in servers:
            if not self._usable(self._known[name], None):
                return None
        decided = self._decide(self._current(), method, params, context.revision)
        if not isinstance(decided, Route):
            return self._settled(decided)
        if not self.upstreams.routable(decided.server):
            return None
        key, per_request = scope_key(context)
        return Deferred.of(functools.partial(self.upstreams.routes.start, decided, key, per_request))

    # -- the relay lane (spec/gateway.md §11) -------------------------------------------------

    def relay_lane(self) -> RelayLane | None:
        """``Server.relay_lane``: the lane for the hosts this view serves; ``None`` with no router."""
        routes = self.upstreams.routes
        return None if routes is None else RelayLane(self, routes)

    def relay_route(self, params: Mapping[str, Any], context: RequestContext) -> RelayTarget | None:
        """Where the relay lane sends a host's ``tools/call``, or ``None``: the usual way serves it.

        Exactly the calls ``_route_now`` hands the router with nothing but
        the pool to wait for: the catalogs are read, the call asks for no
        mcpx task, the surface routes it to a stdio upstream, and SSE polling
        is off.  A pass-through tool's target is kept per
        surface by name; ``mcpx_call``'s is decided by its arguments, each
        call.
        """
        if self.sse_poll_after > 0 or "task" in params:
            return None
        name = params.get("name")
        if type(name) is not str:
            return None
        surface = self._current()
        cache: tuple[GatewaySurface | None, dict[str, Any]] = self._relay_cache
        if cache[0] is not surface:
            cache = self._relay_cache = (surface, {})
        target = cache[1].get(name, _UNSEEN)
        if target is _UNSEEN:
            target = cache[1][name] = self._relay_target(surface, name)
        if target is None:
            return None
        if not self._relay_ready:
            if not all(self._usable(self._known[server], None) for server in self.passthrough):
                return None  # a fresh daemon's first calls wait for the catalogs: the usual way
            self._relay_ready = True
        finish = reword = None
        if target is _BY_ARGUMENTS:
            decided = surface.call_tool(params, revision=context.revision)
            if not isinstance(decided, Route) or not self.upstreams.routable(decided.server):
                return None
            server, sent = decided.server, decided.params
            if decided.rewrite_uris:
                finish = decided.finish
            if decided.unlisted is not None:
                reword = decided.reword
        else:
            server, own = target
            sent = params if own == name else {**params, "name": own}
        key, per_request = scope_key(context)
        return server, sent, finish, reword, key, per_request

    def _relay_target(self, surface: GatewaySurface, name: str) -> Any:
        """``(server, its own name)``, ``_BY_ARGUMENTS`` (``mcpx_call``), or ``None``: not for the lane."""
        forwarded = surface.forwarded_tool(name)
        if forwarded is not None:
            return forwarded if self.upstreams.routable(forwarded[0]) else None
        return _BY_ARGUMENTS if name == "mcpx_call" else None

    @staticmethod
    def _decide(
        surface: GatewaySurface, method: str, params: Mapping[str, Any], revision: Revision
    ) -> Route | Answer | GatewayError | OwnResource:
        """What the surface makes of a call: where it goes, or its answer."""
        if method == "tools/call":
            return surface.call_tool(params, revision=revision)
        if method == "prompts/get":
            return surface.get_prompt(params)
        if method == "completion/complete":
            return _completion_route(surface, params)
        return surface.route_resource(params, method)

    @staticmethod
    def _settled(decided: Answer | GatewayError | OwnResource) -> Outcome:
        """The answer to a call the surface answered itself."""
        if isinstance(decided, Answer):
            return Outcome(result=dict(decided.result))
        if isinstance(decided, OwnResource):
            return Outcome.failure(
                RESOURCE_NOT_FOUND, f"Resource not found: {decided.uri}", {"uri": decided.uri}
            )
        return _outcome(decided)

    async def _serve(
        self, method: str, params: Mapping[str, Any], context: RequestContext, ctx: Context
    ) -> Outcome:
        key, per_request = scope_key(context)
        try:
            return await self._answer(method, params, context.revision, ctx, key, per_request=per_request)
        finally:
            if per_request:  # a 2026-07-28 request is its own scope: its instances go with it
                self.upstreams.scope_ended(key)

    async def _answer(
        self,
        method: str,
        params: Mapping[str, Any],
        revision: Revision,
        ctx: Context,
        key: str,
        *,
        per_request: bool = False,
    ) -> Outcome:
        servers, listing = self._needs_catalogs(method, params)
        bound = self.list_wait if listing else None
        await self._read_catalogs(servers, key, listing=listing, bound=bound, per_request=per_request)
        surface = self._current()
        if method in _LISTS:
            for name in servers:  # served without it: hosts hear when its catalog arrives (_store)
                if not _ready(self._known[name].seen):
                    self._known[name].left_out = True
            page: Page | GatewayError = getattr(surface, _LISTS[method])(params.get("cursor"))
            if isinstance(page, Page) and params.get("cursor") is None:
                _report_collisions(surface.collisions_in(page.kind), method, ctx)
            return _outcome(page.result() if isinstance(page, Page) else page)
        decided = self._decide(surface, method, params, revision)
        if isinstance(decided, Route):
            try:
                result = await self._forward(
                    decided, ctx, key, as_task=isinstance(params.get("task"), Mapping)
                )
            except McpCallError as exc:
                if decided.unlisted is None:
                    raise
                return Outcome.failure(exc.code, decided.reword(exc.code, exc.message), exc.data)
            return Outcome(result=relayed(decided.finish(result)))
        return self._settled(decided)

    async def _forward(self, route: Route, ctx: Context, key: str, *, as_task: bool) -> Mapping[str, Any]:
        """The upstream's answer to ``route``; with ``sse_poll_after``, the host's stream closed meanwhile.

        ``as_task``: the host (2025-11-25) asked for a task, so the upstream may answer with one.
        """
        request = self.upstreams.request(
            route.server,
            route.method,
            upstream_params(route.params),
            host=ctx,
            scope_key=key,
            as_task=as_task,
        )
        if self.sse_poll_after <= 0:
            return await request
        failed: Exception | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._poll_later, ctx)
            try:
                result = await request
            except Exception as exc:  # raised here, not from the group: its errors stay unwrapped
                failed = exc
            tg.cancel_scope.cancel()
        if failed is not None:
            raise failed
        return result

    async def _poll_later(self, ctx: Context) -> None:
        """SSE polling (2025-11-25 Streamable HTTP): a call still running is told to close its stream.

        The client resumes it with ``Last-Event-ID`` and gets what followed,
        the result included; the connection is not held for a long call.  On
        stdio and 2026-07-28, where a stream cannot be resumed, nothing happens.
        """
        await anyio.sleep(self.sse_poll_after)
        ctx.close_stream()

    def _needs_catalogs(self, method: str, params: Mapping[str, Any]) -> tuple[Sequence[str], bool]:
        """Whose catalogs answering ``method`` needs, and whether it is a listing (fresh ones) or a call.

        A listing shows catalogs, so it needs them within their ``ttlMs``:
        every server's, except for ``tools/list``, where only the pass-through
        tools come from upstream (in gateway mode the list is fixed).  A call
        is routed by the catalogs last read: only the pass-through servers'
        name things, since a namespaced prompt and an ``mcpx://`` URI name
        their server, and ``mcpx_call`` is forwarded to the one it names.
        """
        if method == "tools/list":
            return self.passthrough, True
        name = params.get("name")
        if method in _LISTS or (method == "tools/call" and type(name) is str and name in _NEEDS_CATALOGS):
            return self._servers, True
        return self.passthrough, False
