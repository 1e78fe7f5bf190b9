"""Hosts the daemon serves directly: the stdio of each ``mcpx serve``, handed over on ``<state>/serve.sock``.

An MCP host spawns ``mcpx serve``; the shim connects to the daemon's serve
socket and hands it the host's stdin and stdout (``SCM_RIGHTS``, with the
in-flight mirror of ``_state``), so the daemon reads and writes the host's
pipes itself and the shim relays nothing.  To the daemon the host is one
stdio connection, served by the same driver and server session as any stdio
MCP server (MCP 2025-06-18 and later, basic/transports "stdio"), and one
identity for the pool: ``host:<n>``, in both eras (a connection-scoped
upstream is started once per host, not per 2026-07-28 request).

The socket protocol, one JSON object a line:

* shim → daemon, first: ``{"v": 1, "mode": "fds", "resume": <handshake>|null,
  "passthrough": [<name>, ...]}`` with three descriptors (stdin, stdout, the
  mirror); or ``"mode": "lines"`` and no descriptors, when they cannot be
  passed: the socket itself then carries the host's messages both ways,
  newline-delimited JSON.  ``passthrough``, when present, is the host's own
  choice of servers offered as themselves (``[]``: the gateway's tools),
  whatever the daemon's ``mcp.passthrough`` (spec/gateway.md §9).
* daemon → shim: ``{"handshake": {...}}`` once a legacy host's ``initialize``
  has settled (a restarted daemon resumes the session with it, so the host
  is not asked to initialize again); ``{"add": id}`` / ``{"done": id}`` for an
  id the mirror could not hold; ``{"ended": true}`` when the connection has
  ended, after which the daemon waits (at most ``SHIM_LEAVES_WITHIN``) for
  the shim to close its end, then closes its own; ``{"refused": <message>}``
  instead of serving a hello it cannot (a pass-through name it does not
  have), then it closes.  In ``lines`` mode the shim sees every message
  itself and the daemon sends none of these but the refusal, which is then
  the first line on the socket (before any answer to the host: a JSON-RPC
  message always names ``jsonrpc``, a refusal never does).

When the shim's end closes (the host killed it), the connection ends with it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import socket
import sys
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import sniffio

from ..core import RoundTable, ServerConfig, StdioServerConnection
from ..core.framing import DEFAULT_MAX_LINE
from ..core.server_session import ConnectionState
from ..drivers import new_round_table
from ..drivers._async import ByteReader
from ..drivers._async_stdio import serve_connection
from ..drivers._stdio_streams import open_stdio
from ..server import Server
from ._state import InflightMirror

__all__ = ["HOST_PREFIX", "HostListener"]

HOST_PREFIX = "host:"
"""The identity of a host served on its own stdio: its scope in both eras (``scope_key``)."""
_HELLO_LIMIT = 1 << 20


class _Announcer:
    """Tells the shim what it must keep: the handshake, and ids the mirror could not hold."""

    def __init__(self, control: anyio.abc.SocketStream, conn: StdioServerConnection, tg: anyio.abc.TaskGroup):
        self.control = control
        self.conn = conn
        self.tg = tg
        self.mirror: InflightMirror | None = None
        self.announced = False
        self.lock = anyio.Lock()

    def check_handshake(self) -> None:
        """After each read: a legacy handshake that has just settled goes to the shim, once."""
        if self.announced or self.conn.session.state is not ConnectionState.READY:
            return
        self.announced = True
        handshake = self.conn.session.handshake()
        if handshake is not None:
            self.tg.start_soon(self.send, {"handshake": handshake})

    async def send(self, message: dict[str, Any]) -> None:
        async with self.lock:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await self.control.send(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def started(self, request_id: str | int) -> None:
        if self.mirror is None or not self.mirror.add(request_id):
            self.tg.start_soon(self.send, {"add": request_id})

    def ended(self, request_id: str | int) -> None:
        if self.mirror is None or not self.mirror.done(request_id):
            self.tg.start_soon(self.send, {"done": request_id})


SHIM_LEAVES_WITHIN = 2.0
"""How long the daemon waits for a shim told ``ended`` to close its end before closing its own."""


class _WatchedReader:
    """The host's stdin, announcing a settled handshake before each read."""

    def __init__(self, reader: ByteReader, announcer: _Announcer) -> None:
        self.reader = reader
        self.announcer = announcer
        inner = getattr(reader, "push", None)
        self.push: Callable[[Callable[[bytes], None]], None] | None = None
        if inner is not None:  # chunks pushed as they arrive: the handshake is checked after each

            def push(consumer: Callable[[bytes], None]) -> None:
                def take(data: bytes) -> None:
                    consumer(data)
                    announcer.check_handshake()

                inner(take)

            self.push = push

    async def receive(self) -> bytes:
        self.announcer.check_handshake()
        return await self.reader.receive()


