"""The HTTP transport's guard rails, checked byte for byte on every loop.

`mcpx demo --http 0` is spawned once per loop (and per xdist worker) with a
small body cap, a short request timeout, one extra allowed Origin and one extra
allowed Host, and then hit with raw requests over plain sockets; the loop is
the last part of every test id.

* ``test_origin``: a foreign ``Origin`` is refused with 403 on every route;
  loopback origins, the configured one and a missing ``Origin`` get the
  route's ordinary answer.
* ``test_origin_refused_first``: a foreign ``Origin`` wins over every other
  reason to refuse, and nothing (a session, a stream) comes of the request.
* ``test_host`` / ``test_host_missing`` / ``test_host_duplicate``: ``Host``
  must name this server (DNS rebinding).
* ``test_body_limit`` / ``test_header_limit``: at the cap and one past it; a
  refusal closes the connection and the next connection is served.
* ``test_slow_client`` / ``test_idle_connection``: the request timeout.
* ``test_content_type``: POST bodies must be JSON.
* ``test_refusal_says_what_to_do``: each kind of refusal names the limit or
  the setting involved.
* ``test_malformed_origin_or_target``: values a URL parser rejects are refused
  like any other bad request, and the server lives on.
* ``test_wildcard_bind``: bound to 0.0.0.0, the wildcard is still no Origin
  or Host of ours (the rule is in the core, so one loop suffices).

Every refusal must carry a JSON-RPC error object, and the server must never
print a Python traceback: its stderr is kept in a file, which the ``server``
fixture reads after each test (a server that died or printed one is replaced,
so one failure does not spill into the tests after it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import pytest

from tests.conformance.http_peer import stop_http_server
from tests.conformance.peer import LOOPS

pytestmark = pytest.mark.timeout(60)

MAX_BODY = 2048
REQUEST_TIMEOUT = 1.5
HEADER_CAP = 16 * 1024
ALLOWED_ORIGIN = "https://app.example"
ALLOWED_HOST = "mcp.internal"
SERVER_ARGS = (
    "--max-body",
    str(MAX_BODY),
    "--request-timeout",
    str(REQUEST_TIMEOUT),
    "--allowed-origin",
    ALLOWED_ORIGIN,
    "--allowed-host",
    ALLOWED_HOST,
)

PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
MODERN_LIST = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":'
    b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    b'"io.modelcontextprotocol/clientCapabilities":{}}}}'
)
INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{},"clientInfo":{"name":"security-test","version":"0"}}}'
)
JSON_HEADERS = (("content-type", "application/json"), ("accept", "application/json, text/event-stream"))
MODERN_HEADERS = (*JSON_HEADERS, ("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list"))

# What each kind of refusal's message must contain for it to tell the user what to do.
HINTS = {
    "origin": r"(?i)origin .*allowed.?origins?",
    "host": r"(?i)host .*allowed.?hosts?",
    413: rf"(?i)\b{MAX_BODY}\b|max.?body",
    431: r"(?i)\b16384\b|\b16 ?ki?b\b|max.?header",
    408: r"(?i)\b1\.5 ?s|request.?timeout",
    415: r"(?i)application/json",
}


# --------------------------------------------------------------------------
# The server under test (stderr kept in a file, so tracebacks can be seen)
# --------------------------------------------------------------------------


@dataclass
class Server:
    loop: str
    proc: subprocess.Popen[bytes]  # its stderr a non-blocking pipe, copied into the file as it comes
    port: int
    stderr_path: str
    sink: BinaryIO  # stderr_path, open for appending until stderr ends
    checked: bool = False  # the running test checks the server's health itself
    broken: bool = False  # a test failed on the process itself: replace it before further use
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take_stderr(self) -> bool:
        """Move what mcpx has written to stderr so far into the file; False once its end is in."""
        assert self.proc.stderr is not None
        with self.lock:
            while not self.sink.closed:
                try:
                    data = os.read(self.proc.stderr.fileno(), 65536)
                except BlockingIOError:
                    break
                if not data:
                    self.sink.close()
                    break
                self.sink.write(data)
                self.sink.flush()
            return not self.sink.closed

    def copy_stderr(self) -> None:
        """The copying thread: stderr never fills up, however long nobody reads the file."""
        assert self.proc.stderr is not None
        while self.take_stderr():
            select.select([self.proc.stderr], [], [])  # until mcpx writes to stderr again (or ends)
        self.proc.stderr.close()

    def stderr(self, since: int = 0) -> str:
        self.take_stderr()  # everything mcpx has written by now, not only what was copied
        with open(self.stderr_path, "rb") as f:
            f.seek(since)
            return f.read().decode(errors="replace")

    def stderr_size(self) -> int:
        self.take_stderr()
        with open(self.stderr_path, "rb") as f:
            return f.seek(0, 2)

    def condemn(self) -> None:
        """Reported broken by a test: stop it now (a crashing server can burn CPU for seconds)."""
        self.broken = True
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def assert_healthy(self, since: int = 0) -> None:
        text = self.stderr(since)
        alive = self.proc.poll() is None
        if "Traceback" in text or not alive:
            self.condemn()
        assert "Traceback" not in text, f"mcpx --loop {self.loop} printed a traceback:\n{text[-4000:]}"
        assert alive, f"mcpx --loop {self.loop} died (exit {self.proc.returncode}):\n{self.stderr()[-4000:]}"


def spawn(loop: str, *args: str) -> Server:
    """`mcpx demo --http 0` like ``start_http_server``, but stderr is kept in a file we can read."""
    fd, path = tempfile.mkstemp(prefix=f"mcpx-http-security-{loop}-", suffix=".stderr")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "demo", "--loop", loop, "--http", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    os.set_blocking(proc.stderr.fileno(), False)
    sink = open(fd, "ab")  # noqa: SIM115 - closed in take_stderr(), once stderr has ended
    server = Server(loop, proc, 0, path, sink)
    deadline = time.monotonic() + 20
    while True:
        match = re.search(r"serving MCP at http://\S+?:(\d+)/mcp", server.stderr())
        if match:
            server.port = int(match.group(1))
            threading.Thread(target=server.copy_stderr, daemon=True).start()
            return server
        left = deadline - time.monotonic()
        if server.sink.closed or left <= 0:
            break
        select.select([proc.stderr], [], [], left)  # until mcpx writes to stderr again (or ends)
    proc.kill()
    proc.wait()
    said = server.stderr()
    proc.stderr.close()
    raise AssertionError(f"mcpx demo --http did not start:\n{said}")


def shut_down(server: Server) -> str | None:
    """Stop with SIGINT (``stop_http_server``); what went wrong, if anything."""
    try:
        status = stop_http_server(server.proc)
    except AssertionError as exc:
        status = str(exc)
    text = server.stderr()
    with contextlib.suppress(OSError):
        os.unlink(server.stderr_path)
    if "Traceback" in text:
        return f"mcpx --loop {server.loop} printed a traceback:\n{text[-4000:]}"
    if status != 0:
        return f"mcpx --loop {server.loop} did not exit 0 on SIGINT ({status}):\n{text[-4000:]}"
    return None


class Servers:
    """This module's servers, one per command line, started on first use and replaced if broken.

    A plain cache rather than a parametrized module fixture: pytest-xdist hands
    tests of one loop to either worker in any order, and a parametrized fixture
    would be torn down and started again at every switch.
    """

    def __init__(self) -> None:
        self.running: dict[tuple[str, ...], Server] = {}
        self.broken: list[Server] = []

    def get(self, loop: str, *args: str) -> Server:
        key = (loop, *args)
        server = self.running.get(key)
        if server is not None and (server.broken or server.proc.poll() is not None):
            server.condemn()  # the test that broke it has failed for it already
            self.broken.append(server)
            server = None
        if server is None:
            server = self.running[key] = spawn(loop, *args)
        return server

    def close(self) -> None:
        """Stop every server at once; each must exit 0 without having printed a traceback."""
        healthy = [s for s in self.running.values() if not s.broken]
        for server in [*self.broken, *(s for s in self.running.values() if s.broken)]:
            with contextlib.suppress(OSError):
                os.unlink(server.stderr_path)
        problems: list[str | None] = [None] * len(healthy)

        def stop(i: int) -> None:
            problems[i] = shut_down(healthy[i])

        threads = [threading.Thread(target=stop, args=(i,)) for i in range(len(healthy))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not any(problems), "\n".join(p for p in problems if p)


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    pool = Servers()
    yield pool
    pool.close()


@pytest.fixture
def server(servers: Servers, loop: str) -> Iterator[Server]:
    """The loop's shared server; after the test it must still run and have printed no traceback."""
    shared = servers.get(loop, *SERVER_ARGS)
    mark = shared.stderr_size()
    shared.checked = False
    yield shared
    if not shared.checked:
        shared.assert_healthy(mark)


