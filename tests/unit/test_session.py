"""The server session in memory, with a fake clock: rules a host would notice."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mcpx.core import (
    CancelRequest,
    Close,
    EndStream,
    HandleRequest,
    LocalProtocolError,
    PeerReplied,
    Send,
    ServerConfig,
    ServerSession,
    Subscribed,
    Trace,
)
from mcpx.core.policy import SpecPolicy
from mcpx.core.server_session import ConnectionState

CAPS = {
    "tools": {"listChanged": True},
    "prompts": {"listChanged": False},
    "resources": {"subscribe": True, "listChanged": True},
    "logging": {},
    "completions": {},
}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Harness:
    """A session, a fake clock, and the frames it sent, decoded."""

    def __init__(self, *, can_push: bool = True, **config: Any) -> None:
        self.now = 100.0
        self.session = ServerSession(
            ServerConfig(server_info={"name": "t", "version": "1"}, capabilities=CAPS, **config),
            can_push=can_push,
        )
        self.sent: list[tuple[dict[str, Any], int | None]] = []
        self.handled: dict[Any, HandleRequest] = {}
        self.actions: list[Any] = []

    def pump(self) -> list[Any]:
        actions = self.session.next_actions()
        for action in actions:
            if isinstance(action, Send):
                self.sent.append((orjson.loads(action.payload), action.stream))
            elif isinstance(action, HandleRequest):
                self.handled[action.context.request_id] = action
        self.actions.extend(actions)
        return actions

    def feed(self, obj: Any) -> list[Any]:
        self.session.receive_json(obj, now=self.now)
        return self.pump()

    def request(self, request_id: Any, method: str, params: dict[str, Any] | None = None) -> list[Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        return self.feed(message)

    def frames(self) -> list[dict[str, Any]]:
        return [frame for frame, _ in self.sent]

    def last(self) -> dict[str, Any]:
        return self.sent[-1][0]

    def initialize(
        self, version: str = "2025-06-18", capabilities: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        self.request(
            0,
            "initialize",
            {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": {}},
        )
        result = self.last()["result"]
        self.feed({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result  # type: ignore[no-any-return]


def test_handshake_moves_new_to_ready() -> None:
    h = Harness()
    assert h.session.state is ConnectionState.NEW
    h.request(1, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {}})
    assert h.session.state is ConnectionState.INITIALIZING
    h.feed({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert h.session.state is ConnectionState.READY
    assert h.session.negotiated_revision == "2025-03-26"


def test_every_version_decision_is_traced() -> None:
    h = Harness(trace=True)
    h.request(1, "initialize", {"protocolVersion": "1999-01-01", "capabilities": {}})
    traces = [a for a in h.actions if isinstance(a, Trace)]
    assert traces[0].event == "negotiated"
    assert traces[0].detail == {"requested": "1999-01-01", "chosen": "2025-11-25", "counter_offer": True}
    h.request(2, "tools/list", {"_meta": MODERN_META})
    assert any(
        t.event == "judged" and t.detail["revision"] == "2026-07-28"
        for t in h.actions
        if isinstance(t, Trace)
    )


def test_initialize_without_a_version_is_invalid_params_and_changes_nothing() -> None:
    h = Harness()
    h.request(1, "initialize", {"capabilities": {}})
    assert h.last()["error"]["code"] == -32602
    assert h.session.state is ConnectionState.NEW
    assert h.initialize()["protocolVersion"] == "2025-06-18"


def test_application_requests_become_actions_and_results_are_cut_to_the_revision() -> None:
    h = Harness()
    h.initialize("2025-03-26")
    h.request(7, "tools/call", {"name": "x", "_meta": {"progressToken": "p"}})
    action = h.handled[7]
    assert action.context.revision == "2025-03-26" and action.context.progress_token == "p"
    assert h.session.progress(action.token, 0.5, 1, "half")
    assert not h.session.progress(action.token, 0.5, 1)  # progress never goes backwards or repeats
    h.session.respond(action.token, {"content": [], "structuredContent": {"a": 1}, "resultType": "complete"})
    h.pump()
    progress, response = h.frames()[-2:]
    assert progress["params"] == {"progressToken": "p", "progress": 0.5, "total": 1, "message": "half"}
    assert response == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"content": [{"type": "text", "text": '{"a":1}'}]},
    }


def test_cancellation_cancels_the_handler_and_drops_its_answer() -> None:
    h = Harness()
    h.initialize()
    h.request("slow", "tools/call", {"name": "x"})
    token = h.handled["slow"].token
    actions = h.feed({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}})
    assert [a for a in actions if isinstance(a, CancelRequest)] == [CancelRequest(token=token, reason=None)]
    before = len(h.sent)
    assert not h.session.progress(token, 1)
    h.session.respond(token, {"content": []})  # late: dropped, not an error
    h.pump()
    assert len(h.sent) == before
    with pytest.raises(LocalProtocolError):
        h.session.respond(token, {"content": []})  # but only once


def test_initialize_cannot_be_cancelled_and_unknown_cancels_are_ignored() -> None:
    h = Harness()
    h.initialize()
    h.feed({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}})
    h.feed({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"not": "an id"}}})
    assert not [a for a in h.actions if isinstance(a, CancelRequest)]


def test_end_of_input_drains_then_closes_on_the_timer() -> None:
    h = Harness(drain=2.0)
    h.initialize()
    h.request(1, "tools/call", {"name": "a"})
    h.request(2, "tools/call", {"name": "b"})
    h.session.receive_eof(h.now)
    h.pump()
    assert h.session.state is ConnectionState.CLOSING
    assert h.session.get_timer() == h.now + 2.0
    h.session.respond(h.handled[1].token, {"content": []})
    h.pump()
    assert h.last()["id"] == 1
    h.session.handle_timer(h.now + 1.0)  # too early: nothing happens
    assert not [a for a in h.pump() if isinstance(a, Close)]
    h.session.handle_timer(h.now + 2.0)
    actions = h.pump()
    assert [type(a) for a in actions] == [CancelRequest, EndStream, Close]
    assert h.session.state is ConnectionState.CLOSED and h.session.get_timer() is None
    with pytest.raises(LocalProtocolError):
        h.session.receive_json({"jsonrpc": "2.0", "id": 9, "method": "ping"}, now=h.now + 2.0)


def test_end_of_input_with_nothing_in_flight_closes_at_once() -> None:
    h = Harness()
    h.initialize()
    h.session.receive_eof(h.now)
    assert [type(a) for a in h.pump()] == [Close]


def test_list_changed_goes_to_ready_legacy_peers_that_were_told_about_it() -> None:
    h = Harness()
    h.session.notify_list_changed("tools")
    assert h.pump() == []  # nothing negotiated yet
    h.initialize("2025-11-25")
    h.session.notify_list_changed("tools")
    h.session.notify_list_changed("prompts")  # prompts.listChanged is false
    h.pump()
    assert [f["method"] for f in h.frames() if "method" in f] == ["notifications/tools/list_changed"]


def test_a_connection_that_cannot_push_declares_no_push_capabilities() -> None:
    h = Harness(can_push=False)
    caps = h.initialize("2025-06-18")["capabilities"]
    assert caps["tools"] == {} and caps["resources"] == {}
    assert h.session.capabilities_for("2026-07-28")["tools"] == {"listChanged": True}  # type: ignore[arg-type]


def test_resource_updates_reach_subscribers_only() -> None:
    h = Harness()
    h.initialize("2025-06-18")
    h.request(1, "resources/subscribe", {"uri": "a://1"})
    h.session.notify_resource_updated("a://2")
    h.session.notify_resource_updated("a://1")
    h.request(2, "resources/unsubscribe", {"uri": "a://1"})
    h.session.notify_resource_updated("a://1")
    h.pump()
    updates = [f for f in h.frames() if f.get("method") == "notifications/resources/updated"]
    assert updates == [
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "a://1"}}
    ]


def test_the_server_is_told_of_each_uri_a_client_subscribes_to_in_either_era() -> None:
    """``Subscribed``: a legacy resources/subscribe, and the URIs a listen filter agreed to, before the answer."""
    legacy = Harness()
    legacy.initialize("2025-06-18")
    legacy.request(1, "resources/subscribe", {"uri": "a://1"})
    legacy.request(2, "resources/unsubscribe", {"uri": "a://1"})
    modern = Harness()
    filt = {"resourceSubscriptions": ["a://2", "a://3"]}
    modern.request("L", "subscriptions/listen", {"_meta": MODERN_META, "notifications": filt})
    told = [a.uri for h in (legacy, modern) for a in h.actions if isinstance(a, Subscribed)]
    assert told == ["a://1", "a://2", "a://3"]
    # The driver hears of the subscription before it writes the answer that confirms it.
    kinds = [type(a).__name__ for a in legacy.actions if isinstance(a, Subscribed | Send)]
    assert kinds[-3:] == ["Subscribed", "Send", "Send"]


def test_listen_streams_get_an_ack_then_only_what_they_asked_for() -> None:
    h = Harness()
    filt = {"toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": ["a://1"]}
    h.request("L", "subscriptions/listen", {"_meta": MODERN_META, "notifications": filt})
    ack, stream = h.sent[-1]
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    # prompts.listChanged is false, so that part is not honoured.
    assert ack["params"]["notifications"] == {"toolsListChanged": True, "resourceSubscriptions": ["a://1"]}
    h.session.notify_list_changed("prompts")
    h.session.notify_list_changed("tools")
    h.session.notify_resource_updated("a://1")
    h.pump()
    after = [f for f, s in h.sent if s == stream][1:]
    assert [f["method"] for f in after] == [
        "notifications/tools/list_changed",
        "notifications/resources/updated",
    ]
    assert all(f["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L" for f in after)
    h.feed({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "L"}})
    h.session.notify_list_changed("tools")
    h.pump()
    assert [f for f, s in h.sent if s == stream][1:] == after  # nothing after the cancel, not even a result


def test_server_requests_use_negative_ids_and_route_replies() -> None:
    h = Harness()
    with pytest.raises(LocalProtocolError):
        h.session.send_request("ping")  # not before initialize finished
    h.initialize("2025-06-18")
    first = h.session.send_request("ping")
    second = h.session.send_request("roots/list")
    assert first < 0 and second < 0 and first != second
    h.pump()
    h.feed({"jsonrpc": "2.0", "id": second, "result": {"roots": []}})
    h.feed({"jsonrpc": "2.0", "id": first, "error": {"code": -32601, "message": "no"}})
    h.feed({"jsonrpc": "2.0", "id": -999, "result": {}})  # nobody asked: ignored
    replies = [a for a in h.actions if isinstance(a, PeerReplied)]
    assert replies == [
        PeerReplied(token=second, result={"roots": []}),
        PeerReplied(token=first, error={"code": -32601, "message": "no"}),
    ]
    with pytest.raises(LocalProtocolError):
        h.session.send_request("tasks/list")  # not a server request in 2025-06-18


def test_log_messages_before_set_level_follow_the_precedence() -> None:
    modern_first = Harness()
    modern_first.initialize("2025-06-18")
    assert not modern_first.session.log("info", "hello")  # 2026-07-28's rule: no level, no messages
    legacy_first = Harness(policy=SpecPolicy.build(first="2025-06-18"))
    legacy_first.initialize("2025-06-18")
    assert legacy_first.session.log("info", "hello")  # the legacy MAY: the server chooses
    assert not legacy_first.session.log("debug", "too chatty")


def test_misuse_is_a_local_error_and_leaves_the_state_alone() -> None:
    h = Harness()
    h.initialize()
    with pytest.raises(LocalProtocolError):
        h.session.respond(12345, {})
    with pytest.raises(LocalProtocolError):
        h.session.log("loud", "x")
    with pytest.raises(LocalProtocolError):
        h.session.notify_list_changed("widgets")
    with pytest.raises(LocalProtocolError):
        h.session.discard(12345)
    assert h.session.state is ConnectionState.READY
    h.request(5, "ping")
    assert h.last() == {"jsonrpc": "2.0", "id": 5, "result": {}}


def test_capability_the_server_did_not_declare_is_method_not_found() -> None:
    h = Harness()
    h.session = ServerSession(
        ServerConfig(server_info={"name": "t", "version": "1"}, capabilities={"tools": {}})
    )
    h.initialize()
    h.request(1, "prompts/list")
    assert h.last()["error"]["code"] == -32601 and "prompts" in h.last()["error"]["message"]
