"""The HTTP binding's configuration, actions and records, and how a response is written.

``HttpServer`` (http_server.py, where its rules are) is written in layers;
this is the lowest.  ``_HttpBase.__init__`` holds every field the layers
share.  Writing: a JSON answer is written whole, with ``Content-Length``;
an event stream is chunked, primed with an event id from 2025-11-25
(basic/transports, resumability); a refusal is a JSON-RPC error object
under the HTTP status it carries (``http_status_for`` maps codes to
statuses), and closes the connection when the exchange cannot go on.  Session ids are
``session_id_for(session_key, n)``: HMAC-SHA256 of a counter under a key the
caller draws, 192 bits, url-safe (every revision's Streamable HTTP page,
session management: "globally unique and cryptographically secure").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import h11
import orjson

from .actions import Answered, CancelRequest, HandleRequest, PeerReplied, Subscribed, Trace
from .errors import HEADER_MISMATCH, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION, LocalProtocolError
from .http_wire import CloseConnection, SendBytes, holds_input, reason_phrase
from .jsonrpc import ErrorResponse, RequestId
from .revisions import LEGACY_REVISIONS, MODERN_REVISIONS, Revision
from .rounds import RoundTable
from .server_session import ServerConfig, ServerSession
from .sse import encode_event
from .tasks import TaskStore

_MIN_KEY_BYTES: Final = 16


def session_id_for(key: bytes, number: int) -> str:
    """The ``number``-th ``Mcp-Session-Id`` a server keyed ``key`` mints (from 1): 32 URL-safe characters.

    HMAC-SHA256 of the number under the key, cut to 192 bits: visible
    ASCII as every revision's transports page asks of a session id, and
    unguessable by anyone without the key.
    """
    digest = hmac.new(key, number.to_bytes(8, "big"), hashlib.sha256).digest()[:24]
    return base64.urlsafe_b64encode(digest).decode("ascii")


HEADERLESS: Final = Revision.V2025_03_26  # no MCP-Protocol-Version: what the transport pages say to assume


_PRIMING_FROM: Final = Revision.V2025_11_25  # priming events and retry (2025-11-25 basic/transports)


_LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


_WILDCARDS: Final = frozenset({"0.0.0.0", "::", ""})


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpConfig:
    """``transport.*`` settings for the HTTP binding."""

    mcp_path: str = "/mcp"
    sse_path: str = "/sse"
    messages_path: str = "/messages"
    bound_host: str = "127.0.0.1"
    allowed_origins: frozenset[str] = frozenset()
    allowed_hosts: frozenset[str] = frozenset()
    max_body: int = 4 * 1024 * 1024
    max_header_bytes: int = 16 * 1024
    request_timeout: float = 10.0
    sse_keepalive: float = 15.0
    sse_retry_ms: int = 1000
    replay_events: int = 256
    finished_streams_kept: int = 16
    session_idle: float = 1800.0
    max_sessions: int = 1000
    app_paths: tuple[str, ...] = ()
    """Paths (a path, or a prefix ending in ``/``) served by the embedding application on the
    same listener, under the same Origin and Host checks: each request becomes ``AppRequest``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEnded:
    """A legacy session ended; ``identity`` is the one its requests carried (``session:<id>``)."""

    identity: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AppRequest:
    """A whole request on one of ``HttpConfig.app_paths``; answer it with ``HttpServer.app_respond``
    (or ``app_respond_start`` / ``app_respond_data`` / ``app_respond_end`` for a streamed body)."""

    conn: int
    method: str
    target: str  # path and query, as sent
    headers: Mapping[str, str]  # lower-cased names
    body: bytes


HttpAction = (
    SendBytes
    | CloseConnection
    | HandleRequest
    | CancelRequest
    | Answered
    | PeerReplied
    | Subscribed
    | SessionEnded
    | AppRequest
    | Trace
)


_STATUS_BY_CODE: Final = {
    -32700: 400,
    -32600: 400,
    -32601: 404,
    -32602: 400,
    -32603: 500,
    HEADER_MISMATCH: 400,
    -32021: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
}


def http_status_for(code: int) -> int:
    """The HTTP status a 2026-07-28 error response carries (spec/messages.md §8's table).

    The table follows 2026-07-28 basic/transports/streamable-http and
    basic/index where they name a status.  Codes the table does not name: 500
    inside JSON-RPC's reserved range, 200 for an application's own codes (the
    body says what went wrong).
    """
    if code in _STATUS_BY_CODE:
        return _STATUS_BY_CODE[code]
    return 500 if -32768 <= code <= -32000 else 200


