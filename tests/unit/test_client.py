"""The client session, against scripted servers and against mcpx's own server session.

Back to back with ``ServerSession`` (both pure, bytes carried by the test),
the client must negotiate every legacy revision, speak 2026-07-28 without a
handshake, and resolve the server's questions — server requests or
``input_required`` rounds — through the same answers.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpx.core import (
    Answered,
    HandleRequest,
    LocalProtocolError,
    Revision,
    RoundTable,
    Send,
    ServerConfig,
    ServerSession,
)
from mcpx.core.client_session import (
    AbandonStream,
    ClientSession,
    Completed,
    Failed,
    InputRequired,
    MessageTooLarge,
    Progress,
    Ready,
    ServerNotification,
    ServerRequest,
    ServerRequestCancelled,
)
from mcpx.core.rounds import Question

INFO = {"name": "test-client", "version": "1"}
LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]


def frames(actions: list[Any]) -> list[dict[str, Any]]:
    return [orjson.loads(a.payload) for a in actions if isinstance(a, Send)]


def only(actions: list[Any], kind: type) -> Any:
    (found,) = [a for a in actions if isinstance(a, kind)]
    return found


# -- against a scripted server ------------------------------------------------------


def test_a_handshake_the_era_probe_made_is_adopted_without_sending_anything() -> None:
    """The probe's process handed over: Ready at once, nothing sent, and requests go under that revision."""
    c = ClientSession(client_info=INFO)
    c.adopt_handshake(
        revision=Revision("2025-06-18"), capabilities={"tools": {}}, server_info={"name": "s", "version": "1"}
    )
    (ready,) = c.next_actions()
    assert isinstance(ready, Ready) and ready.revision == "2025-06-18" and ready.capabilities == {"tools": {}}
    assert c.ready and c.server_info == {"name": "s", "version": "1"}
    c.request("tools/list")
    (sent,) = frames(c.next_actions())
    assert sent["method"] == "tools/list"
    with pytest.raises(LocalProtocolError):  # once only, and never instead of a handshake of its own
        c.adopt_handshake(revision=Revision("2025-06-18"), capabilities={}, server_info={})
    with pytest.raises(LocalProtocolError):
        ClientSession(client_info=INFO, modern=True).adopt_handshake(
            revision=Revision("2025-06-18"), capabilities={}, server_info={}
        )
    only_2025 = ClientSession(
        client_info=INFO, offer=Revision("2025-11-25"), revisions=(Revision("2025-11-25"),)
    )
    with pytest.raises(LocalProtocolError, match="not among"):
        only_2025.adopt_handshake(revision=Revision("2024-11-05"), capabilities={}, server_info={})
    assert not only_2025.ready and only_2025.next_actions() == []


