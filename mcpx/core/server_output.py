"""What a server session sends: the application's answers, progress, log messages and notifications.

The layer of ``ServerSession`` (server_session.py) above its state: the
inputs the application gives (``respond``, ``respond_error``, ``discard``,
``progress``, ``log``, ``suspend_stream``, ``notify_list_changed``,
``notify_resource_updated``, ``send_request``) and the output every layer
uses — taking a request out of the in-flight table, shaping a result for the
peer's revision (``downgrade``), and queuing the bytes.  Rules: progress only
for a request that asked with a progress token, never backwards (each
revision's basic/utilities/progress); log messages at or above the level the
request (2026-07-28) or the connection (``logging/setLevel``) asked for; an
answer to a cancelled request is dropped (basic/utilities/cancellation).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

import orjson

from .actions import CancelRequest, EndStream, Send, SuspendStream, build_send
from .downgrade import downgrade, downgrade_error, envelope
from .errors import LocalProtocolError
from .jsonrpc import ErrorResponse, Notification, Request, RequestId, Response
from .revisions import (
    LOG_LEVELS,
    META_RELATED_TASK,
    META_SUBSCRIPTION_ID,
    METHODS,
    MODERN_REVISIONS,
    OLDEST,
    Revision,
    Sender,
    method_rule,
)
from .server_base import _CLOSED, _CLOSING, _READY, _Batch, _InFlight, _Input, _SessionBase

_LIST_CHANGED_KINDS: Final = {"tools", "prompts", "resources"}


_MODERN: Final = frozenset(MODERN_REVISIONS)


_RESULT_SHAPES: Final[dict[str, str]] = {
    rule.method: rule.result or "EmptyResult"
    for rule in METHODS
    if rule.sender is Sender.CLIENT and not rule.notification
}
"""The shape of each client request's result (``downgrade`` cuts it); ``EmptyResult`` for any other."""


_LEVEL_RANK: Final = {level: i for i, level in enumerate(LOG_LEVELS)}


