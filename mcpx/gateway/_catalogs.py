"""The gateway's catalogs of its upstreams: kept, read, refreshed, and the surface built over them.

The layer ``GatewayServer`` (mcpx/gateway/_server.py, where the theory of
operation is) stands on: ``_Known`` per server (the last catalog read, when,
until when it may serve a listing, and the read in flight), the reads a
request needs (shared with the one in flight), the background refreshes (a
list change, an instance start, a positive ``ttlMs`` run out), and the
``GatewaySurface`` built once per catalog generation.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from ..client import McpCallError
from ..core import RequestContext, Revision, ToolHints
from ..core.gateway import GatewaySurface, UpstreamCatalog
from ..core.gateway_tools import gateway_tools
from ..core.http_client import tool_header_params
from ..server import Server
from ._hosts import HOST_PREFIX
from ._routing import REQUEST_SCOPE_PREFIX
from ._upstreams import Upstreams

_GATEWAY_TOOLS = {str(tool["name"]): tool for tool in gateway_tools()}


def _declared_support(tool: Mapping[str, Any]) -> str | None:
    """A tool's ``execution.taskSupport`` when it declares one mcpx knows, else ``None``."""
    execution = tool.get("execution")
    declared = execution.get("taskSupport") if isinstance(execution, Mapping) else None
    return str(declared) if declared in ("forbidden", "optional", "required") else None


# The gateway's own tools, as they declare (mcpx_call: optional); one that declares nothing: forbidden.
_OWN_SUPPORT = {name: _declared_support(tool) or "forbidden" for name, tool in _GATEWAY_TOOLS.items()}


# MCP 2026-07-28 server/utilities/caching: a ttlMs is no schedule for polling, and whoever polls
# anyway must add jitter and back off.  The background refresh of a positive ttlMs comes no
# sooner than this, a little later at random, and only while an instance runs.
_REFRESH_MIN = 5.0  # seconds


_REFRESH_JITTER = 0.1  # up to this much of the interval later


LIST_WAIT = 10.0
"""``mcp.listWait``'s default: how long a host's listing waits for a catalog not read yet (seconds)."""


_Read = tuple[UpstreamCatalog, float, float]
"""One read of a server's catalog: the catalog, when it was read, until when a listing may use it."""


@dataclass
class _Known:
    """What the gateway knows of one server's catalog, and how fresh it is (times: ``time.monotonic()``)."""

    seen: UpstreamCatalog | None = None  # the last read (a failed one says why); None: never read
    listed_at: float = -math.inf  # when ``seen`` was read
    fresh_until: float = -math.inf  # a listing may use ``seen`` until then (its ttlMs); a call always
    changed_at: float = -math.inf  # the last list change the server announced
    announced: set[str] = field(default_factory=set)  # kinds announced to hosts since ``seen`` was read
    refreshing: anyio.Event | None = None  # a read in flight, set when it ends
    refresh_at: float = math.inf  # when the background refresh of a positive ttlMs is due
    timer: bool = False  # a task waits for ``refresh_at``
    left_out: bool = (
        False  # a host's listing was served without a ready catalog of it: tell hosts when one comes
    )


@dataclass
class _Shared:
    """What every pass-through view of one gateway shares: the catalog generation, the background, the views."""

    generation: int = 0  # bumped whenever any server's catalog changes
    background: anyio.abc.TaskGroup | None = None  # warm()'s: refreshes of mcpx's own accord
    views: dict[tuple[str, ...], _Catalogs] = field(default_factory=dict)  # each a GatewayServer


def _as_catalog(name: str, found: Mapping[str, Any]) -> UpstreamCatalog:
    """``Upstreams.catalog``'s answer as the surface takes it."""
    return UpstreamCatalog(
        name=name,
        revision=found["revision"],
        capabilities=found["capabilities"],
        tools=found["tools"],
        prompts=found["prompts"],
        resources=found["resources"],
        resource_templates=found["resourceTemplates"],
    )


def _ready(catalog: UpstreamCatalog | None) -> bool:
    return catalog is not None and catalog.status == "ready"


