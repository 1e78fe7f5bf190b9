"""Questions a tool asks its client, over stdio and HTTP, every revision that has them, every driver.

A legacy client is sent ``elicitation/create``, ``sampling/createMessage`` or
``roots/list`` as a server request on the call's stream and answers it; a
2026-07-28 client gets ``input_required`` and retries with ``inputResponses``
and the echoed ``requestState``.  The tool (the demo's ``ask_name``,
``ask_model``, ``show_roots``, ``confirm_sync``) is written once and does not
know which.  Every frame goes through the strict schema sweep.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.http_peer import HttpPeer
from tests.conformance.peer import LOOPS, MODERN, REVISIONS, StdioPeer, at_least

pytestmark = pytest.mark.timeout(60)

Peer = StdioPeer | HttpPeer


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=("stdio", "http"))
def peer(loop: str, request: pytest.FixtureRequest) -> Iterator[Peer]:
    p: Peer = StdioPeer(loop) if request.param == "stdio" else HttpPeer(loop)
    yield p
    p.kill()


def answers(method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "elicitation/create":
        if "yes" in params["requestedSchema"]["properties"]:
            return {"action": "accept", "content": {"yes": True}}
        return {"action": "accept", "content": {"name": "Ada"}}
    if method == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "test-model"}
    return {"roots": [{"uri": "file:///work", "name": "work"}]}


def speak(peer: Peer, revision: str, caps: dict[str, Any]) -> dict[str, Any]:
    """Start speaking ``revision`` declaring ``caps``; returns the kwargs each call needs."""
    if revision == MODERN:
        peer.speak(MODERN)
        return {"meta": {"io.modelcontextprotocol/clientCapabilities": caps}}
    peer.initialize(revision, caps)
    return {}


def text_of(frame: dict[str, Any]) -> str:
    assert "result" in frame, frame
    return str(frame["result"]["content"][0]["text"])


def asked(peer: Peer) -> list[str]:
    return [q["method"] for q in peer.questions]


ELICITING = [r for r in REVISIONS if at_least(r, "2025-06-18")]


@pytest.mark.parametrize("revision", ELICITING)
def test_a_tool_asks_the_user_and_gets_an_answer(peer: Peer, revision: str) -> None:
    peer.answer = answers
    kw = speak(peer, revision, {"elicitation": {}})
    assert text_of(peer.complete("tools/call", {"name": "ask_name"}, **kw)) == "Hello, Ada!"
    assert asked(peer) == ["elicitation/create"]
    if revision != MODERN and isinstance(peer, StdioPeer):
        assert all(q["id"] < 0 for q in peer.questions)  # server-initiated ids never collide with ours


@pytest.mark.parametrize("revision", REVISIONS)
def test_sampling_and_roots_in_every_revision(peer: Peer, revision: str) -> None:
    peer.answer = answers
    kw = speak(peer, revision, {"sampling": {}, "roots": {}})
    assert text_of(
        peer.complete("tools/call", {"name": "ask_model", "arguments": {"question": "Capital?"}}, **kw)
    ) == ("The model says: Paris")
    assert text_of(peer.complete("tools/call", {"name": "show_roots"}, **kw)) == "Roots: file:///work"
    assert asked(peer) == ["sampling/createMessage", "roots/list"]


@pytest.mark.parametrize("revision", REVISIONS)
def test_a_client_is_never_asked_what_it_did_not_declare(peer: Peer, revision: str) -> None:
    peer.answer = answers
    kw = speak(peer, revision, {"roots": {}})  # no elicitation, no sampling
    frame = peer.complete("tools/call", {"name": "ask_name"}, **kw)
    # -32021 names the missing capability; a legacy client has no -32021 and gets -32602.
    assert frame["error"]["code"] == (-32021 if revision == MODERN else -32602)
    assert "elicitation" in frame["error"]["message"]
    if revision == MODERN:
        assert frame["error"]["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}
    frame = peer.complete("tools/call", {"name": "ask_model", "arguments": {"question": "?"}}, **kw)
    assert "error" in frame and "sampling" in frame["error"]["message"]
    assert asked(peer) == []  # nothing undeclared ever went out
    assert text_of(peer.complete("tools/call", {"name": "show_roots"}, **kw)) == "Roots: file:///work"


@pytest.mark.parametrize("revision", ["2025-11-25", MODERN])
def test_a_sync_tool_asks_from_its_worker_thread(peer: Peer, revision: str) -> None:
    peer.answer = answers
    kw = speak(peer, revision, {"elicitation": {}})
    frame = peer.complete("tools/call", {"name": "confirm_sync", "arguments": {"action": "deploy"}}, **kw)
    assert text_of(frame) == "deploy: confirmed"


@pytest.mark.parametrize("revision", ["2025-06-18", MODERN])
@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_declining_or_cancelling_is_an_answer_too(peer: Peer, revision: str, action: str) -> None:
    peer.answer = lambda method, params: {"action": action}
    kw = speak(peer, revision, {"elicitation": {}})
    assert text_of(peer.complete("tools/call", {"name": "ask_name"}, **kw)) == f"No name given ({action})."


def test_answers_sent_ahead_skip_the_round_trip(loop: str) -> None:
    peer = StdioPeer(loop)
    try:
        peer.speak(MODERN)
        ahead = {"name": {"action": "accept", "content": {"name": "Grace"}}, "unrelated": {"x": 1}}
        frame = peer.call(
            "tools/call",
            {"name": "ask_name", "inputResponses": ahead},
            meta={"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}},
        )
        assert text_of(frame) == "Hello, Grace!"
    finally:
        peer.kill()


def test_a_stale_or_altered_state_is_refused(loop: str) -> None:
    peer = StdioPeer(loop)
    try:
        peer.speak(MODERN)
        kw = {"meta": {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}}
        first = peer.result("tools/call", {"name": "ask_name"}, **kw)
        assert first["resultType"] == "input_required"
        altered = first["requestState"][:-3] + "AAA"
        reply = {"name": {"action": "accept", "content": {"name": "Eve"}}}
        refused = peer.error(
            "tools/call", {"name": "ask_name", "inputResponses": reply, "requestState": altered}, **kw
        )
        assert refused["code"] == -32602 and "integrity" in refused["message"]
        other = peer.error(
            "tools/call",
            {
                "name": "ask_model",
                "arguments": {"question": "?"},
                "inputResponses": reply,
                "requestState": first["requestState"],
            },
            **kw,
        )
        assert other["code"] == -32602 and "different request" in other["message"]
        # The genuine retry still works afterwards.
        done = peer.call(
            "tools/call",
            {"name": "ask_name", "inputResponses": reply, "requestState": first["requestState"]},
            **kw,
        )
        assert text_of(done) == "Hello, Eve!"
    finally:
        peer.kill()
