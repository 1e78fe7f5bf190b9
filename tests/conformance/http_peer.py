"""An MCP host over HTTP for `mcpx demo --http`, with the same face as ``StdioPeer``.

Three HTTP shapes, chosen by the revision spoken (and a ``mode``):

* ``session`` — Streamable HTTP with a legacy session (``initialize`` mints
  ``Mcp-Session-Id``); 2025-03-26, 2025-06-18, 2025-11-25.
* ``sessionless`` — legacy POSTs outside any session, judged by their
  ``MCP-Protocol-Version`` header.
* ``modern`` — 2026-07-28 POSTs with ``MCP-Protocol-Version``, ``Mcp-Method``
  and ``Mcp-Name``.
* ``sse`` — the 2024-11-05 HTTP+SSE transport: a GET stream, POSTs to the
  endpoint it names.

Each POST is answered on its own thread; every frame it yields (a JSON body or
the events of an event stream) goes onto one queue, checked by the strict
schema sweep, so the tests read ``recv()``/``response()`` exactly as on stdio.
Raw HTTP details of the last POST (status, headers) are kept for tests that
check them.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import orjson

from tests.conformance.peer import (
    CLIENT_INFO,
    INTRODUCED,
    LEGACY,
    MODERN,
    at_least,
    complete_rounds,
    modern_meta,
)
from tests.conformance.sweep import SWEEP

NAME_PARAM = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


def start_http_server(loop: str, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """Spawn `mcpx demo --http 0` and return it with its MCP URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "demo", "--loop", loop, "--http", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 20
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline().decode()
        lines.append(line)
        match = re.search(r"serving MCP at (http://\S+)", line)
        if match:
            threading.Thread(target=_drain, args=(proc.stderr,), daemon=True).start()
            return proc, match.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("mcpx demo --http did not start:\n" + "".join(lines))


def _drain(stream: Any) -> None:
    for _ in stream:
        pass


