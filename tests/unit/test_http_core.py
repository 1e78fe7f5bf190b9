"""The Streamable HTTP binding in memory, with a fake clock and h11 as the client."""

from __future__ import annotations

import itertools
from typing import Any

import h11
import orjson
import pytest

from mcpx.core import (
    AppRequest,
    CancelRequest,
    CloseConnection,
    HandleRequest,
    HttpConfig,
    HttpServer,
    SendBytes,
    ServerConfig,
    SessionEnded,
)
from mcpx.core.http_server import http_status_for, session_id_for
from mcpx.core.sse import SseDecoder

CAPS = {"tools": {"listChanged": True}, "logging": {}, "resources": {"subscribe": True}}
MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes, complete: bool) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.complete = complete

    def json(self) -> Any:
        return orjson.loads(self.body)

    def events(self) -> list[Any]:
        return SseDecoder().feed(self.body)

    def messages(self) -> list[Any]:
        return [orjson.loads(e.data) for e in self.events() if e.data]


SESSION_KEY = b"k" * 32  # the tests' own: every session id is predictable from it


class Harness:
    def __init__(self, **http: Any) -> None:
        self.now = 1000.0
        self.http = HttpServer(
            ServerConfig(server_info={"name": "t", "version": "1"}, capabilities=CAPS),
            HttpConfig(**http),
            session_key=SESSION_KEY,
        )
        self.conns = itertools.count(1)
        self.client: dict[int, h11.Connection] = {}
        self.inbox: dict[int, bytearray] = {}
        self.closed: set[int] = set()
        self.handled: list[HandleRequest] = []
        self.cancelled: list[CancelRequest] = []
        self.app: list[AppRequest] = []
        self.ended: list[str] = []

    def pump(self) -> None:
        for action in self.http.next_actions():
            if isinstance(action, SendBytes):
                self.inbox.setdefault(action.conn, bytearray()).extend(action.data)
            elif isinstance(action, CloseConnection):
                self.closed.add(action.conn)
            elif isinstance(action, HandleRequest):
                self.handled.append(action)
            elif isinstance(action, CancelRequest):
                self.cancelled.append(action)
            elif isinstance(action, AppRequest):
                self.app.append(action)
            elif isinstance(action, SessionEnded):
                self.ended.append(action.identity)

    def open(self) -> int:
        conn = next(self.conns)
        self.client[conn] = h11.Connection(h11.CLIENT)
        self.http.connection_made(conn, self.now)
        self.pump()
        return conn

    def send(
        self,
        conn: int,
        method: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        target: str = "/mcp",
    ) -> None:
        client = self.client[conn]
        payload = body if isinstance(body, bytes) else orjson.dumps(body) if body is not None else b""
        all_headers = {"host": "127.0.0.1:8000", "accept": "application/json, text/event-stream"}
        if body is not None:
            all_headers["content-type"] = "application/json"
        all_headers.update(headers or {})
        all_headers["content-length"] = str(len(payload))
        data = client.send(h11.Request(method=method, target=target, headers=list(all_headers.items())))
        data += client.send(h11.Data(data=payload)) if payload else b""
        data += client.send(h11.EndOfMessage())
        self.http.receive_data(conn, data, self.now)
        self.pump()

    def reply(self, conn: int) -> Reply:
        client = self.client[conn]
        data = bytes(self.inbox.pop(conn, b""))
        if data:
            client.receive_data(data)
        status, headers, body, complete = 0, {}, bytearray(), False
        while True:
            event = client.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                break
            if isinstance(event, h11.Response):
                status = event.status_code
                headers = {k.decode(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                complete = True
                break
        if complete and client.our_state is h11.DONE and client.their_state is h11.DONE:
            client.start_next_cycle()
        return Reply(status, headers, bytes(body), complete)

    def post(
        self, body: Any, headers: dict[str, str] | None = None, conn: int | None = None
    ) -> tuple[int, Reply]:
        conn = conn or self.open()
        self.send(conn, "POST", body, headers)
        return conn, self.reply(conn)

    def initialize(self, version: str = "2025-11-25") -> str:
        _, reply = self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": version, "capabilities": {}},
            }
        )
        assert reply.status == 200
        session = reply.headers["mcp-session-id"]
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, {"mcp-session-id": session})
        return session

    def answer(self, action: HandleRequest, result: dict[str, Any]) -> None:
        self.http.respond(action.token, result)
        self.pump()


