"""The relay floor for ``bench_hop.py``: stdio in → orjson → id remap → the upstream's stdin, and back.

    python benchmarks/raw_relay.py [--loop asyncio|uvloop] -- COMMAND [ARG...]

It spawns COMMAND (a stdio MCP server) and relays newline-delimited JSON
both ways on one event loop, doing what any stdio gateway must do per
message and nothing more: parse each line (orjson), give each request from
the host an id of the relay's own (so many hosts could share one upstream),
serialise it again and write it to the upstream; parse each line from the
upstream, put the host's id back on a response, serialise and write it to
the host.  Every line of one read goes out in one write.  No validation, no
protocol knowledge beyond "a message with ``method`` and ``id`` is a
request, one with ``id`` and no ``method`` a response".  Requests from the
upstream, and the host's answers to them, pass with their ids unchanged.

Pipes are driven by the loop's own transports (``connect_read_pipe`` /
``connect_write_pipe`` and ``subprocess_exec``), with protocols rather than
streams, so the figure is the loop's cost and the relay's, not a stream
layer's.  At end of the host's input the upstream's stdin is closed and the
relay exits when the upstream does.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from typing import Any

import orjson


class Relay:
    """Both directions' per-message work, and the table of ids in flight."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.pending: dict[int, Any] = {}  # relay id -> the host's id
        self.to_upstream: asyncio.WriteTransport | None = None
        self.to_host: asyncio.WriteTransport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.host_buf = b""
        self.upstream_buf = b""

    def from_host(self, data: bytes) -> None:
        buf = self.host_buf + data
        if b"\n" not in data:
            self.host_buf = buf
            return
        *lines, self.host_buf = buf.split(b"\n")
        out = []
        for line in lines:
            if not line.strip():
                continue
            msg = orjson.loads(line)
            if isinstance(msg, dict) and "method" in msg and "id" in msg:
                relay_id = next(self.ids)
                self.pending[relay_id] = msg["id"]
                msg["id"] = relay_id
            out.append(orjson.dumps(msg))
        if out and self.to_upstream is not None:
            self.to_upstream.write(b"\n".join(out) + b"\n")

    def from_upstream(self, data: bytes) -> None:
        buf = self.upstream_buf + data
        if b"\n" not in data:
            self.upstream_buf = buf
            return
        *lines, self.upstream_buf = buf.split(b"\n")
        out = []
        for line in lines:
            if not line.strip():
                continue
            msg = orjson.loads(line)
            if isinstance(msg, dict) and "method" not in msg and "id" in msg:
                host_id = self.pending.pop(msg["id"], None)
                if host_id is not None:
                    msg["id"] = host_id
            out.append(orjson.dumps(msg))
        if out and self.to_host is not None:
            self.to_host.write(b"\n".join(out) + b"\n")


class HostIn(asyncio.Protocol):
    def __init__(self, relay: Relay) -> None:
        self.relay = relay

    def data_received(self, data: bytes) -> None:
        self.relay.from_host(data)

    def eof_received(self) -> bool:
        if self.relay.to_upstream is not None:
            self.relay.to_upstream.close()  # the upstream sees end of input and exits
        return False


class HostOut(asyncio.Protocol):
    """The host's stdout: writes are small and the host reads them, so flow control is not needed."""

    def connection_lost(self, exc: Exception | None) -> None:
        pass


class Upstream(asyncio.SubprocessProtocol):
    def __init__(self, relay: Relay) -> None:
        self.relay = relay

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self.relay.from_upstream(data)

    def connection_lost(self, exc: Exception | None) -> None:
        # The process has exited and its pipes are read to the end.
        if not self.relay.done.done():
            self.relay.done.set_result(None)


async def run(command: list[str]) -> int:
    loop = asyncio.get_running_loop()
    relay = Relay()
    transport, _ = await loop.subprocess_exec(
        lambda: Upstream(relay),
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=None,
    )
    relay.to_upstream = transport.get_pipe_transport(0)  # type: ignore[assignment]
    out, _ = await loop.connect_write_pipe(HostOut, sys.stdout.buffer)
    relay.to_host = out
    await loop.connect_read_pipe(lambda: HostIn(relay), sys.stdin.buffer)
    await relay.done
    code = transport.get_returncode()
    transport.close()
    return 0 if code is None else code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A minimal stdio relay (id remap) in front of COMMAND.")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the upstream's command after --")
    if args.loop == "uvloop":
        import uvloop

        return uvloop.run(run(command))
    return asyncio.run(run(command))


if __name__ == "__main__":
    sys.exit(main())
