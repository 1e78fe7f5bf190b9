"""Sockets for the 2024-11-05 HTTP+SSE client transport (``mcpx.core._sse_client``), on anyio.

MCP 2024-11-05, Transports → "HTTP with SSE".  ``SseClientConnection``
decides everything (which connection, which bytes, what the server's events
mean); ``SseTransport`` carries it out for ``mcpx.client.connect_sse``: it
opens the TCP (or TLS) connections the machine asks for, writes its bytes,
feeds what it reads back with the time, re-arms its timer, and hands the
JSON values to the ``ClientSession`` (STYLE.md §10: read → feed → drain →
act → re-arm).

One lock orders everything that touches the machine and the session: the
caller's ``Client`` uses the same lock, so a ``Send`` it performs and a
message read from the stream never interleave.  Call ``open`` once, run
``run_timer`` in the task group, and ``aclose`` at the end (it closes every
socket, also those still connecting).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from ..core._actions import Send
from ..core._client import ClientSession
from ..core._http import CloseConnection, SendBytes
from ..core._http_client import Closed, JsonReceived, OpenConnection, RequestRefused, StreamEnded
from ..core._sse_client import EndpointReady, SseClientConnection, SseState

__all__ = ["SseTransport"]


class SseTransport:
    """The sockets of one ``SseClientConnection``; see the module docstring."""

    def __init__(self, sse: SseClientConnection, session: ClientSession, tg: anyio.abc.TaskGroup) -> None:
        self.sse = sse
        self.session = session
        self.tg = tg
        self.after: Callable[[], Awaitable[None]] | None = None  # drain the session (the Client's flush)
        self.streams: dict[int, anyio.abc.ByteStream] = {}
        self.dropped: set[int] = set()  # closed by the machine while still connecting
        self.lock = anyio.Lock()
        self.timer_changed = anyio.Event()
        self.endpoint = anyio.Event()  # the stream named its endpoint
        self.ended = anyio.Event()  # the stream is over (StreamEnded or Closed)
        self.refusals: list[RequestRefused] = []  # refused POSTs of notifications, newest last (bounded)

    async def open(self) -> None:
        """GET the event stream."""
        async with self.lock:
            self.sse.open(time.monotonic())
            await self._flush()

    async def send(self, action: Send) -> None:
        """One ``Send`` of the session (called with the lock held, from the Client's flush)."""
        if self.sse.state is SseState.CLOSED:
            return  # closing: the session's receive_eof answers what is still open
        self.sse.send(action.payload, handle=action.stream, now=time.monotonic())
        await self.pump()

    async def aclose(self) -> None:
        """Close the transport and every socket; the session gets ``receive_eof``."""
        async with self.lock:
            if self.sse.state is not SseState.CLOSED:
                self.sse.close(time.monotonic())
            await self._flush()
        for conn in list(self.streams):
            await self._close_stream(conn)

    async def pump(self) -> None:
        """Carry out the machine's actions until it has none (feeding JSON to the session)."""
        while True:
            actions = self.sse.next_actions()
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
                            self.streams.pop(action.conn, None)
                            self.sse.connection_lost(action.conn, time.monotonic())
                elif isinstance(action, CloseConnection):
                    if action.conn in self.streams:
                        await self._close_stream(action.conn)
                    else:
                        self.dropped.add(action.conn)
                elif isinstance(action, JsonReceived):
                    self.session.receive_json(action.message)
                elif isinstance(action, EndpointReady):
                    self.endpoint.set()
                elif isinstance(action, RequestRefused):
                    self.refusals = [*self.refusals[-15:], action]
                elif isinstance(action, StreamEnded | Closed):
                    self.session.receive_eof()
                    self.ended.set()
        self.timer_changed.set()

    async def _close_stream(self, conn: int) -> None:
        stream = self.streams.pop(conn, None)
        if stream is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.aclose()

    async def _flush(self) -> None:
        await self.pump()
        if self.after is not None:
            await self.after()

    async def _connect(self, conn: int) -> None:
        config = self.sse.config
        try:
            stream: anyio.abc.ByteStream
            if config.tls:
                stream = await anyio.connect_tcp(config.host, config.port, tls=True)
            else:
                stream = await anyio.connect_tcp(config.host, config.port)
        except OSError:
            async with self.lock:
                self.sse.connection_lost(conn, time.monotonic())
                await self._flush()
            return
        if conn in self.dropped:  # the machine gave up on it while it was connecting
            self.dropped.discard(conn)
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await stream.aclose()
            return
        self.streams[conn] = stream
        async with self.lock:
            self.sse.connection_made(conn, time.monotonic())
            await self._flush()
        try:
            async for data in stream:
                async with self.lock:
                    self.sse.receive_data(conn, data, time.monotonic())
                    await self._flush()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        if self.streams.pop(conn, None) is not None:  # the server's end, not ours
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await stream.aclose()
            async with self.lock:
                self.sse.receive_data(conn, b"", time.monotonic())
                await self._flush()

    async def run_timer(self) -> None:
        """Wake the machine at its deadline (the endpoint event's); run in the task group."""
        while True:
            deadline = self.sse.get_timer()
            self.timer_changed = anyio.Event()
            if deadline is None:
                await self.timer_changed.wait()
                continue
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                await self.timer_changed.wait()
            if time.monotonic() >= deadline:
                async with self.lock:
                    self.sse.handle_timer(time.monotonic())
                    await self._flush()
