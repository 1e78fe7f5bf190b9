"""The 2024-11-05 HTTP+SSE client transport (``mcpx.core.sse_client``), against a scripted peer in memory.

MCP 2024-11-05, Transports → "HTTP with SSE".  Every connection the machine
opens gets an ``h11`` server on the other end; the test reads what the client
wrote from it and writes the server's answers as bytes, whole or in pieces,
with a fake clock.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import h11
import orjson
import pytest

from mcpx.core import CloseConnection, LocalProtocolError, Revision, SendBytes
from mcpx.core.client_session import ClientSession, Completed, Failed, Ready
from mcpx.core.http_client import Closed, JsonReceived, OpenConnection, RequestRefused, StreamEnded
from mcpx.core.sse import encode_event
from mcpx.core.sse_client import (
    _TRANSITIONS,
    EndpointReady,
    SseClientConfig,
    SseClientConnection,
    SseState,
    _In,
    resolve_endpoint,
    transition_table,
)

URL = "http://127.0.0.1:8000/sse"
SSE_HEAD = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]


def rpc(rid: Any, method: str, **params: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def note(method: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": method})


def result(rid: Any, **value: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": value})


@dataclass
class Peer:
    """The server end of one connection."""

    conn: int
    h11: h11.Connection = field(default_factory=lambda: h11.Connection(h11.SERVER))
    requests: list[tuple[h11.Request, bytes]] = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)
    closed: bool = False

    def feed(self, data: bytes) -> None:
        self.h11.receive_data(data)
        self.pump()

    def pump(self) -> None:
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self.requests.append((event, b""))
                self.body = bytearray()
            elif isinstance(event, h11.Data):
                self.body += event.data
            elif isinstance(event, h11.EndOfMessage):
                request, _ = self.requests[-1]
                self.requests[-1] = (request, bytes(self.body))

    def header(self, name: str, index: int = -1) -> str | None:
        request, _ = self.requests[index]
        for key, value in request.headers:
            if key.decode().lower() == name.lower():
                return str(value.decode())
        return None


class Wire:
    """The machine under test and a peer per connection; ``actions`` holds what was drained last."""

    def __init__(self, url: str = URL, **config: Any) -> None:
        self.sse = SseClientConnection(SseClientConfig(url=url, **config), conn_ids=itertools.count(1))
        self.now = 100.0
        self.peers: dict[int, Peer] = {}
        self.actions: list[Any] = []
        self.log: list[Any] = []  # every action, in order

    def drain(self) -> list[Any]:
        actions = self.sse.next_actions()
        for action in actions:
            if isinstance(action, OpenConnection):
                self.peers[action.conn] = Peer(action.conn)
            elif isinstance(action, SendBytes):
                peer = self.peers[action.conn]
                assert not peer.closed, "bytes written to a closed connection"
                peer.feed(action.data)
            elif isinstance(action, CloseConnection):
                self.peers[action.conn].closed = True
        self.actions = actions
        self.log += actions
        return actions

    def open(self) -> Peer:
        self.sse.open(self.now)
        (opened,) = [a for a in self.drain() if isinstance(a, OpenConnection)]
        self.sse.connection_made(opened.conn, self.now)
        self.drain()
        return self.peers[opened.conn]

    def to_client(self, peer: Peer, data: bytes, *, cuts: int | None = None) -> list[Any]:
        """Deliver ``data`` from ``peer``, whole or ``cuts`` bytes at a time; the actions it caused."""
        got: list[Any] = []
        step = cuts or max(1, len(data))
        for i in range(0, len(data), step):
            self.sse.receive_data(peer.conn, data[i : i + step], self.now)
            got += self.drain()
        if not data:
            self.sse.receive_data(peer.conn, b"", self.now)
            got += self.drain()
        self.actions = got
        return got

    def stream_head(
        self, peer: Peer, status: int = 200, headers: list[tuple[str, str]] | None = None
    ) -> bytes:
        return peer.h11.send(h11.Response(status_code=status, headers=headers or SSE_HEAD)) or b""

    def data(self, peer: Peer, payload: bytes) -> bytes:
        return peer.h11.send(h11.Data(data=payload)) or b""

    def end(self, peer: Peer) -> bytes:
        return peer.h11.send(h11.EndOfMessage()) or b""

    def ready(self, endpoint: str = "/messages?session_id=s1") -> Peer:
        """Open the stream and send the endpoint event; the GET's peer."""
        get = self.open()
        self.to_client(
            get, self.stream_head(get) + self.data(get, encode_event(endpoint.encode(), event="endpoint"))
        )
        return get

    def send(self, payload: bytes, handle: int | None = None) -> list[Any]:
        self.sse.send(payload, handle=handle, now=self.now)
        return self.drain()

    def post_peer(self) -> Peer:
        """The connection the latest POST went out on (connecting it if it is new)."""
        opened = [a for a in self.actions if isinstance(a, OpenConnection)]
        if opened:
            self.sse.connection_made(opened[-1].conn, self.now)
            self.drain()
            return self.peers[opened[-1].conn]
        return self.peers[max(self.peers)]

    def accept(self, peer: Peer, status: int = 202, body: bytes = b"Accepted", **kw: Any) -> list[Any]:
        headers = [("Content-Type", kw.get("content_type", "text/plain")), ("Content-Length", str(len(body)))]
        if kw.get("close"):
            headers.append(("Connection", "close"))
        data = peer.h11.send(h11.Response(status_code=status, headers=headers)) or b""
        data += (peer.h11.send(h11.Data(data=body)) or b"") if body else b""
        data += peer.h11.send(h11.EndOfMessage()) or b""
        got = self.to_client(peer, data)
        if peer.h11.our_state is h11.DONE and peer.h11.their_state is h11.DONE:
            peer.h11.start_next_cycle()
            peer.pump()  # a request the client pipelined behind the answer
        return got


