"""The client binding's records and fields, and how it delivers answers, fails requests and keeps connections.

The layer ``HttpClientConnection`` (http_client.py, where the rules are)
stands on.  Every request still waiting when its answer cannot come gets
one synthesized JSON-RPC error, so the session fails exactly that call with
a reason; the wording helpers here write those reasons, for this binding and
for the HTTP+SSE one (``sse_client``).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import h11
import orjson

from .errors import INTERNAL_ERROR, LocalProtocolError
from .http_client_actions import (
    Closed,
    ExchangeFailed,
    HttpClientAction,
    HttpClientConfig,
    JsonReceived,
    RequestRefused,
    SessionExpired,
    StreamEnded,
)
from .http_wire import CloseConnection, reason_phrase
from .jsonrpc import RequestId
from .revisions import REVISIONS, Revision
from .sse import SseDecoder

_EXCERPT: Final = 200


@dataclass(slots=True, eq=False)
class _Stream:
    """A logical answer: a POST's (waiting for ``awaiting``) or the session's GET stream."""

    kind: str  # post | get
    handle: int | None
    awaiting: set[RequestId]
    session_id: str | None  # resumable within this session (legacy)
    initialize: RequestId | None = None  # the id of an initialize request in it
    last_event_id: str | None = None
    retry: float | None = None
    resumes: int = 0  # tries in a row without an event
    resume_at: float | None = None
    exchange: _Exchange | None = None
    done: bool = False


@dataclass(slots=True, eq=False)
class _Exchange:
    """One HTTP request and its response."""

    method: str
    headers: list[tuple[str, str]]
    body: bytes
    stream: _Stream | None  # None: the DELETE of close()
    session_id: str | None  # the session id it was sent with
    conn: int | None = None
    mode: str = "head"  # head | json | sse | empty | refused | junk | done
    status: int = 0
    content_type: str = ""
    buffer: bytearray = field(default_factory=bytearray)
    decoder: SseDecoder | None = None
    location: str | None = None
    retried: bool = False  # sent again once, after a kept connection closed under it
    token: int | None = None  # a raw exchange's (``exchange``): its answer goes out as it comes
    target: str | None = None  # a raw exchange's request target (None: the config's)


@dataclass(slots=True, eq=False)
class _Conn:
    id: int
    parser: h11.Connection
    connected: bool = False
    exchange: _Exchange | None = None
    closed: bool = False
    reused: bool = False  # kept after an answer: the exchange on it now is not its first


def _is_id(value: Any) -> bool:
    return type(value) in (str, int)


def _reason(status: int) -> str:
    """`` <phrase>`` to follow a status code in a message, or nothing for a code without one."""
    phrase = reason_phrase(status)
    return " " + phrase.decode() if phrase else ""


def _excerpt(body: bytes) -> str:
    text = body[: _EXCERPT * 4].decode("utf-8", "replace")
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return text if len(text) <= _EXCERPT else text[: _EXCERPT - 1] + "…"


def _error_object(body: bytes) -> dict[str, Any] | None:
    """The ``error`` member of a JSON-RPC error body, or None."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    error = value.get("error") if isinstance(value, dict) else None
    if not isinstance(error, dict):
        return None
    code, message = error.get("code"), error.get("message")
    if type(code) is not int or not isinstance(message, str):
        return None
    return dict(error)


