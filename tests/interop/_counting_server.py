"""A stdio MCP server that writes down every ``tools/list`` it is sent, and answers lists with ``ttlMs: 0``.

As FastMCP's server does, its 2026-07-28 lists say ``ttlMs: 0``
(``protoMessages.listMaxAge`` of 0): immediately stale.  Each ``tools/list``
appends this process's pid to the file named on the command line, so a test
counts what reached the upstream, whichever of its processes (the era probe's
included) was asked.  ``echo`` answers its text; ``grow`` adds a tool, and so
announces a tools list change (``list_changed=True``).

Run it as ``python -m tests.interop._counting_server LOG``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcpx.core import RequestContext
from mcpx.core.downgrade import Ages
from mcpx.drivers import serve_stdio
from mcpx.server import Call, Outcome, Server


class CountingServer(Server):
    def __init__(self, log: Path) -> None:
        super().__init__("counting", "1.0.0", list_changed=True)
        self.log = log

    def route(self, method: str, params: Mapping[str, Any], context: RequestContext) -> Outcome | Call:
        if method == "tools/list":
            with self.log.open("a") as out:
                out.write(f"{os.getpid()}\n")
        return super().route(method, params, context)


def build_counting_server(log: Path) -> CountingServer:
    server = CountingServer(log)

    @server.tool(description="Answer the text given")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Add a tool called name")
    def grow(name: str) -> str:
        def grown() -> str:
            return name

        server.tool(name=name, description="added at run time")(grown)
        return f"added {name}"

    return server


if __name__ == "__main__":
    counting = build_counting_server(Path(sys.argv[1]))
    serve_stdio(counting, config=counting.session_config(ages=Ages(list_ms=0)))