def test_legacy_handshake_offers_the_newest_and_accepts_a_counter_offer_it_speaks() -> None:
    c = ClientSession(client_info=INFO, capabilities={"roots": {"listChanged": True}})
    with pytest.raises(LocalProtocolError):
        c.request("tools/list")  # not ready before initialize
    handle = c.start()
    (init,) = frames(c.next_actions())
    assert init["method"] == "initialize" and init["params"]["protocolVersion"] == "2025-11-25"
    assert init["params"]["capabilities"] == {"roots": {"listChanged": True}}
    c.receive_json(
        {
            "jsonrpc": "2.0",
            "id": init["id"],
            "result": {
                "protocolVersion": "2025-03-26",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "s", "version": "1"},
            },
        }
    )
    actions = c.next_actions()
    assert frames(actions) == [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
    ready = only(actions, Ready)
    assert ready.revision == Revision.V2025_03_26 and ready.capabilities == {"tools": {}}
    assert c.ready and handle == init["id"]


def test_a_version_the_client_does_not_speak_fails_with_what_it_offered() -> None:
    c = ClientSession(client_info=INFO)
    c.start()
    (init,) = frames(c.next_actions())
    c.receive_json({"jsonrpc": "2.0", "id": init["id"], "result": {"protocolVersion": "1999-01-01"}})
    failed = only(c.next_actions(), Failed)
    assert "1999-01-01" in failed.error["message"] and "2025-11-25" in failed.error["message"]
    with pytest.raises(LocalProtocolError, match="1999-01-01"):
        c.request("ping")


def test_modern_requests_restate_version_capabilities_and_client_info() -> None:
    c = ClientSession(client_info=INFO, capabilities={"elicitation": {}}, modern=True)
    handle = c.request("tools/list", {"cursor": "x"}, log_level="info")
    (frame,) = frames(c.next_actions())
    meta = frame["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {}}
    assert meta["io.modelcontextprotocol/clientInfo"] == INFO
    assert meta["io.modelcontextprotocol/logLevel"] == "info"
    assert "inputResponses" not in frame["params"] and "requestState" not in frame["params"]
    c.receive_json({"jsonrpc": "2.0", "id": frame["id"], "result": {"tools": [], "resultType": "complete"}})
    assert only(c.next_actions(), Completed).handle == handle


def test_a_modern_session_keeps_what_server_discover_answered() -> None:
    """2026-07-28 server/discover: the session keeps the server's capabilities, so a client asks once."""
    c = ClientSession(client_info=INFO, modern=True)
    assert not c.capabilities_known and c.server_capabilities == {}
    c.request("server/discover")
    (frame,) = frames(c.next_actions())
    declared = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}
    result = {
        "supportedVersions": ["2026-07-28"],
        "capabilities": declared,
        "serverInfo": {"name": "s", "version": "2"},
        "resultType": "complete",
    }
    c.receive_json({"jsonrpc": "2.0", "id": frame["id"], "result": result})
    only(c.next_actions(), Completed)
    assert c.capabilities_known and c.server_capabilities == declared
    assert c.server_info == {"name": "s", "version": "2"}
    routed = ClientSession(client_info=INFO, modern=True)  # answered the router's way (take_answer)
    sent = routed.request_now("server/discover")
    assert sent is not None
    answer = {"jsonrpc": "2.0", "id": orjson.loads(sent[1])["id"], "result": result}
    assert routed.take_answer(answer) is None  # declined: receive_json keeps what it declares
    routed.receive_json(answer)
    assert routed.capabilities_known and routed.server_capabilities == declared
    probed = ClientSession(client_info=INFO, modern=True)
    probed.adopt_discovery({"prompts": {}})  # what the era probe's server/discover said
    assert probed.capabilities_known and probed.server_capabilities == {"prompts": {}}
    assert probed.next_actions() == []  # nothing is sent for it
    legacy = ClientSession(client_info=INFO)
    assert not legacy.capabilities_known  # known once initialize is answered
    with pytest.raises(LocalProtocolError):
        legacy.adopt_discovery({})


def test_one_request_may_declare_its_own_capabilities_on_every_attempt() -> None:
    """A gateway narrows what it declares to its caller's: that request and its retries say so, no other."""
    caps_key = "io.modelcontextprotocol/clientCapabilities"
    c = ClientSession(client_info=INFO, capabilities={"elicitation": {}, "sampling": {}}, modern=True)
    handle = c.request("tools/call", {"name": "t"}, capabilities={"elicitation": {"form": {}}})
    c.request("tools/list")
    first, listed = frames(c.next_actions())
    assert first["params"]["_meta"][caps_key] == {"elicitation": {"form": {}}}
    assert listed["params"]["_meta"][caps_key] == {"elicitation": {}, "sampling": {}}
    asking(c, first["id"])
    c.resume(handle, {"q": {"roots": []}}, request_state=only(c.next_actions(), InputRequired).request_state)
    (retry,) = frames(c.next_actions())
    assert retry["params"]["_meta"][caps_key] == {"elicitation": {"form": {}}}


def test_a_task_result_completes_only_a_call_that_declared_the_tasks_extension() -> None:
    """resultType "task" is the 2026-07-28 tasks extension's: a call not declaring it cannot know it."""
    tasks = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    created = {"resultType": "task", "taskId": "t1", "status": "working", "ttlMs": 1000}
    c = ClientSession(client_info=INFO, capabilities={}, modern=True)
    declared = c.request("tools/call", {"name": "slow"}, capabilities=tasks)
    undeclared = c.request("tools/call", {"name": "slow"})
    first, second = frames(c.next_actions())
    c.receive_json({"jsonrpc": "2.0", "id": first["id"], "result": created})
    c.receive_json({"jsonrpc": "2.0", "id": second["id"], "result": created})
    actions = c.next_actions()
    assert only(actions, Completed).handle == declared and only(actions, Completed).result == created
    failed = only(actions, Failed)
    assert failed.handle == undeclared and "unknown resultType 'task'" in failed.error["message"]


def test_input_required_rounds_keep_the_handle_use_fresh_ids_and_echo_the_state() -> None:
    c = ClientSession(client_info=INFO, capabilities={"elicitation": {}}, modern=True)
    handle = c.request("tools/call", {"name": "t"})
    (first,) = frames(c.next_actions())
    state = "opaque.state/with=odd chars"
    c.receive_json(
        {
            "jsonrpc": "2.0",
            "id": first["id"],
            "result": {
                "resultType": "input_required",
                "inputRequests": {"q": {"method": "elicitation/create", "params": {"message": "?"}}},
                "requestState": state,
            },
        }
    )
    asked = only(c.next_actions(), InputRequired)
    assert asked.handle == handle and asked.request_state == state
    c.resume(handle, {"q": {"action": "accept"}}, request_state=asked.request_state)
    (retry,) = frames(c.next_actions())
    assert retry["id"] != first["id"] and retry["params"]["requestState"] == state
    assert retry["params"]["inputResponses"] == {"q": {"action": "accept"}}
    # The first id is spent: a late answer to it is not this call's.
    c.receive_json({"jsonrpc": "2.0", "id": first["id"], "result": {"content": []}})
    assert c.next_actions() == []
    c.receive_json(
        {"jsonrpc": "2.0", "id": retry["id"], "result": {"content": []}}
    )  # no resultType: complete
    assert only(c.next_actions(), Completed).handle == handle


def test_a_request_longer_as_sent_than_the_servers_limit_is_refused_before_it_is_sent() -> None:
    """What the session adds (``_meta``, the id, the newline not counted) counts against the limit."""
    c = ClientSession(
        client_info=INFO, capabilities={"elicitation": {}}, modern=True, newline=True, max_message=600
    )
    small = c.request("tools/call", {"name": "t", "arguments": {"text": "x"}})
    (sent,) = frames(c.next_actions())
    overhead = len(orjson.dumps(sent)) - len(orjson.dumps({"name": "t", "arguments": {"text": "x"}}))
    params = {"name": "t", "arguments": {"text": "x" * (600 - overhead)}}  # fits as given, not as sent
    with pytest.raises(MessageTooLarge) as refused:
        c.request("tools/call", params)
    assert refused.value.limit == 600 and refused.value.size > 600 and refused.value.over > 0
    assert f"by {refused.value.over} bytes" in str(refused.value)
    assert c.next_actions() == [] and c.in_flight == 1  # nothing sent, nothing left behind
    # A round's answers that make the retry too long end the call (nothing goes out).
    c.receive_json(
        {
            "jsonrpc": "2.0",
            "id": sent["id"],
            "result": {
                "resultType": "input_required",
                "inputRequests": {"q": {"method": "elicitation/create", "params": {"message": "?"}}},
            },
        }
    )
    only(c.next_actions(), InputRequired)
    c.resume(small, {"q": {"action": "accept", "content": {"pad": "y" * 700}}})
    (failed,) = c.next_actions()
    assert isinstance(failed, Failed) and failed.handle == small and failed.error["code"] == -32602
    assert "limit on one message" in failed.error["message"] and c.in_flight == 0


def asking(c: ClientSession, request_id: Any) -> None:
    question = {"q": {"method": "roots/list", "params": {}}}
    c.receive_json(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"resultType": "input_required", "inputRequests": question},
        }
    )


