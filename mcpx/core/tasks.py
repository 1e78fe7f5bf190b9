"""Tasks: calls whose result is fetched later (both task models, pure state).

MCP has two task models (spec/revision-conflicts.md, "Two task models";
spec/messages.md §6):

* **2025-11-25 core tasks** (``basic/utilities/tasks``): the client asks for
  a task with ``params.task`` on ``tools/call``, gets ``{task}`` at once,
  polls ``tasks/get``, blocks on ``tasks/result``, lists with ``tasks/list``
  and cancels with ``tasks/cancel``; questions the task asks go out as
  ordinary server requests tagged with ``related-task`` ``_meta``.
* **The 2026-07-28 extension** ``io.modelcontextprotocol/tasks``
  (ext-tasks ``specification/2026-07-28/tasks.md``): the server decides; a
  client that declared the extension on the request may get a flat
  ``CreateTaskResult`` (``resultType: "task"``), polls ``tasks/get`` (which
  inlines the result), answers questions with ``tasks/update`` and cancels
  with ``tasks/cancel``.

``TaskStore`` holds the tasks of one server, shared by its sessions as the
``RoundTable`` is (a 2026-07-28 client polls on any connection).  It knows
nothing of wires: sessions turn its records into the revision's shapes with
``core_view``/``ext_view``.  Ids are ``HMAC(key, instance:n)``, so they are
unguessable to anyone without the key, and every lookup names the
requester's identity: another identity's task is simply not found.  Results
go in and come out as deep copies, so no caller can edit another's view.
Time is whatever the caller passes (``now``); ``wall_offset`` turns it into
the wall-clock times the wire carries.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol

from .rounds import Question

__all__ = [
    "TERMINAL",
    "Task",
    "TaskStore",
    "iso_time",
]

TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
Model = Literal["core", "ext"]


def iso_time(seconds: float) -> str:
    """Seconds since the epoch as the ISO 8601 UTC time tasks carry."""
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class Task:
    """One task.  Mutated only through ``TaskStore``."""

    task_id: str
    owner: str
    model: Model
    created: float
    updated: float
    ttl_ms: int
    poll_ms: int
    status: str = "working"
    status_message: str | None = None
    result: dict[str, Any] | None = None  # completed: the call's result, newest shape
    error: dict[str, Any] | None = None  # failed: the JSON-RPC error object
    # Questions the running call put to the client (2026-07-28: on tasks/get).
    questions: dict[str, Question] = field(default_factory=dict)
    answers: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    ask_id: int | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def core_view(self, wall_offset: float) -> dict[str, Any]:
        """The 2025-11-25 ``Task`` object."""
        view: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": iso_time(self.created + wall_offset),
            "lastUpdatedAt": iso_time(self.updated + wall_offset),
            "ttl": self.ttl_ms,
            "pollInterval": self.poll_ms,
        }
        if self.status_message is not None:
            view["statusMessage"] = self.status_message
        return view

    def ext_view(self, wall_offset: float) -> dict[str, Any]:
        """The extension's ``DetailedTask``: the result, error or open questions inline."""
        view: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": iso_time(self.created + wall_offset),
            "lastUpdatedAt": iso_time(self.updated + wall_offset),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_ms,
        }
        if self.status_message is not None:
            view["statusMessage"] = self.status_message
        if self.status == "completed" and self.result is not None:
            result = copy.deepcopy(self.result)
            result.setdefault("resultType", "complete")  # what the call itself would have answered
            view["result"] = result
        elif self.status == "failed" and self.error is not None:
            view["error"] = copy.deepcopy(self.error)
        elif self.status == "input_required":
            view["inputRequests"] = {
                key: q.as_input_request() for key, q in self.questions.items() if key not in self.answers
            }
        return view


class TaskWatcher(Protocol):
    """A session that follows tasks (runs one, waits for one, or streams their changes)."""

    def task_changed(self, task: Task, what: str) -> bool:
        """Told of every change (what happened: a status, ``"answered"``); whether output was queued."""
        ...


