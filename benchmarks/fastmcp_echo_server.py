"""FastMCP's own stdio server with an ``echo`` tool, for ``bench_hop.py``.

Run with a Python that has ``fastmcp`` installed (the benchmark uses a
throwaway venv at ``/tmp/fastmcp-venv``; mcpx is not needed there)::

    /tmp/fastmcp-venv/bin/python benchmarks/fastmcp_echo_server.py

A real Python MCP server of both eras (FastMCP on the official SDK), with
the tool defined the way ``mcpx demo`` and ``sdk_echo_server.py`` define
theirs: ``async def echo(text: str) -> str``.  It speaks MCP on stdio.
"""

from __future__ import annotations

from fastmcp import FastMCP

server = FastMCP("fastmcp-echo")


@server.tool
async def echo(text: str) -> str:
    """Return the text you sent."""
    return text


if __name__ == "__main__":
    server.run("stdio", show_banner=False)
