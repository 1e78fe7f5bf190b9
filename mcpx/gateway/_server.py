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

from collections.abc import Mapping, Sequence
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
)
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
        unknown = [name for name in self.passthrough if name not in upstreams.servers]
        if unknown:
            configured = ", ".join(upstreams.servers) or "none"
            raise ValueError(
                f"mcp.passthrough names {', '.join(unknown)}, not configured (configured: {configured})"
            )

    # -- what the session asks of a Server --------------------------------------------------

    def capabilities(self) -> dict[str, Any]:
        return {
            "logging": {},
            "tools": {"listChanged": bool(self.passthrough)},
            "prompts": {"listChanged": False},
            "resources": {"subscribe": False, "listChanged": False},
        }

    def task_support(self, tool: str) -> str | None:
        return None  # the gateway runs no call as a task yet

    def header_params(self, tool: str) -> Mapping[str, str]:
        return {}

    def route(self, method: str, params: Mapping[str, Any], context: RequestContext) -> Call | Outcome:
        if method not in _LISTS and method not in _ROUTED:
            return super().route(method, params, context)

        async def serve(ctx: Context) -> Outcome:
            return await self._serve(method, params, context.revision, ctx)

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
        self, method: str, params: Mapping[str, Any], revision: Revision, ctx: Context
    ) -> Outcome:
        surface = await self.surface(full=self._needs_catalogs(method, params))
        if method in _LISTS:
            page: Page | GatewayError = getattr(surface, _LISTS[method])(params.get("cursor"))
            return _outcome(page.result() if isinstance(page, Page) else page)
        if method == "tools/call":
            decided: Route | Answer | GatewayError | OwnResource = surface.call_tool(
                params, revision=revision
            )
        elif method == "prompts/get":
            decided = surface.get_prompt(params)
        else:
            decided = surface.route_resource(params, method)
        if isinstance(decided, Route):
            result = await self.upstreams.request(
                decided.server, decided.method, _upstream_params(decided.params)
            )
            return Outcome(result=dict(decided.finish(result)))
        if isinstance(decided, Answer):
            return Outcome(result=dict(decided.result))
        if isinstance(decided, OwnResource):
            return Outcome.failure(-32002, f"Resource not found: {decided.uri}", {"uri": decided.uri})
        return _outcome(decided)

    def _needs_catalogs(self, method: str, params: Mapping[str, Any]) -> bool:
        if self.passthrough or method not in {"tools/call", "tools/list"}:
            return True
        return method == "tools/call" and params.get("name") in _NEEDS_CATALOGS

    async def surface(self, *, full: bool = True) -> GatewaySurface:
        """The surface over the upstreams' catalogs; ``full=False`` skips starting them (gateway tools only)."""
        names = list(self.upstreams.servers)
        catalogs: dict[str, UpstreamCatalog] = {}
        if not full:
            catalogs = {name: UpstreamCatalog(name=name, status="not started") for name in names}
        else:

            async def fetch(name: str) -> None:
                catalogs[name] = await self._catalog(name)

            async with anyio.create_task_group() as tg:
                for name in names:
                    tg.start_soon(fetch, name)
        return GatewaySurface(
            [catalogs[name] for name in names], cursor_key=self.cursor_key, passthrough=self.passthrough
        )

    async def _catalog(self, name: str) -> UpstreamCatalog:
        try:
            found = await self.upstreams.catalog(name)
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


def _upstream_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """What goes upstream: the host's params without its own ``_meta`` (its tokens and ids are not the upstream's)."""
    return {k: v for k, v in params.items() if k != "_meta"}


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