def test_initialize_mints_a_session_and_only_initialize_does() -> None:
    h = Harness()
    session = h.initialize()
    assert session == session_id_for(SESSION_KEY, 1)
    _, reply = h.post(
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"},
    )
    assert reply.status == 200 and "mcp-session-id" not in reply.headers
    _, unknown = h.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}, {"mcp-session-id": "nope"})
    assert unknown.status == 404 and unknown.json()["id"] == 2


def test_a_member_named_twice_is_refused_whichever_value_a_parser_kept() -> None:
    h = Harness()
    session = h.initialize()
    twice = b'{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}'
    _, reply = h.post(twice, {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"})
    assert reply.status == 400, (reply.status, reply.body)
    error = reply.json()["error"]
    assert error["code"] == -32600 and "'method'" in error["message"], error


@pytest.mark.parametrize("params", [5, "x", True, [], None, 1.5])
def test_an_initialize_whose_params_are_no_object_is_a_json_rpc_error(params: Any) -> None:
    """Answered -32602 (or the handshake's own error) on a 200, never a 500; and no session is minted."""
    h = Harness()
    _, reply = h.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert reply.status < 500 and "mcp-session-id" not in reply.headers, (reply.status, reply.body)
    answer = reply.json()
    assert answer["id"] == 1 and answer["error"]["code"] == -32602, answer


def test_a_quick_answer_is_one_json_object_a_chatty_one_an_event_stream() -> None:
    h = Harness()
    session = h.initialize()
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    quick = h.open()
    h.send(
        quick, "POST", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}, headers
    )
    h.answer(h.handled[-1], {"content": []})
    reply = h.reply(quick)
    assert reply.headers["content-type"] == "application/json" and reply.json()["id"] == 1

    chatty = h.open()
    h.send(
        chatty,
        "POST",
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "t", "_meta": {"progressToken": "p"}},
        },
        headers,
    )
    action = h.handled[-1]
    h.http.progress(action.token, 1, 2)
    h.pump()
    partial = h.reply(chatty)
    assert partial.headers["content-type"] == "text/event-stream" and not partial.complete
    events = partial.events()
    assert events[0].data == "" and events[0].event_id is not None  # the priming event (2025-11-25)
    assert orjson.loads(events[1].data)["method"] == "notifications/progress"
    h.answer(action, {"content": []})
    rest = h.reply(chatty)
    assert rest.complete and [m["id"] for m in rest.messages()] == [2]


def test_notifications_and_responses_get_202() -> None:
    h = Harness()
    session = h.initialize()
    _, reply = h.post(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
        {"mcp-session-id": session},
    )
    assert reply.status == 202 and reply.body == b""


def test_a_dropped_connection_is_not_a_cancellation_in_a_session_but_is_outside_one() -> None:
    h = Harness()
    session = h.initialize()
    conn = h.open()
    h.send(
        conn,
        "POST",
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}},
        {"mcp-session-id": session},
    )
    h.http.connection_lost(conn, h.now)
    h.pump()
    assert h.cancelled == []
    sessionless = h.open()
    h.send(sessionless, "POST", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}})
    token = h.handled[-1].token
    h.http.connection_lost(sessionless, h.now)
    h.pump()
    assert [c.token for c in h.cancelled] == [token]
    modern = h.open()
    h.send(
        modern,
        "POST",
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t", "_meta": MODERN}},
        {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "t"},
    )
    modern_token = h.handled[-1].token
    h.http.connection_lost(modern, h.now)
    h.pump()
    assert h.cancelled[-1].token == modern_token  # 2026-07-28: closing the stream is cancellation


