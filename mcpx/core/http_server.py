"""Streamable HTTP, both eras, and the 2024-11-05 HTTP+SSE transport, as one pure machine.

``HttpServer`` wraps one ``h11.Connection`` per TCP (or unix socket)
connection and feeds the same ``ServerSession`` machinery as stdio: a bigger
machine wrapping smaller ones.  The driver only moves bytes: it reports each
connection (``connection_made``), the bytes it reads (``receive_data``, ``b""``
at end) and the time; it drains ``next_actions()`` and writes ``SendBytes``,
closes on ``CloseConnection``, and runs the application for ``HandleRequest``
exactly as it does for stdio; ``SessionEnded(identity)`` says a legacy
session ended (deleted, idle, evicted, or its SSE stream lost), so the
application can let go of what it kept for it.  Session ids are derived
from ``session_key``, a secret the caller draws (randomness stays outside the
core): the n-th is ``session_id_for(session_key, n)``, 192 bits of HMAC-SHA256,
as unguessable as the key.  A whole, plain
POST read in one chunk, and its plain JSON answer, skip h11
(``_plain_request``: h11's grammar, and the bytes h11 would write); anything
else is h11's.

Rules (basic/transports of 2024-11-05 to 2025-11-25; 2026-07-28
basic/transports/streamable-http; spec/server-obligations.md, "Streamable HTTP
and HTTP+SSE"; spec/messages.md §5, §8):

Every request
    ``Origin``, when present, must be loopback, the server's own address, or
    listed in ``allowed_origins`` (else 403); ``Host`` must name the server
    (loopback names, the bound address, ``allowed_hosts``) so DNS rebinding
    fails (403); a POST body must be JSON (415) and at most ``max_body``
    bytes (413); headers at most ``max_header_bytes`` (431); headers and body
    must arrive within ``request_timeout`` (408, then close).
Legacy shape (2025-03-26, 2025-06-18, 2025-11-25)
    Only ``initialize`` mints ``Mcp-Session-Id``; an unknown or terminated
    session is 404; ``DELETE`` ends one.  A POST's response is one JSON object
    unless something must go out before the result (progress, a log message,
    a server request), when it becomes ``text/event-stream`` — or when it has
    been silent for ``sse_keepalive`` and the client accepts event streams,
    when it carries a comment each interval until the answer.  Client
    notifications and responses get 202.  Each session has one GET stream for
    what mcpx pushes.  Within a session a dropped connection is not a
    cancellation; events are kept (bounded, per stream) and a GET with
    ``Last-Event-ID`` resumes exactly the stream the id names.  A POST outside
    any session is judged by its ``MCP-Protocol-Version`` header (2025-03-26
    when absent), is never sent a server request, and is cancelled when its
    connection goes.  Batches only from 2025-03-26 peers.
2026-07-28
    ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` are required and
    must agree with the body, ``=?base64?…?=`` values decoded, as must the
    ``Mcp-Param-*`` headers of a tool's ``x-mcp-header`` arguments (-32020,
    400).  No session is minted or echoed.  The HTTP status is a function of
    the JSON-RPC error code (``http_status_for``).  Closing the response
    stream cancels the request.
2024-11-05 HTTP+SSE
    A GET on ``sse_path`` opens a stream whose first event, ``endpoint``,
    names ``messages_path?session_id=…``; messages POSTed there get 202 and
    their answers go down the stream.  Losing the stream ends the session.

A GET or DELETE on the MCP endpoint that belongs to no legacy session is 405,
as 2026-07-28 asks (spec/revision-conflicts.md).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import hmac
import itertools
import re
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import h11
import orjson

from .actions import (
    Answered,
    CancelRequest,
    Close,
    EndStream,
    HandleRequest,
    PeerReplied,
    Send,
    Subscribed,
    SuspendStream,
    Trace,
)
from .errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    LocalProtocolError,
)
from .http_wire import CloseConnection, SendBytes, buffered, header_map, holds_input, reason_phrase
from .jsonrpc import ErrorResponse, RequestId, repeated_member
from .revisions import (
    LEGACY_REVISIONS,
    META_PROTOCOL_VERSION,
    MODERN_REVISIONS,
    REVISIONS,
    Revision,
)
from .rounds import Question, RoundTable
from .server_session import ServerConfig, ServerSession
from .sse import comment, encode_event
from .tasks import TaskStore

__all__ = [
    "AppRequest",
    "CloseConnection",
    "HttpAction",
    "HttpConfig",
    "HttpServer",
    "SendBytes",
    "SessionEnded",
    "http_status_for",
    "session_id_for",
]

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
_NAME_PARAM: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
_BASE64_VALUE: Final = re.compile(r"=\?base64\?([A-Za-z0-9+/=]*)\?=\Z")
# The plain path's grammar: h11's (its _abnf module: token, field-value, request-line) for
# HTTP/1.1 requests only.
_TOKEN: Final = r"[-!#$%&'*+.^_`|~0-9a-zA-Z]+"
_FIELD: Final = r"(" + _TOKEN + r"):[ \t]*((?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?)[ \t]*"
_PLAIN_REQUEST_LINE: Final = re.compile(_TOKEN + r" [\x21-\x7e]+ HTTP/1\.1", re.ASCII)
_PLAIN_HEADER: Final = re.compile(_FIELD, re.ASCII)
_PLAIN_HEADERS: Final = re.compile(r"(?:" + _FIELD + r"\r\n)*" + _FIELD, re.ASCII)
# Headers that change how h11 frames or keeps the exchange: a request with any goes to h11.
_H11_HEADERS: Final = frozenset({"transfer-encoding", "connection", "expect", "upgrade", "te", "trailer"})


# --------------------------------------------------------------------------
# Configuration and actions
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# Internal state
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


class HttpServer:
    """All HTTP connections of one MCP endpoint; see the module docstring for the rules."""

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

    # ------------------------------------------------------------------
    # Driver side
    # ------------------------------------------------------------------

    def next_actions(self) -> list[HttpAction]:
        """Everything queued since the last call, in order.  Call after every input."""
        actions, self._actions = self._actions, []
        return actions

    def connection_made(self, conn: int, now: float) -> None:
        self._now = max(self._now, now)
        if conn in self._conns:
            raise LocalProtocolError(f"connection {conn} is already open")
        self._conns[conn] = _Conn(
            id=conn,
            parser=h11.Connection(h11.SERVER, max_incomplete_event_size=self.http.max_header_bytes),
            deadline=now + self.http.request_timeout,
        )
        self._arm_conn(self._conns[conn], now + self.http.request_timeout, "deadline")

    def receive_data(self, conn: int, data: bytes, now: float) -> None:
        """Bytes read from ``conn``; ``b""`` when the client closed its side."""
        self._now = max(self._now, now)
        c = self._conns.get(conn)
        if c is None or c.closed:
            return
        if c.plain is not None:
            self._hand_to_h11(c)  # more bytes while a plain request is answered: h11 holds them
            if c.closed:
                return
        elif (
            data[:5] == b"POST "
            and c.out is None
            and not c.reading
            and c.parser.our_state is h11.IDLE
            and c.parser.their_state is h11.IDLE
        ):
            c.started_request = True  # bytes of a request: the deadline now answers 408
            request = self._plain_request(c, data)
            if request is not None:
                self._read_plain(c, data, request, now)
                return
        if data and c.parser.our_state is h11.IDLE:
            c.started_request = True  # bytes of a request: the deadline now answers 408
        try:
            c.parser.receive_data(data)
        except RuntimeError:  # data after the client's own end: nothing to read
            return
        self._process(c, now)

    def connection_lost(self, conn: int, now: float) -> None:
        """The socket is gone (either side); forget the connection."""
        self._now = max(self._now, now)
        c = self._conns.pop(conn, None)
        if c is None:
            return
        c.closed = True
        self._detach(c, now)

    def get_timer(self) -> float | None:
        # A heap of armed times, checked lazily: an entry whose connection
        # moved on is dropped (or, if its time only moved later, pushed again
        # at the new time) when it reaches the top.  Constant time per call,
        # however many connections are open.
        heap = self._wakeups
        while heap and not self._still_armed(*heap[0]):
            heapq.heappop(heap)
        timer = heap[0][0] if heap else None
        rounds = self._rounds.get_timer() if self._rounds is not None else None
        if rounds is not None and (timer is None or rounds < timer):
            timer = rounds
        for session in self._timed:
            deadline = session.get_timer()
            if deadline is not None and (timer is None or deadline < timer):
                timer = deadline
        return timer

    def _asking_sessions(self) -> list[ServerSession]:
        """Sessions with a legacy question out: their deadlines are timers too."""
        return list(self._timed)

    def _schedule_sweep(self, now: float) -> None:
        """Idle sessions are looked for a few times per ``session_idle``, not per request."""
        if not self._sessions:
            self._next_sweep = None
            return
        self._next_sweep = now + self.http.session_idle / 4
        self._arm(self._next_sweep, "sweep")

    def _arm(self, when: float, kind: str, conn: int = 0) -> None:
        heapq.heappush(self._wakeups, (when, kind, conn))

    def _arm_conn(self, c: _Conn, when: float, kind: str) -> None:
        """Arm ``c``'s request deadline or keep-alive at ``when``.

        Each connection keeps at most one live heap entry per kind, at or
        before its time (``armed``): a time that only moves later (every
        request moves both) pushes nothing; ``_still_armed`` pushes the entry
        again at the later time when the earlier one comes up.
        """
        armed = c.armed.get(kind)
        if armed is None or when < armed:
            c.armed[kind] = when
            heapq.heappush(self._wakeups, (when, kind, c.id))

    def _still_armed(self, when: float, kind: str, conn: int) -> bool:
        if kind == "sweep":
            return bool(self._sessions) and when == self._next_sweep
        c = self._conns.get(conn)
        if c is None or c.closed or c.armed.get(kind) != when:
            return False  # gone, or an entry a later-armed earlier time superseded
        keepalive = c.out.keepalive_at if c.out is not None else None
        current = c.deadline if kind == "deadline" else keepalive
        if current == when:
            return True
        # Not due at ``when`` (the caller pops this entry): disarmed, or moved later and pushed again.
        del c.armed[kind]
        if current is not None and current > when:
            c.armed[kind] = current
            heapq.heappush(self._wakeups, (current, kind, conn))
        return False

    def handle_timer(self, now: float) -> None:
        self._now = max(self._now, now)
        if self._rounds is not None:
            for parked in self._rounds.expire(now):
                self._expired.add(parked.token)
                self._actions.append(
                    CancelRequest(token=parked.token, reason="the client did not come back with its answers")
                )
        for session in self._asking_sessions():
            session.handle_timer(now)
            self._pump(session)
        for c in list(self._conns.values()):
            if c.closed:
                continue
            if c.deadline is not None and now >= c.deadline:
                if c.started_request:
                    message = (
                        f"the request's headers and body did not arrive within {self.http.request_timeout:g} s "
                        "(transport.requestTimeout); send them without pausing"
                    )
                    self._refuse(c, _HttpError(408, message), close=True)
                else:
                    self._close(c)
                continue
            out = c.out
            if out is not None and out.keepalive_at is not None and now >= out.keepalive_at:
                if out.mode == "pending" and out.accept_sse:
                    self._start_sse(c, out)
                if out.mode == "sse":
                    self._write(c, comment("keep-alive"))
                out.keepalive_at = now + self.http.sse_keepalive
                self._arm_conn(c, out.keepalive_at, "keepalive")
        if self._next_sweep is not None and now >= self._next_sweep:
            for s in list(self._sessions.values()):
                if now >= s.last_active + self.http.session_idle and self._idle(s):
                    self._end_session(s, "idle")
            self._schedule_sweep(now)

    # ------------------------------------------------------------------
    # Application side (the same calls as a ServerSession, routed by token)
    # ------------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Tell the machine the time before application calls (``respond`` and the rest)."""
        self._now = max(self._now, now)

    def respond(self, token: int, result: Mapping[str, Any]) -> None:
        session = self._owner(token)
        if session is not None:
            session.respond(token, result)
            self._pump(session)

    def respond_error(self, token: int, code: int, message: str, data: Any = None) -> None:
        session = self._owner(token)
        if session is not None:
            session.respond_error(token, code, message, data)
            self._pump(session)

    def discard(self, token: int) -> None:
        session = self._owner(token)
        if session is not None:
            session.discard(token)
            self._pump(session)

    def progress(
        self, token: int, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        session = self._token_session.get(token)
        if session is None:
            return False
        sent = session.progress(token, progress, total, message)
        self._pump(session)
        return sent

    def log(self, level: str, data: Any, *, logger: str | None = None, token: int | None = None) -> bool:
        session = self._token_session.get(token) if token is not None else None
        if session is None:
            return False
        sent = session.log(level, data, logger=logger, token=token)
        self._pump(session)
        return sent

    def ask(self, token: int, questions: list[Question]) -> int:
        """Put questions to the client of call ``token`` (see ``ServerSession.ask``)."""
        session = self._token_session.get(token)
        if session is None:
            raise LocalProtocolError(f"no request with token {token} is in flight")
        session.advance(self._now)
        ask_id = session.ask(token, questions)
        self._pump(session)
        return ask_id

    def promote(self, token: int) -> bool:
        """Make call ``token`` a task now, where its client can take one (``ServerSession.promote``)."""
        session = self._token_session.get(token)
        if session is None:
            return False
        done = session.promote(token)
        self._pump(session)
        return done

    def suspend_stream(self, token: int) -> None:
        session = self._token_session.get(token)
        if session is not None:
            session.suspend_stream(token)
            self._pump(session)

    def notify_list_changed(self, kind: str) -> None:
        for session in self._all_sessions():
            session.notify_list_changed(kind)
            self._pump(session)

    def notify_resource_updated(self, uri: str) -> None:
        for session in self._all_sessions():
            session.notify_resource_updated(uri)
            self._pump(session)

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

    # ------------------------------------------------------------------
    # Reading requests
    # ------------------------------------------------------------------

    def _process(self, c: _Conn, now: float) -> None:
        # Pipelined requests are read by this loop, never by recursion: a
        # response finished inside it only starts the next cycle.
        if c.reading:
            return
        c.reading = True
        try:
            self._read_events(c, now)
        finally:
            c.reading = False

    def _read_events(self, c: _Conn, now: float) -> None:
        while not c.closed:
            if c.parser.their_state is h11.IDLE:
                c.buffered = buffered(c.parser)
            try:
                event = c.parser.next_event()
            except h11.RemoteProtocolError as exc:
                status = exc.error_status_hint if exc.error_status_hint >= 400 else 400
                message = self._too_large_headers() if status == 431 else f"malformed HTTP request: {exc}"
                self._refuse(c, _HttpError(status, message), close=True)
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                c.started_request = True
                c.method, c.target = event.method, event.target
                # h11 bounds only a header block still arriving; one that came
                # whole is measured here, in the same bytes h11 counts, so the
                # verdict does not depend on how the block was cut into reads.
                size = c.buffered - buffered(c.parser)
                if size > self.http.max_header_bytes:
                    self._refuse(c, _HttpError(431, self._too_large_headers()), close=True)
                    return
                c.headers = header_map(event.headers)
                c.body = bytearray()
                length = c.headers.get("content-length")
                if length is not None and _is_decimal(length) and int(length) > self.http.max_body:
                    self._refuse(
                        c, _HttpError(413, f"the body exceeds {self.http.max_body} bytes"), close=True
                    )
                    return
            elif isinstance(event, h11.Data):
                c.body += event.data
                if len(c.body) > self.http.max_body:
                    self._refuse(
                        c, _HttpError(413, f"the body exceeds {self.http.max_body} bytes"), close=True
                    )
                    return
            elif isinstance(event, h11.EndOfMessage):
                self._request_read(c, now)
                if c.out is not None:
                    # Answered later (the application's, or a stream): until then h11 has only
                    # PAUSED or NEED_DATA to give, and what arrives meanwhile (more bytes, the
                    # client's end) comes through receive_data, which reads again.
                    return
            elif isinstance(event, h11.ConnectionClosed):
                self._detach(c, now)
                self._close(c)
                return

    def _request_read(self, c: _Conn, now: float) -> None:
        """A whole request is in (``c.method``, ``target``, ``headers``, ``body``): answer or route it."""
        c.deadline = None
        try:
            self._route(c, now)
        except _HttpError as exc:
            self._refuse(c, exc)
        except Exception as exc:  # a bug here must cost one request, not the server
            self._actions.append(Trace(event="internal-error", detail={"error": repr(exc)}))
            self._refuse(
                c,
                _HttpError(500, f"internal error in mcpx: {type(exc).__name__}", code=INTERNAL_ERROR),
                close=True,
            )

    # -- the plain path: a whole, simple request in one read, and its JSON answer, without h11 --
    #
    # Nearly every request a host makes is a keep-alive HTTP/1.1 POST of one JSON body, read
    # whole in one chunk, and answered with one JSON object (2025-11-25 and 2026-07-28
    # transports pages: "application/json" unless the server streams).  h11 costs more than
    # the rest of the binding together for that exchange, so such a request is read here and
    # its JSON answer written here, and h11 is kept for everything else: a request it must
    # see whole (another method, chunked, Expect, Upgrade, Connection, HTTP/1.0, a head or
    # body over the limits, bytes that are not exactly one request), and any answer but a
    # plain JSON one.
    # The grammar below is h11's own (a subset of it), so a request read here is one h11
    # would have read the same way; when the answer turns out to need h11 (an event stream,
    # a refusal, a 202, more bytes arriving meanwhile) the request's bytes are handed to h11
    # first (``_hand_to_h11``), which then stands where it would have stood.

    def _plain_request(self, c: _Conn, data: bytes) -> tuple[str, dict[str, str], int] | None:
        """``data`` as one whole plain request: (request line, headers, body start), or None for h11."""
        if holds_input(c.parser):
            return None
        end = data.find(b"\r\n\r\n")
        if end < 0 or end + 4 > self.http.max_header_bytes:
            return None
        head = data[:end].decode("latin-1")
        line, _, block = head.partition("\r\n")
        if not line.endswith(" HTTP/1.1") or _PLAIN_REQUEST_LINE.fullmatch(line) is None:
            return None
        if _PLAIN_HEADERS.fullmatch(block) is None:
            return None  # obs-fold, a bad byte, a bare CR or LF: h11 says what is wrong
        headers: dict[str, str] = {}
        for raw_name, value in _PLAIN_HEADER.findall(block):
            name = raw_name.lower()
            if name in _H11_HEADERS:
                return None
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        length = headers.get("content-length")
        host = headers.get("host")
        if (
            length is None
            or not _is_decimal(length)
            or len(length) > 20
            or host is None
            or "," in host  # two Host headers: h11 refuses them
            or int(length) > self.http.max_body
            or len(data) - end - 4 != int(length)
        ):
            return None
        return line, headers, end + 4

    def _read_plain(
        self, c: _Conn, data: bytes, request: tuple[str, dict[str, str], int], now: float
    ) -> None:
        line, headers, start = request
        method, _, rest = line.partition(" ")
        c.method, c.target = method.encode("latin-1"), rest[: -len(" HTTP/1.1")].encode("latin-1")
        c.headers = headers
        c.body = data[start:]
        c.plain = data
        c.reading = True  # as in _process: a response finished inside reads nothing
        try:
            self._request_read(c, now)
        finally:
            c.reading = False
        if c.plain is None and not c.closed and c.out is None and holds_input(c.parser):
            self._process(c, now)  # answered through h11, which holds more: read it

    def _hand_to_h11(self, c: _Conn) -> None:
        """The plain request on ``c`` needs h11 after all: feed it the request's bytes, as it would have had them."""
        raw, c.plain = c.plain, None
        assert raw is not None
        try:
            c.parser.receive_data(raw)
            while not isinstance(c.parser.next_event(), h11.EndOfMessage):
                pass
        except h11.ProtocolError as exc:  # never: the plain grammar is h11's
            self._actions.append(Trace(event="internal-error", detail={"error": repr(exc)}))
            self._close(c)

    def _route(self, c: _Conn, now: float) -> None:
        self._check_origin_and_host(c)
        raw = c.target
        query = ""
        if raw[:1] == b"/" and raw[:2] != b"//" and b"?" not in raw and b"#" not in raw:
            path = raw.decode("latin-1")  # a plain path (origin-form, no query): what urlsplit gives
        else:
            try:
                target = urlsplit(raw.decode("latin-1"))
            except ValueError:
                raise _HttpError(400, "the request target is not a valid URL; request /mcp") from None
            path, query = target.path, target.query
        method = c.method.decode("ascii", "replace")
        if path == self.http.mcp_path:
            if method == "POST":
                self._post(c, now)
            elif method == "GET":
                self._get(c, now)
            elif method == "DELETE":
                self._delete(c, now)
            else:
                raise _HttpError(
                    405, f"{method} is not supported here", headers=(("allow", "GET, POST, DELETE"),)
                )
        elif path == self.http.sse_path and self._serves_http_sse():
            if method != "GET":
                raise _HttpError(405, "the SSE endpoint takes GET", headers=(("allow", "GET"),))
            self._open_legacy_sse(c, now)
        elif path == self.http.messages_path and self._serves_http_sse():
            if method != "POST":
                raise _HttpError(405, "the message endpoint takes POST", headers=(("allow", "POST"),))
            self._post_legacy_sse(c, parse_qs(query), now)
        elif any(path == p or (p.endswith("/") and path.startswith(p)) for p in self.http.app_paths):
            c.out = _Out(conn=c.id, accept_sse=False)
            self._actions.append(
                AppRequest(
                    conn=c.id,
                    method=method,
                    target=c.target.decode("latin-1"),
                    headers=dict(c.headers),
                    body=bytes(c.body),
                )
            )
        else:
            raise _HttpError(404, f"no MCP endpoint at {path}; use {self.http.mcp_path}")

    # -- the application's paths (HttpConfig.app_paths) ----------------------------------

    def app_respond(
        self,
        conn: int,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """Answer an ``AppRequest`` in one piece (a no-op if the connection has gone)."""
        c = self._app_conn(conn)
        if c is None:
            return
        extra = (("content-type", content_type), ("content-length", str(len(body))), *headers)
        self._send(c, h11.Response(status_code=status, headers=list(extra), reason=reason_phrase(status)))
        if body:
            self._send(c, h11.Data(data=body))
        assert c.out is not None
        c.out.mode = "done"
        self._finish_response(c)

    def app_respond_start(
        self, conn: int, status: int, *, content_type: str, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        """Begin a streamed answer to an ``AppRequest``; ``app_respond_data`` then ``app_respond_end`` follow."""
        c = self._app_conn(conn)
        if c is None:
            return
        extra = (("content-type", content_type), ("cache-control", "no-cache"), *headers)
        self._send(c, h11.Response(status_code=status, headers=list(extra), reason=reason_phrase(status)))
        assert c.out is not None
        c.out.mode = "app-stream"

    def app_respond_data(self, conn: int, data: bytes) -> None:
        c = self._conns.get(conn)
        if c is not None and c.out is not None and c.out.mode == "app-stream" and data:
            self._write(c, data)

    def app_respond_end(self, conn: int) -> None:
        c = self._conns.get(conn)
        if c is None or c.closed or c.out is None or c.out.mode != "app-stream":
            return
        c.out.mode = "done"
        self._finish_response(c)

    def _app_conn(self, conn: int) -> _Conn | None:
        c = self._conns.get(conn)
        if c is None or c.closed or c.out is None or c.out.mode != "pending":
            return None
        if c.plain is not None:
            self._hand_to_h11(c)
        if c.closed or c.parser.our_state is not h11.SEND_RESPONSE:
            return None
        return c

    def _too_large_headers(self) -> str:
        return (
            f"the request's headers exceed {self.http.max_header_bytes} bytes "
            "(transport.maxHeaderBytes); send fewer or smaller headers"
        )

    def _serves_http_sse(self) -> bool:
        return Revision.V2024_11_05 in self.config.revisions

    def _check_origin_and_host(self, c: _Conn) -> None:
        # Repeated headers arrive joined with ", " (_headers); neither an origin nor a host holds a
        # comma, so a comma is two headers (or a list in one): which one would the check have seen?
        origin = c.headers.get("origin")
        if origin is not None:
            if "," in origin:
                raise _HttpError(400, f"one Origin, once: got {origin!r}")
            if not self._origin_allowed(origin):
                raise _HttpError(403, f"Origin {origin!r} is not allowed; add it to transport.allowedOrigins")
        host = c.headers.get("host")
        if host is None:
            raise _HttpError(403, "a request must name this server in a Host header")
        if "," in host:
            raise _HttpError(400, f"one Host, once: got {host!r}")
        if not _valid_port(host):
            raise _HttpError(400, f"Host {host!r} is not host[:port] with a port from 1 to 65535")
        if _host_part(host) not in self._allowed_hosts:
            raise _HttpError(
                403, f"Host {host!r} does not name this server; add it to transport.allowedHosts"
            )

    def _origin_allowed(self, origin: str) -> bool:
        if origin in self.http.allowed_origins:
            return True
        try:
            parts = urlsplit(origin)
            hostname = parts.hostname
        except ValueError:
            return False  # not a URL at all
        if parts.scheme not in ("http", "https") or not hostname:
            return False
        try:
            port = parts.port  # a port that is not a number from 0 to 65535 raises
        except ValueError:
            return False
        if port == 0 or parts.netloc.endswith(":"):
            return False  # "http://localhost:0", "http://localhost:": no origin a browser sends
        hostname = hostname.lower()
        bound = self.http.bound_host.lower().strip("[]")
        return hostname in _LOOPBACK_HOSTS or (bound not in _WILDCARDS and hostname == bound)

    # ------------------------------------------------------------------
    # POST on the MCP endpoint
    # ------------------------------------------------------------------

    def _post(self, c: _Conn, now: float) -> None:
        content_type = c.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            raise _HttpError(415, "a POST body must be JSON (Content-Type: application/json)")
        accept = c.headers.get("accept", "")
        accept_sse = "text/event-stream" in accept or "*/*" in accept
        try:
            body = orjson.loads(c.body)
        except orjson.JSONDecodeError as exc:
            raise _HttpError(400, f"Parse error: {exc}", code=PARSE_ERROR) from None
        repeated = repeated_member(c.body) if type(body) is dict else None
        if repeated is not None:  # which of the two would the checks below have judged?
            raise _HttpError(
                400,
                f"Invalid Request: member {repeated!r} appears more than once in the message",
                code=INVALID_REQUEST,
            )
        if not accept_sse and _has_listen(body):
            raise _HttpError(
                406,
                "subscriptions/listen is answered on an event stream; send Accept: text/event-stream",
                request_id=_id_of(body),
            )
        version_header = c.headers.get("mcp-protocol-version")
        header_rev = self._header_revision(version_header, body)
        if header_rev is not None and header_rev.is_modern:
            self._post_modern(c, body, accept_sse, now)
            return
        if _looks_modern(body):
            raise _HttpError(
                400,
                "a request with 2026-07-28 _meta needs the MCP-Protocol-Version header to match it",
                code=HEADER_MISMATCH,
                request_id=_id_of(body),
            )
        session_id = c.headers.get("mcp-session-id")
        params = body.get("params") if isinstance(body, dict) else None
        if (
            _is_initialize(body)
            and isinstance(params, dict)
            and isinstance(params.get("protocolVersion"), str)
        ):
            self._initialize(c, body, accept_sse, now)
            return
        if session_id is not None:
            hs = self._sessions.get(session_id)
            if hs is None or hs.legacy_sse:
                raise _HttpError(
                    404,
                    "unknown or terminated session; send initialize without Mcp-Session-Id",
                    request_id=_id_of(body),
                )
            negotiated = hs.session.negotiated_revision
            if header_rev is not None and negotiated is not None and header_rev != negotiated:
                raise _HttpError(
                    400,
                    f"this session negotiated {negotiated}, but MCP-Protocol-Version says {header_rev}",
                    request_id=_id_of(body),
                )
            hs.last_active = now
            stream = self._new_stream(hs, "post", resumable=True)
            self._feed(c, hs.session, body, stream, None, accept_sse, ())
            return
        stream = self._new_stream(None, "post", resumable=False)
        self._feed(
            c, self._ephemeral_session(stream, c), body, stream, header_rev or HEADERLESS, accept_sse, ()
        )

    def _header_revision(self, value: str | None, body: Any) -> Revision | None:
        if value is None:
            return None
        value = value.strip()
        if value in REVISIONS and Revision(value) in self.config.revisions:
            return Revision(value)
        supported = [str(r) for r in self._modern]
        raise _HttpError(
            400,
            f"Unsupported protocol version {value!r} in MCP-Protocol-Version; this server speaks "
            f"{', '.join(str(r) for r in self.config.revisions)}",
            code=UNSUPPORTED_PROTOCOL_VERSION,
            data={"supported": supported, "requested": value},
            request_id=_id_of(body),
        )

    def _mint_session_id(self) -> str:
        """The next ``Mcp-Session-Id``, derived from the key (``session_id_for``)."""
        return session_id_for(self._session_key, next(self._session_numbers))

    def _initialize(self, c: _Conn, body: Any, accept_sse: bool, now: float) -> None:
        if len(self._sessions) >= self.http.max_sessions and not self._evict_idle():
            raise _HttpError(503, "too many open sessions; try again later", request_id=_id_of(body))
        session_id = self._mint_session_id()
        session = ServerSession(
            self.config,
            can_push=True,
            tokens=self._tokens,
            rounds=self._rounds,
            owns_rounds=False,
            tasks=self._tasks,
            identity=f"session:{session_id}",
            defer_task_questions=True,
        )
        hs = _HttpSession(id=session_id, session=session, standalone=None, legacy_sse=False, last_active=now)
        self._sessions[session_id] = hs
        self._session_of[id(session)] = hs
        if self._next_sweep is None:
            self._schedule_sweep(now)
        stream = self._new_stream(hs, "post", resumable=True)
        self._feed(c, session, body, stream, None, accept_sse, (("mcp-session-id", session_id),))
        if session.negotiated_revision is None:  # refused: no session after all
            self._forget_session(hs)

    def _post_modern(self, c: _Conn, body: Any, accept_sse: bool, now: float) -> None:
        if not isinstance(body, dict):
            raise _HttpError(400, "a 2026-07-28 POST carries one JSON-RPC request or notification")
        self._check_modern_headers(c, body)
        stream = self._new_stream(None, "post", resumable=False, modern=True)
        self._feed(
            c,
            self._ephemeral_session(stream, c),
            body,
            stream,
            Revision.V2026_07_28,
            accept_sse,
            (),
            status_by_code=True,
        )

    def _check_modern_headers(self, c: _Conn, body: dict[str, Any]) -> None:
        """2026-07-28 header/body agreement; -32020 and 400 on any mismatch."""
        request_id = _id_of(body)

        def mismatch(message: str) -> _HttpError:
            return _HttpError(400, message, code=HEADER_MISMATCH, request_id=request_id)

        method = body.get("method")
        raw_params = body.get("params")
        params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
        header_version = c.headers["mcp-protocol-version"].strip()
        raw_meta = params.get("_meta")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        meta_version = meta.get(META_PROTOCOL_VERSION)
        if meta_version is not None and meta_version != header_version:
            raise mismatch(f"MCP-Protocol-Version {header_version!r} does not match _meta's {meta_version!r}")
        if "id" not in body:
            return  # notifications: header rules are not defined for them
        header_method = c.headers.get("mcp-method")
        if header_method is None:
            raise mismatch("the Mcp-Method header is required on every 2026-07-28 request")
        if header_method.strip() != method:
            raise mismatch(
                f"Mcp-Method {header_method.strip()!r} does not match the body's method {method!r}"
            )
        name_param = _NAME_PARAM.get(method) if isinstance(method, str) else None
        header_name = c.headers.get("mcp-name")
        if name_param is not None:
            value = params.get(name_param)
            if header_name is None:
                raise mismatch(
                    f"the Mcp-Name header is required on {method} (it carries params.{name_param})"
                )
            decoded = _decode_header_value(header_name)
            if decoded is None:
                raise mismatch("Mcp-Name is not a valid value (bad characters or base64)")
            if decoded != value:
                raise mismatch(f"Mcp-Name {decoded!r} does not match params.{name_param} {value!r}")
        if method == "tools/call" and self.config.tools is not None and isinstance(params.get("name"), str):
            self._check_param_headers(c, params, mismatch)

    def _check_param_headers(
        self, c: _Conn, params: Mapping[str, Any], mismatch: Callable[[str], _HttpError]
    ) -> None:
        assert self.config.tools is not None
        mapping = self.config.tools.header_params.get(params["name"], {})
        raw_arguments = params.get("arguments")
        arguments: dict[str, Any] = raw_arguments if isinstance(raw_arguments, dict) else {}
        for argument, header in mapping.items():
            raw = c.headers.get("mcp-param-" + header.lower())
            value = arguments.get(argument)
            if value is None:
                if raw is not None:
                    raise mismatch(f"Mcp-Param-{header} is sent but {argument} is not in the arguments")
                continue
            if raw is None:
                raise mismatch(f"Mcp-Param-{header} is required: the arguments carry {argument}")
            decoded = _decode_header_value(raw)
            if decoded is None:
                raise mismatch(f"Mcp-Param-{header} is not a valid value (bad characters or base64)")
            if not _param_matches(decoded, value):
                raise mismatch(f"Mcp-Param-{header} {decoded!r} does not match argument {argument} {value!r}")

    # ------------------------------------------------------------------
    # GET and DELETE on the MCP endpoint
    # ------------------------------------------------------------------

    def _get(self, c: _Conn, now: float) -> None:
        session_id = c.headers.get("mcp-session-id")
        if session_id is None:
            raise _HttpError(
                405,
                "GET needs a legacy session (Mcp-Session-Id); 2026-07-28 has no GET stream, use subscriptions/listen",
                headers=(("allow", "POST"),),
            )
        hs = self._sessions.get(session_id)
        if hs is None or hs.legacy_sse:
            raise _HttpError(404, "unknown or terminated session; send initialize without Mcp-Session-Id")
        if "text/event-stream" not in c.headers.get("accept", ""):
            raise _HttpError(406, "a GET stream is text/event-stream; send Accept: text/event-stream")
        hs.last_active = now
        last = c.headers.get("last-event-id")
        if last is not None:
            stream, after = self._stream_for_event_id(hs, last)
        else:
            if hs.standalone is None:
                hs.standalone = self._new_stream(hs, "get", resumable=True)
            stream, after = hs.standalone, None
            if stream.out is not None:
                raise _HttpError(409, "this session's GET stream is already open")
        if stream.out is not None:  # resuming a stream another connection still holds: take it over
            self._end_response(stream.out, close=True)
        out = _Out(conn=c.id, accept_sse=True, stream=stream, keepalive_at=now + self.http.sse_keepalive)
        self._arm_conn(c, now + self.http.sse_keepalive, "keepalive")
        c.out = out
        stream.out = out
        self._start_sse(c, out, prime=after is None)
        for seq, frame in list(stream.buffer):
            if after is None or seq > after:
                self._write(c, frame)
        if stream.done and stream.kind == "post":
            self._end_response(out)

    def _stream_for_event_id(self, hs: _HttpSession, event_id: str) -> tuple[_Stream, int]:
        key_text, _, seq_text = event_id.strip().partition("-")
        if not (_is_decimal(key_text) and _is_decimal(seq_text)):
            raise _HttpError(400, f"Last-Event-ID {event_id!r} is not an event id this server issued")
        stream = hs.streams.get(int(key_text))
        if stream is None:
            raise _HttpError(404, f"Last-Event-ID {event_id!r} names no stream of this session")
        return stream, int(seq_text)

    def _delete(self, c: _Conn, now: float) -> None:
        session_id = c.headers.get("mcp-session-id")
        if session_id is None:
            raise _HttpError(
                405, "DELETE ends a legacy session; name it with Mcp-Session-Id", headers=(("allow", "POST"),)
            )
        hs = self._sessions.get(session_id)
        if hs is None or hs.legacy_sse:
            raise _HttpError(404, "unknown or terminated session")
        self._end_session(hs, "deleted")
        self._respond_plain(c, 200, b"")

    # ------------------------------------------------------------------
    # 2024-11-05 HTTP+SSE
    # ------------------------------------------------------------------

    def _open_legacy_sse(self, c: _Conn, now: float) -> None:
        # 2024-11-05 asks nothing of the client's Accept here: any range that
        # covers text/event-stream will do (curl sends */*).
        if not _accepts_event_stream(c.headers.get("accept", "text/event-stream")):
            raise _HttpError(
                406, "the SSE endpoint answers text/event-stream; send Accept: text/event-stream"
            )
        if len(self._sessions) >= self.http.max_sessions and not self._evict_idle():
            raise _HttpError(503, "too many open sessions; try again later")
        session_id = self._mint_session_id()
        session = ServerSession(
            self.config,
            can_push=True,
            tokens=self._tokens,
            rounds=self._rounds,
            owns_rounds=False,
            tasks=self._tasks,
            identity=f"session:{session_id}",
        )
        hs = _HttpSession(id=session_id, session=session, standalone=None, legacy_sse=True, last_active=now)
        stream = self._new_stream(hs, "legacy-sse", resumable=False)
        hs.standalone = stream
        self._sessions[session_id] = hs
        self._session_of[id(session)] = hs
        if self._next_sweep is None:
            self._schedule_sweep(now)
        out = _Out(conn=c.id, accept_sse=True, stream=stream, keepalive_at=now + self.http.sse_keepalive)
        self._arm_conn(c, now + self.http.sse_keepalive, "keepalive")
        c.out = out
        stream.out = out
        self._start_sse(c, out, prime=False)
        endpoint = f"{self.http.messages_path}?session_id={session_id}"
        self._write(c, encode_event(endpoint.encode(), event="endpoint"))

    def _post_legacy_sse(self, c: _Conn, query: Mapping[str, list[str]], now: float) -> None:
        content_type = c.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            raise _HttpError(415, "a POST body must be JSON (Content-Type: application/json)")
        ids = query.get("session_id") or query.get("sessionId") or []
        hs = self._sessions.get(ids[0]) if ids else None
        if hs is None or not hs.legacy_sse or hs.standalone is None:
            raise _HttpError(404, "unknown session; open the SSE endpoint first")
        hs.last_active = now
        raw = bytes(c.body)  # before the 202: answering may start the next pipelined request
        self._respond_plain(c, 202, b"")
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            body = None
            error = ErrorResponse(id=None, code=PARSE_ERROR, message=f"Parse error: {exc}").to_obj()
            self._deliver(hs.standalone, orjson.dumps(error), final=False, error_code=PARSE_ERROR)
        if body is not None:
            hs.session.receive_json(body, stream=hs.standalone.key, now=self._now)
            self._pump(hs.session)

    # ------------------------------------------------------------------
    # Feeding a session and answering
    # ------------------------------------------------------------------

    def _new_stream(
        self, hs: _HttpSession | None, kind: str, *, resumable: bool, modern: bool = False
    ) -> _Stream:
        key = next(self._keys)
        rev = hs.session.negotiated_revision if hs is not None else None
        stream = _Stream(
            key=key,
            session=hs,
            kind=kind,
            resumable=resumable and hs is not None,
            priming=False,
            cancel_on_disconnect=modern or hs is None,
            replay_limit=self.http.replay_events,
        )
        stream.priming = stream.resumable and (rev is None or rev >= _PRIMING_FROM)
        self._streams[key] = stream
        if hs is not None:
            hs.streams[key] = stream
        return stream

    def _feed(
        self,
        c: _Conn,
        session: ServerSession,
        body: Any,
        stream: _Stream,
        revision: Revision | None,
        accept_sse: bool,
        headers: tuple[tuple[str, str], ...],
        *,
        status_by_code: bool = False,
    ) -> None:
        out = _Out(
            conn=c.id,
            accept_sse=accept_sse,
            stream=stream,
            extra_headers=headers,
            http_status_by_code=status_by_code,
        )
        c.out = out
        stream.out = out
        session.receive_json(body, stream=stream.key, revision=revision, now=self._now)
        self._pump(session)
        if out.mode == "pending" and not _has_request(body):
            # Only notifications and responses: accepted, nothing to answer.
            self._respond_plain(c, 202, b"", extra=headers)
            self._retire(stream)
        elif out.mode == "pending" and accept_sse:
            out.keepalive_at = self._now + self.http.sse_keepalive
            self._arm_conn(c, out.keepalive_at, "keepalive")

    def _pump(self, session: ServerSession) -> None:
        """Route what ``session`` queued (and what a task change queued elsewhere)."""
        self._pump_one(session)
        if self._tasks is not None:
            for touched in self._tasks.take_touched():
                if isinstance(touched, ServerSession):
                    self._pump_one(touched)

    def _pump_one(self, session: ServerSession) -> None:
        """Route what ``session`` queued: bytes to their streams, the rest to the driver."""
        if session.get_timer() is not None:
            self._timed.add(session)
        else:
            self._timed.discard(session)
        hs = self._session_of.get(id(session))
        for action in session.next_actions():
            if isinstance(action, Send):
                stream = self._streams.get(action.stream) if action.stream is not None else None
                if stream is None and hs is not None:
                    stream = self._standalone(hs)
                if stream is None:
                    continue  # unsolicited, outside a session: nobody can receive it
                self._deliver(stream, action.payload, final=action.final, error_code=action.error_code)
            elif isinstance(action, HandleRequest):
                self._token_session[action.token] = session
                self._actions.append(action)
            elif isinstance(action, CancelRequest):
                self._actions.append(action)
            elif isinstance(action, Answered):
                # A 2026-07-28 retry takes the call over: its answer now goes
                # through this request's session.
                self._token_session[action.token] = session
                self._actions.append(action)
            elif isinstance(action, EndStream):
                self._end_cancelled(action.stream)
            elif isinstance(action, SuspendStream):
                self._suspend(action.stream)
            elif isinstance(action, Close):
                if hs is not None:
                    self._forget_session(hs)
            else:
                self._actions.append(action)

    def _suspend(self, key: int) -> None:
        """Close a resumable stream's HTTP response now; its events wait for Last-Event-ID."""
        stream = self._streams.get(key)
        if stream is None or not stream.resumable or stream.done or stream.out is None:
            return
        out = stream.out
        c = self._conns.get(out.conn)
        if c is None or c.closed:
            return
        if out.mode == "pending":
            if not out.accept_sse:
                return  # a JSON-only client cannot resume: keep its response
            self._start_sse(c, out)
        self._trace("stream-suspended", stream=key)
        self._end_response(out)

    def _end_cancelled(self, key: int) -> None:
        """A stream's request was cancelled: end its HTTP response without an answer."""
        stream = self._streams.get(key)
        if stream is None or stream.kind != "post" or stream.done:
            return
        stream.done = True
        out = stream.out
        c = self._conns.get(out.conn) if out is not None else None
        if out is not None and c is not None and not c.closed:
            if out.mode == "pending":
                if out.accept_sse:
                    self._start_sse(c, out)
                else:
                    self._respond_plain(c, 204, b"")
                    self._retire(stream)
                    return
            self._end_response(out)
        self._retire(stream)

    def _ephemeral_session(self, stream: _Stream, c: _Conn) -> ServerSession:
        session = ServerSession(
            self.config,
            can_push=False,
            stateless=True,
            tokens=self._tokens,
            rounds=self._rounds,
            owns_rounds=False,
            tasks=self._tasks,
            identity=_requester(c.headers),
        )
        self._ephemeral[stream.key] = session
        return session

    def _standalone(self, hs: _HttpSession) -> _Stream:
        if hs.standalone is None:
            hs.standalone = self._new_stream(hs, "get", resumable=True)
        return hs.standalone

    def _deliver(self, stream: _Stream, payload: bytes, *, final: bool, error_code: int | None) -> None:
        """One JSON-RPC message for ``stream``: onto its connection, into its replay buffer, or both."""
        out = stream.out
        c = self._conns.get(out.conn) if out is not None else None
        if stream.kind == "post" and out is not None and c is not None and out.mode == "pending":
            if final:
                status = 200
                if error_code is not None and (
                    out.http_status_by_code or error_code in (PARSE_ERROR, INVALID_REQUEST)
                ):
                    # 2026-07-28: the status follows the code.  Legacy: a message
                    # the server could not accept is a 4xx; other errors are 200.
                    status = http_status_for(error_code)
                self._respond_json(c, out, status, payload)
                stream.done = True
                self._retire(stream)
                return
            if not out.accept_sse:
                return  # the client takes JSON only: progress and logs cannot reach it
            self._start_sse(c, out)
        frame = self._frame(stream, payload)
        if stream.resumable:
            stream.buffer.append((stream.seq, frame))
            while len(stream.buffer) > stream.replay_limit:
                stream.buffer.popleft()
        if c is not None and out is not None and out.mode == "sse":
            self._write(c, frame)
            if out.keepalive_at is not None:
                out.keepalive_at = self._now + self.http.sse_keepalive
                self._arm_conn(c, out.keepalive_at, "keepalive")
        if final and stream.kind == "post":
            stream.done = True
            if out is not None and c is not None:
                self._end_response(out)
            self._retire(stream)

    def _frame(self, stream: _Stream, payload: bytes) -> bytes:
        if stream.kind == "legacy-sse":
            return encode_event(payload, event="message")
        if not stream.resumable:
            return encode_event(payload)
        stream.seq += 1
        return encode_event(payload, event_id=f"{stream.key}-{stream.seq}")

    def _retire(self, stream: _Stream) -> None:
        """A POST stream is answered: keep its events for replay only while bounded."""
        hs = stream.session
        if hs is None or not stream.resumable:
            self._streams.pop(stream.key, None)
            self._ephemeral.pop(stream.key, None)
            if hs is not None:
                hs.streams.pop(stream.key, None)
            return
        if stream.key in hs.finished:
            return
        hs.finished.append(stream.key)
        while len(hs.finished) > self.http.finished_streams_kept:
            old = hs.finished.popleft()
            hs.streams.pop(old, None)
            self._streams.pop(old, None)

    # ------------------------------------------------------------------
    # Writing responses
    # ------------------------------------------------------------------

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

    # ------------------------------------------------------------------
    # Connections and sessions ending
    # ------------------------------------------------------------------

    def _detach(self, c: _Conn, now: float) -> None:
        """The client went away while ``c`` was answering: what that means depends on the stream."""
        out, c.out = c.out, None
        if out is None or out.stream is None or out.mode == "done":
            return
        stream = out.stream
        if stream.out is out:
            stream.out = None
        hs = stream.session
        if stream.kind == "legacy-sse" and hs is not None:
            self._end_session(hs, "stream lost")
            return
        if stream.kind == "post" and not stream.done and stream.cancel_on_disconnect:
            # 2026-07-28 and sessionless POSTs: closing the stream is cancellation.
            session = hs.session if hs is not None else self._ephemeral.get(stream.key)
            if session is None:
                return
            session.abandon(stream.key)
            self._pump(session)
            self._streams.pop(stream.key, None)
            self._ephemeral.pop(stream.key, None)
        # Within a legacy session a dropped connection is not a cancellation:
        # the stream keeps its events for a GET with Last-Event-ID.

    def _end_session(self, hs: _HttpSession, why: str) -> None:
        self._trace("session-ended", session=hs.id, why=why)
        self._actions.append(SessionEnded(identity=f"session:{hs.id}"))
        for stream in list(hs.streams.values()):
            if stream.out is not None:
                self._end_response(stream.out, close=stream.kind == "legacy-sse")
        if hs.session.state.value != "closed":
            hs.session.terminate()
            self._pump(hs.session)
        self._forget_session(hs)

    def _forget_session(self, hs: _HttpSession) -> None:
        self._sessions.pop(hs.id, None)
        self._session_of.pop(id(hs.session), None)
        for key in list(hs.streams):
            self._streams.pop(key, None)
        hs.streams.clear()

    def _idle(self, hs: _HttpSession) -> bool:
        return hs.session.in_flight == 0 and not any(s.out is not None for s in hs.streams.values())

    def _evict_idle(self) -> bool:
        idle = [s for s in self._sessions.values() if self._idle(s)]
        if not idle:
            return False
        self._end_session(min(idle, key=lambda s: s.last_active), "evicted")
        return True

    def _trace(self, event: str, **detail: Any) -> None:
        if self.config.trace:
            self._actions.append(Trace(event=event, detail=detail))


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def _host_names(http: HttpConfig) -> frozenset[str]:
    names = set(_LOOPBACK_HOSTS) | {h.lower() for h in http.allowed_hosts}
    bound = http.bound_host.lower().strip("[]")
    if bound not in _WILDCARDS:
        names.add(bound)
    return frozenset(names)


def _valid_port(host: str) -> bool:
    """Whether ``host`` (a Host header) has no port, or a port of digits from 1 to 65535 (RFC 9110 §7.2)."""
    host = host.strip()
    end = host.rfind("]") if host.startswith("[") else -1
    rest = host[end + 1 :] if end >= 0 else host
    if end < 0 and rest.count(":") > 1:
        return True  # an unbracketed IPv6 address: _host_part takes it whole, and it names no server
    if ":" not in rest:
        return True
    port = rest.rsplit(":", 1)[1]
    return port.isascii() and port.isdigit() and 1 <= int(port) <= 65535


def _host_part(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _id_of(body: Any) -> RequestId | None:
    if isinstance(body, dict):
        value = body.get("id")
        if type(value) in (str, int):
            return value
    return None


def _has_request(body: Any) -> bool:
    items = body if isinstance(body, list) else [body]
    return any(isinstance(m, dict) and "method" in m and "id" in m for m in items) or not all(
        isinstance(m, dict) for m in items
    )


def _has_listen(body: Any) -> bool:
    items = body if isinstance(body, list) else [body]
    return any(isinstance(m, dict) and m.get("method") == "subscriptions/listen" and "id" in m for m in items)


def _requester(headers: Mapping[str, str]) -> str:
    """Who sent a request outside any session, for the tasks it may see: its credentials, or nobody."""
    auth = headers.get("authorization")
    if not auth:
        return "anonymous"
    return "auth:" + hashlib.sha256(auth.encode("utf-8", "surrogateescape")).hexdigest()


def _is_decimal(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts ``²`` and other digits ``int`` refuses."""
    return text.isascii() and text.isdigit()


def _is_initialize(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and body.get("method") == "initialize"
        and "id" in body
        and not _looks_modern(body)
    )


def _looks_modern(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    params = body.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta


def _decode_header_value(raw: str) -> str | None:
    """A header value as the client meant it: ``=?base64?…?=`` decoded; None if invalid."""
    value = raw.strip()
    match = _BASE64_VALUE.match(value)
    if match:
        try:
            return base64.b64decode(match.group(1), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    if any(ord(ch) < 0x20 or ord(ch) > 0x7E for ch in value):
        return None
    return value


def _param_matches(header: str, value: Any) -> bool:
    if isinstance(value, bool):
        return header == ("true" if value else "false")
    if isinstance(value, int):
        try:
            return int(header) == value
        except ValueError:
            return False
    if isinstance(value, str):
        return header == value
    return False


def _accepts_event_stream(accept: str) -> bool:
    """Whether an Accept header admits ``text/event-stream`` (the type itself, ``text/*`` or ``*/*``)."""
    for item in accept.split(","):
        media, _, params = item.partition(";")
        if media.strip().lower() in ("text/event-stream", "text/*", "*/*"):
            q = next(
                (p.split("=", 1)[1] for p in params.split(";") if p.strip().lower().startswith("q=")), "1"
            )
            try:
                if float(q) > 0:
                    return True
            except ValueError:
                continue
    return False
