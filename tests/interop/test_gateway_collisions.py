"""A collision costs one name: a pass-through daemon over eight real upstreams.

A daemon runs in a thread on loopback and passes through eight processes of
tests/interop/_named_server.py, as a user's ``mcpServers`` file with eight
servers would; two of them (``alpha`` and ``bravo``) both offer ``echo``.
The hosts are mcpx's own client, legacy and 2026-07-28, over ``/mcp``; every
frame the daemon sends them is checked against the official schema of the
host's revision (``host_frames_swept``), and every frame mcpx's client cores
send (the daemon's to its upstreams included) by the session-wide sweep.
What is checked is what a user would: the tools the host is shown, what each
alias answers, what ``mcpx servers`` and ``/v1/servers`` say, and the log
message a host that asked for logs receives (spec/gateway.md §2).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import anyio
import orjson
import pytest

from mcpx.client import McpCallError, connect_http
from mcpx.core.client_session import ServerNotification
from tests.interop._eight_servers import ROOT, SERVERS, EightServers, host_frames_swept

__all__ = ["host_frames_swept"]  # the fixture, used by every test here

pytestmark = pytest.mark.timeout(180)

GATEWAY_TOOLS = {"mcpx_call", "mcpx_servers", "mcpx_search", "mcpx_describe"}
ECHO_COLLISION = {
    "kind": "tool",
    "name": "echo",
    "servers": ["alpha", "bravo"],
    "offered": [{"server": "alpha", "as": "alpha_echo"}, {"server": "bravo", "as": "bravo_echo"}],
}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EightServers]:
    running = EightServers(tmp_path_factory.mktemp("collisions"))
    yield running
    running.close()


def names(tools: list[Mapping[str, Any]]) -> list[str]:
    return [str(tool["name"]) for tool in tools]


def text_of(result: Mapping[str, Any]) -> str:
    return str(result["content"][0]["text"])


def warnings_of(notes: list[ServerNotification]) -> list[Mapping[str, Any]]:
    return [n.params for n in notes if n.method == "notifications/message" and n.params["level"] == "warning"]


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "legacy"])
def test_a_collision_costs_only_its_name_and_each_server_is_reached_by_its_alias(
    daemon: EightServers, modern: bool
) -> None:
    async def main() -> None:
        async with connect_http(daemon.mcp, modern=modern) as host:
            tools = await host.list_tools()
            # Every other server's tool is listed, and the gateway's own; echo is there twice, by alias.
            assert sorted(names(tools)) == sorted(
                [f"{name}-hello" for name in SERVERS] + ["alpha_echo", "bravo_echo", *GATEWAY_TOOLS]
            )
            assert "echo" not in names(tools)
            described = {t["name"]: t.get("description") for t in tools}
            assert described["alpha_echo"] == "alpha's echo: answers the text, prefixed with alpha"
            assert described["bravo_echo"] == "bravo's echo: answers the text, prefixed with bravo"
            # Each alias is answered by its own server, called by its own name (echo).
            assert text_of(await host.call_tool("alpha_echo", {"text": "one"})) == "alpha: one"
            assert text_of(await host.call_tool("bravo_echo", {"text": "two"})) == "bravo: two"
            for name in SERVERS:
                assert text_of(await host.call_tool(f"{name}-hello", {})) == f"hello from {name}"
            # The bare name reaches neither: the host is told which names to call.
            with pytest.raises(McpCallError) as bare:
                await host.call_tool("echo", {"text": "three"})
            assert bare.value.code == -32602
            assert "'alpha_echo' or 'bravo_echo'" in bare.value.message
            assert isinstance(bare.value.data, dict) and bare.value.data["collision"] == ECHO_COLLISION

    anyio.run(main)


def test_the_collision_is_reported_in_mcpx_servers_and_to_a_host_that_asked_for_logs(
    daemon: EightServers,
) -> None:
    async def legacy(notes: list[ServerNotification]) -> None:
        async with connect_http(daemon.mcp) as host:
            host.on_notification = notes.append
            await host.request("logging/setLevel", {"level": "warning"})
            await host.list_tools()
            servers = await host.call_tool("mcpx_servers", {})
            assert servers["structuredContent"]["collisions"] == [ECHO_COLLISION]

    async def modern(notes: list[ServerNotification]) -> None:
        async with connect_http(daemon.mcp, modern=True) as host:
            host.on_notification = notes.append
            await host.request("tools/list", {}, log_level="warning")

    legacy_notes: list[ServerNotification] = []
    modern_notes: list[ServerNotification] = []
    anyio.run(legacy, legacy_notes)
    anyio.run(modern, modern_notes)
    for notes in (legacy_notes, modern_notes):
        (warning,) = warnings_of(notes)
        assert warning["logger"] == "mcpx"
        assert warning["data"]["collisions"] == [ECHO_COLLISION]
        assert "'echo' is offered by 'alpha' and 'bravo'" in warning["data"]["message"]
        assert "alpha's as 'alpha_echo'" in warning["data"]["message"]

    # /v1/servers, and mcpx servers, which reads it.
    assert daemon.get("/v1/servers")["collisions"] == [ECHO_COLLISION]
    ran = subprocess.run(
        [sys.executable, "-m", "mcpx", "servers", "--json"],
        env={**os.environ, **daemon.environ},
        cwd=ROOT,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    shown = orjson.loads(ran.stdout)
    assert shown["collisions"] == [ECHO_COLLISION]
    assert [s["name"] for s in shown["servers"]] == list(SERVERS)


def test_a_legacy_host_that_asked_for_no_logs_is_sent_none(daemon: EightServers) -> None:
    async def main() -> list[ServerNotification]:
        notes: list[ServerNotification] = []
        async with connect_http(daemon.mcp) as host:
            host.on_notification = notes.append
            assert "alpha_echo" in names(await host.list_tools())
            await host.call_tool(
                "mcpx_servers", {}
            )  # a round trip after the listing: anything sent has arrived
        return notes

    assert [n for n in anyio.run(main) if n.method == "notifications/message"] == []