def test_resume_replays_exactly_the_named_stream() -> None:
    h = Harness()
    session = h.initialize()
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    a, b = h.open(), h.open()
    h.send(
        a,
        "POST",
        {
            "jsonrpc": "2.0",
            "id": "a",
            "method": "tools/call",
            "params": {"name": "t", "_meta": {"progressToken": "pa"}},
        },
        headers,
    )
    action_a = h.handled[-1]
    h.send(
        b,
        "POST",
        {
            "jsonrpc": "2.0",
            "id": "b",
            "method": "tools/call",
            "params": {"name": "t", "_meta": {"progressToken": "pb"}},
        },
        headers,
    )
    action_b = h.handled[-1]
    h.http.progress(action_a.token, 1)
    h.http.progress(action_b.token, 1)
    h.pump()
    first = h.reply(a).events()
    primed_id = first[0].event_id
    h.http.connection_lost(a, h.now)  # dropped: not a cancellation
    h.http.progress(action_a.token, 2)
    h.answer(action_a, {"content": []})
    resume = h.open()
    h.send(
        resume,
        "GET",
        None,
        {"mcp-session-id": session, "last-event-id": first[1].event_id, "accept": "text/event-stream"},
    )
    replay = h.reply(resume)
    messages = replay.messages()
    assert [m.get("params", {}).get("progressToken") or m.get("id") for m in messages] == ["pa", "a"]
    assert replay.complete
    assert primed_id and all(
        e.event_id and e.event_id.split("-")[0] == primed_id.split("-")[0] for e in replay.events()
    )
    # Another session's client cannot name this stream.
    other = h.initialize()
    stranger = h.open()
    h.send(
        stranger,
        "GET",
        None,
        {"mcp-session-id": other, "last-event-id": first[1].event_id, "accept": "text/event-stream"},
    )
    assert h.reply(stranger).status == 404


def test_get_stream_carries_what_the_session_pushes_and_only_one_is_open() -> None:
    h = Harness()
    session = h.initialize()
    get = h.open()
    h.send(get, "GET", None, {"mcp-session-id": session, "accept": "text/event-stream"})
    h.http.notify_list_changed("tools")
    h.pump()
    stream = h.reply(get)
    assert stream.status == 200 and [m["method"] for m in stream.messages()] == [
        "notifications/tools/list_changed"
    ]
    second = h.open()
    h.send(second, "GET", None, {"mcp-session-id": session, "accept": "text/event-stream"})
    assert h.reply(second).status == 409


def test_get_and_delete_outside_a_session_are_405_and_delete_ends_a_session() -> None:
    h = Harness()
    for method in ("GET", "DELETE"):
        conn = h.open()
        h.send(conn, method, None, {})
        assert h.reply(conn).status == 405
    session = h.initialize()
    conn = h.open()
    h.send(conn, "DELETE", None, {"mcp-session-id": session})
    assert h.reply(conn).status == 200
    _, after = h.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"mcp-session-id": session})
    assert after.status == 404


def test_the_application_is_told_when_a_legacy_session_ends() -> None:
    """``SessionEnded``: the identity of a session deleted (or idled out) — a gateway frees what it kept."""
    h = Harness()
    session = h.initialize()
    assert h.ended == []
    conn = h.open()
    h.send(conn, "DELETE", None, {"mcp-session-id": session})
    assert h.reply(conn).status == 200
    assert h.ended == [f"session:{session}"]


def test_keep_alive_turns_a_silent_answer_into_an_event_stream() -> None:
    h = Harness(sse_keepalive=5.0)
    conn = h.open()
    h.send(conn, "POST", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}})
    assert h.http.get_timer() == pytest.approx(h.now + 5.0)
    h.now += 5.0
    h.http.handle_timer(h.now)
    h.pump()
    reply = h.reply(conn)
    assert reply.headers["content-type"] == "text/event-stream"
    assert reply.body.startswith(b": keep-alive")
    h.answer(h.handled[-1], {"content": []})
    assert h.reply(conn).messages()[0]["id"] == 1


def test_a_slow_request_is_cut_off_at_the_deadline() -> None:
    h = Harness(request_timeout=3.0)
    conn = h.open()
    h.http.receive_data(conn, b"POST /mcp HTTP/1.1\r\nhost: 127", h.now)
    h.pump()
    h.now += 3.0
    h.http.handle_timer(h.now)
    h.pump()
    assert h.reply(conn).status == 408 and conn in h.closed


