"""Drivers: carry out the core's actions on a real event loop or on threads.

``serve_stdio(server, loop=...)`` serves an embedded ``mcpx.server.Server``
over this process's stdin/stdout until the peer closes its side:

* ``"asyncio"`` — the standard library event loop;
* ``"uvloop"`` — asyncio on uvloop (not on Windows);
* ``"trio"`` — trio;
* ``"blocking"`` — threads and ``select``, no event loop on the reading side.

Every driver runs the same core and passes the same conformance suite
(``tests/conformance``).
"""

from __future__ import annotations

import sys
from typing import Final

from ..core import DEFAULT_MAX_LINE, ServerConfig, StdioServerConnection
from ..server import Server

__all__ = ["LOOPS", "serve_stdio"]

LOOPS: Final = ("asyncio", "uvloop", "trio", "blocking")


def serve_stdio(
    server: Server,
    *,
    loop: str = "asyncio",
    config: ServerConfig | None = None,
    max_line: int = DEFAULT_MAX_LINE,
    trace: bool = False,
    in_fd: int = 0,
    out_fd: int = 1,
) -> None:
    """Serve ``server`` over stdio on ``loop``; returns when the peer has gone."""
    if loop not in LOOPS:
        raise ValueError(f"unknown loop {loop!r}; choose one of {', '.join(LOOPS)}")
    conn = StdioServerConnection(config or server.session_config(trace=trace), max_line=max_line)
    if loop == "blocking":
        from ._blocking import serve_blocking

        serve_blocking(server, conn, in_fd=in_fd, out_fd=out_fd, trace=trace)
        return

    import anyio

    from ._async import serve_connection
    from ._stdio_streams import open_stdio

    backend = "trio" if loop == "trio" else "asyncio"

    async def main() -> None:
        async with open_stdio(backend, in_fd, out_fd) as (reader, writer):
            await serve_connection(server, conn, reader, writer, trace=trace)

    options: dict[str, object] = {}
    if loop == "uvloop":
        if sys.platform == "win32":
            raise ValueError("uvloop is not available on Windows; use loop='asyncio'")
        options["use_uvloop"] = True
    anyio.run(main, backend=backend, backend_options=options)
