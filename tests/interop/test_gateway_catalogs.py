"""The gateway's catalogs over real processes: read once and kept, never listed on a call's way.

A daemon runs in a thread on loopback and passes through
tests/interop/_counting_server.py, which answers its lists with ``ttlMs: 0``
(as FastMCP's server does) and writes down every ``tools/list`` it is sent,
from any of its processes.  The host is mcpx's own 2026-07-28 client.  What
is counted is what reached the upstream, so the tests hold whatever the
daemon does inside (spec/gateway.md §1 "Which requests start upstreams").
"""

from __future__ import annotations

import http.client
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import orjson
import pytest

from mcpx.client import Client, connect_http
from mcpx.config import parse_config
from tests.interop._daemon_thread import DaemonThread

pytestmark = pytest.mark.timeout(90)


class CountingDaemon(DaemonThread):
    """A daemon passing the counting server through; ``listed()`` is how many ``tools/list`` it was sent.

    The counting server's log is a named pipe held open here: each line it
    writes is there to read as soon as its ``tools/list`` is answered, and a
    line still to come is waited for as it arrives.
    """

    def __init__(self, root: Path) -> None:
        self.log = root / "tools-list.log"
        os.mkfifo(self.log)
        # Read and write: the pipe always has a reader (so a writer's open never blocks) and never ends.
        self.pipe = os.open(self.log, os.O_RDWR | os.O_NONBLOCK)
        self.lines = 0
        command = orjson.dumps(sys.executable).decode()
        log = orjson.dumps(str(self.log)).decode()
        text = f"""
[servers.counting]
command = {command}
args = ["-m", "tests.interop._counting_server", {log}]

[mcp]
passthrough = ["counting"]

[transport]
port = 0
"""
        environ = {"MCPX_STATE": str(root / "state"), "HOME": str(root)}
        super().__init__(parse_config(text, environ=environ, home=str(root)))

    def listed(self) -> int:
        while True:
            try:
                data = os.read(self.pipe, 65536)
            except BlockingIOError:
                return self.lines  # every line written so far is read
            self.lines += data.count(b"\n")

    async def settled(self, *, at_least: int = 0, quiet: float = 0.5) -> int:
        """The count once it is ``at_least`` and no other ``tools/list`` came for ``quiet`` seconds (10 s at most).

        The lines are waited for as they come.  ``quiet`` is time passing, and
        no wait for an event: a read the daemon has still to make (the start-up
        listing, a background refresh) shows only by its line, so "no more
        reads" is "no line within ``quiet``".
        """
        with anyio.fail_after(10):
            while self.listed() < at_least:
                await anyio.wait_readable(self.pipe)  # the next line
            while True:
                with anyio.move_on_after(quiet) as quiet_for:
                    await anyio.wait_readable(self.pipe)
                if quiet_for.cancelled_caught:
                    return self.listed()
                self.listed()

    def close(self) -> None:
        super().close()
        os.close(self.pipe)

    def restart(self) -> None:
        url = urlsplit(self.mcp)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        body = orjson.dumps({"server": "counting"})
        conn.request("POST", "/v1/restart", body=body, headers={"content-type": "application/json"})
        assert conn.getresponse().status == 200


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[CountingDaemon]:
    running = CountingDaemon(tmp_path)
    yield running
    running.close()


def names(tools: list[Mapping[str, Any]]) -> set[str]:
    return {str(tool["name"]) for tool in tools}


async def echo(host: Client, times: int) -> None:
    for n in range(times):
        result = await host.call_tool("echo", {"text": str(n)})
        assert result["content"][0]["text"] == str(n)


def test_calls_list_nothing_upstream_and_ttl_zero_is_read_again_for_the_next_listing(
    daemon: CountingDaemon,
) -> None:
    async def main() -> None:
        async with connect_http(daemon.mcp, modern=True) as host:
            assert {"echo", "grow"} <= names(await host.list_tools())
            before = await daemon.settled(at_least=1)
            await echo(host, 50)
            assert daemon.listed() == before  # routed by the catalog last read, ttlMs 0 or not
            assert {"echo", "grow"} <= names(await host.list_tools())
            assert daemon.listed() == before + 1  # a listing after ttlMs ran out reads it again
            await echo(host, 5)
            assert daemon.listed() == before + 1

    anyio.run(main)


def test_a_list_change_is_read_once_in_the_background_and_reaches_the_host(daemon: CountingDaemon) -> None:
    async def main() -> None:
        async with connect_http(daemon.mcp, modern=True) as host:
            changed = anyio.Event()
            host.on_notification = lambda note: (
                changed.set() if note.method == "notifications/tools/list_changed" else None
            )
            await host.start_listening()
            await host.list_tools()
            before = await daemon.settled(at_least=1)
            result = await host.call_tool("grow", {"name": "grown"})
            assert result["content"][0]["text"] == "added grown"
            with anyio.fail_after(10):
                await changed.wait()
            assert await daemon.settled(at_least=before + 1) == before + 1  # one refresh, off any call
            await echo(host, 10)
            assert daemon.listed() == before + 1
            assert "grown" in names(await host.list_tools())

    anyio.run(main)


def test_an_instance_start_reads_the_catalog_once_beside_the_call_that_started_it(
    daemon: CountingDaemon,
) -> None:
    async def main() -> None:
        async with connect_http(daemon.mcp, modern=True) as host:
            await host.list_tools()
            before = await daemon.settled(at_least=1)
            daemon.restart()  # instances start again on demand
            await echo(host, 1)  # starts one, and is routed by the catalog read before
            assert await daemon.settled(at_least=before + 1) == before + 1
            await echo(host, 10)
            assert daemon.listed() == before + 1

    anyio.run(main)
