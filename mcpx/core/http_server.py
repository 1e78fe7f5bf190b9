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

Layers: ``HttpServer`` is one machine written in layers, one module per
subject, each layer a subclass of the one below (every field is set in
``_HttpBase.__init__``):

====================== ====================================================
``http_base``          configuration, actions, the per-connection and
                       per-session records, writing responses
``http_sessions``      feeding a ``ServerSession`` and carrying its answers
                       to the right stream; connections and sessions ending
``http_streamable``    POST, GET and DELETE on the MCP endpoint, both eras
``http_legacy_sse``    the 2024-11-05 HTTP+SSE transport
``http_reading``       reading a request: the plain path, h11, ``Origin``
                       and ``Host``, routing to the layers above
``http_server``        the machine's face: the driver's inputs, timers, and
                       the application's calls routed by token
====================== ====================================================

The few methods of later layers that lower ones call are declared once,
under ``TYPE_CHECKING``, at the top of ``_HttpBase``.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

import h11

from .actions import CancelRequest
from .errors import LocalProtocolError
from .http_base import (
    AppRequest,
    HttpAction,
    HttpConfig,
    SessionEnded,
    _Conn,
    _HttpError,
    http_status_for,
    session_id_for,
)
from .http_reading import _Reading
from .http_wire import CloseConnection, SendBytes
from .rounds import Question
from .server_session import ServerSession
from .sse import comment

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


class HttpServer(_Reading):
    """All HTTP connections of one MCP endpoint; see the module docstring for the rules."""

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