# The outermost decorator of every test on the shared servers, so the loop ends each test id.
per_loop = pytest.mark.parametrize("loop", LOOPS)


# --------------------------------------------------------------------------
# Raw HTTP
# --------------------------------------------------------------------------


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    head: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Conn:
    """One TCP connection, read and written as raw bytes."""

    port: int
    timeout: float = 5.0
    sock: socket.socket = field(init=False)
    buf: bytes = b""
    eof: bool = False

    def __post_init__(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> bool:
        """False when the server has already gone (reset or broken pipe)."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    def fill(self) -> bool:
        if self.eof:
            return False
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""  # what was received before the reset stays readable, and has been read
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self.fill():
                raise AssertionError(f"connection closed after {len(self.buf)} of {n} bytes: {self.buf!r}")
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            if not self.fill():
                raise AssertionError(f"connection closed mid-line: {self.buf!r}")
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def response(self, *, stream: bool = False) -> Response:
        """Read one response; an event stream's body is left unread when ``stream``."""
        while b"\r\n\r\n" not in self.buf:
            if not self.fill():
                raise AssertionError(f"no complete response, got {self.buf!r}")
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        match = re.fullmatch(r"HTTP/1\.[01] (\d{3})(?: .*)?", lines[0])
        assert match, f"bad status line {lines[0]!r}"
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
        resp = Response(int(match.group(1)), headers, head=head)
        if stream and headers.get("content-type", "").startswith("text/event-stream"):
            return resp
        if "content-length" in headers:
            resp.body = self._take(int(headers["content-length"]))
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = b""
            while size := int(self._line().split(b";")[0], 16):
                body += self._take(size)
                self._take(2)
            while self._line():  # trailers
                pass
            resp.body = body
        elif resp.status not in (204, 304) and not 100 <= resp.status < 200:
            while self.fill():
                pass
            resp.body, self.buf = self.buf, b""
        return resp

    def read_until(self, marker: bytes, timeout: float = 5.0) -> bytes:
        deadline = time.monotonic() + timeout
        while marker not in self.buf:
            assert time.monotonic() < deadline, f"{marker!r} did not arrive; got {self.buf!r}"
            if not self.fill():
                raise AssertionError(f"connection closed before {marker!r}; got {self.buf!r}")
        return self.buf

    def wait_closed(self, timeout: float) -> tuple[bool, bytes]:
        """Wait up to ``timeout`` for the server to close; (closed, any bytes that came first)."""
        deadline = time.monotonic() + timeout
        start = len(self.buf)
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                return False, self.buf[start:]
            self.sock.settimeout(left)
            try:
                self.fill()
            except TimeoutError:
                return False, self.buf[start:]
        return True, self.buf[start:]


def build(
    method: str,
    target: str,
    headers: tuple[tuple[str, str], ...] = (),
    body: bytes | None = None,
    *,
    host: str | None,
    version: str = "1.1",
    chunked: bool = False,
) -> bytes:
    """A request's exact bytes; ``host=None`` sends no Host header at all."""
    lines = [f"{method} {target} HTTP/{version}"]
    if host is not None:
        lines.append(f"Host: {host}")
    lines += [f"{name}: {value}" for name, value in headers]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    elif body is not None:
        lines.append(f"Content-Length: {len(body)}")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if body is None:
        return raw
    if not chunked:
        return raw + body
    pieces = [body[i : i + 1000] for i in range(0, len(body), 1000)]
    return raw + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def exchange(port: int, raw: bytes, *, stream: bool = False) -> tuple[Conn, Response]:
    conn = Conn(port)
    conn.send(raw)
    return conn, conn.response(stream=stream)


def local_host(server: Server) -> str:
    return f"127.0.0.1:{server.port}"


def ping(server: Server, headers: tuple[tuple[str, str], ...] = JSON_HEADERS, body: bytes = PING) -> bytes:
    return build("POST", "/mcp", headers, body, host=local_host(server))


def assert_served_ping(resp: Response, what: str = "ping") -> None:
    assert resp.status == 200, f"{what}: expected 200, got {resp.status}: {resp.head!r} {resp.body!r}"
    assert resp.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}, resp.body


