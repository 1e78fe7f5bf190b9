"""The event-loop driver over HTTP: ``serve_http``, the ``HttpServer`` core on sockets anyio accepts.

``mcpx.drivers._async`` has the loop's rules.  Each accepted connection's
bytes are fed to the one ``HttpServer`` core; ``SendBytes`` are written,
``CloseConnection`` closes, and an ``AppRequest`` (a path the application
serves beside MCP, the daemon's ``/v1``) goes to the application handler,
whose ``AppResponse`` the core writes.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import math
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import orjson
import sniffio
from anyio.streams.memory import MemoryObjectReceiveStream

from ..core import AppRequest, CloseConnection, HttpServer, SendBytes
from ..server import Server
from . import _batch
from ._async import _Runner
from ._common import change_listener

__all__ = ["AppHandler", "AppResponse", "serve_http"]


@dataclass(frozen=True, slots=True)
class AppResponse:
    """The answer to an ``AppRequest``: a whole body, or (``stream``) chunks written as they come."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    stream: AsyncIterator[bytes] | None = None


AppHandler = Callable[[AppRequest], Awaitable[AppResponse]]
"""Serves ``HttpConfig.app_paths`` next to MCP on the same listener (the daemon's /v1)."""


class _Outbox(Protocol):
    def send_nowait(self, item: bytes | None) -> None: ...


class _HttpRunner(_Runner):
    def __init__(
        self, server: Server, http: HttpServer, tg: anyio.abc.TaskGroup, trace: bool, app: AppHandler | None
    ):
        super().__init__(server, http, http, tg, trace)
        self.http = http
        self.app = app
        self.outboxes: dict[int, _Outbox] = {}  # by connection: bytes to write; None: close once written
        self.closed: anyio.Event | None = None  # set by each asyncio connection's end while the server stops
        self.ids = itertools.count(1)

    async def run_app(self, request: AppRequest) -> None:
        """One application request: its handler's answer, or a JSON 500 that says what broke."""
        try:
            if self.app is None:
                raise LookupError(f"nothing serves {request.target} here")
            answer = await self.app(request)
        except Exception as exc:  # a handler's bug costs its request, not the listener
            body = orjson.dumps({"error": {"code": "internal", "message": f"{type(exc).__name__}: {exc}"}})
            answer = AppResponse(500, body)
        self.clock_in()
        if answer.stream is None:
            self.http.app_respond(
                request.conn,
                answer.status,
                answer.body,
                content_type=answer.content_type,
                headers=answer.headers,
            )
            self.flush()
            return
        self.http.app_respond_start(
            request.conn, answer.status, content_type=answer.content_type, headers=answer.headers
        )
        self.flush()
        try:
            async for chunk in answer.stream:
                if request.conn not in self.outboxes:
                    break  # the client went away
                self.http.app_respond_data(request.conn, chunk)
                self.flush()
        finally:
            self.http.app_respond_end(request.conn)
            self.flush()
            aclose = getattr(answer.stream, "aclose", None)
            if aclose is not None:  # the stream may hold a subscription: let go of it
                with anyio.CancelScope(shield=True):
                    await aclose()

    def clock_in(self) -> None:
        self.http.advance(time.monotonic())

    def perform(self, action: object) -> None:
        if isinstance(action, SendBytes):
            box = self.outboxes.get(action.conn)
            if box is not None:
                box.send_nowait(action.data)
        elif isinstance(action, CloseConnection):
            box = self.outboxes.get(action.conn)
            if box is not None:
                box.send_nowait(None)
        elif isinstance(action, AppRequest):
            self.tg.start_soon(self.run_app, action)

    async def handle(self, stream: anyio.abc.ByteStream) -> None:
        """One accepted connection: read into the core; a writer task drains its bytes."""
        conn = next(self.ids)
        send, receive = anyio.create_memory_object_stream[bytes | None](math.inf)
        self.outboxes[conn] = send
        self.http.connection_made(conn, time.monotonic())
        self.flush()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._write, conn, stream, receive, tg.cancel_scope)
            try:
                while True:
                    try:
                        data = await stream.receive(65536)
                    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        data = b""
                    with _batch.reading():  # the upstream calls it makes: written once, at the end
                        self.http.receive_data(conn, data, time.monotonic())
                        self.flush()
                    if not data:
                        break
                # The client finished sending; keep writing until the core closes.
                await anyio.sleep_forever()
            finally:
                self.outboxes.pop(conn, None)
                self.http.connection_lost(conn, time.monotonic())
                self.flush()

    async def _write(
        self,
        conn: int,
        stream: anyio.abc.ByteStream,
        inbox: MemoryObjectReceiveStream[bytes | None],
        scope: anyio.CancelScope,
    ) -> None:
        try:
            async for data in inbox:
                chunks = [data]
                while chunks[-1] is not None:
                    try:
                        chunks.append(inbox.receive_nowait())
                    except anyio.WouldBlock:
                        break
                payload = b"".join(c for c in chunks if c is not None)
                if payload:
                    await stream.send(payload)
                if chunks[-1] is None:
                    break
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            with anyio.CancelScope(shield=True):
                await stream.aclose()
            scope.cancel()


