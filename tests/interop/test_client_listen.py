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

import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from mcpx.client import Client, connect_http
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


@pytest.fixture
def url() -> Iterator[str]:
    stop, bound = threading.Event(), threading.Event()
    urls: list[str] = []

    def ready(found: list[str]) -> None:
        urls.extend(found)
        bound.set()

    thread = threading.Thread(
        target=serve_http, args=(build(),), kwargs={"port": 0, "ready": ready, "stop": stop}, daemon=True
    )
    thread.start()
    assert bound.wait(20), "the server did not start"
    yield urls[0]
    stop.set()
    thread.join(10)


async def heard(client: Client, method: str, **params: Any) -> dict[str, Any]:
    """Wait (bounded) for a notification ``method`` whose params contain ``params``."""
    with anyio.fail_after(10):
        while True:
            for note in list(client.notifications):
                if note.method == method and all(note.params.get(k) == v for k, v in params.items()):
                    client.notifications.remove(note)
                    return dict(note.params)
            await anyio.sleep(0.02)


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