def assert_new_connection_served(server: Server) -> None:
    conn, resp = exchange(server.port, ping(server))
    conn.close()
    assert_served_ping(resp, "a new connection after the refusal")


def assert_jsonrpc_error(resp: Response, status: int | None = None) -> dict[str, Any]:
    """The refusal's body is a JSON-RPC error object; returns its ``error``."""
    if status is not None:
        assert resp.status == status, f"expected {status}, got {resp.status}: {resp.head!r} {resp.body!r}"
    assert resp.headers.get("content-type", "").split(";")[0].strip() == "application/json", resp.head
    try:
        body = resp.json()
    except ValueError:
        raise AssertionError(f"the {resp.status} body is not JSON: {resp.body!r}") from None
    assert isinstance(body, dict), body
    assert set(body) == {"jsonrpc", "id", "error"}, body
    assert body["jsonrpc"] == "2.0", body
    assert body["id"] is None or type(body["id"]) in (int, str), body
    error = body["error"]
    assert isinstance(error, dict), body
    assert set(error) <= {"code", "message", "data"}, body
    assert type(error["code"]) is int, body
    assert isinstance(error["message"], str), body
    assert error["message"].strip(), body
    return error


def assert_hint(error: dict[str, Any], kind: str | int) -> None:
    """Checked last: the message says what to do (names the setting or the limit)."""
    assert re.search(HINTS[kind], error["message"]), (
        f"the {kind} refusal's message does not tell the user what to do "
        f"(wanted /{HINTS[kind]}/): {error['message']!r}"
    )


