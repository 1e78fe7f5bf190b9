"""Pass-through costs do not grow with the config: a call lists nothing, builds nothing.

With eight servers configured, a call through a pass-through daemon used to
rebuild the surface from every catalog (25-30 ms a call, against 2 ms
direct).  No timing is asserted here; the test shows the structure instead,
over a daemon in a thread passing eight real upstream processes through
(tests/interop/_eight_servers.py): across fifty calls spread over every
server, no upstream is sent a ``tools/list`` and no ``GatewaySurface`` is
built, so nothing a call does depends on how many servers there are beyond
the lookup of its name (spec/gateway.md §1 "Catalogs").
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import mcpx.gateway._catalogs as gateway_catalogs
from mcpx.client import connect_http
from mcpx.core.gateway import GatewaySurface
from tests.interop._eight_servers import SERVERS, EightServers, host_frames_swept, settled

__all__ = ["host_frames_swept"]  # the fixture, used by every test here

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def surfaces_built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many ``GatewaySurface`` the daemon's gateway builds: one entry per build (patched before it starts)."""
    built: list[int] = []

    class Counted(GatewaySurface):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(gateway_catalogs, "GatewaySurface", Counted)
    yield built


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "legacy"])
def test_fifty_calls_over_eight_servers_list_no_catalog_and_build_no_surface(
    tmp_path: Path, surfaces_built: list[int], modern: bool
) -> None:
    daemon = EightServers(tmp_path)
    try:

        async def main() -> None:
            async with connect_http(daemon.mcp, modern=modern) as host:
                tools = {str(t["name"]) for t in await host.list_tools()}
                called = [f"{name}-hello" for name in SERVERS] + ["alpha_echo", "bravo_echo"]
                assert set(called) <= tools
                for name in called:  # each server's first call, out of the count: a legacy host's calls
                    # start instances of their own (the era follows the host), which learn their tools
                    await host.call_tool(name, {"text": "warm"} if name.endswith("_echo") else {})
                listed, built = await anyio.to_thread.run_sync(settled, daemon), len(surfaces_built)
                assert built >= 1  # the counter sees the builds the listings made
                for n, name in zip(range(50), itertools.cycle(called), strict=False):
                    if name.endswith("_echo"):  # each alias answered by its own server
                        arguments, expected = {"text": str(n)}, f"{name.removesuffix('_echo')}: {n}"
                    else:
                        arguments, expected = {}, f"hello from {name.removesuffix('-hello')}"
                    result = await host.call_tool(name, arguments)
                    assert result["content"][0]["text"] == expected
                assert daemon.listed() == listed  # no upstream was listed on a call's way
                assert len(surfaces_built) == built  # and the surface was not rebuilt

        anyio.run(main)
    finally:
        daemon.close()