class _SocketReader:
    """``lines`` mode: the host's messages come on the socket (leftover bytes of the hello first)."""

    def __init__(self, stream: anyio.abc.SocketStream, leftover: bytes) -> None:
        self.stream = stream
        self.leftover = leftover

    async def receive(self) -> bytes:
        if self.leftover:
            data, self.leftover = self.leftover, b""
            return data
        try:
            return await self.stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            return b""


class _SocketWriter:
    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream

    async def send(self, data: bytes) -> None:
        try:
            await self.stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise BrokenPipeError(str(exc)) from exc

    async def aclose(self) -> None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError):
            await self.stream.send_eof()


class HostListener:
    """Accepts shims on ``path`` and serves each host's stdio with ``server`` until it ends."""

    def __init__(
        self,
        server: Server,
        config: ServerConfig,
        path: str,
        *,
        on_end: Callable[[str], None],
        max_line: int = DEFAULT_MAX_LINE,
        rounds: Callable[[], RoundTable] | None = None,
        choose: Callable[[tuple[str, ...]], Server] | None = None,
    ) -> None:
        self.server = server
        # The server for a host that chose its own pass-through list; ValueError (what to say)
        # for a list it cannot have.  None: every host gets ``server``.
        self.choose = choose
        self.config = config
        self.path = path
        self.on_end = on_end  # told the identity of each host whose connection ended
        self.max_line = max_line  # transport.maxLine
        # Each host's own table of 2026-07-28 calls waiting for its answers (its retries come on
        # its own connection; nothing is shared with another host): proto.stateTTL, askTimeout
        # and askRounds.
        self.rounds = rounds or new_round_table
        self._ids = itertools.count(1)
        self.served = 0  # hosts whose connection was handed over
        self._sock: socket.socket | None = None
        self._configs: dict[int, tuple[Server, ServerConfig]] = {}  # by id() of a chosen server

    def bind(self) -> None:
        """Listen on ``path`` now (owner-only), before ``daemon.json`` tells shims where to find it."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(self.path)
            os.chmod(self.path, 0o600)
            sock.listen(64)
        except OSError:
            sock.close()
            raise
        self._sock = sock

    async def serve(self, tg: anyio.abc.TaskGroup) -> None:
        """Accept until cancelled (``bind`` first); each shim is served in a task of ``tg``."""
        assert self._sock is not None, "bind() first"
        listener = await anyio.abc.SocketListener.from_socket(self._sock)
        async with listener:  # the socket file stays: the next daemon's bind() replaces it
            await listener.serve(self._host, task_group=tg)

    async def _hello(self, stream: anyio.abc.UNIXSocketStream) -> tuple[dict[str, Any], list[int], bytes]:
        data, fds = await stream.receive_fds(65536, 3)
        for fd in fds:
            # Received without close-on-exec: an upstream spawned while the host is served (on a
            # loop whose spawn closes only such fds, as uvloop's does) would hold the host's pipes
            # open, and the host would never see the end of its output.
            os.set_inheritable(fd, False)
        while b"\n" not in data:
            if len(data) > _HELLO_LIMIT:
                raise ValueError("the hello line is too long")
            more = await stream.receive()
            data += more
        line, _, rest = data.partition(b"\n")
        hello = json.loads(line)
        if not isinstance(hello, dict) or hello.get("v") != 1:
            raise ValueError(f"not a hello this daemon understands: {line[:200]!r}")
        return hello, fds, rest

    async def _host(self, stream: anyio.abc.SocketStream) -> None:
        assert isinstance(stream, anyio.abc.UNIXSocketStream)
        fds: list[int] = []
        async with stream:
            try:
                hello, fds, rest = await self._hello(stream)
            except (ValueError, OSError, anyio.EndOfStream, anyio.BrokenResourceError):
                for fd in fds:
                    os.close(fd)
                return
            fds_mode = hello.get("mode") == "fds" and len(fds) == 3
            try:
                server = self._server_for(hello)
            except ValueError as exc:
                for fd in fds:
                    os.close(fd)
                print(f"mcpx: a host's mcpx serve was refused: {exc}", file=sys.stderr, flush=True)
                # In ``lines`` mode too: nothing of the host's has been answered, so this first line
                # (no JSON-RPC message, which always names ``jsonrpc``) can only be the refusal.
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    await stream.send(json.dumps({"refused": str(exc)}).encode() + b"\n")
                return
            identity = f"{HOST_PREFIX}{next(self._ids)}"
            self.served += 1
            try:
                if fds_mode:
                    await self._serve_fds(server, stream, fds, hello.get("resume"), identity)
                else:
                    await self._serve_lines(server, stream, rest, hello.get("resume"), identity)
            finally:
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self.on_end(identity)

    def _server_for(self, hello: dict[str, Any]) -> Server:
        """The server this hello's host is served by: its own pass-through choice, or everybody's."""
        chosen = hello.get("passthrough")
        if chosen is None or self.choose is None:
            return self.server
        if not isinstance(chosen, list) or not all(isinstance(name, str) for name in chosen):
            raise ValueError(f"the hello's passthrough must be a list of server names, not {chosen!r}")
        return self.choose(tuple(chosen))

    def _config_for(self, server: Server) -> ServerConfig:
        """The session configuration of a host served by ``server``: what it declares is that server's own."""
        if server is self.server:
            return self.config
        found = self._configs.get(id(server))
        if found is None or found[0] is not server:
            config = dataclasses.replace(
                self.config,
                capabilities=server.capabilities(),
                tools=server.tool_hints,
            )
            found = self._configs[id(server)] = (server, config)
        return found[1]

    def _connection(self, server: Server, resume: Any, identity: str) -> StdioServerConnection:
        conn = StdioServerConnection(
            self._config_for(server), identity=identity, max_line=self.max_line, rounds=self.rounds()
        )
        if isinstance(resume, dict):
            with contextlib.suppress(Exception):  # a handshake this daemon cannot take: the host starts anew
                conn.session.resume(resume)
        return conn

    async def _serve_fds(
        self, server: Server, stream: anyio.abc.UNIXSocketStream, fds: list[int], resume: Any, identity: str
    ) -> None:
        in_fd, out_fd, mirror_fd = fds
        conn = self._connection(server, resume, identity)
        backend = "trio" if sniffio.current_async_library() == "trio" else "asyncio"
        async with anyio.create_task_group() as tg:
            announcer = _Announcer(stream, conn, tg)
            announcer.announced = resume is not None  # the shim has it already
            announcer.mirror = InflightMirror(mirror_fd)
            try:
                async with open_stdio(backend, in_fd, out_fd) as (reader, writer):
                    tg.start_soon(self._until_shim_leaves, stream, tg.cancel_scope)
                    await serve_connection(
                        server, conn, _WatchedReader(reader, announcer), writer, watch=announcer
                    )
                await announcer.send({"ended": True})
                # The shim leaves on hearing it, and its end closing the socket ends the group
                # (``_until_shim_leaves``).  Waited for rather than cancelled: a read cancelled just
                # as the socket turns readable sets a finished future on uvloop, which logs it.
                with anyio.move_on_after(SHIM_LEAVES_WITHIN):
                    await anyio.sleep_forever()
            finally:
                announcer.mirror.close()
                tg.cancel_scope.cancel()

    async def _serve_lines(
        self, server: Server, stream: anyio.abc.SocketStream, rest: bytes, resume: Any, identity: str
    ) -> None:
        conn = self._connection(server, resume, identity)
        await serve_connection(server, conn, _SocketReader(stream, rest), _SocketWriter(stream))

    @staticmethod
    async def _until_shim_leaves(stream: anyio.abc.SocketStream, scope: anyio.CancelScope) -> None:
        """The shim sends nothing after its hello: its end closing means the host is gone."""
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            while await stream.receive():
                pass
        scope.cancel()
