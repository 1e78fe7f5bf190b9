"""The router's headline rules, one scripted conversation each (``mcpx.core.router``).

Each test plays the hosts and a scripted upstream server by hand, so a
failure reads as a conversation: colliding ids from two hosts, a legacy
question attributed only when its call is alone, the call timeout pausing
while the host is asked, rounds asked whole, and what a lost upstream or a
closed host leaves behind.  The model-based suite is tests/fuzz/test_router.py.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mcpx.core import LocalProtocolError, Revision
from mcpx.core.client_session import ClientSession, ServerRequest, ServerRequestCancelled
from mcpx.core.router import (
    AbandonUpstream,
    AnswerHost,
    AskHost,
    NotifyHost,
    Router,
    SendUpstream,
    UpstreamNotification,
    UpstreamOutcome,
    WithdrawAsk,
)
from mcpx.gateway._instances import UPSTREAM_CAPABILITIES

INFO = {"name": "mcpx", "version": "test"}
OWN = UPSTREAM_CAPABILITIES  # what the daemon's router declares to its upstreams
WITH_ROOTS = {"roots": {}, "elicitation": {}, "sampling": {}}
NO_ROOTS = {"elicitation": {}}
CALL = {"name": "echo", "arguments": {}}


def legacy_session(revision: str = "2025-06-18") -> ClientSession:
    session = ClientSession(client_info=INFO, capabilities=OWN, offer=Revision(revision))
    session.start()
    (init,) = [orjson.loads(a.payload) for a in session.next_actions() if hasattr(a, "payload")]
    session.receive_json(
        {
            "jsonrpc": "2.0",
            "id": init["id"],
            "result": {
                "protocolVersion": revision,
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "up", "version": "1"},
            },
        }
    )
    session.next_actions()
    return session


def modern_session(*, stream_per_request: bool = False) -> ClientSession:
    return ClientSession(
        client_info=INFO, capabilities=OWN, modern=True, stream_per_request=stream_per_request
    )


def sent(actions: list[Any], upstream: Any) -> list[dict[str, Any]]:
    return [
        orjson.loads(a.payload) for a in actions if isinstance(a, SendUpstream) and a.upstream == upstream
    ]


def of(actions: list[Any], kind: type) -> list[Any]:
    return [a for a in actions if isinstance(a, kind)]


def result(request_id: Any, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def router_with(**upstreams: ClientSession) -> Router:
    router = Router(capabilities=OWN)
    for key, session in upstreams.items():
        router.add_upstream(key, session)
    assert router.next_actions() == []
    return router


def call(router: Router, host: Any, request_id: Any, upstream: Any, **kw: Any) -> dict[str, Any]:
    """Host ``host`` sends ``request_id``; the frame the upstream gets."""
    kw.setdefault("host_capabilities", WITH_ROOTS)
    kw.setdefault("now", 0.0)
    router.host_request(host, request_id, "tools/call", CALL, upstream=upstream, **kw)
    (frame,) = sent(router.next_actions(), upstream)
    return frame


# -- correlation ----------------------------------------------------------------------------


def test_two_hosts_sending_the_same_id_each_get_their_own_answer_whatever_the_order() -> None:
    router = router_with(up=modern_session())
    first = call(router, "h1", 1, "up")
    second = call(router, "h2", 1, "up")
    assert first["id"] != second["id"]
    router.upstream_data("up", result(second["id"], text("for h2")), now=1.0)
    router.upstream_data("up", result(first["id"], text("for h1")), now=2.0)
    answers = of(router.next_actions(), AnswerHost)
    assert [(a.host, a.request_id, a.result["content"][0]["text"]) for a in answers] == [
        ("h2", 1, "for h2"),
        ("h1", 1, "for h1"),
    ]
    assert router.idle


def test_an_answer_to_a_cancelled_call_never_reaches_a_newer_call_with_the_same_id() -> None:
    router = router_with(up=legacy_session())
    old = call(router, "h1", "a", "up")
    router.host_cancelled("h1", "a", "changed my mind")
    (cancel,) = sent(router.next_actions(), "up")
    assert cancel["method"] == "notifications/cancelled" and cancel["params"]["requestId"] == old["id"]
    new = call(router, "h1", "a", "up")  # the id is free again
    router.upstream_data("up", result(old["id"], text("late")), now=1.0)
    assert of(router.next_actions(), AnswerHost) == []
    router.upstream_data("up", result(new["id"], text("fresh")), now=1.0)
    (answer,) = of(router.next_actions(), AnswerHost)
    assert (answer.host, answer.request_id, answer.result) == ("h1", "a", text("fresh"))


def test_what_goes_upstream_and_what_comes_back() -> None:
    router = router_with(up=modern_session())
    params = {
        "name": "echo",
        "arguments": {"x": 1},
        "task": {"ttl": 5},
        "_meta": {
            "progressToken": "host-token",
            "traceparent": "00-abc-def-01",
            "io.modelcontextprotocol/clientInfo": {"name": "host", "version": "1"},
            "dev.mcpx/session": "s1",
            "host.example/own": True,
        },
    }
    router.host_request(
        "h1",
        7,
        "tools/call",
        params,
        upstream="up",
        host_capabilities=NO_ROOTS,
        progress_token="host-token",
        now=0.0,
    )
    (frame,) = sent(router.next_actions(), "up")
    wire = frame["params"]
    assert "task" not in wire and wire["arguments"] == {"x": 1}
    meta = wire["_meta"]
    assert meta["traceparent"] == "00-abc-def-01" and meta["host.example/own"] is True
    assert "dev.mcpx/session" not in meta
    assert meta["progressToken"].startswith("mcpx-")  # the session's own token, not the host's
    assert meta["io.modelcontextprotocol/clientInfo"] == INFO  # mcpx's, not the host's
    declared = meta["io.modelcontextprotocol/clientCapabilities"]
    assert "sampling" not in declared and declared["roots"] == {}  # narrowed onto the host's
    router.upstream_data(
        "up",
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": meta["progressToken"], "progress": 1, "total": 2, "message": "half"},
        },
        now=1.0,
    )
    (progress,) = router.next_actions()
    assert progress == NotifyHost(
        host="h1",
        request_id=7,
        method="notifications/progress",
        params={"progressToken": "host-token", "progress": 1, "total": 2, "message": "half"},
    )
    upstream_result = {
        **text("done"),
        "resultType": "complete",
        "ttlMs": 5,
        "cacheScope": "private",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "up"}, "traceparent": "00-x"},
    }
    router.upstream_data("up", result(frame["id"], upstream_result), now=2.0)
    (answer,) = router.next_actions()
    assert answer == AnswerHost(
        host="h1", request_id=7, result={**text("done"), "_meta": {"traceparent": "00-x"}}
    )


def test_no_progress_reaches_a_host_that_gave_no_token_and_the_hosts_token_never_goes_upstream() -> None:
    router = router_with(up=modern_session())
    params = {**CALL, "_meta": {"progressToken": "host-token"}}  # the caller did not ask for progress
    router.host_request("h1", 1, "tools/call", params, upstream="up", host_capabilities={}, now=0.0)
    (frame,) = sent(router.next_actions(), "up")
    assert "progressToken" not in frame["params"]["_meta"]
    router.upstream_data(
        "up",
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "mcpx-1", "progress": 1},
        },
        now=1.0,
    )
    assert router.next_actions() == []


def test_narrowed_capabilities_are_computed_once_per_distinct_host_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mcpx.core.router_base as module  # where the router looks it up

    computed: list[Any] = []
    real = module.narrowed_capabilities

    def counting(own: Any, host: Any) -> dict[str, Any]:
        computed.append(host)
        return real(own, host)

    monkeypatch.setattr(module, "narrowed_capabilities", counting)
    router = Router(capabilities=OWN, capability_cache=2)
    router.add_upstream("up", modern_session())
    for request_id, caps in enumerate([WITH_ROOTS, dict(reversed(WITH_ROOTS.items())), NO_ROOTS, WITH_ROOTS]):
        router.host_request("h", request_id, "tools/call", CALL, upstream="up", host_capabilities=caps, now=0)
    assert computed == [WITH_ROOTS, NO_ROOTS]  # key order does not make a new set
    router.host_request("h", 10, "tools/call", CALL, upstream="up", host_capabilities={}, now=0)
    router.host_request("h", 11, "tools/call", CALL, upstream="up", host_capabilities={"sampling": {}}, now=0)
    router.host_request("h", 12, "tools/call", CALL, upstream="up", host_capabilities=WITH_ROOTS, now=0)
    assert len(computed) == 5  # the cache holds two: WITH_ROOTS was pushed out and computed again


def test_log_messages_go_to_every_host_with_a_call_on_that_upstream_and_to_no_other() -> None:
    router = router_with(a=legacy_session(), b=legacy_session())
    call(router, "h1", 1, "a")
    call(router, "h1", 2, "a")
    call(router, "h2", 1, "a")
    call(router, "h3", 1, "b")
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}}
    router.upstream_data("a", log, now=1.0)
    actions = router.next_actions()
    assert [(n.host, n.request_id) for n in of(actions, NotifyHost)] == [("h1", None), ("h2", None)]
    assert of(actions, UpstreamNotification) == [
        UpstreamNotification(
            upstream="a", method="notifications/message", params={"level": "info", "data": "hi"}
        )
    ]
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    router.upstream_data("b", changed, now=1.0)
    assert router.next_actions() == [
        UpstreamNotification(upstream="b", method="notifications/tools/list_changed", params={})
    ]


# -- legacy questions -------------------------------------------------------------------------


def elicit(request_id: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "elicitation/create",
        "params": {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}},
    }


def test_a_legacy_question_is_put_to_the_host_of_the_only_call_and_answered_back() -> None:
    router = router_with(up=legacy_session())
    call(router, "h1", 1, "up")
    router.upstream_data("up", elicit("q1"), now=1.0)
    (ask,) = router.next_actions()
    assert ask == AskHost(
        host="h1",
        request_id=1,
        ask_id=ask.ask_id,
        requests={"elicitation/create": {"method": "elicitation/create", "params": elicit("q1")["params"]}},
    )
    router.host_answered("h1", ask.ask_id, {"elicitation/create": {"action": "decline"}}, now=2.0)
    assert sent(router.next_actions(), "up") == [result("q1", {"action": "decline"})]


def test_a_legacy_question_while_two_calls_share_the_connection_is_asked_of_nobody() -> None:
    router = router_with(up=legacy_session())
    call(router, "h1", 1, "up")
    call(router, "h2", 1, "up")
    router.upstream_data("up", elicit("q1"), now=1.0)
    actions = router.next_actions()
    assert of(actions, AskHost) == []
    (refusal,) = sent(actions, "up")
    assert refusal["id"] == "q1" and refusal["error"]["code"] == -32603
    assert "cannot tell which of its callers elicitation/create is for" in refusal["error"]["message"]


def test_a_legacy_question_with_no_routed_call_on_the_connection_is_the_callers_to_answer() -> None:
    """Only the caller's own requests can have asked it (a call on the awaited path): handed to the caller."""
    router = router_with(up=legacy_session())
    router.upstream_data("up", elicit("q1"), now=1.0)
    (handed,) = router.next_actions()
    assert isinstance(handed, UpstreamOutcome) and isinstance(handed.event, ServerRequest)
    assert handed.event.request_id == "q1" and handed.event.method == "elicitation/create"
    router.upstream_data(
        "up", {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "q1"}}, now=2.0
    )
    (withdrawn,) = router.next_actions()
    assert isinstance(withdrawn, UpstreamOutcome) and isinstance(withdrawn.event, ServerRequestCancelled)