def test_modern_headers_must_agree_with_the_body() -> None:
    h = Harness()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "weather", "_meta": MODERN}}
    base = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "weather"}
    cases = [
        ({**base, "mcp-method": "tools/list"}, "Mcp-Method"),
        ({**base, "mcp-name": "other"}, "Mcp-Name"),
        ({k: v for k, v in base.items() if k != "mcp-name"}, "Mcp-Name"),
        ({k: v for k, v in base.items() if k != "mcp-method"}, "Mcp-Method"),
    ]
    for headers, mention in cases:
        _, reply = h.post(body, headers)
        assert reply.status == 400 and reply.json()["error"]["code"] == -32020, headers
        assert mention in reply.json()["error"]["message"]
    _, encoded = h.post(body, {**base, "mcp-name": "=?base64?d2VhdGhlcg==?="})
    assert encoded.status != 400 or encoded.json()["error"]["code"] != -32020
    _, version = h.post(body, {**base, "mcp-protocol-version": "2099-01-01"})
    assert version.status == 400 and version.json()["error"]["code"] == -32022


def test_status_follows_the_error_code_for_2026_07_28() -> None:
    assert [http_status_for(c) for c in (-32700, -32600, -32601, -32602, -32603, -32020, -32021, -32022)] == [
        400,
        400,
        404,
        400,
        500,
        400,
        400,
        400,
    ]
    assert http_status_for(-32050) == 500 and http_status_for(42) == 200
    h = Harness()
    _, missing = h.post(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"},
    )
    assert missing.status == 400 and missing.json()["error"]["code"] == -32602
    _, removed = h.post(
        {"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"_meta": MODERN}},
        {"mcp-protocol-version": "2026-07-28", "mcp-method": "ping"},
    )
    assert removed.status == 404 and removed.json()["error"]["code"] == -32601


def test_an_error_the_application_answers_a_legacy_request_with_is_a_200() -> None:
    """The request was accepted: an error it is answered with (a gateway relaying its upstream's
    ``-32600``) is a JSON-RPC answer, so 200; only a message the session cannot accept is a 4xx."""
    h = Harness()
    session = h.initialize()
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    conn = h.open()
    h.send(
        conn, "POST", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}, headers
    )
    (action,) = h.handled[-1:]
    h.http.respond_error(action.token, -32600, "Invalid Request: the upstream refused it")
    h.pump()
    answered = h.reply(conn)
    assert answered.status == 200 and answered.json()["error"]["code"] == -32600, answered
    _, refused = h.post({"jsonrpc": "2.0", "id": 2, "method": 7}, headers)  # no method name: not accepted
    assert refused.status == 400 and refused.json()["error"]["code"] == -32600, refused
    # 2026-07-28: the status follows the code, whoever answered.
    conn = h.open()
    modern = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "x"}
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "x", "_meta": MODERN}}
    h.send(conn, "POST", call, modern)
    (action,) = h.handled[-1:]
    h.http.respond_error(action.token, -32600, "Invalid Request: the upstream refused it")
    h.pump()
    assert h.reply(conn).status == 400


def test_no_session_is_minted_or_echoed_for_2026_07_28() -> None:
    h = Harness()
    _, reply = h.post(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN}},
        {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list", "mcp-session-id": "made-up"},
    )
    assert "mcp-session-id" not in reply.headers
    assert h.handled[-1].context.revision == "2026-07-28"


def test_sessionless_legacy_posts_are_judged_by_their_header() -> None:
    h = Harness()
    h.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert h.handled[-1].context.revision == "2025-03-26"  # headerless
    h.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {"mcp-protocol-version": "2025-06-18"})
    assert h.handled[-1].context.revision == "2025-06-18"


def test_http_sse_transport_of_2024_11_05() -> None:
    h = Harness()
    stream = h.open()
    h.send(stream, "GET", None, {"accept": "text/event-stream"}, target="/sse")
    first = h.reply(stream)
    (endpoint,) = first.events()
    assert endpoint.event == "endpoint" and endpoint.data.startswith("/messages?session_id=")
    poster = h.open()
    h.send(
        poster,
        "POST",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2024-11-05", "capabilities": {}},
        },
        target=endpoint.data,
    )
    assert h.reply(poster).status == 202
    answer = h.reply(stream).events()
    assert (
        answer[0].event == "message"
        and orjson.loads(answer[0].data)["result"]["protocolVersion"] == "2024-11-05"
    )
    h.http.connection_lost(stream, h.now)
    h.pump()
    gone = h.open()
    h.send(gone, "POST", {"jsonrpc": "2.0", "id": 2, "method": "ping"}, target=endpoint.data)
    assert h.reply(gone).status == 404  # losing the stream ended the session


