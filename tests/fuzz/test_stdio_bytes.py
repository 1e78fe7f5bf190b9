"""Whatever a stdio peer writes, the connection answers in JSON-RPC and carries on.

Each property feeds a ``StdioServerConnection`` some hostile input, cut into
random pieces, while a small application answers what it is handed.  Checked
throughout:

* nothing escapes ``receive_data`` — a ``RemoteProtocolError`` must become an
  error reply, and the test never misuses the API, so no ``LocalProtocolError``
  either;
* every ``Send`` payload is one line of valid JSON-RPC; every error reply has
  an integer code that JSON-RPC or MCP defines;
* a response carries only an id the peer sent, never more often than the peer
  sent it, and never the id of a request that is still running (the
  application's own answer excepted);
* afterwards the connection still answers ``ping`` with the right id (after an
  ``initialize`` if none got through), and end of input closes it, after which
  nothing more is written.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpx.core import (
    PARSE_ERROR,
    CancelRequest,
    Close,
    EndStream,
    HandleRequest,
    LocalProtocolError,
    Send,
    StdioServerConnection,
    Subscribed,
    Trace,
)
from mcpx.core.framing import DEFAULT_MAX_LINE
from mcpx.core.server_session import ConnectionState

from ._examples import tick
from ._mcp import (
    APP_ERROR_CODES,
    CONFIG,
    DEEP,
    JSONRPC_CODES,
    MCP_CODES,
    check_envelope,
    cut,
    decode_payload,
    id_key,
    initialize,
    is_response,
    json_values,
    near_valid_messages,
    near_valid_or_batch,
    notification,
    request,
    to_line,
)

SERVER_NOTIFICATIONS = {
    "notifications/message",
    "notifications/progress",
    "notifications/subscriptions/acknowledged",
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/resources/updated",
}
INIT_ID = "mcpx-fuzz-initialize"  # longer than any id the strategies draw
PING_ID = "mcpx-fuzz-final-ping"


class Peer:
    """The peer and the application around one ``StdioServerConnection``."""

    def __init__(self, *, app: str, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.conn = StdioServerConnection(CONFIG, max_line=max_line)
        self.max_line = max_line
        self.app = app  # "result", "error" or "hold": what the application does with a request
        self.sent: Counter[tuple[str, Any]] = Counter()  # ids the peer put on the wire
        self.answered: Counter[tuple[str, Any]] = Counter()
        self.running: dict[int, tuple[str, Any]] = {}  # token -> id, handed to the app, unanswered
        self.held: list[int] = []
        self.closed = False
        self.responses: list[dict[str, Any]] = []
        self.step: list[tuple[str, Any]] = []  # ids of the replies the current feed produced
        self.parse_errors = 0
        self.reply_arrays = 0

    # -- input -----------------------------------------------------------

    def record_ids(self, data: bytes) -> None:
        """Note every readable id the peer sends (in messages and in batch items)."""
        for line in data.split(b"\n"):
            if len(line) > self.max_line:
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            for item in obj if isinstance(obj, list) else [obj]:
                if isinstance(item, dict) and (key := id_key(item.get("id"))) is not None:
                    self.sent[key] += 1

    def feed(self, data: bytes, chunks: list[bytes] | None = None) -> None:
        """Feed ``data`` (in ``chunks`` if given); ``b""`` is nothing here, not end of input."""
        self.step = []
        if not data:
            return
        self.record_ids(data)
        for chunk in chunks if chunks is not None else [data]:
            assert chunk
            self.conn.receive_data(chunk, now=0.0)
            self.drain()

    def feed_lines(self, objs: list[Any]) -> None:
        self.feed(b"".join(to_line(o) for o in objs))

    def feed_each(self, lines: list[bytes], points: list[int]) -> None:
        """Feed line by line, each cut at the ``points`` that fall inside it.

        A single message whose id belongs to a request still running must be
        refused without that id: the session says so for unreadable frames
        ("never answer for a request that is still running"), and a peer could
        not tell such a refusal from the running request's own answer.
        """
        offset = 0
        for line in lines:
            inside = [p - offset for p in points if offset < p < offset + len(line)]
            offset += len(line)
            running_before = set(self.running.values())
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                obj = None
            key = id_key(obj.get("id")) if isinstance(obj, dict) else None
            self.feed(line, cut(line, inside))
            if key is not None and key in running_before:
                assert key not in self.step, (
                    f"a message reusing the id of a running request was answered with that id: {line!r}"
                )

    # -- output ----------------------------------------------------------

    def drain(self) -> None:
        while True:
            actions = self.conn.next_actions()
            if not actions:
                return
            dispatched: list[int] = []
            for action in actions:
                self.check(action)
                if isinstance(action, HandleRequest):
                    dispatched.append(action.token)
            for token in dispatched:
                if token not in self.running:
                    continue  # cancelled in the same breath
                if self.app == "hold":
                    self.held.append(token)
                else:
                    self.answer(token)

    def answer(self, token: int) -> None:
        session = self.conn.session
        self.running.pop(token)  # from here on its id may be answered
        session.progress(token, 1.0, total=2.0, message="half")
        session.log("warning", {"token": token}, token=token)
        if self.app == "error" and token % 2:
            session.respond_error(token, APP_ERROR_CODES[token % len(APP_ERROR_CODES)], "app says no")
        else:
            session.respond(token, {"resultType": "complete", "content": [], "tools": [], "x": token})

    def check(self, action: Any) -> None:
        assert not self.closed, f"{action!r} after Close"
        if isinstance(action, Close):
            self.closed = True
        elif isinstance(action, HandleRequest):
            key = id_key(action.context.request_id)
            assert key is not None and self.sent[key] > 0, f"dispatched an id the peer never sent: {action}"
            assert key not in self.running.values(), f"two running requests share id {key}"
            assert action.token not in self.running
            self.running[action.token] = key
        elif isinstance(action, CancelRequest):
            assert action.token in self.running, f"cancelled a request that is not running: {action}"
            del self.running[action.token]
            if action.token in self.held:
                self.held.remove(action.token)
            self.conn.session.discard(action.token)
        elif isinstance(action, Send):
            obj = decode_payload(action.payload)
            self.reply_arrays += isinstance(obj, list)
            for item in obj if isinstance(obj, list) else [obj]:
                self.check_message(item, batch=isinstance(obj, list))
        elif isinstance(action, Subscribed):  # a resources/subscribe (or listen filter) that was granted
            assert type(action.uri) is str, action
        else:  # EndStream means nothing on stdio; PeerReplied needs a server request, and none was sent
            assert isinstance(action, Trace | EndStream), action

    def check_message(self, obj: Any, *, batch: bool) -> None:
        check_envelope(obj, allowed_codes=JSONRPC_CODES | MCP_CODES | set(APP_ERROR_CODES))
        if not is_response(obj):
            assert not batch, f"a notification inside a batch reply: {obj}"
            assert "id" not in obj, f"the server sent a request: {obj}"
            assert obj["method"] in SERVER_NOTIFICATIONS, obj
            return
        self.responses.append(obj)
        if obj.get("error", {}).get("code") == PARSE_ERROR:
            self.parse_errors += 1
        key = id_key(obj["id"])
        if key is None:
            return
        self.answered[key] += 1
        self.step.append(key)
        assert self.answered[key] <= self.sent[key], f"id {key} answered more often than it was sent: {obj}"

    # -- the ending every property shares --------------------------------

    def finish(self) -> None:
        """Answer what is held, check ping still works, close, and check the books."""
        self.feed(b"\n")  # end whatever partial line the input left
        for token in list(self.held):
            self.held.remove(token)
            self.answer(token)
            self.drain()
        session = self.conn.session
        assert session.state in (ConnectionState.NEW, ConnectionState.INITIALIZING, ConnectionState.READY)
        if session.state is ConnectionState.NEW:
            before = len(self.responses)
            self.feed_lines([initialize(INIT_ID, "2025-06-18")])
            replies = [r for r in self.responses[before:] if r["id"] == INIT_ID]
            assert len(replies) == 1, self.responses[before:]
            assert replies[0]["result"]["protocolVersion"] == "2025-06-18", replies
            self.feed_lines([notification("notifications/initialized")])
            assert session.state is ConnectionState.READY
        before = len(self.responses)
        self.feed_lines([request(PING_ID, "ping")])
        assert self.responses[before:] == [{"jsonrpc": "2.0", "id": PING_ID, "result": {}}]

        self.conn.receive_data(b"", now=0.0)
        self.drain()
        assert self.closed, "end of input with nothing running must close at once"
        assert session.state is ConnectionState.CLOSED
        with pytest.raises(LocalProtocolError):
            self.conn.receive_data(b"{}\n", now=1.0)
        assert session.state is ConnectionState.CLOSED
        assert self.conn.next_actions() == []
        assert not self.running and not self.held
        for key, count in self.answered.items():
            assert count <= self.sent[key], key


apps = st.sampled_from(["result", "error", "hold"])
limits = st.sampled_from([DEFAULT_MAX_LINE, 180, 256])  # the closing initialize must fit


def _prelude(version: str | None) -> bytes:
    if version is None:
        return b""
    return to_line(initialize("init", version)) + to_line(notification("notifications/initialized"))


preludes = st.sampled_from([None, "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "1999-01-01"])


# ----------------------------------------------------------------------------
# Properties
# ----------------------------------------------------------------------------

raw_streams = st.lists(
    st.binary(max_size=24)
    | st.sampled_from([b"\n", b"\r\n", b"{", b"}", b"[", b"]", b'"', b":", b",", b"\xff", b"\x00", b"null"]),
    max_size=24,
).map(b"".join)


@given(prelude=preludes, stream=raw_streams, app=apps, max_line=limits, data=st.data())
def test_arbitrary_bytes_never_escape_and_connection_survives(
    prelude: str | None, stream: bytes, app: str, max_line: int, data: st.DataObject
) -> None:
    """Bytes of any kind, cut anywhere, after a handshake or none: answered, never raised."""
    tick()
    peer = Peer(app=app, max_line=max_line)
    whole = _prelude(prelude) + stream
    points = data.draw(st.lists(st.integers(min_value=0, max_value=len(whole)), max_size=10))
    peer.feed(whole, cut(whole, points))
    peer.finish()


@given(
    prelude=preludes,
    values=st.lists(json_values | DEEP, max_size=6),
    ascii_only=st.booleans(),
    app=apps,
    data=st.data(),
)
def test_arbitrary_json_values(
    prelude: str | None, values: list[Any], ascii_only: bool, app: str, data: st.DataObject
) -> None:
    """Any JSON value on a line (huge integers, deep nesting, lone surrogates): refused politely."""
    tick()
    peer = Peer(app=app)
    whole = _prelude(prelude) + b"".join(to_line(v, ascii_only=ascii_only) for v in values)
    points = data.draw(st.lists(st.integers(min_value=0, max_value=len(whole)), max_size=6))
    peer.feed(whole, cut(whole, points))
    peer.finish()


@given(
    prelude=preludes,
    messages=st.lists(near_valid_or_batch, max_size=6),
    ascii_only=st.booleans(),
    app=apps,
    data=st.data(),
)
def test_near_valid_jsonrpc(
    prelude: str | None, messages: list[Any], ascii_only: bool, app: str, data: st.DataObject
) -> None:
    """Messages and batches with wrong member types, case-variant members, bad ``_meta``."""
    tick()
    peer = Peer(app=app)
    peer.feed(_prelude(prelude))
    lines = [to_line(m, ascii_only=ascii_only) for m in messages]
    total = sum(len(line) for line in lines)
    points = data.draw(st.lists(st.integers(min_value=0, max_value=total), max_size=8))
    peer.feed_each(lines, points)
    peer.finish()


@given(
    batches=st.lists(st.lists(near_valid_messages(), max_size=4), min_size=1, max_size=3),
    app=apps,
)
def test_batches_on_a_2025_03_26_connection(batches: list[list[Any]], app: str) -> None:
    """Batches are read on 2025-03-26 only; each gets one reply array (or none), never twice."""
    tick()
    peer = Peer(app=app)
    peer.feed(_prelude("2025-03-26"))
    peer.feed_each([to_line(batch) for batch in batches], [])
    assert peer.reply_arrays <= len(batches)
    peer.finish()
    assert peer.reply_arrays <= len(batches)


@given(
    lines=st.lists(
        st.tuples(
            st.booleans(), st.integers(min_value=100, max_value=400), st.sampled_from([b"\n", b"\r\n"])
        ),
        max_size=12,
    ),
    max_line=st.integers(min_value=180, max_value=400),
    data=st.data(),
)
def test_overlong_lines_are_one_parse_error_each(
    lines: list[tuple[bool, int, bytes]], max_line: int, data: st.DataObject
) -> None:
    """Each line over the limit costs exactly one -32700 with a null id; the pings around it are answered."""
    tick()
    peer = Peer(app="result", max_line=max_line)
    stream = b""
    pings: list[str] = []
    overlong = 0
    for i, (is_ping, size, eol) in enumerate(lines):
        if is_ping:
            pings.append(f"p{i}")
            stream += to_line(request(f"p{i}", "ping"))[:-1] + eol
        else:
            body = b'{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":"' + b"x" * size + b'"}}'
            overlong += len(body) + len(eol) - 1 > max_line
            stream += body + eol
    points = data.draw(st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=10))
    peer.feed(stream, cut(stream, points))
    answered = [r["id"] for r in peer.responses if "result" in r and r["id"] != "big"]
    assert answered == pings
    assert peer.parse_errors == overlong
    assert all(r["id"] is None for r in peer.responses if r.get("error", {}).get("code") == PARSE_ERROR)
    peer.finish()


@pytest.mark.parametrize("member", ["method", "id", "params", "jsonrpc"])
def test_a_member_named_twice_is_an_invalid_request_never_either_value(member: str) -> None:
    """A parser keeps one of two ``method`` members; mcpx serves neither: -32600 naming it, id null."""
    twice = {
        "method": b'{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}',
        "id": b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
        "params": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{},"params":{"a":1}}',
        "jsonrpc": b'{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"method":"ping"}',
    }[member]
    peer = Peer(app="result")
    peer.feed(_prelude("2025-11-25"))
    peer.feed(twice + b"\n" + to_line(request("after", "ping")))
    refusal, after = peer.responses[-2:]
    assert refusal["error"]["code"] == -32600 and f"'{member}'" in refusal["error"]["message"], refusal
    assert refusal["id"] is None and after["id"] == "after" and "result" in after
    nested = b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"arguments":{"id":1,"method":"x"}}}'
    peer.feed(nested + b"\n")  # the names inside params are not the message's members
    assert peer.responses[-1]["id"] == 3 and "result" in peer.responses[-1]