def test_roots_list_for_a_host_without_roots_is_answered_by_mcpx() -> None:
    router = router_with(up=legacy_session())
    call(router, "h1", 1, "up", host_capabilities=NO_ROOTS)
    router.upstream_data("up", {"jsonrpc": "2.0", "id": 9, "method": "roots/list"}, now=1.0)
    assert router.next_actions() == [
        SendUpstream(upstream="up", payload=orjson.dumps(result(9, {"roots": []})))
    ]


def test_a_question_the_upstream_withdraws_is_withdrawn_from_the_host_and_its_answer_dropped() -> None:
    router = router_with(up=legacy_session())
    call(router, "h1", 1, "up", timeout=10.0)
    router.upstream_data("up", elicit("q1"), now=1.0)
    (ask,) = router.next_actions()
    cancelled = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "q1"}}
    router.upstream_data("up", cancelled, now=3.0)
    assert router.next_actions() == [WithdrawAsk(host="h1", ask_id=ask.ask_id)]
    assert router.get_timer() == 12.0  # paused from 1 to 3
    router.host_answered("h1", ask.ask_id, {"elicitation/create": {"action": "decline"}}, now=4.0)
    assert router.next_actions() == []  # a late answer to a withdrawn question


def test_a_call_has_at_most_max_questions_out_and_the_upstream_is_told_why_not() -> None:
    router = Router(capabilities=OWN, max_questions=1)
    router.add_upstream("up", legacy_session())
    call(router, "h1", 1, "up")
    router.upstream_data("up", elicit("q1"), now=1.0)
    assert len(of(router.next_actions(), AskHost)) == 1
    router.upstream_data("up", elicit("q2"), now=1.0)
    actions = router.next_actions()
    assert of(actions, AskHost) == []
    (refusal,) = sent(actions, "up")
    assert refusal["id"] == "q2" and "questions out already" in refusal["error"]["message"]


