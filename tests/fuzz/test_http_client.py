"""Whatever a server answers, cut however the network likes, the client binding ends each request once.

The answers range from random bytes to well-formed HTTP responses with
hostile parts (wrong status, content type, framing, JSON, SSE fields, ids,
limits).  For every one: no exception escapes, the request in flight ends in
exactly one outcome — the server's own response, or one error mcpx made —
and resuming a legacy stream gives up after ``max_resumes`` tries.  The same
bytes fed whole or in pieces give the same messages.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpx.core import Revision
from mcpx.core.http_client import (
    HttpClientAction,
    HttpClientConfig,
    HttpClientConnection,
    JsonReceived,
    OpenConnection,
    SessionExpired,
    StreamEnded,
)
from mcpx.core.sse import encode_event

from ._examples import tick

URL = "http://127.0.0.1:8000/mcp"
RID = 7
REQUEST = orjson.dumps({"jsonrpc": "2.0", "id": RID, "method": "tools/call", "params": {"name": "t"}})

_messages = st.sampled_from(
    [
        {"jsonrpc": "2.0", "id": RID, "result": {"content": []}},
        {"jsonrpc": "2.0", "id": RID, "error": {"code": -32602, "message": "bad"}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "refused"}},
        {"jsonrpc": "2.0", "id": 99, "result": {}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
        {"jsonrpc": "2.0", "id": "s1", "method": "roots/list"},
        [{"jsonrpc": "2.0", "id": RID, "result": {}}],
        {"id": RID},
        "just a string",
        [],
    ]
)
_json_bodies = st.one_of(
    _messages.map(orjson.dumps), st.binary(max_size=80), st.just(b"{"), st.just(b'{"a":' * 40)
)


@st.composite
def _sse_bodies(draw: st.DrawFn) -> bytes:
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.integers(0, 4))
        if kind == 0:
            parts.append(
                encode_event(orjson.dumps(draw(_messages)), event_id=draw(st.sampled_from([None, "1-1"])))
            )
        elif kind == 1:
            parts.append(encode_event(None, event_id="1-0", retry_ms=draw(st.integers(0, 5000))))
        elif kind == 2:
            parts.append(b"retry: x\nid: \x00\nevent: other\ndata: {}\n\n")
        elif kind == 3:
            parts.append(b"data: " + b"z" * draw(st.integers(0, 300)) + b"\n\n")
        else:
            parts.append(draw(st.binary(max_size=40)))
    return b"".join(parts)


@st.composite
def responses(draw: st.DrawFn) -> bytes:
    status = draw(
        st.sampled_from(
            [
                b"200 OK",
                b"202 Accepted",
                b"204 No Content",
                b"400 Bad Request",
                b"404 Not Found",
                b"405 Method Not Allowed",
                b"307 Temporary Redirect",
                b"500 Internal Server Error",
                b"101 Switching Protocols",
                b"999 Odd",
            ]
        )
    )
    ctype = draw(
        st.sampled_from(
            [b"application/json", b"text/event-stream", b"text/html", b"", b"application/json; charset=utf-8"]
        )
    )
    body = draw(st.one_of(_json_bodies, _sse_bodies()) if ctype != b"text/event-stream" else _sse_bodies())
    headers = [b"HTTP/1.1 " + status]
    if ctype:
        headers.append(b"Content-Type: " + ctype)
    framing = draw(st.sampled_from(["length", "chunked", "close", "wrong-length"]))
    if framing == "length":
        headers.append(b"Content-Length: %d" % len(body))
    elif framing == "wrong-length":
        headers.append(b"Content-Length: %d" % (len(body) + draw(st.integers(-5, 5))))
    elif framing == "chunked":
        headers.append(b"Transfer-Encoding: chunked")
        body = (b"%x\r\n" % len(body) + body + b"\r\n" if body else b"") + b"0\r\n\r\n"
    if draw(st.booleans()):
        headers.append(b"Mcp-Session-Id: " + draw(st.sampled_from([b"s2", b"\x01bad", b""])))
    if draw(st.booleans()):
        headers.append(b"X-Filler: " + b"f" * draw(st.integers(0, 2000)))
    raw = b"\r\n".join(headers) + b"\r\n\r\n" + body
    if draw(st.booleans()):
        raw += draw(st.binary(max_size=30))  # junk after the answer
    return raw


def _pieces(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(raw) + 1) for c in cuts})
    out, last = [], 0
    for point in points:
        out.append(raw[last:point])
        last = point
    out.append(raw[last:])
    return [p for p in out if p]


def _run(
    raw: bytes, cuts: list[int], *, modern: bool, session: bool, **limits: Any
) -> list[HttpClientAction]:
    """One request, answered with ``raw`` then end of input; then every resumption answered by silence."""
    config = HttpClientConfig(url=URL, modern=modern, max_header_bytes=1024, **limits)
    client = HttpClientConnection(
        config,
        session_id="s1" if session else None,
        revision=Revision.V2025_11_25 if session else None,
    )
    client.send(REQUEST, handle=RID, now=0.0)
    actions: list[HttpClientAction] = list(client.next_actions())
    (opened,) = [a for a in actions if isinstance(a, OpenConnection)]
    client.connection_made(opened.conn, 0.0)
    for piece in _pieces(raw, cuts):
        client.receive_data(opened.conn, piece, 1.0)
    client.receive_data(opened.conn, b"", 2.0)
    client.connection_lost(opened.conn, 2.0)
    actions += client.next_actions()
    now = 2.0
    for _ in range(20):  # resumptions: each meets a connection that closes at once
        timer = client.get_timer()
        if timer is None:
            break
        now = max(now, timer)
        client.handle_timer(now)
        fresh = client.next_actions()
        actions += fresh
        for action in fresh:
            if isinstance(action, OpenConnection):
                client.connection_made(action.conn, now)
                client.receive_data(action.conn, b"", now)
                client.connection_lost(action.conn, now)
        actions += client.next_actions()
    assert client.get_timer() is None, "resumption must give up"
    return actions


def _answers(actions: list[HttpClientAction]) -> list[JsonReceived]:
    found = []
    for action in actions:
        if not isinstance(action, JsonReceived):
            continue
        items = action.message if isinstance(action.message, list) else [action.message]
        if any(
            isinstance(m, dict)
            and m.get("id") == RID
            and "method" not in m
            and ("result" in m or "error" in m)
            for m in items
        ):
            found.append(action)
    return found


@settings(deadline=None)
@given(
    raw=st.one_of(responses(), st.binary(max_size=400)),
    cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=6),
    modern=st.booleans(),
    session=st.booleans(),
)
def test_any_answer_ends_the_request_exactly_once(
    raw: bytes, cuts: list[int], modern: bool, session: bool
) -> None:
    tick()
    actions = _run(raw, cuts, modern=modern, session=session and not modern, max_body=256, max_event=128)
    answers = _answers(actions)
    made = [a for a in answers if a.synthesized]
    assert answers, "the request must end: the server's answer or an error made by mcpx"
    assert len(made) <= 1
    if made:
        assert answers == made, "an error is made only when the server did not answer"
        error = made[0].message["error"]
        assert isinstance(error["code"], int) and isinstance(error["message"], str) and error["message"]
        assert made[0].handle == RID
    for action in actions:
        if isinstance(action, SessionExpired):
            assert action.session_id == "s1"


@settings(deadline=None)
@given(
    raw=responses(),
    cuts=st.lists(st.integers(min_value=0, max_value=3000), min_size=1, max_size=8),
    modern=st.booleans(),
)
def test_the_same_bytes_whole_or_in_pieces_give_the_same_messages(
    raw: bytes, cuts: list[int], modern: bool
) -> None:
    tick()

    def seen(actions: list[HttpClientAction]) -> list[Any]:
        # Which of two faults h11 meets first may depend on the cut (a head
        # both too long and malformed): the outcome must agree, the wording
        # of an error mcpx made need not.
        out: list[Any] = []
        for a in actions:
            if isinstance(a, JsonReceived) and a.synthesized:
                out.append(("made", a.handle, a.message["id"], a.message["error"]["code"]))
            elif isinstance(a, StreamEnded):
                out.append(("ended", a.handle, a.resuming))
            elif isinstance(a, JsonReceived | SessionExpired):
                out.append(a)
        return out

    whole = _run(raw, [], modern=modern, session=not modern)
    split = _run(raw, cuts, modern=modern, session=not modern)
    assert seen(whole) == seen(split)
