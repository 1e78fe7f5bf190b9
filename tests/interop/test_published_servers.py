"""Published MCP servers behind mcpx, as users run them: their own answers, and their state per host.

The npm reference servers (server-everything, -filesystem, -memory,
-sequential-thinking, legacy era) and PyPI's mcp-server-time (2026-07-28),
installed by the test run (``tests/interop/_published.py``), passed through
one daemon.  A host of either era lists every server's tools and gets each
tool's answer exactly as calling the server directly gives it; and a server
with state of its own (sequential-thinking's thought history) keeps one per
host, as if each host had spawned it (spec/gateway.md §3).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import anyio
import pytest

from mcpx.client import Client, connect_http, connect_stdio
from mcpx.config import parse_config
from mcpx.core import Revision
from tests.interop._daemon_thread import DaemonThread
from tests.interop._published import Published, published

__all__ = ["published"]  # the fixture

pytestmark = pytest.mark.timeout(300)

THOUGHT = {"thought": "a first thought", "thoughtNumber": 1, "totalThoughts": 2, "nextThoughtNeeded": True}


@pytest.fixture(scope="module")
def servers(published: Published, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each server's command and environment, and the tool call whose answer is compared."""
    root = tmp_path_factory.mktemp("published")
    files = root / "files"
    files.mkdir()
    (files / "notes.txt").write_text("hello\n")
    memory = str(root / "memory.jsonl")
    return {
        "everything": {"argv": [published.npm("mcp-server-everything")], "call": ("echo", {"message": "hi"})},
        "files": {
            "argv": [published.npm("mcp-server-filesystem"), str(files)],
            "call": ("list_directory", {"path": str(files)}),
        },
        "memory": {
            "argv": [published.npm("mcp-server-memory")],
            "env": {"MEMORY_FILE_PATH": memory},
            "call": ("read_graph", {}),
        },
        "thinking": {"argv": [published.npm("mcp-server-sequential-thinking")], "call": None},
        "time": {
            "argv": [published.time],
            "call": (
                "convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            ),
        },
    }


@pytest.fixture(scope="module")
def daemon(
    servers: dict[str, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonThread]:
    root = tmp_path_factory.mktemp("published-daemon")
    text = ""
    for name, server in servers.items():
        command, *args = server["argv"]
        text += f"[servers.{name}]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"
        for key, value in server.get("env", {}).items():
            text += f"env.{key} = {json.dumps(value)}\n"
        text += "\n"
    text += f"[mcp]\npassthrough = {json.dumps(list(servers))}\n\n[transport]\nport = 0\n"
    environ = {"MCPX_STATE": str(root / "state"), "HOME": str(root)}
    running = DaemonThread(parse_config(text, environ=environ, home=str(root)))
    yield running
    running.close()


async def _direct(server: Mapping[str, Any]) -> tuple[set[str], Any]:
    """The server's own tool names and its answer to the compared call, asked directly."""
    async with connect_stdio(server["argv"], env=server.get("env")) as client:
        names = {str(t["name"]) for t in await client.list_tools()}
        answer = None
        if server["call"] is not None:
            tool, arguments = server["call"]
            answer = (await client.call_tool(tool, arguments))["content"]
        return names, answer


def _host(url: str, modern: bool) -> Any:
    return connect_http(url, modern=modern, offer=None if modern else Revision.V2025_11_25)


@pytest.mark.parametrize("modern", [False, True], ids=["legacy host", "2026-07-28 host"])
def test_every_servers_tools_are_listed_and_answer_as_the_server_does_directly(
    daemon: DaemonThread, servers: dict[str, dict[str, Any]], modern: bool
) -> None:
    async def main() -> None:
        direct = {name: await _direct(server) for name, server in servers.items()}
        async with _host(daemon.mcp, modern) as host:
            listed = {str(t["name"]) for t in await host.list_tools()}
            for name, (own, answer) in direct.items():
                assert own <= listed, (name, sorted(own - listed))  # no collision among these: as they are
                if answer is None:
                    continue
                tool, arguments = servers[name]["call"]
                through = await host.call_tool(tool, arguments)
                assert through["content"] == answer, (name, through, answer)

    anyio.run(main)


def _thought_history(result: Mapping[str, Any]) -> int:
    return int(json.loads(result["content"][0]["text"])["thoughtHistoryLength"])


def test_a_servers_own_state_is_each_hosts_own_as_if_each_had_spawned_it(daemon: DaemonThread) -> None:
    """Two legacy sessions think with sequential-thinking: each sees its own history (1 and 1, then 2)."""

    async def think(host: Client) -> int:
        return _thought_history(await host.call_tool("sequentialthinking", THOUGHT))

    async def main() -> None:
        async with _host(daemon.mcp, False) as first, _host(daemon.mcp, False) as second:
            assert [await think(first), await think(second), await think(first)] == [1, 1, 2]

    anyio.run(main)
