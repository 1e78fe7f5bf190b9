"""The 2024-11-05 "HTTP with SSE" client transport: one event stream in, POSTs out, pure.

MCP 2024-11-05, Basic → Transports → "HTTP with SSE": the client opens a
Server-Sent Events stream with a GET; the server's first event, ``endpoint``,
names the URI the client must POST every one of its messages to; the
server's messages (responses, requests, notifications) arrive as ``message``
events on that stream.  Later revisions replaced this transport with
Streamable HTTP but keep it for backwards compatibility (2025-03-26 and on,
Transports → "Backwards Compatibility"), so a 2024-11-05 server found by the
era probe (``era="legacy-sse"``, spec/era-probe.md) is spoken to here.

``SseClientConnection`` is the sans-IO half, a machine wrapping h11's: it wraps
one ``h11.Connection`` for the GET stream and one, kept alive, for the POSTs,
carries a ``ClientSession``'s ``Send`` payloads out and decoded JSON values in.
No socket, no clock, no randomness: connection ids come from ``conn_ids``, time
comes in as ``now``.  The vocabulary is the one of ``HttpClientConnection``
(``http_client``), so a driver that can run one can run the other.

Rules
-----
The stream
    ``open(now)`` GETs ``config.url`` with ``Accept: text/event-stream``,
    ``Cache-Control: no-cache`` and the caller's headers (auth).  Only a 200
    with ``Content-Type: text/event-stream`` is a stream; any other answer is
    read (bounded) for its reason and ends the transport.  A stream event
    over ``max_event`` bytes, a malformed HTTP answer, the server ending the
    body or dropping the connection: all end the transport.  2024-11-05 has
    no resumption, so the end of the stream is the end of the session.
The endpoint
    The first ``endpoint`` event's data, stripped, is a URI relative to the
    SSE URL (RFC 3986 §5 resolution, ``resolve_endpoint``).  It must resolve
    to ``http``/``https`` on the SSE URL's origin (scheme, host and port):
    the POSTs carry the session and the caller's credentials, and a server
    must not be able to send them elsewhere.  An endpoint that is empty,
    unparseable or on another origin ends the transport with that reason.  A
    later ``endpoint`` event is ignored (the first one stands).  When no
    endpoint event came within ``endpoint_timeout`` seconds of ``open``, the
    transport ends.
Sending
    ``send`` before the endpoint is known queues the payload (at most
    ``max_queued``); once it is known the queue is POSTed in order.  POSTs go
    one at a time on one kept-alive connection, so the server reads the
    messages in the order the session wrote them (``initialize``'s result,
    then ``notifications/initialized``, then the first request): 2024-11-05
    servers answer a POST with 202 at once and the answers travel on the
    stream, so the cost is one round trip per message.
Answers to POSTs
    Any 2xx is "accepted"; its body (servers send ``Accepted`` or nothing) is
    read up to ``max_body`` and ignored: answers come on the stream.  A
    refusal whose body is a JSON-RPC error is that error for each request in
    the POST (its id filled in); any other refusal, or a connection that
    drops before the answer, fails the POST's requests with an error made
    here (``JsonReceived(synthesized=True)``, -32603, ``data.httpStatus`` and
    ``data.body`` when there was an answer).  A refused POST carrying no
    request is ``RequestRefused``.
The end
    When the transport ends, every request still waiting for its answer gets
    an error made here naming the reason, then ``StreamEnded(handle=None,
    resuming=False)``; feed ``receive_eof`` to the session.  ``send`` after
    that fails the requests in the payload the same way.  ``close(now)``
    closes every connection and says ``Closed`` (2024-11-05 has no DELETE:
    closing the stream ends the session on the server).

API
---
``SseClientConnection(config, conn_ids=None)``
Inputs (drain ``next_actions()`` after each, in order)
    ``open(now)`` — once.  ``send(payload, handle=, now=)`` — one ``Send`` of
    the client session.  ``close(now)``.  From the driver:
    ``connection_made(conn, now)``, ``receive_data(conn, data, now)``
    (``b""`` at end of input), ``connection_lost(conn, now)``, and
    ``handle_timer(now)`` once ``get_timer()``'s deadline passed.
Actions
    ``OpenConnection(conn)`` — connect to ``config.host``:``config.port``
    (TLS when ``config.tls``), then report ``connection_made`` (or
    ``connection_lost`` if that failed).  ``SendBytes(conn, data)`` — write.
    ``CloseConnection(conn)`` — close.  ``EndpointReady(url)`` — the stream
    named its endpoint; queued messages are on their way.
    ``JsonReceived(message, handle)`` — feed ``message`` to
    ``ClientSession.receive_json``.  ``RequestRefused(status, message)``.
    ``StreamEnded(handle=None, reason, resuming=False)`` — the transport is
    over; feed ``receive_eof``.  ``Closed()`` — after ``close``.

Theory of operation
-------------------
The GET stream is the machine: ``_TRANSITIONS`` maps (state, input) to
(effect, next state); a pair that is missing is a misuse by the caller
(``LocalProtocolError``, state unchanged), never a peer's doing — every peer
input is one of the listed ones.  The POST lane is a queue (``_outbox``) and
at most one POST on the wire; each request id sent waits in ``_awaiting``
until its answer comes on the stream, so the end of the stream can fail
exactly the calls that were still open, with the reason.
"""

