"""Calls that run as tasks, and the ``tasks/*`` methods (2025-11-25 basic/utilities/tasks; the 2026-07-28 tasks extension).

A 2025-11-25 client asks for a task with ``params.task``; a 2026-07-28 call
to a tool whose ``taskSupport`` allows it becomes a task after
``task_after`` seconds, when the client declared the extension.  The answer
then is the task, and the result is fetched by ``tasks/result`` (2025-11-25)
or ``tasks/get`` (2026-07-28).  A task is visible only to the identity that
created it (spec/messages.md §6).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from .actions import Answered, CancelRequest
from .downgrade import downgrade
from .errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    RemoteProtocolError,
)
from .jsonrpc import ErrorResponse, Response
from .revisions import META_RELATED_TASK, META_SERVER_INFO, META_SUBSCRIPTION_ID, TASKS_EXTENSION, Revision
from .rounds import Question
from .server_base import _CLOSED, _READY, _InFlight, _Judgement
from .server_questions import _answers_shape, _Questions
from .tasks import Task

_TASKS_REQUIRED: Final[Mapping[str, Any]] = {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
"""The ``data`` of ``-32021`` for a client that did not declare the tasks extension."""


def _declares_tasks_extension(capabilities: Mapping[str, Any]) -> bool:
    declared = capabilities.get("extensions")
    return isinstance(declared, dict) and TASKS_EXTENSION in declared


class _TaskCalls(_Questions):
    """The tasks layer: the task gate, promotion, results and status notifications, ``tasks/*``."""

    def promote(self, token: int) -> bool:
        """Make call ``token`` a task now, if its client can take one; returns whether it is one.

        A 2026-07-28 call to a task-supporting tool whose client declared the
        tasks extension otherwise becomes a task after ``task_after``; a tool
        that will ask questions of a task calls this first, so the questions
        go to ``tasks/get`` instead of inline.
        """
        rec = self._inflight.get(token)
        if rec is None:
            return False
        if rec.task is None and self._promotions.pop(token, None) is not None:
            self._start_task(rec)
        return rec.task is not None

    def _task_gate(self, rec: _InFlight, params: Mapping[str, Any]) -> bool:
        """Decide whether a ``tools/call`` runs as a task; ``False`` when it was refused."""
        hints = self.config.tools
        if self._tasks is None or hints is None:
            return True
        name = params.get("name")
        support = hints.support(name) if isinstance(name, str) else None
        if support is None:
            return True  # an unknown tool: the application says so
        if rec.modern:
            # The extension decides on the server's side; a `task` param is ignored.
            declared = _declares_tasks_extension(rec.capabilities)
            if support == "required" and not declared:
                self._error_in(
                    rec.batch,
                    rec.id,
                    MISSING_REQUIRED_CLIENT_CAPABILITY,
                    f"tool {name!r} runs only as a task; declare the {TASKS_EXTENSION} extension in "
                    "clientCapabilities.extensions on this request",
                    _TASKS_REQUIRED,
                    rec.revision,
                    rec.stream,
                )
                return False
            if declared and support in ("optional", "required"):
                rec.task_support = support
            return True
        hint = params.get("task")
        if hint is None and support != "required":
            return True  # the usual call: an ordinary one, at any legacy revision
        if rec.revision < Revision.V2025_11_25:
            return True  # no tasks before 2025-11-25: `task` means nothing there
        problem = None
        if hint is not None and support not in ("optional", "required"):
            problem = f"tool {name!r} does not run as a task (its execution.taskSupport is {support!r})"
        elif hint is None and support == "required":
            problem = f"tool {name!r} runs only as a task; call it with params.task"
        elif hint is not None and not isinstance(hint, dict):
            self._error_in(
                rec.batch,
                rec.id,
                INVALID_PARAMS,
                "Invalid params: task must be an object",
                None,
                rec.revision,
                rec.stream,
            )
            return False
        if problem is not None:
            self._error_in(rec.batch, rec.id, METHOD_NOT_FOUND, problem, None, rec.revision, rec.stream)
            return False
        if isinstance(hint, dict):
            ttl = hint.get("ttl")
            rec.core_task_ttl = ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0 else 0
        return True

    def _start_task(self, rec: _InFlight, *, reply: bool = True) -> None:
        """Answer the call's request with a new task; the call goes on as that task."""
        assert self._tasks is not None
        model: Literal["core", "ext"] = "ext" if rec.modern else "core"
        try:
            task = self._tasks.create(
                owner=self._identity, model=model, now=self._now, ttl_ms=rec.core_task_ttl or None
            )
        except OverflowError as exc:
            if model == "ext" and rec.task_support == "optional":
                return  # the call simply stays synchronous
            self._cancel_with_error(rec, INTERNAL_ERROR, str(exc))
            return
        rec.task = task
        self._runners[task.task_id] = rec.token
        self._trace("task-created", request_id=rec.id, task=task.task_id, model=model)
        if not reply:
            return
        if model == "core":
            self._core_tasks.add(task.task_id)
            result: dict[str, Any] = {"task": task.core_view(self._tasks.wall_offset)}
            self._reply(rec, Response(id=rec.id, result=result).to_obj())
        else:
            self._reply(rec, Response(id=rec.id, result=self._create_task_result(task)).to_obj())
        # The request is answered: the call now belongs to the task.  Its own
        # stream is gone, and the request's id can be reused.
        if self._by_peer_id.get(rec.id) == rec.token:
            del self._by_peer_id[rec.id]
        rec.stream = self._take_token()
        rec.batch = None

    def _create_task_result(self, task: Task) -> dict[str, Any]:
        assert self._tasks is not None
        view = task.ext_view(self._tasks.wall_offset)
        for inline in ("result", "error", "inputRequests"):
            view.pop(inline, None)  # those belong to tasks/get
        view["resultType"] = "task"
        view["_meta"] = {META_SERVER_INFO: self._server_info[Revision.V2026_07_28]}
        return view

    def _cancel_with_error(self, rec: _InFlight, code: int, message: str) -> None:
        token = rec.token
        self._promotions.pop(token, None)
        self._forget(rec)
        if rec.dispatched:
            self._cancelled_tokens.add(token)
            self._actions.append(CancelRequest(token=token, reason=message))
        self._reply(rec, ErrorResponse(id=rec.id, code=code, message=message).to_obj(), code)

    def _settles_task(
        self,
        token: int,
        *,
        result: Mapping[str, Any] | None = None,
        error: Mapping[str, Any] | None = None,
    ) -> bool:
        """The application answered a call that is (or must become) a task: settle it."""
        rec = self._inflight.get(token)
        if rec is None:
            return False
        self._promotions.pop(token, None)
        quick = rec.task is None
        if quick:
            if rec.task_support != "required":
                return False  # answered before it became a task: an ordinary reply
            self._start_task(rec, reply=False)  # a required task answers with a task even when quick
        task = rec.task
        if task is None:
            return True  # the store was full: the request got an error
        assert self._tasks is not None
        self._forget(rec)
        self._runners.pop(task.task_id, None)
        if error is not None:
            self._tasks.fail(task, error, self._now)
        else:
            assert result is not None
            self._tasks.complete(task, result, self._now)
        if quick:
            self._reply(rec, Response(id=rec.id, result=self._create_task_result(task)).to_obj())
        return True

    def _ask_in_task(self, rec: _InFlight, ask_id: int, questions: list[Question]) -> None:
        """2026-07-28: the task waits in ``input_required``; ``tasks/update`` brings the answers."""
        assert rec.task is not None and self._tasks is not None
        answered = {q.key: {"result": rec.held.pop(q.key)} for q in questions if q.key in rec.held}
        if len(answered) == len(questions):
            self._actions.append(Answered(token=rec.token, ask_id=ask_id, answers=answered))
            return
        self._tasks.ask(rec.task, ask_id, questions, self._now, answered)

    def task_changed(self, task: Task, what: str) -> bool:
        """The task store's news (see ``TaskWatcher``): runners, waiters and listens follow it."""
        queued = len(self._actions)
        token = self._runners.get(task.task_id)
        rec = self._inflight.get(token) if token is not None else None
        if rec is not None:
            if what == "cancelled":
                del self._runners[task.task_id]
                self._trace("task-cancelled", task=task.task_id)
                self._drop_asks(rec.token, withdraw=True)
                self._forget(rec)
                self._cancelled_tokens.add(rec.token)
                self._actions.append(CancelRequest(token=rec.token, reason="the task was cancelled"))
            elif what == "answered" and task.ask_id is not None:
                self._actions.append(
                    Answered(token=rec.token, ask_id=task.ask_id, answers=dict(task.answers))
                )
        if task.terminal:
            for waiter in self._result_waiters.pop(task.task_id, []):
                self._send_task_result(waiter, task)
        if task.task_id in self._core_tasks and what != "created":
            rev = self._negotiated
            if self._state is _READY and rev is not None and rev >= Revision.V2025_11_25:
                assert self._tasks is not None
                self._notify(
                    "notifications/tasks/status", task.core_view(self._tasks.wall_offset), None, rev, None
                )
            if task.terminal:
                self._core_tasks.discard(task.task_id)
        if what != "created":
            for token in list(self._task_listens):
                listen = self._inflight[token]
                assert listen.listen is not None
                if task.task_id in listen.listen.task_ids:
                    self._notify_task(listen, task)
        return len(self._actions) > queued

    def _notify_task(self, listen: _InFlight, task: Task) -> None:
        assert self._tasks is not None
        params = task.ext_view(self._tasks.wall_offset)
        params["_meta"] = {META_SUBSCRIPTION_ID: listen.id}
        self._notify("notifications/tasks", params, None, listen.shape_revision, listen.stream)

    def _sync_watch(self) -> None:
        """Follow the task store only while something here depends on it."""
        if self._tasks is None:
            return
        wanted = self._state is not _CLOSED and bool(
            self._runners or self._result_waiters or self._core_tasks or self._task_listens
        )
        if wanted and not self._watching:
            self._tasks.watch(self)
        elif not wanted and self._watching:
            self._tasks.unwatch(self)
        self._watching = wanted

    def _send_task_result(self, rec: _InFlight, task: Task) -> None:
        """Answer a 2025-11-25 ``tasks/result``: what the call itself would have answered."""
        self._forget(rec)
        related = {META_RELATED_TASK: {"taskId": task.task_id}}
        if task.status == "completed" and task.result is not None:
            shaped = downgrade(
                task.result, "CallToolResult", rec.revision, strict=self.config.policy.strict(rec.revision)
            )
            result = dict(shaped)
            result["_meta"] = {**(result.get("_meta") or {}), **related}
            self._reply(rec, Response(id=rec.id, result=result).to_obj())
            return
        if task.status == "failed" and task.error is not None:
            code = task.error.get("code", INTERNAL_ERROR)
            message = task.error.get("message", "the task failed")
            data = task.error.get("data")
        else:
            code, message, data = INVALID_PARAMS, f"task {task.task_id} was cancelled; it has no result", None
        self._reply(rec, ErrorResponse(id=rec.id, code=code, message=message, data=data).to_obj(), code)

    def _task_requests(
        self, rec: _InFlight, params: Mapping[str, Any], judged: _Judgement
    ) -> dict[str, Any] | None:
        """``tasks/*``: the 2025-11-25 methods for legacy peers, the extension's for 2026-07-28."""
        store = self._tasks
        method = rec.method
        if store is None or self.config.tools is None:
            raise RemoteProtocolError(
                f"Method not found: {method}; this server runs no tasks (it declares none)",
                code=METHOD_NOT_FOUND,
                http_status=404,
            )
        if method == "tasks/list":
            cursor = params.get("cursor")
            if cursor is not None:
                raise RemoteProtocolError(
                    "Invalid params: this server sends every task in one page, so no cursor is valid",
                    code=INVALID_PARAMS,
                )
            owned = store.owned_by(self._identity, self._now) if store is not None else []
            wall = store.wall_offset if store is not None else 0.0
            return {"tasks": [t.core_view(wall) for t in owned if t.model == "core"]}
        task_id = params.get("taskId")
        if not isinstance(task_id, str):
            raise RemoteProtocolError("Invalid params: taskId must be a string", code=INVALID_PARAMS)
        model = "ext" if rec.modern else "core"
        task = store.get(task_id, self._identity, self._now) if store is not None else None
        if task is None or task.model != model:
            raise RemoteProtocolError(
                f"Invalid params: no task {task_id!r} is visible to this caller (unknown, expired, "
                "or created by another client)",
                code=INVALID_PARAMS,
            )
        assert store is not None
        if method == "tasks/get":
            return task.ext_view(store.wall_offset) if rec.modern else task.core_view(store.wall_offset)
        if method == "tasks/cancel":
            if rec.modern:
                store.cancel(
                    task, self._now, "cancelled by the client"
                )  # a finished task: an ack all the same
                return {}
            if task.terminal:
                raise RemoteProtocolError(
                    f"Invalid params: task {task_id!r} is already {task.status}; it cannot be cancelled",
                    code=INVALID_PARAMS,
                )
            store.cancel(task, self._now, "cancelled by the client")
            return task.core_view(store.wall_offset)
        if method == "tasks/update":
            responses = params.get("inputResponses")
            if not isinstance(responses, dict) or not _answers_shape(responses):
                raise RemoteProtocolError(
                    "Invalid params: inputResponses must be an object whose values are the answers' objects",
                    code=INVALID_PARAMS,
                )
            store.answer(task, responses, self._now)  # keys nobody asked are ignored
            return {}
        # tasks/result (2025-11-25): blocks until the task ends
        if task.terminal:
            self._send_task_result(rec, task)
            return None
        self._result_waiters.setdefault(task.task_id, []).append(rec)
        runner = self._inflight.get(self._runners.get(task.task_id, 0))
        for ask in self._asks.values():
            if runner is not None and ask.token == runner.token and ask.deferred:
                questions, ask.deferred = ask.deferred, []
                self._send_questions(runner, ask, questions, rec.stream)  # on this request's stream
        return None
