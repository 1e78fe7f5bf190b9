"""The era mcpx speaks to an upstream that speaks both: the host's, unless the server's ``era`` pins one.

A host that spawned a dual-era server itself would talk to it in its own
era; through mcpx it does too (spec/gateway.md, the era of an upstream).
The official Python SDK (mcp 2.3.0) shows why it matters: its ``ctx.elicit``
can ask only over a legacy session, so a legacy host must reach it over one.
"""

from __future__ import annotations

import sys
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from mcpx.client import McpCallError, connect_http
from mcpx.config import parse_config
from mcpx.core import Revision
from tests.interop._daemon_thread import DaemonThread

SERVER = Path(__file__).with_name("_sdk_eliciting_server.py")
ASKS = {"elicitation": {}}


def daemon(root: Path, era: str | None = None) -> DaemonThread:
    pin = f'era = "{era}"' if era is not None else ""
    config = f"""
[servers.sdk]
command = {orjson.dumps(sys.executable).decode()}
args = [{orjson.dumps(str(SERVER)).decode()}]
{pin}

[mcp]
passthrough = ["sdk"]

[transport]
port = 0
"""
    environ = {"MCPX_STATE": str(root / "state"), "HOME": str(root)}
    return DaemonThread(parse_config(config, environ=environ, home=str(root)))


@pytest.fixture(scope="module")
def auto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonThread]:
    running = daemon(tmp_path_factory.mktemp("era-auto"))
    yield running
    running.close()


def confirm(url: str, *, modern: bool) -> tuple[str, list[str]]:
    """``confirm`` called as a host of that era that answers "yes": the tool's text and what it was asked."""
    asked: list[str] = []

    async def resolver(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        asked.append(method)
        return {"action": "accept", "content": {"word": "yes"}}

    async def main() -> str:
        offer = None if modern else Revision.V2025_11_25
        async with connect_http(
            url, modern=modern, offer=offer, resolver=resolver, capabilities=ASKS
        ) as client:
            try:
                result = await client.call_tool("confirm")
            except McpCallError as exc:  # the upstream's own error, relayed
                return f"error: {exc.message}"
            return " ".join(b.get("text", "") for b in result.get("content", []))

    return anyio.run(main), asked


def test_a_legacy_host_reaches_a_dual_era_sdk_server_over_a_legacy_session_and_is_asked(
    auto: DaemonThread,
) -> None:
    text, asked = confirm(auto.mcp, modern=False)
    assert asked == ["elicitation/create"]
    assert text == "the word is yes"


def test_a_modern_host_reaches_the_same_server_over_2026_07_28_as_if_connected_directly(
    auto: DaemonThread,
) -> None:
    """The SDK cannot ask over 2026-07-28; a modern host connected to it directly gets the same."""
    text, asked = confirm(auto.mcp, modern=True)
    assert asked == []
    assert text.startswith("error: Cannot send 'elicitation/create'"), text


def test_era_legacy_pins_the_upstream_so_a_modern_host_is_asked_through_mcpx(tmp_path: Path) -> None:
    """``era = "legacy"``: every host's call goes over a legacy session; mcpx asks a modern host in a round."""
    pinned = daemon(tmp_path, "legacy")
    try:
        text, asked = confirm(pinned.mcp, modern=True)
    finally:
        pinned.close()
    assert asked == ["elicitation/create"]
    assert text == "the word is yes"


PINNED = Path(__file__).with_name("sdk_pinned_server.py")


def test_a_legacy_only_server_is_one_instance_for_legacy_and_modern_hosts(tmp_path: Path) -> None:
    """A server that speaks no 2026-07-28 is spoken to over a legacy session whoever calls: one lane.

    Its legacy hosts are not given instances of their own (they would be
    alike): with ``scope = "shared"`` every host is served by one process.
    """
    config = f"""
[servers.old]
command = {orjson.dumps(sys.executable).decode()}
args = [{orjson.dumps(str(PINNED)).decode()}, "legacy"]
scope = "shared"

[mcp]
passthrough = ["old"]

[transport]
port = 0
"""
    root = tmp_path
    environ = {"MCPX_STATE": str(root / "state"), "HOME": str(root)}
    running = DaemonThread(parse_config(config, environ=environ, home=str(root)))

    async def call(modern: bool) -> str:
        offer = None if modern else Revision.V2025_11_25
        async with connect_http(running.mcp, modern=modern, offer=offer) as client:
            result = await client.call_tool("echo", {"text": "modern" if modern else "legacy"})
            return " ".join(b.get("text", "") for b in result.get("content", []))

    try:
        assert anyio.run(call, False) == "legacy"
        assert anyio.run(call, True) == "modern"
        assert anyio.run(call, False) == "legacy"
        with urllib.request.urlopen(running.mcp.replace("/mcp", "/v1/servers"), timeout=30) as answer:
            (server,) = orjson.loads(answer.read())["servers"]
    finally:
        running.close()
    instances = server["pool"]["instances"]
    assert len(instances) == 1, instances