def _shown(name: str, known: _Known) -> UpstreamCatalog:
    """``name``'s catalog as the surface shows it: the last read, or ``starting`` while one is read."""
    if known.refreshing is not None and not _ready(known.seen):
        return UpstreamCatalog(name=name, status="starting")
    return known.seen or UpstreamCatalog(name=name, status="not started")


def _offered_kinds(catalog: UpstreamCatalog, *, passed: bool) -> set[str]:
    """The lists hosts are shown that ``catalog`` adds to: its tools only if passed through (§2)."""
    kinds = set()
    if catalog.tools and passed:
        kinds.add("tools")
    if catalog.prompts:
        kinds.add("prompts")
    if catalog.resources or catalog.resource_templates:
        kinds.add("resources")
    return kinds


def _changed_kinds(before: UpstreamCatalog, after: UpstreamCatalog) -> set[str]:
    """The kinds of list (as ``list_changed`` names them) that differ between two ready catalogs."""
    if before.status != "ready" or after.status != "ready":
        return set()
    kinds = set()
    if before.tools != after.tools:
        kinds.add("tools")
    if before.prompts != after.prompts:
        kinds.add("prompts")
    if before.resources != after.resources or before.resource_templates != after.resource_templates:
        kinds.add("resources")
    return kinds


def _tool_hints(
    surface: GatewaySurface, catalogs: Mapping[str, UpstreamCatalog]
) -> tuple[dict[str, Mapping[str, str]], dict[str, str]]:
    """What the session needs of pass-through tools before routing, by the name the host calls (aliases too).

    ``({tool: {argument: x-mcp-header}}, {tool: execution.taskSupport})``.  A
    2026-07-28 upstream lists no ``execution`` (the extension lets the server
    decide per call), so its tools are ``"optional"``: the host's call may
    become a task, and does when the upstream's does (``Upstreams.request``).
    """
    headers: dict[str, Mapping[str, str]] = {}
    support: dict[str, str] = {}
    for name, server, tool in surface.offered_tools:
        headers[name] = tool_header_params(tool) or {}
        declared = _declared_support(tool)
        if declared is not None:
            support[name] = declared
        else:  # 2026-07-28's Tool has no execution: the upstream decides per call, so may mcpx
            support[name] = "optional" if catalogs[server].revision == Revision.V2026_07_28 else "forbidden"
    return headers, support


SESSION_META = "dev.mcpx/session"


_request_keys = itertools.count(1)


def scope_key(context: RequestContext) -> tuple[str, bool]:
    """Who a host request is from, for the pool (spec/gateway.md §3); and whether that scope is the request alone.

    ``_meta["dev.mcpx/session"]`` when the host names one; else the host's
    stdio connection handed over by ``mcpx serve`` (``host:<n>``, in both
    eras), or the legacy HTTP session; a 2026-07-28 request over HTTP has no
    session, so it is its own scope.
    """
    named = context.meta.get(SESSION_META)
    if isinstance(named, str) and named:
        return f"named:{named}", False
    identity = context.identity
    if identity is not None and (identity.startswith(HOST_PREFIX) or not context.revision.is_modern):
        return identity, False  # a host on its own stdio is one connection in both eras
    return f"{REQUEST_SCOPE_PREFIX}{next(_request_keys)}", True


