"""The daemon's /v1 API: ``Ops`` and the ops table, from which /openapi.json is generated.

spec/gateway.md §8 (the ops table).  Every error is JSON
``{"error": {"code": <stable string>, "message": <what to do>}}``.

This file runs a little over 700 lines for a reason: the ops table, each
op's handler and the OpenAPI document generated from the table are read,
and changed, together.
Two ops reach an upstream's own answers beyond ``tools/call``:

* ``POST /v1/call`` with ``"progress": true`` relays the upstream's
  ``notifications/progress`` for the call (MCP 2025-03-26 and later,
  Basic → Utilities → Progress; 2024-11-05 without ``message``).  The answer
  stays plain JSON when the call ends before any progress arrives; once some
  does, it is ``application/x-ndjson``: one ``{"progress": {...}}`` line per
  report, then one final line, the plain answer's body — the result, or
  ``{"error": ..., "status": <the HTTP status it would have had>}``.  The
  call runs as a task of the daemon so its progress can be written while it
  runs; a reader too slow for the reports sees the newest ones.
* ``POST /v1/complete`` forwards ``completion/complete`` only to a server
  that declared the ``completions`` capability (Server Features →
  Completion): a server that did not may answer method-not-found or
  anything at all, so the declaration is the only thing worth trusting
  (spec/gateway.md §8, the ops table).  Any other server's answer comes from
  what the catalog knows — for a resource template, the values of the listed
  resources that match it (RFC 6570 ``{var}`` and ``{+var}`` only), narrowed
  by ``context.arguments`` and by what was typed (a case-insensitive
  prefix); for a prompt, nothing, since a prompt's arguments carry names but
  no values — with ``"source": "cache"`` and the reason it was not asked.
  An upstream that is asked gets ``context`` only from 2025-06-18 on, the
  first revision whose ``CompleteRequest`` has it.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import anyio.abc
import orjson

from .. import __version__
from ..client import McpCallError
from ..config import Config, UpstreamServer
from ..core import INVALID_PARAMS, AppRequest, Progress, Revision
from ..core.revisions import REVISIONS
from ..drivers._async_http import AppResponse
from ._arguments import input_schema_of, needs_schema, typed_arguments
from ._server import GatewayServer
from ._upstreams import Upstreams

APP_PATHS = ("/v1/", "/health", "/openapi.json")


NDJSON = "application/x-ndjson"


_PENDING_PROGRESS = 32  # progress lines held for a slow reader; beyond it the newest replaces the last


_MAX_VALUES = 100  # completion values in one answer (MCP: "Must not exceed 100 items")


class OpError(Exception):
    """A /v1 request that cannot be served: HTTP ``status``, a stable ``code`` and what to do."""

    def __init__(self, status: int, code: str, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.data = status, code, message, data

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"error": error}


Handler = Callable[["Ops", Mapping[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Op:
    name: str
    method: str
    path: str
    summary: str
    handler: Handler
    body: Mapping[str, Any] | None = None  # JSON Schema of a POST body
    ndjson: bool = False  # may answer application/x-ndjson (progress lines, then the answer)
    sse: bool = False  # answers text/event-stream, for as long as the client reads


def _path_name(template: str, path: str) -> str | None:
    """The ``{name}`` in ``path`` when it matches ``template`` (``/v1/servers/{name}/log``), else ``None``."""
    head, brace, tail = template.partition("{name}")
    if (
        not brace
        or not path.startswith(head)
        or not path.endswith(tail)
        or len(path) <= len(head) + len(tail)
    ):
        return None
    name = unquote(path[len(head) : len(path) - len(tail)])
    return None if "/" in name else name


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


class _ProgressRelay:
    """One call's progress lines, then its final line: a streamed /v1/call answer (application/x-ndjson).

    ``run`` carries out the call and ``progress`` is its ``on_progress``;
    ``first`` is set by the first report or by the end, whichever comes
    first, so the handler can still answer plain JSON when nothing was
    relayed.  Iterating yields the lines as they come and ends after the
    final one.  At most ``_PENDING_PROGRESS`` lines wait for the reader.
    """

    def __init__(self) -> None:
        self.first = anyio.Event()
        self.progressed = False
        self.answer: Any = None
        self.error: OpError | None = None
        self._lines: deque[bytes] = deque()
        self._wake = anyio.Event()
        self._done = False

    def progress(self, report: Progress) -> None:
        if self._done:
            return
        entry: dict[str, Any] = {"progress": report.progress}
        if report.total is not None:
            entry["total"] = report.total
        if report.message is not None:
            entry["message"] = report.message
        if len(self._lines) >= _PENDING_PROGRESS:
            self._lines.pop()  # the reader is behind: it gets the newest report, never a stale one
        self._lines.append(orjson.dumps({"progress": entry}) + b"\n")
        self.progressed = True
        self.first.set()
        self._wake.set()

    async def run(self, work: Callable[[Callable[[Progress], None]], Awaitable[Any]]) -> None:
        """Run ``work(self.progress)`` to its end; it never raises (it runs in the daemon's task group)."""
        try:
            self.answer = await work(self.progress)
            final = self.answer
        except OpError as exc:
            self.error = exc
            final = {**exc.body(), "status": exc.status}
        except Exception as exc:  # a bug costs this call, not the daemon
            self.error = OpError(500, "internal", f"{type(exc).__name__}: {exc}")
            final = {**self.error.body(), "status": 500}
        self._lines.append(orjson.dumps(final) + b"\n")
        self._done = True
        self.first.set()
        self._wake.set()

    def __aiter__(self) -> _ProgressRelay:
        return self

    async def __anext__(self) -> bytes:
        while not self._lines:
            if self._done:
                raise StopAsyncIteration
            await self._wake.wait()
            self._wake = anyio.Event()
        return self._lines.popleft()


async def _events(ops: Ops, params: Mapping[str, Any]) -> Any:
    """``GET /v1/events``: the daemon's events as they happen (``mcpx/gateway/_events.py``)."""
    return AppResponse(
        200,
        content_type="text/event-stream",
        headers=(("cache-control", "no-cache"),),
        stream=ops.upstreams.events.watch(),
    )


async def _health(ops: Ops, params: Mapping[str, Any]) -> Any:
    pools = ops.upstreams.status()
    return {
        "status": "ok",
        "version": __version__,
        "servers": len(ops.servers),
        "uptimeSeconds": round(time.monotonic() - ops.started, 3),
        "instances": sum(len(p.instances) for p in pools),
        "inFlight": sum(p.in_flight for p in pools),
    }


async def _servers(ops: Ops, params: Mapping[str, Any]) -> Any:
    """The configured servers with their pool state, and the collisions of the catalogs last read.

    ``catalog`` is what hosts are shown of each server (spec/gateway.md §1):
    ``{status: ready | starting | failed | not started, detail?}``.
    ``collisions`` are what several passed-through servers offer under one
    name or URI, and what each is offered as instead (spec/gateway.md §2); it
    reads no catalog, so before the first listing it is empty.
    """
    pool = {s.server: s.to_json() for s in ops.upstreams.status()}
    surface = ops.gateway.last_surface if ops.gateway is not None else None
    catalogs = ops.gateway.catalog_states() if ops.gateway is not None else {}
    return {
        "servers": [
            {"name": name, **server.describe(), "pool": pool.get(name), "catalog": catalogs.get(name)}
            for name, server in ops.servers.items()
        ],
        "collisions": [c.to_json() for c in surface.collisions] if surface is not None else [],
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


async def _hostless(
    ops: Ops,
    server: str,
    method: str,
    params: Mapping[str, Any],
    *,
    timeout: float | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> Mapping[str, Any]:
    """``method`` to ``server`` for a /v1 caller, who is no MCP host: the upstream's result, verbatim.

    A stdio upstream's call goes through the router as a host of its own
    (``Routes.call``, spec/gateway.md §11); an HTTP upstream's, or any call
    on a daemon without a router, takes the awaited path.
    """
    routes = ops.upstreams.routes
    if routes is not None and ops.upstreams.routable(server):
        return await routes.call(server, method, params, timeout=timeout, on_progress=on_progress)
    return await ops.upstreams.request(server, method, params, timeout=timeout, on_progress=on_progress)


async def _input_schema(ops: Ops, server: str, tool: str) -> Mapping[str, Any] | None:
    """``tool``'s input schema in ``server``'s catalog, or ``None`` when it cannot be read or has none."""
    try:
        found = await ops.upstreams.catalog(server)
    except McpCallError:
        return None  # the call itself will say what is wrong with the server
    return input_schema_of(found.get("tools"), tool)


async def _call(ops: Ops, params: Mapping[str, Any]) -> Any:
    server = ops._server(params.get("server"))
    tool = params.get("tool")
    if not isinstance(tool, str) or not tool:
        raise OpError(400, "bad-request", 'name the tool: "tool": "<name>" (GET /v1/tools lists them)')
    arguments = params.get("arguments", {})
    if not isinstance(arguments, dict):
        raise OpError(400, "bad-request", '"arguments" must be a JSON object')
    texts = params.get("args")
    if texts is not None and (
        not isinstance(texts, dict) or not all(isinstance(v, str) for v in texts.values())
    ):
        raise OpError(
            400,
            "bad-request",
            '"args" is an object of texts (mcpx call --arg k=v), each typed by the tool\'s input schema',
        )
    timeout = params.get("timeout")
    if timeout is not None and (
        not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0
    ):
        raise OpError(
            400,
            "bad-request",
            '"timeout" is a positive number of seconds (it can only lower pool.callTimeout)',
        )
    progress = params.get("progress", False)
    if not isinstance(progress, bool):
        raise OpError(
            400,
            "bad-request",
            '"progress" is true (relay the upstream\'s progress as application/x-ndjson lines) or false',
        )

    if texts:
        schema = await _input_schema(ops, server, tool) if needs_schema(texts) else None
        arguments = {**arguments, **typed_arguments(texts, schema)}

    async def call(on_progress: Callable[[Progress], None] | None) -> Any:
        params = {"name": tool, "arguments": arguments}
        try:
            result = await _hostless(
                ops, server, "tools/call", params, timeout=timeout, on_progress=on_progress
            )
        except McpCallError as exc:
            if (
                exc.code == INVALID_PARAMS
            ):  # an unknown tool or bad arguments: say where to look, on this surface
                exc = McpCallError(
                    {
                        "code": exc.code,
                        "message": f"server {server!r} refused the call as invalid params (`mcpx tools {server}` "
                        f"lists its tools and their arguments); it said: {exc.message}",
                        **({"data": exc.data} if exc.data is not None else {}),
                    }
                )
            raise _upstream_error(server, exc) from None
        return {"server": server, "tool": tool, "result": result}

    return await (ops.relayed(call) if progress else call(None))


_REF_HINT = '"ref" is {"type": "ref/prompt", "name": PROMPT} or {"type": "ref/resource", "uri": URI_TEMPLATE}'


def _complete_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """``completion/complete``'s params from a /v1/complete body, checked; only the fields MCP defines."""
    ref = params.get("ref")
    if not isinstance(ref, Mapping):
        raise OpError(400, "bad-request", _REF_HINT)
    if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str) and ref["name"]:
        checked_ref = {"type": "ref/prompt", "name": ref["name"]}
    elif ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str) and ref["uri"]:
        checked_ref = {"type": "ref/resource", "uri": ref["uri"]}
    else:
        raise OpError(400, "bad-request", _REF_HINT)
    argument = params.get("argument")
    if (
        not isinstance(argument, Mapping)
        or not isinstance(argument.get("name"), str)
        or not argument["name"]
        or not isinstance(argument.get("value"), str)
    ):
        raise OpError(
            400,
            "bad-request",
            '"argument" is {"name": ARGUMENT, "value": WHAT_IS_TYPED_SO_FAR} ("value" may be "")',
        )
    checked: dict[str, Any] = {
        "ref": checked_ref,
        "argument": {"name": argument["name"], "value": argument["value"]},
    }
    context = params.get("context")
    if context is not None:
        known = context.get("arguments", {}) if isinstance(context, Mapping) else None
        if not isinstance(known, Mapping) or not all(isinstance(v, str) for v in known.values()):
            raise OpError(
                400,
                "bad-request",
                '"context" is {"arguments": {NAME: VALUE, ...}}: the arguments already chosen, as strings',
            )
        checked["context"] = {"arguments": dict(known)}
    return checked


def _template_pattern(template: str) -> tuple[re.Pattern[str], list[str]] | None:
    """A regex matching the URIs ``template`` expands to, and its variables in group order.

    RFC 6570 simple (``{var}``) and reserved (``{+var}``) expressions only;
    any other (``{?q}``, ``{a,b}``, ...) gives ``None``: not matched.
    """
    pattern, names, position = "", [], 0
    for expression in re.finditer(r"\{([^}]*)\}", template):
        pattern += re.escape(template[position : expression.start()])
        inner = expression.group(1)
        reserved = inner.startswith("+")
        name = inner[1:] if reserved else inner
        if not re.fullmatch(r"[A-Za-z0-9_.%]+", name):
            return None
        pattern += "(.+)" if reserved else "([^/?#]+)"
        names.append(name)
        position = expression.end()
    pattern += re.escape(template[position:])
    return re.compile(pattern), names


def _cached_values(
    server: str, catalog: Mapping[str, Any], ref: Mapping[str, Any], argument: str, context: Mapping[str, str]
) -> list[str]:
    """The values ``argument`` of ``ref`` may take, as far as ``server``'s ``catalog`` knows.

    ``OpError`` (404) for a prompt, template or argument the catalog lacks,
    naming the ones it has.
    """
    if ref["type"] == "ref/prompt":
        prompts: Sequence[Any] = catalog.get("prompts", [])
        prompt = next((p for p in prompts if isinstance(p, Mapping) and p.get("name") == ref["name"]), None)
        if prompt is None:
            known = ", ".join(str(p.get("name")) for p in prompts if isinstance(p, Mapping)) or "none"
            raise OpError(
                404, "unknown-ref", f"server {server!r} has no prompt {ref['name']!r} (prompts: {known})"
            )
        arguments = [str(a.get("name")) for a in prompt.get("arguments") or [] if isinstance(a, Mapping)]
        if argument not in arguments:
            raise OpError(
                404,
                "unknown-argument",
                f"prompt {ref['name']!r} of server {server!r} has no argument {argument!r} "
                f"(arguments: {', '.join(arguments) or 'none'})",
            )
        return []  # a prompt's arguments are described by name only: nothing to offer
    templates: Sequence[Any] = catalog.get("resourceTemplates", [])
    if not any(isinstance(t, Mapping) and t.get("uriTemplate") == ref["uri"] for t in templates):
        known = ", ".join(str(t.get("uriTemplate")) for t in templates if isinstance(t, Mapping)) or "none"
        raise OpError(
            404,
            "unknown-ref",
            f"server {server!r} has no resource template {ref['uri']!r} (templates: {known})",
        )
    matcher = _template_pattern(ref["uri"])
    if matcher is None:
        return []
    pattern, names = matcher
    if argument not in names:
        raise OpError(
            404,
            "unknown-argument",
            f"template {ref['uri']!r} of server {server!r} has no variable {argument!r} "
            f"(variables: {', '.join(names) or 'none'})",
        )
    values: set[str] = set()
    for resource in catalog.get("resources", []):
        uri = resource.get("uri") if isinstance(resource, Mapping) else None
        found = pattern.fullmatch(uri) if isinstance(uri, str) else None
        if found is None:
            continue
        bound = {name: unquote(value) for name, value in zip(names, found.groups(), strict=True)}
        if all(bound.get(k, v) == v for k, v in context.items() if k != argument):
            values.add(bound[argument])
    return sorted(values)


def _not_asked(server: str, catalog: Mapping[str, Any]) -> str | None:
    """Why ``server`` is not sent ``completion/complete``; ``None`` when it declared ``completions``."""
    if "completions" in catalog.get("capabilities", {}):
        return None
    known = "the values come from mcpx's catalog of its prompts and resources"
    if catalog.get("revision") == Revision.V2024_11_05:
        return (
            f"server {server!r} speaks MCP 2024-11-05, which has no completions capability to declare, "
            f"so it was not asked (mcpx asks only servers that declare it); {known}"
        )
    return (
        f"server {server!r} did not declare the completions capability, so it was not asked "
        f"(a server that did not may answer anything); {known}"
    )


async def _complete(ops: Ops, params: Mapping[str, Any]) -> Any:
    server = ops._server(params.get("server"))
    request = _complete_params(params)
    try:
        catalog = await ops.upstreams.catalog(server)
    except McpCallError as exc:
        raise _upstream_error(server, exc) from None
    reason = _not_asked(server, catalog)
    if reason is None:
        revision = catalog.get("revision")
        if isinstance(revision, Revision) and revision < Revision.V2025_06_18:
            request.pop("context", None)  # CompleteRequest has no context before 2025-06-18
        try:
            result = await _hostless(ops, server, "completion/complete", request)
        except McpCallError as exc:
            raise _upstream_error(server, exc) from None
        completion = result.get("completion")
        if not isinstance(completion, Mapping) or not isinstance(completion.get("values"), list):
            raise OpError(
                502,
                "upstream-error",
                f"server {server!r} answered completion/complete without completion.values",
                {"server": server},
            )
        return {"server": server, "source": "upstream", "completion": completion}
    typed = request["argument"]["value"].lower()
    context = request.get("context", {}).get("arguments", {})
    values = [
        v
        for v in _cached_values(server, catalog, request["ref"], request["argument"]["name"], context)
        if v.lower().startswith(typed)
    ]
    completion = {"values": values[:_MAX_VALUES], "total": len(values), "hasMore": len(values) > _MAX_VALUES}
    return {"server": server, "source": "cache", "reason": reason, "completion": completion}


async def _protocol(ops: Ops, params: Mapping[str, Any]) -> Any:
    return {
        "revisions": [str(r) for r in REVISIONS],
        "oldest": str(REVISIONS[0]),
        "newest": str(REVISIONS[-1]),
        "spec": ops.config.settings.policy().describe(),
    }


_LOG_LINES_MAX = 10_000


async def _log(ops: Ops, params: Mapping[str, Any]) -> Any:
    """``GET /v1/servers/{name}/log[?lines=N]``: each instance's last stderr lines (spec/gateway.md)."""
    server = ops._server(params["server"])
    raw = params.get("lines")
    last: int | None = None
    if raw is not None:
        if not (isinstance(raw, str) and raw.isdigit() and 1 <= int(raw) <= _LOG_LINES_MAX):
            raise OpError(
                400, "bad-request", f"lines must be a whole number from 1 to {_LOG_LINES_MAX}, not {raw!r}"
            )
        last = int(raw)
    return {"server": server, "instances": ops.upstreams.logs(server, last)}


async def _restart(ops: Ops, params: Mapping[str, Any]) -> Any:
    server = ops._server(params["server"]) if params.get("server") else None
    ops.upstreams.restart(server)
    return {"restarted": [server] if server else list(ops.servers)}


OPS: tuple[Op, ...] = (
    Op(
        "health",
        "GET",
        "/health",
        "Is the daemon up: its version, uptime, upstream instances and calls in flight.",
        _health,
    ),
    Op("servers", "GET", "/v1/servers", "The configured upstream servers and their pool state.", _servers),
    Op(
        "log",
        "GET",
        "/v1/servers/{name}/log",
        "The last lines each instance of a server wrote on stderr (?lines=N: the last N), with its exit code.",
        _log,
    ),
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
                "progress": {"type": "boolean"},
            },
            "required": ["server", "tool"],
        },
        ndjson=True,
    ),
    Op(
        "complete",
        "POST",
        "/v1/complete",
        "Values for a prompt's or resource template's argument: the server's completion/complete "
        "when it declared completions, else what the catalog knows (source: cache, with the reason).",
        _complete,
        {
            "type": "object",
            "properties": {
                "server": {"type": "string"},
                "ref": {
                    "oneOf": [
                        {
                            "type": "object",
                            "properties": {"type": {"const": "ref/prompt"}, "name": {"type": "string"}},
                            "required": ["type", "name"],
                        },
                        {
                            "type": "object",
                            "properties": {"type": {"const": "ref/resource"}, "uri": {"type": "string"}},
                            "required": ["type", "uri"],
                        },
                    ]
                },
                "argument": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
                    "required": ["name", "value"],
                },
                "context": {
                    "type": "object",
                    "properties": {
                        "arguments": {"type": "object", "additionalProperties": {"type": "string"}}
                    },
                },
            },
            "required": ["server", "ref", "argument"],
        },
    ),
    Op(
        "events",
        "GET",
        "/v1/events",
        "Server-Sent Events: upstream log messages, progress, list changes, resource updates, and "
        "upstream processes starting and stopping.",
        _events,
        sse=True,
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
        ok: dict[str, Any] = {"description": "OK"}
        if op.ndjson:
            ok = {
                "description": 'OK: JSON; with "progress": true, once the upstream reports progress, '
                'NDJSON: {"progress": {...}} lines, then the JSON answer as the last line',
                "content": {"application/json": {}, NDJSON: {}},
            }
        if op.sse:
            ok = {
                "description": "OK: an event stream; each event's data is a JSON object naming its server",
                "content": {"text/event-stream": {}},
            }
        entry: dict[str, Any] = {"operationId": op.name, "summary": op.summary, "responses": {"200": ok}}
        if op.body is not None:
            entry["requestBody"] = {"content": {"application/json": {"schema": op.body}}}
        paths.setdefault(op.path, {})[op.method.lower()] = entry
    return {"openapi": "3.1.0", "info": {"title": "mcpx daemon", "version": __version__}, "paths": paths}


class Ops:
    """The /v1 API over the daemon's pool and gateway.

    ``tg`` is the daemon's task group: a call whose progress is relayed runs
    there, so it can go on while its answer is being written.
    """

    def __init__(
        self,
        config: Config,
        servers: Mapping[str, UpstreamServer],
        upstreams: Upstreams,
        tg: anyio.abc.TaskGroup,
        gateway: GatewayServer | None = None,
    ) -> None:
        self.config = config
        self.servers = servers
        self.upstreams = upstreams
        self.tg = tg
        self.gateway = gateway  # for what its surface reports (collisions)
        self.started = time.monotonic()  # /health's uptime

    async def handle(self, request: AppRequest) -> AppResponse:
        target = urlsplit(request.target)
        if target.path == "/openapi.json" and request.method == "GET":
            return _json(200, openapi())
        for op in OPS:
            named = _path_name(op.path, target.path)
            if op.path == target.path or named is not None:
                if request.method != op.method:
                    return _json(
                        405,
                        {"error": {"code": "method-not-allowed", "message": f"{op.path} takes {op.method}"}},
                    )
                try:
                    params = self._params(op, request, target.query)
                    if named is not None:
                        params = {**params, "server": named}
                    answer = await op.handler(self, params)
                except OpError as exc:
                    return _json(exc.status, exc.body())
                return answer if isinstance(answer, AppResponse) else _json(200, answer)
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

    async def relayed(self, work: Callable[[Callable[[Progress], None]], Awaitable[Any]]) -> Any:
        """``work(on_progress)``'s answer, with the progress it reports relayed.

        Plain (the answer, or its ``OpError``) when ``work`` ends before
        reporting any progress; otherwise an application/x-ndjson stream of
        progress lines and then the answer's line, while ``work`` goes on in
        the daemon's task group.
        """
        relay = _ProgressRelay()
        self.tg.start_soon(relay.run, work)
        await relay.first.wait()
        if not relay.progressed:
            if relay.error is not None:
                raise relay.error
            return relay.answer
        return AppResponse(200, content_type=NDJSON, stream=relay)
