"""What an upstream call needs beyond one request: questions put to the host, upstream tasks followed.

Shared by the awaited path (``Upstreams.request``) and the routed one
(``Routes``): the host is asked an upstream's questions as the upstream put
them (spec/gateway.md §4; MCP 2026-07-28 basic/patterns/mrtr), a 2026-07-28
upstream's task is followed to its end (the tasks extension: ``tasks/get``,
``tasks/update``, ``tasks/cancel``), and a 2025-11-25 upstream's tool that
runs only as a task is run as one (MCP 2025-11-25 basic/utilities/tasks).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from ..client import Client, McpCallError, RoundResolver
from ..core import INTERNAL_ERROR, INVALID_PARAMS, Progress, Revision
from ..core.rounds import Question
from ..core.router import OWN_ROOTS  # mcpx's answer to roots/list for a host that declared no roots
from ..server import Context, QuestionFailed, QuestionRefused

__all__ = [
    "answered_by_mcpx",
    "ask_host",
    "ask_round",
    "follow_task",
    "may_need_a_core_task",
    "needs_core_task",
    "run_core_task",
    "task_only_now",
    "unattributed",
]

_POLL_MIN, _POLL_MAX = 0.05, 2.0  # seconds between tasks/get polls, whatever pollIntervalMs says


def _request_of(key: str, item: Any) -> tuple[str, Mapping[str, Any]]:
    """The method and params of one ``inputRequests`` entry; ``McpCallError`` for one that names no method."""
    method = item.get("method") if isinstance(item, Mapping) else None
    params = item.get("params") if isinstance(item, Mapping) else None
    if not isinstance(method, str):
        raise McpCallError(
            {"code": INVALID_PARAMS, "message": f"the server's question {key!r} names no method"}
        )
    return method, params if isinstance(params, Mapping) else {}


def unattributed(what: str) -> McpCallError:
    return McpCallError(
        {"code": INTERNAL_ERROR, "message": f"mcpx cannot tell which of its callers {what} is for; not asked"}
    )


def answered_by_mcpx(host: Context, method: str) -> Mapping[str, Any] | None:
    """What mcpx answers without asking: its own roots, for a host that declared none (spec/gateway.md §4)."""
    if method == "roots/list" and not isinstance(host.client_capabilities.get("roots"), Mapping):
        return dict(OWN_ROOTS)
    return None


async def ask_host(host: Context, questions: list[Question]) -> dict[str, Any]:
    """``questions`` put to ``host`` at once: its answers by key, or ``McpCallError`` saying why not."""
    try:
        return await host.ask(*questions)
    except QuestionRefused as exc:  # -32021 with its requiredCapabilities: the host's own refusal
        raise McpCallError({"code": exc.code, "message": exc.message, "data": exc.data}) from None
    except QuestionFailed as exc:
        raise McpCallError(
            {"code": INTERNAL_ERROR, "message": str(exc), "data": {"inputKey": exc.key, "error": exc.error}}
        ) from None


async def ask_round(host: Context, requests: Mapping[str, Any]) -> dict[str, Any]:
    """``host``'s answers to a 2026-07-28 upstream's ``inputRequests``, under the upstream's keys.

    The round is the upstream's answer to one call, so the host sees it as
    asked: every question at once, under the upstream's keys (spec/gateway.md
    §4).  ``McpCallError`` when it cannot be answered: the host's
    refusal is relayed as that refusal (-32021 with its
    ``requiredCapabilities``).
    """
    answers: dict[str, Any] = {}
    questions: list[Question] = []
    for key, item in requests.items():
        method, params = _request_of(key, item)
        own = answered_by_mcpx(host, method)
        if own is not None:
            answers[key] = own
            continue
        try:
            questions.append(host.question(method, params, key=key))
        except ValueError as exc:
            raise McpCallError(
                {"code": INVALID_PARAMS, "message": f"the server's question {key!r} cannot be asked: {exc}"}
            ) from None
    if questions:
        answers.update(await ask_host(host, questions))
    return answers


async def follow_task(
    client: Client,
    created: Mapping[str, Any],
    host: Context | None,
    capabilities: Mapping[str, Any] | None,
    ask: RoundResolver | None,
) -> Mapping[str, Any]:
    """A 2026-07-28 upstream answered with a task (tasks extension): its final result, or its error.

    The upstream made the call a task, so mcpx makes the host's call one too
    (``promote_to_task``; nothing happens for a host that cannot take one)
    and polls ``tasks/get`` at the interval the upstream asked for.  A task
    waiting in ``input_required`` has its new questions put to the host
    whole, under the upstream's keys, and the answers go back with
    ``tasks/update``.  ``completed`` is the call's result (an ``isError``
    result included), ``failed`` its JSON-RPC error, ``cancelled`` an error
    saying so.  When the caller gives up, the upstream task is cancelled.
    """
    task_id = created.get("taskId")
    if not isinstance(task_id, str):
        raise McpCallError(
            {"code": INTERNAL_ERROR, "message": "the server answered with a task that has no taskId"}
        )
    if host is not None:
        host.promote_to_task()
    fitted: dict[str, Any] = {} if capabilities is None else {"capabilities": capabilities}
    asked: set[str] = set()
    state: Mapping[str, Any] = created
    try:
        if created.get("status") != "working":  # a CreateTaskResult carries no result, error or questions
            state = await client.request("tasks/get", {"taskId": task_id}, **fitted)
        while True:
            status = state.get("status")
            if status == "completed" and isinstance(state.get("result"), Mapping):
                result: Mapping[str, Any] = state["result"]
                return result
            if status == "failed":
                error = state.get("error")
                raise McpCallError(
                    error if isinstance(error, Mapping) else {"code": INTERNAL_ERROR, "message": "failed"}
                )
            if status == "cancelled":
                raise McpCallError(
                    {"code": INTERNAL_ERROR, "message": f"the server cancelled task {task_id}"}
                )
            requests = state.get("inputRequests")
            if status == "input_required" and isinstance(requests, Mapping):
                new = {key: item for key, item in requests.items() if key not in asked}
                if new:
                    asked.update(new)
                    if ask is None:
                        raise unattributed(f"task {task_id}'s questions")
                    answers = await ask(new)
                    await client.request(
                        "tasks/update", {"taskId": task_id, "inputResponses": answers}, **fitted
                    )
                    state = await client.request("tasks/get", {"taskId": task_id}, **fitted)
                    continue
            interval = state.get("pollIntervalMs", created.get("pollIntervalMs"))
            wait = interval / 1000 if isinstance(interval, int | float) else _POLL_MIN
            await anyio.sleep(min(max(wait, _POLL_MIN), _POLL_MAX))
            state = await client.request("tasks/get", {"taskId": task_id}, **fitted)
    except BaseException:
        if state.get("status") not in ("completed", "failed", "cancelled"):
            with anyio.CancelScope(shield=True), anyio.move_on_after(5), contextlib.suppress(McpCallError):
                await client.request("tasks/cancel", {"taskId": task_id}, **fitted)
        raise


def may_need_a_core_task(client: Client, method: str) -> bool:
    """Whether ``method`` to ``client``'s server could be a tool that runs only as a task (2025-11-25)."""
    return method == "tools/call" and not client.session.modern and client.revision == Revision.V2025_11_25