# -- the call timeout ---------------------------------------------------------------------------


def test_the_call_timeout_pauses_while_a_question_is_out_and_resumes_with_the_time_left() -> None:
    router = router_with(up=legacy_session())
    frame = call(router, "h1", 1, "up", timeout=10.0, now=0.0)
    assert router.get_timer() == 10.0
    router.upstream_data("up", elicit("q1"), now=4.0)
    (ask,) = router.next_actions()
    assert router.get_timer() is None  # a person may take longer than the timeout
    router.handle_timer(1000.0)
    assert router.next_actions() == []
    router.host_answered("h1", ask.ask_id, {"elicitation/create": {"action": "decline"}}, now=1000.0)
    router.next_actions()
    assert router.get_timer() == 1006.0  # six seconds were left
    router.handle_timer(1005.5)
    assert router.next_actions() == []
    router.handle_timer(1006.0)
    actions = router.next_actions()
    (answer,) = of(actions, AnswerHost)
    assert answer.error is not None and answer.error["code"] == -32603
    assert answer.error["data"]["kind"] == "call-timeout" and "10s" in answer.error["message"]
    (cancel,) = sent(actions, "up")
    assert cancel["method"] == "notifications/cancelled" and cancel["params"]["requestId"] == frame["id"]
    assert router.idle and router.get_timer() is None