class TaskStore:
    """The tasks of one server; see the module docstring."""

    def __init__(
        self,
        *,
        key: bytes,
        instance: str = "mcpx",
        wall_offset: float = 0.0,
        ttl_ms: int = 3_600_000,
        poll_ms: int = 500,
        max_tasks: int = 10_000,
    ) -> None:
        if len(key) < 16:
            raise ValueError("a task-id key needs at least 16 bytes")
        self._key = key
        self._instance = instance
        self.wall_offset = wall_offset
        self.ttl_ms = ttl_ms
        self.poll_ms = poll_ms
        self.max_tasks = max_tasks
        self._counter: Iterator[int] = itertools.count(1)
        self._tasks: dict[str, Task] = {}
        self._watchers: dict[int, TaskWatcher] = {}
        self._touched: dict[int, TaskWatcher] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    # -- watchers ---------------------------------------------------------------

    def watch(self, watcher: TaskWatcher) -> None:
        """Tell ``watcher`` of every change until ``unwatch``."""
        self._watchers[id(watcher)] = watcher

    def unwatch(self, watcher: TaskWatcher) -> None:
        self._watchers.pop(id(watcher), None)

    def take_touched(self) -> list[TaskWatcher]:
        """Watchers that queued output since the last call: a transport drains their actions."""
        touched = list(self._touched.values())
        self._touched.clear()
        return touched

    def forget_touched(self) -> None:
        """``take_touched`` for a transport with one session, whose actions it drains anyway."""
        if self._touched:
            self._touched.clear()

    def _changed(self, task: Task, what: str) -> None:
        for key, watcher in list(self._watchers.items()):
            if watcher.task_changed(task, what):
                self._touched[key] = watcher

    # -- lifecycle --------------------------------------------------------------

    def create(self, *, owner: str, model: Model, now: float, ttl_ms: int | None = None) -> Task:
        """A new ``working`` task for ``owner``; ``None`` ttl takes the store's default."""
        self.sweep(now)
        if len(self._tasks) >= self.max_tasks:
            raise OverflowError(
                f"this server holds {self.max_tasks} tasks already; wait for some to finish or expire"
            )
        mac = hmac.new(self._key, f"{self._instance}:{next(self._counter)}".encode(), hashlib.sha256)
        task_id = base64.urlsafe_b64encode(mac.digest()[:18]).decode("ascii")
        ttl = self.ttl_ms if ttl_ms is None else max(1, min(ttl_ms, self.ttl_ms))
        task = Task(
            task_id=task_id,
            owner=owner,
            model=model,
            created=now,
            updated=now,
            ttl_ms=ttl,
            poll_ms=self.poll_ms,
        )
        self._tasks[task_id] = task
        self._changed(task, "created")
        return task

    def get(self, task_id: Any, owner: str, now: float) -> Task | None:
        """``owner``'s task ``task_id``, or ``None`` (unknown, expired, or someone else's)."""
        self.sweep(now)
        task = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None or not hmac.compare_digest(task.owner.encode(), owner.encode()):
            return None
        return task

    def owned_by(self, owner: str, now: float) -> list[Task]:
        """``owner``'s tasks, oldest first."""
        self.sweep(now)
        return [t for t in self._tasks.values() if t.owner == owner]

    def sweep(self, now: float) -> None:
        """Forget finished tasks whose ttl (counted from creation) has passed."""
        gone = [t for t in self._tasks.values() if t.terminal and now >= t.created + t.ttl_ms / 1000]
        for task in gone:
            del self._tasks[task.task_id]

    def _touch(self, task: Task, now: float) -> None:
        task.updated = max(task.updated, now)

    def complete(self, task: Task, result: Mapping[str, Any], now: float) -> None:
        if task.terminal:
            return
        task.result = copy.deepcopy(dict(result))
        self._finish(task, "completed", now)

    def fail(self, task: Task, error: Mapping[str, Any], now: float) -> None:
        if task.terminal:
            return
        task.error = copy.deepcopy(dict(error))
        self._finish(task, "failed", now)

    def cancel(self, task: Task, now: float, message: str | None = None) -> None:
        if task.terminal:
            return
        task.status_message = message
        self._finish(task, "cancelled", now)

    def _finish(self, task: Task, status: str, now: float) -> None:
        task.status = status
        task.questions, task.answers, task.ask_id = {}, {}, None
        self._touch(task, now)
        self._changed(task, status)

    # -- questions --------------------------------------------------------------

    def ask(
        self,
        task: Task,
        ask_id: int,
        questions: list[Question],
        now: float,
        answered: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """The task's call waits for answers: ``input_required`` until they come.

        ``answered`` are answers already in hand (sent ahead); only the other
        questions are listed on ``tasks/get``.
        """
        task.questions = {q.key: q for q in questions}
        task.answers = dict(answered or {})
        task.ask_id = ask_id
        task.status = "input_required"
        self._touch(task, now)
        self._changed(task, "input_required")

    def waiting(self, task: Task) -> bool:
        return task.status == "input_required"

    def answer(self, task: Task, responses: Mapping[str, Any], now: float) -> None:
        """Answers for some of the open questions (2026-07-28 ``tasks/update``).

        Keys nobody asked, or already answered, are ignored; once every
        question has its answer the task is ``working`` again and watchers
        hear ``"answered"`` (the answers are in ``task.answers``).
        """
        if task.status != "input_required":
            return
        for key, value in responses.items():
            if key in task.questions and key not in task.answers:
                task.answers[key] = {"result": copy.deepcopy(value)}
        if len(task.answers) < len(task.questions):
            return
        task.status = "working"
        self._touch(task, now)
        self._changed(task, "answered")
        task.questions, task.answers, task.ask_id = {}, {}, None

    def resume(self, task: Task, now: float) -> None:
        """The call's questions were answered another way (2025-11-25): ``working`` again."""
        if task.status != "input_required":
            return
        task.status = "working"
        task.questions, task.answers, task.ask_id = {}, {}, None
        self._touch(task, now)
        self._changed(task, "working")