def stop_http_server(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("mcpx demo --http did not stop on SIGINT") from None
    return proc.returncode


def read_sse(response: http.client.HTTPResponse) -> Any:
    """Yield (event, id, data) from an event stream until it ends (a small, separate parser)."""
    event, event_id, data = "message", None, []
    while True:
        if response.fp is None:
            return
        raw = response.readline()  # decodes chunked transfer-encoding
        if not raw:
            return
        line = raw.decode().rstrip("\r\n")
        if line == "":
            if data or event_id is not None:
                yield event, event_id, "\n".join(data)
            event, event_id, data = "message", None, []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
            elif name == "id":
                event_id = value


class HttpPeer:
    """A host speaking to `mcpx demo --http` over one of its HTTP shapes."""

    def __init__(self, loop: str, *args: str, mode: str | None = None) -> None:
        self.loop = loop
        self.proc, self.url = start_http_server(loop, *args)
        parts = urlsplit(self.url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path
        self.mode = mode
        self.revision = "2025-03-26"
        self.modern = False
        self.session_id: str | None = None
        self.sse_endpoint: str | None = None
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.notifications: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []
        self.statuses: dict[Any, int] = {}
        self.headers: dict[Any, dict[str, str]] = {}
        self.event_ids: dict[Any, list[str]] = {}
        self._sent: dict[Any, tuple[str, str]] = {}
        self._ids = itertools.count(1)
        self.answer: Any = None  # callable(method, params) -> result, for the server's questions
        self.questions: list[dict[str, Any]] = []
        self._threads: list[threading.Thread] = []
        self._connections: dict[Any, http.client.HTTPConnection] = {}
        self._written: dict[Any, threading.Event] = {}  # set once a POST's request is on the wire
        self._headed: dict[Any, threading.Event] = {}  # set once its response's head has arrived
        self._cancelled: set[Any] = set()
        self._sse_conn: http.client.HTTPConnection | None = None

    # -- HTTP plumbing ---------------------------------------------------------

    def connection(self, timeout: float = 30.0) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def raw(
        self,
        method: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        path: str | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One plain HTTP exchange, for tests of the transport itself."""
        conn = self.connection()
        try:
            conn.request(method, path or self.path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def _base_headers(self, method: str | None, params: dict[str, Any] | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if self.modern:
            headers["mcp-protocol-version"] = MODERN
            if method is not None:
                headers["mcp-method"] = method
                name_param = NAME_PARAM.get(method)
                if name_param and params and isinstance(params.get(name_param), str):
                    headers["mcp-name"] = params[name_param]
        elif self.mode in ("session", "sessionless") and self.revision != "2025-03-26":
            # 2025-03-26 predates the header; later revisions send it after initialize.
            headers["mcp-protocol-version"] = self.revision
        if self.session_id and not self.modern:
            headers["mcp-session-id"] = self.session_id
        return headers

    def _post(self, message: Any, key: Any, headers: dict[str, str]) -> None:
        """POST one message; its answer's frames go onto the queue (on a thread)."""
        written = self._written[key] = threading.Event()
        headed = self._headed[key] = threading.Event()

        def run() -> None:
            conn = self.connection()
            self._connections[key] = conn
            try:
                conn.request("POST", self.path, body=orjson.dumps(message), headers=headers)
                written.set()
                response = conn.getresponse()
                self.statuses[key] = response.status
                self.headers[key] = {k.lower(): v for k, v in response.getheaders()}
                headed.set()
                kind = response.getheader("content-type", "")
                if kind.startswith("text/event-stream"):
                    for _event, event_id, data in read_sse(response):
                        if event_id is not None:
                            self.event_ids.setdefault(key, []).append(event_id)
                        if data:
                            self.frames.put(orjson.loads(data))
                else:
                    body = response.read()
                    if body:
                        self.frames.put(orjson.loads(body))
            except OSError as exc:
                if key not in self._cancelled:
                    self.frames.put({"transport-error": repr(exc)})
            finally:
                # Nobody waits for a POST that failed: the failure is on the queue.
                written.set()
                headed.set()
                conn.close()

        thread = threading.Thread(target=run, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _post_sse_message(self, message: Any) -> None:
        assert self.sse_endpoint is not None
        status, _, _ = self.raw(
            "POST", orjson.dumps(message), {"content-type": "application/json"}, path=self.sse_endpoint
        )
        assert status == 202, f"HTTP+SSE POST answered {status}"

    def _open_sse(self) -> None:
        conn = self.connection(timeout=60)
        conn.request("GET", "/sse", headers={"accept": "text/event-stream"})
        response = conn.getresponse()
        assert response.status == 200, response.status
        events = read_sse(response)
        event, _, data = next(events)
        assert event == "endpoint", event
        self.sse_endpoint = data
        self._sse_conn = conn

        def pump() -> None:
            try:
                for kind, _, payload in events:
                    if kind == "message" and payload:
                        self.frames.put(orjson.loads(payload))
            except (OSError, AttributeError, ValueError):
                pass  # the stream was closed under us: the conversation is over

        threading.Thread(target=pump, daemon=True).start()

    # -- the StdioPeer face ------------------------------------------------------

    def recv(self, timeout: float = 10.0) -> dict[str, Any]:
        try:
            frame = self.frames.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no frame from mcpx within {timeout}s") from None
        assert frame is not None and "transport-error" not in frame, frame
        self.received.append(frame)
        self._sweep(frame)
        return frame

    def _sweep(self, frame: dict[str, Any]) -> None:
        if "method" in frame:
            meta = (frame.get("params") or {}).get("_meta") or {}
            revision = MODERN if "io.modelcontextprotocol/subscriptionId" in meta else self.revision
            SWEEP.validate_sent(frame, revision, None)
        else:
            method, revision = self._sent.get(frame.get("id"), (None, self.revision))
            SWEEP.validate_sent(frame, revision, method)

    def send(self, message: Any) -> None:
        if self.mode == "sse":
            self._post_sse_message(message)
            return
        method = message.get("method") if isinstance(message, dict) else None
        params = message.get("params") if isinstance(message, dict) else None
        self._post(
            message,
            message.get("id") if isinstance(message, dict) else None,
            self._base_headers(method, params),
        )

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        id: Any = None,
        modern: bool | None = None,
        meta: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        request_id = next(self._ids) if id is None else id
        use_modern = self.modern if modern is None else modern
        params = dict(params or {})
        if use_modern:
            params["_meta"] = {**modern_meta(), **(meta or {})}
            revision = MODERN
        else:
            if meta:
                params["_meta"] = meta
            revision = self.revision
            if method in INTRODUCED and not at_least(revision, INTRODUCED[method]):
                revision = INTRODUCED[method]
        self._sent[request_id] = (method, revision)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params:
            message["params"] = params
        if self.mode == "sse":
            self._post_sse_message(message)
        else:
            base = self._base_headers(method, params)
            if use_modern and not self.modern:
                base.update({"mcp-protocol-version": MODERN, "mcp-method": method})
                base.pop("mcp-session-id", None)
            base.update(headers or {})
            self._post(message, request_id, base)
        return request_id

    def response(self, request_id: Any, timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            frame = self.recv(max(0.01, deadline - time.monotonic()))
            if "method" in frame and "id" in frame:
                self.questions.append(frame)
                self.reply_to_question(frame)
                continue
            if "method" in frame:
                self.notifications.append(frame)
                continue
            if frame.get("id") == request_id:
                return frame
            raise AssertionError(f"expected the response to {request_id!r}, got {frame}")

    def reply_to_question(self, frame: dict[str, Any]) -> None:
        """Answer a server request: POSTed in the session (or to the HTTP+SSE endpoint)."""
        if self.answer is None:
            reply = {"jsonrpc": "2.0", "id": frame["id"], "error": {"code": -32601, "message": "no handler"}}
        else:
            reply = {
                "jsonrpc": "2.0",
                "id": frame["id"],
                "result": self.answer(frame["method"], frame.get("params") or {}),
            }
        if self.mode == "sse":
            self._post_sse_message(reply)
            return
        key = ("answer", next(self._ids))
        self._post(reply, key, self._base_headers(None, None))
        self._threads[-1].join(10)
        assert self.statuses.get(key) == 202, f"an answer POST answered {self.statuses.get(key)}"

    def complete(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        """Call and, while the answer is 2026-07-28 ``input_required``, answer and retry."""
        return complete_rounds(self, method, params, **kw)

    def wait_held(self, request_id: Any, timeout: float = 10.0) -> None:
        """Return once mcpx has taken ``request_id`` up and holds its answer open.

        On HTTP+SSE the endpoint's 202 said so before ``request`` returned.  On
        Streamable HTTP it is the head of the request's response, which mcpx
        sends for an answer still to come once it has been silent for
        ``--sse-keepalive``: start the server with a short one to use this.
        """
        if self.mode == "sse":
            return
        assert self._headed[request_id].wait(timeout), (
            f"no response head for {request_id!r} within {timeout}s"
        )
        assert request_id in self.statuses, f"the POST of {request_id!r} failed"

    def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        return self.response(self.request(method, params, **kw))

    def result(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        frame = self.call(method, params, **kw)
        assert "result" in frame, f"{method} failed: {frame}"
        return frame["result"]  # type: ignore[no-any-return]

    def error(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        frame = self.call(method, params, **kw)
        assert "error" in frame, f"{method} should have failed: {frame}"
        return frame["error"]  # type: ignore[no-any-return]

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        if self.mode == "sse":
            self._post_sse_message(message)
            return
        key = ("notify", next(self._ids))
        self._post(message, key, self._base_headers(None, params))
        self._threads[-1].join(10)
        assert self.statuses.get(key) == 202, f"a notification POST answered {self.statuses.get(key)}"

    def cancel(self, request_id: Any, reason: str | None = None) -> None:
        """Cancel a request the way this transport does it.

        Within a legacy session (and on HTTP+SSE) that is ``notifications/cancelled``;
        for 2026-07-28 and sessionless POSTs, closing the request's stream.
        """
        if self.mode in ("session", "sse"):
            params: dict[str, Any] = {"requestId": request_id}
            if reason is not None:
                params["reason"] = reason
            self.notify("notifications/cancelled", params)
            return
        # Closing a stream the request has not gone out on yet would cancel nothing.
        assert self._written[request_id].wait(5), f"the POST of {request_id!r} never went out"
        conn = self._connections[request_id]
        self._cancelled.add(request_id)
        if conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)

    def initialize(self, revision: str, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        if self.mode is None:
            self.mode = "sse" if revision == "2024-11-05" else "session"
        if self.mode == "sse" and self.sse_endpoint is None:
            self._open_sse()
        request_id = next(self._ids)
        self._sent[request_id] = ("initialize", revision if revision in LEGACY else LEGACY[-1])
        message = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "initialize",
            "params": {
                "protocolVersion": revision,
                "capabilities": capabilities or {},
                "clientInfo": CLIENT_INFO,
            },
        }
        if self.mode == "sse":
            self._post_sse_message(message)
        else:
            headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
            self._post(message, request_id, headers)
        frame = self.response(request_id)
        result = frame["result"]
        self.revision = result["protocolVersion"]
        self._sent[request_id] = ("initialize", self.revision)
        if self.mode == "session":
            self._threads[-1].join(10)
            self.session_id = self.headers[request_id].get("mcp-session-id")
            assert self.session_id, "initialize over Streamable HTTP must mint Mcp-Session-Id"
        self.notify("notifications/initialized")
        return result  # type: ignore[no-any-return]

    def speak(self, revision: str, capabilities: dict[str, Any] | None = None) -> dict[str, Any] | None:
        if revision == MODERN:
            self.mode = self.mode or "modern"
            self.revision = MODERN
            self.modern = True
            return None
        if self.mode == "sessionless":
            self.revision = revision
            return None
        return self.initialize(revision, capabilities)

    def close(self, timeout: float = 10.0) -> int:
        """End the conversation: DELETE the session, then stop the server (exit status)."""
        for thread in self._threads:
            thread.join(timeout)
        while True:
            try:
                frame = self.frames.get_nowait()
            except queue.Empty:
                break
            if frame is not None and "transport-error" not in frame:
                self.received.append(frame)
                self._sweep(frame)
                if "method" in frame:
                    self.notifications.append(frame)
        if self.session_id is not None:
            status, _, _ = self.raw("DELETE", headers={"mcp-session-id": self.session_id})
            assert status == 200, f"DELETE answered {status}"
        if self._sse_conn is not None:
            if self._sse_conn.sock is not None:
                # Unblock the reading thread first; close() alone waits for it.
                with contextlib.suppress(OSError):
                    self._sse_conn.sock.shutdown(socket.SHUT_RDWR)
            self._sse_conn.close()
        return stop_http_server(self.proc, timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    @property
    def stderr(self) -> str:
        return ""
