"""The daemon's MCP server: the gateway surface (mcpx/core/_gateway.py) over the pool.

It plugs into mcpx's server session like any ``mcpx.server.Server``: the
session speaks every revision to the host, and ``route`` answers the methods
the gateway owns — tools, prompts, resources — from a ``GatewaySurface``
built over the upstreams' catalogs, sending what the surface routes to the
upstream that owns it (seed §2.5).  Upstream results come back verbatim
(URIs rewritten in gateway mode); an upstream's JSON-RPC error is relayed as
that error.  In gateway mode mcpx's own tool list is fixed, so
``tools.listChanged`` is false; only pass-through makes it true.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import anyio

from ..client import McpCallError
from ..core import RequestContext, Revision
from ..core._gateway import (
    Answer,
    GatewayError,
    GatewaySurface,
    OwnResource,
    Page,
    Route,
    UpstreamCatalog,
    gateway_tools,
    mcpx_uri,
)
from ..core._http_client import tool_header_params
from ..core._revisions import TASKS_EXTENSION
from ..server import Call, Context, Outcome, Server
from ._upstreams import Upstreams

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
_GATEWAY_TOOLS = {str(tool["name"]): tool for tool in gateway_tools()}
_NEEDS_CATALOGS = frozenset({"mcpx_servers", "mcpx_search", "mcpx_describe"})


class GatewayServer(Server):
    """mcpx's own MCP server in front of ``upstreams``; ``passthrough`` names servers offered as themselves."""

    def __init__(
        self,
        upstreams: Upstreams,
        *,
        cursor_key: bytes,
        passthrough: Sequence[str] = (),
        version: str = "0.1.0",
        sse_poll_after: float = 0.0,
    ) -> None:
        super().__init__(
            "mcpx",
            version,
            title="mcpx gateway",
            instructions=(
                "mcpx reaches several MCP servers. mcpx_servers lists them, mcpx_search finds a tool, "
                "mcpx_describe shows its input schema, and mcpx_call runs it."
            ),
        )
        self.upstreams = upstreams
        self.cursor_key = cursor_key
        self.passthrough = tuple(passthrough)
        self.sse_poll_after = sse_poll_after  # transport.ssePollAfter; 0: never
        self.last_surface: GatewaySurface | None = None  # built over every upstream's catalog
        self._header_params: dict[str, Mapping[str, str]] = {}
        self._task_support: dict[str, str] = {}  # pass-through tools' execution.taskSupport
        unknown = [name for name in self.passthrough if name not in upstreams.servers]
        if unknown:
            configured = ", ".join(upstreams.servers) or "none"
            raise ValueError(
                f"mcp.passthrough names {', '.join(unknown)}, not configured (configured: {configured})"
            )
        if self.passthrough:
            upstreams.watch(self.passthrough, self._upstream_changed, self._upstream_resource_updated)

    # -- what the session asks of a Server --------------------------------------------------

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
        """List the pass-through upstreams once at start, so a first ``tools/call`` knows its tool.

        The session asks ``task_support`` and the HTTP binding ``header_params``
        before the request is routed, from the catalogs last seen; without this
        the first call of a fresh daemon would see none.  A failure is left to
        the first request that lists, which reports it.
        """
        if not self.passthrough:
            return
        try:
            await self.surface(full=True, scope_key=_WARM_UP)
        finally:
            self.upstreams.scope_ended(_WARM_UP)  # connection-scoped instances started for it stop

    def _upstream_changed(self, server: str, kind: str) -> None:
        """A pass-through upstream's list changed: so did the gateway's (seed §2.5 "tools/list_changed relayed").

        Legacy hosts get the notification unsolicited, 2026-07-28 ones on
        their ``subscriptions/listen`` streams; the session decides which.
        """
        self._changed(kind)

    def _upstream_resource_updated(self, server: str, uri: str) -> None:
        """A pass-through upstream's resource changed: its subscribers among the hosts hear of it."""
        self.notify_resource_updated(uri)  # pass-through offers upstream URIs as they are,
        self.notify_resource_updated(mcpx_uri(server, uri))  # and each also as mcpx://<server>/<uri>

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

    def task_support(self, tool: str) -> str | None:
        """Whether the host's call of ``tool`` may run as one of mcpx's tasks (seed §2.5, "Tasks, per era").

        A pass-through tool's ``execution.taskSupport`` from the catalogs last
        seen; one not seen yet (the start-up listing still running, or a name
        the upstream does not list) is ``"optional"``, since the upstream
        decides: its call becomes a task of mcpx's if the upstream answers
        with one.  The gateway's own tools say what they declare
        (``mcpx_call``: optional).  The upstream call under a task asks for
        an upstream task, and mcpx follows that to its end
        (``Upstreams.request``).
        """
        if tool in self._task_support:
            return self._task_support[tool]
        own = _GATEWAY_TOOLS.get(tool)
        if own is not None:
            execution = own.get("execution")
            declared = execution.get("taskSupport") if isinstance(execution, Mapping) else None
            return str(declared) if declared in ("optional", "required") else "forbidden"
        return "optional" if self.passthrough else None

    def header_params(self, tool: str) -> Mapping[str, str]:
        """A pass-through tool's ``x-mcp-header`` arguments, for the HTTP binding's ``Mcp-Param-*`` check.

        From the last catalogs the gateway saw (the binding asks before the
        request is routed, so it cannot wait for a fresh one): a tool nobody
        has listed yet, a gateway tool, or one whose annotations are invalid
        has none.
        """
        return self._header_params.get(tool, {})

    def route(self, method: str, params: Mapping[str, Any], context: RequestContext) -> Call | Outcome:
        if method not in _LISTS and method not in _ROUTED and not (method in _PASSED and self.passthrough):
            return super().route(method, params, context)

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

    # -- answering -------------------------------------------------------------------------------

    async def _serve(
        self, method: str, params: Mapping[str, Any], context: RequestContext, ctx: Context
    ) -> Outcome:
        key, per_request = scope_key(context)
        try:
            return await self._answer(method, params, context.revision, ctx, key)
        finally:
            if per_request:  # a 2026-07-28 request is its own scope: its instances go with it
                self.upstreams.scope_ended(key)

    async def _answer(
        self, method: str, params: Mapping[str, Any], revision: Revision, ctx: Context, key: str
    ) -> Outcome:
        surface = await self.surface(full=self._needs_catalogs(method, params), scope_key=key)
        if method in _LISTS:
            page: Page | GatewayError = getattr(surface, _LISTS[method])(params.get("cursor"))
            return _outcome(page.result() if isinstance(page, Page) else page)
        if method == "tools/call":
            decided: Route | Answer | GatewayError | OwnResource = surface.call_tool(
                params, revision=revision
            )
        elif method == "prompts/get":
            decided = surface.get_prompt(params)
        elif method == "completion/complete":
            decided = _completion_route(surface, params)
        else:
            decided = surface.route_resource(params, method)
        if isinstance(decided, Route):
            result = await self._forward(decided, ctx, key, as_task=isinstance(params.get("task"), Mapping))
            return Outcome(result=_relayed(decided.finish(result)))
        if isinstance(decided, Answer):
            return Outcome(result=dict(decided.result))
        if isinstance(decided, OwnResource):
            return Outcome.failure(-32002, f"Resource not found: {decided.uri}", {"uri": decided.uri})
        return _outcome(decided)

    async def _forward(self, route: Route, ctx: Context, key: str, *, as_task: bool) -> Mapping[str, Any]:
        """The upstream's answer to ``route``; with ``sse_poll_after``, the host's stream closed meanwhile.

        ``as_task``: the host (2025-11-25) asked for a task, so the upstream may answer with one.
        """
        request = self.upstreams.request(
            route.server,
            route.method,
            _upstream_params(route.params),
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

    def _needs_catalogs(self, method: str, params: Mapping[str, Any]) -> bool:
        if self.passthrough or method not in {"tools/call", "tools/list"}:
            return True
        return method == "tools/call" and params.get("name") in _NEEDS_CATALOGS

    async def surface(self, *, full: bool = True, scope_key: str | None = None) -> GatewaySurface:
        """The surface over the upstreams' catalogs; ``full=False`` skips starting them (gateway tools only).

        ``scope_key`` is the caller's identity, for servers scoped per connection.
        """
        names = list(self.upstreams.servers)
        catalogs: dict[str, UpstreamCatalog] = {}
        if not full:
            catalogs = {name: UpstreamCatalog(name=name, status="not started") for name in names}
        else:

            async def fetch(name: str) -> None:
                catalogs[name] = await self._catalog(name, scope_key)

            async with anyio.create_task_group() as tg:
                for name in names:
                    tg.start_soon(fetch, name)
        surface = GatewaySurface(
            [catalogs[name] for name in names], cursor_key=self.cursor_key, passthrough=self.passthrough
        )
        if full:
            self.last_surface = surface
            self._header_params, self._task_support = _tool_hints(catalogs[name] for name in self.passthrough)
        return surface

    async def _catalog(self, name: str, scope_key: str | None) -> UpstreamCatalog:
        try:
            found = await self.upstreams.catalog(name, scope_key=scope_key)
        except McpCallError as exc:
            return UpstreamCatalog(name=name, status="failed", detail=exc.message)
        return UpstreamCatalog(
            name=name,
            revision=found["revision"],
            capabilities=found["capabilities"],
            tools=found["tools"],
            prompts=found["prompts"],
            resources=found["resources"],
            resource_templates=found["resourceTemplates"],
        )


_WARM_UP = "mcpx/warm-up"
"""The scope key of the start-up listing (no host connection is behind it)."""


def _tool_hints(catalogs: Iterable[UpstreamCatalog]) -> tuple[dict[str, Mapping[str, str]], dict[str, str]]:
    """What the session needs of pass-through tools before routing, the first upstream listing a name owning it.

    ``({tool: {argument: x-mcp-header}}, {tool: execution.taskSupport})``.  A
    2026-07-28 upstream lists no ``execution`` (the extension lets the server
    decide per call), so its tools are ``"optional"``: the host's call may
    become a task, and does when the upstream's does (``Upstreams.request``).
    """
    headers: dict[str, Mapping[str, str]] = {}
    support: dict[str, str] = {}
    for catalog in catalogs:
        for tool in catalog.tools:
            name = tool.get("name") if isinstance(tool, Mapping) else None
            if not isinstance(name, str) or name in headers:
                continue
            headers[name] = tool_header_params(tool) or {}
            execution = tool.get("execution")
            declared = execution.get("taskSupport") if isinstance(execution, Mapping) else None
            if declared in ("forbidden", "optional", "required"):
                support[name] = declared
            else:  # 2026-07-28's Tool has no execution: the upstream decides per call, so may mcpx
                support[name] = "optional" if catalog.revision == Revision.V2026_07_28 else "forbidden"
    return headers, support


def _completion_route(surface: GatewaySurface, params: Mapping[str, Any]) -> Route | GatewayError:
    """``completion/complete`` in pass-through: to the upstream that owns the prompt or resource named."""
    ref = params.get("ref")
    if not isinstance(ref, Mapping):
        return GatewayError(
            code=-32602, message="Invalid params: completion/complete needs params.ref, an object"
        )
    if ref.get("type") == "ref/prompt":
        decided = surface.get_prompt({"name": ref.get("name")})
        if isinstance(decided, GatewayError):
            return decided
        server = decided.server
    else:
        routed = surface.route_resource({"uri": ref.get("uri")})
        if not isinstance(routed, Route):
            return (
                routed
                if isinstance(routed, GatewayError)
                else GatewayError(code=-32602, message="no completions here")
            )
        server = routed.server
    return Route(server=server, method="completion/complete", params=dict(params), rewrite_uris=False)


SESSION_META = "dev.mcpx/session"
_request_keys = itertools.count(1)


def scope_key(context: RequestContext) -> tuple[str, bool]:
    """Who a host request is from, for the pool (seed §2.4); and whether that scope is the request alone.

    ``_meta["dev.mcpx/session"]`` when the host names one; else the legacy
    HTTP session (or the stdio connection); a 2026-07-28 request has no
    session, so it is its own scope.
    """
    named = context.meta.get(SESSION_META)
    if isinstance(named, str) and named:
        return f"named:{named}", False
    if not context.revision.is_modern and context.identity is not None:
        return context.identity, False
    return f"request:{next(_request_keys)}", True


def _upstream_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """What goes upstream: the host's params, but not what was the host's own business with mcpx.

    ``_meta`` keeps what the host means for whoever serves the call (trace
    context, its own keys) and loses the protocol's (``progressToken`` and
    ``io.modelcontextprotocol/*``: mcpx states its own on the upstream hop)
    and mcpx's (``dev.mcpx/*``).  A 2025-11-25 host's ``task`` asks mcpx for a
    task, which mcpx runs itself (``_forward``).
    """
    out = {k: v for k, v in params.items() if k not in ("_meta", "task")}
    meta = params.get("_meta")
    if isinstance(meta, Mapping):
        kept = {k: v for k, v in meta.items() if not _hop_meta(str(k))}
        if kept:
            out["_meta"] = kept
    return out


def _hop_meta(key: str) -> bool:
    """A ``_meta`` key that belongs to one hop (host → mcpx), not to the call."""
    return key == "progressToken" or key.startswith(("io.modelcontextprotocol/", "dev.mcpx/"))


_ENVELOPE_KEYS = frozenset({"resultType", "ttlMs", "cacheScope"})
_ENVELOPE_META = "io.modelcontextprotocol/serverInfo"


def _relayed(result: Mapping[str, Any]) -> dict[str, Any]:
    """An upstream's result as mcpx answers with it: its content verbatim, its envelope not.

    ``resultType``, the cache hints and ``_meta`` serverInfo describe the
    upstream's answer to mcpx; mcpx's session states its own to the host, in
    the host's revision.  Every other ``_meta`` key is carried.
    """
    out = {k: v for k, v in result.items() if k not in _ENVELOPE_KEYS}
    meta = out.get("_meta")
    if isinstance(meta, Mapping) and _ENVELOPE_META in meta:
        rest = {k: v for k, v in meta.items() if k != _ENVELOPE_META}
        if rest:
            out["_meta"] = rest
        else:
            del out["_meta"]
    return out


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
    return Outcome.failure(-32603, f"internal error in mcpx: {type(exc).__name__}: {exc}")
