"""Tasks, both models, over stdio and HTTP, on every driver.

* 2025-11-25 core tasks: the client asks with ``params.task``, gets
  ``{task}`` at once, polls ``tasks/get``, blocks on ``tasks/result``, lists
  and cancels; a question the task asks is a server request tagged with the
  task, and the task is ``input_required`` while it is out.
* The 2026-07-28 extension ``io.modelcontextprotocol/tasks``: the server
  decides; a client that declared the extension gets ``resultType: "task"``
  once the call has run a moment, polls ``tasks/get`` (the result inline),
  answers questions with ``tasks/update`` and cancels with ``tasks/cancel``;
  a client that did not declare it gets its answer synchronously and
  ``-32021`` for ``tasks/*``.

The demo's ``report`` (slow) and ``approve`` (asks, as a task) are ordinary
tools registered with ``task_support="optional"``; every frame goes through
the strict schema sweep (the extension's frames against ``ext-tasks``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from tests.conformance.http_peer import HttpPeer
from tests.conformance.peer import LOOPS, MODERN, StdioPeer

pytestmark = pytest.mark.timeout(60)

Peer = StdioPeer | HttpPeer
EXT = "io.modelcontextprotocol/tasks"
RELATED = "io.modelcontextprotocol/related-task"
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
WITH_EXT = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {EXT: {}}}}
WITHOUT_EXT = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=("stdio", "http"))
def peer(loop: str, request: pytest.FixtureRequest) -> Iterator[Peer]:
    p: Peer = StdioPeer(loop) if request.param == "stdio" else HttpPeer(loop)
    yield p
    p.kill()


def approve_answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    assert method == "elicitation/create", method
    return {"action": "accept", "content": {"yes": True}}


def wait_for_status(peer: Peer, task_id: str, until: set[str], **kw: Any) -> dict[str, Any]:
    """``tasks/get`` once the task's status is one of ``until``.

    The wait is on a listen for the task (``taskIds``), which sends its status
    at once and again on every change; what arrives while waiting is kept in
    ``peer.notifications``.
    """
    listen = peer.request("subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, **kw)
    while True:
        frame = peer.recv(timeout=20)
        assert "method" in frame and "id" not in frame, f"only the listen is outstanding, yet: {frame}"
        peer.notifications.append(frame)
        params = frame.get("params") or {}
        if (
            frame["method"] == "notifications/tasks"
            and params["_meta"][SUBSCRIPTION] == listen
            and params["status"] in until
        ):
            return peer.result("tasks/get", {"taskId": task_id}, **kw)


# -- 2025-11-25: the client asks for a task ------------------------------------------


def test_core_task_runs_and_its_result_waits_on_tasks_result(peer: Peer) -> None:
    peer.initialize("2025-11-25", {"elicitation": {}})
    tools = {t["name"]: t for t in peer.result("tools/list")["tools"]}
    assert tools["report"]["execution"] == {"taskSupport": "optional"}
    assert "execution" not in tools["echo"]
    created = peer.result(
        "tools/call", {"name": "report", "arguments": {"seconds": 0.3}, "task": {"ttl": 60_000}}
    )
    task = created["task"]
    assert task["status"] == "working" and task["ttl"] == 60_000
    assert peer.result("tasks/get", {"taskId": task["taskId"]})["taskId"] == task["taskId"]
    assert task["taskId"] in [t["taskId"] for t in peer.result("tasks/list")["tasks"]]
    result = peer.result("tasks/result", {"taskId": task["taskId"]})  # blocks until it is done
    assert result["content"][0]["text"] == "usage report, ready after 0.3s"
    assert result["_meta"][RELATED] == {"taskId": task["taskId"]}
    assert peer.result("tasks/get", {"taskId": task["taskId"]})["status"] == "completed"


def test_core_task_questions_are_tagged_with_the_task(peer: Peer) -> None:
    peer.answer = approve_answer
    peer.initialize("2025-11-25", {"elicitation": {}})
    task = peer.result("tools/call", {"name": "approve", "arguments": {"action": "deploy"}, "task": {}})[
        "task"
    ]
    result = peer.result("tasks/result", {"taskId": task["taskId"]})  # the question is answered meanwhile
    assert result["content"][0]["text"] == "deploy: approved"
    assert [q["method"] for q in peer.questions] == ["elicitation/create"]
    assert peer.questions[0]["params"]["_meta"][RELATED] == {"taskId": task["taskId"]}


def test_core_task_rules(peer: Peer) -> None:
    peer.initialize("2025-11-25")
    error = peer.error("tools/call", {"name": "echo", "arguments": {"text": "x"}, "task": {}})
    assert error["code"] == -32601 and "does not run as a task" in error["message"]
    task = peer.result("tools/call", {"name": "report", "arguments": {"seconds": 30}, "task": {}})["task"]
    cancelled = peer.result("tasks/cancel", {"taskId": task["taskId"]})
    assert cancelled["status"] == "cancelled"
    again = peer.error("tasks/cancel", {"taskId": task["taskId"]})
    assert again["code"] == -32602 and "already cancelled" in again["message"]
    assert peer.error("tasks/result", {"taskId": task["taskId"]})["code"] == -32602
    assert peer.error("tasks/get", {"taskId": "no-such-task"})["code"] == -32602
    # Without params.task the same tool simply answers.
    plain = peer.result("tools/call", {"name": "report", "arguments": {"seconds": 0}})
    assert plain["content"][0]["text"] == "usage report, ready after 0s"


def test_tasks_are_declared_only_where_they_exist(peer: Peer) -> None:
    caps = peer.initialize("2025-11-25")["capabilities"]
    assert caps["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    peer.speak(MODERN)
    discovered = peer.result("server/discover")["capabilities"]
    assert "tasks" not in discovered
    assert discovered["extensions"] == {EXT: {}}


# -- 2026-07-28: the server decides --------------------------------------------------


def test_extension_task_inlines_its_result(peer: Peer) -> None:
    peer.speak(MODERN)
    created = peer.result("tools/call", {"name": "report", "arguments": {"seconds": 0.6}}, meta=WITH_EXT)
    assert created["resultType"] == "task" and created["status"] == "working"
    assert isinstance(created["ttlMs"], int) and created["ttlMs"] > 0
    for field in ("result", "requestState", "inputRequests"):
        assert field not in created
    done = wait_for_status(peer, created["taskId"], {"completed", "failed", "cancelled"}, meta=WITH_EXT)
    assert done["status"] == "completed" and done["resultType"] == "complete"
    assert done["result"]["content"][0]["text"] == "usage report, ready after 0.6s"
    assert RELATED not in (done["result"].get("_meta") or {})


def test_extension_quick_calls_and_undeclared_clients_stay_synchronous(peer: Peer) -> None:
    peer.speak(MODERN)
    quick = peer.result("tools/call", {"name": "report", "arguments": {"seconds": 0}}, meta=WITH_EXT)
    assert quick["resultType"] == "complete" and "taskId" not in quick
    slow = peer.result("tools/call", {"name": "report", "arguments": {"seconds": 0.5}}, meta=WITHOUT_EXT)
    assert slow["resultType"] == "complete" and slow["content"][0]["text"].endswith("0.5s")
    error = peer.error("tasks/get", {"taskId": "x"}, meta=WITHOUT_EXT)
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"extensions": {EXT: {}}}
    # A legacy `task` param means nothing to 2026-07-28: echo is not promoted.
    echo = peer.result("tools/call", {"name": "echo", "arguments": {"text": "hi"}, "task": {}}, meta=WITH_EXT)
    assert echo["resultType"] == "complete"
    for removed in ("tasks/result", "tasks/list"):
        assert peer.error(removed, {"taskId": "x"}, meta=WITH_EXT)["code"] == -32601


def test_extension_task_asks_through_tasks_get_and_tasks_update(peer: Peer) -> None:
    peer.speak(MODERN)
    created = peer.result("tools/call", {"name": "approve", "arguments": {"action": "ship"}}, meta=WITH_EXT)
    assert created["resultType"] == "task"
    waiting = wait_for_status(peer, created["taskId"], {"input_required"}, meta=WITH_EXT)
    assert waiting["status"] == "input_required"
    (key, request), *_ = waiting["inputRequests"].items()
    assert request["method"] == "elicitation/create" and "Approve ship?" in request["params"]["message"]
    ack = peer.result(
        "tasks/update",
        {"taskId": created["taskId"], "inputResponses": {"unknown": {"action": "decline"}}},
        meta=WITH_EXT,
    )
    assert ack == {"resultType": "complete", **({"_meta": ack["_meta"]} if "_meta" in ack else {})}
    assert (
        peer.result("tasks/get", {"taskId": created["taskId"]}, meta=WITH_EXT)["status"] == "input_required"
    )
    peer.result(
        "tasks/update",
        {"taskId": created["taskId"], "inputResponses": {key: approve_answer("elicitation/create", {})}},
        meta=WITH_EXT,
    )
    done = wait_for_status(peer, created["taskId"], {"completed", "failed", "cancelled"}, meta=WITH_EXT)
    assert done["result"]["content"][0]["text"] == "ship: approved"
    assert peer.questions == []  # nothing was sent to the client as a request


def test_extension_cancel_is_an_ack_and_the_task_ends_cancelled(peer: Peer) -> None:
    peer.speak(MODERN)
    created = peer.result("tools/call", {"name": "report", "arguments": {"seconds": 30}}, meta=WITH_EXT)
    ack = peer.result("tasks/cancel", {"taskId": created["taskId"]}, meta=WITH_EXT)
    assert ack["resultType"] == "complete" and "status" not in ack
    assert peer.result("tasks/get", {"taskId": created["taskId"]}, meta=WITH_EXT)["status"] == "cancelled"
    # Cancelling a finished task is acknowledged all the same (ext-tasks).
    assert (
        peer.result("tasks/cancel", {"taskId": created["taskId"]}, meta=WITH_EXT)["resultType"] == "complete"
    )


def test_listen_reports_a_task_then_its_changes() -> None:
    peer = StdioPeer("asyncio")
    try:
        peer.speak(MODERN)
        created = peer.result("tools/call", {"name": "report", "arguments": {"seconds": 0.8}}, meta=WITH_EXT)
        listen = peer.request(
            "subscriptions/listen",
            {"notifications": {"taskIds": [created["taskId"], "someone-elses"]}},
            meta=WITH_EXT,
        )
        ack = peer.recv()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"]["taskIds"] == [created["taskId"]]  # only what will come
        statuses = []
        while not statuses or statuses[-1] != "completed":
            frame = peer.recv()
            assert frame["method"] == "notifications/tasks", frame
            assert frame["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == listen
            statuses.append(frame["params"]["status"])
        assert statuses == ["working", "completed"]
        assert frame["params"]["result"]["content"][0]["text"] == "usage report, ready after 0.8s"
    finally:
        peer.kill()


@pytest.mark.parametrize("loop", ["asyncio"])
def test_another_requester_cannot_see_a_task(loop: str) -> None:
    peer = HttpPeer(loop)
    try:
        peer.speak(MODERN)
        created = peer.result("tools/call", {"name": "report", "arguments": {"seconds": 30}}, meta=WITH_EXT)
        task_id = created["taskId"]
        assert len(task_id) >= 22  # 128 bits and more: unguessable
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tasks/get",
            "params": {
                "taskId": task_id,
                "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, **WITH_EXT},
            },
        }
        headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "mcp-protocol-version": MODERN,
            "mcp-method": "tasks/get",
            "mcp-name": task_id,
            "authorization": "Bearer someone-else",
        }
        status, _, raw = peer.raw("POST", orjson.dumps(body), headers)
        error = orjson.loads(raw)["error"]
        assert (status, error["code"]) == (400, -32602) and "visible to this caller" in error["message"]
        wrong_name = dict(headers, **{"mcp-name": "another-task"})
        del wrong_name["authorization"]
        status, _, raw = peer.raw("POST", orjson.dumps(body), wrong_name)
        assert (status, orjson.loads(raw)["error"]["code"]) == (400, -32020)
        peer.result("tasks/cancel", {"taskId": task_id}, meta=WITH_EXT)
    finally:
        peer.kill()
