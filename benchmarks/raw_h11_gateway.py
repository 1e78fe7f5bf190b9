"""The HTTP → stdio floor for ``bench_hop.py``: an h11 server that forwards each JSON body to a stdio server.

    python benchmarks/raw_h11_gateway.py [--port 0] [--loop asyncio|uvloop] -- COMMAND [ARG...]

It spawns COMMAND (a stdio MCP server) and serves HTTP/1.1 on 127.0.0.1
(``--port``, 0 picks one; it prints ``raw-h11-gateway: serving at
http://127.0.0.1:PORT/mcp`` on stderr once it listens).  Each POST's body is
one JSON-RPC message: a request gets an id of the gateway's own (many
connections share the one upstream, each with its own ids), is written to
the upstream as a line, and the upstream's answer goes back, with the
request's id restored, as an ``application/json`` response; anything else (a
notification, a response) is written to the upstream and answered ``202``.
An ``initialize`` answer carries an ``Mcp-Session-Id`` header, so a legacy
Streamable HTTP client can run its handshake; the session is not checked.

That is the least an HTTP → stdio gateway does per call — h11 parsing and
framing, orjson, an id remap, a pipe write and read — with no validation
and no protocol state: the floor the daemon's ``/mcp`` is measured against.
Keep-alive connections are served one request at a time, as HTTP/1.1 asks.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from typing import Any

import h11
import orjson

JSON_HEADERS = [(b"content-type", b"application/json")]


class Gateway:
    """The upstream's pipes and the table of requests in flight (gateway id → connection, host id)."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.sessions = itertools.count(1)
        self.pending: dict[int, tuple[HttpConn, Any, bool]] = {}
        self.to_upstream: asyncio.WriteTransport | None = None
        self.upstream_buf = b""
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def forward(self, conn: HttpConn, body: bytes) -> None:
        msg = orjson.loads(body)
        if isinstance(msg, dict) and "method" in msg and "id" in msg:
            gateway_id = next(self.ids)
            self.pending[gateway_id] = (conn, msg["id"], msg["method"] == "initialize")
            msg["id"] = gateway_id
            assert self.to_upstream is not None
            self.to_upstream.write(orjson.dumps(msg) + b"\n")
            return
        assert self.to_upstream is not None
        self.to_upstream.write(orjson.dumps(msg) + b"\n")
        conn.respond(202, [], b"")

    def from_upstream(self, data: bytes) -> None:
        buf = self.upstream_buf + data
        if b"\n" not in data:
            self.upstream_buf = buf
            return
        *lines, self.upstream_buf = buf.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            msg = orjson.loads(line)
            if not (isinstance(msg, dict) and "method" not in msg and "id" in msg):
                continue  # the echo sends nothing unsolicited; a real gateway would need a GET stream
            entry = self.pending.pop(msg["id"], None)
            if entry is None:
                continue
            conn, host_id, initialize = entry
            msg["id"] = host_id
            headers = list(JSON_HEADERS)
            if initialize:
                headers.append((b"mcp-session-id", b"h11-floor-%d" % next(self.sessions)))
            conn.respond(200, headers, orjson.dumps(msg))


class HttpConn(asyncio.Protocol):
    """One keep-alive connection: h11 in, one request at a time, the answer whenever the upstream sends it."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.h11 = h11.Connection(h11.SERVER)
        self.transport: asyncio.Transport | None = None
        self.body: list[bytes] = []
        self.method = b""
        self.busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.h11.receive_data(data)
        self.process()

    def eof_received(self) -> bool:
        self.h11.receive_data(b"")
        self.process()
        return False

    def process(self) -> None:
        while not self.busy:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError:
                self.close()
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self.method = event.method
                self.body = []
            elif isinstance(event, h11.Data):
                self.body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                self.busy = True
                if self.method != b"POST":
                    self.respond(405, [], b"")
                else:
                    self.gateway.forward(self, b"".join(self.body))
            elif isinstance(event, h11.ConnectionClosed):
                self.close()
                return

    def respond(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        head = h11.Response(status_code=status, headers=[*headers, (b"content-length", b"%d" % len(body))])
        out = self.h11.send(head) or b""
        if body:
            out += self.h11.send(h11.Data(data=body)) or b""
        out += self.h11.send(h11.EndOfMessage()) or b""
        self.transport.write(out)
        self.busy = False
        if self.h11.our_state is h11.MUST_CLOSE:
            self.close()
            return
        self.h11.start_next_cycle()
        self.process()  # a request that arrived early was held back (PAUSED)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Upstream(asyncio.SubprocessProtocol):
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self.gateway.from_upstream(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.gateway.done.done():
            self.gateway.done.set_result(None)


async def run(command: list[str], port: int) -> int:
    loop = asyncio.get_running_loop()
    gateway = Gateway()
    transport, _ = await loop.subprocess_exec(
        lambda: Upstream(gateway),
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=None,
    )
    gateway.to_upstream = transport.get_pipe_transport(0)  # type: ignore[assignment]
    server = await loop.create_server(lambda: HttpConn(gateway), "127.0.0.1", port)
    bound = server.sockets[0].getsockname()[1]
    sys.stderr.write(f"raw-h11-gateway: serving at http://127.0.0.1:{bound}/mcp\n")
    sys.stderr.flush()
    stop = loop.create_future()
    loop.add_reader(sys.stdin.fileno(), lambda: stop.done() or stop.set_result(None))  # stdin closes: stop
    await asyncio.wait([stop, gateway.done], return_when=asyncio.FIRST_COMPLETED)
    loop.remove_reader(sys.stdin.fileno())
    server.close()
    gateway.to_upstream.close()
    await gateway.done
    transport.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="A minimal HTTP → stdio gateway (h11, id remap) in front of COMMAND."
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0 picks one)")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the upstream's command after --")
    if args.loop == "uvloop":
        import uvloop

        return uvloop.run(run(command, args.port))
    return asyncio.run(run(command, args.port))


if __name__ == "__main__":
    sys.exit(main())
