"""A stdio MCP server with state of its own, as a thinking or memory server has: ``tally`` counts its calls.

Each process keeps its own count, so what a host sees tells which process
served it: a host with an instance of its own counts 1, 2, …; hosts that
share one interleave.  Run it as ``python -m tests.interop._tally_server``.
"""

from __future__ import annotations

import itertools

from mcpx.drivers import serve_stdio
from mcpx.server import Server


def build_tally_server() -> Server:
    server = Server("tally", "1.0.0")
    counts = itertools.count(1)

    @server.tool(description="Count this call; answer how many this process has served")
    def tally() -> str:
        return str(next(counts))

    return server


if __name__ == "__main__":
    serve_stdio(build_tally_server())
