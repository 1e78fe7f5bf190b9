"""``mcpx.client.connect_sse``: the 2024-11-05 HTTP+SSE transport against real servers on loopback.

MCP 2024-11-05, Transports → "HTTP with SSE".  mcpx's own demo server
(``mcpx demo --http 0`` serves the transport at ``/sse`` while it speaks
2024-11-05) on both event loops, with both client backends; a small
stand-alone server of that era (``_legacy_sse_server``); and a server whose
endpoint event points at another origin, which mcpx must refuse.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpx.client import McpCallError, connect_sse
from mcpx.config import parse_auth
from mcpx.core import Revision
from mcpx.core.client_session import Progress
from tests.conformance.http_peer import start_http_server, stop_http_server
from tests.interop._legacy_sse_server import LegacySseServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["asyncio", "trio"])
def demo_sse_url(request: pytest.FixtureRequest) -> Iterator[str]:
    proc, url = start_http_server(request.param)
    yield url.rsplit("/", 1)[0] + "/sse"
    stop_http_server(proc)


def _open_fds() -> set[str]:
    fds = Path("/proc/self/fd")
    return {os.readlink(fd) for fd in fds.iterdir() if fd.exists()} if fds.exists() else set()


def _sockets() -> int:
    return sum(1 for target in _open_fds() if target.startswith("socket:"))


class Connections:
    """The connections a ``LegacySseServer`` takes, counted as it accepts each and as it has closed each."""

    def __init__(self, server: LegacySseServer) -> None:
        self.changed = threading.Condition()
        self.accepted = self.closed = 0
        httpd = server.httpd
        process_request, shutdown_request = httpd.process_request, httpd.shutdown_request

        def accepted(request: Any, client_address: Any) -> None:
            with self.changed:
                self.accepted += 1
            process_request(request, client_address)

        def closed(request: Any) -> None:
            shutdown_request(request)  # the socket is closed now
            with self.changed:
                self.closed += 1
                self.changed.notify_all()

        httpd.process_request = accepted  # type: ignore[method-assign]
        httpd.shutdown_request = closed  # type: ignore[method-assign]

    def all_closed(self, timeout: float) -> bool:
        """Wait (at most ``timeout``) until the server has closed every connection it accepted."""
        with self.changed:
            return self.changed.wait_for(lambda: self.closed == self.accepted, timeout)


async def answer_roots(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
    assert method == "roots/list", method
    return {"roots": [{"uri": "file:///work", "name": "work"}]}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_connect_sse_talks_to_mcpx_demo(demo_sse_url: str, backend: str) -> None:
    async def main() -> None:
        sockets = _sockets()
        async with connect_sse(demo_sse_url, capabilities={"roots": {}}, resolver=answer_roots) as client:
            # initialize: 2024-11-05, and the server says who it is
            assert client.revision == Revision.V2024_11_05
            assert client.session.server_info["name"] == "mcpx-demo"
            tools = {t["name"] for t in await client.list_tools()}
            assert {"echo", "count", "show_roots"} <= tools
            echoed = await client.call_tool("echo", {"text": "over http+sse"})
            assert echoed["content"][0]["text"] == "over http+sse"
            # progress and log notifications arrive on the stream
            logged_one = anyio.Event()
            client.on_notification = lambda note: (
                logged_one.set() if note.method == "notifications/message" else None
            )
            await client.request("logging/setLevel", {"level": "info"})
            reports: list[Progress] = []
            counted = await client.request(
                "tools/call", {"name": "count", "arguments": {"to": 3}}, on_progress=reports.append
            )
            assert counted["content"][0]["text"] == "counted to 3"
            assert [r.progress for r in reports] == [1, 2, 3]
            with anyio.fail_after(5):  # the first log message has arrived
                await logged_one.wait()
            logged = [n.params["data"] for n in client.notifications if n.method == "notifications/message"]
            assert "counted 1" in logged
            # a request from the server (2024-11-05 has roots/list) goes back by POST
            roots = await client.call_tool("show_roots")
            assert roots["content"][0]["text"] == "Roots: file:///work"
            with pytest.raises(McpCallError) as unknown:
                await client.call_tool("no_such_tool")
            assert unknown.value.code == -32602
            assert _sockets() >= sockets + 2  # the stream and the POST lane
        # closed: no socket of ours is left open (connect_sse closes each before it returns)
        assert _sockets() <= sockets

    anyio.run(main, backend=backend)


def test_closing_leaves_no_tasks_and_ends_the_session_on_the_server() -> None:
    with LegacySseServer() as server:
        url = server.base + "/sse"
        connections = Connections(server)

        async def main() -> None:
            before = len(asyncio.all_tasks())
            sockets = _sockets()
            async with connect_sse(url) as client:
                assert client.session.server_info == {"name": "legacy-sse-only", "version": "1.0"}
                reports: list[Progress] = []
                echoed = await client.request(
                    "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, on_progress=reports.append
                )
                assert echoed["content"][0]["text"] == "hi" and [r.progress for r in reports] == [1]
                assert server.open_sessions == 1
            assert len(asyncio.all_tasks()) == before
            # The server has closed every connection it took: the stream's last, once its session ended.
            assert await anyio.to_thread.run_sync(connections.all_closed, 5.0)
            assert _sockets() <= sockets and server.open_sessions == 0

        anyio.run(main)
        methods = [m.get("method") for m in server.seen]
        assert methods[:2] == ["initialize", "notifications/initialized"]  # in order, one POST each


def test_auth_headers_go_on_the_stream_and_every_post_and_query_auth_is_refused() -> None:
    bearer = parse_auth({"type": "bearer", "token": "tok-sse"}, environ={}, transport="http")
    query = parse_auth({"type": "query", "name": "key", "value": "k"}, environ={}, transport="http")
    with LegacySseServer() as server:
        url = server.base + "/sse"

        async def main() -> None:
            async with connect_sse(url, auth=bearer) as client:
                await client.list_tools()
            with pytest.raises(ValueError, match="use bearer, basic or header auth"):
                async with connect_sse(url, auth=query):
                    pass

        anyio.run(main)
    methods = [method for method, _ in server.authorization]
    assert methods[0] == "GET" and methods.count("POST") >= 3  # initialize, initialized, tools/list
    assert {value for _, value in server.authorization} == {"Bearer tok-sse"}


def test_an_endpoint_on_another_origin_is_refused() -> None:
    with LegacySseServer(endpoint="http://192.0.2.1:9/messages?session_id=steal") as server:

        async def main() -> None:
            with pytest.raises(McpCallError) as refused:
                async with connect_sse(server.base + "/sse", headers=[("Authorization", "Bearer secret")]):
                    raise AssertionError("connected")
            assert "192.0.2.1" in refused.value.message and "origin" in refused.value.message

        anyio.run(main)
        assert server.seen == []  # nothing was POSTed, to anyone


def test_a_url_that_is_not_an_sse_stream_fails_with_the_reason() -> None:
    with LegacySseServer(not_mcp=True) as server:

        async def main() -> None:
            with pytest.raises(McpCallError) as failed:
                async with connect_sse(server.base + "/sse", start_timeout=10):
                    raise AssertionError("connected")
            message = failed.value.message
            assert "could not open the HTTP+SSE stream" in message and "HTTP 404" in message, message

        anyio.run(main)


def test_a_server_that_is_not_there() -> None:
    with LegacySseServer() as server:
        url = server.base + "/sse"
    # stopped: the port is closed now

    async def main() -> None:
        with pytest.raises(McpCallError) as failed:
            async with connect_sse(url, start_timeout=10):
                raise AssertionError("connected")
        assert "could not connect" in failed.value.message

    anyio.run(main)