# --------------------------------------------------------------------------
# 1. Origin × every route
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    target: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    status: int = 200  # its ordinary answer, with a good Origin


ROUTES = (
    Route("POST /mcp", "POST", "/mcp", JSON_HEADERS, PING),
    Route("POST /mcp 2026-07-28", "POST", "/mcp", MODERN_HEADERS, MODERN_LIST),
    Route("GET /mcp", "GET", "/mcp", (("accept", "text/event-stream"),), status=405),
    Route("DELETE /mcp", "DELETE", "/mcp", status=405),
    Route("GET /sse", "GET", "/sse", (("accept", "text/event-stream"),)),
    Route("POST /messages", "POST", "/messages?session_id=x", JSON_HEADERS, PING, status=404),
    Route("GET /unknown", "GET", "/no/such/path", status=404),
)
FOREIGN_ORIGINS = (
    "http://localhost.evil.com",
    "http://127.0.0.1.evil.com",
    "http://0.0.0.0",
    "http://[::]",
    "null",
    "http://evil.com",
    "https://example.org",
    "https://app.example:8443",  # the allowed origin, another port
    "http://app.example",  # the allowed origin, another scheme
    "http://localhost:abc",  # a port that is no number
    "http://localhost:99999",  # a port out of range
    "http://localhost:",  # an empty port
    "http://localhost:0",
)
LOCAL_ORIGINS = (
    "http://localhost",
    "http://localhost:1234",
    "http://127.0.0.1:99",
    "http://[::1]:5",
    None,
    ALLOWED_ORIGIN,
)
ORIGIN_CASES = [
    pytest.param(route, origin, id=f"{route.name}-{origin or 'no Origin'}")
    for route in ROUTES
    for origin in (*FOREIGN_ORIGINS, *LOCAL_ORIGINS)
]


def assert_ordinary_answer(route: Route, conn: Conn, resp: Response) -> None:
    assert resp.status == route.status, (
        f"{route.name}: expected its ordinary {route.status}, got {resp.status}: {resp.head!r} {resp.body!r}"
    )
    if route.name == "GET /sse":
        assert resp.headers.get("content-type", "").startswith("text/event-stream"), resp.head
        seen = conn.read_until(b"\n\n")
        assert b"event: endpoint" in seen.split(b"\n\n")[0], f"the first event is not endpoint: {seen!r}"
    elif resp.status == 200:
        body = resp.json()
        assert body.get("id") == 1 and "result" in body, body
        if route.name == "POST /mcp 2026-07-28":
            assert isinstance(body["result"].get("tools"), list), body
    else:
        assert_jsonrpc_error(resp, route.status)


@per_loop
@pytest.mark.parametrize(("route", "origin"), ORIGIN_CASES)
def test_origin(server: Server, route: Route, origin: str | None) -> None:
    headers = route.headers if origin is None else (("Origin", origin), *route.headers)
    raw = build(route.method, route.target, headers, route.body, host=local_host(server))
    conn, resp = exchange(server.port, raw, stream=True)
    try:
        if origin in FOREIGN_ORIGINS:
            error = assert_jsonrpc_error(resp, 403)
            assert "mcp-session-id" not in resp.headers, resp.head
            assert origin in error["message"], error
            assert_hint(error, "origin")
        else:
            assert_ordinary_answer(route, conn, resp)
    finally:
        conn.close()


# A foreign Origin wins over every other reason to refuse, and nothing comes of the request.
PRECEDENCE = {
    "text/plain body (else 415)": ("POST", "/mcp", (("content-type", "text/plain"),), PING),
    "invalid JSON (else 400)": ("POST", "/mcp", JSON_HEADERS, b"{not json"),
    "unknown session (else 404)": ("POST", "/mcp", (*JSON_HEADERS, ("mcp-session-id", "nope")), PING),
    "PUT (else 405)": ("PUT", "/mcp", JSON_HEADERS, PING),
    "2026-07-28 header mismatch (else 400)": (
        "POST",
        "/mcp",
        (*JSON_HEADERS, ("mcp-protocol-version", "2026-07-28"), ("mcp-method", "ping")),
        MODERN_LIST,
    ),
    "SSE without text/event-stream (else 406)": ("GET", "/sse", (("accept", "application/json"),), None),
    "initialize (else a new session)": ("POST", "/mcp", JSON_HEADERS, INITIALIZE),
    "SSE stream (else a new session)": ("GET", "/sse", (("accept", "text/event-stream"),), None),
}


