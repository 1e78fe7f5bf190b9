"""The official MCP Python SDK's Streamable HTTP server with the same ``echo`` tool as ``mcpx demo``.

``bench_http.py`` spawns this next to ``mcpx demo --http 0`` so that both
servers are measured by the same client in the same run.  The tool is defined
the way the demo defines it: an ``async def`` taking ``text: str`` and
returning it.

The server is started the way the SDK's documentation starts one:
``MCPServer.run("streamable-http", ...)``, which builds the Starlette app
(``streamable_http_app``) and serves it with uvicorn on the current asyncio
loop.  ``--port 0`` (the default) lets the kernel pick a free port; uvicorn
logs the bound address on stderr (``Uvicorn running on http://127.0.0.1:PORT``),
which is how the benchmark finds it.  SIGINT stops it.

Defaults are the SDK's: legacy (session) POSTs are answered with a
``text/event-stream`` response (``json_response=False``), a 2026-07-28 POST
whose handler finishes at once with a plain JSON body, and the log level is
INFO (with ``mcp`` 2.3.0 that logs each new session, nothing per request).
``--json`` sets ``json_response=True`` (plain JSON for every answer, as mcpx
sends); ``--log-level`` changes the level.

Run by hand: ``python benchmarks/sdk_http_echo_server.py --port 8000``.
"""

from __future__ import annotations

import argparse

from mcp.server.mcpserver import MCPServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0 picks a free one)")
    parser.add_argument("--json", action="store_true", help="json_response=True: plain JSON, never SSE")
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
        help="MCPServer log level (also uvicorn's)",
    )
    args = parser.parse_args()

    server = MCPServer("sdk-echo", version="0.1.0", log_level=args.log_level)

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text you sent."""
        return text

    server.run("streamable-http", host="127.0.0.1", port=args.port, json_response=args.json)


if __name__ == "__main__":
    main()
