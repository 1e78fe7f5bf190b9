"""The Streamable HTTP client binding, back to back with mcpx's own ``HttpServer``, bytes carried in memory.

A ``ClientSession`` sits on the client binding, the pure server binding on the
other end; the test moves ``SendBytes`` both ways with a fake clock and plays
the server's application (``respond``, ``progress``, ``notify_list_changed``).
Answers no mcpx server would give (a plain-text 500, an oversized body) come
from a scripted peer instead.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from mcpx.core import (
    CancelRequest,
    CloseConnection,
    HandleRequest,
    HttpConfig,
    HttpServer,
    LocalProtocolError,
    Revision,
    Send,
    SendBytes,
    ServerConfig,
    ToolHints,
    Trace,
)
from mcpx.core.client_session import (
    AbandonStream,
    ClientSession,
    Completed,
    Failed,
    Progress,
    Ready,
    ServerNotification,
)
from mcpx.core.http_client import (
    Closed,
    ExchangeData,
    ExchangeFailed,
    ExchangeHead,
    HttpClientConfig,
    HttpClientConnection,
    JsonReceived,
    OpenConnection,
    RequestRefused,
    SessionExpired,
    StreamEnded,
    encode_header_value,
    tool_header_params,
)
from mcpx.core.http_server import session_id_for
from mcpx.core.revisions import LEGACY_REVISIONS
from mcpx.core.sse import encode_event

SESSION_KEY = b"k" * 32  # the server's: the session ids it mints are known in advance
SESSION_1, SESSION_2 = session_id_for(SESSION_KEY, 1), session_id_for(SESSION_KEY, 2)


URL = "http://127.0.0.1:8000/mcp"
INFO = {"name": "test-client", "version": "1"}
CAPS = {"tools": {"listChanged": True}, "logging": {}, "resources": {"subscribe": True}}


@dataclass
class Sent:
    """One request as the client wrote it."""

    conn: int
    method: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return orjson.loads(self.body)


def parse_request(conn: int, data: bytes) -> Sent:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Sent(conn=conn, method=lines[0].split()[0], headers=headers, body=body)


class Pair:
    """A ClientSession on an HttpClientConnection, wired to an HttpServer."""

    def __init__(
        self,
        *,
        modern: bool = False,
        offer: Revision = Revision.V2025_11_25,
        server_revisions: tuple[Revision, ...] | None = None,
        header_params: Mapping[str, Mapping[str, str]] | None = None,
        **client: Any,
    ) -> None:
        self.now = 1000.0
        tools = ToolHints(header_params=dict(header_params)) if header_params is not None else None
        config = ServerConfig(
            server_info={"name": "srv", "version": "1"}, capabilities=CAPS, trace=True, tools=tools
        )
        if server_revisions is not None:
            config = ServerConfig(
                server_info={"name": "srv", "version": "1"},
                capabilities=CAPS,
                trace=True,
                revisions=server_revisions,
                tools=tools,
            )
        self.server = HttpServer(config, HttpConfig(session_idle=60), session_key=SESSION_KEY)
        self.client = HttpClientConnection(
            HttpClientConfig(url=URL, modern=modern, user_agent="mcpx-test/1", **client)
        )
        self.modern = modern
        self.session = self.new_session(offer)
        self.events: list[Any] = []  # the session's outputs
        self.http_events: list[Any] = []  # the binding's outputs besides bytes and JSON
        self.received: list[JsonReceived] = []
        self.sent: list[Sent] = []
        self.client_closed: list[int] = []
        self.handled: list[HandleRequest] = []
        self.cancelled: list[CancelRequest] = []
        self.traces: list[Trace] = []

    def new_session(self, offer: Revision = Revision.V2025_11_25) -> ClientSession:
        return ClientSession(client_info=INFO, modern=self.modern, offer=offer, stream_per_request=True)

    def pump(self) -> None:
        busy = True
        while busy:
            busy = False
            for action in self.session.next_actions():
                busy = True
                if isinstance(action, Send):
                    self.client.send(action.payload, handle=action.stream, now=self.now)
                elif isinstance(action, AbandonStream):
                    self.client.abandon(action.handle)
                else:
                    self.events.append(action)
            for out in self.client.next_actions():
                busy = True
                if isinstance(out, OpenConnection):
                    self.server.connection_made(out.conn, self.now)
                    self.client.connection_made(out.conn, self.now)
                elif isinstance(out, SendBytes):
                    self.sent.append(parse_request(out.conn, out.data))
                    self.server.receive_data(out.conn, out.data, self.now)
                elif isinstance(out, CloseConnection):
                    self.client_closed.append(out.conn)
                    self.server.connection_lost(out.conn, self.now)
                elif isinstance(out, JsonReceived):
                    self.received.append(out)
                    self.session.receive_json(out.message)
                else:
                    self.http_events.append(out)
            for act in self.server.next_actions():
                busy = True
                if isinstance(act, SendBytes):
                    self.client.receive_data(act.conn, act.data, self.now)
                elif isinstance(act, CloseConnection):
                    self.client.receive_data(act.conn, b"", self.now)
                    self.client.connection_lost(act.conn, self.now)
                elif isinstance(act, HandleRequest):
                    self.handled.append(act)
                elif isinstance(act, CancelRequest):
                    self.cancelled.append(act)
                elif isinstance(act, Trace):
                    self.traces.append(act)

    def handshake(self) -> Ready:
        self.session.start()
        self.pump()
        return self.only(Ready)

    def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> tuple[int, HandleRequest]:
        handle = self.session.request(method, params, **kw)
        self.pump()
        return handle, self.handled[-1]

    def respond(self, action: HandleRequest, result: dict[str, Any]) -> None:
        self.server.respond(action.token, result)
        self.pump()

    def drop(self, conn: int) -> None:
        """The network loses ``conn``: both ends see it go."""
        self.server.connection_lost(conn, self.now)
        self.client.connection_lost(conn, self.now)
        self.pump()

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.server.handle_timer(self.now)
        timer = self.client.get_timer()
        if timer is not None and timer <= self.now:
            self.client.handle_timer(self.now)
        self.pump()

    def only(self, kind: type) -> Any:
        found = [e for e in [*self.events, *self.http_events] if isinstance(e, kind)]
        assert len(found) == 1, found
        return found[0]

    def of(self, kind: type) -> list[Any]:
        return [e for e in [*self.events, *self.http_events] if isinstance(e, kind)]

    def sent_for(self, method: str) -> list[Sent]:
        return [s for s in self.sent if s.body and s.json.get("method") == method]


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


# -- legacy shape ----------------------------------------------------------------------


@pytest.mark.parametrize("rev", [Revision.V2025_11_25, Revision.V2025_03_26])
def test_legacy_handshake_sets_the_session_and_calls_a_tool(rev: Revision) -> None:
    p = Pair(offer=rev)
    ready = p.handshake()
    assert ready.revision == rev
    assert p.client.session_id == SESSION_1 and p.client.revision == rev
    (init,) = p.sent_for("initialize")
    assert init.method == "POST" and init.headers["accept"] == "application/json, text/event-stream"
    assert init.headers["content-type"] == "application/json"
    assert init.headers["host"] == "127.0.0.1:8000" and init.headers["user-agent"] == "mcpx-test/1"
    assert "mcp-session-id" not in init.headers and "mcp-protocol-version" not in init.headers
    (initialized,) = p.sent_for("notifications/initialized")
    assert initialized.headers["mcp-session-id"] == SESSION_1
    handle, action = p.call("tools/call", {"name": "echo", "arguments": {"x": 1}})
    (call,) = p.sent_for("tools/call")
    assert call.headers["mcp-session-id"] == SESSION_1
    if rev == Revision.V2025_03_26:  # the header starts with 2025-06-18
        assert (
            "mcp-protocol-version" not in call.headers and "mcp-protocol-version" not in initialized.headers
        )
    else:
        assert call.headers["mcp-protocol-version"] == str(rev) == initialized.headers["mcp-protocol-version"]
    assert action.method == "tools/call" and action.params["arguments"] == {"x": 1}
    p.respond(action, {"content": [{"type": "text", "text": "hi"}]})
    done = p.only(Completed)
    assert done.handle == handle and done.result["content"][0]["text"] == "hi"
    assert {s.conn for s in p.sent} == {1}, "an idle keep-alive connection is reused"
    assert not p.of(RequestRefused) and not p.of(Failed)


def test_an_sse_answer_carries_progress_before_the_result() -> None:
    p = Pair()
    p.handshake()
    handle, action = p.call("tools/call", {"name": "slow"}, progress=True)
    p.server.progress(action.token, 1, 3, "one")
    p.pump()
    p.server.progress(action.token, 2, 3)
    p.pump()
    p.respond(action, {"content": []})
    progress = p.of(Progress)
    assert [(e.handle, e.progress, e.total) for e in progress] == [(handle, 1, 3), (handle, 2, 3)]
    assert progress[0].message == "one"
    assert p.only(Completed).handle == handle
    on_stream = [r.message for r in p.received if r.handle == handle]
    assert [m.get("method") for m in on_stream] == ["notifications/progress"] * 2 + [None]


def test_the_get_stream_receives_list_changed() -> None:
    p = Pair()
    p.handshake()
    p.client.open_get_stream(p.now)
    p.pump()
    (get,) = [s for s in p.sent if s.method == "GET"]
    assert get.headers["accept"] == "text/event-stream" and get.headers["mcp-session-id"] == SESSION_1
    assert get.headers["mcp-protocol-version"] == "2025-11-25" and "last-event-id" not in get.headers
    p.server.notify_list_changed("tools")
    p.pump()
    (note,) = p.of(ServerNotification)
    assert note.method == "notifications/tools/list_changed"
    assert [r.handle for r in p.received if r.message.get("method") == note.method] == [None]


def test_a_dropped_get_stream_resumes_with_last_event_id_after_retry() -> None:
    p = Pair()
    p.handshake()
    p.client.open_get_stream(p.now)
    p.pump()
    p.server.notify_list_changed("tools")
    p.pump()
    (get,) = [s for s in p.sent if s.method == "GET"]
    p.drop(get.conn)
    ended = p.only(StreamEnded)
    assert ended.handle is None and ended.resuming
    assert p.client.get_timer() == p.now + 1.0  # the server's retry: 1000
    p.server.notify_list_changed("tools")  # while nobody listens: kept for the resumption
    p.pump()
    assert len(p.of(ServerNotification)) == 1
    p.advance(0.5)
    assert [s.method for s in p.sent].count("GET") == 1, "not before the retry delay"
    p.advance(0.6)
    gets = [s for s in p.sent if s.method == "GET"]
    assert len(gets) == 2
    assert gets[1].headers["last-event-id"].endswith("-1")  # the event already seen
    notes = p.of(ServerNotification)
    assert [n.method for n in notes] == ["notifications/tools/list_changed"] * 2


def test_a_suspended_post_stream_is_resumed_and_answered() -> None:
    p = Pair()
    p.handshake()
    handle, action = p.call("tools/call", {"name": "long"})
    p.server.suspend_stream(action.token)  # 2025-11-25 SSE polling: the server closes the response
    p.pump()
    assert p.only(StreamEnded).resuming and p.only(StreamEnded).handle == handle
    p.advance(1.0)
    resumed = [s for s in p.sent if s.method == "GET"]
    assert len(resumed) == 1 and "last-event-id" in resumed[0].headers
    p.respond(action, {"content": [{"type": "text", "text": "late"}]})
    assert p.only(Completed).handle == handle


def test_a_404_for_the_session_is_session_expired_and_reinitialising_works() -> None:
    p = Pair()
    p.handshake()
    p.advance(100)  # the server forgets idle sessions after 60 s
    handle = p.session.request("tools/list")
    p.pump()
    failed = p.only(Failed)
    assert failed.handle == handle and "session" in failed.error["message"]
    assert p.only(SessionExpired).session_id == SESSION_1
    assert p.client.session_id is None
    p.session = p.new_session()
    p.session.start()
    p.pump()
    assert p.client.session_id == SESSION_2
    assert "mcp-session-id" not in p.sent_for("initialize")[-1].headers
    _, action = p.call("tools/list")
    assert p.sent_for("tools/list")[-1].headers["mcp-session-id"] == SESSION_2
    p.respond(action, {"tools": []})
    assert p.only(Completed).result == {"tools": []}


def test_close_deletes_the_session() -> None:
    p = Pair()
    p.handshake()
    p.client.close(p.now)
    p.pump()
    (delete,) = [s for s in p.sent if s.method == "DELETE"]
    assert delete.headers["mcp-session-id"] == SESSION_1
    assert delete.headers["mcp-protocol-version"] == "2025-11-25"
    assert p.only(Closed) == Closed()
    assert any(t.event == "session-ended" and t.detail.get("why") == "deleted" for t in p.traces)
    assert p.client.open_connections == 0
    with pytest.raises(LocalProtocolError):
        p.client.send(b"{}", handle=None, now=p.now)


def test_close_without_a_session_sends_nothing() -> None:
    client = HttpClientConnection(HttpClientConfig(url=URL, modern=True))
    client.close(0.0)
    assert client.next_actions() == [Closed()]


# -- 2026-07-28 ---------------------------------------------------------------------------


WEATHER = {"météo": {"city": "City", "days": "Days", "metric": "Metric", "note": "Note"}}


def test_modern_requests_carry_the_headers_with_base64_where_needed() -> None:
    p = Pair(
        modern=True,
        header_params=WEATHER,
        tool_headers=WEATHER,
        headers=(("Authorization", "Bearer t0ken"), ("Mcp-Session-Id", "x"), ("Connection", "close")),
    )
    assert p.client.config.refused_headers == ("Mcp-Session-Id", "Connection")
    arguments = {"city": " Zürich ", "days": 3, "metric": True, "note": None}
    handle, action = p.call("tools/call", {"name": "météo", "arguments": arguments})
    (call,) = p.sent_for("tools/call")
    h = call.headers
    assert h["mcp-protocol-version"] == "2026-07-28" and h["mcp-method"] == "tools/call"
    assert h["mcp-name"] == b64("météo")
    assert h["mcp-param-city"] == b64(" Zürich ")
    assert h["mcp-param-days"] == "3" and h["mcp-param-metric"] == "true"
    assert "mcp-param-note" not in h  # null: omitted
    assert h["authorization"] == "Bearer t0ken" and "connection" not in h
    assert "mcp-session-id" not in h
    assert action.params["arguments"]["city"] == " Zürich "  # the server decoded and agreed
    p.respond(action, {"content": []})
    assert p.only(Completed).handle == handle
    _, read = p.call("resources/read", {"uri": "file:///notes/a%20b.txt"})
    assert p.sent_for("resources/read")[0].headers["mcp-name"] == "file:///notes/a%20b.txt"
    assert read.method == "resources/read"


def test_a_header_mismatch_is_the_servers_32020() -> None:
    p = Pair(modern=True, header_params=WEATHER)  # the client knows no mapping
    handle = p.session.request("tools/call", {"name": "météo", "arguments": {"city": "Oslo"}})
    p.pump()
    failed = p.only(Failed)
    assert failed.handle == handle and failed.error["code"] == -32020
    assert "Mcp-Param-City" in failed.error["message"]
    assert not [r for r in p.received if r.synthesized]


def test_an_unsupported_version_is_the_servers_32022() -> None:
    p = Pair(modern=True, server_revisions=tuple(LEGACY_REVISIONS))
    handle = p.session.request("tools/list")
    p.pump()
    failed = p.only(Failed)
    assert failed.handle == handle and failed.error["code"] == -32022
    assert failed.error["data"]["requested"] == "2026-07-28"


def test_cancelling_a_modern_request_closes_its_connection() -> None:
    p = Pair(modern=True)
    handle, action = p.call("tools/call", {"name": "slow"})
    (call,) = p.sent_for("tools/call")
    p.session.cancel(handle)
    p.pump()
    assert p.client_closed == [call.conn]
    assert [c.token for c in p.cancelled] == [action.token]
    assert not p.of(Failed) and not p.of(Completed)


def test_requests_beyond_max_connections_wait_their_turn() -> None:
    p = Pair(modern=True, max_connections=1)
    _, first = p.call("tools/call", {"name": "a"})
    p.session.request("tools/call", {"name": "b"})
    p.pump()
    assert len(p.handled) == 1 and len(p.sent) == 1
    p.respond(first, {"content": []})
    assert len(p.handled) == 2 and {s.conn for s in p.sent} == {1}


def test_legacy_only_api_is_refused_in_the_modern_era() -> None:
    client = HttpClientConnection(HttpClientConfig(url=URL, modern=True))
    with pytest.raises(LocalProtocolError):
        client.open_get_stream(0.0)
    with pytest.raises(LocalProtocolError):
        client.send(b"[]", handle=None, now=0.0)
    with pytest.raises(LocalProtocolError):
        HttpClientConnection(HttpClientConfig(url=URL, modern=True), session_id="s")


# -- answers no mcpx server gives ---------------------------------------------------------


class Scripted:
    """A ClientSession on the binding, answered with raw bytes."""

    def __init__(self, *, modern: bool = True, **config: Any) -> None:
        self.client = HttpClientConnection(HttpClientConfig(url=URL, modern=modern, **config))
        self.session = ClientSession(client_info=INFO, modern=True, stream_per_request=True)
        self.events: list[Any] = []
        self.received: list[JsonReceived] = []
        self.conn = 0
        self.closed: list[int] = []

    def call(self, method: str, params: dict[str, Any] | None = None) -> int:
        handle = self.session.request(method, params)
        (send,) = [a for a in self.session.next_actions() if isinstance(a, Send)]
        self.client.send(send.payload, handle=send.stream, now=0.0)
        (opened,) = [a for a in self.client.next_actions() if isinstance(a, OpenConnection)]
        self.conn = opened.conn
        self.client.connection_made(self.conn, 0.0)
        self.drain()
        return handle

    def answer(self, raw: bytes, *, eof: bool = False) -> None:
        self.client.receive_data(self.conn, raw, 1.0)
        if eof:
            self.client.receive_data(self.conn, b"", 1.0)
        self.drain()

    def drain(self) -> None:
        for out in self.client.next_actions():
            if isinstance(out, JsonReceived):
                self.received.append(out)
                self.session.receive_json(out.message)
            elif isinstance(out, CloseConnection):
                self.closed.append(out.conn)
            elif not isinstance(out, SendBytes):
                self.events.append(out)
        self.events += self.session.next_actions()

    def failed(self) -> Failed:
        (failed,) = [e for e in self.events if isinstance(e, Failed)]
        return failed


def response(status: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers), f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_a_plain_text_500_is_a_synthesized_error_with_status_and_excerpt() -> None:
    s = Scripted()
    handle = s.call("tools/list")
    s.answer(response("500 Internal Server Error", [("Content-Type", "text/plain")], b"upstream\nexploded"))
    failed = s.failed()
    assert failed.handle == handle and failed.error["code"] == -32603
    assert "HTTP 500 Internal Server Error" in failed.error["message"]
    assert "upstream exploded" in failed.error["message"]
    assert failed.error["data"] == {"httpStatus": 500, "body": "upstream exploded"}
    assert [r.synthesized for r in s.received] == [True]


def test_an_html_404_outside_a_session_is_a_synthesized_error() -> None:
    s = Scripted(modern=False)
    s.call("ping")
    s.answer(response("404 Not Found", [("Content-Type", "text/html")], b"<h1>Not here</h1>"))
    assert "HTTP 404 Not Found (text/html)" in s.failed().error["message"]
    assert not [e for e in s.events if isinstance(e, SessionExpired)]


def test_an_id_less_json_rpc_error_body_is_that_error() -> None:
    s = Scripted()
    handle = s.call("tools/list")
    body = orjson.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Origin refused"}}
    )
    s.answer(response("403 Forbidden", [("Content-Type", "application/json")], body))
    assert s.failed().handle == handle and s.failed().error == {"code": -32600, "message": "Origin refused"}


def test_a_body_over_max_body_fails_the_request_and_closes_the_connection() -> None:
    s = Scripted(max_body=64)
    s.call("tools/list")
    big = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "pad": "x" * 200}})
    s.answer(response("200 OK", [("Content-Type", "application/json")], big))
    assert "exceeds 64 bytes" in s.failed().error["message"] and s.closed == [s.conn]


def test_an_sse_event_over_max_event_fails_the_request() -> None:
    s = Scripted(max_event=64)
    s.call("tools/list")
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    s.answer(head)
    chunk = b"data: " + b"y" * 100
    s.answer(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
    assert "exceeds 64 bytes" in s.failed().error["message"]


def test_a_stream_that_ends_without_the_answer_fails_the_request() -> None:
    s = Scripted()
    handle = s.call("tools/call", {"name": "t"})
    events = encode_event(orjson.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}))
    s.answer(response("200 OK", [("Content-Type", "text/event-stream")], events))
    assert s.failed().handle == handle and "event stream ended" in s.failed().error["message"]
    ended = [e for e in s.events if isinstance(e, StreamEnded)]
    assert [(e.handle, e.resuming) for e in ended] == [(handle, False)]


def test_a_connection_that_never_comes_up_fails_the_request() -> None:
    s = Scripted()
    client = s.client
    handle = s.session.request("ping")
    (send,) = [a for a in s.session.next_actions() if isinstance(a, Send)]
    client.send(send.payload, handle=send.stream, now=0.0)
    (opened,) = client.next_actions()
    assert isinstance(opened, OpenConnection)
    client.connection_lost(opened.conn, 1.0)
    s.drain()
    assert (
        s.failed().handle == handle and "could not connect to 127.0.0.1:8000" in s.failed().error["message"]
    )


def test_a_refused_notification_is_reported_not_lost() -> None:
    s = Scripted(modern=False)
    s.client.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', handle=None, now=0.0)
    (opened,) = s.client.next_actions()
    assert isinstance(opened, OpenConnection)
    s.conn = opened.conn
    s.client.connection_made(s.conn, 0.0)
    s.drain()
    s.answer(response("400 Bad Request", [("Content-Type", "text/plain")], b"no"))
    (refused,) = [e for e in s.events if isinstance(e, RequestRefused)]
    assert refused.status == 400 and "no" in refused.message


# -- header values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        ("get_weather", True),
        ("two words", True),
        ("", True),
        (" lead", False),
        ("trail ", False),
        ("tab\there", False),
        ("naïve", False),
        ("=?base64?abc?=", False),
        ("=?BASE64?abc?=", False),
    ],
)
def test_header_values_are_base64_unless_plain(value: str, plain: bool) -> None:
    encoded = encode_header_value(value)
    if plain:
        assert encoded == value
    else:
        assert encoded.startswith("=?base64?") and encoded.endswith("?=")
        assert base64.b64decode(encoded[9:-2]).decode() == value


def test_tool_header_params_reads_and_validates_annotations() -> None:
    def tool(**props: Any) -> dict[str, Any]:
        return {"name": "t", "inputSchema": {"type": "object", "properties": props}}

    assert tool_header_params(tool(a={"type": "string", "x-mcp-header": "Region"}, b={"type": "string"})) == {
        "a": "Region"
    }
    assert tool_header_params({"name": "t"}) == {}
    assert tool_header_params(tool(a={"type": "number", "x-mcp-header": "N"})) is None
    assert tool_header_params(tool(a={"type": "string", "x-mcp-header": "bad name"})) is None
    assert (
        tool_header_params(
            tool(a={"type": "string", "x-mcp-header": "R"}, b={"type": "integer", "x-mcp-header": "r"})
        )
        is None
    )


def test_config_parses_the_url_and_refuses_bad_ones() -> None:
    config = HttpClientConfig(url="https://example.com/mcp?key=1")
    assert (config.tls, config.host, config.port, config.target) == (True, "example.com", 443, "/mcp?key=1")
    assert HttpClientConfig(url="http://[::1]:9/").authority == "[::1]:9"
    for bad in ["ftp://x/", "http:///nohost", "http://user:pw@host/"]:
        with pytest.raises(ValueError):
            HttpClientConfig(url=bad)
    with pytest.raises(ValueError):
        HttpClientConfig(url=URL, headers=(("X-Bad", "a\r\nb"),))


def _json_answer(request_id: int) -> bytes:
    body = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"resultType": "complete"}})
    return response("200 OK", [("Content-Type", "application/json")], body)


def _sent_on(client: HttpClientConnection) -> tuple[list[int], list[int], list[int]]:
    """What the binding asked for: connections opened, connections closed, connections written to."""
    actions = client.next_actions()
    opened = [a.conn for a in actions if isinstance(a, OpenConnection)]
    closed = [a.conn for a in actions if isinstance(a, CloseConnection)]
    written = [a.conn for a in actions if isinstance(a, SendBytes)]
    return opened, closed, written


@pytest.mark.parametrize("how", ["eof", "reset"])
def test_a_kept_connection_closed_before_any_answer_sends_the_request_again_once(how: str) -> None:
    """RFC 9112 §9.3: a server closes an idle keep-alive connection when it likes; the request goes again."""
    s = Scripted()
    first = s.call("ping")
    s.answer(_json_answer(1))
    assert [e.handle for e in s.events if isinstance(e, Completed)] == [first]
    kept = s.conn
    second = s.session.request("ping")
    (send,) = [a for a in s.session.next_actions() if isinstance(a, Send)]
    s.client.send(send.payload, handle=send.stream, now=2.0)
    assert _sent_on(s.client) == ([], [], [kept])  # the kept connection is reused
    if how == "eof":
        s.client.receive_data(kept, b"", 3.0)
    else:
        s.client.connection_lost(kept, 3.0)
    opened, closed, written = _sent_on(s.client)
    assert len(opened) == 1 and opened[0] != kept and written == []
    assert closed == ([kept] if how == "eof" else [])
    s.client.connection_made(opened[0], 3.0)
    assert _sent_on(s.client) == ([], [], [opened[0]])  # the same request, on the new connection
    s.client.receive_data(opened[0], _json_answer(2), 4.0)
    s.conn = opened[0]
    s.drain()
    assert [e.handle for e in s.events if isinstance(e, Completed)] == [first, second]
    assert not [e for e in s.events if isinstance(e, Failed)]


def test_a_request_is_sent_again_only_once_and_never_on_a_connection_s_first_use() -> None:
    s = Scripted()
    s.call("ping")
    s.answer(_json_answer(1))
    kept = s.conn
    handle = s.session.request("ping")
    (send,) = [a for a in s.session.next_actions() if isinstance(a, Send)]
    s.client.send(send.payload, handle=send.stream, now=2.0)
    s.client.next_actions()
    s.client.receive_data(kept, b"", 3.0)
    (fresh,), _, _ = _sent_on(s.client)
    s.client.connection_made(fresh, 3.0)
    s.client.next_actions()
    s.client.receive_data(fresh, b"", 4.0)  # a new connection closed too: that is the server's answer
    s.conn = fresh
    s.drain()
    assert s.failed().handle == handle
    opened, _, _ = _sent_on(s.client)
    assert opened == []  # not sent a third time


def raw_exchange(
    client: HttpClientConnection, token: int, target: str, body: bytes = b""
) -> tuple[int, str, Sent]:
    """Start exchange ``token`` and bring its connection up: the connection, the request line, the request."""
    client.exchange(token, "POST" if body else "GET", target, [("Accept", "*/*")], body, now=0.0)
    (opened,) = [a for a in client.next_actions() if isinstance(a, OpenConnection)]
    client.connection_made(opened.conn, 0.0)
    (written,) = [a for a in client.next_actions() if isinstance(a, SendBytes)]
    line = written.data.split(b"\r\n", 1)[0].decode("latin-1")
    return opened.conn, line, parse_request(opened.conn, written.data)


def test_a_raw_exchange_hands_on_the_answer_as_it_comes() -> None:
    """The era probe's way: status, headers and body undecoded, whatever the content type."""
    client = HttpClientConnection(HttpClientConfig(url=URL, headers=[("Authorization", "Bearer t")]))
    conn, line, sent = raw_exchange(client, 7, "/sse?x=1", b'{"jsonrpc":"2.0"}')
    assert line == "POST /sse?x=1 HTTP/1.1"
    assert sent.headers["accept"] == "*/*" and sent.headers["authorization"] == "Bearer t"
    assert "mcp-session-id" not in sent.headers and "mcp-protocol-version" not in sent.headers
    head = b"HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/html\r\nContent-Length: 11\r\n\r\n"
    client.receive_data(conn, head + b"<h1>no", 1.0)
    client.receive_data(conn, b"</h1>", 1.0)
    got = [a for a in client.next_actions() if not isinstance(a, CloseConnection)]
    assert got[0] == ExchangeHead(
        token=7,
        status=405,
        headers=(("content-type", "text/html"), ("content-length", "11")),  # as h11 gives them
    )
    assert b"".join(a.data for a in got[1:]) == b"<h1>no</h1>"
    assert got[-1] == ExchangeData(token=7, data=b"")  # the end, once
    assert [a for a in got if isinstance(a, ExchangeFailed)] == []


def test_a_raw_exchange_that_loses_its_connection_fails_and_a_dropped_one_says_nothing() -> None:
    client = HttpClientConnection(HttpClientConfig(url=URL))
    conn, _, _ = raw_exchange(client, 1, "/mcp")
    client.receive_data(conn, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n", 1.0)
    client.connection_lost(conn, 2.0)
    got = client.next_actions()
    assert isinstance(got[0], ExchangeHead) and got[1] == ExchangeData(token=1, data=b"data: x\n\n")
    (failed,) = [a for a in got if isinstance(a, ExchangeFailed)]
    assert failed.token == 1 and "closed before the answer" in failed.reason
    conn2, _, _ = raw_exchange(client, 2, "/mcp")
    client.drop_exchange(2)
    assert client.next_actions() == [CloseConnection(conn=conn2)]
    client.receive_data(conn2, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 3.0)
    assert client.next_actions() == []  # nothing more for a dropped exchange
    client.exchange(3, "GET", "/mcp", [], b"", now=4.0)
    with pytest.raises(LocalProtocolError):
        client.exchange(3, "GET", "/mcp", [], b"", now=4.0)  # one exchange per token at a time