from __future__ import annotations

import enum
import itertools
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import urljoin, urlsplit

import h11
import orjson

from .errors import INTERNAL_ERROR, LocalProtocolError
from .http_client import (
    Closed,
    HttpClientConfig,
    JsonReceived,
    OpenConnection,
    RequestRefused,
    StreamEnded,
    _error_object,
    _excerpt,
    _reason,
)
from .http_wire import CloseConnection, SendBytes, buffered, header_map
from .jsonrpc import RequestId
from .sse import SseDecoder, SseError, SseEvent

__all__ = [
    "EndpointReady",
    "SseClientAction",
    "SseClientConfig",
    "SseClientConnection",
    "SseState",
    "resolve_endpoint",
    "transition_table",
]

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_REASON_BYTES: Final = 4096  # of a refused GET's body: enough for the reason, never more


# --------------------------------------------------------------------------
# The endpoint
# --------------------------------------------------------------------------


def _origin(url: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an absolute http(s) URL, default port filled in; None otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else _DEFAULT_PORTS[scheme]


def resolve_endpoint(sse_url: str, data: str) -> str | None:
    """Where the ``endpoint`` event ``data`` says to POST, or None when it names nothing usable.

    2024-11-05 "HTTP with SSE": the URI is resolved against the SSE URL
    (``/messages?session_id=1`` and ``messages?x`` and an absolute URL all
    work).  With an absolute ``sse_url`` the result must be http(s) on the
    same origin; with a relative one (a path, as in unit tests) the result
    must stay relative too, since its origin could not be compared.  A URI
    with white space or control characters inside is refused.
    """
    uri = data.strip()
    if not uri or any(ch.isspace() or not ch.isprintable() for ch in uri):
        return None
    try:
        resolved = urljoin(sse_url, uri) if sse_url else uri
        parts = urlsplit(resolved)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return None
    base = _origin(sse_url)
    if base is None:  # a relative base: only a relative result can be checked, and it is same-origin
        return resolved if not parts.scheme and not parts.netloc else None
    return resolved if _origin(resolved) == base else None


# --------------------------------------------------------------------------
# Configuration and actions
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SseClientConfig:
    """The SSE URL of one 2024-11-05 server and how to talk to it.

    ``headers`` (auth) go on the GET and on every POST; protocol and
    hop-by-hop names are dropped as ``HttpClientConfig`` drops them (listed in
    ``refused_headers``).  ``host``/``port``/``tls``/``authority``/``target``
    are derived from ``url``.
    """

    url: str
    user_agent: str = "mcpx"
    headers: tuple[tuple[str, str], ...] = ()
    endpoint_timeout: float | None = 30.0
    max_event: int = 4 * 1024 * 1024
    max_body: int = 64 * 1024
    max_header_bytes: int = 64 * 1024
    max_queued: int = 1024
    # derived in __post_init__
    tls: bool = field(init=False, default=False)
    host: str = field(init=False, default="")
    port: int = field(init=False, default=0)
    authority: str = field(init=False, default="")
    target: str = field(init=False, default="/")
    refused_headers: tuple[str, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        # The URL and header rules are Streamable HTTP's: one place checks them.
        http = HttpClientConfig(url=self.url, headers=self.headers, user_agent=self.user_agent)
        if min(self.max_event, self.max_body, self.max_header_bytes, self.max_queued) < 1:
            raise ValueError("limits must be positive")
        if self.endpoint_timeout is not None and not self.endpoint_timeout > 0:
            raise ValueError("endpoint_timeout is a positive number of seconds, or None")
        set_ = object.__setattr__
        for name in ("tls", "host", "port", "authority", "target", "headers", "refused_headers"):
            set_(self, name, getattr(http, name))


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointReady:
    """The stream named its endpoint: messages are POSTed to ``url`` (absolute, same origin)."""

    url: str


SseClientAction = (
    OpenConnection
    | SendBytes
    | CloseConnection
    | EndpointReady
    | JsonReceived
    | RequestRefused
    | StreamEnded
    | Closed
)


# --------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------


class SseState(enum.Enum):
    IDLE = "idle"  # built; open() not called
    CONNECTING = "connecting"  # the GET is on its way or its answer is not a stream yet
    AWAITING_ENDPOINT = "awaiting-endpoint"  # 200 text/event-stream; no endpoint event yet
    READY = "ready"  # the endpoint is known: messages are POSTed
    ENDED = "ended"  # the stream is over; nothing more will arrive
    CLOSED = "closed"  # close() was called


class _In(enum.Enum):
    OPEN = "open()"
    HEAD_OK = "a 200 text/event-stream answer to the GET"
    REFUSED = "any other answer to the GET"
    ENDPOINT = "an endpoint event naming a usable URI"
    BAD_ENDPOINT = "an endpoint event naming nothing usable, or another origin"
    STREAM_END = "the stream ended, broke, or its connection dropped"
    TIMEOUT = "no endpoint event within endpoint_timeout"
    CLOSE = "close()"


_S = SseState
_TRANSITIONS: Final[Mapping[tuple[SseState, _In], tuple[str, SseState]]] = MappingProxyType(
    {
        (_S.IDLE, _In.OPEN): ("_open_get", _S.CONNECTING),
        (_S.IDLE, _In.CLOSE): ("_close_all", _S.CLOSED),
        (_S.CONNECTING, _In.HEAD_OK): ("_await_endpoint", _S.AWAITING_ENDPOINT),
        (_S.CONNECTING, _In.REFUSED): ("_end", _S.ENDED),
        (_S.CONNECTING, _In.STREAM_END): ("_end", _S.ENDED),
        (_S.CONNECTING, _In.TIMEOUT): ("_end", _S.ENDED),
        (_S.CONNECTING, _In.CLOSE): ("_close_all", _S.CLOSED),
        (_S.AWAITING_ENDPOINT, _In.ENDPOINT): ("_ready", _S.READY),
        (_S.AWAITING_ENDPOINT, _In.BAD_ENDPOINT): ("_end", _S.ENDED),
        (_S.AWAITING_ENDPOINT, _In.STREAM_END): ("_end", _S.ENDED),
        (_S.AWAITING_ENDPOINT, _In.TIMEOUT): ("_end", _S.ENDED),
        (_S.AWAITING_ENDPOINT, _In.CLOSE): ("_close_all", _S.CLOSED),
        (_S.READY, _In.ENDPOINT): ("_keep_endpoint", _S.READY),
        (_S.READY, _In.BAD_ENDPOINT): ("_keep_endpoint", _S.READY),
        (_S.READY, _In.STREAM_END): ("_end", _S.ENDED),
        (_S.READY, _In.CLOSE): ("_close_all", _S.CLOSED),
        (_S.ENDED, _In.CLOSE): ("_close_all", _S.CLOSED),
        (_S.CLOSED, _In.CLOSE): ("_nothing", _S.CLOSED),
    }
)
"""(state, input) → (effect, next state) of the GET stream; everything else is illegal."""


def transition_table() -> str:
    """``_TRANSITIONS`` as a Markdown table (for documentation and review)."""
    lines = ["| State | Input | Effect | Next state |", "| --- | --- | --- | --- |"]
    for (state, what), (effect, new_state) in _TRANSITIONS.items():
        lines.append(f"| {state.value} | {what.value} | `{effect.lstrip('_')}` | {new_state.value} |")
    return "\n".join(lines) + "\n"


@dataclass(slots=True, eq=False)
class _Post:
    payload: bytes
    ids: tuple[RequestId, ...]
    handle: int | None


@dataclass(slots=True, eq=False)
class _Conn:
    id: int
    role: str  # get | post
    parser: h11.Connection
    connected: bool = False
    closed: bool = False
    post: _Post | None = None  # the POST on the wire (role post)
    mode: str = "idle"  # idle | head | stream | accepted | refused
    status: int = 0
    content_type: str = ""
    buffer: bytearray = field(default_factory=bytearray)
    decoder: SseDecoder | None = None


def _is_id(value: Any) -> bool:
    return type(value) in (str, int)


class SseClientConnection:
    """The connections of one 2024-11-05 HTTP+SSE session; see the module docstring."""

    def __init__(self, config: SseClientConfig, *, conn_ids: Iterator[int] | None = None) -> None:
        self.config = config
        self._conn_ids = conn_ids if conn_ids is not None else itertools.count(1)
        self._state = SseState.IDLE
        self._actions: list[SseClientAction] = []
        self._get: _Conn | None = None
        self._lane: _Conn | None = None  # the POST connection (kept alive between POSTs)
        self._outbox: deque[_Post] = deque()
        self._awaiting: dict[RequestId, int | None] = {}  # request id -> handle, until answered
        self._endpoint: str | None = None
        self._endpoint_target = "/"
        self._deadline: float | None = None
        self._ended: str | None = None  # why the stream is over
        self._now = 0.0

    # -- introspection ----------------------------------------------------------------

    @property
    def state(self) -> SseState:
        return self._state

    @property
    def endpoint(self) -> str | None:
        """Where messages are POSTed (absolute URL), once the stream said so."""
        return self._endpoint

    @property
    def ended(self) -> str | None:
        """Why the stream is over, once it is."""
        return self._ended

    @property
    def open_connections(self) -> int:
        return sum(1 for c in (self._get, self._lane) if c is not None and not c.closed)

    def next_actions(self) -> list[SseClientAction]:
        """Everything queued since the last call, in order.  Call after every input."""
        actions, self._actions = self._actions, []
        return actions

    def get_timer(self) -> float | None:
        """When ``handle_timer`` must be called (the endpoint deadline), or None."""
        return self._deadline

    # -- the caller's side -------------------------------------------------------------

    def open(self, now: float) -> None:
        """GET the stream.  Drain actions after this; ``LocalProtocolError`` when called twice."""
        self._now = max(self._now, now)
        self._input(_In.OPEN, "")

    def send(self, payload: bytes, *, handle: int | None = None, now: float) -> None:
        """POST one payload of the client session (``Send.payload``; ``Send.stream`` as ``handle``)."""
        self._now = max(self._now, now)
        if self._state is SseState.CLOSED:
            raise LocalProtocolError("the connection to the server is closed")
        try:
            body = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise LocalProtocolError(f"a payload to send must be JSON: {exc}") from None
        items = body if isinstance(body, list) else [body]
        ids = tuple(m["id"] for m in items if isinstance(m, dict) and "method" in m and _is_id(m.get("id")))
        post = _Post(payload=payload, ids=ids, handle=handle)
        if self._ended is not None:
            self._fail_post(post, f"{self._ended}; the message was not sent", sent=False)
            return
        if len(self._outbox) >= self.config.max_queued:
            message = f"more than {self.config.max_queued} messages wait to be sent; not sent"
            self._fail_post(post, message, sent=False)
            return
        for rid in ids:
            self._awaiting[rid] = handle
        self._outbox.append(post)
        self._next_post()

    def close(self, now: float) -> None:
        """Close every connection (the server ends the session with the stream); ``Closed`` follows."""
        self._now = max(self._now, now)
        self._input(_In.CLOSE, "")

    # -- the driver's side -------------------------------------------------------------

    def connection_made(self, conn: int, now: float) -> None:
        """The connection asked for by ``OpenConnection(conn)`` is up: its request goes out."""
        self._now = max(self._now, now)
        c = self._conn(conn)
        if c is None or c.connected:
            return
        c.connected = True
        if c.role == "get":
            self._write_get(c)
        elif c.post is not None:
            self._write_post(c, c.post)

    def receive_data(self, conn: int, data: bytes, now: float) -> None:
        """Bytes read from ``conn``; ``b""`` when the server closed its side."""
        self._now = max(self._now, now)
        c = self._conn(conn)
        if c is None:
            return
        try:
            c.parser.receive_data(data)
        except RuntimeError:  # bytes after the server's own end
            return
        self._read(c, eof=not data)

    def connection_lost(self, conn: int, now: float) -> None:
        """The socket is gone (or never came up): whatever it carried ends here."""
        self._now = max(self._now, now)
        c = self._conn(conn)
        if c is None:
            return
        c.closed = True  # gone already: nothing to close
        why = (
            "the server closed the connection"
            if c.connected
            else f"mcpx could not connect to {self.config.authority}"
        )
        self._dropped(c, why)

    def handle_timer(self, now: float) -> None:
        """Call once ``get_timer()``'s deadline has passed: no endpoint event came in time."""
        self._now = max(self._now, now)
        if self._deadline is None or now < self._deadline:
            return
        timeout = self.config.endpoint_timeout
        self._input(_In.TIMEOUT, f"the server sent no endpoint event within {timeout:g}s")

    # -- the table ---------------------------------------------------------------------

    def _input(self, what: _In, detail: str) -> None:
        """Look ``what`` up in the table and carry out its effect (``detail``: a URL or a reason)."""
        try:
            effect, new_state = _TRANSITIONS[(self._state, what)]
        except KeyError:
            raise LocalProtocolError(f"{what.value} is not allowed in state {self._state.value}") from None
        self._state = new_state
        getattr(self, effect)(detail)

    # -- effects -----------------------------------------------------------------------

    def _open_get(self, detail: str) -> None:
        self._get = self._new_conn("get")
        if self.config.endpoint_timeout is not None:
            self._deadline = self._now + self.config.endpoint_timeout

    def _await_endpoint(self, detail: str) -> None:
        pass  # the deadline set by open() still runs

    def _ready(self, detail: str) -> None:
        endpoint = detail  # the resolved URL
        self._deadline = None
        self._endpoint = endpoint
        parts = urlsplit(endpoint)
        self._endpoint_target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._actions.append(EndpointReady(url=endpoint))
        self._next_post()

    def _keep_endpoint(self, detail: str) -> None:
        pass  # 2024-11-05 sends the endpoint once; a second one does not move the session

    def _end(self, detail: str) -> None:
        reason = detail  # why the stream is over
        self._deadline = None
        self._ended = reason
        for c in (self._get, self._lane):
            if c is not None:
                self._close(c)
        self._lane = None
        self._outbox.clear()
        self._fail_awaiting(reason)
        self._actions.append(StreamEnded(handle=None, reason=reason, resuming=False))

    def _close_all(self, detail: str) -> None:
        self._deadline = None
        for c in (self._get, self._lane):
            if c is not None:
                self._close(c)
        self._lane = None
        self._outbox.clear()
        self._awaiting.clear()  # the caller closed: the session's receive_eof fails what is open
        self._actions.append(Closed())

    def _nothing(self, detail: str) -> None:
        pass

    # -- connections -------------------------------------------------------------------

    def _conn(self, conn: int) -> _Conn | None:
        for c in (self._get, self._lane):
            if c is not None and c.id == conn and not c.closed:
                return c
        return None

    def _new_conn(self, role: str) -> _Conn:
        conn = next(self._conn_ids)
        if any(c is not None and c.id == conn for c in (self._get, self._lane)):
            raise LocalProtocolError(f"conn_ids gave {conn} twice")
        c = _Conn(
            id=conn,
            role=role,
            parser=h11.Connection(h11.CLIENT, max_incomplete_event_size=self.config.max_header_bytes),
        )
        self._actions.append(OpenConnection(conn=conn))
        return c

    def _close(self, c: _Conn) -> None:
        if not c.closed:
            c.closed = True
            self._actions.append(CloseConnection(conn=c.id))

    def _write(self, c: _Conn, request: h11.Request, body: bytes) -> bool:
        try:
            data = c.parser.send(request) or b""
            if body:
                data += c.parser.send(h11.Data(data=body)) or b""
            data += c.parser.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError as exc:
            self._close(c)
            self._dropped(c, f"mcpx could not write the request: {exc}")
            return False
        self._actions.append(SendBytes(conn=c.id, data=data))
        return True

    def _common_headers(self) -> list[tuple[str, str]]:
        return [("Host", self.config.authority), ("User-Agent", self.config.user_agent)]

    def _write_get(self, c: _Conn) -> None:
        headers = [
            *self._common_headers(),
            ("Accept", "text/event-stream"),
            ("Cache-Control", "no-cache"),
            *self.config.headers,
        ]
        if self._write(c, h11.Request(method="GET", target=self.config.target, headers=headers), b""):
            c.mode = "head"

    def _write_post(self, c: _Conn, post: _Post) -> None:
        headers = [
            *self._common_headers(),
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(post.payload))),
            *self.config.headers,
        ]
        request = h11.Request(method="POST", target=self._endpoint_target, headers=headers)
        if self._write(c, request, post.payload):
            c.mode = "head"

    # -- the POST lane -----------------------------------------------------------------

    def _next_post(self) -> None:
        """Put the next queued message on the wire, when the endpoint is known and the lane is free."""
        if self._state is not SseState.READY or not self._outbox:
            return
        c = self._lane
        if c is not None and (c.closed or c.post is not None):
            if not c.closed:
                return  # one POST at a time: the server reads them in order
            c = None
        if c is None:
            c = self._lane = self._new_conn("post")
        post = self._outbox.popleft()
        c.post = post
        if c.connected:
            self._write_post(c, post)

    def _post_done(self, c: _Conn) -> None:
        """The answer to ``c``'s POST ended: judge it, keep the connection if it can serve again."""
        post, c.post = c.post, None
        mode, c.mode = c.mode, "idle"
        if post is not None and mode == "refused":
            self._refused(post, c)
        c.buffer.clear()
        parser = c.parser
        if parser.our_state is h11.DONE and parser.their_state is h11.DONE:
            parser.start_next_cycle()
        else:
            self._close(c)
        self._next_post()

    def _refused(self, post: _Post, c: _Conn) -> None:
        body = bytes(c.buffer)
        error = _error_object(body) if c.content_type == "application/json" else None
        what = f"the server refused the message: HTTP {c.status}{_reason(c.status)}"
        if c.content_type:
            what += f" ({c.content_type})"
        if not post.ids:
            detail = error["message"] if error is not None else _excerpt(body)
            self._actions.append(
                RequestRefused(status=c.status, message=f"{what}: {detail}" if detail else what)
            )
            return
        if error is not None:
            self._fail_post(post, str(error["message"]), error=error)
            return
        data: dict[str, Any] = {"httpStatus": c.status}
        if body:
            data["body"] = _excerpt(body)
        excerpt = _excerpt(body)
        self._fail_post(post, f"{what}: {excerpt}" if excerpt else what, data=data)

    def _fail_post(
        self,
        post: _Post,
        message: str,
        *,
        error: Mapping[str, Any] | None = None,
        data: Mapping[str, Any] | None = None,
        sent: bool = True,
    ) -> None:
        """Fail the requests of ``post``; of a POST that went out, only those not answered on the stream yet."""
        synthesized = error is None
        if error is None:
            error = {"code": INTERNAL_ERROR, "message": message}
            if data:
                error = {**error, "data": dict(data)}
        for rid in post.ids:
            if sent and rid not in self._awaiting:
                continue  # the stream answered it already (before the POST's own answer came)
            self._awaiting.pop(rid, None)
            self._actions.append(
                JsonReceived(
                    message={"jsonrpc": "2.0", "id": rid, "error": dict(error)},
                    handle=post.handle,
                    synthesized=synthesized,
                )
            )

    def _fail_awaiting(self, reason: str) -> None:
        awaiting, self._awaiting = self._awaiting, {}
        for rid, handle in awaiting.items():
            error = {"code": INTERNAL_ERROR, "message": f"{reason} before the server's answer"}
            self._actions.append(
                JsonReceived(
                    message={"jsonrpc": "2.0", "id": rid, "error": error}, handle=handle, synthesized=True
                )
            )

    # -- reading -----------------------------------------------------------------------

    def _dropped(self, c: _Conn, why: str) -> None:
        """``c`` stopped carrying its answer (lost, closed early, malformed, unwritable)."""
        if c.role == "get":
            if c is self._get and self._state in (
                SseState.CONNECTING,
                SseState.AWAITING_ENDPOINT,
                SseState.READY,
            ):
                if c.mode == "refused":  # the refusal's body was cut short: the head says enough
                    self._input(_In.REFUSED, self._describe_refusal(c))
                else:
                    self._input(_In.STREAM_END, why)
            return
        post, c.post = c.post, None
        if c is self._lane:
            self._lane = None
        if post is not None:
            if c.mode == "refused":
                self._refused(post, c)
            elif c.mode != "accepted":
                self._fail_post(post, f"{why} before the server accepted the message")
        self._next_post()

    def _read(self, c: _Conn, *, eof: bool = False) -> None:
        while not c.closed:
            before = buffered(c.parser)
            try:
                event = c.parser.next_event()
            except h11.RemoteProtocolError as exc:
                self._close(c)
                if eof:  # h11's word for an answer cut short by the server going away
                    why = "the server closed the connection in the middle of its answer"
                elif exc.error_status_hint == 431:
                    why = self._malformed("its headers are too large")
                else:
                    why = self._malformed(str(exc))
                self._dropped(c, why)
                return
            if isinstance(event, h11.Response | h11.InformationalResponse) and (
                before - buffered(c.parser) > self.config.max_header_bytes
            ):
                # h11 bounds only a head still arriving; one that came whole is measured here.
                self._close(c)
                self._dropped(c, self._malformed("its headers are too large"))
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.ConnectionClosed):
                self._close(c)
                self._dropped(c, "the server closed the connection")
                return
            if c.mode != "head" and isinstance(event, h11.Response):
                self._close(c)  # an answer nobody asked for: the connection cannot be trusted
                self._dropped(c, "the server answered a request mcpx did not send")
                return
            if isinstance(event, h11.Response):
                self._head(c, event)
            elif isinstance(event, h11.Data):
                self._body(c, bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                self._body_end(c)
            # h11.InformationalResponse (1xx): nothing to do

    def _malformed(self, what: str) -> str:
        return f"the server's HTTP answer is malformed ({what})"

    def _head(self, c: _Conn, event: h11.Response) -> None:
        c.status = event.status_code
        headers = header_map(event.headers)
        c.content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if c.role == "get":
            if c.status == 200 and c.content_type == "text/event-stream":
                c.mode = "stream"
                c.decoder = SseDecoder(max_event=self.config.max_event)
                self._input(_In.HEAD_OK, "")
            else:
                c.mode = "refused"
            return
        c.mode = "accepted" if 200 <= c.status < 300 else "refused"

    def _body(self, c: _Conn, data: bytes) -> None:
        if c.mode == "stream":
            self._stream_data(c, data)
            return
        limit = _REASON_BYTES if c.role == "get" else self.config.max_body
        if c.mode == "refused" and len(c.buffer) < limit:
            c.buffer += data[: limit - len(c.buffer)]
        # an accepted POST's body ("Accepted") means nothing: its answer comes on the stream

    def _body_end(self, c: _Conn) -> None:
        if c.role == "post":
            self._post_done(c)
            return
        self._close(c)
        if c.mode == "refused":
            self._input(_In.REFUSED, self._describe_refusal(c))
        else:
            self._input(_In.STREAM_END, "the server ended the event stream")

    def _describe_refusal(self, c: _Conn) -> str:
        kind = f" ({c.content_type})" if c.content_type else " (no content type)"
        text = (
            f"the server answered the GET for the event stream with HTTP {c.status}{_reason(c.status)}{kind}"
        )
        if c.status == 200:
            text += ", not text/event-stream"
        excerpt = _excerpt(bytes(c.buffer))
        return f"{text}: {excerpt}" if excerpt else text

    def _stream_data(self, c: _Conn, data: bytes) -> None:
        assert c.decoder is not None
        try:
            events, broken = c.decoder.feed(data), None
        except SseError as exc:  # the events completed before the break still count
            events, broken = exc.events, exc
        self._stream_events(events)
        if broken is not None and self._state in (SseState.AWAITING_ENDPOINT, SseState.READY):
            self._close(c)
            self._input(_In.STREAM_END, f"the server's event stream broke: {broken}")

    def _stream_events(self, events: list[SseEvent]) -> None:
        for event in events:
            if self._state not in (SseState.AWAITING_ENDPOINT, SseState.READY):
                return  # the stream ended while these were read
            if event.event == "endpoint":
                endpoint = resolve_endpoint(self.config.url, event.data)
                if endpoint is None:
                    shown = _excerpt(event.data.encode())
                    self._input(
                        _In.BAD_ENDPOINT,
                        f"the server's endpoint event names {shown!r}, which is not a URI on "
                        f"{self.config.authority} (mcpx POSTs only to the SSE URL's origin)",
                    )
                else:
                    self._input(_In.ENDPOINT, endpoint)
            elif event.event == "message" and event.data:
                try:
                    value = orjson.loads(event.data)
                except orjson.JSONDecodeError:
                    continue  # not a JSON-RPC message: nothing to hand on
                self._deliver(value)
            # other event types (and id-only events) are not MCP's: ignored

    def _deliver(self, value: Any) -> None:
        self._actions.append(JsonReceived(message=value, handle=None))
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict) and "method" not in item and ("result" in item or "error" in item):
                rid = item.get("id")
                if isinstance(rid, str | int) and not isinstance(rid, bool):
                    self._awaiting.pop(rid, None)
