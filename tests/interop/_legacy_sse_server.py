"""A small 2024-11-05 HTTP+SSE server and nothing else, on loopback, for the client and probe tests.

MCP 2024-11-05, Transports → "HTTP with SSE", as the servers of that time
served it: ``GET /sse`` opens the stream, whose first event, ``endpoint``,
names ``/messages?session_id=…``; a POST there gets ``202 Accepted`` and its
answer goes down the stream.  Everything else — a POST to ``/sse``, a GET of
``/mcp`` — is an HTML 404, as a web framework's default page would be, so the
era probe finds no Streamable HTTP here.  ``not_mcp=True`` makes every path
that HTML 404 (a web server that is not MCP at all); ``endpoint=`` replaces
the endpoint event's data (e.g. a URL on another origin).

Written with the standard library (threads, blocking sockets) so it shares
nothing with the mcpx code under test.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import select
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

NOT_FOUND = b"<!doctype html><html><body><h1>404 Not Found</h1></body></html>"


def _peer_closed(sock: socket.socket) -> bool:
    """The client closed its side (a quiet stream notices only by looking)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class LegacySseServer:
    def __init__(self, *, not_mcp: bool = False, endpoint: str | None = None) -> None:
        self.not_mcp = not_mcp
        self.endpoint = endpoint
        self.sessions: dict[str, queue.Queue[bytes | None]] = {}
        self.seen: list[dict[str, Any]] = []  # every message POSTed, in order
        self.authorization: list[tuple[str, str | None]] = []  # (method, Authorization) of every request
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._ids = itertools.count(1)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner.authorization.append(("GET", self.headers.get("Authorization")))
                if owner.not_mcp or urlsplit(self.path).path != "/sse":
                    self._not_found()
                    return
                owner._stream(self)

            def do_POST(self) -> None:
                owner.authorization.append(("POST", self.headers.get("Authorization")))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                parts = urlsplit(self.path)
                if owner.not_mcp or parts.path != "/messages":
                    self._not_found()
                    return
                session = (parse_qs(parts.query).get("session_id") or [""])[0]
                with owner.lock:
                    outbox = owner.sessions.get(session)
                if outbox is None:
                    self._plain(404, b"Could not find session", "text/plain")
                    return
                self._plain(202, b"Accepted", "text/plain")
                owner._handle(orjson.loads(body), outbox)

            def do_DELETE(self) -> None:
                self._not_found()

            def _not_found(self) -> None:
                self._plain(404, NOT_FOUND, "text/html")

            def _plain(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> LegacySseServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        with self.lock:
            for outbox in self.sessions.values():
                outbox.put(None)
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    @property
    def open_sessions(self) -> int:
        with self.lock:
            return len(self.sessions)

    # -- the protocol -----------------------------------------------------------------

    def _stream(self, handler: BaseHTTPRequestHandler) -> None:
        session = f"s{next(self._ids)}"
        outbox: queue.Queue[bytes | None] = queue.Queue()
        with self.lock:
            self.sessions[session] = outbox
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")  # the body lasts until the connection closes
        handler.end_headers()
        endpoint = self.endpoint if self.endpoint is not None else f"/messages?session_id={session}"
        try:
            handler.wfile.write(b"event: endpoint\r\ndata: " + endpoint.encode() + b"\r\n\r\n")
            handler.wfile.flush()
            while not self.stopping.is_set():
                try:
                    item = outbox.get(timeout=0.05)
                except queue.Empty:
                    if _peer_closed(handler.connection):
                        break
                    continue
                if item is None:
                    break
                handler.wfile.write(b"event: message\r\ndata: " + item + b"\r\n\r\n")
                handler.wfile.flush()
        except OSError:
            pass  # the client went away: its session ends
        finally:
            with self.lock:
                self.sessions.pop(session, None)
            handler.close_connection = True

    def _handle(self, message: Any, outbox: queue.Queue[bytes | None]) -> None:
        self.seen.append(message)
        if not isinstance(message, dict) or "method" not in message or "id" not in message:
            return  # a notification or a response: nothing to answer
        method, rid = message["method"], message["id"]
        params = message.get("params") or {}
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
        if method == "initialize":
            reply["result"] = {
                "protocolVersion": "2024-11-05",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "legacy-sse-only", "version": "1.0"},
            }
        elif method == "ping":
            reply["result"] = {}
        elif method == "tools/list":
            schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
            reply["result"] = {"tools": [{"name": "echo", "description": "Echo", "inputSchema": schema}]}
        elif method == "tools/call" and params.get("name") == "echo":
            text = str((params.get("arguments") or {}).get("text", ""))
            token = (params.get("_meta") or {}).get("progressToken")
            if token is not None:
                progress = {"progressToken": token, "progress": 1, "total": 1}
                outbox.put(
                    orjson.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
                )
            reply["result"] = {"content": [{"type": "text", "text": text}]}
        else:
            reply["error"] = {"code": -32601, "message": f"Method not found: {method}"}
        with contextlib.suppress(Exception):
            outbox.put(orjson.dumps(reply))
