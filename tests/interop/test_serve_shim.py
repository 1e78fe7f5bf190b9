"""``mcpx serve`` (stdio) and the daemon's /mcp, driven by the official Python SDK's client.

The SDK spawns ``python -m mcpx serve`` the way an MCP host would; the shim
starts a daemon on demand (built-in default: ``mcpx demo`` as ``demo``) and
relays the conversation to its /mcp.  Both the SDK's handshake mode and its
2026-07-28 mode are used, over the shim and straight to /mcp, and each
reaches the upstream's ``echo`` through ``mcpx_call``.  ``mcpx serve
--transport http`` fails and names what to run instead.

With the SDK on both sides, its client reaches its own servers (pinned to
the legacy era, to 2026-07-28, and dual) through ``mcpx serve``, by
``mcpx_call`` and by pass-through, and each result is the one the SDK
server gives its own client directly (``_meta`` aside: it names the server
that answered).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import orjson
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpx.gateway._state import daemon_info

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("shim")
    env = {**os.environ, "HOME": str(root), "MCPX_STATE": str(root / "state"), "MCPX_TRANSPORT_PORT": "0"}
    env.pop("MCPX_CONFIG", None)
    yield env
    info = daemon_info(root / "state")
    if info is not None:  # the daemon the shim started on demand
        os.kill(int(info["pid"]), 15)


def shim(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "mcpx", "serve"], env=env, cwd=ROOT)


async def converse(client: Client) -> None:
    async with client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == ["mcpx_call", "mcpx_servers", "mcpx_search", "mcpx_describe"]
        result = await client.call_tool(
            "mcpx_call", {"server": "demo", "tool": "echo", "arguments": {"text": "hi"}}
        )
        assert not result.is_error and result.content[0].text == "hi"  # type: ignore[union-attr]
        listed = await client.call_tool("mcpx_servers", {})
        assert "demo" in orjson.dumps(listed.model_dump(mode="json")).decode()


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_sdk_client_through_mcpx_serve(home: dict[str, str], mode: str) -> None:
    anyio.run(converse, Client(stdio_client(shim(home)), mode=mode))
    assert daemon_info(Path(home["MCPX_STATE"])) is not None  # started on demand, and left running


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_sdk_client_straight_to_the_daemons_mcp(home: dict[str, str], mode: str) -> None:
    anyio.run(converse, Client(stdio_client(shim(home)), mode=mode))  # make sure a daemon runs
    info = daemon_info(Path(home["MCPX_STATE"]))
    assert info is not None
    anyio.run(converse, Client(str(info["mcp"]), mode=mode))


def test_serve_over_http_is_refused_with_the_address_to_use(home: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcpx", "serve", "--transport", "http"],
        env=home,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2 and b"mcpx daemon --port N" in done.stderr and b"/mcp" in done.stderr


# -- the official SDK on both sides: its client in front, its servers behind -----------------------

SDK_SERVER = ROOT / "tests" / "interop" / "sdk_pinned_server.py"


@pytest.fixture(scope="module")
def sdk_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A daemon whose upstreams are the SDK's own servers, one per era, the dual one passed through."""
    root = tmp_path_factory.mktemp("sdk-both-sides")
    python = orjson.dumps(sys.executable).decode()
    script = orjson.dumps(str(SDK_SERVER)).decode()
    config = "".join(
        f'[servers.sdk-{era}]\ncommand = {python}\nargs = [{script}, "{era}"]\n\n'
        for era in ("legacy", "modern", "dual")
    )
    (root / "config.toml").write_text(config + '[mcp]\npassthrough = ["sdk-dual"]\n')
    env = {
        **os.environ,
        "HOME": str(root),
        "MCPX_STATE": str(root / "state"),
        "MCPX_TRANSPORT_PORT": "0",
        "MCPX_CONFIG": str(root / "config.toml"),
    }
    yield env
    info = daemon_info(root / "state")
    if info is not None:
        os.kill(int(info["pid"]), 15)


async def direct_echo(era: str, text: str) -> dict[str, object]:
    """What the SDK server answers its own SDK client, straight (the reference mcpx must match)."""
    params = StdioServerParameters(command=sys.executable, args=[str(SDK_SERVER), era])
    async with Client(stdio_client(params), mode="2026-07-28" if era == "modern" else "legacy") as client:
        result = await client.call_tool("echo", {"text": text})
    return result.model_dump(mode="json", exclude={"meta"})


@pytest.fixture(scope="module")
def direct() -> dict[str, dict[str, object]]:
    """Each SDK server's answer to its own client, once per module."""

    async def collect() -> dict[str, dict[str, object]]:
        return {era: await direct_echo(era, f"hi {era}") for era in ("legacy", "modern", "dual")}

    return anyio.run(collect)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_sdk_client_reaches_the_sdk_servers_of_each_era_through_mcpx_serve(
    sdk_home: dict[str, str], direct: dict[str, dict[str, object]], mode: str
) -> None:
    async def main() -> None:
        async with Client(stdio_client(shim(sdk_home)), mode=mode) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names[0] == "echo" and "mcpx_call" in names  # sdk-dual's echo, passed through, first
            for era in ("legacy", "modern", "dual"):
                via = await client.call_tool(
                    "mcpx_call", {"server": f"sdk-{era}", "tool": "echo", "arguments": {"text": f"hi {era}"}}
                )
                assert via.model_dump(mode="json", exclude={"meta"}) == await direct_echo(era, f"hi {era}")
            passed = await client.call_tool("echo", {"text": "straight through"})
            assert passed.model_dump(mode="json", exclude={"meta"}) == await direct_echo(
                "dual", "straight through"
            )

    anyio.run(main)
