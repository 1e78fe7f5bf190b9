"""Whatever a 2024-11-05 HTTP+SSE server writes, cut however the network likes, the client transport copes.

MCP 2024-11-05, Transports → "HTTP with SSE" (``mcpx.core.sse_client``).
The GET's answer ranges from random bytes to well-formed event streams with
hostile parts (endpoint events naming other origins or nothing, oversized
events, junk data, wrong status or type); a POST's answer from random bytes
to refusals with or without a JSON-RPC error.  For every one: no exception
escapes, the request that was sent ends exactly once (the server's answer on
the stream, or one error mcpx made), nothing is ever POSTed to another
origin, and the same bytes fed whole or in pieces give the same messages.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from mcpx.core import SendBytes
from mcpx.core.http_client import JsonReceived, OpenConnection, StreamEnded
from mcpx.core.sse import encode_event
from mcpx.core.sse_client import EndpointReady, SseClientConfig, SseClientConnection, SseState

from ._examples import tick

URL = "http://127.0.0.1:8000/sse"
RID = 7
REQUEST = orjson.dumps({"jsonrpc": "2.0", "id": RID, "method": "tools/call", "params": {"name": "t"}})

_endpoints = st.sampled_from(
    [
        b"/messages?session_id=1",
        b"messages",
        b"http://127.0.0.1:8000/m",
        b"http://evil.example/m",
        b"//evil.example/m",
        b"https://127.0.0.1:8000/m",
        b"",
        b" ",
        b"http://[bad",
        b"/a b",
    ]
)
_messages = st.sampled_from(
    [
        {"jsonrpc": "2.0", "id": RID, "result": {"content": []}},
        {"jsonrpc": "2.0", "id": RID, "error": {"code": -32602, "message": "bad"}},
        {"jsonrpc": "2.0", "id": 99, "result": {}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
        {"jsonrpc": "2.0", "id": "s1", "method": "ping"},
        [{"jsonrpc": "2.0", "id": RID, "result": {}}],
        "just a string",
    ]
)


@st.composite
def _events(draw: st.DrawFn) -> bytes:
    parts = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.integers(0, 5))
        if kind == 0:
            parts.append(encode_event(draw(_endpoints), event="endpoint"))
        elif kind == 1:
            parts.append(encode_event(orjson.dumps(draw(_messages))))
        elif kind == 2:
            parts.append(b": comment\r\n\r\n")
        elif kind == 3:
            parts.append(b"data: " + b"x" * draw(st.integers(0, 300)) + b"\n\n")  # junk, maybe too large
        elif kind == 4:
            parts.append(b"event: other\ndata: {}\n\n")
        else:
            parts.append(draw(st.binary(max_size=30)))
    return b"".join(parts)


def _chunked(body: bytes) -> bytes:
    return (b"%x\r\n" % len(body) + body + b"\r\n" if body else b"") + b"0\r\n\r\n"


@st.composite
def get_answers(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=200))
    status = draw(st.sampled_from([200, 200, 200, 404, 405, 500]))
    kind = draw(
        st.sampled_from([b"text/event-stream", b"text/event-stream", b"text/html", b"application/json"])
    )
    body = draw(_events())
    head = b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n" % (status, kind)
    return head + _chunked(body) if draw(st.booleans()) else head + b"%x\r\n" % len(body) + body + b"\r\n"


@st.composite
def post_answers(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 5)) == 0:
        return draw(st.binary(max_size=100))
    status = draw(st.sampled_from([202, 200, 400, 404, 500]))
    body = draw(
        st.sampled_from(
            [
                b"Accepted",
                b"",
                b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no"}}',
                b"{",
                b"<h1>",
            ]
        )
    )
    kind = b"application/json" if body.startswith(b"{") else b"text/plain"
    return b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (
        status,
        kind,
        len(body),
        body,
    )


def _run(get: bytes, post: bytes, cuts: list[int]) -> tuple[list[Any], list[Any], SseClientConnection]:
    sse = SseClientConnection(SseClientConfig(url=URL, max_event=256, endpoint_timeout=5.0))
    log: list[Any] = []
    sse.open(0.0)
    sse.send(REQUEST, handle=RID, now=0.0)
    log += sse.next_actions()
    sse.connection_made(1, 0.0)
    log += sse.next_actions()

    def feed(conn: int, data: bytes) -> None:
        nonlocal log
        start = 0
        for cut in [*sorted(c % (len(data) + 1) for c in cuts), len(data)]:
            if cut > start:
                sse.receive_data(conn, data[start:cut], 1.0)
                log += sse.next_actions()
                start = cut

    feed(1, get)
    posts = [a.conn for a in log if isinstance(a, OpenConnection) and a.conn != 1]
    for conn in posts:
        sse.connection_made(conn, 1.0)
        log += sse.next_actions()
        feed(conn, post)
    sse.receive_data(1, b"", 2.0)
    log += sse.next_actions()
    sse.handle_timer(10.0)
    log += sse.next_actions()
    messages = [a.message for a in log if isinstance(a, JsonReceived)]
    return log, messages, sse


@given(get=get_answers(), post=post_answers(), cuts=st.lists(st.integers(min_value=0), max_size=4))
def test_any_answer_ends_the_request_once_and_never_posts_elsewhere(
    get: bytes, post: bytes, cuts: list[int]
) -> None:
    tick()
    log, messages, sse = _run(get, post, cuts)
    assert sse.state is SseState.ENDED  # the stream always ends here: its input ended
    assert isinstance(log[-1], StreamEnded) or any(isinstance(a, StreamEnded) for a in log)
    answers = [
        m
        for m in messages
        for item in (m if isinstance(m, list) else [m])
        if isinstance(item, dict) and item.get("id") == RID
    ]
    assert answers, "the request must end: the server's answer or an error made by mcpx"
    made = [a for a in log if isinstance(a, JsonReceived) and a.synthesized]
    assert len(made) <= 1
    if made:
        assert len(answers) == 1 and made[0].handle == RID  # an error is made only when nothing answered
    # POSTs only after an endpoint on the SSE URL's origin, only to it
    ready = [a for a in log if isinstance(a, EndpointReady)]
    assert all(a.url.startswith("http://127.0.0.1:8000/") for a in ready)
    if not ready:
        assert not any(isinstance(a, SendBytes) and a.conn != 1 for a in log)


@given(get=get_answers(), cuts=st.lists(st.integers(min_value=0), max_size=6))
def test_the_same_bytes_in_pieces_give_the_same_messages(get: bytes, cuts: list[int]) -> None:
    tick()
    post = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
    _, whole, _ = _run(get, post, [])
    _, pieces, _ = _run(get, post, cuts)
    assert pieces == whole