@pytest.mark.parametrize(
    ("accept", "status"),
    [
        ("*/*", 200),
        ("text/*", 200),
        ("text/event-stream;q=0.5, */*;q=0.1", 200),
        (None, 200),
        ("application/json", 406),
        ("text/event-stream;q=0", 406),
    ],
)
def test_the_sse_endpoint_takes_any_accept_that_covers_an_event_stream(
    accept: str | None, status: int
) -> None:
    h = Harness()
    stream = h.open()
    h.send(stream, "GET", None, {} if accept is None else {"accept": accept}, target="/sse")
    assert h.reply(stream).status == status


def test_idle_sessions_expire() -> None:
    h = Harness(session_idle=60.0)
    session = h.initialize()
    h.now += 61
    h.http.handle_timer(h.now)
    h.pump()
    _, reply = h.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"mcp-session-id": session})
    assert reply.status == 404


def test_batches_over_http_only_at_2025_03_26() -> None:
    h = Harness()
    session = h.initialize("2025-03-26")
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
    _, reply = h.post(batch, {"mcp-session-id": session})
    assert sorted(m["id"] for m in reply.json()) == [1, 2]
    other = h.initialize("2025-06-18")
    _, refused = h.post(batch, {"mcp-session-id": other, "mcp-protocol-version": "2025-06-18"})
    assert refused.status == 400 and refused.json()["error"]["code"] == -32600


def test_requests_outside_a_session_never_share_ids_or_listens() -> None:
    h = Harness()
    a, b = h.open(), h.open()
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "t"}}
    h.send(a, "POST", call)
    h.send(b, "POST", call)  # the same id from another client: not a duplicate
    first, second = h.handled[-2:]
    h.answer(second, {"content": [{"type": "text", "text": "b"}]})
    h.answer(first, {"content": [{"type": "text", "text": "a"}]})
    assert h.reply(a).json()["result"]["content"][0]["text"] == "a"
    assert h.reply(b).json()["result"]["content"][0]["text"] == "b"
    # A listen on one POST hears list changes; a finished POST is forgotten.
    listen = h.open()
    h.send(
        listen,
        "POST",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "subscriptions/listen",
            "params": {"_meta": MODERN, "notifications": {"toolsListChanged": True}},
        },
        {"mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"},
    )
    h.http.notify_list_changed("tools")
    h.pump()
    methods = [m["method"] for m in h.reply(listen).messages()]
    assert methods == ["notifications/subscriptions/acknowledged", "notifications/tools/list_changed"]
    h.http.connection_lost(listen, h.now)  # closing the stream ends the listen
    h.pump()
    h.http.notify_list_changed("tools")
    h.pump()
    assert h.inbox == {}  # nobody is listening any more, and nothing else was sent


def test_an_oversized_sse_event_is_refused_however_it_arrives() -> None:
    from mcpx.core.sse import SseDecoder, SseError

    event = b"data: " + b"x" * 100 + b"\n\n"
    for chunks in ([event], [event[:50], event[50:]], [bytes([b]) for b in event]):
        decoder = SseDecoder(max_event=64)
        with pytest.raises(SseError):
            for chunk in chunks:
                decoder.feed(chunk)
    small = SseDecoder(max_event=64)
    assert [e.data for e in small.feed(b"data: ok\n\n" * 20)] == ["ok"] * 20  # the limit is per event


