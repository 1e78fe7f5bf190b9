"""Drivers: carry out the core's actions on a real event loop or on threads.

``serve_stdio(server, loop=...)`` serves an embedded ``mcpx.server.Server``
over this process's stdin/stdout until the peer closes its side;
``serve_http(server, loop=..., port=..., unix_path=...)`` serves it as
Streamable HTTP (and the 2024-11-05 HTTP+SSE transport) on a TCP port, a unix
socket, or both, until interrupted.  Loops:

* ``"asyncio"`` — the standard library event loop;
* ``"uvloop"`` — asyncio on uvloop (not on Windows);
* ``"trio"`` — trio;
* ``"blocking"`` — threads and ``select``, no event loop on the reading side.

Every driver runs the same core and passes the same conformance suite
(``tests/conformance``).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

from ..core import HttpConfig, HttpServer, RoundTable, ServerConfig, StdioServerConnection, TaskStore
from ..core.framing import DEFAULT_MAX_LINE
from ..server import Server

__all__ = ["LOOPS", "HttpConfig", "serve_http", "serve_stdio"]

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
    state_key: bytes | None = None,
) -> None:
    """Serve ``server`` over stdio on ``loop``; returns when the peer has gone.

    ``state_key`` signs 2026-07-28 ``requestState`` (random per process unless
    given; give several replicas the same one to let them verify each other's).
    """
    if loop not in LOOPS:
        raise ValueError(f"unknown loop {loop!r}; choose one of {', '.join(LOOPS)}")
    conn = StdioServerConnection(
        config or server.session_config(trace=trace),
        max_line=max_line,
        rounds=new_round_table(state_key),
        tasks=new_task_store(),
    )
    if loop == "blocking":
        from ._blocking import serve_blocking

        serve_blocking(server, conn, in_fd=in_fd, out_fd=out_fd, trace=trace)
        return

    import anyio

    from ._async_stdio import serve_connection
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


def new_round_table(
    key: bytes | None = None, *, state_ttl: float = 1800.0, ask_timeout: float = 600.0, max_rounds: int = 8
) -> RoundTable:
    """Where calls wait for 2026-07-28 answers; the key signs their requestState.

    ``state_ttl`` (``proto.stateTTL``), ``ask_timeout`` (``proto.askTimeout``)
    and ``max_rounds`` (``proto.askRounds``) are as for ``RoundTable``.
    """
    return RoundTable(
        key=key or secrets.token_bytes(32),
        instance=secrets.token_hex(6),
        state_ttl=state_ttl,
        ask_timeout=ask_timeout,
        max_rounds=max_rounds,
        wall_offset=wall_offset(),
    )


def new_task_store() -> TaskStore:
    """Where tasks live; the random key makes their ids unguessable."""
    return TaskStore(key=secrets.token_bytes(32), instance=secrets.token_hex(6), wall_offset=wall_offset())


def wall_offset() -> float:
    """Wall-clock time minus the monotonic clock the drivers give every machine as ``now``.

    Read once, where a machine is made that puts wall-clock times on the
    wire (tasks' ``createdAt``, a ``requestState``'s expiry); a wall clock
    set later moves nothing a machine times.
    """
    return time.time() - time.monotonic()


def new_session_key() -> bytes:
    """The secret an ``HttpServer`` derives its ``Mcp-Session-Id`` values from: 256 random bits."""
    return secrets.token_bytes(32)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve_http(
    server: Server,
    *,
    loop: str = "asyncio",
    host: str = "127.0.0.1",
    port: int | None = 0,
    unix_path: str | None = None,
    config: ServerConfig | None = None,
    http: HttpConfig | None = None,
    trace: bool = False,
    ready: Callable[[list[str]], None] | None = None,
    stop: threading.Event | None = None,
    state_key: bytes | None = None,
    rounds: RoundTable | None = None,
    app_setup: Callable[[Any], Any] | None = None,
    drain: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Serve ``server`` over HTTP on ``host:port`` and/or ``unix_path`` until interrupted.

    ``port=0`` picks a free port; ``ready`` receives the URLs actually bound.
    Binding beyond loopback prints a warning: whatever can reach the port can
    run the server's tools.  ``app_setup(task_group)`` returns the handler of
    ``http.app_paths`` (an ``AppHandler``) and may start tasks of its own in
    the server's task group (the daemon's pool); it needs an anyio loop.
    ``rounds`` is where 2026-07-28 calls wait for their answers (a new
    ``new_round_table(state_key)`` if not given).  ``drain()`` (an anyio
    loop only) is awaited after the first SIGINT or SIGTERM (or ``stop``),
    with everything still serving, before the server's tasks are cancelled;
    a second signal cuts it short.
    """
    if loop not in LOOPS:
        raise ValueError(f"unknown loop {loop!r}; choose one of {', '.join(LOOPS)}")
    if app_setup is not None and loop == "blocking":
        raise ValueError("application paths need an anyio loop: asyncio, uvloop or trio")
    if port is None and unix_path is None:
        raise ValueError("give a port, a unix socket path, or both")
    if port is not None and not _is_loopback(host):
        print(
            f"mcpx: warning: serving MCP on {host}, beyond loopback: whatever can reach this port can run "
            "the server's tools, unauthenticated",
            file=sys.stderr,
            flush=True,
        )
    http = http or HttpConfig(bound_host=host)
    core = HttpServer(
        config or server.session_config(trace=trace),
        http,
        session_key=new_session_key(),
        rounds=rounds if rounds is not None else new_round_table(state_key),
        tasks=new_task_store(),
    )
    sockets: list[socket.socket] = []
    urls: list[str] = []
    if port is not None:
        family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
        tcp = socket.socket(family, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind((host.strip("[]"), port))
        tcp.listen(128)
        bound_port = tcp.getsockname()[1]
        shown = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host
        urls.append(f"http://{shown}:{bound_port}{http.mcp_path}")
        sockets.append(tcp)
    if unix_path is not None:
        if os.path.exists(unix_path):
            os.unlink(unix_path)
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(unix_path)
        os.chmod(unix_path, 0o600)
        unix.listen(128)
        urls.append(f"unix:{unix_path}")
        sockets.append(unix)

    def started() -> None:
        if ready is not None:
            ready(urls)

    try:
        if loop == "blocking":
            from ._blocking import serve_http_blocking

            if stop is None and threading.current_thread() is threading.main_thread():
                stop = threading.Event()
                for signum in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(signum, lambda *_: stop.set())
            serve_http_blocking(server, core, sockets, trace=trace, stop=stop, started=started)
            return

        import anyio
        import anyio.abc
        import anyio.to_thread

        from ._async_http import serve_http as serve_async

        async def main() -> None:
            listeners: list[anyio.abc.Listener[anyio.abc.ByteStream]] = []
            for sock in sockets:
                sock.setblocking(False)
                listeners.append(await anyio.abc.SocketListener.from_socket(sock))
            async with anyio.create_task_group() as tg:
                app = app_setup(tg) if app_setup is not None else None
                tg.start_soon(
                    lambda: serve_async(server, core, listeners, trace=trace, started=started, app=app)
                )
                if stop is not None:
                    await anyio.to_thread.run_sync(stop.wait, abandon_on_cancel=True)
                    if drain is not None:
                        await drain()
                    tg.cancel_scope.cancel()
                elif threading.current_thread() is threading.main_thread():
                    # SIGINT and SIGTERM end the server cleanly, on every loop: after the drain, if
                    # there is one; a second signal ends it at once.
                    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                        async for _ in signals:
                            break
                        if drain is not None:
                            await _drain_until_signalled(drain, signals)
                    tg.cancel_scope.cancel()

        options: dict[str, object] = {}
        if loop == "uvloop":
            options["use_uvloop"] = True
        anyio.run(main, backend="trio" if loop == "trio" else "asyncio", backend_options=options)
    finally:
        for sock in sockets:
            sock.close()
        if unix_path is not None and os.path.exists(unix_path):
            os.unlink(unix_path)


async def _drain_until_signalled(drain: Callable[[], Awaitable[object]], signals: AsyncIterator[int]) -> None:
    """Await ``drain()``, unless ``signals`` yields first."""
    import anyio

    async with anyio.create_task_group() as tg:

        async def cut_short() -> None:
            async for _ in signals:
                break
            tg.cancel_scope.cancel()

        tg.start_soon(cut_short)
        await drain()
        tg.cancel_scope.cancel()
