"""The task store and the session's task rules, with a fake clock and no I/O.

What a user relies on: a task id cannot be guessed or used by someone else,
a result cannot be edited through a copy, finished tasks leave after their
ttl and not before, answers to a task's questions may come in parts, and
each era gets its own shapes (2025-11-25 basic/utilities/tasks; the 2026-07-28
tasks extension, ``io.modelcontextprotocol/tasks``; spec/messages.md §6).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mcpx.core import (
    Answered,
    CancelRequest,
    HandleRequest,
    Send,
    ServerConfig,
    ServerSession,
    TaskStore,
    ToolHints,
)
from mcpx.core.rounds import Question

KEY = b"k" * 32
EXT = "io.modelcontextprotocol/tasks"
SUPPORT = {"slow": "optional", "must": "required", "plain": "forbidden"}


def store(**kw: Any) -> TaskStore:
    return TaskStore(key=KEY, instance="t", **kw)


def test_ids_are_unguessable_distinct_and_bound_to_their_owner() -> None:
    s = store()
    a = s.create(owner="alice", model="ext", now=0.0)
    b = s.create(owner="alice", model="ext", now=0.0)
    assert a.task_id != b.task_id and len(a.task_id) == 24  # 144 bits of HMAC output
    assert s.get(a.task_id, "alice", 1.0) is a
    assert s.get(a.task_id, "mallory", 1.0) is None  # someone else's task is not found
    assert s.get("guess", "alice", 1.0) is None
    other_key = TaskStore(key=b"x" * 32, instance="t").create(owner="alice", model="ext", now=0.0)
    assert other_key.task_id != a.task_id  # ids depend on the key, not on a counter alone


def test_results_go_in_and_come_out_as_copies() -> None:
    s = store()
    task = s.create(owner="o", model="ext", now=0.0)
    result = {"content": [{"type": "text", "text": "hi"}]}
    s.complete(task, result, 1.0)
    result["content"][0]["text"] = "edited by the caller"
    view = task.ext_view(0.0)
    assert view["result"]["content"][0]["text"] == "hi"
    view["result"]["content"][0]["text"] = "edited by a reader"
    assert task.ext_view(0.0)["result"]["content"][0]["text"] == "hi"


def test_finished_tasks_leave_after_their_ttl_and_running_ones_stay() -> None:
    s = store(ttl_ms=10_000)
    done = s.create(owner="o", model="core", now=0.0, ttl_ms=5_000)
    running = s.create(owner="o", model="core", now=0.0)
    s.complete(done, {}, 1.0)
    assert s.get(done.task_id, "o", 4.9) is done
    assert s.get(done.task_id, "o", 5.0) is None
    assert s.get(running.task_id, "o", 100.0) is running
    assert s.create(owner="o", model="core", now=0.0, ttl_ms=10**9).ttl_ms == 10_000  # capped


def test_terminal_states_stay_terminal() -> None:
    s = store()
    task = s.create(owner="o", model="ext", now=0.0)
    s.cancel(task, 1.0)
    s.complete(task, {"content": []}, 2.0)
    s.fail(task, {"code": -1, "message": "late"}, 2.0)
    assert task.status == "cancelled" and task.result is None and task.error is None


def test_answers_may_come_in_parts_and_unknown_keys_are_ignored() -> None:
    seen: list[str] = []

    class Watcher:
        def task_changed(self, task: Any, what: str) -> bool:
            seen.append(what)
            return True

    s = store()
    watcher = Watcher()
    s.watch(watcher)
    task = s.create(owner="o", model="ext", now=0.0)
    questions = [Question(key=k, method="elicitation/create", params={"message": k}) for k in ("a", "b")]
    s.ask(task, 7, questions, 1.0)
    assert sorted(task.ext_view(0.0)["inputRequests"]) == ["a", "b"]
    s.answer(task, {"a": {"action": "accept"}, "zz": {"action": "accept"}}, 2.0)
    assert task.status == "input_required" and list(task.ext_view(0.0)["inputRequests"]) == ["b"]
    s.answer(task, {"b": {"action": "decline"}}, 3.0)
    assert task.status == "working"
    assert seen == ["created", "input_required", "answered"]
    assert s.take_touched() == [watcher]


def test_iso_times_follow_the_wall_offset() -> None:
    s = store(wall_offset=1_700_000_000.0)
    task = s.create(owner="o", model="core", now=0.25)
    assert task.core_view(s.wall_offset)["createdAt"] == "2023-11-14T22:13:20.250Z"


# -- the session ----------------------------------------------------------------------


def session(**kw: Any) -> ServerSession:
    config = ServerConfig(
        server_info={"name": "t", "version": "1"},
        capabilities={"tools": {}, "tasks": {"list": {}, "cancel": {}}, "extensions": {EXT: {}}},
        tools=ToolHints(task_support=dict(SUPPORT)),
    )
    return ServerSession(config, tasks=store(), **kw)


def modern(request_id: int, method: str, params: dict[str, Any], *, ext: bool = True) -> dict[str, Any]:
    caps: dict[str, Any] = {"elicitation": {}, **({"extensions": {EXT: {}}} if ext else {})}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": meta}}


def sent(actions: list[Any]) -> list[dict[str, Any]]:
    return [orjson.loads(a.payload) for a in actions if isinstance(a, Send)]


def handled(actions: list[Any]) -> int:
    (request,) = [a for a in actions if isinstance(a, HandleRequest)]
    return request.token


def test_a_modern_call_becomes_a_task_after_task_after_and_only_with_the_extension() -> None:
    s = session()
    s.receive_json(modern(1, "tools/call", {"name": "slow"}), now=0.0)
    token = handled(s.next_actions())
    assert s.get_timer() == pytest.approx(0.25)
    s.handle_timer(0.25)
    (frame,) = sent(s.next_actions())
    created = frame["result"]
    assert created["resultType"] == "task" and created["status"] == "working"
    s.advance(1.0)
    s.respond(token, {"content": [{"type": "text", "text": "done"}]})
    assert sent(s.next_actions()) == []  # the request was answered already
    s.receive_json(modern(2, "tasks/get", {"taskId": created["taskId"]}), now=1.0)
    (got,) = sent(s.next_actions())
    assert got["result"]["status"] == "completed" and got["result"]["result"]["content"][0]["text"] == "done"
    # Without the extension the same call simply answers, however long it takes.
    s.receive_json(modern(3, "tools/call", {"name": "slow"}, ext=False), now=2.0)
    token = handled(s.next_actions())
    assert s.get_timer() is None
    s.respond(token, {"content": []})
    assert sent(s.next_actions())[0]["result"]["resultType"] == "complete"


def test_required_tools_need_the_extension_and_always_answer_with_a_task() -> None:
    s = session()
    s.receive_json(modern(1, "tools/call", {"name": "must"}, ext=False), now=0.0)
    (refused,) = sent(s.next_actions())
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"] == {"requiredCapabilities": {"extensions": {EXT: {}}}}
    s.receive_json(modern(2, "tools/call", {"name": "must"}), now=0.0)
    token = handled(s.next_actions())
    s.respond(token, {"content": []})  # before task_after: still a task
    (frame,) = sent(s.next_actions())
    assert frame["result"]["resultType"] == "task" and frame["result"]["status"] == "completed"


def test_cancelling_a_task_stops_its_handler_and_a_late_answer_changes_nothing() -> None:
    s = session()
    s.receive_json(modern(1, "tools/call", {"name": "slow"}), now=0.0)
    token = handled(s.next_actions())
    assert s.promote(token)
    task_id = sent(s.next_actions())[0]["result"]["taskId"]
    s.receive_json(modern(2, "tasks/cancel", {"taskId": task_id}), now=1.0)
    actions = s.next_actions()
    assert CancelRequest(token=token, reason="the task was cancelled") in actions
    assert sent(actions)[0]["result"]["resultType"] == "complete"
    s.discard(token)
    s.receive_json(modern(3, "tasks/get", {"taskId": task_id}), now=2.0)
    assert sent(s.next_actions())[0]["result"]["status"] == "cancelled"


def test_a_task_question_waits_on_tasks_update() -> None:
    s = session()
    s.receive_json(modern(1, "tools/call", {"name": "slow"}), now=0.0)
    token = handled(s.next_actions())
    s.promote(token)
    task_id = sent(s.next_actions())[0]["result"]["taskId"]
    ask_id = s.ask(token, [Question(key="q", method="elicitation/create", params={"message": "?"})])
    s.receive_json(
        modern(2, "tools/call", {"name": "slow"}, ext=True) | {"id": 9}, now=0.1
    )  # another call meanwhile: unaffected
    s.next_actions()
    s.receive_json(
        modern(3, "tasks/update", {"taskId": task_id, "inputResponses": {"q": {"action": "accept"}}}), now=1.0
    )
    actions = s.next_actions()
    assert Answered(token=token, ask_id=ask_id, answers={"q": {"result": {"action": "accept"}}}) in actions


def test_legacy_task_param_on_older_revisions_means_nothing_and_forbidden_tools_refuse_it() -> None:
    s = session()
    s.receive_json(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        },
        now=0.0,
    )
    s.receive_json({"jsonrpc": "2.0", "method": "notifications/initialized"}, now=0.0)
    s.next_actions()
    s.receive_json(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "plain", "task": {}}}, now=0.0
    )
    (frame,) = sent(s.next_actions())
    assert frame["error"]["code"] == -32601
    s.receive_json({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "must"}}, now=0.0)
    (frame,) = sent(s.next_actions())
    assert frame["error"]["code"] == -32601 and "params.task" in frame["error"]["message"]
