"""``mcpx serve``: the daemon's /mcp as a stdio MCP server, for hosts that can only spawn a process.

A thin relay (seed §5, "stdio stays, and stays a thin shim"): every line the
host writes is POSTed to the daemon's /mcp through the pure Streamable HTTP
client binding, and every message the daemon sends — answers, and what it
pushes on the session's GET stream — is written back as a line.  The host's
first message decides the shape: ``initialize`` opens a legacy session (its
id rides on every later POST, the GET stream opens once the handshake is
answered, ``DELETE`` ends it at end of input); anything else is 2026-07-28,
one POST per request, where the host's ``notifications/cancelled`` closes
that request's stream, which is how that revision cancels over HTTP.  If the
daemon restarts and forgets the session, the shim opens a new one by sending
the host's own ``initialize`` again and swallowing the answer, so the host
does not notice.  The daemon is started on demand when none is running.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
from anyio.streams.memory import MemoryObjectSendStream

from ..core import (
    DEFAULT_MAX_LINE,
    EndOfInput,
    HttpClientConfig,
    HttpClientConnection,
    Line,
    LineReader,
    LineTooLong,
)
from ..drivers._async import ByteReader, ByteWriter
from ..drivers._http_transport import HttpTransport

__all__ = ["ensure_daemon", "serve_shim"]


def ensure_daemon(state_dir: Path, *, config: str | None = None, wait: float = 30.0) -> dict[str, Any]:
    """The running daemon's ``daemon.json``; starts ``mcpx daemon`` (detached) first if none runs."""
    from ..cli._gateway import daemon_info

    info = daemon_info(state_dir)
    if info is not None:
        return info
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    argv = [sys.executable, "-m", "mcpx", "daemon", "--state", str(state_dir)]
    if config is not None:
        argv += ["--config", config]
    log = os.open(state_dir / "daemon.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True
        )
    finally:
        os.close(log)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        info = daemon_info(state_dir)
        if info is not None:
            return info
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(
        f"mcpx daemon did not start; its log is {state_dir / 'daemon.log'} "
        "(a port in use? set transport.port or start `mcpx daemon` yourself)"
    )


class _Relay:
    """Receives what the daemon sends and queues it for the host; renews a forgotten session."""

    def __init__(self, out: MemoryObjectSendStream[bytes]) -> None:
        self.out = out
        self.http: HttpClientConnection | None = None
        self.initialize: dict[str, Any] | None = None  # the host's, replayed after the daemon forgot us
        self.init_id: Any = None
        self.swallow: set[Any] = set()  # ids of our own replayed initialize
        self.handles: dict[Any, int] = {}  # 2026-07-28: request id -> the stream carrying it
        self.pending: set[Any] = set()  # the host's requests not answered yet
        self.answered = anyio.Event()  # set whenever pending empties
        self.done = anyio.Event()

    def json(self, message: Any, handle: int | None) -> None:
        assert self.http is not None
        if isinstance(message, dict) and message.get("id") in self.swallow and "method" not in message:
            # Our replayed initialize: finish the handshake the host already did once.
            self.swallow.discard(message["id"])
            initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
            self.http.send(initialized, handle=None, now=time.time())
            self.http.open_get_stream(time.time())
            return
        if isinstance(message, dict) and "method" not in message:
            self.handles.pop(message.get("id"), None)
            self.pending.discard(message.get("id"))
            if not self.pending:
                self.answered.set()
            if message.get("id") == self.init_id and "result" in message:
                self.http.open_get_stream(time.time())  # what the daemon pushes comes on it
        self.out.send_nowait(orjson.dumps(message) + b"\n")

    def closed(self) -> None:
        self.done.set()

    def expired(self, session_id: str) -> None:
        if self.http is None or self.initialize is None:
            return
        replay = {**self.initialize, "id": f"mcpx-shim-{session_id}"}
        self.swallow.add(replay["id"])
        self.http.send(orjson.dumps(replay), handle=None, now=time.time())


async def serve_shim(
    mcp_url: str,
    reader: ByteReader,
    writer: ByteWriter,
    *,
    max_line: int = DEFAULT_MAX_LINE,
    drain: float = 120.0,
) -> None:
    """Relay the host on ``reader``/``writer`` to the daemon at ``mcp_url`` until the host's input ends.

    At end of input, requests still in flight get up to ``drain`` seconds to
    be answered before the session is closed.
    """
    send, receive = anyio.create_memory_object_stream[bytes](1024)
    relay = _Relay(send)
    lines = LineReader(max_line)
    handles = iter(range(1, 1 << 62))

    written = anyio.Event()

    async def write_out() -> None:
        async for data in receive:
            await writer.send(data)
        written.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(write_out)
        transport: HttpTransport | None = None
        ended = False
        while not ended:
            for event in lines.feed(await reader.receive()):
                if isinstance(event, EndOfInput):
                    ended = True
                    break
                if isinstance(event, LineTooLong):
                    error = {"code": -32600, "message": f"a message over {max_line} bytes was dropped"}
                    send.send_nowait(orjson.dumps({"jsonrpc": "2.0", "id": None, "error": error}) + b"\n")
                    continue
                assert isinstance(event, Line)
                try:
                    message = orjson.loads(event.data)
                except orjson.JSONDecodeError as exc:
                    error = {"code": -32700, "message": f"Parse error: {exc}"}
                    send.send_nowait(orjson.dumps({"jsonrpc": "2.0", "id": None, "error": error}) + b"\n")
                    continue
                if transport is None:
                    modern = not (isinstance(message, dict) and message.get("method") == "initialize")
                    http = HttpClientConnection(HttpClientConfig(url=mcp_url, modern=modern))
                    relay.http = http
                    transport = HttpTransport(http, tg, relay)
                    tg.start_soon(transport.run_timer)
                async with transport.lock:
                    _forward(relay, transport.http, message, event.data, next(handles))
                    await transport.flush()
        if transport is not None:
            # The host's input ended: its requests in flight get ``drain`` seconds to be answered.
            with anyio.move_on_after(drain):
                while relay.pending:
                    await relay.answered.wait()
            async with transport.lock:
                transport.http.close(time.time())
                await transport.flush()
            with anyio.move_on_after(5):
                await relay.done.wait()
        send.close()  # the writer drains what is queued, then ends
        with anyio.move_on_after(5):
            await written.wait()
        tg.cancel_scope.cancel()


def _forward(relay: _Relay, http: HttpClientConnection, message: Any, raw: bytes, handle: int) -> None:
    """One host message to the daemon (or, for a 2026-07-28 cancellation, the end of a stream)."""
    now = time.time()
    if isinstance(message, dict):
        method = message.get("method")
        if method == "initialize" and "id" in message:
            relay.initialize, relay.init_id = message, message["id"]
        if http.config.modern and method == "notifications/cancelled":
            params = message.get("params") or {}
            target = relay.handles.pop(params.get("requestId"), None)
            if target is not None:
                http.abandon(target)  # 2026-07-28 over HTTP: closing the stream is the cancellation
            return
        if method is not None and "id" in message:
            relay.pending.add(message["id"])
            relay.answered = anyio.Event()
            if http.config.modern:
                relay.handles[message["id"]] = handle
    http.send(raw, handle=handle, now=now)
