"""A stdio MCP server that says who it is, and writes down every ``tools/list`` it is sent.

``python -m tests.interop._named_server NAME LOG [--echo]``: the server is
called ``NAME`` and offers ``NAME-hello``, which answers ``hello from NAME``;
with ``--echo`` it also offers ``echo``, which answers ``NAME: <text>``, so
that two of them collide on that name and a test can tell which one
answered.  Each ``tools/list`` appends ``NAME`` to the file ``LOG`` (one line
each, from whichever of its processes was asked, the era probe's included).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcpx.core import RequestContext
from mcpx.drivers import serve_stdio
from mcpx.server import Invocation, Server


class NamedServer(Server):
    def __init__(self, name: str, log: Path) -> None:
        super().__init__(name, "1.0.0")
        self.named = name
        self.log = log

    def route(self, method: str, params: Mapping[str, Any], context: RequestContext) -> Invocation:
        if method == "tools/list":
            with self.log.open("a") as out:
                out.write(f"{self.named}\n")
        return super().route(method, params, context)


def build_named_server(name: str, log: Path, *, echo: bool) -> NamedServer:
    server = NamedServer(name, log)

    @server.tool(name=f"{name}-hello", description=f"Greet from {name}")
    def hello() -> str:
        return f"hello from {name}"

    if echo:

        @server.tool(name="echo", description=f"{name}'s echo: answers the text, prefixed with {name}")
        def echo_text(text: str) -> str:
            return f"{name}: {text}"

    return server


if __name__ == "__main__":
    named = build_named_server(sys.argv[1], Path(sys.argv[2]), echo="--echo" in sys.argv[3:])
    serve_stdio(named)