def test_a_round_can_be_refused_and_a_call_that_ended_takes_no_answers() -> None:
    c = ClientSession(client_info=INFO, capabilities={"roots": {}}, modern=True)
    handle = c.request("tools/call", {"name": "t"})
    assert not c.awaiting_answers(handle)  # in flight, not waiting on the application
    asking(c, frames(c.next_actions())[0]["id"])
    only(c.next_actions(), InputRequired)
    assert c.awaiting_answers(handle)
    error = {"code": -32601, "message": "the client did not answer the server's question 'q'"}
    c.refuse_round(handle, error)
    assert c.next_actions() == [Failed(handle=handle, error=error)]  # and nothing on the wire
    assert not c.awaiting_answers(handle) and c.in_flight == 0
    with pytest.raises(LocalProtocolError, match="not waiting for answers"):
        c.resume(handle, {"q": {"roots": []}})
    # A call cancelled while the application answers: nothing in flight, nothing sent, no resume.
    other = c.request("tools/call", {"name": "t"})
    asking(c, frames(c.next_actions())[0]["id"])
    c.next_actions()
    c.cancel(other, "the caller gave up")
    assert c.next_actions() == [] and not c.awaiting_answers(other)
    with pytest.raises(LocalProtocolError, match="not waiting for answers"):
        c.refuse_round(other, error)


