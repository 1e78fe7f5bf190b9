"""The official MCP Python SDK's stdio server with the same ``echo`` tool as ``mcpx demo``.

``bench_stdio.py`` spawns this next to ``mcpx demo`` so that both servers are
measured by the same client in the same run.  The tool is defined the way the
demo defines it: an ``async def`` taking ``text: str`` and returning it.

Run by hand: ``python benchmarks/sdk_echo_server.py`` (speaks MCP on stdio).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-echo", version="0.1.0")


@server.tool()
async def echo(text: str) -> str:
    """Return the text you sent."""
    return text


if __name__ == "__main__":
    server.run("stdio")
