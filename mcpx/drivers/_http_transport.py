"""Sockets for the pure Streamable HTTP client binding (``HttpClientConnection``), on anyio.

The binding decides every byte and connection (mcpx/core/_http_client.py);
this carries its actions out — opens TCP (or TLS) connections, writes, reads,
closes, runs its timer — and hands what it decoded to ``Receiver``: each
JSON-RPC message, the end of the connection, a session the server forgot.
``mcpx.client`` uses it under a ``ClientSession``; ``mcpx serve`` uses it to
relay a host's stdio conversation to the daemon's /mcp.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio
import anyio.abc

from ..core import Closed, HttpClientConnection, JsonReceived, OpenConnection, SessionExpired
from ..core._http import CloseConnection, SendBytes

__all__ = ["HttpTransport", "Receiver"]


class Receiver(Protocol):
    def json(self, message: Any, handle: int | None) -> None:
        """One JSON-RPC message from the server (``handle``: the request whose stream carried it)."""

    def closed(self) -> None:
        """The binding closed: nothing more will arrive."""

    def expired(self, session_id: str) -> None:
        """The server forgot session ``session_id`` (HTTP 404)."""


class HttpTransport:
    """Carries out an ``HttpClientConnection``'s actions; one lock guards the binding and whoever feeds it."""

    def __init__(self, http: HttpClientConnection, tg: anyio.abc.TaskGroup, receiver: Receiver) -> None:
        self.http = http
        self.tg = tg
        self.receiver = receiver
        self.streams: dict[int, anyio.abc.ByteStream] = {}
        self.lock = anyio.Lock()
        self.timer_changed = anyio.Event()
        self.closed = anyio.Event()
        self.after: Callable[[], Awaitable[None]] | None = None  # runs after each pump, under the lock

    async def send(self, payload: bytes, handle: int | None) -> None:
        """One message to the server (the caller holds ``lock``)."""
        self.http.send(payload, handle=handle, now=time.time())
        await self.pump()

    async def abandon(self, handle: int) -> None:
        """Stop waiting for ``handle``'s answer (2026-07-28: closes its stream, which cancels it)."""
        self.http.abandon(handle)
        await self.pump()

    async def pump(self) -> None:
        """Carry out the binding's actions until it has none."""
        while True:
            actions = self.http.next_actions()
            if not actions:
                break
            for action in actions:
                if isinstance(action, OpenConnection):
                    self.tg.start_soon(self._connect, action.conn)
                elif isinstance(action, SendBytes):
                    stream = self.streams.get(action.conn)
                    if stream is not None:
                        try:
                            await stream.send(action.data)
                        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                            self.http.connection_lost(action.conn, time.time())
                elif isinstance(action, CloseConnection):
                    stream = self.streams.pop(action.conn, None)
                    if stream is not None:
                        with contextlib.suppress(OSError, anyio.BrokenResourceError):
                            await stream.aclose()
                elif isinstance(action, JsonReceived):
                    self.receiver.json(action.message, action.handle)
                elif isinstance(action, Closed):
                    self.receiver.closed()
                    self.closed.set()
                elif isinstance(action, SessionExpired):
                    self.receiver.expired(action.session_id)
        self.timer_changed.set()

    async def flush(self) -> None:
        await self.pump()
        if self.after is not None:
            await self.after()

    async def _connect(self, conn: int) -> None:
        config = self.http.config
        try:
            stream: anyio.abc.ByteStream
            if config.tls:
                stream = await anyio.connect_tcp(config.host, config.port, tls=True)
            else:
                stream = await anyio.connect_tcp(config.host, config.port)
        except OSError:
            async with self.lock:
                self.http.connection_lost(conn, time.time())
                await self.flush()
            return
        self.streams[conn] = stream
        async with self.lock:
            self.http.connection_made(conn, time.time())
            await self.flush()
        try:
            async for data in stream:
                async with self.lock:
                    self.http.receive_data(conn, data, time.time())
                    await self.flush()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        if self.streams.pop(conn, None) is not None:
            async with self.lock:
                self.http.receive_data(conn, b"", time.time())
                await self.flush()

    async def run_timer(self) -> None:
        """Feed the binding its deadlines (retries, resumption) until cancelled."""
        while True:
            deadline = self.http.get_timer()
            self.timer_changed = anyio.Event()
            if deadline is None:
                await self.timer_changed.wait()
                continue
            with anyio.move_on_after(max(0.0, deadline - time.time())):
                await self.timer_changed.wait()
            if time.time() >= deadline:
                async with self.lock:
                    self.http.handle_timer(time.time())
                    await self.flush()