def json_received(actions: list[Any]) -> list[Any]:
    return [a.message for a in actions if isinstance(a, JsonReceived)]


# ----------------------------------------------------------------------------
# The endpoint
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "data", "expected"),
    [
        (URL, "/messages?session_id=1", "http://127.0.0.1:8000/messages?session_id=1"),
        (URL, "  /messages?session_id=1 \r\n", "http://127.0.0.1:8000/messages?session_id=1"),
        ("http://h:8000/mcp/sse", "messages?s=2", "http://h:8000/mcp/messages?s=2"),
        ("http://h:8000/mcp/sse", "../up", "http://h:8000/up"),
        (URL, "http://127.0.0.1:8000/m", "http://127.0.0.1:8000/m"),
        ("http://Example.COM/sse", "http://example.com:80/m", "http://example.com:80/m"),  # default port
        ("https://h/sse", "https://h:443/m?x=1", "https://h:443/m?x=1"),
        ("/sse", "/messages?session_id=1", "/messages?session_id=1"),  # a relative base stays relative
        (URL, "http://127.0.0.2:8000/m", None),  # another host
        (URL, "http://127.0.0.1:8001/m", None),  # another port
        (URL, "https://127.0.0.1:8000/m", None),  # another scheme
        (URL, "//evil.example/m", None),  # scheme-relative: another host
        (URL, "javascript:alert(1)", None),
        (URL, "", None),
        (URL, "   ", None),
        (URL, "/messages?a=1 b=2", None),  # white space inside
        (URL, "/m\x00", None),
        (URL, "http://[bad", None),
        ("/sse", "http://127.0.0.1:8000/m", None),  # a relative base cannot vouch for an origin
    ],
)
def test_resolve_endpoint(base: str, data: str, expected: str | None) -> None:
    assert resolve_endpoint(base, data) == expected


