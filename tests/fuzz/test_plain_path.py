"""The session's quick way for plain requests answers exactly as its general way does.

``ServerSession._receive_plain`` serves the common request (envelope exactly
``{jsonrpc, id, method, params}``, an application method, an open connection)
without building a ``Request`` or walking the transition table, and
``respond`` answers an ordinary request without ``_settles_task``/``_take``
(and ``respond_now`` hands its bytes back instead of queueing them).
Two sessions with the same configuration and stores are fed the same inputs —
peer messages of every kind and shape, a handshake, answers and errors from
the application, end of input — one with the quick way and one without
(``_plain_ok = False``); after every step both must have queued the same
actions (bytes, tokens, contexts) and stand in the same state.  Peer messages
come as stdio delivers them and as the HTTP binding does, on a stream of the
transport's with the revision its header named (any revision, or none).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpx.core import HandleRequest, LocalProtocolError, RoundTable, Send, ServerSession, TaskStore, ToolHints
from mcpx.core.revisions import parse_revision

from ._examples import tick
from ._mcp import (
    CC,
    DISPATCHED_METHODS,
    GOOD_META,
    LEGACY_META,
    LEGACY_STRINGS,
    MODERN,
    PV,
    initialize,
    make_config,
    near_valid_messages,
    notification,
    request,
    request_params,
    to_line,
)

RESULTS: list[dict[str, Any]] = [
    {"content": [{"type": "text", "text": "x"}]},
    {"content": [{"type": "text", "text": "x", "_meta": {"io.modelcontextprotocol/related-task": {}}}]},
    {"content": [{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}], "isError": False},
    {"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}]},
    {"content": [], "structuredContent": {"a": 1}},
    {"content": [{"type": "text", "text": "x"}], "structuredContent": [1]},
    {"tools": [{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"type": "array"}}]},
    {"resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "z"}}},
    {},
]


_TOOLS = {"t": "optional", "r": "required", "f": "forbidden"}


def _pair(with_stores: bool) -> tuple[ServerSession, ServerSession]:
    def one() -> ServerSession:
        if not with_stores:
            return ServerSession(make_config(), newline=True)
        return ServerSession(
            make_config(tools=ToolHints(task_support=dict(_TOOLS))),
            newline=True,
            rounds=RoundTable(key=b"k" * 32, instance="i"),
            tasks=TaskStore(key=b"k" * 32, instance="i"),
        )

    quick, general = one(), one()
    general._plain_ok = False
    assert quick._plain_ok
    return quick, general


@st.composite
def plain_requests(draw: st.DrawFn) -> dict[str, Any]:
    """Requests shaped for the quick way (and a few that only look it)."""
    method = draw(
        st.sampled_from(
            [*DISPATCHED_METHODS, "ping", "logging/setLevel", "initialize", "tasks/get", "foo/bar"]
        )
    )
    kind = draw(st.sampled_from(["good", "legacy", "none", "bad"]))
    params = draw(request_params(method, kind)) or {}
    if method == "tools/call" and draw(st.booleans()):
        params = {**params, "name": draw(st.sampled_from(["t", "r", "f", "unknown"])), "arguments": {}}
        if draw(st.booleans()):
            params["task"] = draw(st.sampled_from([{}, {"ttl": 5}, 1]))
    return request(draw(st.integers(min_value=0, max_value=6) | st.just("s")), method, params)


_STEP = st.one_of(
    st.tuples(st.just("peer"), plain_requests()),
    st.tuples(st.just("peer"), plain_requests()),
    st.tuples(st.just("peer"), near_valid_messages()),
    st.tuples(
        st.just("peer on a stream"),
        st.tuples(
            plain_requests() | near_valid_messages(),
            st.integers(min_value=100, max_value=103),
            st.sampled_from([None, *LEGACY_STRINGS, MODERN]),
        ),
    ),
    st.tuples(st.just("initialize"), st.sampled_from([*LEGACY_STRINGS, MODERN, "1999-01-01"])),
    st.tuples(st.just("initialized"), st.none()),
    st.tuples(st.just("cancel"), st.integers(min_value=0, max_value=6)),
    st.tuples(st.just("respond"), st.tuples(st.integers(min_value=0, max_value=9), st.sampled_from(RESULTS))),
    st.tuples(
        st.just("respond now"), st.tuples(st.integers(min_value=0, max_value=9), st.sampled_from(RESULTS))
    ),
    st.tuples(
        st.just("error"), st.tuples(st.integers(min_value=0, max_value=9), st.sampled_from([-32002, 5]))
    ),
    st.tuples(st.just("eof"), st.none()),
)


def _apply(session: ServerSession, step: str, arg: Any, tokens: list[int], now: float) -> str:
    try:
        if step == "peer":
            session.receive_json(arg, now=now)
        elif step == "peer on a stream":
            message, stream, header = arg
            revision = None if header is None else parse_revision(header)
            session.receive_json(message, stream=stream, revision=revision, now=now)
        elif step == "initialize":
            session.receive_json(orjson.loads(to_line(initialize(100, arg))), now=now)
        elif step == "initialized":
            session.receive_json(notification("notifications/initialized"), now=now)
        elif step == "cancel":
            session.receive_json(notification("notifications/cancelled", {"requestId": arg}), now=now)
        elif step in ("respond", "respond now", "error"):
            index, answer = arg
            if not tokens:
                return "no token"
            token = tokens[index % len(tokens)]
            if step == "respond now" and session._plain_ok:  # the quick session: bytes handed back
                payload = session.respond_now(token, answer)
                if payload is None:
                    session.respond(token, answer)
                    return "ok"
                return f"now {payload!r}"
            if step in ("respond", "respond now"):
                session.respond(token, answer)
            else:
                session.respond_error(token, answer, "failed", {"uri": "file:///a"})
        elif step == "eof":
            session.receive_eof(now)
    except LocalProtocolError as exc:
        return f"refused: {exc}"
    return "ok"


@pytest.mark.parametrize("with_stores", [False, True])
@given(steps=st.lists(_STEP, max_size=25))
def test_the_quick_way_queues_what_the_general_way_does(with_stores: bool, steps: list[Any]) -> None:
    tick()
    quick, general = _pair(with_stores)
    tokens: list[int] = []
    for n, (step, drawn) in enumerate(steps):
        now = float(n)
        arg = drawn
        if step == "peer":
            try:  # what a peer can deliver: through the wire and orjson, as stdio reads it
                arg = orjson.loads(to_line(drawn))
            except orjson.JSONDecodeError:
                continue
        elif step == "peer on a stream":
            try:
                arg = (orjson.loads(to_line(drawn[0])), *drawn[1:])
            except orjson.JSONDecodeError:
                continue
        outcome = _apply(quick, step, arg, tokens, now)
        answered = _apply(general, step, arg, tokens, now)
        got, want = quick.next_actions(), general.next_actions()
        if outcome.startswith("now "):  # what respond would have queued, exactly
            assert answered == "ok" and got == [] and len(want) == 1, (step, arg, want)
            assert isinstance(want[0], Send) and outcome == f"now {want[0].payload!r}", (outcome, want)
            assert want[0].stream == tokens[arg[0] % len(tokens)], want  # its own stream: stdio's
        else:
            assert answered == outcome, (step, arg)
            assert got == want, (step, arg)
        assert quick.state is general.state
        tokens.extend(a.token for a in got if isinstance(a, HandleRequest))


def test_a_plain_request_takes_the_quick_way() -> None:
    """The property above compares something: these requests do go the quick way."""
    quick, _ = _pair(True)
    assert quick._receive_plain(request(1, "tools/call", {"name": "f", "arguments": {}})) is True
    assert (
        quick._receive_plain(request(2, "tools/list", {"_meta": {PV: MODERN, CC: {}, "progressToken": 3}}))
        is True
    )
    assert quick._receive_plain(request(3, "tools/list", {"_meta": LEGACY_META[1]})) is True
    assert quick._receive_plain(request(4, "tools/list", {"_meta": GOOD_META[-1]})) is True
    assert quick._receive_plain(request(5, "ping", {})) is False  # the session answers ping itself
    assert quick._receive_plain(request(1, "tools/list", {})) is False  # id 1 is in flight


def test_a_legacy_request_on_an_http_stream_takes_the_quick_way() -> None:
    quick, _ = _pair(False)
    header = parse_revision(LEGACY_STRINGS[-1])
    quick.receive_json(
        orjson.loads(to_line(initialize(100, LEGACY_STRINGS[-1]))), stream=100, revision=None, now=0.0
    )
    quick.receive_json(notification("notifications/initialized"), stream=None, revision=header, now=0.0)
    quick.next_actions()
    plain = quick._receive_plain
    taken: list[Any] = []
    quick._receive_plain = lambda obj, stream=None: taken.append(stream) or plain(obj, stream)  # type: ignore[method-assign]
    quick.receive_json(request(6, "tools/list", {}), stream=101, revision=header, now=0.0)
    (handled,) = quick.next_actions()
    assert taken == [101] and isinstance(handled, HandleRequest)
    quick.respond(handled.token, {"tools": []})
    (sent,) = quick.next_actions()
    assert sent.stream == 101 and orjson.loads(sent.payload)["id"] == 6  # answered on the HTTP stream


def test_respond_now_hands_an_ordinary_answer_back_and_leaves_the_rest_to_respond() -> None:
    """The property above compares something: an ordinary stdio answer comes back as bytes."""
    quick, _ = _pair(False)
    quick.receive_json(request(1, "tools/call", {"name": "f", "arguments": {}}), now=0.0)
    (handled,) = quick.next_actions()
    payload = quick.respond_now(handled.token, {"content": []})
    assert payload is not None and orjson.loads(payload) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": []},
    }
    assert (
        quick.next_actions() == [] and quick.respond_now(handled.token, {"content": []}) is None
    )  # answered
    quick.receive_json(request(2, "tools/list", {}), stream=7, revision=None, now=0.0)
    (streamed,) = quick.next_actions()
    assert quick.respond_now(streamed.token, {"tools": []}) is None  # its answer goes on stream 7: respond
