"""Change notifications reach the client and drop its cached lists, in both eras, over real HTTP.

An mcpx server runs in a thread on loopback with ``list_changed`` and
``subscribe``; its ``grow`` tool adds a tool (so the server announces a tools
list change) and ``touch`` announces an update of a resource.  A legacy
client hears both unsolicited on its session's GET stream (after
``resources/subscribe``); a 2026-07-28 client keeps one
``subscriptions/listen`` open whose filter follows what the server declared
and what it subscribed to, and reopens it when that changes.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

from mcpx.client import Client, connect_http, connect_stdio
from mcpx.core import ServerNotification
from mcpx.drivers import serve_http
from mcpx.server import Server

pytestmark = pytest.mark.timeout(60)


def build() -> Server:
    server = Server("changing", list_changed=True, subscribe=True)

    @server.tool()
    async def grow(name: str) -> str:
        """Add a tool called ``name``."""

        async def extra() -> str:
            return name

        server.tool(name=name, description="added at run time")(extra)
        return f"added {name}"

    @server.tool()
    async def touch(uri: str) -> str:
        """Announce that resource ``uri`` changed."""
        server.notify_resource_updated(uri)
        return "touched"

    @server.resource("note://a", name="a")
    def note() -> str:
        return "a note"

    return server


def serve(port: int = 0) -> tuple[str, Callable[[], None]]:
    """A fresh server in a thread: its URL, and what stops it."""
    stop, bound = threading.Event(), threading.Event()
    urls: list[str] = []

    def ready(found: list[str]) -> None:
        urls.extend(found)
        bound.set()

    thread = threading.Thread(
        target=serve_http, args=(build(),), kwargs={"port": port, "ready": ready, "stop": stop}, daemon=True
    )
    thread.start()
    assert bound.wait(20), "the server did not start"

    def halt() -> None:
        stop.set()
        thread.join(10)

    return urls[0], halt


@pytest.fixture
def url() -> Iterator[str]:
    found, halt = serve()
    yield found
    halt()


async def heard(client: Client, method: str, **params: Any) -> dict[str, Any]:
    """Wait (bounded) for a notification ``method`` whose params contain ``params``."""
    arrivals, arrived = anyio.create_memory_object_stream[ServerNotification](math.inf)
    client.on_notification = arrivals.send_nowait  # told of each, once it is in client.notifications
    try:
        with anyio.fail_after(10):
            while True:
                for note in list(client.notifications):
                    if note.method == method and all(note.params.get(k) == v for k, v in params.items()):
                        client.notifications.remove(note)
                        return dict(note.params)
                await arrived.receive()  # the next one: looked at above
    finally:
        client.on_notification = None
        arrivals.close()
        arrived.close()


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "2025-11-25"])
def test_list_changed_drops_the_cache_and_updates_arrive(url: str, modern: bool) -> None:
    async def main() -> None:
        async with connect_http(url, modern=modern) as client:
            names = {t["name"] for t in await client.cached_list("tools/list")}
            assert "grow" in names and "extra" not in names
            await client.start_listening()
            if modern:
                ack = await heard(client, "notifications/subscriptions/acknowledged")
                assert ack["notifications"].get("toolsListChanged") is True
                assert "resourceSubscriptions" not in ack["notifications"]  # nothing subscribed yet
            await client.call_tool("grow", {"name": "extra"})
            await heard(client, "notifications/tools/list_changed")
            names = {t["name"] for t in await client.cached_list("tools/list")}
            assert "extra" in names  # the cached list was dropped and fetched again
            await client.subscribe("note://a")
            if modern:  # the listen stream was reopened with the resource in its filter
                ack = await heard(client, "notifications/subscriptions/acknowledged")
                assert ack["notifications"]["resourceSubscriptions"] == ["note://a"]
            await client.call_tool("touch", {"uri": "note://a"})
            await heard(client, "notifications/resources/updated", uri="note://a")

    anyio.run(main)


def test_legacy_subscriptions_are_sent_again_to_a_renewed_session() -> None:
    """The server restarts and forgets the session: the new one is subscribed to what the old one was."""
    first, halt = serve()
    port = int(first.split(":")[2].split("/")[0])
    halts = [halt]

    async def main() -> None:
        async with connect_http(first) as client:
            await client.subscribe("note://a")
            await client.call_tool("touch", {"uri": "note://a"})
            await heard(client, "notifications/resources/updated", uri="note://a")
            old = client.session
            halts[0]()
            _, again = await anyio.to_thread.run_sync(serve, port)
            halts.append(again)
            # 404 for the old session id: a new session, subscribed again, then the call once more.
            await client.call_tool("touch", {"uri": "note://a"})
            assert client.session is not old
            await heard(client, "notifications/resources/updated", uri="note://a")

    try:
        anyio.run(main)
    finally:
        for stop in halts:
            stop()


# A 2026-07-28 server that ends every listen with a result at once, counting them on stderr.
QUICK_LISTENS = r"""
import json, sys
n = 0
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    if msg["method"] == "server/discover":
        result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": True}}}
    elif msg["method"] == "subscriptions/listen":
        n += 1
        sys.stderr.write(f"listen {n}\n"); sys.stderr.flush()
        result = {"resultType": "complete"}
    else:
        result = {"resultType": "complete"}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n"); sys.stdout.flush()
"""


def test_a_listen_ended_at_once_is_reopened_after_a_growing_delay() -> None:
    """Never a hot loop: a server that ends each listen at once is asked again after 1 s, then 2 s, ..."""

    async def main() -> int:
        async with connect_stdio([sys.executable, "-c", QUICK_LISTENS], modern=True) as client:
            await client.start_listening()
            await anyio.sleep(1.6)  # time is what is tested: how many listens go out within 1.6 s
            return client.stderr.decode().count("listen ")

    listens = anyio.run(main)
    assert listens in (1, 2), listens  # at 0 s and after 1 s; the next waits 2 s (a hot loop: hundreds)


TTL_SERVER = r"""
import json, sys
ttl = int(sys.argv[1])
listed = 0
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "server/discover":
        result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "ttl", "version": "1"}}
    elif msg["method"] == "tools/list":
        listed += 1
        result = {"tools": [{"name": f"t{listed}", "inputSchema": {"type": "object"}}],
                  "ttlMs": ttl, "cacheScope": "public"}
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}}) + "\n")
        sys.stdout.flush()
        continue
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"resultType": "complete", **result}}) + "\n")
    sys.stdout.flush()
"""


@pytest.mark.parametrize(("ttl_ms", "lists"), [(0, ["t1", "t2"]), (60_000, ["t1", "t1"])])
def test_a_cached_list_is_kept_no_longer_than_its_ttl(ttl_ms: int, lists: list[str]) -> None:
    """2026-07-28 ``ttlMs``: 0 is not kept at all, a minute is served from the cache."""

    async def main() -> None:
        async with connect_stdio([sys.executable, "-c", TTL_SERVER, str(ttl_ms)], modern=True) as client:
            seen = [(await client.cached_list("tools/list"))[0]["name"] for _ in range(2)]
            assert seen == lists

    anyio.run(main)