def test_app_paths_reach_the_application_under_the_same_checks_and_keep_the_connection() -> None:
    h = Harness(app_paths=("/health", "/v1/"))
    conn = h.open()
    h.send(conn, "GET", None, target="/v1/servers?all=1")
    (asked,) = h.app
    assert (asked.method, asked.target, asked.body) == ("GET", "/v1/servers?all=1", b"")
    h.http.app_respond(conn, 200, b'{"servers":[]}')
    h.pump()
    first = h.reply(conn)
    assert (first.status, first.headers["content-type"], first.body) == (
        200,
        "application/json",
        b'{"servers":[]}',
    )
    # the same connection carries the next request: a streamed answer this time
    h.send(conn, "POST", {"server": "demo"}, target="/health")
    streamed = h.app[-1]
    assert streamed.method == "POST" and orjson.loads(streamed.body) == {"server": "demo"}
    h.http.app_respond_start(conn, 200, content_type="application/x-ndjson")
    h.http.app_respond_data(conn, b'{"n":1}\n')
    h.http.app_respond_end(conn)
    h.http.app_respond(conn, 500, b"late")  # answered already: ignored
    h.pump()
    second = h.reply(conn)
    assert (second.status, second.body, second.complete) == (200, b'{"n":1}\n', True)
    # a path outside the list is still MCP's 404; a foreign Origin is refused before the application
    h.send(conn, "GET", None, target="/v2/servers")
    assert h.reply(conn).status == 404
    other = h.open()
    h.send(other, "GET", None, {"origin": "https://evil.example"}, target="/v1/servers")
    assert h.reply(other).status == 403 and len(h.app) == 2


def test_a_plain_post_and_the_same_bytes_cut_up_are_answered_byte_for_byte_alike() -> None:
    """A whole POST in one read skips h11 (HttpServer's plain path); split, h11 reads it: same bytes out.

    Both for a plain JSON answer and for one that becomes an event stream
    (progress first, so h11 takes the request over), and with the next
    request arriving while the first is still unanswered.
    """

    def run(split: bool) -> list[bytes]:
        h = Harness()
        session = h.initialize()
        conn = h.open()
        headers = [
            ("host", "127.0.0.1:8000"),
            ("accept", "application/json, text/event-stream"),
            ("content-type", "application/json"),
            ("mcp-session-id", session),
            ("mcp-protocol-version", "2025-11-25"),
        ]
        client = h11.Connection(h11.CLIENT)

        def request(request_id: int) -> bytes:
            body = orjson.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "tools/call",
                    "params": {"name": "t", "_meta": {"progressToken": request_id}},
                }
            )
            data = client.send(
                h11.Request(
                    method="POST", target="/mcp", headers=[*headers, ("content-length", str(len(body)))]
                )
            )
            data = (data or b"") + (client.send(h11.Data(data=body)) or b"")
            data += client.send(h11.EndOfMessage()) or b""
            return data

        def feed(data: bytes) -> None:
            for piece in [data[i : i + 1] for i in range(len(data))] if split else [data]:
                h.http.receive_data(conn, piece, h.now)
            h.pump()

        out: list[bytes] = []
        feed(request(1))
        h.answer(h.handled[-1], {"content": []})  # a plain JSON answer
        out.append(bytes(h.inbox.pop(conn, b"")))
        client = h11.Connection(h11.CLIENT)  # a fresh writer for the next request's bytes
        feed(request(2))
        second = h.handled[-1]
        client = h11.Connection(h11.CLIENT)
        feed(request(3))  # arrives while the second is unanswered
        h.http.progress(second.token, 0.5)  # an event stream now
        h.pump()
        h.answer(second, {"content": []})
        h.answer(h.handled[-1], {"content": []})
        out.append(bytes(h.inbox.pop(conn, b"")))
        return out

    whole, cut_up = run(split=False), run(split=True)
    assert whole == cut_up
    assert whole[0].startswith(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
    assert b"text/event-stream" in whole[1] and whole[1].count(b"HTTP/1.1 200") == 2


def test_session_ids_come_from_the_key() -> None:
    """No callable in the machine: ids are derived from a secret the driver draws (HMAC-SHA256)."""
    ids = [session_id_for(SESSION_KEY, n) for n in range(1, 1001)]
    assert len(set(ids)) == 1000
    assert all(len(sid) == 32 and all(0x21 <= ord(ch) <= 0x7E for ch in sid) for sid in ids)
    assert session_id_for(b"j" * 32, 1) != ids[0]  # another daemon's key, another id
    h = Harness()
    assert [h.initialize(), h.initialize()] == ids[:2]


def test_a_short_session_key_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 16 random bytes"):
        HttpServer(
            ServerConfig(server_info={"name": "t", "version": "1"}, capabilities=CAPS),
            HttpConfig(),
            session_key=b"short",
        )