@per_loop
@pytest.mark.parametrize("case", list(PRECEDENCE))
def test_origin_refused_first(server: Server, case: str) -> None:
    method, target, headers, body = PRECEDENCE[case]
    raw = build(method, target, (("Origin", "http://evil.com"), *headers), body, host=local_host(server))
    conn, resp = exchange(server.port, raw, stream=True)
    conn.close()
    error = assert_jsonrpc_error(resp, 403)
    assert "mcp-session-id" not in resp.headers, f"a refused request minted a session: {resp.head!r}"
    assert_hint(error, "origin")


# --------------------------------------------------------------------------
# 2. Host
# --------------------------------------------------------------------------

FOREIGN_HOSTS = (
    "localhost.evil.com",
    "127.0.0.1.evil.com",
    "0.0.0.0",
    "[::]",
    "evil.com",
    "evil.com:PORT",
    f"{ALLOWED_HOST}.evil.com:PORT",
)
LOCAL_HOSTS = ("localhost:PORT", "127.0.0.1:PORT", "[::1]:PORT", "LOCALHOST:PORT", f"{ALLOWED_HOST}:PORT")


@per_loop
@pytest.mark.parametrize("host", FOREIGN_HOSTS + LOCAL_HOSTS)
def test_host(server: Server, host: str) -> None:
    value = host.replace("PORT", str(server.port))
    conn, resp = exchange(server.port, build("POST", "/mcp", JSON_HEADERS, PING, host=value))
    conn.close()
    if host in FOREIGN_HOSTS:
        error = assert_jsonrpc_error(resp, 403)
        assert value in error["message"], error
        assert_hint(error, "host")
    else:
        assert_served_ping(resp, f"Host: {value}")


@per_loop
@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_host_missing(server: Server, version: str) -> None:
    # With no Host at all the server cannot tell which name the client used to
    # reach it, so the DNS-rebinding check has nothing to compare; serving it
    # "as local" would make dropping Host a way around that check.  HTTP/1.1
    # makes Host mandatory (RFC 9112 §3.2: 400); HTTP/1.0 has no such rule, so
    # mcpx refuses it itself (403, the same as a Host that is not ours).
    conn, resp = exchange(server.port, build("POST", "/mcp", JSON_HEADERS, PING, host=None, version=version))
    conn.close()
    assert 400 <= resp.status < 500, f"HTTP/{version} without Host was answered {resp.status}: {resp.body!r}"
    error = assert_jsonrpc_error(resp)
    assert "host" in error["message"].lower(), error


@per_loop
def test_host_duplicate(server: Server) -> None:
    # Two Host headers are ambiguous (which one did the DNS-rebinding check see?): 400.
    raw = build("POST", "/mcp", (("Host", "evil.com"), *JSON_HEADERS), PING, host=f"localhost:{server.port}")
    conn, resp = exchange(server.port, raw)
    conn.close()
    assert resp.status == 400, f"two Host headers were answered {resp.status}: {resp.body!r}"
    assert_jsonrpc_error(resp, 400)


BAD_PORTS = ("localhost:abc", "localhost:99999", "localhost:", "localhost:0", "127.0.0.1:-1", "[::1]:x")


@per_loop
@pytest.mark.parametrize("host", BAD_PORTS)
def test_host_with_a_port_that_is_no_port(server: Server, host: str) -> None:
    """The port of a Host must be a number from 1 to 65535 (RFC 9110 §7.2); anything else is 400, naming it."""
    conn, resp = exchange(server.port, build("POST", "/mcp", JSON_HEADERS, PING, host=host))
    conn.close()
    error = assert_jsonrpc_error(resp, 400)
    assert host in error["message"], error


@per_loop
def test_origin_repeated(server: Server) -> None:
    """Two Origin headers (both local): which one would the check have judged?  400, and nothing served."""
    headers = (("Origin", "http://localhost"), ("Origin", "http://127.0.0.1"), *JSON_HEADERS)
    conn, resp = exchange(server.port, build("POST", "/mcp", headers, PING, host=local_host(server)))
    conn.close()
    error = assert_jsonrpc_error(resp, 400)
    assert "Origin" in error["message"], error