def test_a_question_arriving_after_the_deadline_times_the_call_out_instead_of_asking() -> None:
    router = router_with(up=legacy_session())
    call(router, "h1", 1, "up", timeout=2.0, now=0.0)
    router.upstream_data("up", elicit("q1"), now=5.0)  # the driver has not fired the timer yet
    actions = router.next_actions()
    assert of(actions, AskHost) == []
    (answer,) = of(actions, AnswerHost)
    assert answer.error is not None and answer.error["data"]["kind"] == "call-timeout"
    frames = sent(actions, "up")
    assert [f.get("method") for f in frames] == ["notifications/cancelled", None]
    assert frames[1]["id"] == "q1" and frames[1]["error"]["code"] == -32603
    assert router.idle


def test_a_round_arriving_after_the_deadline_times_the_call_out_instead_of_asking() -> None:
    router = router_with(up=modern_session(stream_per_request=True))
    frame = call(router, "h1", 1, "up", timeout=2.0, now=0.0)
    round_result = {"resultType": "input_required", "inputRequests": {"e": elicit("x")}}
    router.upstream_data("up", result(frame["id"], round_result), now=3.0)
    actions = router.next_actions()
    assert of(actions, AskHost) == []
    (answer,) = of(actions, AnswerHost)
    assert answer.error is not None and answer.error["data"]["kind"] == "call-timeout"
    assert of(actions, AbandonUpstream) == [AbandonUpstream(upstream="up", handle=frame["id"])]
    assert router.idle


# -- 2026-07-28 rounds ------------------------------------------------------------------------------


def test_a_round_is_asked_whole_under_the_upstreams_keys_and_answered_with_its_state() -> None:
    router = router_with(up=modern_session(), other=modern_session())
    frame = call(router, "h1", 1, "up", host_capabilities=NO_ROOTS, timeout=5.0)
    call(router, "h2", 1, "up")  # another call on the connection does not matter to a round
    question = {
        "method": "elicitation/create",
        "params": {"message": "ok?", "requestedSchema": {"type": "object"}},
    }
    round_result = {
        "resultType": "input_required",
        "inputRequests": {"ask-1": question, "where": {"method": "roots/list", "params": {}}},
        "requestState": "opaque/state==",
    }
    router.upstream_data("up", result(frame["id"], round_result), now=1.0)
    (ask,) = router.next_actions()
    assert (ask.host, ask.request_id, dict(ask.requests)) == ("h1", 1, {"ask-1": question})
    with pytest.raises(LocalProtocolError):
        router.host_answered("h1", ask.ask_id, {"ask-1": {"action": "accept"}, "where": {}}, now=2.0)
    with pytest.raises(LocalProtocolError):
        router.host_answered("h2", ask.ask_id, {"ask-1": {"action": "accept"}}, now=2.0)
    assert router.questions_out == 1 and router.next_actions() == []
    router.host_answered("h1", ask.ask_id, {"ask-1": {"action": "decline"}}, now=2.0)
    (retry,) = sent(router.next_actions(), "up")
    assert retry["id"] != frame["id"] and retry["params"]["name"] == "echo"
    assert retry["params"]["inputResponses"] == {"ask-1": {"action": "decline"}, "where": {"roots": []}}
    assert retry["params"]["requestState"] == "opaque/state=="
    assert router.get_timer() == 5.0 + 1.0  # paused for the second the host took


