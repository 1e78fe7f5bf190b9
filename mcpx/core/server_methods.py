"""The methods a server session answers itself: ``ping``, ``server/discover``, ``logging/setLevel``, subscriptions, ``subscriptions/listen``.

Each is answered in the shape of the revision that defines it, and only
where the peer's revision has it (a removed method is ``-32601`` before it
gets here).  ``tasks/*`` are the tasks layer's (server_tasks.py); the table
at the end maps every method the session answers to its handler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from .actions import Subscribed
from .errors import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, RemoteProtocolError
from .jsonrpc import Request
from .revisions import LOG_LEVELS, META_SUBSCRIPTION_ID, TASKS_EXTENSION
from .server_base import _InFlight, _Judgement, _Listen
from .server_output import _LEVEL_RANK
from .server_tasks import _TASKS_REQUIRED, _declares_tasks_extension, _TaskCalls
from .tasks import Task


def _require_tasks_extension(judged: _Judgement, what: str) -> None:
    """``-32021`` unless this request declared the tasks extension (ext-tasks, 2026-07-28)."""
    if not _declares_tasks_extension(judged.capabilities):
        raise RemoteProtocolError(
            f"{what} belongs to the {TASKS_EXTENSION} extension; declare it in "
            "clientCapabilities.extensions on this request",
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            data=_TASKS_REQUIRED,
        )


class _CoreMethods(_TaskCalls):
    """The layer of the methods the session answers itself (``_CORE_HANDLERS`` maps each to its handler)."""

    def _core_request(self, rec: _InFlight, req: Request, judged: _Judgement) -> None:
        handler = _CORE_HANDLERS[req.method]
        try:
            result = handler(self, rec, req.params or {}, judged)
        except RemoteProtocolError as exc:
            self.respond_error(rec.token, exc.code, exc.message, exc.data)
            return
        if result is not None:
            self.respond(rec.token, result)

    def _ping(self, rec: _InFlight, params: Mapping[str, Any], judged: _Judgement) -> dict[str, Any]:
        return {}

    def _discover(self, rec: _InFlight, params: Mapping[str, Any], judged: _Judgement) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": [str(r) for r in self._modern],
            "capabilities": self._caps[judged.revision],
        }
        if self.config.instructions:
            result["instructions"] = self.config.instructions
        return result

    def _set_level(self, rec: _InFlight, params: Mapping[str, Any], judged: _Judgement) -> dict[str, Any]:
        level = params.get("level")
        if not (isinstance(level, str) and level in _LEVEL_RANK):
            raise RemoteProtocolError(
                f"Invalid params: level must be one of {', '.join(LOG_LEVELS)}", code=INVALID_PARAMS
            )
        assert isinstance(level, str)
        if not self._stateless:  # outside a session there is nothing to keep it in
            self._log_level = level
        return {}

    def _subscribe(self, rec: _InFlight, params: Mapping[str, Any], judged: _Judgement) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise RemoteProtocolError("Invalid params: uri must be a string", code=INVALID_PARAMS)
        if self._stateless:
            return {}  # nothing can be pushed outside a session
        if rec.method == "resources/subscribe":
            self._subscriptions.add(uri)
            self._actions.append(Subscribed(uri=uri))
        else:
            self._subscriptions.discard(uri)
        return {}

    def _listen(self, rec: _InFlight, params: Mapping[str, Any], judged: _Judgement) -> None:
        wanted = params.get("notifications", {})
        if not isinstance(wanted, dict):
            raise RemoteProtocolError("Invalid params: notifications must be an object", code=INVALID_PARAMS)
        if "taskIds" in wanted:
            _require_tasks_extension(judged, "task notifications")
        caps = self._caps[rec.shape_revision]

        def offered(kind: str, flag: str) -> bool:
            cap = caps.get(kind)
            return isinstance(cap, dict) and bool(cap.get(flag))

        honoured: dict[str, Any] = {}
        for key, kind in (
            ("toolsListChanged", "tools"),
            ("promptsListChanged", "prompts"),
            ("resourcesListChanged", "resources"),
        ):
            if wanted.get(key) is True and offered(kind, "listChanged"):
                honoured[key] = True
        uris = wanted.get("resourceSubscriptions")
        agreed: list[str] = []
        if isinstance(uris, list) and offered("resources", "subscribe"):
            agreed = [u for u in uris if isinstance(u, str)]
            honoured["resourceSubscriptions"] = agreed
            self._actions.extend(Subscribed(uri=uri) for uri in agreed)
        visible: list[Task] = []
        if "taskIds" in wanted:
            ids = wanted["taskIds"]
            if not (isinstance(ids, list) and all(isinstance(i, str) for i in ids)):
                raise RemoteProtocolError(
                    "Invalid params: notifications.taskIds must be an array of strings", code=INVALID_PARAMS
                )
            store = self._tasks
            for task_id in dict.fromkeys(ids):
                task = store.get(task_id, self._identity, self._now) if store is not None else None
                if task is not None and task.model == "ext":
                    visible.append(task)
            honoured["taskIds"] = [t.task_id for t in visible]  # only what will be delivered
        rec.listen = _Listen(
            tools="toolsListChanged" in honoured,
            prompts="promptsListChanged" in honoured,
            resources="resourcesListChanged" in honoured,
            uris=frozenset(agreed),
            task_ids=frozenset(t.task_id for t in visible),
        )
        if visible:
            self._task_listens.add(rec.token)
        self._notify(
            "notifications/subscriptions/acknowledged",
            {"notifications": honoured, "_meta": {META_SUBSCRIPTION_ID: rec.id}},
            None,
            rec.shape_revision,
            rec.stream,
        )
        for task in visible:  # the current state at once, then every change
            self._notify_task(rec, task)

    def _listens(self) -> Iterable[_InFlight]:
        return [r for r in self._inflight.values() if r.listen is not None]

    def _finish_listen(self, rec: _InFlight) -> None:
        self.respond(rec.token, {"_meta": {META_SUBSCRIPTION_ID: rec.id}})


_CoreHandler = Callable[[_CoreMethods, _InFlight, Mapping[str, Any], _Judgement], dict[str, Any] | None]


_CORE_HANDLERS: Final[dict[str, _CoreHandler]] = {
    "ping": _CoreMethods._ping,
    "server/discover": _CoreMethods._discover,
    "logging/setLevel": _CoreMethods._set_level,
    "resources/subscribe": _CoreMethods._subscribe,
    "resources/unsubscribe": _CoreMethods._subscribe,
    "subscriptions/listen": _CoreMethods._listen,
    "tasks/get": _CoreMethods._task_requests,
    "tasks/result": _CoreMethods._task_requests,
    "tasks/cancel": _CoreMethods._task_requests,
    "tasks/list": _CoreMethods._task_requests,
    "tasks/update": _CoreMethods._task_requests,
}