# --------------------------------------------------------------------------
# 3. Limits: at the cap and one past it
# --------------------------------------------------------------------------


def padded_ping(size: int) -> bytes:
    """A valid ping of exactly ``size`` bytes (spaces before the closing brace)."""
    body = PING[:-1] + b" " * (size - len(PING)) + b"}"
    assert len(body) == size
    json.loads(body)
    return body


def assert_refused_and_closed(server: Server, conn: Conn, resp: Response, status: int) -> dict[str, Any]:
    error = assert_jsonrpc_error(resp, status)
    assert "close" in resp.headers.get("connection", "").lower(), f"no Connection: close: {resp.head!r}"
    closed, extra = conn.wait_closed(3.0)
    assert closed, "the connection stayed open after the refusal"
    assert extra == b"", f"bytes after the refusal: {extra!r}"
    assert_new_connection_served(server)
    return error


@per_loop
@pytest.mark.parametrize(
    ("size", "chunked"),
    [
        pytest.param(MAX_BODY, False, id="content-length-2048-at-cap"),
        pytest.param(MAX_BODY + 1, False, id="content-length-2049-past-cap"),
        pytest.param(MAX_BODY, True, id="chunked-2048-at-cap"),
        pytest.param(MAX_BODY + 1, True, id="chunked-2049-past-cap"),
    ],
)
def test_body_limit(server: Server, size: int, chunked: bool) -> None:
    raw = build("POST", "/mcp", JSON_HEADERS, padded_ping(size), host=local_host(server), chunked=chunked)
    conn, resp = exchange(server.port, raw)
    try:
        if size <= MAX_BODY:
            assert_served_ping(resp, f"a {size}-byte body")
        else:
            assert_refused_and_closed(server, conn, resp, 413)
    finally:
        conn.close()


def request_with_head_of(server: Server, head_size: int) -> bytes:
    """A ping whose head (request line through the blank line) is exactly ``head_size`` bytes."""
    base = build("POST", "/mcp", JSON_HEADERS, PING, host=local_host(server))
    head_len = base.index(b"\r\n\r\n") + 4
    pad = head_size - head_len - len("x-pad: \r\n")
    raw = build("POST", "/mcp", (*JSON_HEADERS, ("x-pad", "a" * pad)), PING, host=local_host(server))
    assert raw.index(b"\r\n\r\n") + 4 == head_size
    return raw