class _HttpError(Exception):
    """Refuse the current HTTP request with ``status`` (and a JSON-RPC error body)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: int = INVALID_REQUEST,
        data: Any = None,
        request_id: RequestId | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.data = data
        self.request_id = request_id
        self.headers = headers


@dataclass(slots=True)
class _Out:
    """The response being written on one connection."""

    conn: int
    accept_sse: bool
    mode: str = "pending"  # pending | json | sse | done
    keepalive_at: float | None = None
    extra_headers: tuple[tuple[str, str], ...] = ()
    http_status_by_code: bool = False  # 2026-07-28: status follows the error code
    stream: _Stream | None = None


@dataclass(slots=True)
class _Stream:
    """A logical response stream: a POST's, a session's GET stream, or an HTTP+SSE stream."""

    key: int
    session: _HttpSession | None
    kind: str  # post | get | legacy-sse
    resumable: bool
    priming: bool
    cancel_on_disconnect: bool  # 2026-07-28 and sessionless POSTs
    seq: int = 0
    buffer: deque[tuple[int, bytes]] = field(default_factory=deque)
    out: _Out | None = None
    done: bool = False
    replay_limit: int = 256


@dataclass(slots=True)
class _HttpSession:
    id: str
    session: ServerSession
    standalone: _Stream | None
    legacy_sse: bool
    last_active: float
    streams: dict[int, _Stream] = field(default_factory=dict)
    finished: deque[int] = field(default_factory=deque)


@dataclass(slots=True)
class _Conn:
    id: int
    parser: h11.Connection
    deadline: float | None
    method: bytes = b""  # the current request's, as sent
    target: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | bytearray = b""
    plain: bytes | None = None  # the bytes of a request read without h11, until answered (or handed over)
    out: _Out | None = None
    closed: bool = False
    started_request: bool = False
    reading: bool = False  # inside _process: a finished response must not recurse into it
    buffered: int = 0  # bytes h11 held when the current request began (header-size check)
    armed: dict[str, float] = field(default_factory=dict)  # its live timer entries by kind (_arm_conn)


def _host_names(http: HttpConfig) -> frozenset[str]:
    names = set(_LOOPBACK_HOSTS) | {h.lower() for h in http.allowed_hosts}
    bound = http.bound_host.lower().strip("[]")
    if bound not in _WILDCARDS:
        names.add(bound)
    return frozenset(names)


class _HttpBase:
    """The binding's state, and the writing of responses every layer uses."""

    if TYPE_CHECKING:  # defined by a later layer

        def _arm_conn(self, c: _Conn, when: float, kind: str) -> None: ...
        def _hand_to_h11(self, c: _Conn) -> None: ...
        def _process(self, c: _Conn, now: float) -> None: ...
        def _schedule_sweep(self, now: float) -> None: ...

    def __init__(
        self,
        config: ServerConfig,
        http: HttpConfig,
        *,
        session_key: bytes,
        rounds: RoundTable | None = None,
        tasks: TaskStore | None = None,
    ) -> None:
        self.config = config
        self._rounds = rounds  # shared: a 2026-07-28 retry may come on any connection
        self._tasks = tasks  # shared: a task is polled on any connection by whoever created it
        self._timed: set[ServerSession] = set()  # sessions whose questions have deadlines
        self._expired: set[int] = set()  # calls given up while parked: nothing left to discard
        self.http = http
        if len(session_key) < _MIN_KEY_BYTES:
            raise ValueError(f"session_key must be at least {_MIN_KEY_BYTES} random bytes")
        self._session_key = session_key
        self._session_numbers: Iterator[int] = itertools.count(1)
        self._tokens: Iterator[int] = itertools.count(1)
        self._keys: Iterator[int] = itertools.count(1)
        self._actions: list[HttpAction] = []
        self._conns: dict[int, _Conn] = {}
        self._sessions: dict[str, _HttpSession] = {}
        self._streams: dict[int, _Stream] = {}
        self._token_session: dict[int, ServerSession] = {}
        self._session_of: dict[int, _HttpSession] = {}  # id(ServerSession) -> session
        # Requests outside any session (2026-07-28, sessionless legacy POSTs)
        # each get a session of their own for as long as their stream lives,
        # so one client's ids, cancellations and listens never meet another's.
        self._ephemeral: dict[int, ServerSession] = {}
        self._legacy = tuple(r for r in LEGACY_REVISIONS if r in config.revisions)
        self._modern = tuple(r for r in MODERN_REVISIONS if r in config.revisions)
        self._allowed_hosts = _host_names(http)
        self._now = 0.0  # the latest time a caller told us
        self._wakeups: list[tuple[float, str, int]] = []
        self._next_sweep: float | None = None

    def _owner(self, token: int) -> ServerSession | None:
        if token in self._expired:
            self._expired.discard(token)
            self._token_session.pop(token, None)
            return None
        session = self._token_session.pop(token, None)
        if session is None:
            raise LocalProtocolError(f"no request with token {token} is in flight")
        return session if session.state.value != "closed" else None

    def _all_sessions(self) -> list[ServerSession]:
        return [*self._ephemeral.values(), *(s.session for s in self._sessions.values())]

    def _send(self, c: _Conn, event: h11.Event) -> None:
        if c.plain is not None:
            self._hand_to_h11(c)
            if c.closed:
                return
        try:
            data = c.parser.send(event)
        except h11.LocalProtocolError:
            self._close(c)
            return
        if data:
            self._actions.append(SendBytes(conn=c.id, data=data))

    def _write(self, c: _Conn, data: bytes) -> None:
        if not c.closed:
            self._send(c, h11.Data(data=data))

    def _respond_json(self, c: _Conn, out: _Out, status: int, payload: bytes) -> None:
        if c.plain is not None and not out.extra_headers:
            # What h11 would write for this response to a plain request, byte for byte.
            head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % (
                status,
                reason_phrase(status),
                len(payload),
            )
            self._actions.append(SendBytes(conn=c.id, data=head + payload))
            out.mode = "done"
            self._finish_response(c)
            return
        headers = [
            ("content-type", "application/json"),
            ("content-length", str(len(payload))),
            *out.extra_headers,
        ]
        self._send(c, h11.Response(status_code=status, headers=headers, reason=reason_phrase(status)))
        self._send(c, h11.Data(data=payload))
        out.mode = "done"
        self._finish_response(c)

    def _respond_plain(
        self, c: _Conn, status: int, payload: bytes, extra: tuple[tuple[str, str], ...] = ()
    ) -> None:
        if c.plain is not None and not c.closed:
            self._hand_to_h11(c)
        if c.closed or c.parser.our_state is not h11.SEND_RESPONSE:
            return
        headers = [("content-length", str(len(payload))), *extra]
        if payload:
            headers.insert(0, ("content-type", "application/json"))
        self._send(c, h11.Response(status_code=status, headers=headers, reason=reason_phrase(status)))
        if payload:
            self._send(c, h11.Data(data=payload))
        if c.out is not None:
            c.out.mode = "done"
        self._finish_response(c)

    def _start_sse(self, c: _Conn, out: _Out, *, prime: bool = True) -> None:
        headers = [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
            ("x-accel-buffering", "no"),
            *out.extra_headers,
        ]
        self._send(c, h11.Response(status_code=200, headers=headers, reason=b"OK"))
        out.mode = "sse"
        stream = out.stream
        if prime and stream is not None and stream.priming:
            self._write(
                c, encode_event(None, event_id=f"{stream.key}-{stream.seq}", retry_ms=self.http.sse_retry_ms)
            )

    def _end_response(self, out: _Out, *, close: bool = False) -> None:
        c = self._conns.get(out.conn)
        if out.stream is not None and out.stream.out is out:
            out.stream.out = None
        out.stream = None
        if c is None or c.closed:
            return
        if out.mode == "sse":
            self._send(c, h11.EndOfMessage())
        out.mode = "done"
        if close:
            self._close(c)
        else:
            self._finish_response(c)

    def _finish_response(self, c: _Conn) -> None:
        if c.closed:
            return
        if c.plain is not None:  # written without h11, which saw neither request nor response
            c.plain = None
            if c.out is not None and c.out.stream is not None and c.out.stream.out is c.out:
                c.out.stream.out = None
            c.out = None
            self._next_cycle(c)
            return
        if c.parser.our_state is h11.SEND_BODY:
            self._send(c, h11.EndOfMessage())
        if c.out is not None and c.out.stream is not None and c.out.stream.out is c.out:
            c.out.stream.out = None
        c.out = None
        if c.parser.our_state is h11.MUST_CLOSE or c.parser.their_state is h11.MUST_CLOSE:
            self._close(c)
            return
        if c.parser.our_state is h11.DONE and c.parser.their_state is h11.DONE:
            c.parser.start_next_cycle()
            self._next_cycle(c)

    def _next_cycle(self, c: _Conn) -> None:
        """The response is written and the connection kept: wait for the next request."""
        c.started_request = False
        c.deadline = self._now + self.http.request_timeout
        self._arm_conn(c, c.deadline, "deadline")
        if holds_input(c.parser):  # a pipelined request, or the client's end: read it now
            self._process(c, self._now)

    def _refuse(self, c: _Conn, exc: _HttpError, *, close: bool = False) -> None:
        if c.plain is not None:
            self._hand_to_h11(c)
            if c.closed:
                return
        if c.parser.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            self._close(c)
            return
        error = ErrorResponse(id=exc.request_id, code=exc.code, message=exc.message, data=exc.data).to_obj()
        payload = orjson.dumps(error)
        headers = [("content-type", "application/json"), ("content-length", str(len(payload))), *exc.headers]
        if close:
            headers.append(("connection", "close"))
        try:
            data = b"".join(
                c.parser.send(event) or b""
                for event in (
                    h11.Response(status_code=exc.status, headers=headers, reason=reason_phrase(exc.status)),
                    h11.Data(data=payload),
                    h11.EndOfMessage(),
                )
            )
            self._actions.append(SendBytes(conn=c.id, data=data))
        except h11.LocalProtocolError:
            self._close(c)
            return
        self._trace("http-refused", status=exc.status, message=exc.message)
        if close:
            self._close(c)
        else:
            c.out = None
            self._finish_response(c)

    def _close(self, c: _Conn) -> None:
        if c.closed:
            return
        c.closed = True
        c.deadline = None
        self._actions.append(CloseConnection(conn=c.id))

    def _trace(self, event: str, **detail: Any) -> None:
        if self.config.trace:
            self._actions.append(Trace(event=event, detail=detail))
