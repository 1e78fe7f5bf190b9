"""FastMCP's proxy over one stdio upstream, for ``bench_gateway.py``.

Run with a Python that has ``fastmcp`` installed (the benchmark uses a
throwaway venv at ``/tmp/fastmcp-venv``; mcpx is not needed there)::

    /tmp/fastmcp-venv/bin/python benchmarks/fastmcp_proxy_server.py PYTHON -m mcpx demo

It proxies the upstream named by its arguments (spawned over stdio) and
serves MCP on its own stdio.  A proxy of one server keeps the upstream's tool
names, so the client calls ``echo`` directly.  ``create_proxy`` is the
current API (FastMCP 3+); ``FastMCP.as_proxy`` is the older spelling.
"""

from __future__ import annotations

import sys
from typing import Any

from fastmcp.client.transports import StdioTransport


def build(argv: list[str]) -> Any:
    transport = StdioTransport(command=argv[0], args=argv[1:])
    try:
        from fastmcp.server import create_proxy
    except ImportError:  # FastMCP 2.x
        from fastmcp import FastMCP

        return FastMCP.as_proxy(transport, name="fastmcp-proxy")
    return create_proxy(transport, name="fastmcp-proxy")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: fastmcp_proxy_server.py COMMAND [ARG...]")
    build(sys.argv[1:]).run("stdio", show_banner=False)
