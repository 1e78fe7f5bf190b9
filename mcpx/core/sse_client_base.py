"""The HTTP+SSE client binding's records and fields, its connections, its POST lane and the reading of its stream.

The layer ``SseClientConnection`` (sse_client.py, where the rules are)
stands on: one connection for the GET stream, one kept alive for the POSTs,
sent one at a time in order; the stream's ``endpoint`` and ``message``
events read into inputs of the machine's table.
``_SseClientBase.__init__`` holds every field.
"""

from __future__ import annotations

import enum
import itertools
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import h11
import orjson

from .errors import INTERNAL_ERROR, LocalProtocolError
from .http_client_actions import JsonReceived, OpenConnection, RequestRefused
from .http_client_base import _error_object, _excerpt, _reason
from .http_wire import CloseConnection, SendBytes, buffered, header_map
from .jsonrpc import RequestId
from .sse import SseDecoder, SseError, SseEvent
from .sse_client_actions import _REASON_BYTES, SseClientAction, SseClientConfig, resolve_endpoint


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


class _SseClientBase:
    """The binding's fields, connections, POSTs and stream reading (see ``SseClientConnection``)."""

    if TYPE_CHECKING:  # defined by a later layer

        def _input(self, what: _In, detail: str) -> None: ...

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

    def _deliver(self, value: Any) -> None:
        self._actions.append(JsonReceived(message=value, handle=None))
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict) and "method" not in item and ("result" in item or "error" in item):
                rid = item.get("id")
                if isinstance(rid, str | int) and not isinstance(rid, bool):
                    self._awaiting.pop(rid, None)
