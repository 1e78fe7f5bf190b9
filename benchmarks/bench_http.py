"""``mcpx demo --http`` against the official MCP Python SDK over Streamable HTTP, as ratios.

For every mcpx driver (``--loop asyncio | uvloop | trio | blocking``) the
benchmark spawns two servers side by side on 127.0.0.1:

* ``python -m mcpx demo --loop <driver> --http 0``;
* ``python benchmarks/sdk_http_echo_server.py`` — the SDK's ``MCPServer``
  with the same ``echo`` tool (``async def echo(text: str) -> str``), served
  by ``MCPServer.run("streamable-http")`` (Starlette on uvicorn), with the
  SDK's defaults unless ``--sdk-json`` / ``--sdk-log-level`` say otherwise.

One raw HTTP/1.1 client (this file: plain sockets, ``epoll`` on one thread,
an incremental response parser, orjson) talks to both over keep-alive
connections and measures ``tools/call`` ``echo`` requests per second:

``seq``   one connection, one request at a time (round-trip latency);
``conc``  ``--concurrency`` (32) connections, each sending its next request
          as soon as its previous answer is in (HTTP/1.1 has one request in
          flight per connection), until ``--requests`` have been answered.

in two eras:

``2025-11-25``  every connection first does the legacy handshake
                (``initialize`` → ``Mcp-Session-Id`` →
                ``notifications/initialized``, 202) and sends
                ``Mcp-Session-Id`` and ``MCP-Protocol-Version`` on each call;
``2026-07-28``  no handshake: each POST carries ``MCP-Protocol-Version``,
                ``Mcp-Method`` and ``Mcp-Name`` headers and ``params._meta``
                (protocol version, client info and capabilities).  The SDK
                serves this era from the same app (its header-routed
                single-exchange path), so both sides are measured alike.

Each (era, mode) pair's ``--requests`` per server are split into ``--rounds``
blocks that alternate between the servers (mcpx, SDK, SDK, mcpx, …), so that
noise on the machine hits both sides alike; the figure per server is the
median over its blocks, the ratio mcpx/SDK of those medians (> 1 means mcpx
is faster).  Every response is checked: status 200, the right id, a result,
the echoed text.  Server CPU time per request (user + system, all threads,
from ``/proc/<pid>/stat``) and the client's own CPU share (process time /
wall time of the block) are recorded too: a client share well below 100 %
of a core means the client was not what limited the rate.

A block stops early after ``--max-block-seconds`` (its rate still counts)
so that a server that stalls cannot stretch the run.  Both servers close
idle keep-alive connections (uvicorn after 5 s, mcpx after 10 s); a
connection idle for 2 s, or closed, is replaced before a block, outside the
timing (a legacy session outlives its connection).

Results are printed as a table and written as JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, BinaryIO

import orjson
from _util import HERE, load_average, machine, now_iso, write_results

LOOPS = ("asyncio", "uvloop", "trio", "blocking")
MODES = ("seq", "conc")
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ERAS = (LEGACY, MODERN)
ERA_LABEL = {LEGACY: f"{LEGACY} session", MODERN: f"{MODERN} no handshake"}
TEXT = "hello, world"
TIMEOUT = 30.0
START_TIMEOUT = 60.0
IDLE_LIMIT = 2.0
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
CLIENT_INFO = {"name": "mcpx-bench", "version": "1"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
}


class BenchError(RuntimeError):
    pass


# ---------------------------------------------------------------------------
# The servers
# ---------------------------------------------------------------------------


def mcpx_command(loop: str) -> list[str]:
    return [sys.executable, "-m", "mcpx", "demo", "--loop", loop, "--http", "0"]


def sdk_command(args: argparse.Namespace) -> list[str]:
    command = [sys.executable, str(HERE / "sdk_http_echo_server.py"), "--port", "0"]
    if args.sdk_json:
        command.append("--json")
    return [*command, "--log-level", args.sdk_log_level]


class Server:
    """One spawned HTTP server; stderr goes to a file (never a pipe, which could fill up and stall it)."""

    def __init__(self, name: str, command: list[str], ready: str, path: str) -> None:
        self.name = name
        self.command = command
        self.stderr: BinaryIO = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr
        )
        self.ready = re.compile(ready)
        self.path = path
        self.host = "127.0.0.1"
        self.port = 0

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            self.stderr.seek(0)
            match = self.ready.search(self.stderr.read().decode(errors="replace"))
            if match:
                self.host, self.port = match.group(1), int(match.group(2))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise BenchError(f"{self.name} did not start{self.stderr_tail()}")

    def cpu_seconds(self) -> float | None:
        """User + system CPU time of the server process so far (all threads)."""
        try:
            with open(f"/proc/{self.proc.pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        tail = self.stderr.read()[-2000:].decode(errors="replace").strip()
        return f"\n--- {self.name} stderr ---\n{tail}" if tail else ""

    def stderr_bytes(self) -> int:
        self.stderr.seek(0, os.SEEK_END)
        return self.stderr.tell()

    def close(self) -> int | None:
        code = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                code = self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        else:
            code = self.proc.returncode
        self.stderr.close()
        return code


def start_servers(loop: str, args: argparse.Namespace) -> dict[str, Server]:
    servers = {
        "mcpx": Server(
            f"mcpx demo --loop {loop} --http 0",
            mcpx_command(loop),
            r"serving MCP at http://([\d.]+):(\d+)(/\S*)",
            "/mcp",
        ),
        "sdk": Server("SDK", sdk_command(args), r"Uvicorn running on http://([\d.]+):(\d+)", "/mcp"),
    }
    try:
        for server in servers.values():
            server.wait_ready()
    except BaseException:
        for server in servers.values():
            server.close()
        raise
    return servers


# ---------------------------------------------------------------------------
# The client: raw HTTP/1.1 over keep-alive sockets
# ---------------------------------------------------------------------------


def parse_response(buf: bytes, pos: int) -> tuple[int, bytes, bytes, int] | None:
    """One complete response at ``buf[pos:]``: (status, head, body, end), or None if incomplete.

    Knows the two shapes the servers send: ``Content-Length`` bodies and
    ``Transfer-Encoding: chunked`` (the SDK's event streams).
    """
    hend = buf.find(b"\r\n\r\n", pos)
    if hend < 0:
        return None
    head = buf[pos:hend]
    status = int(head[9:12])
    lower = head.lower()
    start = hend + 4
    i = lower.find(b"\r\ncontent-length:")
    if i >= 0:
        j = lower.find(b"\r\n", i + 17)
        end = start + int(lower[i + 17 : j if j >= 0 else len(lower)])
        if len(buf) < end:
            return None
        return status, head, buf[start:end], end
    if b"\r\ntransfer-encoding: chunked" not in lower:
        raise BenchError(f"response with neither Content-Length nor chunked encoding: {head!r}")
    parts = []
    p = start
    while True:
        le = buf.find(b"\r\n", p)
        if le < 0:
            return None
        size = int(buf[p:le].split(b";", 1)[0], 16)
        if size == 0:
            end = buf.find(b"\r\n\r\n", le)  # the empty trailer section
            if end < 0:
                return None
            return status, head, b"".join(parts), end + 4
        p = le + 2 + size + 2
        if len(buf) < p:
            return None
        parts.append(buf[le + 2 : p - 2])


def header(head: bytes, name: bytes) -> str | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip().decode("latin-1")
    return None


def messages(head: bytes, body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages in a body: one JSON object, or the ``data:`` of each SSE event."""
    if body[:1] == b"{":
        return [orjson.loads(body)]
    out = []
    for line in body.split(b"\n"):
        if line.startswith(b"data:"):
            data = line[5:].strip()
            if data:
                out.append(orjson.loads(data))
    if not out and b"text/event-stream" not in head.lower():
        raise BenchError(f"unreadable body: {head!r} {body!r}")
    return out


def check_echo(name: str, status: int, head: bytes, body: bytes, request_id: int) -> None:
    if status != 200:
        raise BenchError(f"{name}: HTTP {status} for request {request_id}: {head!r} {body!r}")
    for msg in messages(head, body):
        if "method" in msg:
            continue  # a notification on the stream: not the answer
        result = msg.get("result")
        if msg.get("id") != request_id or not isinstance(result, dict) or result.get("isError"):
            raise BenchError(f"{name}: unexpected answer to request {request_id}: {msg}")
        content = result.get("content")
        if not (isinstance(content, list) and content and content[0].get("text") == TEXT):
            raise BenchError(f"{name}: the echo did not come back: {msg}")
        return
    raise BenchError(f"{name}: no answer to request {request_id} in {body!r}")


class Conn:
    """One keep-alive connection to one server, speaking one era."""

    def __init__(self, server: Server, era: str) -> None:
        self.name = server.name
        self.era = era
        self.address = (server.host, server.port)
        self.reconnects = 0
        self.connect()
        self.next_id = 1
        self.session_id: str | None = None
        self.expect = 0  # the id of the request in flight (conc mode)
        self.request_bytes = 0
        self.response_bytes = 0
        self.sample: list[dict[str, Any]] = []
        self._target = f"POST {server.path} HTTP/1.1\r\nHost: {server.host}:{server.port}\r\n"
        self._call_prefix = b""
        params: dict[str, Any] = {"name": "echo", "arguments": {"text": TEXT}}
        if era == MODERN:
            params["_meta"] = MODERN_META
        # The body with a %d hole for the id: bytes formatting per call, nothing else.
        self._body = orjson.dumps(
            {"jsonrpc": "2.0", "id": 999999999, "method": "tools/call", "params": params}
        )
        self._body = self._body.replace(b"%", b"%%").replace(b"999999999", b"%d", 1)

    def connect(self) -> None:
        self.sock = socket.create_connection(self.address, timeout=TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.fd = self.sock.fileno()
        self.buf = b""
        self.last_used = time.monotonic()

    def closed_by_server(self) -> bool:
        """Whether the server has closed this idle connection (both servers close idle keep-alives)."""
        readable, _, _ = select.select([self.sock], [], [], 0)
        if not readable:
            return False
        try:
            peek = self.sock.recv(1, socket.MSG_PEEK)
        except OSError:
            return True
        if peek:
            raise BenchError(
                f"{self.name}: unexpected bytes on an idle connection: {self.sock.recv(65536)!r}"
            )
        return True

    def revive(self) -> None:
        """Open a new connection if the server closed this one or soon may (the session carries on).

        uvicorn closes a keep-alive connection idle for 5 s, mcpx one idle
        for 10 s; a connection idle for ``IDLE_LIMIT`` is replaced before it
        is used so that no timed request races an idle close.
        """
        if time.monotonic() - self.last_used > IDLE_LIMIT or self.closed_by_server():
            self.close()
            self.connect()
            self.reconnects += 1

    def build(self, body: bytes, extra: str = "") -> bytes:
        head = (
            f"{self._target}Content-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode("latin-1") + body

    def exchange(self, data: bytes) -> tuple[int, bytes, bytes]:
        """Send one request, block for its whole response."""
        self.last_used = time.monotonic()
        self.sock.sendall(data)
        while True:
            got = parse_response(self.buf, 0)
            if got is not None:
                status, head, body, end = got
                self.buf = self.buf[end:]
                return status, head, body
            chunk = self.sock.recv(65536)
            if not chunk:
                raise BenchError(f"{self.name}: connection closed")
            self.buf += chunk

    def handshake(self) -> dict[str, Any] | None:
        """The legacy handshake for 2025-11-25 (nothing for 2026-07-28); then one checked call."""
        info = None
        if self.era == LEGACY:
            init = orjson.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO},
                }
            )
            status, head, body = self.exchange(self.build(init))
            msgs = [m for m in messages(head, body) if m.get("id") == 0]
            if status != 200 or not msgs or "result" not in msgs[0]:
                raise BenchError(f"{self.name}: initialize failed: {status} {head!r} {body!r}")
            info = msgs[0]["result"]
            if info.get("protocolVersion") != LEGACY:
                raise BenchError(f"{self.name}: negotiated {info.get('protocolVersion')}, not {LEGACY}")
            self.session_id = header(head, b"mcp-session-id")
            if not self.session_id:
                raise BenchError(f"{self.name}: initialize minted no Mcp-Session-Id")
            note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
            status, head, body = self.exchange(self.build(note, self.call_headers()))
            if status != 202:
                raise BenchError(f"{self.name}: notifications/initialized answered {status}: {body!r}")
        self._call_prefix = self.build(b"", self.call_headers()).rsplit(b"Content-Length:", 1)[0]
        request_id = self.take()
        data = self.call(request_id)
        status, head, body = self.exchange(data)
        check_echo(self.name, status, head, body, request_id)
        self.request_bytes = len(data)
        self.response_bytes = len(head) + 4 + len(body)
        self.sample = messages(head, body)
        return info

    def call_headers(self) -> str:
        """The MCP headers of every request after the handshake."""
        if self.era == LEGACY:
            return f"Mcp-Session-Id: {self.session_id}\r\nMCP-Protocol-Version: {LEGACY}\r\n"
        return f"MCP-Protocol-Version: {MODERN}\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n"

    def call(self, request_id: int) -> bytes:
        """The full HTTP request for ``tools/call`` echo with this id."""
        body = self._body % request_id
        return b"%sContent-Length: %d\r\n\r\n%s" % (self._call_prefix, len(body), body)

    def take(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def run_seq(conn: Conn, count: int, deadline: float = float("inf")) -> int:
    """``count`` requests one after another on one connection (blocking socket); the number done.

    Stops early once ``time.perf_counter()`` passes ``deadline``.
    """
    sock, name = conn.sock, conn.name
    sock.settimeout(TIMEOUT)
    done = 0
    clock = time.perf_counter
    while done < count and clock() < deadline:
        done += 1
        request_id = conn.take()
        sock.sendall(conn.call(request_id))
        buf = conn.buf
        while True:
            got = parse_response(buf, 0)
            if got is not None:
                break
            chunk = sock.recv(65536)
            if not chunk:
                raise BenchError(f"{name}: connection closed")
            buf += chunk
        status, head, body, end = got
        conn.buf = buf[end:]
        if conn.buf:
            raise BenchError(f"{name}: bytes after the response to {request_id}: {conn.buf!r}")
        check_echo(name, status, head, body, request_id)
    conn.last_used = time.monotonic()
    return done


class _Poller:
    """epoll where there is one (one system call per wake-up), else poll."""

    def __init__(self) -> None:
        if hasattr(select, "epoll"):
            self.impl: Any = select.epoll()
            self.scale = 1.0
            self.mask = select.EPOLLIN
        else:
            self.impl = select.poll()
            self.scale = 1000.0
            self.mask = select.POLLIN

    def register(self, fd: int) -> None:
        self.impl.register(fd, self.mask)

    def poll(self, timeout: float) -> list[tuple[int, int]]:
        return self.impl.poll(timeout * self.scale)  # type: ignore[no-any-return]

    def close(self) -> None:
        if hasattr(self.impl, "close"):
            self.impl.close()


def send(c: Conn, data: bytes) -> None:
    """Write a request on a non-blocking socket; a few hundred bytes always fit an idle socket's buffer."""
    if c.sock.send(data) != len(data):
        raise BenchError(f"{c.name}: a request did not fit the socket buffer")


def run_conc(conns: list[Conn], count: int, deadline: float = float("inf")) -> int:
    """``count`` requests over all ``conns``, each sending its next request when its answer is in.

    No new request is sent once ``time.perf_counter()`` passes ``deadline``;
    returns the number answered.
    """
    by_fd = {c.fd: c for c in conns}
    clock = time.perf_counter
    done = 0
    poller = _Poller()
    try:
        for c in conns:
            c.sock.setblocking(False)
            poller.register(c.fd)
        to_send = count
        pending = 0
        for c in conns:
            if not to_send:
                break
            c.expect = c.take()
            send(c, c.call(c.expect))
            to_send -= 1
            pending += 1
        while pending:
            events = poller.poll(TIMEOUT)
            if not events:
                raise BenchError(f"{conns[0].name}: no answer within {TIMEOUT}s ({pending} pending)")
            for fd, _ in events:
                c = by_fd[fd]
                chunk = c.sock.recv(65536)
                if not chunk:
                    raise BenchError(f"{c.name}: connection closed")
                buf = c.buf + chunk
                got = parse_response(buf, 0)
                if got is None:
                    c.buf = buf
                    continue
                status, head, body, end = got
                if end != len(buf):
                    raise BenchError(f"{c.name}: bytes after the response to {c.expect}: {buf[end:]!r}")
                c.buf = b""
                check_echo(c.name, status, head, body, c.expect)
                pending -= 1
                done += 1
                if to_send and clock() < deadline:
                    c.expect = c.take()
                    send(c, c.call(c.expect))
                    to_send -= 1
                    pending += 1
    finally:
        poller.close()
        now = time.monotonic()
        for c in conns:
            c.sock.settimeout(TIMEOUT)
            c.last_used = now
    return done


# ---------------------------------------------------------------------------
# Blocks, rounds, rows
# ---------------------------------------------------------------------------


def timed_block(
    server: Server, conns: list[Conn], mode: str, count: int, max_seconds: float
) -> dict[str, Any]:
    for c in conns if mode == "conc" else conns[:1]:
        c.revive()
    cpu0 = server.cpu_seconds()
    client0 = time.process_time()
    start = time.perf_counter()
    planned = count
    if mode == "seq":
        count = run_seq(conns[0], count, start + max_seconds)
    else:
        count = run_conc(conns, count, start + max_seconds)
    elapsed = time.perf_counter() - start
    client = time.process_time() - client0
    cpu1 = server.cpu_seconds()
    cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
    return {
        "requests": count,
        "cut_short": count < planned,
        "seconds": elapsed,
        "requests_per_s": count / elapsed,
        "server_cpu_s": cpu,
        "client_cpu_s": client,
    }


def summarise(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [b["requests_per_s"] for b in blocks]
    count = sum(b["requests"] for b in blocks)
    wall = sum(b["seconds"] for b in blocks)
    cpus = [b["server_cpu_s"] for b in blocks]
    server_cpu = None if any(c is None for c in cpus) else sum(cpus)
    client_cpu = sum(b["client_cpu_s"] for b in blocks)
    return {
        "median_requests_per_s": statistics.median(rates),
        "blocks_cut_short": sum(b["cut_short"] for b in blocks),
        "min_requests_per_s": min(rates),
        "max_requests_per_s": max(rates),
        "server_cpu_us_per_request": None if server_cpu is None else 1e6 * server_cpu / count,
        "server_cpu_share": None if server_cpu is None else server_cpu / wall,
        "client_cpu_us_per_request": 1e6 * client_cpu / count,
        "client_cpu_share": client_cpu / wall,
        "blocks": blocks,
    }


def open_conns(server: Server, era: str, count: int) -> tuple[list[Conn], dict[str, Any] | None]:
    conns: list[Conn] = []
    info = None
    try:
        for _ in range(count):
            conns.append(Conn(server, era))
            info = conns[-1].handshake() or info
    except BaseException:
        for c in conns:
            c.close()
        raise
    return conns, info


def bench_driver(loop: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    servers = start_servers(loop, args)
    rows: list[dict[str, Any]] = []
    try:
        for era in args.era_list:
            conns: dict[str, list[Conn]] = {}
            try:
                for side, server in servers.items():
                    conns[side], _ = open_conns(server, era, args.concurrency)
                for side, server in servers.items():  # warm-up: imports, caches, the first of everything
                    for mode in MODES:
                        timed_block(server, conns[side], mode, args.warmup, args.max_block_seconds)
                for mode in MODES:
                    per_block = max(
                        1, (args.requests if mode == "conc" else args.seq_requests) // args.rounds
                    )
                    blocks: dict[str, list[dict[str, Any]]] = {"mcpx": [], "sdk": []}
                    for r in range(args.rounds):
                        order = ("mcpx", "sdk") if r % 2 == 0 else ("sdk", "mcpx")
                        for side in order:
                            block = timed_block(
                                servers[side], conns[side], mode, per_block, args.max_block_seconds
                            )
                            blocks[side].append(block)
                    m, s = summarise(blocks["mcpx"]), summarise(blocks["sdk"])
                    pairs = zip(blocks["mcpx"], blocks["sdk"], strict=True)
                    paired = [a["requests_per_s"] / b["requests_per_s"] for a, b in pairs]
                    rows.append(
                        {
                            "driver": loop,
                            "mode": mode,
                            "connections": 1 if mode == "seq" else args.concurrency,
                            "era": era,
                            "mcpx": m,
                            "sdk": s,
                            "ratio": m["median_requests_per_s"] / s["median_requests_per_s"],
                            "paired_ratio_median": statistics.median(paired),
                            "request_bytes": {side: c[0].request_bytes for side, c in conns.items()},
                            "response_bytes": {side: c[0].response_bytes for side, c in conns.items()},
                            "sample_answer": {side: c[0].sample for side, c in conns.items()},
                            "reconnects_so_far": {
                                side: sum(x.reconnects for x in c) for side, c in conns.items()
                            },
                        }
                    )
                    print_row(rows[-1], flush=True)
            finally:
                for side_conns in conns.values():
                    for c in side_conns:
                        c.close()
    finally:
        for side, server in servers.items():
            for row in rows:
                row.setdefault("server_stderr_bytes", {})[side] = server.stderr_bytes()
            code = server.close()
            if code not in (0, None, -signal.SIGINT):  # uvicorn re-raises the SIGINT it caught
                print(f"warning: {server.name} exited with status {code}", file=sys.stderr)
    return rows


HEADER = (
    f"{'server/driver':<18} {'mode':<7} {'era':<24} {'mcpx req/s':>10} {'SDK req/s':>9} {'ratio':>6}"
    f" {'µs CPU mcpx':>11} {'SDK':>5} {'client CPU':>10}"
)


def print_row(row: dict[str, Any], *, flush: bool = False) -> None:
    mode = "seq" if row["mode"] == "seq" else f"{row['connections']} conn"

    def cpu(side: str) -> str:
        value = row[side]["server_cpu_us_per_request"]
        return "n/a" if value is None else f"{value:.0f}"

    def rate(side: str) -> str:
        mark = "*" if row[side]["blocks_cut_short"] else ""
        return f"{row[side]['median_requests_per_s']:,.0f}{mark}"

    client = f"{100 * row['mcpx']['client_cpu_share']:.0f}/{100 * row['sdk']['client_cpu_share']:.0f}%"
    print(
        f"{'mcpx ' + row['driver'] + ' vs SDK':<18} {mode:<7} {ERA_LABEL[row['era']]:<24}"
        f" {rate('mcpx'):>10} {rate('sdk'):>9}"
        f" {row['ratio']:>6.2f} {cpu('mcpx'):>11} {cpu('sdk'):>5} {client:>10}",
        flush=flush,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(
            "mcpx demo --http vs the official MCP Python SDK over Streamable HTTP (keep-alive HTTP/1.1): "
            "tools/call echo requests per second, sequential and concurrent, both eras, as ratios."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--requests",
        type=int,
        default=1024,
        help="timed requests per server, driver and era in the conc mode",
    )
    parser.add_argument(
        "--seq-requests",
        type=int,
        default=None,
        help="the same for the seq mode (None: half of --requests)",
    )
    parser.add_argument(
        "--max-block-seconds",
        type=float,
        default=2.5,
        help="a block stops early after this long (its rate still counts): bounds the run if a server stalls",
    )
    parser.add_argument("--concurrency", type=int, default=32, help="keep-alive connections in the conc mode")
    parser.add_argument(
        "--rounds", type=int, default=4, help="alternating blocks the requests are split into"
    )
    parser.add_argument(
        "--warmup", type=int, default=100, help="untimed requests per server, era and mode first"
    )
    parser.add_argument("--loops", default=",".join(LOOPS), help="comma-separated mcpx drivers to measure")
    parser.add_argument("--eras", default=",".join(ERAS), help="comma-separated protocol revisions to speak")
    parser.add_argument(
        "--sdk-json", action="store_true", help="run the SDK with json_response=True (its default is SSE)"
    )
    parser.add_argument(
        "--sdk-log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
        help="the SDK server's log level (INFO is MCPServer's default)",
    )
    parser.add_argument("--no-json", action="store_true", help="do not write benchmarks/results/*.json")
    args = parser.parse_args(argv)
    loops = [x.strip() for x in args.loops.split(",") if x.strip()]
    for loop in loops:
        if loop not in LOOPS:
            parser.error(f"unknown driver {loop!r}; choose from {', '.join(LOOPS)}")
    args.era_list = [x.strip() for x in args.eras.split(",") if x.strip()]
    for era in args.era_list:
        if era not in ERAS:
            parser.error(f"unknown era {era!r}; choose from {', '.join(ERAS)}")
    if args.seq_requests is None:
        args.seq_requests = max(args.rounds, args.requests // 2)
    if min(args.requests, args.seq_requests) < args.rounds or args.concurrency < 1 or args.warmup < 1:
        parser.error("--requests must be at least --rounds; --concurrency and --warmup at least 1")

    facts = machine()
    print(
        f"Streamable HTTP tools/call echo over keep-alive HTTP/1.1; per server, driver and era: "
        f"{args.seq_requests} sequential and {args.requests} concurrent requests "
        f"({args.concurrency} connections) in {args.rounds} alternating blocks; {args.warmup} warm-up requests; "
        f"SDK {'json_response=True' if args.sdk_json else 'defaults (SSE answers)'}, log level {args.sdk_log_level}"
    )
    print(HEADER)
    print("-" * len(HEADER))
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for loop in loops:
        rows.extend(bench_driver(loop, args))
    total = time.perf_counter() - started
    print("req/s: median over the blocks; ratio = mcpx/SDK (> 1: mcpx is faster);")
    print("µs CPU: server process CPU time (user+system, all threads) per request;")
    print("client CPU: the benchmark client's CPU time / wall time while timing mcpx/SDK (100% = one core).")
    if any(r[side]["blocks_cut_short"] for r in rows for side in ("mcpx", "sdk")):
        print(f"*: some blocks hit --max-block-seconds ({args.max_block_seconds}s) and were cut short.")
    for era in args.era_list:
        row = next((r for r in rows if r["era"] == era), None)
        if row:
            print(
                f"bytes per exchange at {era}: mcpx {row['request_bytes']['mcpx']} up / "
                f"{row['response_bytes']['mcpx']} down, SDK {row['request_bytes']['sdk']} up / "
                f"{row['response_bytes']['sdk']} down"
            )
    print(f"took {total:.0f}s; load average now {load_average()}")
    if not args.no_json:
        path = write_results(
            "http",
            {
                "benchmark": "bench_http",
                "date": now_iso(),
                "machine": facts,
                "settings": {
                    "requests": args.requests,
                    "seq_requests": args.seq_requests,
                    "concurrency": args.concurrency,
                    "rounds": args.rounds,
                    "warmup": args.warmup,
                    "max_block_seconds": args.max_block_seconds,
                    "eras": args.era_list,
                    "text": TEXT,
                    "mcpx_command": mcpx_command("<driver>"),
                    "sdk_command": sdk_command(args),
                },
                "loadavg_at_end": load_average(),
                "seconds": total,
                "results": rows,
            },
        )
        print(f"wrote {path.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