class _Output(_SessionBase):
    """The session's output: what the application asks it to send, and the queuing every layer uses."""

    if TYPE_CHECKING:  # defined by a later layer

        def _drop_asks(self, token: int, *, withdraw: bool = False) -> None: ...
        def _listens(self) -> Iterable[_InFlight]: ...
        def _settles_task(
            self,
            token: int,
            *,
            result: Mapping[str, Any] | None = None,
            error: Mapping[str, Any] | None = None,
        ) -> bool: ...
        def _transition(self, event: _Input, *args: Any) -> None: ...

    def respond(self, token: int, result: Mapping[str, Any]) -> None:
        """Answer request ``token`` with ``result`` (newest shape; it is never edited)."""
        if self._asks:
            self._drop_asks(token)
        rec = self._inflight.get(token)
        if rec is not None and rec.task is None and rec.task_support != "required" and rec.batch is None:
            self._actions.append(build_send(self._answer_bytes(rec, result), rec.stream, True, None))
            if self._state is _CLOSING:
                self._maybe_drained()
            return
        if self._settles_task(token, result=result):
            return
        rec = self._take(token)
        if rec is None:
            return
        self._reply(rec, Response(id=rec.id, result=self._shape_result(rec, result)).to_obj())

    def respond_now(self, token: int, result: Mapping[str, Any]) -> bytes | None:
        """``respond``, its bytes handed back to write rather than queued as ``Send``.

        Only for an ordinary answer (a request in flight, no question of it
        out, no task, not part of a batch, on the connection's one stream: a
        stdio connection's) on a connection that is not closing, when nothing
        is queued before it: its bytes then go in the order ``respond`` would
        have sent them.  Otherwise ``None``, with
        nothing done: use ``respond``.  For a driver answering a call a
        gateway relayed, on every answer: no action to build and drain.
        """
        if self._actions or self._asks or self._state is _CLOSING:
            return None
        rec = self._inflight.get(token)
        if (
            rec is None
            or rec.stream != token  # its answer goes on a stream of its own (HTTP): respond names it
            or rec.task is not None
            or rec.task_support == "required"
            or rec.batch is not None
        ):
            return None
        return self._answer_bytes(rec, result)

    def _answer_bytes(self, rec: _InFlight, result: Mapping[str, Any]) -> bytes:
        """An ordinary answer's bytes, the request forgotten: what _settles_task, _take (_forget),
        _shape_result and _reply do for it, in line (this runs for nearly every answer)."""
        token = rec.token
        if self._promotions:
            self._promotions.pop(token, None)
        del self._inflight[token]
        if self._task_listens:
            self._task_listens.discard(token)
        request_id = rec.id
        if self._by_peer_id.get(request_id) == token:
            del self._by_peer_id[request_id]
        method = rec.method
        rev = rec.shape_revision
        if rev in _MODERN:
            result = envelope(result, method, self._server_info[rev], self.config.ages)
        shaped = downgrade(result, _RESULT_SHAPES.get(method, "EmptyResult"), rev, strict=self._strict[rev])
        reply = {"jsonrpc": "2.0", "id": request_id, "result": shaped}
        return orjson.dumps(reply, option=self._dump_option)

    def respond_error(self, token: int, code: int, message: str, data: Any = None) -> None:
        """Answer request ``token`` with a JSON-RPC error."""
        self._drop_asks(token)
        if self._settles_task(
            token, error={"code": code, "message": message, **({"data": data} if data is not None else {})}
        ):
            return
        rec = self._take(token)
        if rec is None:
            return
        code, data = downgrade_error(code, data, rec.revision)
        # A legacy request the application answers was accepted, whatever the error: the HTTP
        # binding answers it 200 (only a message the session cannot accept is a 4xx there).
        # 2026-07-28's status follows the code, whoever answered (basic/transports).
        status_code = code if rec.modern else None
        self._reply(
            rec, ErrorResponse(id=rec.id, code=code, message=message, data=data).to_obj(), status_code
        )

    def discard(self, token: int) -> None:
        """Acknowledge that the handler of a cancelled request has stopped.

        Only legal after a ``CancelRequest`` for ``token``; a request that was
        not cancelled must be answered with ``respond``/``respond_error``.
        """
        if token not in self._cancelled_tokens:
            raise LocalProtocolError(f"token {token} was not cancelled; answer it instead")
        self._cancelled_tokens.discard(token)

    def progress(
        self, token: int, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """Report progress on request ``token``; returns whether it was sent.

        Dropped when the request gave no progress token, was cancelled or
        answered, or when ``progress`` does not exceed the last report (every
        revision requires progress to increase).
        """
        rec = self._inflight.get(token)
        if rec is None or rec.progress_token is None or (rec.task is not None and rec.modern):
            return False  # the tasks extension has no progress for a task: clients poll
        if rec.last_progress is not None and not progress > rec.last_progress:
            return False
        rec.last_progress = progress
        params: dict[str, Any] = {"progressToken": rec.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        if rec.task is not None:  # 2025-11-25: the token lives on with the task, tagged with it
            params["_meta"] = {META_RELATED_TASK: {"taskId": rec.task.task_id}}
        self._notify("notifications/progress", params, "ProgressNotificationParams", rec.revision, rec.stream)
        return True

    def log(self, level: str, data: Any, *, logger: str | None = None, token: int | None = None) -> bool:
        """Send a log message, if the request (or connection) asked for this level.

        With ``token`` the message belongs to that request: for 2026-07-28 it
        is sent only when the request's ``_meta`` set a log level, on that
        request's stream.  Without one it is a connection-level message, which
        only a legacy peer can receive.
        """
        if level not in _LEVEL_RANK:
            raise LocalProtocolError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        if self._state is _CLOSED:
            return False
        rec = self._inflight.get(token) if token is not None else None
        if token is not None and rec is None:
            return False
        if rec is not None and rec.task is not None and rec.modern:
            return False  # nor log messages: the task's request was answered
        stream: int | None
        if rec is not None and rec.modern:
            threshold, rev, stream = rec.log_level, rec.revision, rec.stream
        else:
            if self._negotiated is None and rec is None:
                return False
            threshold = self._log_level if self._log_level is not None else self._default_log_level()
            rev = rec.revision if rec is not None else (self._negotiated or OLDEST)
            stream = rec.stream if rec is not None else None
            if "logging" not in self._caps[rev]:
                return False
        if threshold is None or _LEVEL_RANK[level] < _LEVEL_RANK[threshold]:
            return False
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        if rec is not None and rec.task is not None:
            params["_meta"] = {META_RELATED_TASK: {"taskId": rec.task.task_id}}
        self._notify("notifications/message", params, "LoggingMessageNotificationParams", rev, stream)
        return True

    def suspend_stream(self, token: int) -> None:
        """Ask the transport to close request ``token``'s stream now (SSE polling).

        The request goes on; a Streamable HTTP binding keeps its stream for the
        client to resume with ``Last-Event-ID``.  Nothing happens on stdio.
        """
        rec = self._inflight.get(token)
        if rec is not None:
            self._actions.append(SuspendStream(stream=rec.stream))

    def notify_list_changed(self, kind: str) -> None:
        """The server's ``kind`` list ("tools", "prompts", "resources") changed."""
        if kind not in _LIST_CHANGED_KINDS:
            raise LocalProtocolError(f"kind must be one of {sorted(_LIST_CHANGED_KINDS)}")
        method = f"notifications/{kind}/list_changed"
        rev = self._negotiated
        if self._state is _READY and rev is not None:
            cap = self._caps[rev].get(kind)
            if isinstance(cap, dict) and cap.get("listChanged"):
                self._notify(method, None, "ListChangedNotificationParams", rev, None)
        for rec in self._listens():
            assert rec.listen is not None
            if getattr(rec.listen, kind):
                self._notify(
                    method, {"_meta": {META_SUBSCRIPTION_ID: rec.id}}, None, rec.shape_revision, rec.stream
                )

    def notify_resource_updated(self, uri: str) -> None:
        """Resource ``uri`` changed: tell whoever subscribed to it."""
        rev = self._negotiated
        if self._state is _READY and rev is not None and uri in self._subscriptions:
            self._notify(
                "notifications/resources/updated",
                {"uri": uri},
                "ResourceUpdatedNotificationParams",
                rev,
                None,
            )
        for rec in self._listens():
            assert rec.listen is not None
            if uri in rec.listen.uris:
                self._notify(
                    "notifications/resources/updated",
                    {"uri": uri, "_meta": {META_SUBSCRIPTION_ID: rec.id}},
                    None,
                    rec.shape_revision,
                    rec.stream,
                )

    def send_request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        related: int | None = None,
        stream: int | None = None,
    ) -> int:
        """Send a server-to-client request; returns its (negative) id.

        Only a legacy peer that finished ``initialize`` can receive one, and
        only a method its revision defines.  The answer arrives as a
        ``PeerReplied`` action.
        """
        rev = self._negotiated
        if self._state is not _READY or rev is None:
            raise LocalProtocolError("a server request needs a legacy connection that finished initialize")
        rule = method_rule(method, sender=Sender.SERVER)
        if rule is None or not rule.defined_in(rev):
            raise LocalProtocolError(f"{method} is not a server request in MCP {rev}")
        request_id = self._next_server_id
        self._next_server_id -= 1
        self._outgoing[request_id] = method
        if stream is None and related is not None and related in self._inflight:
            stream = self._inflight[related].stream
        self._emit(Request(id=request_id, method=method, params=params).to_obj(), stream, False)
        return request_id

    def _take_token(self) -> int:
        return next(self._tokens)

    def _reply_stream(self) -> int:
        """The stream the transport named for this input, else a fresh token."""
        return self._input_stream if self._input_stream is not None else self._take_token()

    def _enter_input(
        self, stream: int | None, revision: Revision | None
    ) -> tuple[int | None, Revision | None]:
        """Name the transport's stream and revision for this input; returns what to restore after it.

        (A try/finally at each input rather than a context manager: this runs for every message.)
        """
        outer = (self._input_stream, self._input_revision)
        self._input_stream, self._input_revision = stream, revision
        return outer

    def _take(self, token: int) -> _InFlight | None:
        """The request to answer, or ``None`` when it was cancelled (the answer is dropped)."""
        rec = self._inflight.get(token)
        if rec is None:
            if token in self._cancelled_tokens:
                self._cancelled_tokens.discard(token)
                return None
            if self._rounds is not None and self._rounds.forget(token) is not None:
                return None  # a parked call that stopped waiting for its answers: nobody to tell
            raise LocalProtocolError(f"no request with token {token} is in flight")
        self._forget(rec)
        return rec

    def _cancel(self, rec: _InFlight, reason: str | None) -> None:
        """Stop answering ``rec``: nothing more is sent for it."""
        self._promotions.pop(rec.token, None)
        self._drop_asks(rec.token, withdraw=True)
        self._forget(rec)
        if rec.task is not None and self._tasks is not None:
            # The connection that ran the task is going: the task ends with it.
            self._runners.pop(rec.task.task_id, None)
            self._tasks.cancel(rec.task, self._now, reason or "the connection ended")
        if rec.dispatched:
            self._cancelled_tokens.add(rec.token)
            self._actions.append(CancelRequest(token=rec.token, reason=reason))
        if rec.batch is not None:
            rec.batch.pending -= 1
            self._flush_batch(rec.batch)
        elif not any(r.stream == rec.stream for r in self._inflight.values()):
            self._actions.append(EndStream(stream=rec.stream))

    def _forget(self, rec: _InFlight) -> None:
        self._inflight.pop(rec.token, None)
        if self._task_listens:
            self._task_listens.discard(rec.token)
        if self._by_peer_id.get(rec.id) == rec.token:
            del self._by_peer_id[rec.id]

    def _shape_result(self, rec: _InFlight, result: Mapping[str, Any]) -> Mapping[str, Any]:
        method = rec.method
        rev = rec.shape_revision
        if rev in _MODERN:
            result = envelope(result, method, self._server_info[rev], self.config.ages)
        shaped: Mapping[str, Any] = downgrade(
            result, _RESULT_SHAPES.get(method, "EmptyResult"), rev, strict=self._strict[rev]
        )
        return shaped

    def _reply(self, rec: _InFlight, obj: dict[str, Any], error_code: int | None = None) -> None:
        if rec.batch is not None:
            rec.batch.replies.append(obj)
            rec.batch.pending -= 1
            self._flush_batch(rec.batch)
        else:
            self._emit(obj, rec.stream, True, error_code)
        self._maybe_drained()

    def _flush_batch(self, batch: _Batch) -> None:
        if batch.pending > 0 or batch.sent:
            return
        batch.sent = True
        if batch.replies:
            self._actions.append(
                Send(
                    payload=orjson.dumps(batch.replies, option=self._dump_option),
                    stream=batch.stream,
                    final=True,
                )
            )

    def _emit(
        self, obj: dict[str, Any], stream: int | None, final: bool, error_code: int | None = None
    ) -> None:
        self._actions.append(
            build_send(orjson.dumps(obj, option=self._dump_option), stream, final, error_code)
        )

    def _notify(
        self, method: str, params: dict[str, Any] | None, shape: str | None, rev: Revision, stream: int | None
    ) -> None:
        if params is not None and shape is not None:
            params = downgrade(params, shape, rev, strict=self.config.policy.strict(rev))
        self._emit(Notification(method=method, params=params).to_obj(), stream, False)

    def _send_error(
        self,
        request_id: RequestId | None,
        code: int,
        message: str,
        data: Any,
        rev: Revision,
        stream: int | None,
    ) -> None:
        code, data = downgrade_error(code, data, rev)
        request_id = self._unambiguous(request_id)
        self._emit(
            ErrorResponse(id=request_id, code=code, message=message, data=data).to_obj(), stream, True, code
        )

    def _error_in(
        self,
        batch: _Batch | None,
        request_id: RequestId,
        code: int,
        message: str,
        data: Any,
        rev: Revision,
        stream: int | None,
    ) -> None:
        if batch is None:
            self._send_error(request_id, code, message, data, rev, stream)
            return
        code, data = downgrade_error(code, data, rev)
        reply_id = self._unambiguous(request_id)
        batch.replies.append(ErrorResponse(id=reply_id, code=code, message=message, data=data).to_obj())
        batch.pending -= 1

    def _unambiguous(self, request_id: RequestId | None) -> RequestId | None:
        """The id to put on a refusal: ``None`` when it names a request still running.

        Its answer is still to come; a second reply carrying the same id would
        leave the peer unable to tell which one answers its request.
        """
        return None if request_id is not None and request_id in self._by_peer_id else request_id

    def _maybe_drained(self) -> None:
        if self._state is _CLOSING and not any(r.dispatched or r.listen for r in self._inflight.values()):
            self._transition(_Input.DRAINED)
