"""``mcpx daemon``: one HTTP server for /mcp (the gateway's MCP endpoint) and /v1 (its ops API).

Seed §5: one listener, one access-control decision.  The HTTP binding
(mcpx/core/_http.py) serves /mcp and hands /v1, /health and /openapi.json to
``Ops`` as ``AppRequest``s, under the same Origin and Host checks.  The ops
table below is the whole /v1 API; /openapi.json is generated from it.  Every
error is JSON ``{"error": {"code": <stable string>, "message": <what to do>}}``.

The daemon writes ``<state>/daemon.json`` (0600) once it listens — its URL,
unix socket and pid — so the CLI finds it, and removes it when it stops.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio.abc
import orjson

from .. import __version__
from ..client import McpCallError
from ..config import Config, UpstreamServer, ensure_state_dir, write_state_file
from ..core import REVISIONS, AppRequest, HttpConfig, Revision
from ..core._pool import PoolConfig
from ..drivers import serve_http
from ..drivers._async import AppResponse
from ._server import GatewayServer
from ._upstreams import Upstreams

__all__ = ["DAEMON_FILE", "Ops", "run_daemon"]

DAEMON_FILE = "daemon.json"
APP_PATHS = ("/v1/", "/health", "/openapi.json")


class OpError(Exception):
    """A /v1 request that cannot be served: HTTP ``status``, a stable ``code`` and what to do."""

    def __init__(self, status: int, code: str, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.data = status, code, message, data


Handler = Callable[["Ops", Mapping[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Op:
    name: str
    method: str
    path: str
    summary: str
    handler: Handler
    body: Mapping[str, Any] | None = None  # JSON Schema of a POST body


def _json(status: int, value: Any) -> AppResponse:
    return AppResponse(status, orjson.dumps(value))


def _upstream_error(server: str, exc: McpCallError) -> OpError:
    """An upstream's (or the pool's) JSON-RPC error, as /v1 reports it."""
    data = exc.data if isinstance(exc.data, Mapping) else {}
    kind = data.get("kind")
    if kind == "unknown-server":
        return OpError(404, "unknown-server", exc.message, {"server": server})
    error = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        error["data"] = exc.data
    return OpError(502, str(kind or "upstream-error"), exc.message, {"server": server, "jsonrpc": error})


class Ops:
    """The /v1 API over the daemon's pool and gateway."""

    def __init__(self, config: Config, servers: Mapping[str, UpstreamServer], upstreams: Upstreams) -> None:
        self.config = config
        self.servers = servers
        self.upstreams = upstreams

    async def handle(self, request: AppRequest) -> AppResponse:
        target = urlsplit(request.target)
        if target.path == "/openapi.json" and request.method == "GET":
            return _json(200, openapi())
        for op in OPS:
            if op.path == target.path:
                if request.method != op.method:
                    return _json(
                        405,
                        {"error": {"code": "method-not-allowed", "message": f"{op.path} takes {op.method}"}},
                    )
                try:
                    params = self._params(op, request, target.query)
                    return _json(200, await op.handler(self, params))
                except OpError as exc:
                    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
                    if exc.data is not None:
                        error["data"] = exc.data
                    return _json(exc.status, {"error": error})
        paths = ", ".join(sorted({op.path for op in OPS} | {"/openapi.json"}))
        return _json(
            404, {"error": {"code": "not-found", "message": f"no API at {target.path}; try {paths}"}}
        )

    @staticmethod
    def _params(op: Op, request: AppRequest, query: str) -> Mapping[str, Any]:
        if op.method == "GET":
            return {k: v[-1] for k, v in parse_qs(query).items()}
        if not request.body:
            return {}
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            raise OpError(
                415, "unsupported-media-type", "send the body as JSON (Content-Type: application/json)"
            )
        try:
            body = orjson.loads(request.body)
        except orjson.JSONDecodeError as exc:
            raise OpError(400, "bad-json", f"the body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise OpError(400, "bad-request", "the body must be a JSON object")
        return body

    def _server(self, name: object) -> str:
        if not isinstance(name, str) or not name:
            raise OpError(
                400, "bad-request", 'name the server: "server": "<name>" (GET /v1/servers lists them)'
            )
        if name not in self.servers:
            configured = ", ".join(self.servers) or "none"
            raise OpError(
                404, "unknown-server", f"no server named {name!r} is configured (configured: {configured})"
            )
        return name


async def _health(ops: Ops, params: Mapping[str, Any]) -> Any:
    return {"status": "ok", "version": __version__, "servers": len(ops.servers)}


async def _servers(ops: Ops, params: Mapping[str, Any]) -> Any:
    pool = {s.server: s.to_json() for s in ops.upstreams.status()}
    return {
        "servers": [
            {"name": name, **server.describe(), "pool": pool.get(name)}
            for name, server in ops.servers.items()
        ]
    }


async def _tools(ops: Ops, params: Mapping[str, Any]) -> Any:
    names = [ops._server(params["server"])] if params.get("server") else list(ops.servers)
    tools: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []

    async def one(name: str) -> None:
        try:
            found = await ops.upstreams.catalog(name)
        except McpCallError as exc:
            errors.append({"server": name, "code": exc.code, "message": exc.message})
            return
        tools.extend({"server": name, **tool} for tool in found["tools"])

    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(one, name)
    if errors and not tools and params.get("server"):
        raise OpError(502, "upstream-error", errors[0]["message"], {"server": names[0]})
    order = {name: i for i, name in enumerate(names)}
    tools.sort(key=lambda t: (order[t["server"]], str(t.get("name"))))
    return {"tools": tools, "errors": sorted(errors, key=lambda e: order[e["server"]])}


async def _call(ops: Ops, params: Mapping[str, Any]) -> Any:
    server = ops._server(params.get("server"))
    tool = params.get("tool")
    if not isinstance(tool, str) or not tool:
        raise OpError(400, "bad-request", 'name the tool: "tool": "<name>" (GET /v1/tools lists them)')
    arguments = params.get("arguments", {})
    if not isinstance(arguments, dict):
        raise OpError(400, "bad-request", '"arguments" must be a JSON object')
    timeout = params.get("timeout")
    if timeout is not None and (
        not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0
    ):
        raise OpError(
            400,
            "bad-request",
            '"timeout" is a positive number of seconds (it can only lower pool.callTimeout)',
        )
    try:
        result = await ops.upstreams.request(
            server, "tools/call", {"name": tool, "arguments": arguments}, timeout=timeout
        )
    except McpCallError as exc:
        raise _upstream_error(server, exc) from None
    return {"server": server, "tool": tool, "result": result}


async def _protocol(ops: Ops, params: Mapping[str, Any]) -> Any:
    return {
        "revisions": [str(r) for r in REVISIONS],
        "oldest": str(REVISIONS[0]),
        "newest": str(REVISIONS[-1]),
        "spec": ops.config.settings.policy().describe(),
    }


async def _restart(ops: Ops, params: Mapping[str, Any]) -> Any:
    server = ops._server(params["server"]) if params.get("server") else None
    ops.upstreams.restart(server)
    return {"restarted": [server] if server else list(ops.servers)}


OPS: tuple[Op, ...] = (
    Op("health", "GET", "/health", "Is the daemon up; its version.", _health),
    Op("servers", "GET", "/v1/servers", "The configured upstream servers and their pool state.", _servers),
    Op("tools", "GET", "/v1/tools", "Every upstream tool (or one server's: ?server=NAME).", _tools),
    Op(
        "call",
        "POST",
        "/v1/call",
        "Call a tool on a server; the upstream's result verbatim.",
        _call,
        {
            "type": "object",
            "properties": {
                "server": {"type": "string"},
                "tool": {"type": "string"},
                "arguments": {"type": "object"},
                "timeout": {"type": "number", "exclusiveMinimum": 0},
            },
            "required": ["server", "tool"],
        },
    ),
    Op(
        "protocol",
        "GET",
        "/v1/protocol",
        "The MCP revisions mcpx speaks and the effective spec policy.",
        _protocol,
    ),
    Op(
        "restart",
        "POST",
        "/v1/restart",
        "Restart one server's instances (or every server's).",
        _restart,
        {"type": "object", "properties": {"server": {"type": "string"}}},
    ),
)


def openapi() -> dict[str, Any]:
    """The /v1 API as OpenAPI 3.1, generated from ``OPS``."""
    paths: dict[str, Any] = {}
    for op in OPS:
        entry: dict[str, Any] = {
            "operationId": op.name,
            "summary": op.summary,
            "responses": {"200": {"description": "OK"}},
        }
        if op.body is not None:
            entry["requestBody"] = {"content": {"application/json": {"schema": op.body}}}
        paths.setdefault(op.path, {})[op.method.lower()] = entry
    return {"openapi": "3.1.0", "info": {"title": "mcpx daemon", "version": __version__}, "paths": paths}


def run_daemon(
    config: Config,
    *,
    loop: str = "asyncio",
    ready: Callable[[list[str]], None] | None = None,
    stop: Any = None,
) -> None:
    """Serve the gateway until interrupted, on ``transport.address:transport.port`` and ``<state>/mcpx.sock``."""
    settings = config.settings
    state = ensure_state_dir(settings.value("state.dir"))
    servers = dict(config.servers)
    passthrough = settings.names("mcp.passthrough")
    pool = PoolConfig(
        idle_timeout=settings.duration("pool.idleTimeout"),
        call_timeout=settings.duration("pool.callTimeout"),
        max_spawns_per_minute=settings.integer("pool.maxSpawnsPerMinute"),
    )
    address = str(settings.value("transport.address"))
    port = settings.integer("transport.port")
    unix_path = str(state / "mcpx.sock")
    upstreams = Upstreams(
        servers,
        state_dir=state,
        pool=pool,
        answer_modern_requests=Revision.V2026_07_28 in settings.value("spec.lenient"),
    )
    gateway = GatewayServer(
        upstreams, cursor_key=secrets.token_bytes(32), passthrough=passthrough, version=__version__
    )

    def setup(tg: anyio.abc.TaskGroup) -> Callable[[AppRequest], Awaitable[AppResponse]]:
        upstreams.attach(tg)
        return Ops(config, servers, upstreams).handle

    http = HttpConfig(
        bound_host=address,
        header_params=gateway.header_params,
        app_paths=APP_PATHS,
        allowed_origins=frozenset(settings.names("transport.allowedOrigins")),
        allowed_hosts=frozenset(settings.names("transport.allowedHosts")),
    )

    def started(urls: list[str]) -> None:
        url = next((u for u in urls if u.startswith("http")), None)
        base = url.rsplit("/", 1)[0] if url else None
        info = {"pid": os.getpid(), "url": base, "mcp": url, "unix": unix_path, "version": __version__}
        write_state_file(state, DAEMON_FILE, orjson.dumps(info))
        if ready is not None:
            ready(urls)

    try:
        serve_http(
            gateway,
            loop=loop,
            host=address,
            port=port,
            unix_path=unix_path,
            config=gateway.session_config(policy=settings.policy()),
            http=http,
            ready=started,
            stop=stop,
            app_setup=setup,
        )
    finally:
        with contextlib.suppress(OSError):
            info_path = Path(state) / DAEMON_FILE
            if info_path.exists() and orjson.loads(info_path.read_bytes()).get("pid") == os.getpid():
                info_path.unlink()
