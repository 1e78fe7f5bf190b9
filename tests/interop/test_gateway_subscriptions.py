"""Resource subscriptions through pass-through: a host's subscription reaches the upstream, its updates the host.

The upstream is a few lines of ``mcpx.server`` with one resource, a tool
that changes it (``touch``), and one that answers once a client subscribed to
a URI (``until_subscribed``: mcpx's subscription reached it).  A host
subscribes to the resource through the daemon's /mcp — a 2025-11-25 host
with ``resources/subscribe``, a 2026-07-28 host with its listen filter — and
the upstream's ``notifications/resources/updated`` comes back to that host,
and only to a host that subscribed.  One host ending its interest does not end another's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import orjson
import pytest

from mcpx.client import Client, connect_http
from mcpx.config import parse_config
from mcpx.core import Revision
from mcpx.core.client_session import ServerNotification
from tests.interop._daemon_thread import DaemonThread

pytestmark = pytest.mark.timeout(120)

UPSTREAM = """
import json
import anyio
from mcpx.server import Context, Server
from mcpx.drivers import serve_stdio
interests = {}  # URI -> an event set once a client subscribed to it

def interest(uri):
    return interests.setdefault(uri, anyio.Event())

class Notes(Server):
    def subscribed(self, uri):
        interest(uri).set()

server = Notes("notes", subscribe=True)
state = {"text": "first"}

@server.resource("note://today", name="today", mime_type="text/plain")
def today() -> str:
    return state["text"]

@server.tool()
def seen_meta(ctx: Context) -> str:
    return json.dumps(dict(ctx.request.meta), sort_keys=True)

@server.tool()
async def until_subscribed(uri: str) -> str:
    await interest(uri).wait()
    return "subscribed"

@server.tool()
def touch(text: str) -> str:
    state["text"] = text
    server.notify_resource_updated("note://today")
    return "touched"

serve_stdio(server)
"""
URI = "note://today"
UPDATED = "notifications/resources/updated"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonThread]:
    root = tmp_path_factory.mktemp("subscriptions")
    (root / "upstream.py").write_text(UPSTREAM)
    python = orjson.dumps(sys.executable).decode()
    script = orjson.dumps(str(root / "upstream.py")).decode()
    # One instance for every host: who hears an update is mcpx's choice, not the pool's.
    text = f'[servers.notes]\ncommand = {python}\nargs = [{script}]\nscope = "shared"\n\n[mcp]\npassthrough = ["notes"]\n\n'
    config = parse_config(
        text + "[transport]\nport = 0\n", environ={"MCPX_STATE": str(root / "state")}, home=str(root)
    )
    running = DaemonThread(config)
    yield running
    running.close()


def host(daemon: DaemonThread, era: str) -> Any:
    kind: dict[str, Any] = {"modern": True} if era == "2026-07-28" else {"offer": Revision(era)}
    return connect_http(daemon.mcp, **kind)


def updates(client: Client) -> list[str]:
    return [str(n.params.get("uri")) for n in client.notifications if n.method == UPDATED]


async def until_heard(client: Client, check: Callable[[ServerNotification], bool]) -> None:
    """Until ``client`` has heard a notification ``check`` accepts (10 s at most)."""
    if any(check(note) for note in client.notifications):
        return
    found = anyio.Event()
    client.on_notification = lambda note: found.set() if check(note) else None
    try:
        with anyio.fail_after(10):
            await found.wait()
    finally:
        client.on_notification = None


async def heard(client: Client, count: int) -> None:
    await until_heard(client, lambda _: len(updates(client)) >= count)


async def listening(client: Client, *uris: str) -> None:
    """A 2026-07-28 host's listen stream is open with ``uris`` in its filter: the server acknowledged it."""

    def acknowledges(note: ServerNotification) -> bool:
        agreed = note.params.get("notifications", {}).get("resourceSubscriptions", [])
        return note.method == ACKNOWLEDGED and set(uris) <= set(agreed)

    await until_heard(client, acknowledges)


async def subscribed_upstream(client: Client) -> None:
    """mcpx has subscribed upstream to ``URI``: the upstream's own tool answers once it heard so."""
    with anyio.fail_after(10):
        result = await client.call_tool("until_subscribed", {"uri": URI})
    assert result["content"][0]["text"] == "subscribed"


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_a_subscribing_host_hears_the_upstreams_updates_and_a_bystander_does_not(
    daemon: DaemonThread, era: str
) -> None:
    async def main() -> None:
        async with host(daemon, era) as watcher, host(daemon, era) as bystander:
            await watcher.start_listening()
            await bystander.start_listening()
            await watcher.list_tools()  # mcpx has listed the upstream (the URI's owner is known)
            await watcher.subscribe(URI)
            if era == "2026-07-28":
                await listening(watcher, URI)  # the listen filter is reopened with the URI
                await listening(bystander)  # its stream is open: an update could reach it
            await subscribed_upstream(watcher)  # and mcpx has subscribed upstream in turn
            assert (await bystander.call_tool("touch", {"text": f"second {era}"}))["content"][0][
                "text"
            ] == "touched"
            await heard(watcher, 1)
            assert updates(watcher) == [URI]
            read = await watcher.request("resources/read", {"uri": URI})
            assert read["contents"][0]["text"] == f"second {era}"
            await anyio.sleep(0.3)  # time itself: no update reaches the bystander within it
            assert updates(bystander) == []

    anyio.run(main)


def test_one_host_leaving_does_not_end_anothers_subscription(daemon: DaemonThread) -> None:
    async def main() -> None:
        async with host(daemon, "2025-11-25") as staying:
            await staying.start_listening()
            await staying.list_tools()
            await staying.subscribe(URI)
            await subscribed_upstream(staying)
            async with host(daemon, "2025-11-25") as leaving:
                await leaving.start_listening()
                await leaving.subscribe(URI)
                await leaving.unsubscribe(URI)
            await staying.call_tool("touch", {"text": "third"})
            await heard(staying, 1)
            assert updates(staying) == [URI]

    anyio.run(main)


def test_the_hosts_own_meta_reaches_the_upstream_and_the_hops_does_not(daemon: DaemonThread) -> None:
    """Trace context and a host's own keys travel with the call; tokens and protocol keys are per hop."""

    async def main() -> None:
        async with host(daemon, "2025-11-25") as client:
            meta = {
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "x.example/tag": 7,
            }
            params = {"name": "seen_meta", "arguments": {}, "_meta": {**meta, "dev.mcpx/session": "s1"}}
            result = await client.request("tools/call", params)
            seen = orjson.loads(result["content"][0]["text"])
            assert {k: seen[k] for k in meta} == meta
            assert "dev.mcpx/session" not in seen

    anyio.run(main)
