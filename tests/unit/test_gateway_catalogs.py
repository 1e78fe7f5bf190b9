"""``GatewayServer``'s catalogs over a fake ``Upstreams``: read once, kept by ``ttlMs``, built once per change.

spec/gateway.md §1 ("Which requests start upstreams") and §5.  The fake
counts what the gateway asks of the pool (``catalog``, which starts a server
if need be) and of running instances (``running_catalog``, the refreshes of
mcpx's own accord), and answers each with the tools it holds then, read now
and fresh for its ``ttl`` (MCP 2026-07-28 ``ttlMs``; 0 by default, as
FastMCP's server answers).  Host requests go through ``GatewayServer._answer``,
the surface lookup and routing the session's requests take.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.abc
import orjson
import pytest

from mcpx.client import McpCallError
from mcpx.core import RequestContext, Revision
from mcpx.core.gateway import GatewayError
from mcpx.gateway import GatewayServer, Upstreams
from mcpx.gateway import _catalogs as catalogs_module
from mcpx.gateway import _upstreams as upstreams_module
from mcpx.gateway._events import EventBus
from mcpx.gateway._instances import UPSTREAM_CAPABILITIES
from mcpx.server import Call, Deferred, Outcome

KEY = b"k" * 32
MODERN = Revision.V2026_07_28


def _tool(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}, **extra}


class FakeUpstreams:
    """What ``GatewayServer`` uses of ``Upstreams``; ``tools[server]`` is what each server lists now."""

    def __init__(self, tools: Mapping[str, list[dict[str, Any]]], *, ttl: float = 0.0) -> None:
        self.servers = dict.fromkeys(tools)
        self.tools = {name: list(offered) for name, offered in tools.items()}
        self.ttl = ttl
        self.reads = dict.fromkeys(tools, 0)  # through the pool
        self.peeks = dict.fromkeys(tools, 0)  # from a running instance
        self.failing: set[str] = set()
        self.starting: dict[str, anyio.Event] = {}  # a server here starts once its event is set
        self.running = True
        self.calls: list[tuple[str, str, Any]] = []
        self.on_catalog_stale: Callable[[str, int, str | None], None] | None = None
        self.routes: Any = None  # no router: every call takes the awaited path (``request``)
        self.http: set[str] = set()  # servers reached over HTTP: never routed
        self._asked: anyio.Event | None = None  # set by the next ``running_catalog``
        self.events = EventBus()  # /v1/events: the gateway publishes what each catalog read found

    def routable(self, server: str) -> bool:
        return self.routes is not None and server not in self.http

    def watch(self, servers: Any, on_list_changed: Any, on_resource_updated: Any = None) -> None:
        self.on_list_changed = on_list_changed

    def _found(self, server: str, listed_at: float) -> dict[str, Any]:
        return {
            "capabilities": {"tools": {"listChanged": True}},
            "revision": MODERN,
            "tools": list(self.tools[server]),
            "prompts": [],
            "resources": [],
            "resourceTemplates": [],
            "listedAt": listed_at,
            "freshUntil": time.monotonic() + self.ttl,
        }

    async def catalog(self, server: str, *, scope_key: str | None = None) -> dict[str, Any]:
        self.reads[server] += 1
        if server in self.starting:
            await self.starting[server].wait()
        listed_at = time.monotonic()
        await anyio.sleep(0.01)  # simulated slowness, not a wait: requests made meanwhile share the read
        if server in self.failing:
            raise McpCallError({"code": -32603, "message": f"server {server!r} could not be started"})
        return self._found(server, listed_at)

    async def asked(self) -> None:
        """Until ``running_catalog`` is next asked (the gateway's own read, of any server)."""
        asked = self._asked = anyio.Event()
        await asked.wait()

    async def running_catalog(self, server: str, instance: int | None = None) -> dict[str, Any] | None:
        if self._asked is not None:
            self._asked.set()  # its waiter runs once the gateway's task yields: after this read is kept
        if not self.running:
            return None
        self.peeks[server] += 1
        return self._found(server, time.monotonic())

    async def request(self, server: str, method: str, params: Any = None, **_: Any) -> Mapping[str, Any]:
        self.calls.append((server, method, params))
        return {"content": [{"type": "text", "text": f"{server} answered"}]}

    def scope_ended(self, scope_key: str) -> None:
        pass

    def subscribe(self, server: str, uri: str) -> None:
        pass


def _gateway(
    fake: FakeUpstreams, passthrough: tuple[str, ...] = ("a", "b"), list_wait: float = 10.0
) -> GatewayServer:
    upstreams: Upstreams = fake  # type: ignore[assignment]
    return GatewayServer(upstreams, cursor_key=KEY, passthrough=passthrough, list_wait=list_wait)


async def _ask(gateway: GatewayServer, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    outcome = await gateway._answer(method, params, MODERN, None, "k")  # type: ignore[arg-type]
    assert outcome.result is not None, outcome
    return dict(outcome.result)


async def _call(gateway: GatewayServer, name: str) -> str:
    result = await _ask(gateway, "tools/call", {"name": name, "arguments": {}})
    return str(result["content"][0]["text"])


async def _listed(gateway: GatewayServer) -> list[str]:
    return [tool["name"] for tool in (await _ask(gateway, "tools/list", {}))["tools"]]


def _running(gateway: GatewayServer, body: Callable[[], Any]) -> None:
    """``body()`` with ``gateway.warm()`` holding its background task group, as the daemon runs it."""

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(gateway.warm)
            await body()
            tg.cancel_scope.cancel()

    anyio.run(main)


def _offered(gateway: GatewayServer) -> list[str]:
    """The tools the surface of the catalogs last read offers (nothing is read to answer)."""
    surface = gateway.last_surface
    assert surface is not None
    page = surface.list_tools()
    assert not isinstance(page, GatewayError)
    return [str(tool["name"]) for tool in page.items]


async def _until_read(fake: FakeUpstreams, check: Callable[[], bool]) -> None:
    """Until ``check()`` holds, looked at again after each read the gateway makes of a running instance."""
    with anyio.fail_after(5):
        while not check():
            await fake.asked()


async def _settled(gateway: GatewayServer) -> None:
    """Every background read has run to its end: no task has work left, and no read is in flight."""
    with anyio.fail_after(5):
        while True:
            await anyio.wait_all_tasks_blocked()
            reading = [known.refreshing for known in gateway._known.values() if known.refreshing is not None]
            if not reading:
                return
            await reading[0].wait()  # a read is in its fake's own delay: it is set when the read ends


async def _warmed(gateway: GatewayServer) -> None:
    """``warm()``'s start-up listing has been read (and nothing else is in flight)."""
    await _settled(gateway)
    assert gateway.last_surface is not None


def _no_refresh_due(gateway: GatewayServer, name: str) -> bool:
    """Nothing will read ``name`` of mcpx's own accord: no ttlMs refresh is scheduled or waited for."""
    known = gateway._known[name]
    return known.refresh_at == math.inf and not known.timer


def test_calls_are_routed_by_the_last_catalog_and_only_the_first_ones_wait_for_it() -> None:
    fake = FakeUpstreams({"a": [_tool("alpha")], "b": [_tool("beta")]})
    gateway = _gateway(fake)

    async def main() -> None:
        async with anyio.create_task_group() as tg:  # a fresh gateway: the first calls share one read
            for _ in range(5):
                tg.start_soon(_call, gateway, "beta")
        assert fake.reads == {"a": 1, "b": 1}
        for _ in range(50):
            assert await _call(gateway, "beta") == "b answered"
        assert await _call(gateway, "nobody-lists-it") == "a answered"  # the first pass-through server
        for method, params in (
            ("prompts/get", {"name": "p"}),
            ("resources/read", {"uri": "x:y"}),
            ("completion/complete", {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {}}),
        ):
            await _ask(gateway, method, params)
        assert fake.reads == {"a": 1, "b": 1}  # ttlMs 0, and still nothing read on a call's way
        assert [server for server, _, _ in fake.calls].count("b") == 55

    anyio.run(main)


def test_ttl_zero_is_read_again_before_the_next_listing_never_for_a_call() -> None:
    fake = FakeUpstreams({"a": [_tool("alpha")], "b": [_tool("beta")]})
    gateway = _gateway(fake)

    async def main() -> None:
        assert await _listed(gateway) == [
            "alpha",
            "beta",
            "mcpx_call",
            "mcpx_servers",
            "mcpx_search",
            "mcpx_describe",
        ]
        assert fake.reads == {"a": 1, "b": 1}
        await _call(gateway, "alpha")
        fake.tools["b"].append(_tool("gamma"))
        assert "gamma" in await _listed(gateway)  # ttlMs 0 ran out: this listing read again
        assert fake.reads == {"a": 2, "b": 2}
        await _call(gateway, "gamma")
        assert fake.reads == {"a": 2, "b": 2}

    anyio.run(main)


def test_a_catalog_within_its_ttl_serves_listings_without_a_read() -> None:
    fake = FakeUpstreams({"a": [_tool("alpha")], "b": [_tool("beta")]}, ttl=60.0)
    gateway = _gateway(fake)

    async def main() -> None:
        for _ in range(10):
            await _listed(gateway)
            await _ask(gateway, "tools/call", {"name": "mcpx_servers", "arguments": {}})
        assert fake.reads == {"a": 1, "b": 1}

    anyio.run(main)


def test_the_surface_and_hints_are_built_once_per_catalog_generation() -> None:
    fake = FakeUpstreams({"a": [_tool("alpha", execution={"taskSupport": "required"})], "b": []})
    gateway = _gateway(fake)
    built: list[object] = []
    original = catalogs_module.GatewaySurface

    def counting(*args: Any, **kwargs: Any) -> Any:
        surface = original(*args, **kwargs)
        built.append(surface)
        return surface

    async def main() -> None:
        await _listed(gateway)
        first = await gateway.surface(full=False)
        assert gateway.task_support("alpha") == "required"
        # Built once for each generation the catalogs went through (a server starting, read),
        # at the moment it began: a call judged next is judged by the hints of the catalogs now.
        assert len(built) == gateway._generation
        settled = len(built)
        for _ in range(20):
            await _call(gateway, "alpha")
            await _listed(gateway)  # read again (ttlMs 0), found the same: the same generation
            assert gateway.header_params("alpha") == {}
        assert await gateway.surface(full=False) is first and len(built) == settled
        fake.tools["a"] = [_tool("alpha", execution={"taskSupport": "forbidden"})]
        await _listed(gateway)
        assert await gateway.surface(full=False) is not first and len(built) == settled + 1
        assert gateway.task_support("alpha") == "forbidden"  # the hints moved with the surface
        assert gateway.tool_hints.support("alpha") == "forbidden"  # and so did what the session reads

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(catalogs_module, "GatewaySurface", counting)
        anyio.run(main)


def test_cursors_stay_valid_across_a_surface_rebuilt_over_the_same_catalogs() -> None:
    many = [_tool(f"t{i:03}") for i in range(150)]
    fake = FakeUpstreams({"a": many, "b": []})
    gateway = _gateway(fake)

    async def main() -> None:
        page = await _ask(gateway, "tools/list", {})
        cursor = page["nextCursor"]
        fake.tools["a"] = many[:-1]
        await _listed(gateway)  # another generation
        fake.tools["a"] = many
        await _listed(gateway)  # and back: a rebuilt surface over the same catalogs
        rest = await _ask(gateway, "tools/list", {"cursor": cursor})
        assert rest["tools"][0]["name"] == "t100"

    anyio.run(main)


def test_a_list_change_is_read_once_in_the_background_and_no_listing_uses_the_old_catalog() -> None:
    fake = FakeUpstreams({"a": [_tool("alpha")], "b": []}, ttl=60.0)
    gateway = _gateway(fake)

    async def body() -> None:
        await _warmed(gateway)  # the start-up listing
        fake.tools["a"].append(_tool("added"))
        assert fake.on_catalog_stale is not None
        fake.on_catalog_stale("a", 1, "tools")
        await _settled(gateway)  # the background read of the change
        assert "added" in _offered(gateway)
        assert "added" in await _listed(gateway)
        assert fake.reads == {"a": 1, "b": 1} and fake.peeks == {"a": 1, "b": 0}
        await _settled(gateway)
        assert fake.peeks == {"a": 1, "b": 0}  # one refresh per change
        assert gateway._known["a"].refresh_at - time.monotonic() > 1  # the next: when ttlMs runs out

        fake.running = False  # the change is announced, and its instance goes before it is read
        fake.on_catalog_stale("a", 1, "tools")
        await _settled(gateway)
        await _call(gateway, "alpha")
        assert fake.reads == {"a": 1, "b": 1}  # a call still routes by the catalog it has
        await _listed(gateway)
        assert fake.reads == {"a": 2, "b": 1}  # but no listing uses it

    _running(gateway, body)


def test_an_instance_start_is_read_in_the_background_unless_a_read_since_covers_it() -> None:
    fake = FakeUpstreams({"a": [_tool("alpha")], "b": []}, ttl=60.0)
    gateway = _gateway(fake)
    heard: list[str] = []
    gateway.add_listener(lambda kind, uri: heard.append(kind))

    async def body() -> None:
        await _warmed(gateway)
        fake.tools["a"] = [_tool("upgraded")]  # the server came back offering something else
        assert fake.on_catalog_stale is not None
        fake.on_catalog_stale("a", 2, None)
        await _settled(gateway)  # the background read of the new instance
        assert "upgraded" in _offered(gateway)
        assert fake.peeks == {"a": 1, "b": 0} and fake.reads == {"a": 1, "b": 1}
        assert heard == ["tools"]  # found by the refresh, not announced: pass-through hosts are told

    _running(gateway, body)


def test_a_positive_ttl_is_refreshed_in_the_background_while_an_instance_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(catalogs_module, "_REFRESH_MIN", 0.05)
    fake = FakeUpstreams({"a": [_tool("alpha")], "b": []}, ttl=0.05)
    gateway = _gateway(fake)

    async def body() -> None:
        await _warmed(gateway)
        await _until_read(fake, lambda: fake.peeks["a"] >= 2)  # once the ttl ran out, again after that one's
        fake.running = False  # reaped: nothing is started to refresh it
        # The due refresh found no instance, and stopped.
        await _until_read(fake, lambda: _no_refresh_due(gateway, "a"))
        peeks = dict(fake.peeks)
        await _settled(gateway)
        assert fake.peeks == peeks
        await _call(gateway, "alpha")
        assert fake.reads == {"a": 1, "b": 1}
        await _listed(gateway)  # the next listing reads it (and starts it)
        assert fake.reads == {"a": 2, "b": 2}

    _running(gateway, body)


def test_ttl_zero_is_never_refreshed_in_the_background() -> None:
    fake = FakeUpstreams({"a": [_tool("alpha")], "b": []}, ttl=0.0)
    gateway = _gateway(fake)

    async def body() -> None:
        await _warmed(gateway)
        await _settled(gateway)
        assert _no_refresh_due(gateway, "a") and _no_refresh_due(gateway, "b")
        assert fake.peeks == {"a": 0, "b": 0}

    _running(gateway, body)


def test_mcpx_servers_reports_a_failed_server_and_each_listing_tries_it_again() -> None:
    fake = FakeUpstreams({"a": [_tool("alpha")], "b": [_tool("beta")]}, ttl=60.0)
    fake.failing.add("b")
    gateway = _gateway(fake, passthrough=())

    async def servers() -> dict[str, Any]:
        result = await _ask(gateway, "tools/call", {"name": "mcpx_servers", "arguments": {}})
        return {entry["name"]: entry for entry in result["structuredContent"]["servers"]}

    async def main() -> None:
        assert await _listed(gateway) == ["mcpx_call", "mcpx_servers", "mcpx_search", "mcpx_describe"]
        assert fake.reads == {"a": 0, "b": 0}  # gateway mode's tools/list needs no catalog
        arguments = {"server": "b", "tool": "beta", "arguments": {}}
        result = await _ask(gateway, "tools/call", {"name": "mcpx_call", "arguments": arguments})
        assert result["content"][0]["text"] == "b answered" and fake.reads == {"a": 0, "b": 0}
        found = await servers()
        assert found["a"]["status"] == "ready"
        assert found["b"]["status"] == "failed" and "could not be started" in found["b"]["detail"]
        fake.failing.clear()
        assert (await servers())["b"]["status"] == "ready"
        assert fake.reads == {"a": 1, "b": 2}  # the failure was tried again, the good one kept

    anyio.run(main)


async def _statuses(gateway: GatewayServer) -> dict[str, str]:
    result = await _ask(gateway, "tools/call", {"name": "mcpx_servers", "arguments": {}})
    return {entry["name"]: entry["status"] for entry in result["structuredContent"]["servers"]}


def test_a_listing_is_served_without_a_server_still_starting_and_hosts_are_told_when_it_comes() -> None:
    fake = FakeUpstreams({"a": [_tool("alpha")], "b": [_tool("beta")]})
    fake.starting["b"] = anyio.Event()
    gateway = _gateway(fake, list_wait=0.05)
    heard: list[str] = []
    gateway.add_listener(lambda kind, uri: heard.append(kind))

    async def body() -> None:
        await anyio.wait_all_tasks_blocked()  # warm() runs: its start-up listing waits for b
        with anyio.fail_after(5):  # b never starts meanwhile: the listing did not wait for it
            assert "beta" not in await _listed(gateway)
            assert "alpha" in await _listed(gateway)
        assert await _statuses(gateway) == {"a": "ready", "b": "starting"}
        assert gateway.catalog_states()["b"] == {"status": "starting"}  # GET /v1/servers' "catalog"
        assert heard == []
        fake.starting["b"].set()
        await _settled(gateway)
        assert heard == ["tools"]  # as for an upstream's own change
        assert fake.reads["b"] == 1  # the start-up listing's read, shared by every listing meanwhile
        assert "beta" in await _listed(gateway)
        assert gateway.catalog_states()["b"] == {"status": "ready"}

    _running(gateway, body)


def test_a_server_that_failed_when_listed_and_comes_up_later_is_announced() -> None:
    fake = FakeUpstreams({"a": [_tool("alpha")], "b": [_tool("beta")]})
    fake.failing.add("b")
    gateway = _gateway(fake)
    heard: list[str] = []
    gateway.add_listener(lambda kind, uri: heard.append(kind))

    async def body() -> None:
        await _warmed(gateway)
        assert "beta" not in await _listed(gateway)
        state = gateway.catalog_states()["b"]
        assert state["status"] == "failed" and "could not be started" in state["detail"]
        fake.failing.clear()  # an instance of b came up (a retry, or one still starting)
        assert fake.on_catalog_stale is not None
        fake.on_catalog_stale("b", 2, None)
        await _settled(gateway)
        assert heard == ["tools"]
        assert "beta" in await _listed(gateway)

    _running(gateway, body)


def test_a_catalog_nobody_listed_without_is_not_announced() -> None:
    fake = FakeUpstreams({"a": [_tool("alpha")], "b": [_tool("beta")]})
    fake.starting["b"] = anyio.Event()
    gateway = _gateway(fake, list_wait=0.05)
    heard: list[str] = []
    gateway.add_listener(lambda kind, uri: heard.append(kind))

    async def body() -> None:
        await anyio.wait_all_tasks_blocked()
        assert gateway.catalog_states() == {"a": {"status": "ready"}, "b": {"status": "starting"}}
        fake.starting["b"].set()
        await _settled(gateway)
        assert heard == []  # the start-up listing's reads: no host was shown a list without b
        assert "beta" in await _listed(gateway)

    _running(gateway, body)


def test_narrowed_capabilities_are_computed_once_per_host_capability_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    computed: list[Mapping[str, Any]] = []
    original = upstreams_module.narrowed_capabilities

    def counting(own: Mapping[str, Any], host: Mapping[str, Any]) -> dict[str, Any]:
        computed.append(host)
        return original(own, host)

    monkeypatch.setattr(upstreams_module, "narrowed_capabilities", counting)
    upstreams = Upstreams({}, state_dir=tmp_path)
    first = upstreams._narrowed_for({"sampling": {}, "elicitation": {"form": {}}})
    first["extensions"] = {"changed": {}}  # the caller's own copy
    again = upstreams._narrowed_for({"elicitation": {"form": {}}, "sampling": {}})
    assert len(computed) == 1 and "extensions" not in again
    assert again == original(UPSTREAM_CAPABILITIES, {"sampling": {}, "elicitation": {"form": {}}})
    for n in range(200):
        upstreams._narrowed_for({"experimental": {str(n): {}}})
    assert len(upstreams._narrowed) <= 64  # bounded


def test_a_call_the_last_catalogs_route_is_deferred_to_the_router_and_the_rest_wait() -> None:
    """spec/gateway.md §11: what takes the router's way (a ``Deferred``) and what the awaited path keeps."""
    fake = FakeUpstreams({"a": [_tool("alpha")], "b": [_tool("beta")]})
    started: list[tuple[Any, ...]] = []

    class _Routes:  # a router is there; it records what a Deferred would start
        def start(self, *args: Any) -> None:
            started.append(args)

    fake.routes = _Routes()
    fake.http = {"b"}
    gateway = _gateway(fake)
    context = RequestContext(
        token=1, request_id=1, method="tools/call", revision=MODERN, client_capabilities={}, identity="host:1"
    )

    def route(method: str, params: Mapping[str, Any]) -> Any:
        return gateway.route(method, params, context)

    assert isinstance(route("tools/call", {"name": "alpha"}), Call)  # never read: it waits for the read

    async def main() -> None:
        await _listed(gateway)  # the catalogs are read

    anyio.run(main)
    deferred = route("tools/call", {"name": "alpha"})
    assert isinstance(deferred, Deferred)  # a stdio upstream: routed
    deferred.start("the pending call")  # the driver's Pending: the router is handed the route
    ((routed, scope, per_request, pending),) = started
    assert (routed.server, routed.method, routed.params["name"]) == ("a", "tools/call", "alpha")
    assert (scope, per_request, pending) == ("host:1", False, "the pending call")
    assert isinstance(route("tools/call", {"name": "beta"}), Call)  # an HTTP upstream: awaited
    assert isinstance(route("tools/list", {}), Call)  # a listing: fresh catalogs, awaited
    task = route("tools/call", {"name": "alpha", "task": {}})
    assert isinstance(task, Call)  # the host asked mcpx for a task
    own = route("resources/read", {"uri": "mcpx://mcpx/nothing"})  # the surface answers itself: at once
    assert isinstance(own, Outcome) and own.error is not None and own.error[0] == -32002
    fake.routes = None
    assert isinstance(route("tools/call", {"name": "alpha"}), Call)  # no router: awaited


def test_each_catalog_read_is_published_as_v1_servers_then_shows_it() -> None:
    """``catalog.read`` on /v1/events (spec/gateway.md §8): the server and its catalog's state after the read."""
    fake = FakeUpstreams({"a": [_tool("alpha")], "b": [_tool("beta")]})
    fake.failing.add("b")
    gateway = _gateway(fake)

    async def main() -> None:
        watcher = fake.events.watch()
        assert await anext(watcher) == b": mcpx events\n\n"
        await _listed(gateway)  # reads both
        frames = [await anext(watcher), await anext(watcher)]
        published = {}
        for frame in frames:
            head, _, body = frame.partition(b"\ndata: ")
            assert head == b"event: catalog.read"
            event = orjson.loads(body)
            published[event.pop("server")] = event
        assert published == gateway.catalog_states()  # what GET /v1/servers shows now
        assert published["a"] == {"status": "ready"} and published["b"]["status"] == "failed"
        await watcher.aclose()

    anyio.run(main)