class _ClientBindingBase:
    """The binding's fields, delivery and failure of answers, and connections (see ``HttpClientConnection``)."""

    if TYPE_CHECKING:  # defined by a later layer

        def _start(self, ex: _Exchange) -> None: ...
        def _write_request(self, c: _Conn, ex: _Exchange) -> None: ...

    def __init__(
        self,
        config: HttpClientConfig,
        *,
        conn_ids: Iterator[int] | None = None,
        session_id: str | None = None,
        revision: Revision | None = None,
    ) -> None:
        if config.modern and session_id is not None:
            raise LocalProtocolError("2026-07-28 has no sessions: do not pass a session id")
        self.config = config
        self._conn_ids = conn_ids if conn_ids is not None else itertools.count(1)
        self._session_id = session_id
        self._revision = revision
        self._tool_headers: dict[str, dict[str, str]] = {
            tool: dict(mapping) for tool, mapping in config.tool_headers.items()
        }
        self._actions: list[HttpClientAction] = []
        self._conns: dict[int, _Conn] = {}
        self._queue: deque[_Exchange] = deque()
        self._by_handle: dict[int, _Stream] = {}
        self._raw: dict[int, _Exchange] = {}  # raw exchanges (``exchange``) by token
        self._waiting: dict[RequestId, _Stream] = {}  # request id -> the stream awaiting its answer
        self._resuming: list[_Stream] = []
        self._get: _Stream | None = None
        self._now = 0.0
        self._closing = False
        self._closed = False

    def _deliver(self, stream: _Stream, value: Any) -> None:
        self._actions.append(JsonReceived(message=value, handle=stream.handle))
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, dict) or "method" in item or not _is_id(item.get("id")):
                continue
            if "result" not in item and "error" not in item:
                continue
            rid = item["id"]
            owner = stream if rid in stream.awaiting else self._waiting.get(rid)
            if owner is None:
                continue
            owner.awaiting.discard(rid)
            if self._waiting.get(rid) is owner:
                del self._waiting[rid]
            if rid == owner.initialize and not self.config.modern:
                result = item.get("result")
                version = result.get("protocolVersion") if isinstance(result, dict) else None
                if version in REVISIONS:
                    self._revision = Revision(version)
            if owner is not stream and not owner.awaiting and owner.kind == "post":
                self._retire(owner)

    def _fail(
        self,
        stream: _Stream,
        message: str,
        ex: _Exchange | None = None,
        error: Mapping[str, Any] | None = None,
    ) -> None:
        """Every request ``stream`` still waits for gets one error: the server's ``error``, or one made here."""
        synthesized = error is None or "sessionExpired" in (error.get("data") or {})
        if error is None:
            data: dict[str, Any] = {}
            if ex is not None and ex.status:
                data["httpStatus"] = ex.status
                if ex.buffer:
                    data["body"] = _excerpt(bytes(ex.buffer))
            error = {"code": INTERNAL_ERROR, "message": message}
            if data:
                error = {**error, "data": data}
        for rid in sorted(stream.awaiting, key=repr):
            if self._waiting.get(rid) is stream:
                del self._waiting[rid]
            self._actions.append(
                JsonReceived(
                    message={"jsonrpc": "2.0", "id": rid, "error": dict(error)},
                    handle=stream.handle,
                    synthesized=synthesized,
                )
            )
        stream.awaiting.clear()
        self._retire(stream)

    def _unanswered(self, stream: _Stream, ex: _Exchange, what: str) -> None:
        if not stream.awaiting:
            return
        # An id-less JSON-RPC error (the server could not read the request) is the reason.
        error = _error_object(bytes(ex.buffer)) if ex.content_type == "application/json" else None
        if error is not None:
            self._fail(stream, error["message"], ex, error=error)
        else:
            self._fail(stream, f"the server's answer ({what}) did not answer the request", ex)

    def _refused(self, stream: _Stream, ex: _Exchange) -> None:
        # A 404 for a resumption (GET with Last-Event-ID) may only mean the
        # server forgot that stream; the session's next request will tell.
        resuming = any(name == "Last-Event-ID" for name, _ in ex.headers)
        expired = (
            ex.status == 404
            and ex.session_id is not None
            and ex.session_id == self._session_id
            and not self.config.modern
            and not resuming
        )
        error = _error_object(bytes(ex.buffer)) if ex.content_type == "application/json" else None
        message = error["message"] if error is not None else self._describe(ex, "a refusal")
        if stream.kind == "get":
            if not expired:
                self._end_get(stream, message, resuming=False)
        elif stream.awaiting and expired:
            # Refused for the session, so never processed: the caller may send it
            # again in a new session (data.sessionExpired says so).
            data: dict[str, Any] = {"httpStatus": 404, "sessionExpired": True}
            if error is not None:
                data["serverError"] = error
            why = f"the server ended session {ex.session_id} (HTTP 404) and did not process the request"
            self._fail(stream, why, ex, error={"code": INTERNAL_ERROR, "message": why, "data": data})
        elif stream.awaiting:
            if error is not None:
                self._fail(stream, message, ex, error=error)
            else:
                self._fail(stream, message, ex)
        else:
            self._actions.append(RequestRefused(status=ex.status, message=message))
            self._retire(stream)
        if expired:
            self._expire()

    def _broken(self, ex: _Exchange, why: str, *, resumable: bool = True) -> None:
        """``ex`` stopped before its answer ended (connection lost, malformed, over a limit)."""
        ex.mode = "done"
        if ex.token is not None:
            self._raw.pop(ex.token, None)
            self._actions.append(ExchangeFailed(token=ex.token, reason=why))
            return
        stream = ex.stream
        if stream is None:  # the DELETE of close(): done either way
            self._finish_close()
            return
        if stream.exchange is ex:
            stream.exchange = None
        if stream.done:
            return
        if resumable:
            self._stream_stopped(stream, why)
        elif stream.kind == "get":
            self._end_get(stream, why, resuming=False)
        else:
            self._fail(stream, why, ex)

    def _stream_stopped(self, stream: _Stream, why: str) -> None:
        """A stream ended or dropped: done, resumed after ``retry``, or failed."""
        if stream.kind == "post" and not stream.awaiting:
            self._retire(stream)
            return
        can_resume = (
            not self._closing
            and stream.session_id is not None
            and stream.session_id == self._session_id
            and (stream.kind == "get" or stream.last_event_id is not None)
            and stream.resumes < self.config.max_resumes
        )
        if not can_resume:
            if stream.kind == "get":
                self._end_get(stream, why, resuming=False)
            else:
                self._actions.append(StreamEnded(handle=stream.handle, reason=why, resuming=False))
                self._fail(stream, f"{why} before the server's answer", None)
            return
        stream.resumes += 1
        delay = stream.retry if stream.retry is not None else self.config.retry
        stream.resume_at = self._now + delay
        self._resuming.append(stream)
        self._actions.append(StreamEnded(handle=stream.handle, reason=why, resuming=True))

    def _end_get(self, stream: _Stream, why: str, *, resuming: bool) -> None:
        self._retire(stream)
        self._actions.append(StreamEnded(handle=None, reason=why, resuming=resuming))

    def _retire(self, stream: _Stream) -> None:
        stream.done = True
        if stream in self._resuming:
            self._resuming.remove(stream)
        stream.resume_at = None
        for rid in list(stream.awaiting):
            if self._waiting.get(rid) is stream:
                del self._waiting[rid]
        if stream.handle is not None and self._by_handle.get(stream.handle) is stream:
            del self._by_handle[stream.handle]

    def _expire(self) -> None:
        """The server forgot our session (404): what belonged to it ends; the caller re-initialises."""
        session_id, self._session_id, self._revision = self._session_id, None, None
        assert session_id is not None
        for stream in list(self._resuming):
            if stream.session_id == session_id:
                if stream.kind == "post":
                    self._fail(stream, f"the server ended session {session_id} (HTTP 404)")
                self._retire(stream)
        if self._get is not None and not self._get.done:
            self._drop_exchange(self._get.exchange)
            self._end_get(self._get, f"the server ended session {session_id} (HTTP 404)", resuming=False)
        self._actions.append(SessionExpired(session_id=session_id))

    def _drop_exchange(self, ex: _Exchange | None) -> None:
        """Stop reading ``ex``: unqueue it, or close its connection (2026-07-28: that cancels)."""
        if ex is None or ex.mode == "done":
            return
        ex.mode = "done"
        if ex in self._queue:
            self._queue.remove(ex)
            return
        c = self._conns.get(ex.conn) if ex.conn is not None else None
        if c is not None and c.exchange is ex:
            c.exchange = None
            self._close(c)
            self._dispatch_queue()

    def _close(self, c: _Conn) -> None:
        if c.closed:
            return
        self._forget(c)
        self._actions.append(CloseConnection(conn=c.id))

    def _forget(self, c: _Conn) -> None:
        c.closed = True
        self._conns.pop(c.id, None)

    def _dispatch_queue(self) -> None:
        while self._queue and len(self._conns) < self.config.max_connections:
            self._start(self._queue.popleft())

    def _start_queued(self, c: _Conn) -> None:
        ex = self._queue.popleft()
        if ex.stream is not None:
            ex.stream.exchange = ex
        c.exchange = ex
        ex.conn = c.id
        self._write_request(c, ex)

    def _finish_close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for c in list(self._conns.values()):
            self._close(c)
        self._actions.append(Closed())

    def _too_large(self) -> str:
        return f"refused: its headers exceed {self.config.max_header_bytes} bytes"

    def _unreachable(self, reason: str | None = None) -> str:
        return f"mcpx could not connect to {self.config.authority}" + (f": {reason}" if reason else "")

    def _describe(self, ex: _Exchange, what: str) -> str:
        reason = _reason(ex.status)
        kind = f" ({ex.content_type})" if ex.content_type else ""
        text = f"the server answered HTTP {ex.status}{reason}{kind}, {what}"
        if ex.location and 300 <= ex.status < 400:
            text += f"; it redirects to {ex.location[:_EXCERPT]} (mcpx does not follow redirects)"
        excerpt = _excerpt(bytes(ex.buffer))
        return f"{text}: {excerpt}" if excerpt else text