def unsupported(request_id: Any, supported: list[str]) -> dict[str, Any]:
    data = {"supported": supported, "requested": "2026-07-28"}
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32022, "message": "no", "data": data}}


def test_a_32022_naming_our_revision_is_retried_once_with_a_fresh_id() -> None:
    c = ClientSession(client_info=INFO, modern=True)
    handle = c.request("tools/call", {"name": "t", "arguments": {"a": 1}})
    (first,) = frames(c.next_actions())
    c.receive_json(unsupported(first["id"], ["2026-07-28"]))
    (retry,) = frames(c.next_actions())
    assert retry["id"] != first["id"] and retry["params"] == first["params"]
    # A second refusal is the caller's to see: one retry, never a loop.
    c.receive_json(unsupported(retry["id"], ["2026-07-28"]))
    failed = only(c.next_actions(), Failed)
    assert failed.handle == handle and failed.error["code"] == -32022
    assert failed.error["data"]["supported"] == ["2026-07-28"]


def test_a_32022_without_our_revision_fails_with_the_servers_list() -> None:
    c = ClientSession(client_info=INFO, modern=True)
    handle = c.request("tools/list")
    (first,) = frames(c.next_actions())
    c.receive_json(unsupported(first["id"], ["2027-01-01"]))
    actions = c.next_actions()
    assert frames(actions) == []
    failed = only(actions, Failed)
    assert failed.handle == handle and failed.error["data"]["supported"] == ["2027-01-01"]
    assert c.in_flight == 0


def test_an_unknown_result_type_fails_the_call() -> None:
    c = ClientSession(client_info=INFO, modern=True)
    handle = c.request("tools/call", {"name": "t"})
    (frame,) = frames(c.next_actions())
    c.receive_json({"jsonrpc": "2.0", "id": frame["id"], "result": {"resultType": "task", "taskId": "x"}})
    failed = only(c.next_actions(), Failed)
    assert failed.handle == handle and "resultType" in failed.error["message"]


def test_a_null_id_error_fails_the_one_request_on_the_wire_and_no_other() -> None:
    """JSON-RPC 2.0 §5: the server could not read a request.  With one on the wire it is that one."""
    parse_error = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: line too long"},
    }
    c = ClientSession(client_info=INFO, modern=True)
    handle = c.request("tools/call", {"name": "t"})
    c.next_actions()
    c.receive_json(parse_error)
    failed = only(c.next_actions(), Failed)
    assert failed.handle == handle and failed.error["code"] == -32700
    assert (
        "could not read the request" in failed.error["message"] and "line too long" in failed.error["message"]
    )
    assert c.in_flight == 0
    first, second = c.request("tools/call", {"name": "a"}), c.request("tools/call", {"name": "b"})
    c.next_actions()
    c.receive_json(parse_error)  # two on the wire: which one?  Neither is failed on a guess
    assert not [a for a in c.next_actions() if isinstance(a, Failed)]
    assert c.in_flight == 2 and {first, second} == set(c._calls)


