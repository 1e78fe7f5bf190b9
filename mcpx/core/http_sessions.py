"""Feeding a server session from HTTP, and carrying its answers to the right stream.

Every request body goes to a ``ServerSession`` (the legacy session's, or
one made for a request outside any session) with a stream key; the
session's ``Send`` actions name the stream their message belongs to, and
each goes to that stream's response — plain JSON when the answer is all
there is, an event stream otherwise (each revision's Streamable HTTP page,
"sending messages to the server").  Events of a legacy session are kept,
bounded, for resumption.  A connection that goes is a cancellation only
outside a session, and for a 2026-07-28 request; a legacy session ends when
deleted, idle, evicted or (HTTP+SSE) when its stream is lost.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from .actions import Answered, CancelRequest, Close, EndStream, HandleRequest, Send, SuspendStream
from .errors import INVALID_REQUEST, PARSE_ERROR
from .http_base import (
    _PRIMING_FROM,
    SessionEnded,
    _Conn,
    _HttpBase,
    _HttpSession,
    _Out,
    _Stream,
    http_status_for,
    session_id_for,
)
from .revisions import Revision
from .server_session import ServerSession
from .sse import encode_event


def _has_request(body: Any) -> bool:
    items = body if isinstance(body, list) else [body]
    return any(isinstance(m, dict) and "method" in m and "id" in m for m in items) or not all(
        isinstance(m, dict) for m in items
    )


def _requester(headers: Mapping[str, str]) -> str:
    """Who sent a request outside any session, for the tasks it may see: its credentials, or nobody."""
    auth = headers.get("authorization")
    if not auth:
        return "anonymous"
    return "auth:" + hashlib.sha256(auth.encode("utf-8", "surrogateescape")).hexdigest()


class _Sessions(_HttpBase):
    """The layer that feeds sessions and routes their output to streams; connections and sessions ending."""

    def _open_session(self, now: float, *, legacy_sse: bool) -> _HttpSession:
        """A new legacy session under a fresh ``Mcp-Session-Id``, kept and swept like every other.

        A Streamable HTTP session's 2025-11-25 task questions wait for the
        client's ``tasks/result`` stream (basic/utilities/tasks); an HTTP+SSE
        session has one stream, where they go at once.
        """
        session_id = self._mint_session_id()
        session = ServerSession(
            self.config,
            can_push=True,
            tokens=self._tokens,
            rounds=self._rounds,
            owns_rounds=False,
            tasks=self._tasks,
            identity=f"session:{session_id}",
            defer_task_questions=not legacy_sse,
        )
        hs = _HttpSession(
            id=session_id, session=session, standalone=None, legacy_sse=legacy_sse, last_active=now
        )
        self._sessions[session_id] = hs
        self._session_of[id(session)] = hs
        if self._next_sweep is None:
            self._schedule_sweep(now)
        return hs

    def _mint_session_id(self) -> str:
        """The next ``Mcp-Session-Id``, derived from the key (``session_id_for``)."""
        return session_id_for(self._session_key, next(self._session_numbers))

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