def _task_only(tools: list[Any], params: Mapping[str, Any] | None) -> bool:
    name = (params or {}).get("name")
    return isinstance(name, str) and name in _task_only_names(tools)


# The names of a tools list's task-only tools, by the list (a client keeps one list object until
# it reads the tools again): worked out once per list, not on every call.  A few lists are kept,
# each with the list itself, so an id is never taken for another list's.
_TASK_ONLY_KEPT = 16
_task_only_of: dict[int, tuple[list[Any], frozenset[str]]] = {}


def _task_only_names(tools: list[Any]) -> frozenset[str]:
    kept = _task_only_of.get(id(tools))
    if kept is not None and kept[0] is tools:
        return kept[1]
    names: set[str] = set()
    seen: set[str] = set()
    for tool in tools:
        name = tool.get("name") if isinstance(tool, Mapping) else None
        if isinstance(name, str) and name not in seen:  # the first of two same-named tools decides
            seen.add(name)
            execution = tool.get("execution")
            if isinstance(execution, Mapping) and execution.get("taskSupport") == "required":
                names.add(name)
    if len(_task_only_of) >= _TASK_ONLY_KEPT:
        del _task_only_of[next(iter(_task_only_of))]  # the oldest goes
    found = _task_only_of[id(tools)] = (tools, frozenset(names))
    return found[1]


async def needs_core_task(client: Client, method: str, params: Mapping[str, Any] | None) -> bool:
    """A 2025-11-25 upstream's tool that runs only as a task (``execution.taskSupport: "required"``)."""
    if not may_need_a_core_task(client, method):
        return False
    return _task_only(await client.cached_list("tools/list"), params)


def task_only_now(client: Client, params: Mapping[str, Any] | None) -> bool | None:
    """For a ``tools/call`` to a client ``may_need_a_core_task`` holds for: whether its tool runs only as a task.

    From the tools the client keeps, without asking; ``None``: it must ask.
    """
    kept = client.kept_now("tools/list")
    return None if kept is None else _task_only(kept, params)


async def run_core_task(
    client: Client, params: Mapping[str, Any], on_progress: Callable[[Progress], None] | None
) -> Mapping[str, Any]:
    """A 2025-11-25 core task, run to its end: ``params.task`` on the call, then ``tasks/result``.

    mcpx asks for the task only because the upstream will not run the tool
    otherwise; ``tasks/result`` blocks until the task ends and answers what
    the call would have (its result, or its JSON-RPC error).  Questions the
    task asks meanwhile arrive as server requests, attributed like any
    legacy upstream's.  When the caller gives up, the task is cancelled.
    """
    created = await client.request("tools/call", {**params, "task": {}}, on_progress=on_progress)
    task = created.get("task")
    task_id = task.get("taskId") if isinstance(task, Mapping) else None
    if not isinstance(task_id, str):
        raise McpCallError(
            {"code": INTERNAL_ERROR, "message": "the server answered a task-augmented call without a task"}
        )
    try:
        return await client.request("tasks/result", {"taskId": task_id})
    except anyio.get_cancelled_exc_class():  # the caller gave up, or the pool's timeout: the task too
        with anyio.CancelScope(shield=True), anyio.move_on_after(5), contextlib.suppress(McpCallError):
            await client.request("tasks/cancel", {"taskId": task_id})
        raise