def test_the_endpoint_event_opens_the_post_lane_and_queued_messages_go_in_order() -> None:
    w = Wire(headers=(("Authorization", "Bearer t"),))
    get = w.open()
    request, _ = get.requests[0]
    assert (request.method, request.target) == (b"GET", b"/sse")
    assert get.header("accept") == "text/event-stream" and get.header("authorization") == "Bearer t"
    assert get.header("host") == "127.0.0.1:8000"
    assert w.sse.state is SseState.CONNECTING and w.sse.get_timer() == 130.0
    # Before the endpoint: queued, nothing on the wire.
    assert w.send(rpc(1, "initialize", protocolVersion="2024-11-05"), handle=1) == []
    assert w.send(note("notifications/initialized")) == []
    got = w.to_client(get, w.stream_head(get))
    assert got == [] and w.sse.state is SseState.AWAITING_ENDPOINT
    got = w.to_client(get, w.data(get, b": keep-alive\n\nevent: endpoint\ndata: /messages?session_id=s1\n\n"))
    assert got[0] == EndpointReady(url="http://127.0.0.1:8000/messages?session_id=s1")
    assert w.sse.state is SseState.READY and w.sse.get_timer() is None
    post = w.post_peer()
    assert post is not get
    request, body = post.requests[0]
    assert (request.method, request.target) == (b"POST", b"/messages?session_id=s1")
    assert post.header("content-type") == "application/json" and post.header("authorization") == "Bearer t"
    assert orjson.loads(body)["method"] == "initialize"
    assert len(post.requests) == 1  # one at a time: the notification waits for the 202
    w.accept(post)
    assert (
        len(post.requests) == 2 and orjson.loads(post.requests[1][1])["method"] == "notifications/initialized"
    )
    w.accept(post)
    assert [a.conn for a in w.log if isinstance(a, OpenConnection)] == [get.conn, post.conn]  # kept alive


def test_an_endpoint_on_another_origin_ends_the_transport_and_fails_what_waits() -> None:
    w = Wire()
    get = w.open()
    w.send(rpc(1, "initialize"), handle=1)
    got = w.to_client(
        get, w.stream_head(get) + w.data(get, encode_event(b"http://evil.example/steal", event="endpoint"))
    )
    assert CloseConnection(conn=get.conn) in got
    (error,) = json_received(got)
    assert error["id"] == 1 and error["error"]["code"] == -32603 and "origin" in error["error"]["message"]
    (ended,) = [a for a in got if isinstance(a, StreamEnded)]
    assert ended.handle is None and not ended.resuming and "evil.example" in ended.reason
    assert w.sse.state is SseState.ENDED and w.sse.endpoint is None
    assert not any(isinstance(a, OpenConnection) for a in got)  # nothing was POSTed anywhere


def test_a_second_endpoint_event_is_ignored() -> None:
    w = Wire()
    get = w.ready("/messages?session_id=first")
    got = w.to_client(get, w.data(get, encode_event(b"/other", event="endpoint")))
    assert got == [] and w.sse.endpoint == "http://127.0.0.1:8000/messages?session_id=first"
    got = w.to_client(get, w.data(get, encode_event(b"http://evil.example/x", event="endpoint")))
    assert got == [] and w.sse.state is SseState.READY


def test_no_endpoint_in_time_ends_the_transport() -> None:
    w = Wire(endpoint_timeout=5.0)
    get = w.open()
    w.to_client(get, w.stream_head(get))
    w.send(rpc(7, "initialize"), handle=7)
    deadline = w.sse.get_timer()
    assert deadline == 105.0
    w.sse.handle_timer(104.0)
    assert w.drain() == []
    w.sse.handle_timer(105.0)
    got = w.drain()
    assert json_received(got)[0]["id"] == 7
    assert any(isinstance(a, StreamEnded) and "within 5s" in a.reason for a in got)
    assert w.sse.get_timer() is None and get.closed


# ----------------------------------------------------------------------------
# Messages on the stream
# ----------------------------------------------------------------------------


def _script(w: Wire, get: Peer) -> bytes:
    return (
        w.stream_head(get)
        + w.data(get, b": hello\n\n")
        + w.data(get, encode_event(result(0, early=True)))  # a message before the endpoint
        + w.data(get, encode_event(b"/messages?session_id=s1", event="endpoint"))
        + w.data(get, b"event: message\r\ndata: " + result(1, ok=True) + b"\r\n\r\n")
        + w.data(get, encode_event(b"not json"))
        + w.data(get, encode_event(b"{}", event="something-else"))
        + w.data(
            get, b"data: " + orjson.dumps({"jsonrpc": "2.0", "method": "notifications/progress"}) + b"\n\n"
        )
        + w.data(get, encode_event(rpc("srv-1", "ping")))
        + w.data(
            get,
            b'data: [{"jsonrpc":"2.0","id":2,"result":{}},\ndata: {"jsonrpc":"2.0","id":3,"result":{}}]\n\n',
        )
        + w.end(get)
    )


