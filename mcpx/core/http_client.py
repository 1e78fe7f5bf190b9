"""The Streamable HTTP client binding: a ``ClientSession``'s messages to one MCP URL, both eras, pure.

The mirror image of ``http_server.HttpServer``, a machine wrapping h11's: it wraps
one ``h11.Connection`` per HTTP/1.1 connection it asks the driver to open, and
carries JSON-RPC payloads (from ``ClientSession``'s ``Send`` actions) to one
server URL and decoded JSON values back.  It never touches a socket, a clock or
randomness: connection ids come from ``conn_ids`` (the driver's choice), time
comes in as ``now``.

Rules
-----
From basic/transports of 2025-03-26, 2025-06-18 and 2025-11-25 (the legacy
shape) and 2026-07-28 basic/transports/streamable-http; spec/client.md §6.

Every request
    ``Host``, ``User-Agent`` (``config.user_agent``) and the caller's extra
    headers (auth: bearer, basic, custom — ``config.headers``).  Extra headers
    never carry protocol or hop-by-hop names (``Mcp-*``,
    ``MCP-Protocol-Version``, ``Host``, ``Content-Length``, ``Connection``,
    ``Transfer-Encoding``, ``Accept``, ``Content-Type``, ``Last-Event-ID``, …):
    those are dropped when the config is built and listed in
    ``config.refused_headers``.  A POST says ``Accept: application/json,
    text/event-stream`` and ``Content-Type: application/json``.
One connection per stream
    Each POST (and each GET) has an HTTP/1.1 connection of its own for as long
    as its answer lasts — an event stream may stay open for minutes — and a
    connection whose answer ended cleanly goes back to an idle pool
    (``max_idle``) for the next request.  At most ``max_connections`` are
    open; further requests wait in order.
Legacy shape (2025-03-26, 2025-06-18, 2025-11-25)
    The ``Mcp-Session-Id`` of the ``initialize`` answer is sent on every later
    request; ``MCP-Protocol-Version: <negotiated>`` too, from 2025-06-18 (the
    negotiated revision is read from the ``InitializeResult`` as it passes).
    A 404 to a request that carried the session id means the session is gone:
    the request fails and ``SessionExpired`` follows; start a new session
    (``initialize`` is always sent without the id).  ``open_get_stream()``
    opens the standalone GET stream.  An event stream that ends or drops
    before its answers came is resumed with ``GET`` + ``Last-Event-ID`` after
    the server's ``retry:`` delay (``config.retry`` when it sent none) — the
    GET stream always, a POST's stream when it had an event id; at most
    ``max_resumes`` tries in a row without an event.  ``close()`` sends
    ``DELETE`` when a session id exists, on a connection of its own (the
    pooled ones are closed first).
2026-07-28
    Every POST states ``MCP-Protocol-Version`` (the body's
    ``_meta.protocolVersion``, else ``config.revision``), ``Mcp-Method``,
    ``Mcp-Name`` (``params.name`` for tools/call and prompts/get,
    ``params.uri`` for resources/read, ``params.taskId`` for tasks/*) and, for
    tools/call, ``Mcp-Param-<Name>`` for each argument the tool's input schema
    annotates with ``x-mcp-header`` (``set_tool_headers``; see
    ``tool_header_params``).  Values that are not plain visible ASCII, or have
    leading or trailing spaces, or look like the sentinel, are sent as
    ``=?base64?<b64 of UTF-8>?=``.  Never a session id, never a GET.
    ``abandon(handle)`` cancels a request by closing its connection.
Answers, precisely
    A 2xx ``application/json`` body (one message or a batch) and each
    ``message`` event of a ``text/event-stream`` are delivered as
    ``JsonReceived``.  A 4xx/5xx whose body is a JSON-RPC error is that error
    for the request (its ``id`` filled in when the server left it null); any
    other refusal, a 2xx that is neither JSON nor an event stream, a body
    over ``max_body``, an event over ``max_event``, a malformed HTTP answer, a
    connection that closes before the answer: each request still waiting gets
    one synthesized JSON-RPC error (``JsonReceived(synthesized=True)``, code
    -32603, ``data.httpStatus``/``data.body`` when there was an answer), so
    the session fails exactly that call with a reason.  A refused POST of
    notifications or responses (no request to fail) is ``RequestRefused``.

API
---
``HttpClientConnection(config, conn_ids=None, session_id=None, revision=None)``
    ``session_id``/``revision`` adopt a legacy session the era probe settled.
Inputs (drain ``next_actions()`` after each, in order)
    ``send(payload, handle=, now=)`` — one ``Send`` of the client session.
    ``abandon(handle)`` — its ``AbandonStream``.  ``open_get_stream(now)``.
    ``close(now)``.  ``set_tool_headers(tool, mapping)``.
    ``exchange(token, method, target, headers, body, now=)`` and
    ``drop_exchange(token)`` — a raw exchange, its answer handed on
    undecoded (the era probe's requests).  From the driver:
    ``connection_made(conn, now)``, ``receive_data(conn, data, now)``
    (``b""`` at end of input), ``connection_lost(conn, now, reason=)``, and
    ``handle_timer(now)`` once ``get_timer()``'s deadline passed.
Actions
    ``OpenConnection(conn)`` — connect to ``config.host``:``config.port``
    (TLS when ``config.tls``), then report ``connection_made`` (or
    ``connection_lost`` if that failed).  ``SendBytes(conn, data)`` — write.
    ``CloseConnection(conn)`` — close (nothing more is read from it).
    ``JsonReceived(message, handle)`` — feed ``message`` to
    ``ClientSession.receive_json``.  ``SessionExpired(session_id)`` —
    re-initialise.  ``StreamEnded(handle, reason, resuming)`` — a stream
    ended without its answers (``handle=None``: the GET stream).
    ``RequestRefused(status, message)``.  ``Closed()`` — after ``close``;
    feed ``receive_eof`` to the session.  ``ExchangeHead``, ``ExchangeData``
    (``b""`` at the end) and ``ExchangeFailed`` — a raw exchange's answer,
    as it comes.

Theory of operation
-------------------
A ``_Stream`` is a logical answer: a POST's (the request ids it still awaits,
its handle) or the session's GET stream.  An ``_Exchange`` is one HTTP request
and its response carrying a stream; a resumed stream gets a new exchange (a
GET with ``Last-Event-ID``) on another connection.  An exchange's response
goes ``head`` → one of ``json | sse | empty | refused | junk`` → ``done``;
``_MODES`` says what a response's status and content type select.

Modules: the binding's face is here (the session's side, the driver's side,
requests and responses); beside it, ``http_client_actions`` holds the
configuration, the actions and the header values, and ``http_client_base``
the layer ``HttpClientConnection`` stands on: the records, every field
(``_ClientBindingBase.__init__``), delivering answers and failing requests,
connections, and the wording of errors (which the HTTP+SSE binding,
``sse_client``, uses too).  Every public name is importable from this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import h11
import orjson

from .errors import LocalProtocolError
from .http_client_actions import (
    Closed,
    ExchangeData,
    ExchangeFailed,
    ExchangeHead,
    HttpClientAction,
    HttpClientConfig,
    JsonReceived,
    OpenConnection,
    RequestRefused,
    SessionExpired,
    StreamEnded,
    _param_text,
    encode_header_value,
    tool_header_params,
)
from .http_client_base import _ClientBindingBase, _Conn, _Exchange, _is_id, _Stream
from .http_wire import SendBytes, buffered, header_map
from .revisions import META_PROTOCOL_VERSION, Revision
from .sse import SseDecoder, SseError

__all__ = [
    "Closed",
    "ExchangeData",
    "ExchangeFailed",
    "ExchangeHead",
    "HttpClientAction",
    "HttpClientConfig",
    "HttpClientConnection",
    "JsonReceived",
    "OpenConnection",
    "RequestRefused",
    "SessionExpired",
    "StreamEnded",
    "encode_header_value",
    "tool_header_params",
]


_VERSION_HEADER_FROM: Final = Revision.V2025_06_18  # 2025-06-18 basic/transports, Protocol Version Header


_ACCEPT: Final = "application/json, text/event-stream"


_NAME_PARAM: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class HttpClientConnection(_ClientBindingBase):
    """All HTTP connections to one MCP server URL; see the module docstring."""

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def revision(self) -> Revision | None:
        """Legacy: the negotiated revision (read from the InitializeResult); modern: ``config.revision``."""
        return self.config.revision if self.config.modern else self._revision

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def next_actions(self) -> list[HttpClientAction]:
        """Everything queued since the last call, in order.  Call after every input."""
        actions, self._actions = self._actions, []
        return actions

    def get_timer(self) -> float | None:
        """When ``handle_timer`` must be called next (a stream to resume), or None."""
        times = [s.resume_at for s in self._resuming if s.resume_at is not None]
        return min(times) if times else None

    def set_tool_headers(self, tool: str, mapping: Mapping[str, str] | None) -> None:
        """``x-mcp-header`` of ``tool``: ``{argument: header name}`` (from ``tool_header_params``)."""
        if mapping:
            self._tool_headers[tool] = dict(mapping)
        else:
            self._tool_headers.pop(tool, None)

    def send(self, payload: bytes, *, handle: int | None, now: float) -> None:
        """POST one payload of the client session (``Send.payload``, ``Send.stream`` as ``handle``)."""
        self._now = max(self._now, now)
        if self._closing:
            raise LocalProtocolError("the connection to the server is closing")
        try:
            body = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise LocalProtocolError(f"a payload to send must be JSON: {exc}") from None
        items = body if isinstance(body, list) else [body]
        if self.config.modern and not isinstance(body, dict):
            raise LocalProtocolError("a 2026-07-28 POST carries one message, never a batch")
        ids = [m["id"] for m in items if isinstance(m, dict) and "method" in m and _is_id(m.get("id"))]
        init = next(
            (m["id"] for m in items if isinstance(m, dict) and m.get("method") == "initialize" and "id" in m),
            None,
        )
        legacy_session = None if self.config.modern or init is not None else self._session_id
        stream = _Stream(
            kind="post", handle=handle, awaiting=set(ids), session_id=legacy_session, initialize=init
        )
        for rid in ids:
            self._waiting[rid] = stream
        if handle is not None:
            self._by_handle[handle] = stream
        headers = [("Accept", _ACCEPT), ("Content-Type", "application/json")]
        headers += self._modern_headers(body) if self.config.modern else self._legacy_headers(init is None)
        self._start(_Exchange("POST", headers, payload, stream, legacy_session))

    def exchange(
        self,
        token: int,
        method: str,
        target: str,
        headers: Sequence[tuple[str, str]],
        body: bytes,
        *,
        now: float,
    ) -> None:
        """One HTTP request whose answer is handed on as it comes, undecoded: a raw exchange.

        For a caller that must see the answer itself (the era probe reads
        status, content type and body to judge a server's era).  ``target``
        is the request target on this binding's origin (a path and query);
        ``headers`` go with the binding's own (``Host``, ``User-Agent``, the
        configured extra headers).  The answer comes as ``ExchangeHead``, then
        ``ExchangeData`` (``b""`` at its end), or ``ExchangeFailed``.  It takes
        a connection of the binding's pool like any request; nothing of the
        session (its id, its revision) is added or read.
        """
        self._now = max(self._now, now)
        if self._closing:
            raise LocalProtocolError("the connection to the server is closing")
        if token in self._raw:
            raise LocalProtocolError(f"exchange {token} is under way already")
        ex = _Exchange(method, list(headers), body, None, None, token=token, target=target)
        self._raw[token] = ex
        self._start(ex)

    def drop_exchange(self, token: int) -> None:
        """Stop reading the answer to ``exchange(token, …)``: its connection is closed; nothing more comes."""
        ex = self._raw.pop(token, None)
        if ex is not None:
            self._drop_exchange(ex)

    def abandon(self, handle: int) -> None:
        """The session gave up on ``handle`` (``AbandonStream``): close its connection; no more for it."""
        stream = self._by_handle.pop(handle, None)
        if stream is None:
            return
        self._retire(stream)
        self._drop_exchange(stream.exchange)

    def open_get_stream(self, now: float) -> None:
        """Legacy: open the standalone GET stream for what the server pushes (no-op when open)."""
        self._now = max(self._now, now)
        if self.config.modern:
            raise LocalProtocolError("2026-07-28 has no GET stream; use subscriptions/listen")
        if self._closing:
            raise LocalProtocolError("the connection to the server is closing")
        if self._get is not None and not self._get.done:
            return
        self._get = _Stream(kind="get", handle=None, awaiting=set(), session_id=self._session_id)
        self._start_get(self._get)

    def close(self, now: float) -> None:
        """End: close every connection, ``DELETE`` the session if there is one (on a new one); ``Closed`` follows."""
        self._now = max(self._now, now)
        if self._closing:
            return
        self._closing = True
        for stream in list(self._by_handle.values()):
            self._retire(stream)
            self._drop_exchange(stream.exchange)
        self._by_handle.clear()
        if self._get is not None:
            self._retire(self._get)
            self._drop_exchange(self._get.exchange)
        for stream in list(self._waiting.values()):
            self._retire(stream)
            self._drop_exchange(stream.exchange)
        for ex in list(self._raw.values()):  # raw exchanges end unread: the caller closed
            self._drop_exchange(ex)
        self._raw.clear()
        self._resuming.clear()
        self._queue.clear()
        if self._session_id is not None and not self.config.modern:
            # The DELETE gets a connection opened for it, never a pooled one: a
            # driver closing because its caller was cancelled has lost the tasks
            # that read the pooled connections (the answer would never be read),
            # and one the server is dropping as idle could lose the request.
            for c in [c for c in self._conns.values() if c.exchange is None]:
                self._close(c)
            headers = self._legacy_headers(True)
            self._start(_Exchange("DELETE", headers, b"", None, self._session_id))
            return
        self._finish_close()

    def connection_made(self, conn: int, now: float) -> None:
        """The connection asked for by ``OpenConnection(conn)`` is up: the request goes out."""
        self._now = max(self._now, now)
        c = self._conns.get(conn)
        if c is None or c.closed or c.connected:
            return  # closed meanwhile: the driver has been told to close it
        c.connected = True
        if c.exchange is not None:
            self._write_request(c, c.exchange)

    def receive_data(self, conn: int, data: bytes, now: float) -> None:
        """Bytes read from ``conn``; ``b""`` when the server closed its side."""
        self._now = max(self._now, now)
        c = self._conns.get(conn)
        if c is None or c.closed:
            return
        if not data and self._closed_idle(c):
            return
        try:
            c.parser.receive_data(data)
        except RuntimeError:  # bytes after the server's own end
            return
        self._read(c)

    def _closed_idle(self, c: _Conn, *, lost: bool = False) -> bool:
        """A kept connection the server closed before a byte of the answer came: the request goes again.

        A server closes a keep-alive connection it holds idle whenever it
        likes (RFC 9112 §9.3); a request written meanwhile was never read.
        Sent once more on a new connection, as HTTP clients do for a kept
        connection that closes before any answer.  Once only: a second close
        is the server's answer.
        """
        ex = c.exchange
        if not c.reused or ex is None or ex.retried or ex.mode != "head" or buffered(c.parser):
            return False
        if c.parser.their_state is not h11.SEND_RESPONSE:
            return False
        ex.retried = True
        if lost:
            self._forget(c)
        else:
            self._close(c)
        ex.conn = None
        self._queue.appendleft(ex)
        self._dispatch_queue()
        return True

    def connection_lost(self, conn: int, now: float, *, reason: str | None = None) -> None:
        """The socket is gone (or never came up; ``reason``: the system's word for why): what it carried ends."""
        self._now = max(self._now, now)
        c = self._conns.get(conn)
        if c is None:
            return
        if c.connected and self._closed_idle(c, lost=True):
            return
        self._forget(c)
        ex = c.exchange
        if ex is not None and ex.mode != "done":
            why = "the connection closed before the answer" if c.connected else self._unreachable(reason)
            self._broken(ex, why)
        self._dispatch_queue()

    def handle_timer(self, now: float) -> None:
        """Resume the streams whose ``retry`` delay has passed."""
        self._now = max(self._now, now)
        due = [s for s in self._resuming if s.resume_at is not None and s.resume_at <= now]
        for stream in due:
            self._resuming.remove(stream)
            stream.resume_at = None
            if not stream.done:
                self._start_get(stream)

    def _common_headers(self) -> list[tuple[str, str]]:
        return [("Host", self.config.authority), ("User-Agent", self.config.user_agent)]

    def _legacy_headers(self, in_session: bool) -> list[tuple[str, str]]:
        headers: list[tuple[str, str]] = []
        if in_session and self._session_id is not None:
            headers.append(("Mcp-Session-Id", self._session_id))
        if in_session and self._revision is not None and self._revision >= _VERSION_HEADER_FROM:
            headers.append(("MCP-Protocol-Version", str(self._revision)))
        return headers

    def _modern_headers(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        params = body.get("params")
        params = params if isinstance(params, dict) else {}
        meta = params.get("_meta")
        stated = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
        version = stated if isinstance(stated, str) else str(self.config.revision)
        headers = [("MCP-Protocol-Version", encode_header_value(version))]
        method = body.get("method")
        if not isinstance(method, str):
            return headers
        headers.append(("Mcp-Method", encode_header_value(method)))
        name_param = _NAME_PARAM.get(method) or ("taskId" if method.startswith("tasks/") else None)
        name = params.get(name_param) if name_param is not None else None
        if isinstance(name, str):
            headers.append(("Mcp-Name", encode_header_value(name)))
        if method == "tools/call" and isinstance(name, str):
            arguments = params.get("arguments")
            arguments = arguments if isinstance(arguments, dict) else {}
            for argument, header in self._tool_headers.get(name, {}).items():
                text = _param_text(arguments.get(argument))
                if text is not None:
                    headers.append((f"Mcp-Param-{header}", encode_header_value(text)))
        return headers

    def _start_get(self, stream: _Stream) -> None:
        headers = [("Accept", "text/event-stream"), *self._legacy_headers(True)]
        if stream.last_event_id is not None:
            headers.append(("Last-Event-ID", stream.last_event_id))
        self._start(_Exchange("GET", headers, b"", stream, stream.session_id))

    def _start(self, ex: _Exchange) -> None:
        if ex.stream is not None:
            ex.stream.exchange = ex
        c = next((c for c in self._conns.values() if c.exchange is None and not c.closed), None)
        if c is None:
            if len(self._conns) >= self.config.max_connections:
                self._queue.append(ex)
                return
            c = self._open()
        c.exchange = ex
        ex.conn = c.id
        if c.connected:
            self._write_request(c, ex)

    def _open(self) -> _Conn:
        conn = next(self._conn_ids)
        if conn in self._conns:
            raise LocalProtocolError(f"conn_ids gave {conn} twice")
        c = _Conn(
            id=conn,
            parser=h11.Connection(h11.CLIENT, max_incomplete_event_size=self.config.max_header_bytes),
        )
        self._conns[conn] = c
        self._actions.append(OpenConnection(conn=conn))
        return c

    def _write_request(self, c: _Conn, ex: _Exchange) -> None:
        headers = [*self._common_headers(), *ex.headers, *self.config.headers]
        if ex.body or ex.method == "POST":
            headers.append(("Content-Length", str(len(ex.body))))
        try:
            data = (
                c.parser.send(
                    h11.Request(method=ex.method, target=ex.target or self.config.target, headers=headers)
                )
                or b""
            )
            if ex.body:
                data += c.parser.send(h11.Data(data=ex.body)) or b""
            data += c.parser.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError as exc:
            self._close(c)
            self._broken(ex, f"mcpx could not write the request: {exc}")
            return
        self._actions.append(SendBytes(conn=c.id, data=data))

    def _read(self, c: _Conn) -> None:
        while not c.closed:
            ex = c.exchange
            before = buffered(c.parser)
            try:
                event = c.parser.next_event()
            except h11.RemoteProtocolError as exc:
                self._close(c)
                if ex is not None:
                    why = self._too_large() if exc.error_status_hint == 431 else f"malformed: {exc}"
                    self._broken(ex, f"the server's HTTP answer is {why}", resumable=False)
                self._dispatch_queue()
                return
            if isinstance(event, h11.Response | h11.InformationalResponse) and (
                before - buffered(c.parser) > self.config.max_header_bytes
            ):
                # h11 bounds only a head still arriving; one that came whole is
                # measured here, so the verdict does not depend on how it was cut.
                self._close(c)
                if ex is not None:
                    self._broken(ex, f"the server's HTTP answer is {self._too_large()}", resumable=False)
                self._dispatch_queue()
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.ConnectionClosed):
                self._close(c)
                if ex is not None and ex.mode != "done":
                    self._broken(ex, "the server closed the connection before the answer ended")
                self._dispatch_queue()
                return
            if ex is None:
                self._close(c)  # an answer nobody asked for: the connection cannot be trusted
                return
            if isinstance(event, h11.Response):
                self._head(ex, event)
            elif isinstance(event, h11.Data):
                self._body(c, ex, bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                self._end(ex)
                self._reuse(c)

    def _head(self, ex: _Exchange, event: h11.Response) -> None:
        ex.status = event.status_code
        if ex.token is not None:
            ex.mode = "raw"
            headers_seen = tuple(
                (name.decode("latin-1"), value.decode("latin-1")) for name, value in event.headers
            )
            self._actions.append(ExchangeHead(token=ex.token, status=ex.status, headers=headers_seen))
            return
        headers = header_map(event.headers)
        ex.content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        ex.location = headers.get("location")
        stream = ex.stream
        ok = 200 <= ex.status < 300
        if ok and stream is not None and stream.initialize is not None and not self.config.modern:
            session_id = headers.get("mcp-session-id")
            # Visible ASCII only (legacy basic/transports, Session Management).
            if session_id is not None and session_id and all(0x21 <= ord(ch) <= 0x7E for ch in session_id):
                self._session_id = session_id
        if not ok:
            ex.mode = "refused"
        elif ex.content_type == "text/event-stream":
            ex.mode = "sse"
            ex.decoder = SseDecoder(max_event=self.config.max_event)
        elif ex.content_type == "application/json":
            ex.mode = "json"
        elif ex.status in (202, 204) or headers.get("content-length") == "0":
            ex.mode = "empty"
        else:
            ex.mode = "junk"

    def _body(self, c: _Conn, ex: _Exchange, data: bytes) -> None:
        if ex.mode == "raw":
            assert ex.token is not None
            self._actions.append(ExchangeData(token=ex.token, data=data))
            return
        if ex.mode == "sse":
            assert ex.decoder is not None
            try:
                events = ex.decoder.feed(data)
            except SseError as exc:
                self._close(c)
                self._broken(ex, f"the server's event stream broke: {exc}", resumable=False)
                self._dispatch_queue()
                return
            stream = ex.stream
            for event in events:
                if stream is None or stream.done:
                    break
                stream.resumes = 0
                if event.event_id is not None:
                    stream.last_event_id = event.event_id
                if event.retry_ms is not None:
                    stream.retry = min(event.retry_ms / 1000, self.config.max_retry)
                if not event.data or event.event != "message":
                    continue  # a priming event, or an event type MCP does not define
                try:
                    value = orjson.loads(event.data)
                except orjson.JSONDecodeError:
                    continue  # not a JSON-RPC message: nothing to hand on
                self._deliver(stream, value)
            return
        if len(ex.buffer) + len(data) > self.config.max_body:
            self._close(c)
            self._broken(ex, f"the server's answer exceeds {self.config.max_body} bytes", resumable=False)
            self._dispatch_queue()
            return
        ex.buffer += data

    def _end(self, ex: _Exchange) -> None:
        mode, ex.mode = ex.mode, "done"
        if ex.token is not None:
            if self._raw.get(ex.token) is ex:
                del self._raw[ex.token]
                self._actions.append(ExchangeData(token=ex.token, data=b""))
            return
        stream = ex.stream
        if stream is not None and stream.exchange is ex:
            stream.exchange = None
        if stream is None:  # the DELETE of close()
            self._finish_close()
            return
        if stream.done:
            return
        if mode == "json":
            try:
                value = orjson.loads(ex.buffer)
            except orjson.JSONDecodeError:
                self._fail(stream, self._describe(ex, "a body that is not JSON"), ex)
                return
            self._deliver(stream, value)
            if stream.kind == "get":
                self._end_get(stream, self._describe(ex, "JSON, not an event stream"), resuming=False)
            else:
                self._unanswered(stream, ex, "its JSON body")
        elif mode == "sse":
            self._stream_stopped(stream, "the event stream ended")
        elif mode == "refused":
            self._refused(stream, ex)
        elif stream.kind == "get":
            self._end_get(stream, self._describe(ex, "no event stream"), resuming=False)
        elif mode == "empty":
            self._unanswered(stream, ex, f"an empty HTTP {ex.status}")
        else:
            self._fail(stream, self._describe(ex, "neither JSON nor an event stream"), ex)
        if not stream.awaiting and stream.kind == "post":
            self._retire(stream)

    def _reuse(self, c: _Conn) -> None:
        """The answer on ``c`` ended: keep the connection for the next request, or close it."""
        c.exchange = None
        parser = c.parser
        if c.closed:
            return
        if parser.our_state is h11.DONE and parser.their_state is h11.DONE:
            parser.start_next_cycle()
            c.reused = True
            if not parser.trailing_data[0]:
                if self._queue:
                    self._start_queued(c)
                    return
                if self._closing:
                    self._close(c)
                    return
                idle = sum(1 for other in self._conns.values() if other.exchange is None)
                if idle <= self.config.max_idle:
                    return
        self._close(c)
        self._dispatch_queue()