class _Catalogs(Server):
    """The catalogs and the surface over them, shared by every view of one gateway (see ``GatewayServer``)."""

    if TYPE_CHECKING:  # defined by a later layer

        def _new_hints(self) -> ToolHints: ...
        def _upstream_changed(self, server: str, kind: str) -> None: ...
        def _upstream_resource_updated(self, server: str, uri: str) -> None: ...

    def __init__(
        self,
        upstreams: Upstreams,
        *,
        cursor_key: bytes,
        passthrough: Sequence[str] = (),
        version: str = "0.1.0",
        sse_poll_after: float = 0.0,
        list_wait: float = LIST_WAIT,
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
        self.list_wait = list_wait  # mcp.listWait: a host's listing waits no longer for a server's catalog
        self._own_scopes = itertools.count(1)  # scope keys of background reads made for per-request listings
        self._servers = tuple(upstreams.servers)
        self._known = {name: _Known() for name in self._servers}
        self._shared = _Shared(views={self.passthrough: self})
        self._built: tuple[int, GatewaySurface] | None = None  # the surface of that generation
        self.tool_hints = self._new_hints()  # the session's and the HTTP binding's, kept with the surface
        unknown = [name for name in self.passthrough if name not in upstreams.servers]
        if unknown:
            configured = ", ".join(upstreams.servers) or "none"
            raise ValueError(
                f"mcp.passthrough names {', '.join(unknown)}, not configured (configured: {configured})"
            )
        if self.passthrough:
            upstreams.watch(self.passthrough, self._upstream_changed, self._upstream_resource_updated)
        upstreams.on_catalog_stale = self._catalog_stale
        # The relay lane's targets by tool name, for one surface (a new one, a new map); whether
        # every pass-through catalog has been read once (they stay read: ``_store`` never forgets).
        self._relay_cache: tuple[GatewaySurface | None, dict[str, Any]] = (None, {})
        self._relay_ready = False
        self._current()  # the tool hints of generation 0: the gateway's own tools

    @property
    def _generation(self) -> int:
        return self._shared.generation

    @_generation.setter
    def _generation(self, value: int) -> None:
        self._shared.generation = value
        # Every view's surface, and with it the tool hints its hosts' calls are judged by, now: a
        # call is judged before it is routed, and must not be judged by the previous generation.
        for view in self._shared.views.values():
            view._current()

    @property
    def _background(self) -> anyio.abc.TaskGroup | None:
        return self._shared.background

    @_background.setter
    def _background(self, value: anyio.abc.TaskGroup | None) -> None:
        self._shared.background = value

    def _views_passing(self, server: str) -> list[_Catalogs]:
        """The views (this one among them) that pass ``server`` through."""
        return [view for view in self._shared.views.values() if server in view.passthrough]

    @property
    def last_surface(self) -> GatewaySurface | None:
        """The surface over the catalogs last read; ``None`` before any was."""
        if all(known.seen is None for known in self._known.values()):
            return None
        return self._current()

    async def surface(self, *, full: bool = True, scope_key: str | None = None) -> GatewaySurface:
        """The surface over the catalogs last read; ``full``: every one read again first where a listing would.

        With ``full``, a catalog whose ``ttlMs`` ran out (or never read) is
        read again, which starts its server if it is not running; without,
        nothing is read, and a server never read is ``"not started"``.
        ``scope_key`` is the caller's identity, for servers scoped per connection.
        """
        if full:
            await self._read_catalogs(self._servers, scope_key, listing=True)
        return self._current()

    def _current(self) -> GatewaySurface:
        """The surface of the current catalog generation, built (with ``_tool_hints``) only when it changed."""
        built = self._built
        if built is not None and built[0] == self._generation:
            return built[1]
        catalogs = {name: _shown(name, known) for name, known in self._known.items()}
        surface = GatewaySurface(
            list(catalogs.values()), cursor_key=self.cursor_key, passthrough=self.passthrough
        )
        headers, support = _tool_hints(surface, catalogs)
        hints = self.tool_hints
        hints.header_params.clear()
        hints.header_params.update(headers)
        hints.task_support.clear()
        hints.task_support.update(_OWN_SUPPORT)
        hints.task_support.update(support)  # a pass-through tool's own word, over a gateway tool's name
        self._built = (self._generation, surface)
        return surface

    @staticmethod
    def _usable(known: _Known, asked: float | None) -> bool:
        """Whether ``known`` serves a listing made at ``asked``, or a call (``None``: any catalog read will do).

        A listing takes a catalog read since it was made, or one still within
        its ``ttlMs``.  MCP 2026-07-28 ``CacheableResult.ttlMs``: "If 0, The
        response SHOULD be considered immediately stale, The client MAY
        re-fetch every time the result is needed".  Routing a call does not
        need the list, so ``ttlMs: 0`` means "read again before the next
        listing", never "read again on every call".
        """
        if known.seen is None:
            return False
        return asked is None or known.listed_at >= asked or asked < known.fresh_until

    def catalog_states(self) -> dict[str, dict[str, Any]]:
        """Each server's catalog as hosts see it now, for ``GET /v1/servers``: ``{status, detail?}``.

        ``ready``; ``starting`` while a read of a server with no ready catalog
        is in flight; ``failed`` with why; ``not started`` before any read.
        Nothing is read to answer.
        """
        states: dict[str, dict[str, Any]] = {}
        for name, known in self._known.items():
            shown = _shown(name, known)
            states[name] = {"status": shown.status}
            if shown.detail:
                states[name]["detail"] = shown.detail
        return states

    async def _read_catalogs(
        self,
        names: Sequence[str],
        scope_key: str | None,
        *,
        listing: bool,
        bound: float | None = None,
        per_request: bool = False,
    ) -> None:
        """Each of ``names`` with a catalog the request can use, read (concurrently) where it has none.

        ``bound`` (a host's listing): wait at most that long; a read still
        going on then goes on in the background (``_read_aside``), and its
        server is left out of this request.  ``per_request``: ``scope_key``
        ends with the request, so such a read uses a scope of its own.
        """
        asked = time.monotonic() if listing else None
        due = [name for name in names if not self._usable(self._known[name], asked)]
        if not due:
            return  # the usual case: nothing is read on the request's way
        if bound is not None and self._background is not None:
            with anyio.move_on_after(bound):
                async with anyio.create_task_group() as tg:
                    for name in due:
                        tg.start_soon(self._ensure_aside, name, asked, scope_key, per_request)
            return
        if len(due) == 1:
            await self._ensure(due[0], asked, scope_key)
            return
        async with anyio.create_task_group() as tg:
            for name in due:
                tg.start_soon(self._ensure, name, asked, scope_key)

    async def _ensure(self, name: str, asked: float | None, scope_key: str | None) -> None:
        """``name``'s catalog usable for a request made at ``asked``: the read in flight, or one of its own."""
        known = self._known[name]
        while not self._usable(known, asked):
            if known.refreshing is not None:
                await known.refreshing.wait()
                continue
            await self._refresh(name, functools.partial(self._catalog, name, scope_key))
            return

    async def _ensure_aside(
        self, name: str, asked: float | None, scope_key: str | None, per_request: bool
    ) -> None:
        """``_ensure``, its reads made in the background task group: a waiter that gives up leaves them running."""
        known = self._known[name]
        while not self._usable(known, asked):
            if known.refreshing is None:
                self._read_aside(name, scope_key, per_request)
            assert known.refreshing is not None
            await known.refreshing.wait()

    def _read_aside(self, name: str, scope_key: str | None, per_request: bool) -> None:
        """Read ``name``'s catalog through the pool in the background (``warm()``'s task group)."""
        assert self._background is not None
        known = self._known[name]
        done = known.refreshing = anyio.Event()
        if not _ready(known.seen):
            self._generation += 1  # shown as "starting" from now on
        # A scope of its own that names no host: a host-scoped server reads on its shared instance.
        own = (
            f"{REQUEST_SCOPE_PREFIX}catalog-read:{next(self._own_scopes)}"
            if per_request or scope_key is None
            else None
        )
        key = own or scope_key

        async def read() -> None:
            try:
                await self._refresh(name, functools.partial(self._catalog, name, key), done)
            finally:
                if own is not None:  # connection-scoped instances started for it stop
                    self.upstreams.scope_ended(own)

        self._background.start_soon(read)

    async def _ensure_running(self, name: str, asked: float, instance: int | None) -> None:
        """``name``'s catalog read again since ``asked``, from a running instance (``instance``, or any)."""
        known = self._known[name]
        while known.listed_at < asked:
            if known.refreshing is not None:
                await known.refreshing.wait()
                continue
            await self._refresh(name, functools.partial(self._running_catalog, name, instance))
            return

    async def _refresh(
        self, name: str, read: Callable[[], Awaitable[_Read | None]], done: anyio.Event | None = None
    ) -> None:
        """One read of ``name``'s catalog, kept; ``done`` (already ``known.refreshing``) set when it ends."""
        known = self._known[name]
        if done is None:
            done = known.refreshing = anyio.Event()
        if not _ready(known.seen):
            self._generation += 1  # shown as "starting" meanwhile
        try:
            got = await read()
            if got is not None:
                self._store(name, *got)
        finally:
            known.refreshing = None
            if not _ready(known.seen):
                self._generation += 1  # "starting" no more
            done.set()
            # What GET /v1/servers now shows of it, for a watcher of /v1/events (spec/gateway.md §8).
            self.upstreams.events.publish("catalog.read", {"server": name, **self.catalog_states()[name]})

    def _store(self, name: str, catalog: UpstreamCatalog, listed_at: float, fresh_until: float) -> None:
        """Keep a read of ``name``'s catalog; a new generation if it differs from the last."""
        known = self._known[name]
        if listed_at < known.listed_at:
            return  # a slow read of an older state: the newer one stays
        announced = set(known.announced)
        if known.changed_at >= listed_at:
            fresh_until = -math.inf  # a change was announced while it was read: no listing may use it
        else:
            known.announced.clear()
        previous = known.seen
        known.seen, known.listed_at, known.fresh_until = catalog, listed_at, fresh_until
        if catalog != previous:
            self._generation += 1
            if known.left_out and _ready(catalog):
                # A listing was served without it (still starting, or failed): what it adds is news
                # to every view that declared listChanged (one passing something through;
                # spec/gateway.md §1).
                known.left_out = False
                for view in self._shared.views.values():
                    if view.passthrough:
                        for kind in sorted(_offered_kinds(catalog, passed=name in view.passthrough)):
                            view._changed(kind)
            elif previous is not None:
                # Found by a refresh, not announced (an instance start, an expired ttlMs): hosts hear of it.
                for view in self._views_passing(name):
                    for kind in sorted(_changed_kinds(previous, catalog) - announced):
                        view._changed(kind)
        self._schedule(name)

    def _schedule(self, name: str) -> None:
        """The background refresh of a positive ``ttlMs``, due when it runs out (``_REFRESH_MIN`` at least)."""
        known = self._known[name]
        left = known.fresh_until - time.monotonic()
        if self._background is None or not math.isfinite(left) or left <= 0:
            known.refresh_at = math.inf  # ttlMs 0, a list kept until it changes, a failure: the next listing
            return
        interval = max(left, _REFRESH_MIN)
        known.refresh_at = time.monotonic() + interval * (1 + _REFRESH_JITTER * random.random())
        if not known.timer:
            known.timer = True
            self._background.start_soon(self._keep_fresh, name)

    async def _keep_fresh(self, name: str) -> None:
        known = self._known[name]
        try:
            while math.isfinite(known.refresh_at):
                wait = known.refresh_at - time.monotonic()
                if wait > 0:
                    await anyio.sleep(wait)
                    continue
                due, known.refresh_at = known.refresh_at, math.inf
                await self._ensure_running(name, due, None)  # none running: the next listing reads it
        finally:
            known.timer = False

    def _catalog_stale(self, server: str, instance: int, kind: str | None) -> None:
        """``Upstreams.on_catalog_stale``: an instance started, or announced a list change: read it again.

        A change also makes the catalog stale at once, so no listing uses it
        (a call still routes by it until the new one is read).  The read is
        made in the background, on that instance.
        """
        known = self._known.get(server)
        if known is None:
            return
        now = time.monotonic()
        if kind is not None:
            known.changed_at, known.fresh_until = now, -math.inf
            known.announced.add(kind)
        if self._background is not None:
            self._background.start_soon(self._ensure_running, server, now, instance)

    async def _catalog(self, name: str, scope_key: str | None) -> _Read:
        """``name``'s catalog through the pool (starting the server if need be); a failure is its catalog too."""
        started = time.monotonic()
        try:
            found = await self.upstreams.catalog(name, scope_key=scope_key)
        except McpCallError as exc:
            return UpstreamCatalog(name=name, status="failed", detail=exc.message), started, -math.inf
        return _as_catalog(name, found), found["listedAt"], found["freshUntil"]

    async def _running_catalog(self, name: str, instance: int | None) -> _Read | None:
        found = await self.upstreams.running_catalog(name, instance)
        if found is None:
            return None
        return _as_catalog(name, found), found["listedAt"], found["freshUntil"]
