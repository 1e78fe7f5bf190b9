"""The era probe's reading: the driver's events turned into the answers the probe waits for.

Over stdio, lines from the server: before ``initialize`` a server's
``ping`` is answered and any other request refused, a notification is noted
in the trace.  Over HTTP, an answer's head and body, JSON or an event
stream, read until the answer to the request the probe waits for arrives or
the body ends; a body or event larger than ``max_body`` is an unusable
answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import orjson

from .errors import INVALID_REQUEST, LocalProtocolError
from .jsonrpc import ErrorResponse, InvalidMessage, Notification, Request, Response, parse_message
from .probe_base import _V, _Decision, _Wait
from .probe_events import HttpAnswered, HttpBody, SendMessage, TransportClosed, _header
from .probe_judging import _Judging, _short
from .sse import SseDecoder, SseError
from .sse_client import resolve_endpoint

_AUTH_STATUSES: Final = frozenset({401, 403, 407})


_MAX_ITEMS: Final = 64  # JSON-RPC messages looked at in one line or body (a batch)


class _Reading(_Judging):
    """The reading layer: stdio lines, HTTP answers and event streams, into answers and verdicts."""

    if TYPE_CHECKING:  # defined by a later layer

        def _decide(self, decision: _Decision) -> None: ...

    def _stdio_value(self, value: Any) -> None:
        items = value if isinstance(value, list) else [value]
        for item in items[:_MAX_ITEMS]:
            wait = self._wait
            if wait is None:
                return
            try:
                message = parse_message(item)
            except InvalidMessage as exc:
                self._note(f"recv something that is not a JSON-RPC message, ignored: {_short(exc.message)}")
                continue
            if isinstance(message, Request):
                self._answer_server_request(message)
            elif isinstance(message, Notification):
                self._note(f"recv notification {_short(message.method, 60)} while probing, ignored")
            elif message.id == wait.request_id or (isinstance(message, ErrorResponse) and message.id is None):
                self._decide(self._judge(message, wait, status=None, headers=()))
            else:
                self._note(
                    f"recv an answer to id {_short(message.id, 60)}, not to {wait.request_id}; ignored"
                )

    def _answer_server_request(self, request: Request) -> None:
        # Before initialize a legacy server may ping; anything else waits for the session.
        if request.method == "ping":
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id, "result": {}}
            self._note("recv ping from the server; answered")
        else:
            error = {"code": INVALID_REQUEST, "message": "mcpx has not finished connecting to this server"}
            reply = {"jsonrpc": "2.0", "id": request.id, "error": error}
            self._note(f"recv request {_short(request.method, 60)} from the server while probing; refused")
        try:
            payload = orjson.dumps(reply)
        except TypeError:  # an integer id JSON allows but no 64-bit peer can read back: no answer
            self._note("the request's id cannot be written back; not answered")
            return
        self._actions.append(SendMessage(payload=payload))

    def _transport_closed(self, event: TransportClosed) -> None:
        wait = self._wait
        if wait is None:
            return
        why = f" ({_short(event.reason, 80)})" if event.reason else ""
        if self.transport == "stdio":
            self._closed = True
            self._heard[wait.what] = f"the process ended{why}"
            self._decide(
                _Decision(verdict=_V.CLOSED, note=f"recv end of output: the server's process ended{why}")
            )
            return
        if event.token is None or event.token != wait.token:
            return
        wait.complete = True  # nothing more will arrive; there is nothing to close
        self._heard[wait.what] = f"a closed connection{why}"
        self._decide(self._no_answer(wait, f"recv a closed connection instead of an answer{why}"))

    def _http_head(self, event: HttpAnswered) -> None:
        wait = self._wait
        if wait is None or wait.token != event.token:
            self._note(f"recv an HTTP answer to request {event.token}, which nothing waits for; ignored")
            return
        if wait.status is not None:
            raise LocalProtocolError(f"the answer to request {event.token} was already reported")
        wait.status, wait.headers, wait.complete = event.status, event.headers, event.complete
        self._absorb(wait, event.body, end=event.complete)

    def _http_body(self, event: HttpBody) -> None:
        wait = self._wait
        if wait is None or wait.token != event.token:
            return
        if wait.status is None or wait.complete:
            raise LocalProtocolError(f"body for request {event.token} without an open answer head")
        end = event.data == b""
        wait.complete = end
        self._absorb(wait, event.data, end=end)

    def _describe(self, wait: _Wait) -> str:
        kind = _header(wait.headers, "content-type") or "no content type"
        return f"HTTP {wait.status} ({_short(kind, 60)})"

    def _absorb(self, wait: _Wait, data: bytes, *, end: bool) -> None:
        status = wait.status
        assert status is not None
        described = self._describe(wait)
        if status in _AUTH_STATUSES:
            self._heard[wait.what] = described
            failure = (
                f"The server answered {wait.what} with HTTP {status}: it wants credentials, or refuses "
                "these. Configure auth for this server (bearer, basic, header, query or env) and probe again."
            )
            self._decide(_Decision(verdict=_V.AUTH, note=f"recv {described}", failure=failure))
            return
        event_stream = (_header(wait.headers, "content-type") or "").split(";")[0].strip().lower()
        if wait.what == "GET":
            self._absorb_sse_stream(wait, data, end=end, is_sse=event_stream == "text/event-stream")
            return
        if event_stream == "text/event-stream":
            if wait.decoder is None:
                wait.decoder = SseDecoder(max_event=self.config.max_body)
            try:
                events = wait.decoder.feed(data)
            except SseError:
                self._heard[wait.what] = f"{described}, an event over {self.config.max_body} bytes"
                self._decide(self._no_answer(wait, f"recv {described} with an event too large to read"))
                return
            for sse in events:
                if sse.event != "message" or not sse.data:
                    continue
                try:
                    value = orjson.loads(sse.data)
                except orjson.JSONDecodeError:
                    continue
                answer = self._find_answer(value, wait)
                if answer is not None:
                    self._heard[wait.what] = f"{described}, {self._summary(answer)}"
                    self._decide(self._judge(answer, wait, status=status, headers=wait.headers))
                    return
            if end:
                self._heard[wait.what] = f"{described}, a stream without the answer"
                self._decide(self._no_answer(wait, f"recv {described}: the stream ended without an answer"))
            return
        wait.body += data
        if len(wait.body) > self.config.max_body:
            self._heard[wait.what] = f"{described}, a body over {self.config.max_body} bytes"
            self._decide(self._no_answer(wait, f"recv {described} with a body too large to read"))
            return
        if not end:
            return
        body = bytes(wait.body)
        try:
            answer = self._find_answer(orjson.loads(body), wait) if body else None
        except orjson.JSONDecodeError:
            answer = None
        if answer is None:
            what = "an empty body" if not body else "a body that is not a JSON-RPC answer"
            self._heard[wait.what] = f"{described}, {what}"
            shown = f": {_short(body.decode('utf-8', 'replace'), 80)}" if body else ""
            self._decide(self._no_answer(wait, f"recv {described} with {what}{shown}"))
            return
        self._heard[wait.what] = f"{described}, {self._summary(answer)}"
        self._decide(self._judge(answer, wait, status=status, headers=wait.headers))

    def _absorb_sse_stream(self, wait: _Wait, data: bytes, *, end: bool, is_sse: bool) -> None:
        described = self._describe(wait)
        if wait.status != 200 or not is_sse:
            self._heard["GET"] = described
            self._decide(_Decision(verdict=_V.NO_SSE, note=f"recv {described}: not an HTTP+SSE stream"))
            return
        if wait.decoder is None:
            wait.decoder = SseDecoder(max_event=self.config.max_body)
        try:
            events = wait.decoder.feed(data)
        except SseError:
            self._heard["GET"] = f"{described}, an event over {self.config.max_body} bytes"
            self._decide(_Decision(verdict=_V.NO_SSE, note=f"recv {described} with an event too large"))
            return
        for sse in events:
            if sse.event != "endpoint":
                self._note(f"recv SSE event {_short(sse.event, 40)} before the endpoint event; ignored")
                continue
            uri = sse.data.strip()
            # 2024-11-05 "HTTP with SSE": relative to the SSE URL, and never on another origin
            endpoint = resolve_endpoint(self.sse_path, uri)
            if endpoint is None:
                self._heard["GET"] = f"{described}, an unusable endpoint event"
                self._decide(
                    _Decision(
                        verdict=_V.NO_SSE,
                        note=f"recv an endpoint event naming {_short(uri, 80)!s}: not a URI on the SSE URL's origin",
                    )
                )
                return
            self._decide(
                _Decision(
                    verdict=_V.ENDPOINT,
                    note=f"recv endpoint event: {_short(uri, 200)}",
                    endpoint=endpoint,
                    token=wait.token,
                )
            )
            return
        if end:
            self._heard["GET"] = f"{described}, a stream that ended before its endpoint event"
            self._decide(
                _Decision(verdict=_V.NO_SSE, note="recv the end of the stream before an endpoint event")
            )

    def _find_answer(self, value: Any, wait: _Wait) -> Response | ErrorResponse | None:
        items = value if isinstance(value, list) else [value]
        for item in items[:_MAX_ITEMS]:
            try:
                message = parse_message(item)
            except InvalidMessage:
                continue
            if isinstance(message, Response) and message.id == wait.request_id:
                return message
            if isinstance(message, ErrorResponse) and message.id in (wait.request_id, None):
                return message
        return None

    @staticmethod
    def _summary(answer: Response | ErrorResponse) -> str:
        if isinstance(answer, ErrorResponse):
            return f"error {answer.code} ({_short(answer.message, 60)})"
        return "a result"

    def _no_answer(self, wait: _Wait, note: str) -> _Decision:
        """What an unusable answer means at the step that got it."""
        if wait.what == "server/discover":
            return _Decision(verdict=_V.NOT_MODERN, note=f"{note}; not a modern answer: try initialize")
        if wait.what == "initialize":
            return _Decision(
                verdict=_V.NOT_STREAMABLE, note=f"{note}; not Streamable HTTP: try the HTTP+SSE transport"
            )
        return _Decision(verdict=_V.NO_SSE, note=note)
