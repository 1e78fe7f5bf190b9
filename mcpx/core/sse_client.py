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
    (``b""`` at end of input), ``connection_lost(conn, now, reason=)``, and
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

Modules: the machine's inputs, table and effects are here; beside it,
``sse_client_actions`` holds the configuration, ``EndpointReady`` and the
resolution of the ``endpoint`` event (``resolve_endpoint``, which the era
probe uses too), and ``sse_client_base`` the layer
``SseClientConnection`` stands on: the records, every field
(``_SseClientBase.__init__``), the connections, the POST lane and the
reading of the stream.  Every public name is importable from this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final
from urllib.parse import urlsplit

import orjson

from .errors import LocalProtocolError
from .http_client_actions import Closed, StreamEnded
from .sse_client_actions import EndpointReady, SseClientAction, SseClientConfig, resolve_endpoint
from .sse_client_base import _S, SseState, _In, _is_id, _Post, _SseClientBase

__all__ = [
    "EndpointReady",
    "SseClientAction",
    "SseClientConfig",
    "SseClientConnection",
    "SseState",
    "resolve_endpoint",
    "transition_table",
]


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


class SseClientConnection(_SseClientBase):
    """The connections of one 2024-11-05 HTTP+SSE session; see the module docstring."""

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

    def connection_lost(self, conn: int, now: float, *, reason: str | None = None) -> None:
        """The socket is gone (or never came up; ``reason``: the system's word for why): what it carried ends."""
        self._now = max(self._now, now)
        c = self._conn(conn)
        if c is None:
            return
        c.closed = True  # gone already: nothing to close
        why = (
            "the server closed the connection"
            if c.connected
            else f"mcpx could not connect to {self.config.authority}" + (f": {reason}" if reason else "")
        )
        self._dropped(c, why)

    def handle_timer(self, now: float) -> None:
        """Call once ``get_timer()``'s deadline has passed: no endpoint event came in time."""
        self._now = max(self._now, now)
        if self._deadline is None or now < self._deadline:
            return
        timeout = self.config.endpoint_timeout
        self._input(_In.TIMEOUT, f"the server sent no endpoint event within {timeout:g}s")

    def _input(self, what: _In, detail: str) -> None:
        """Look ``what`` up in the table and carry out its effect (``detail``: a URL or a reason)."""
        try:
            effect, new_state = _TRANSITIONS[(self._state, what)]
        except KeyError:
            raise LocalProtocolError(f"{what.value} is not allowed in state {self._state.value}") from None
        self._state = new_state
        getattr(self, effect)(detail)

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