def test_a_refused_round_ends_the_call_with_the_hosts_error() -> None:
    router = router_with(up=modern_session(stream_per_request=True))
    frame = call(router, "h1", 1, "up")
    round_result = {
        "resultType": "input_required",
        "inputRequests": {
            "s": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 1}}
        },
    }
    router.upstream_data("up", result(frame["id"], round_result), now=1.0)
    (ask,) = router.next_actions()
    refusal = {"code": -32021, "message": "this host cannot sample", "data": {"requiredCapabilities": {}}}
    router.host_refused("h1", ask.ask_id, refusal, now=2.0)
    assert router.next_actions() == [AnswerHost(host="h1", request_id=1, error=refusal)]
    assert router.idle


# -- endings ----------------------------------------------------------------------------------------


def test_a_lost_upstream_fails_its_calls_naming_the_reason_and_withdraws_its_questions() -> None:
    router = router_with(a=legacy_session(), b=legacy_session())
    call(router, "h1", 1, "a")
    call(router, "h2", 1, "b")
    router.upstream_data("a", elicit("q1"), now=1.0)
    (ask,) = router.next_actions()
    router.upstream_lost("a", "server 'a' exited", now=2.0)
    assert router.next_actions() == [
        WithdrawAsk(host="h1", ask_id=ask.ask_id),
        AnswerHost(host="h1", request_id=1, error={"code": -32603, "message": "server 'a' exited"}),
    ]
    assert router.upstreams == {"b"} and router.in_flight == 1
    with pytest.raises(LocalProtocolError):
        router.host_request("h1", 2, "tools/call", CALL, upstream="a", host_capabilities={}, now=3.0)


def test_a_closed_host_has_its_calls_cancelled_and_questions_refused_upstream_and_hears_nothing_more() -> (
    None
):
    router = router_with(legacy=legacy_session(), modern=modern_session(stream_per_request=True))
    waiting = call(router, "h1", 1, "legacy")
    rounds = call(router, "h1", 2, "modern")
    call(router, "h2", 1, "modern")
    router.upstream_data("legacy", elicit("q1"), now=1.0)
    round_result = {"resultType": "input_required", "inputRequests": {"e": elicit("x")}}
    router.upstream_data("modern", result(rounds["id"], round_result), now=1.0)
    assert len(of(router.next_actions(), AskHost)) == 2
    router.host_closed("h1", now=2.0)
    actions = router.next_actions()
    assert [a for a in actions if getattr(a, "host", None) == "h1"] == []
    legacy_frames = sent(actions, "legacy")
    assert legacy_frames[0]["id"] == "q1" and legacy_frames[0]["error"]["code"] == -32603
    assert legacy_frames[1]["method"] == "notifications/cancelled"
    assert legacy_frames[1]["params"]["requestId"] == waiting["id"]
    assert (
        sent(actions, "modern") == [] and of(actions, AbandonUpstream) == []
    )  # the round's stream had ended
    assert router.in_flight == 1 and router.questions_out == 0


def test_misuse_is_a_local_error_and_changes_nothing() -> None:
    router = router_with(up=legacy_session())
    call(router, "h1", 1, "up")
    for bad in (
        lambda: router.host_request("h1", 1, "tools/call", CALL, upstream="up", host_capabilities={}, now=0),
        lambda: router.host_request(
            "h1", 2, "tools/call", CALL, upstream="nowhere", host_capabilities={}, now=0
        ),
        lambda: router.host_request(
            "h1", True, "tools/call", CALL, upstream="up", host_capabilities={}, now=0
        ),
        lambda: router.host_request(
            "h1", 3, "tools/call", CALL, upstream="up", host_capabilities={}, now=0, timeout=-1
        ),
        lambda: router.host_answered("h1", 99, {}, now=0),
        lambda: router.upstream_data("nowhere", {}, now=0),
        lambda: router.add_upstream("up", legacy_session()),
        lambda: router.add_upstream("fresh", ClientSession(client_info=INFO)),
    ):
        with pytest.raises(LocalProtocolError):
            bad()
        assert router.next_actions() == [] and router.in_flight == 1 and router.upstreams == {"up"}
    router.host_cancelled("h1", 42)  # a cancel for nothing in flight is ignored
    router.upstream_lost("nowhere", "gone", now=0)
    assert router.next_actions() == [] and router.in_flight == 1