class _TransportBox:
    """An asyncio connection's outbox: bytes written once per chunk of input (or loop turn), then closed."""

    __slots__ = ("closing", "pending", "scheduled", "transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.pending: list[bytes] = []
        self.closing = False
        self.scheduled = False

    def send_nowait(self, item: bytes | None) -> None:
        if item is None:
            self.closing = True
        else:
            self.pending.append(item)
        if not self.scheduled:
            self.scheduled = True
            _batch.due(self.write)

    def write(self) -> None:
        self.scheduled = False
        transport = self.transport
        if self.pending and not transport.is_closing():
            data = b"".join(self.pending)
            self.pending.clear()
            transport.write(data)  # what the socket does not take now, asyncio's transport keeps
        if self.closing:
            transport.close()  # after what is buffered is written


class _HttpProtocol(asyncio.Protocol):
    """One connection accepted by asyncio: read in the transport's callback, no task per connection.

    The same steps as ``_HttpRunner.handle``: the bytes to the core, the
    core's actions carried out; at end of input the connection stays open
    for the core to finish writing and close it.
    """

    def __init__(self, runner: _HttpRunner) -> None:
        self.runner = runner
        self.conn = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        runner = self.runner
        self.conn = next(runner.ids)
        # A stream transport (uvloop's are not asyncio.Transport subclasses, but have its methods).
        runner.outboxes[self.conn] = _TransportBox(transport)  # type: ignore[arg-type]
        runner.http.connection_made(self.conn, time.monotonic())
        runner.flush()

    def data_received(self, data: bytes) -> None:
        runner = self.runner
        with _batch.reading():  # the answers and upstream calls it makes: written once, at the end
            runner.http.receive_data(self.conn, data, time.monotonic())
            runner.flush()

    def eof_received(self) -> bool:
        runner = self.runner
        runner.http.receive_data(self.conn, b"", time.monotonic())
        runner.flush()
        return True  # keep writing until the core closes

    def connection_lost(self, exc: Exception | None) -> None:
        runner = self.runner
        if runner.outboxes.pop(self.conn, None) is not None:
            runner.http.connection_lost(self.conn, time.monotonic())
            runner.flush()
        if runner.closed is not None:
            runner.closed.set()


async def _close_served(runner: _HttpRunner, servers: list[asyncio.AbstractServer]) -> None:
    """Stop accepting, close every connection (what is queued written first), and wait until each is closed.

    asyncio closes a transport's socket on the loop's next turn
    (``connection_lost``): without the wait a server that stops with its
    loop would leave its clients' connections open, unanswered.
    """
    for served in servers:
        served.close()
    boxes = [box for box in runner.outboxes.values() if isinstance(box, _TransportBox)]
    for box in boxes:
        box.write()
        box.transport.close()
    closed = runner.closed = anyio.Event()
    with anyio.move_on_after(2.0):  # a close asyncio does not report: give up, the loop ends anyway
        while any(isinstance(box, _TransportBox) for box in runner.outboxes.values()):
            await closed.wait()
            closed = runner.closed = anyio.Event()


def _raw_sockets(listeners: list[anyio.abc.Listener[anyio.abc.ByteStream]]) -> list[Any] | None:
    """The listening sockets, when asyncio can serve them itself: plain sockets on asyncio, else ``None``."""
    try:
        if sniffio.current_async_library() != "asyncio":
            return None
    except sniffio.AsyncLibraryNotFoundError:
        return None
    sockets = []
    for listener in listeners:
        if not isinstance(listener, anyio.abc.SocketListener):
            return None  # TLS, or another wrapper: anyio serves it
        sockets.append(listener.extra(anyio.abc.SocketAttribute.raw_socket))
    return sockets


async def serve_http(
    server: Server,
    http: HttpServer,
    listeners: list[anyio.abc.Listener[anyio.abc.ByteStream]],
    *,
    trace: bool = False,
    started: Callable[[], None] | None = None,
    app: AppHandler | None = None,
) -> None:
    """Serve ``http`` on ``listeners`` until cancelled; ``app`` answers ``HttpConfig.app_paths``.

    On asyncio, plain sockets are accepted and read by asyncio itself
    (``_HttpProtocol``: a callback per chunk rather than a task per
    connection, and writes made once per chunk); on trio, and for TLS, by
    anyio (``_HttpRunner.handle``).
    """
    raw = _raw_sockets(listeners)
    servers: list[asyncio.AbstractServer] = []
    async with anyio.create_task_group() as tg:
        runner = _HttpRunner(server, http, tg, trace, app)
        unsubscribe = server.add_listener(change_listener(runner.post, http))
        try:
            tg.start_soon(runner.timer_loop)
            if raw is not None:
                loop = asyncio.get_running_loop()
                for sock in raw:
                    factory = functools.partial(_HttpProtocol, runner)
                    if sock.family == socket.AF_UNIX:
                        servers.append(await loop.create_unix_server(factory, sock=sock))
                    else:
                        servers.append(await loop.create_server(factory, sock=sock))
            else:
                for listener in listeners:
                    tg.start_soon(listener.serve, runner.handle)
            if started is not None:
                started()
            await anyio.sleep_forever()
        finally:
            unsubscribe()
            if raw is not None:
                with anyio.CancelScope(shield=True):
                    await _close_served(runner, servers)
            runner.abandon_deferred()