@pytest.mark.parametrize("cuts", [None, 1, 2, 3, 7, 64])
def test_split_reads_give_the_same_events(cuts: int | None) -> None:
    w = Wire()
    get = w.open()
    got = w.to_client(get, _script(w, get), cuts=cuts)
    assert EndpointReady(url="http://127.0.0.1:8000/messages?session_id=s1") in got
    assert json_received(got) == [
        {"jsonrpc": "2.0", "id": 0, "result": {"early": True}},  # delivered: harmless, and maybe awaited
        {"jsonrpc": "2.0", "id": 1, "result": {"ok": True}},
        {"jsonrpc": "2.0", "method": "notifications/progress"},
        {"jsonrpc": "2.0", "id": "srv-1", "method": "ping", "params": {}},
        [{"jsonrpc": "2.0", "id": 2, "result": {}}, {"jsonrpc": "2.0", "id": 3, "result": {}}],
    ]
    assert isinstance(got[-1], StreamEnded) and got[-1].reason == "the server ended the event stream"


def test_answers_on_the_stream_settle_their_requests_and_the_end_fails_the_rest() -> None:
    w = Wire()
    get = w.ready()
    w.send(rpc(1, "tools/list"), handle=1)
    w.accept(w.post_peer())
    w.send(rpc(2, "tools/call", name="slow"), handle=2)
    w.accept(w.post_peer())
    assert json_received(w.to_client(get, w.data(get, encode_event(result(1, tools=[]))))) == [
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
    ]
    got = w.to_client(get, b"")  # the server went away mid-stream
    (failed,) = json_received(got)
    assert failed["id"] == 2 and "closed the connection" in failed["error"]["message"]
    assert next(a for a in got if isinstance(a, JsonReceived)).synthesized
    assert isinstance(got[-1], StreamEnded)
    # After the end: a request fails at once, a notification goes nowhere.
    got = w.send(rpc(3, "ping"), handle=3)
    assert json_received(got)[0]["id"] == 3 and not any(isinstance(a, OpenConnection) for a in got)
    assert w.send(note("notifications/cancelled")) == []


def test_a_lost_stream_connection_ends_the_transport() -> None:
    w = Wire()
    get = w.ready()
    w.send(rpc(1, "tools/list"), handle=1)
    post = w.post_peer()
    w.sse.connection_lost(get.conn, w.now)
    got = w.drain()
    assert json_received(got)[0]["id"] == 1
    assert CloseConnection(conn=post.conn) in got  # the POST lane goes with the session
    assert isinstance(got[-1], StreamEnded) and w.sse.state is SseState.ENDED


def test_an_event_over_the_limit_ends_the_transport() -> None:
    w = Wire(max_event=64)
    get = w.ready()
    got = w.to_client(get, w.data(get, b"data: " + b"x" * 100))
    assert isinstance(got[-1], StreamEnded) and "exceeds 64 bytes" in got[-1].reason


@pytest.mark.parametrize(
    ("status", "headers", "body", "words"),
    [
        (404, [("Content-Type", "text/html")], b"<h1>Not Found</h1>", ["HTTP 404 Not Found", "Not Found"]),
        (200, [("Content-Type", "application/json")], b"{}", ["HTTP 200", "not text/event-stream"]),
        (405, [("Content-Type", "application/json")], b'{"error":"GET"}', ["HTTP 405"]),
    ],
)
def test_a_get_that_is_not_a_stream_ends_with_its_reason(
    status: int, headers: list[tuple[str, str]], body: bytes, words: list[str]
) -> None:
    w = Wire()
    get = w.open()
    w.send(rpc(1, "initialize"), handle=1)
    headers = [*headers, ("Content-Length", str(len(body)))]
    got = w.to_client(get, w.stream_head(get, status, headers) + w.data(get, body) + w.end(get))
    ended = got[-1]
    assert isinstance(ended, StreamEnded)
    assert all(word in ended.reason for word in words), ended.reason
    assert json_received(got)[0]["id"] == 1


