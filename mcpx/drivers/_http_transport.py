"""Sockets for mcpx's pure HTTP client bindings, on anyio.

A binding (``HttpClientConnection`` for Streamable HTTP, ``SseClientConnection``
for 2024-11-05 HTTP+SSE) decides every connection and byte; ``SocketTransport``
carries those actions out — opens TCP (or TLS) connections, writes, reads,
closes (also a connection the binding gave up on while it was still
connecting), and runs the binding's timer (read → feed → drain → act →
re-arm, like every driver).  What a binding decoded is the subclass's to act
on: ``HttpTransport`` hands it to a ``Receiver`` (each JSON-RPC message, the
end of the connection, a session the server forgot); ``mcpx.client`` puts one
under a ``ClientSession``, and ``mcpx serve`` relays a host's stdio
conversation through one to the daemon's /mcp.  One lock orders everything that
touches the binding and whatever feeds it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio
import anyio.abc

from ..core import Closed, HttpClientConnection, JsonReceived, OpenConnection, SessionExpired
from ..core.http_wire import CloseConnection, SendBytes

__all__ = ["HttpTransport", "Receiver", "SocketTransport"]


class _Endpoint(Protocol):
    host: str
    port: int
    tls: bool


class Binding(Protocol):
    """What ``SocketTransport`` needs of a binding (both client bindings have it)."""

    @property
    def config(self) -> Any: ...

    def next_actions(self) -> list[Any]: ...

    def connection_made(self, conn: int, now: float) -> None: ...

    def receive_data(self, conn: int, data: bytes, now: float) -> None: ...

    def connection_lost(self, conn: int, now: float, *, reason: str | None = None) -> None: ...

    def get_timer(self) -> float | None: ...

    def handle_timer(self, now: float) -> None: ...


class Receiver(Protocol):
    def json(self, message: Any, handle: int | None) -> None:
        """One JSON-RPC message from the server (``handle``: the request whose stream carried it)."""

    def closed(self) -> None:
        """The binding closed: nothing more will arrive."""

    def expired(self, session_id: str) -> None:
        """The server forgot session ``session_id`` (HTTP 404)."""


class SocketTransport:
    """The sockets of one binding; ``act`` is the subclass's answer to every other action."""

    def __init__(
        self, binding: Binding, tg: anyio.abc.TaskGroup, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.binding = binding
        self.tg = tg
        self.clock = clock  # the binding's now: monotonic, as for every machine
        self.streams: dict[int, anyio.abc.ByteStream] = {}
        self.dropped: set[int] = set()  # closed by the binding while still connecting
        self.lock = anyio.Lock()
        self.timer_changed = anyio.Event()
        self.after: Callable[[], Awaitable[None]] | None = None  # runs after each pump, under the lock

    def act(self, action: Any) -> None:
        """An action that is not about sockets (decoded messages, endings): the subclass's."""
        raise NotImplementedError

    async def pump(self) -> None:
        """Carry out the binding's actions until it has none."""
        while True:
            actions = self.binding.next_actions()
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
                            self.binding.connection_lost(action.conn, self.clock())
                elif isinstance(action, CloseConnection):
                    if action.conn in self.streams:
                        await self._close_stream(action.conn)
                    else:
                        self.dropped.add(action.conn)
                else:
                    self.act(action)
        self.timer_changed.set()

    async def flush(self) -> None:
        await self.pump()
        if self.after is not None:
            await self.after()

    async def close_all(self) -> None:
        """Close every socket still open."""
        for conn in list(self.streams):
            await self._close_stream(conn)

    async def _close_stream(self, conn: int) -> None:
        stream = self.streams.pop(conn, None)
        if stream is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.aclose()

    async def _connect(self, conn: int) -> None:
        config: _Endpoint = self.binding.config
        try:
            stream: anyio.abc.ByteStream
            if config.tls:
                stream = await anyio.connect_tcp(config.host, config.port, tls=True)
            else:
                stream = await anyio.connect_tcp(config.host, config.port)
        except OSError as exc:
            async with self.lock:
                self.binding.connection_lost(conn, self.clock(), reason=exc.strerror or str(exc))
                await self.flush()
            return
        if conn in self.dropped:  # the binding gave up on it while it was connecting
            self.dropped.discard(conn)
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await stream.aclose()
            return
        self.streams[conn] = stream
        async with self.lock:
            self.binding.connection_made(conn, self.clock())
            await self.flush()
        try:
            async for data in stream:
                async with self.lock:
                    self.binding.receive_data(conn, data, self.clock())
                    await self.flush()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        if self.streams.pop(conn, None) is not None:  # the server's end, not ours
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await stream.aclose()
            async with self.lock:
                self.binding.receive_data(conn, b"", self.clock())
                await self.flush()

    async def run_timer(self) -> None:
        """Feed the binding its deadlines (retries, resumption, the endpoint wait) until cancelled."""
        while True:
            deadline = self.binding.get_timer()
            self.timer_changed = anyio.Event()
            if deadline is None:
                await self.timer_changed.wait()
                continue
            with anyio.move_on_after(max(0.0, deadline - self.clock())):
                await self.timer_changed.wait()
            if self.clock() >= deadline:
                async with self.lock:
                    self.binding.handle_timer(self.clock())
                    await self.flush()


class HttpTransport(SocketTransport):
    """Carries out an ``HttpClientConnection``'s actions; what it decodes goes to ``receiver``."""

    def __init__(self, http: HttpClientConnection, tg: anyio.abc.TaskGroup, receiver: Receiver) -> None:
        super().__init__(http, tg)
        self.http = http
        self.receiver = receiver
        self.closed = anyio.Event()

    async def send(self, payload: bytes, handle: int | None) -> None:
        """One message to the server (the caller holds ``lock``)."""
        self.http.send(payload, handle=handle, now=self.clock())
        await self.pump()

    async def aclose(self, timeout: float) -> None:
        """Close the binding (legacy: ``DELETE`` the session), waiting at most ``timeout`` s; call it shielded.

        The group the transport was made with may be cancelled already (the
        caller's scope was: a daemon shutting down), and its tasks with it: a
        task started there would never connect.  So the connection the close
        opens for the ``DELETE`` (the binding never sends it on a pooled one,
        whose reader may be gone) lives in a group of the close's own, under
        the caller's shield.  Sockets still open afterwards are closed.
        """
        tg = self.tg
        try:
            with anyio.move_on_after(timeout):
                async with anyio.create_task_group() as closing:
                    self.tg = closing
                    async with self.lock:
                        self.http.close(self.clock())
                        await self.pump()
                    await self.closed.wait()
                    closing.cancel_scope.cancel()
        finally:
            self.tg = tg
        await self.close_all()

    async def abandon(self, handle: int) -> None:
        """Stop waiting for ``handle``'s answer (2026-07-28: closes its stream, which cancels it)."""
        self.http.abandon(handle)
        await self.pump()

    def act(self, action: Any) -> None:
        if isinstance(action, JsonReceived):
            self.receiver.json(action.message, action.handle)
        elif isinstance(action, Closed):
            self.receiver.closed()
            self.closed.set()
        elif isinstance(action, SessionExpired):
            self.receiver.expired(action.session_id)