def test_cancellation_per_era() -> None:
    legacy = ClientSession(client_info=INFO, modern=False)
    legacy._state.ready = True  # as after a handshake
    legacy._state.revision = Revision.V2025_06_18
    h = legacy.request("tools/call", {"name": "slow"})
    (frame,) = frames(legacy.next_actions())
    legacy.cancel(h, "user gave up")
    (note,) = frames(legacy.next_actions())
    assert note == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": frame["id"], "reason": "user gave up"},
    }
    legacy.receive_json({"jsonrpc": "2.0", "id": frame["id"], "result": {"content": []}})
    assert legacy.next_actions() == []  # nothing more is reported for it
    http = ClientSession(client_info=INFO, modern=True, stream_per_request=True)
    h = http.request("tools/call", {"name": "slow"})
    http.next_actions()
    http.cancel(h)
    assert http.next_actions() == [AbandonStream(handle=h)]


def test_server_requests_only_for_declared_capabilities_and_withdrawals() -> None:
    c = ClientSession(client_info=INFO, capabilities={"roots": {}})
    c._state.ready, c._state.revision = True, Revision.V2025_06_18
    c.receive_json({"jsonrpc": "2.0", "id": -1, "method": "sampling/createMessage", "params": {}})
    (refused,) = frames(c.next_actions())
    assert refused["error"]["code"] == -32601 and "sampling" in refused["error"]["message"]
    c.receive_json({"jsonrpc": "2.0", "id": -2, "method": "roots/list"})
    asked = only(c.next_actions(), ServerRequest)
    assert asked.method == "roots/list"
    c.receive_json({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": -2}})
    assert only(c.next_actions(), ServerRequestCancelled).request_id == -2
    c.answer(-2, {"roots": []})
    assert c.next_actions() == []  # withdrawn: no answer goes out
    c.receive_json({"jsonrpc": "2.0", "id": 7, "method": "ping"})
    assert frames(c.next_actions()) == [{"jsonrpc": "2.0", "id": 7, "result": {}}]


def test_a_modern_server_request_is_not_answered() -> None:
    c = ClientSession(client_info=INFO, capabilities={"roots": {}}, modern=True)
    c.receive_json({"jsonrpc": "2.0", "id": 1, "method": "roots/list"})
    assert c.next_actions() == []


def test_a_modern_server_request_is_answered_when_asked_to_and_as_a_2026_result() -> None:
    """``answer_modern_requests``: the legacy rules, and ``resultType`` as 2026-07-28 requires of a result."""
    c = ClientSession(client_info=INFO, capabilities={"roots": {}}, modern=True, answer_modern_requests=True)
    c.receive_json({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert frames(c.next_actions()) == [{"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}}]
    c.receive_json({"jsonrpc": "2.0", "id": 2, "method": "sampling/createMessage", "params": {}})
    (refused,) = frames(c.next_actions())
    assert refused["error"]["code"] == -32601  # not declared
    c.receive_json({"jsonrpc": "2.0", "id": 3, "method": "roots/list"})
    assert only(c.next_actions(), ServerRequest).method == "roots/list"
    c.answer(3, {"roots": []})
    assert frames(c.next_actions()) == [
        {"jsonrpc": "2.0", "id": 3, "result": {"roots": [], "resultType": "complete"}}
    ]


def test_progress_is_the_sessions_own_token_never_backwards_and_not_after_the_end() -> None:
    c = ClientSession(client_info=INFO, modern=True)
    h = c.request("tools/call", {"name": "t"}, progress=True)
    (frame,) = frames(c.next_actions())
    token = frame["params"]["_meta"]["progressToken"]
    assert token.startswith("mcpx-")
    for value in (1, 1, 0.5, 2):
        c.receive_json(
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": value},
            }
        )
    assert [p.progress for p in c.next_actions() if isinstance(p, Progress)] == [1, 2]
    c.receive_json({"jsonrpc": "2.0", "id": frame["id"], "result": {}})
    c.receive_json(
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": token, "progress": 3},
        }
    )
    assert [type(a) for a in c.next_actions()] == [Completed]
    assert h == frame["id"]


def test_end_of_input_fails_every_open_call_and_notifications_pass_through() -> None:
    c = ClientSession(client_info=INFO, modern=True)
    a, b = c.request("tools/list"), c.request("prompts/list")
    c.next_actions()
    c.receive_json({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    assert c.next_actions() == [ServerNotification(method="notifications/tools/list_changed", params={})]
    c.receive_eof()
    assert sorted(f.handle for f in c.next_actions() if isinstance(f, Failed)) == [a, b]


# -- against mcpx's own server session ----------------------------------------------


def serve(server: ServerSession, client: ClientSession, answer: Any) -> list[Any]:
    """Carry bytes both ways until quiet; the 'application' echoes tools and asks when told to."""
    events: list[Any] = []
    for _ in range(100):
        moved = False
        for action in client.next_actions():
            if isinstance(action, Send):
                server.receive_json(orjson.loads(action.payload), now=0.0)
                moved = True
            elif isinstance(action, ServerRequest):
                client.answer(action.request_id, answer(action.method, action.params))
                moved = True
            elif isinstance(action, InputRequired):
                responses = {
                    k: answer(q["method"], q.get("params", {})) for k, q in action.input_requests.items()
                }
                client.resume(action.handle, responses, request_state=action.request_state)
                moved = True
            else:
                events.append(action)
        for action in server.next_actions():
            if isinstance(action, Send):
                client.receive_json(orjson.loads(action.payload))
                moved = True
            elif isinstance(action, HandleRequest):
                if action.params.get("name") == "ask":
                    server.ask(
                        action.token,
                        [
                            Question(
                                key="name",
                                method="elicitation/create",
                                params={
                                    "message": "Name?",
                                    "requestedSchema": {
                                        "type": "object",
                                        "properties": {"n": {"type": "string"}},
                                    },
                                },
                            )
                        ],
                    )
                else:
                    server.respond(action.token, {"content": [{"type": "text", "text": "ok"}]})
                moved = True
            elif isinstance(action, Answered) and action.refused is not None:
                server.respond_error(action.token, -32602, action.refused)
                moved = True
            elif isinstance(action, Answered):
                name = (action.answers or {})["name"]["result"]["content"]["n"]
                server.respond(action.token, {"content": [{"type": "text", "text": f"hi {name}"}]})
                moved = True
        if not moved:
            return events
    raise AssertionError("the two sessions never went quiet")


def own_server() -> ServerSession:
    config = ServerConfig(server_info={"name": "mcpx", "version": "1"}, capabilities={"tools": {}})
    return ServerSession(config, rounds=RoundTable(key=b"k" * 32, instance="t"))


def elicit_answer(method: str, params: Any) -> dict[str, Any]:
    assert method == "elicitation/create"
    return {"action": "accept", "content": {"n": "Ada"}}


@pytest.mark.parametrize("revision", [*LEGACY, "2026-07-28"])
def test_talks_to_mcpx_in_every_revision_and_questions_resolve_the_same_way(revision: str) -> None:
    modern = revision == "2026-07-28"
    caps = {"elicitation": {}}
    offer = Revision.V2025_11_25 if modern else Revision(revision)
    client = ClientSession(client_info=INFO, capabilities=caps, modern=modern, offer=offer)
    server = own_server()
    if not modern:
        client.start()
        events = serve(server, client, elicit_answer)
        assert only(events, Ready).revision == Revision(revision)
    plain = client.request("tools/call", {"name": "echo"})
    assert only(serve(server, client, elicit_answer), Completed).handle == plain
    asks = client.request("tools/call", {"name": "ask"})
    events = serve(server, client, elicit_answer)
    if revision in ("2024-11-05", "2025-03-26"):  # no elicitation yet: the tool is refused the question
        failed = only(events, Failed)
        assert failed.handle == asks and "elicitation" in failed.error["message"]
        return
    done = only(events, Completed)
    assert done.handle == asks and done.result["content"][0]["text"] == "hi Ada"


# -- the direct calls of a machine wrapping the session (the router) ----------------------------


@st.composite
def _answers(draw: st.DrawFn, calls: int) -> dict[str, Any]:
    """Mostly the usual answer to one of ``calls``; sometimes another kind of result, id, envelope or member."""
    handle = st.integers(1, max(calls, 1))  # drawn three times as often as an id of nothing
    ids = st.one_of(handle, handle, handle, st.integers(-1, 6), st.text(max_size=2), st.none())
    kind = draw(st.sampled_from([None, "complete", "task", "input_required", "other", 7]))
    shape = draw(st.sampled_from(["dict", "dict", "dict", "list", "none"]))
    result: Any = {"content": [{"type": "text", "text": "hi"}]} if shape == "dict" else None
    if shape == "list":
        result = [1]
    if kind is not None and isinstance(result, dict):
        result["resultType"] = kind
    answer: dict[str, Any] = {
        "jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0"])),
        "id": draw(ids),
        "result": result,
    }
    extra = draw(st.sampled_from([None, None, None, "error", "method"]))
    if extra == "error":
        answer["error"] = {"code": 1, "message": "m"}
    elif extra == "method":
        answer["method"] = "x"
    return answer


def _session(era: str) -> ClientSession:
    c = ClientSession(client_info=INFO, capabilities={}, modern=era == "2026-07-28")
    if era != "2026-07-28":
        c.adopt_handshake(revision=Revision(era), capabilities={"tools": {}}, server_info=INFO)
    c.next_actions()  # Ready, if any
    return c


@given(
    era=st.sampled_from([*LEGACY, "2026-07-28"]),
    calls=st.integers(0, 3),
    queued=st.sampled_from([False, False, False, True]),
    data=st.data(),
)
def test_request_now_and_take_answer_do_what_request_and_receive_json_do(
    era: str, calls: int, queued: bool, data: st.DataObject
) -> None:
    """``request_now`` / ``take_answer`` or, when they decline, the queued way: the same bytes, the same outcome.

    Two sessions are given the same calls and the same answer, one the
    queued way (``request``, ``receive_json``) and one the direct way; what
    each reports (the direct way's handed-back values as the actions they
    stand for) and what each still holds are the same.  A direct call
    declines, changing nothing, when something is queued before it.
    """
    answer = data.draw(_answers(calls))
    queued_way, direct = _session(era), _session(era)
    seen_queued: list[Any] = []
    seen_direct: list[Any] = []
    for _ in range(calls):
        queued_way.request("tools/call", {"name": "t"})
        seen_queued += queued_way.next_actions()
        got = direct.request_now("tools/call", {"name": "t"})
        assert got is not None  # nothing was queued
        seen_direct.append(Send(payload=got[1], stream=got[0]))
    if queued:  # something waits in both: a direct call must not go before it
        for c in (queued_way, direct):
            c.notify("notifications/roots/list_changed")
        assert direct.request_now("tools/list") is None and direct.take_answer(answer) is None
    queued_way.receive_json(answer)
    taken = direct.take_answer(answer)
    if taken is None:
        direct.receive_json(answer)
    else:
        seen_direct.append(Completed(handle=taken[0], result=taken[1]))
    seen_queued += queued_way.next_actions()
    seen_direct += direct.next_actions()
    assert seen_direct == seen_queued
    assert direct.in_flight == queued_way.in_flight


@pytest.mark.parametrize("era", LEGACY)
def test_take_answer_leaves_the_answer_to_initialize_to_receive_json(era: str) -> None:
    """The handshake's answer is no call's result: ``take_answer`` declines it, and the session goes on."""
    c = ClientSession(client_info=INFO, offer=Revision(era))
    init = c.start()
    c.next_actions()
    answer = {
        "jsonrpc": "2.0",
        "id": init,
        "result": {"protocolVersion": era, "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}},
    }
    assert c.take_answer(answer) is None
    c.receive_json(answer)
    assert any(isinstance(action, Ready) for action in c.next_actions()) and c.ready
