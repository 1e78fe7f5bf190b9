"""A server still starting is left out of a listing, and hosts are told when it comes.

A daemon runs in a thread on loopback and passes two stdio servers through:
``fast`` (tests/interop/_named_server.py, offering ``fast-hello``) and
``slow`` (tests/interop/_startup_server.py, offering ``echo`` and ``say``),
which does not start until the test creates a file, as a server on a cold
``npx -y`` cache or under load starts late.  ``mcp.listWait`` is half a
second, so a host's listing does not wait for it.  The hosts are mcpx's own
client, legacy and 2026-07-28, over ``/mcp``; every frame the daemon sends
them is checked against the official schema of the host's revision
(``host_frames_swept``).  What is checked is what a user would see: the tools
listed before and after, the ``list_changed`` the host is sent, and what
``/v1/servers``, ``mcpx servers`` and ``mcpx_servers`` say meanwhile
(spec/gateway.md §1 and §5).
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import orjson
import pytest

from mcpx.client import connect_http
from mcpx.config import parse_config
from mcpx.core import Revision
from tests.interop._daemon_process import watch_events
from tests.interop._daemon_thread import DaemonThread
from tests.interop._eight_servers import ROOT, host_frames_swept
from tests.interop.test_gateway_passthrough import listens_for_tool_changes, until_heard

__all__ = ["host_frames_swept"]  # the fixture, used by every test here

pytestmark = pytest.mark.timeout(120)

GATEWAY_TOOLS = {"mcpx_call", "mcpx_servers", "mcpx_search", "mcpx_describe"}


class LateDaemon(DaemonThread):
    """Passes ``fast`` and ``slow`` through; ``slow`` starts once ``start_slow()`` is called."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.go = root / "slow-may-start"
        command = orjson.dumps(sys.executable).decode()
        log = orjson.dumps(str(root / "tools-list.log")).decode()
        go = orjson.dumps(str(self.go)).decode()
        text = f"""
[servers.fast]
command = {command}
args = ["-m", "tests.interop._named_server", "fast", {log}]

[servers.slow]
command = {command}
args = ["-m", "tests.interop._startup_server", "--until", {go}]

[mcp]
passthrough = ["fast", "slow"]
listWait = "0.5s"

[transport]
port = 0
"""
        self.environ = {"MCPX_STATE": str(root / "state"), "HOME": str(root)}
        super().__init__(parse_config(text, environ=self.environ, home=str(root)))

    def start_slow(self) -> None:
        self.go.touch()

    def servers(self) -> dict[str, Any]:
        """``GET /v1/servers``, by server name."""
        url = urlsplit(self.mcp)
        conn = http.client.HTTPConnection(str(url.hostname), url.port, timeout=30)
        try:
            conn.request("GET", "/v1/servers")
            response = conn.getresponse()
            assert response.status == 200
            return {s["name"]: s for s in orjson.loads(response.read())["servers"]}
        finally:
            conn.close()

    async def until_catalog(self, server: str, status: str) -> None:
        """Until ``/v1/servers`` shows ``server``'s catalog with ``status``: a ``catalog.read`` event, or already so.

        The watcher is registered before the state is looked at, so a read
        that ends in between is seen either way (30 s at most: the stream's
        read timeout).
        """

        def wait() -> None:
            with watch_events(self.mcp) as events:
                if self.servers()[server]["catalog"]["status"] == status:
                    return
                for kind, data in events:
                    if kind == "catalog.read" and data["server"] == server and data["status"] == status:
                        return

        await anyio.to_thread.run_sync(wait)

    def mcpx_servers(self) -> dict[str, Any]:
        """What ``mcpx servers`` prints (JSON, its stdout being no terminal), by server name."""
        ran = subprocess.run(
            [sys.executable, "-m", "mcpx", "servers"],
            env={**os.environ, **self.environ},
            cwd=ROOT,
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr
        return {s["name"]: s for s in orjson.loads(ran.stdout)["servers"]}


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[LateDaemon]:
    running = LateDaemon(tmp_path)
    try:
        yield running
    finally:
        running.start_slow()  # let it start, so that it stops as any server does
        running.close()


def names(tools: list[Mapping[str, Any]]) -> set[str]:
    return {str(tool["name"]) for tool in tools}


@pytest.mark.parametrize("host", ["2026-07-28", "2025-11-25"])
def test_a_host_listing_while_a_server_starts_is_told_when_it_comes_and_then_lists_it(
    daemon: LateDaemon, host: str
) -> None:
    async def main() -> None:
        era: dict[str, Any] = {"modern": True} if host == "2026-07-28" else {"offer": Revision(host)}
        async with connect_http(daemon.mcp, **era) as client:
            await client.start_listening()
            await daemon.until_catalog("fast", "ready")  # the start-up listing has read fast
            # The first listing does not wait for slow: fast's tool and the gateway's, no more.
            assert names(await client.list_tools()) == {"fast-hello", *GATEWAY_TOOLS}
            # While it starts, /v1/servers, mcpx servers and mcpx_servers say so.
            shown = daemon.servers()
            assert shown["slow"]["catalog"] == {"status": "starting"}
            assert shown["fast"]["catalog"] == {"status": "ready"}
            assert daemon.mcpx_servers()["slow"]["catalog"] == {"status": "starting"}
            listed = await client.call_tool("mcpx_servers", {})
            statuses = {s["name"]: s["status"] for s in listed["structuredContent"]["servers"]}
            assert statuses == {"fast": "ready", "slow": "starting"}
            if host == "2026-07-28":  # its listen stream is open, tools list changes in its filter
                await until_heard(client, listens_for_tool_changes)
            assert not [n for n in client.notifications if n.method == "notifications/tools/list_changed"]
            daemon.start_slow()
            await until_heard(client, lambda note: note.method == "notifications/tools/list_changed")
            assert names(await client.list_tools()) == {"fast-hello", "echo", "say", *GATEWAY_TOOLS}
            assert daemon.servers()["slow"]["catalog"] == {"status": "ready"}

    anyio.run(main)