def test_a_server_that_cannot_be_reached() -> None:
    w = Wire()
    w.sse.open(w.now)
    (opened,) = w.drain()
    assert isinstance(opened, OpenConnection)
    w.sse.connection_lost(opened.conn, w.now)
    (ended,) = w.drain()
    assert isinstance(ended, StreamEnded) and "could not connect to 127.0.0.1:8000" in ended.reason


# ----------------------------------------------------------------------------
# Answers to POSTs
# ----------------------------------------------------------------------------


def test_a_refused_post_fails_its_requests_with_the_servers_error_or_one_made_here() -> None:
    w = Wire()
    w.ready()
    w.send(rpc(1, "tools/list"), handle=1)
    error = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"unknown session"}}'
    got = w.accept(w.post_peer(), 404, error, content_type="application/json")
    (failed,) = [a for a in got if isinstance(a, JsonReceived)]
    assert not failed.synthesized and failed.handle == 1
    assert failed.message == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32600, "message": "unknown session"},
    }
    w.send(rpc(2, "tools/list"), handle=2)
    got = w.accept(w.post_peer(), 500, b"oops")
    (failed,) = [a for a in got if isinstance(a, JsonReceived)]
    assert failed.synthesized and failed.message["error"]["data"] == {"httpStatus": 500, "body": "oops"}
    w.send(note("notifications/initialized"))
    got = w.accept(w.post_peer(), 400, b"bad")
    assert got == [
        RequestRefused(
            status=400, message="the server refused the message: HTTP 400 Bad Request (text/plain): bad"
        )
    ]


def test_a_post_whose_connection_drops_fails_and_the_next_one_uses_a_new_connection() -> None:
    w = Wire()
    w.ready()
    w.send(rpc(1, "tools/list"), handle=1)
    w.send(rpc(2, "tools/list"), handle=2)
    first = w.post_peer()
    w.sse.connection_lost(first.conn, w.now)
    got = w.drain()
    (failed,) = json_received(got)
    assert failed["id"] == 1 and "before the server accepted the message" in failed["error"]["message"]
    second = w.post_peer()
    assert second.conn != first.conn and orjson.loads(second.requests[0][1])["id"] == 2


def test_a_server_that_closes_after_each_post_gets_a_new_connection_each_time() -> None:
    w = Wire()
    w.ready()
    w.send(note("notifications/initialized"))
    w.send(rpc(1, "ping"), handle=1)
    first = w.post_peer()
    got = w.accept(first, close=True)
    assert CloseConnection(conn=first.conn) in got
    second = w.post_peer()
    assert second.conn != first.conn and orjson.loads(second.requests[0][1])["method"] == "ping"


def test_an_accepted_post_ignores_its_body() -> None:
    w = Wire()
    w.ready()
    w.send(rpc(1, "ping"), handle=1)
    got = w.accept(w.post_peer(), 200, result(1), content_type="application/json")
    assert json_received(got) == []  # answers come on the stream, never twice


def test_the_queue_is_bounded() -> None:
    w = Wire(max_queued=2)
    w.open()
    w.send(rpc(1, "a"), handle=1)
    w.send(rpc(2, "b"), handle=2)
    got = w.send(rpc(3, "c"), handle=3)
    (failed,) = json_received(got)
    assert failed["id"] == 3 and "wait to be sent" in failed["error"]["message"]


# ----------------------------------------------------------------------------
# The caller's side
# ----------------------------------------------------------------------------


def test_close_closes_everything_and_misuse_is_a_local_error() -> None:
    w = Wire()
    get = w.ready()
    w.send(rpc(1, "ping"), handle=1)
    post = w.post_peer()
    with pytest.raises(LocalProtocolError):
        w.sse.open(w.now)
    assert w.sse.state is SseState.READY  # unchanged
    w.sse.close(w.now)
    got = w.drain()
    assert set(got) == {CloseConnection(conn=get.conn), CloseConnection(conn=post.conn), Closed()}
    assert w.sse.open_connections == 0
    w.sse.close(w.now)
    assert w.drain() == []
    with pytest.raises(LocalProtocolError):
        w.sse.send(rpc(2, "ping"), now=w.now)
    with pytest.raises(LocalProtocolError):
        w.sse.open(w.now)