@per_loop
@pytest.mark.parametrize(
    ("head_size", "pieces"),
    [
        pytest.param(HEADER_CAP - 1, 1, id="16KiB-minus-1-served"),
        pytest.param(HEADER_CAP + 4096, 1, id="20KiB-one-write-431"),
        pytest.param(HEADER_CAP + 4096, 20, id="20KiB-in-1KiB-writes-431"),
        pytest.param(80 * 1024, 1, id="80KiB-one-write-431"),
    ],
)
def test_header_limit(server: Server, head_size: int, pieces: int) -> None:
    raw = request_with_head_of(server, head_size)
    conn = Conn(server.port)
    try:
        step = -(-len(raw) // pieces)
        for i in range(0, len(raw), step):
            if not conn.send(raw[i : i + step]):
                break
            if pieces > 1:
                # Not a wait for anything: the pause is what is tested, a head that arrives
                # spread over time, in pieces the server reads one by one.
                time.sleep(0.01)
        resp = conn.response()
        if head_size <= HEADER_CAP:
            assert_served_ping(resp, f"a {head_size}-byte head")
        else:
            assert_refused_and_closed(server, conn, resp, 431)
    finally:
        conn.close()


# --------------------------------------------------------------------------
# 4. Slow and idle clients
# --------------------------------------------------------------------------


@per_loop
@pytest.mark.parametrize("part", ["headers", "body"])
def test_slow_client(server: Server, part: str) -> None:
    """A trickling client is refused (408) or cut off; a client beside it is served at once."""
    raw = ping(server)
    head_end = raw.index(b"\r\n\r\n") + 4
    start_at = 0 if part == "headers" else head_end
    outcome: dict[str, Any] = {}
    slow = Conn(server.port, timeout=10)
    began = time.monotonic()
    trickling = threading.Event()  # the slow client is mid-request

    def trickle() -> None:
        sent = slow.send(raw[:start_at]) if start_at else True
        i = start_at
        while sent and i < len(raw) and time.monotonic() - began < 8:
            readable, _, _ = select.select([slow.sock], [], [], 0.3 if i > start_at else 0)
            if readable:
                break  # the server answered or closed
            sent = slow.send(raw[i : i + 1])
            i += 1
            trickling.set()
        trickling.set()  # done, a byte sent or not: the assertions below tell which
        outcome["sent"] = i
        closed_quietly = not slow.buf and not slow.fill()
        outcome["elapsed"] = time.monotonic() - began
        if closed_quietly:
            outcome["response"] = None
        else:
            try:
                outcome["response"] = slow.response()
            except AssertionError as exc:
                outcome["error"] = str(exc)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        # Connected first (ahead in the server's accept queue), part of its request sent.
        assert trickling.wait(5), "the slow client never began"
        t0 = time.monotonic()
        conn, resp = exchange(server.port, raw)
        took = time.monotonic() - t0
        conn.close()
        assert_served_ping(resp, "the normal client beside the slow one")
        assert took < 1.0, f"the normal client waited {took:.2f}s behind the slow one"
        thread.join(12)
        assert not thread.is_alive(), "the slow client was never answered nor cut off"
        assert "error" not in outcome, outcome.get("error")
        assert outcome["sent"] < len(raw), "the slow client managed to send the whole request"
        elapsed = outcome["elapsed"]
        assert REQUEST_TIMEOUT - 0.2 <= elapsed <= REQUEST_TIMEOUT + 2.5, (
            f"the slow client was dealt with after {elapsed:.2f}s (timeout {REQUEST_TIMEOUT}s)"
        )
        slow_resp: Response | None = outcome["response"]
        if part == "body":
            # The head arrived whole: the request has begun, so it must be answered 408.
            assert slow_resp is not None, "a request whose body was late was cut off without a 408"
        if slow_resp is not None:
            assert_refused_and_closed(server, slow, slow_resp, 408)
    finally:
        slow.close()
        thread.join(12)


@per_loop
@pytest.mark.parametrize("after", ["a completed exchange", "connecting"])
def test_idle_connection(server: Server, after: str) -> None:
    """An idle connection is closed quietly (no bytes) after about the request timeout."""
    conn = Conn(server.port, timeout=10)
    try:
        if after == "a completed exchange":
            conn.send(ping(server))
            assert_served_ping(conn.response(), "the first request on the connection")
        idle_since = time.monotonic()
        closed, extra = conn.wait_closed(REQUEST_TIMEOUT + 3)
        waited = time.monotonic() - idle_since
        assert closed, f"an idle connection was still open after {waited:.2f}s"
        assert extra == b"", f"an idle connection was sent bytes before closing: {extra!r}"
        assert REQUEST_TIMEOUT - 0.3 <= waited <= REQUEST_TIMEOUT + 2.0, (
            f"closed after {waited:.2f}s idle (timeout {REQUEST_TIMEOUT}s)"
        )
    finally:
        conn.close()


# --------------------------------------------------------------------------
# 5. Content-Type
# --------------------------------------------------------------------------


@per_loop
@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("text/plain", 415),
        ("application/json; charset=utf-8", 200),
        ("Application/JSON", 200),
        (None, 415),
        ("application/jsonp", 415),
        ("application/x-www-form-urlencoded", 415),
    ],
    ids=lambda v: "no Content-Type" if v is None else str(v),
)
def test_content_type(server: Server, content_type: str | None, status: int) -> None:
    headers = (("accept", "application/json, text/event-stream"),)
    if content_type is not None:
        headers = (("content-type", content_type), *headers)
    conn, resp = exchange(server.port, build("POST", "/mcp", headers, PING, host=local_host(server)))
    conn.close()
    if status == 200:
        assert_served_ping(resp, f"Content-Type: {content_type}")
    else:
        error = assert_jsonrpc_error(resp, 415)
        assert_hint(error, 415)


# --------------------------------------------------------------------------
# 6. Each kind of refusal says what to do
# --------------------------------------------------------------------------


def provoke(server: Server, kind: str) -> Response:
    """One refusal of ``kind``, read off the wire."""
    host = local_host(server)
    if kind == "408 request timeout":
        raw = ping(server)
        conn = Conn(server.port, timeout=REQUEST_TIMEOUT + 3)
        conn.send(raw[: raw.index(b"\r\n\r\n") + 5])  # the head and one byte of the body
    else:
        raw = {
            "403 Origin": build(
                "POST", "/mcp", (("Origin", "http://evil.com"), *JSON_HEADERS), PING, host=host
            ),
            "403 Host": build("POST", "/mcp", JSON_HEADERS, PING, host="evil.com"),
            "413 body too large": build("POST", "/mcp", JSON_HEADERS, padded_ping(MAX_BODY + 1), host=host),
            "415 Content-Type": build("POST", "/mcp", (("content-type", "text/plain"),), PING, host=host),
            "431 headers too large": request_with_head_of(server, 80 * 1024),
        }[kind]
        conn = Conn(server.port)
        conn.send(raw)
    try:
        return conn.response()
    finally:
        conn.close()


