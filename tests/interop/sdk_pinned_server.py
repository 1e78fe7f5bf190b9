"""The official Python SDK's stdio server, pinned to one era or left to serve both.

``python tests/interop/sdk_pinned_server.py legacy|modern|dual`` serves an
``echo`` tool with mcp 2.3.0 (the version pyproject pins):

* ``legacy`` runs the SDK's handshake-only loop (``serve_loop``, what its
  Streamable HTTP manager uses for legacy sessions): ``server/discover`` is
  not a method there, and only ``initialize`` opens the connection.
* ``modern`` runs the SDK's 2026-07-28 stream loop: every request carries its
  own envelope and ``initialize`` is refused with ``-32022``.  The SDK keeps
  this loop private (``_serve_modern_stream``); it is the same code its
  dual-era loop hands a modern connection to.
* ``dual`` is what ``MCPServer.run("stdio")`` does: the first request picks
  the era.

mcpx's probe tests point ``mcpx probe`` at each one, so the era it reports is
judged against servers mcpx did not write.
"""

from __future__ import annotations

import sys

import anyio
from mcp.server import runner
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

app = MCPServer("sdk-pinned", version="0.1.0")


@app.tool()
async def echo(text: str) -> str:
    """Return the text you sent."""
    return text


async def serve(era: str) -> None:
    server = app._lowlevel_server  # the low-level server MCPServer drives
    options = server.create_initialization_options()
    async with stdio_server() as (read, write), server.lifespan(server) as state:
        if era == "legacy":
            await runner.serve_loop(server, read, write, lifespan_state=state, init_options=options)
        elif era == "modern":
            await runner._serve_modern_stream(
                server, read, write, lifespan_state=state, raise_exceptions=False
            )
        else:
            await runner.serve_dual_era_loop(server, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("legacy", "modern", "dual"):
        sys.exit("usage: sdk_pinned_server.py legacy|modern|dual")
    anyio.run(serve, sys.argv[1])