def test_send_refuses_what_is_not_json() -> None:
    w = Wire()
    with pytest.raises(LocalProtocolError):
        w.sse.send(b"{nope", now=w.now)


def test_the_transition_table_is_complete_for_what_the_caller_can_do() -> None:
    states = {state for state, _ in _TRANSITIONS}
    assert states == set(SseState)
    for state in SseState:
        assert (state, _In.CLOSE) in _TRANSITIONS  # close() is always allowed
        assert ((state, _In.OPEN) in _TRANSITIONS) == (state is SseState.IDLE)  # open() once
    assert transition_table().count("\n") == len(_TRANSITIONS) + 2


def test_config_takes_the_url_and_header_rules_of_streamable_http() -> None:
    config = SseClientConfig(url="https://Example.com/base/sse?k=1", headers=(("X-Key", "1"), ("Host", "x")))
    assert (config.tls, config.host, config.port, config.target) == (
        True,
        "example.com",
        443,
        "/base/sse?k=1",
    )
    assert config.headers == (("X-Key", "1"),) and config.refused_headers == ("Host",)
    with pytest.raises(ValueError):
        SseClientConfig(url="ftp://example.com/sse")
    with pytest.raises(ValueError):
        SseClientConfig(url=URL, endpoint_timeout=0)


# ----------------------------------------------------------------------------
# With a client session on top
# ----------------------------------------------------------------------------


def test_a_client_session_initializes_and_calls_over_the_machine() -> None:
    session = ClientSession(client_info={"name": "t", "version": "1"}, offer=Revision.V2024_11_05)
    w = Wire()
    get = w.open()

    def pump() -> list[Any]:
        out: list[Any] = []
        while True:
            actions = session.next_actions()
            if not actions:
                return out
            for action in actions:
                if hasattr(action, "payload"):
                    w.send(action.payload, handle=getattr(action, "stream", None))
                else:
                    out.append(action)

    session.start()
    pump()
    w.to_client(
        get, w.stream_head(get) + w.data(get, encode_event(b"/messages?session_id=s1", event="endpoint"))
    )
    post = w.post_peer()
    sent = orjson.loads(post.requests[0][1])
    assert sent["params"]["protocolVersion"] == "2024-11-05"
    w.accept(post)
    answer = {
        "protocolVersion": "2024-11-05",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "s", "version": "1"},
    }
    for message in json_received(w.to_client(get, w.data(get, encode_event(result(sent["id"], **answer))))):
        session.receive_json(message)
    out = pump()
    assert any(isinstance(a, Ready) for a in out) and session.revision == "2024-11-05"
    w.accept(post)  # notifications/initialized
    handle = session.request("tools/list")
    pump()
    listed = orjson.loads(post.requests[-1][1])
    w.accept(post)
    for message in json_received(w.to_client(get, w.data(get, encode_event(result(listed["id"], tools=[]))))):
        session.receive_json(message)
    assert Completed(handle=handle, result={"tools": []}) in pump()
    pending = session.request("tools/call", {"name": "x"})
    pump()
    for action in w.to_client(get, w.end(get)):
        if isinstance(action, JsonReceived):
            session.receive_json(action.message)
        elif isinstance(action, StreamEnded):
            session.receive_eof()
    (failed,) = [a for a in pump() if isinstance(a, Failed)]
    assert failed.handle == pending and "the server ended the event stream" in failed.error["message"]


def test_an_answer_on_the_stream_before_the_posts_own_answer_is_not_failed_twice() -> None:
    w = Wire()
    get = w.ready()
    w.send(rpc(1, "tools/list"), handle=1)
    post = w.post_peer()
    got = w.to_client(get, w.data(get, encode_event(result(1, tools=[]))))
    assert json_received(got) == [{"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}]
    w.sse.connection_lost(post.conn, w.now)  # and then the POST's connection dropped
    assert json_received(w.drain()) == []


def test_events_before_an_oversized_one_in_the_same_read_are_delivered() -> None:
    w = Wire(max_event=128)
    get = w.ready()
    got = w.to_client(get, w.data(get, encode_event(result(1)) + b"data: " + b"x" * 200 + b"\n\n"))
    assert json_received(got) == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    assert isinstance(got[-1], StreamEnded) and "exceeds 128 bytes" in got[-1].reason