REFUSAL_HINTS = {
    "403 Origin": "origin",
    "403 Host": "host",
    "413 body too large": 413,
    "415 Content-Type": 415,
    "431 headers too large": 431,
    "408 request timeout": 408,
}


@per_loop
@pytest.mark.parametrize("kind", list(REFUSAL_HINTS))
def test_refusal_says_what_to_do(server: Server, kind: str) -> None:
    """The message names the setting to change or the limit to keep within."""
    resp = provoke(server, kind)
    error = assert_jsonrpc_error(resp, int(kind[:3]))
    assert_hint(error, REFUSAL_HINTS[kind])


# --------------------------------------------------------------------------
# Malformed values a URL parser rejects
# --------------------------------------------------------------------------

MALFORMED = {
    "Origin http://[::1": (("GET", "/mcp", (("Origin", "http://[::1"),)), 403),
    "target http://[::1/mcp": (("GET", "http://[::1/mcp", ()), 400),
}


@per_loop
@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_origin_or_target(server: Server, case: str) -> None:
    """Answered like any bad request; the server neither dies nor prints a traceback."""
    (method, target, headers), status = MALFORMED[case]
    server.checked = True  # the checks below say more than the fixture's would
    mark = server.stderr_size()
    problems: list[str] = []
    conn = Conn(server.port, timeout=3)
    conn.send(build(method, target, headers, host=local_host(server)))
    try:
        resp: Response | None = conn.response()
    except (AssertionError, OSError) as exc:
        resp = None
        problems.append(f"no HTTP answer: {exc}")
    # Our end of the connection, then mcpx's: once mcpx has closed it, it is done with the
    # request, and a crash handling it, if any, has landed.
    try:
        conn.sock.shutdown(socket.SHUT_WR)
        ended, _ = conn.wait_closed(3.0)
    except OSError:
        ended = True  # reset: over all the same
    conn.close()
    if not ended:
        problems.append("the connection stayed open after the client ended it")
    if resp is not None:
        if resp.status != status:
            problems.append(f"answered {resp.status}, not {status}: {resp.body!r}")
        else:
            assert_jsonrpc_error(resp, status)
    if server.proc.poll() is not None:
        problems.append(f"the whole server exited (status {server.proc.returncode})")
    else:
        try:
            assert_new_connection_served(server)
        except (AssertionError, OSError) as exc:
            problems.append(f"a new connection was not served ({exc}): the server is going down")
    text = server.stderr(mark)
    if "Traceback" in text:
        last = [line for line in text.splitlines() if re.match(r"^\W*\w*(Error|Exception)\b", line.strip())]
        problems.append(f"it printed a traceback ({last[-1].strip(' |│') if last else '...'})")
    if problems:
        server.condemn()
    assert not problems, f"{case} on --loop {server.loop}:\n  " + "\n  ".join(problems) + f"\n{text[-3000:]}"


# --------------------------------------------------------------------------
# Bound to the wildcard address (core logic: one loop is enough)
# --------------------------------------------------------------------------


@pytest.fixture
def wildcard(servers: Servers) -> Iterator[Server]:
    server = servers.get("asyncio", "--host", "0.0.0.0")
    mark = server.stderr_size()
    yield server
    server.assert_healthy(mark)


@pytest.mark.parametrize(
    ("header", "value", "refused"),
    [
        pytest.param(header, value, refused, id=f"{header} {value}-{'403' if refused else 'served'}")
        for header, value, refused in (
            ("Origin", "http://0.0.0.0", True),
            ("Origin", "http://0.0.0.0:PORT", True),
            ("Origin", "http://[::]", True),
            ("Host", "0.0.0.0:PORT", True),
            ("Origin", "http://localhost:PORT", False),
            ("Host", "localhost:PORT", False),
        )
    ],
)
def test_wildcard_bind(wildcard: Server, header: str, value: str, refused: bool) -> None:
    value = value.replace("PORT", str(wildcard.port))
    host = value if header == "Host" else local_host(wildcard)
    extra = (("Origin", value),) if header == "Origin" else ()
    conn, resp = exchange(wildcard.port, build("POST", "/mcp", (*extra, *JSON_HEADERS), PING, host=host))
    conn.close()
    if refused:
        error = assert_jsonrpc_error(resp, 403)
        assert_hint(error, "origin" if header == "Origin" else "host")
    else:
        assert_served_ping(resp, f"{header}: {value}")
