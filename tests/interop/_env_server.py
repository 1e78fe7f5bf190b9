"""A stdio MCP server whose one tool reads its own environment: ``getenv(name)``."""

from __future__ import annotations

import os

from mcpx.drivers import serve_stdio
from mcpx.server import Server

server = Server("env-echo", "1")


@server.tool
async def getenv(name: str) -> str:
    """The value of ``name`` in this process's environment, or ``<unset>``."""
    return os.environ.get(name, "<unset>")


if __name__ == "__main__":
    serve_stdio(server)
