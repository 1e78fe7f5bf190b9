"""Questions a call asks its client, both eras, in memory with a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from mcpx.core import Answered, CancelRequest, LocalProtocolError, ServerConfig, ServerSession
from mcpx.core.rounds import Question, RoundTable
from tests.unit.test_session import CAPS, MODERN_META, Harness

KEY = b"k" * 32
ELICIT = Question(
    key="name",
    method="elicitation/create",
    params={
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}},
    },
)
SAMPLE = Question(
    key="capital",
    method="sampling/createMessage",
    params={
        "messages": [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}],
        "maxTokens": 20,
    },
)
ROOTS = Question(key="roots", method="roots/list")


class Asking(Harness):
    def __init__(self, **config: Any) -> None:
        super().__init__()
        self.rounds = RoundTable(key=KEY, instance="test", ask_timeout=600, state_ttl=1800)
        self.session = ServerSession(
            ServerConfig(server_info={"name": "t", "version": "1"}, capabilities=CAPS, **config),
            rounds=self.rounds,
        )
        self.session.advance(self.now)

    def answered(self) -> list[Answered]:
        return [a for a in self.actions if isinstance(a, Answered)]


def modern_meta(caps: dict[str, Any]) -> dict[str, Any]:
    return {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": caps}


# -- legacy: questions go out as server requests ------------------------------


def test_legacy_question_goes_out_on_the_calls_stream_and_comes_back() -> None:
    h = Asking()
    h.initialize("2025-06-18", {"elicitation": {}})
    h.request(1, "tools/call", {"name": "t"})
    token = h.handled[1].token
    ask = h.session.ask(token, [ELICIT])
    h.pump()
    question, stream = h.sent[-1]
    assert question["method"] == "elicitation/create" and question["id"] < 0 and stream == token
    assert "mode" not in question["params"]  # 2025-06-18 has forms only, and no mode field
    h.feed({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"n": "Ada"}}})
    assert h.answered() == [
        Answered(
            token=token,
            ask_id=ask,
            answers={"name": {"result": {"action": "accept", "content": {"n": "Ada"}}}},
        )
    ]


def test_several_questions_are_answered_together() -> None:
    h = Asking()
    h.initialize("2025-11-25", {"elicitation": {}, "sampling": {}, "roots": {}})
    h.request(1, "tools/call", {"name": "t"})
    token = h.handled[1].token
    h.session.ask(token, [ELICIT, SAMPLE, ROOTS])
    h.pump()
    asked = [
        f
        for f, _ in h.sent
        if f.get("method") in ("elicitation/create", "sampling/createMessage", "roots/list")
    ]
    assert len(asked) == 3
    for frame in reversed(asked):
        h.feed({"jsonrpc": "2.0", "id": frame["id"], "result": {"ok": frame["method"]}})
    (answered,) = h.answered()
    assert set(answered.answers or {}) == {"name", "capital", "roots"}


def test_a_question_the_client_did_not_declare_is_refused_not_sent() -> None:
    h = Asking()
    h.initialize("2025-11-25", {"sampling": {}})
    h.request(1, "tools/call", {"name": "t"})
    token = h.handled[1].token
    before = len(h.sent)
    h.session.ask(token, [ELICIT])
    h.pump()
    (refusal,) = h.answered()
    assert "elicitation" in (refusal.refused or "") and refusal.required == {"elicitation": {"form": {}}}
    assert len(h.sent) == before  # nothing went out


@pytest.mark.parametrize(
    "revision, caps, question, allowed",
    [
        ("2025-03-26", {"elicitation": {}}, ELICIT, False),  # no elicitation before 2025-06-18
        ("2025-11-25", {"elicitation": {"url": {}}}, ELICIT, False),  # url only is not forms
        ("2025-11-25", {"elicitation": {}}, ELICIT, True),  # {} means forms
        (
            "2025-11-25",
            {"elicitation": {}},
            Question(
                key="u",
                method="elicitation/create",
                params={"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e"},
            ),
            False,
        ),
        (
            "2025-11-25",
            {"sampling": {}},
            Question(
                key="t", method="sampling/createMessage", params={"messages": [], "maxTokens": 1, "tools": []}
            ),
            False,
        ),
        (
            "2025-11-25",
            {"sampling": {"tools": {}}},
            Question(
                key="t", method="sampling/createMessage", params={"messages": [], "maxTokens": 1, "tools": []}
            ),
            True,
        ),
        (
            "2025-11-25",
            {"sampling": {}},
            Question(
                key="c",
                method="sampling/createMessage",
                params={"messages": [], "maxTokens": 1, "includeContext": "allServers"},
            ),
            False,
        ),
        (
            "2024-11-05",
            {"sampling": {}},
            Question(
                key="c",
                method="sampling/createMessage",
                params={"messages": [], "maxTokens": 1, "includeContext": "allServers"},
            ),
            True,
        ),
        ("2025-06-18", {}, ROOTS, False),
        ("2025-06-18", {"roots": {}}, ROOTS, True),
    ],
)
def test_gates(revision: str, caps: dict[str, Any], question: Question, allowed: bool) -> None:
    h = Asking()
    h.initialize(revision, caps)
    h.request(1, "tools/call", {"name": "t"})
    h.session.ask(h.handled[1].token, [question])
    h.pump()
    refused = [a for a in h.answered() if a.refused]
    assert (not refused) == allowed, refused


def test_an_unanswered_question_expires_as_cancel_and_is_withdrawn() -> None:
    h = Asking(question_ttl=120)
    h.initialize("2025-11-25", {"elicitation": {}, "roots": {}})
    h.request(1, "tools/call", {"name": "t"})
    token = h.handled[1].token
    h.session.ask(token, [ELICIT, ROOTS])
    h.pump()
    assert h.session.get_timer() == pytest.approx(h.now + 120)
    h.session.handle_timer(h.now + 120)
    h.pump()
    (answered,) = h.answered()
    assert answered.answers["name"] == {"result": {"action": "cancel"}}  # not declined: nobody chose
    assert "error" in answered.answers["roots"]
    withdrawn = [f for f, _ in h.sent if f.get("method") == "notifications/cancelled"]
    assert len(withdrawn) == 2
    late = next(f for f, _ in h.sent if f.get("method") == "elicitation/create")
    h.feed({"jsonrpc": "2.0", "id": late["id"], "result": {"action": "accept"}})  # too late: ignored
    assert len(h.answered()) == 1


def test_cancelling_the_call_withdraws_its_questions() -> None:
    h = Asking()
    h.initialize("2025-11-25", {"elicitation": {}})
    h.request(7, "tools/call", {"name": "t"})
    h.session.ask(h.handled[7].token, [ELICIT])
    h.feed({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
    assert [f["params"]["requestId"] for f, _ in h.sent if f.get("method") == "notifications/cancelled"] == [
        next(f for f, _ in h.sent if f.get("method") == "elicitation/create")["id"]
    ]


# -- 2026-07-28: input_required, a parked call, the retry ------------------------


def _modern_call(
    h: Asking, request_id: Any, caps: dict[str, Any], extra: dict[str, Any] | None = None
) -> None:
    h.request(
        request_id,
        "tools/call",
        {"name": "t", "arguments": {"a": 1}, "_meta": modern_meta(caps), **(extra or {})},
    )


def test_a_modern_question_is_an_input_required_result_and_the_retry_resumes_the_call() -> None:
    h = Asking()
    _modern_call(h, "r1", {"elicitation": {}})
    token = h.handled["r1"].token
    ask = h.session.ask(token, [ELICIT])
    h.pump()
    first = h.last()["result"]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {"name": ELICIT.as_input_request()}
    assert "ttlMs" not in first and isinstance(first["requestState"], str)
    retry = {
        "inputResponses": {"name": {"action": "accept", "content": {"n": "Ada"}}},
        "requestState": first["requestState"],
    }
    _modern_call(h, "r2", {"elicitation": {}}, retry)
    assert "r2" not in h.handled  # no new handler: the parked call takes the retry over
    (answered,) = h.answered()
    assert answered.token == token and answered.ask_id == ask
    assert answered.answers == {"name": {"result": {"action": "accept", "content": {"n": "Ada"}}}}
    h.session.respond(token, {"content": [{"type": "text", "text": "Hello, Ada"}]})
    h.pump()
    assert h.last()["id"] == "r2" and h.last()["result"]["resultType"] == "complete"


def test_answers_sent_ahead_are_given_to_the_questions_they_match() -> None:
    h = Asking()
    ahead = {"inputResponses": {"name": {"action": "accept", "content": {"n": "Bo"}}, "unused": {"x": 1}}}
    _modern_call(h, "r1", {"elicitation": {}}, ahead)
    token = h.handled["r1"].token
    h.session.ask(token, [ELICIT])
    h.pump()
    (answered,) = h.answered()
    assert answered.answers == {"name": {"result": {"action": "accept", "content": {"n": "Bo"}}}}
    assert not any("input_required" in str(f) for f, _ in h.sent)


def test_a_retry_missing_answers_is_asked_again_with_a_new_state() -> None:
    h = Asking()
    _modern_call(h, "r1", {"elicitation": {}, "roots": {}})
    token = h.handled["r1"].token
    h.session.ask(token, [ELICIT, ROOTS])
    h.pump()
    state1 = h.last()["result"]["requestState"]
    _modern_call(
        h,
        "r2",
        {"elicitation": {}, "roots": {}},
        {"inputResponses": {"roots": {"roots": []}, "bogus": {}}, "requestState": state1},
    )
    again = h.last()["result"]
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["name"]
    assert again["requestState"] != state1
    _modern_call(
        h,
        "r3",
        {"elicitation": {}, "roots": {}},
        {"inputResponses": {"name": {"action": "decline"}}, "requestState": again["requestState"]},
    )
    (answered,) = h.answered()
    assert answered.answers == {"roots": {"result": {"roots": []}}, "name": {"result": {"action": "decline"}}}


@pytest.mark.parametrize("how", ["tampered", "other-params", "old-round", "expired", "garbage"])
def test_states_that_cannot_be_accepted(how: str) -> None:
    h = Asking()
    _modern_call(h, "r1", {"elicitation": {}})
    token = h.handled["r1"].token
    h.session.ask(token, [ELICIT])
    h.pump()
    state = h.last()["result"]["requestState"]
    answer = {"inputResponses": {"name": {"action": "accept"}}}
    if how == "old-round":
        _modern_call(
            h, "r2", {"elicitation": {}}, {"inputResponses": {}, "requestState": state}
        )  # asks again
        params = {"name": "t", "arguments": {"a": 1}, **answer, "requestState": state}
    elif how == "tampered":
        payload, mac = state.split(".")
        params = {"name": "t", "arguments": {"a": 1}, **answer, "requestState": f"{payload}.{mac[:-2]}AA"}
    elif how == "other-params":
        params = {"name": "t", "arguments": {"a": 2}, **answer, "requestState": state}
    elif how == "expired":
        h.session.advance(h.now + 1801)
        params = {"name": "t", "arguments": {"a": 1}, **answer, "requestState": state}
    else:
        params = {"name": "t", "arguments": {"a": 1}, **answer, "requestState": "not a state"}
    h.request("bad", "tools/call", {**params, "_meta": modern_meta({"elicitation": {}})})
    error = h.last()["error"]
    assert error["code"] == -32602 and "requestState" in error["message"]
    if how == "other-params":
        assert "different request" in error["message"]
    assert not [a for a in h.answered() if a.answers]


def test_a_parked_call_nobody_comes_back_for_is_cancelled() -> None:
    h = Asking()
    _modern_call(h, "r1", {"elicitation": {}})
    token = h.handled["r1"].token
    h.session.ask(token, [ELICIT])
    h.pump()
    assert h.session.get_timer() == pytest.approx(h.now + 600)
    h.session.handle_timer(h.now + 600)
    assert [a for a in h.pump() if isinstance(a, CancelRequest)] == [
        CancelRequest(token=token, reason="the client did not come back with its answers")
    ]
    h.session.discard(token)  # the handler stopped: accepted


def test_rounds_are_bounded_across_retries() -> None:
    h = Asking()
    _modern_call(h, 0, {"elicitation": {}})
    token = h.handled[0].token
    state = None
    for n in range(1, 10):
        h.session.ask(token, [Question(key=f"q{n}", method="elicitation/create", params=ELICIT.params)])
        h.pump()
        reply = h.last()
        if n == 9:
            assert reply["error"]["code"] == -32603 and "8 times" in reply["error"]["message"]
            break
        state = reply["result"]["requestState"]
        _modern_call(
            h,
            n,
            {"elicitation": {}},
            {"inputResponses": {f"q{n}": {"action": "accept"}}, "requestState": state},
        )


def test_only_three_methods_may_ask_a_modern_client() -> None:
    h = Asking()
    h.request(
        "c",
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "p"},
            "argument": {"name": "a", "value": ""},
            "_meta": modern_meta({"elicitation": {}}),
        },
    )
    h.session.ask(h.handled["c"].token, [ELICIT])
    h.pump()
    (refusal,) = h.answered()
    assert "only tools/call, prompts/get and resources/read" in (refusal.refused or "")


def test_asking_for_a_request_that_is_not_in_flight_is_a_local_error() -> None:
    h = Asking()
    with pytest.raises(LocalProtocolError):
        h.session.ask(99, [ELICIT])
