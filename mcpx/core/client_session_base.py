"""The client session's records and fields, and the internals its inputs end in.

The layer ``ClientSession`` (client_session.py, where the rules are) stands
on: sending a request with the session's own id and ``_meta``, reading what
the server sends (answers matched by id on this connection, questions,
progress, notifications), and finishing a call exactly once.
``_ClientSessionBase.__init__`` holds every field.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from .actions import Send, Trace, build_send
from .client_events import (
    AbandonStream,
    ClientAction,
    Failed,
    InputRequired,
    MessageTooLarge,
    Progress,
    Ready,
    ServerNotification,
    ServerRequest,
    ServerRequestCancelled,
    _completed,
)
from .downgrade import downgrade
from .errors import INTERNAL_ERROR, METHOD_NOT_FOUND, UNSUPPORTED_PROTOCOL_VERSION, LocalProtocolError
from .jsonrpc import ErrorResponse, Notification, Request, RequestId, Response
from .revisions import (
    LEGACY_REVISIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    TASKS_EXTENSION,
    Revision,
    Sender,
    method_rule,
)

MODERN: Final = Revision.V2026_07_28


NEWEST_LEGACY: Final = LEGACY_REVISIONS[-1]


_MODERN_NAME: Final = str(MODERN)


_DECLARED_KEPT: Final = 16  # distinct capability sets cut to a revision, kept (hosts declare few)


# A server request and the client capability that must have been declared for it.
_QUESTION_CAPABILITY: Final = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


@dataclass(slots=True)
class _Call:
    handle: int
    method: str
    params: dict[str, Any]  # as the application gave them (without _meta bookkeeping)
    progress_token: str | None = None
    last_progress: float | None = None
    log_level: str | None = None
    rounds: int = 0
    waiting: bool = True  # False while the application holds an InputRequired
    sent: dict[str, Any] = field(default_factory=dict)  # the params of the last attempt on the wire
    version_retried: bool = False  # a -32022 was answered by one retry already
    capabilities: Mapping[str, Any] | None = (
        None  # 2026-07-28: declared for this call alone (None: the session's); read, never changed
    )


@dataclass(slots=True)
class _State:
    started: bool = False
    ready: bool = False
    failed: str | None = None
    closed: bool = False
    revision: Revision | None = None
    server_capabilities: Mapping[str, Any] = field(default_factory=dict)
    server_info: Mapping[str, Any] = field(default_factory=dict)
    discovered: bool = False  # 2026-07-28: server_capabilities came from server/discover


class _ClientSessionBase:
    """The session's fields and internals (see ``ClientSession``)."""

    def __init__(
        self,
        *,
        client_info: Mapping[str, Any],
        capabilities: Mapping[str, Any] | None = None,
        modern: bool = False,
        offer: Revision | None = None,
        revisions: tuple[Revision, ...] = tuple(LEGACY_REVISIONS),
        newline: bool = False,
        stream_per_request: bool = False,
        answer_modern_requests: bool = False,
        max_rounds: int = 8,
        trace: bool = False,
        continues: _ClientSessionBase | None = None,
        max_message: int | None = None,
    ) -> None:
        offer = NEWEST_LEGACY if offer is None else offer  # the newest legacy revision by default
        if not modern and offer not in revisions:
            raise ValueError(f"offer {offer} is not among the revisions this client speaks")
        self.client_info = dict(client_info)
        self.capabilities = dict(capabilities or {})
        self.modern = modern
        self._offer = offer
        self._revisions = revisions
        self._dump_option = orjson.OPT_APPEND_NEWLINE if newline else 0
        self._declared_kept: dict[tuple[Revision, bytes], dict[str, Any]] = {}
        # The last set cut, by identity: a gateway passes one narrowed mapping per host capability set.
        self._declared_last: tuple[Revision, Mapping[str, Any], dict[str, Any]] | None = None
        self._stream_per_request = stream_per_request
        self._answer_modern_requests = answer_modern_requests
        self._max_rounds = max_rounds
        self._trace_on = trace
        # The longest message the server takes (a stdio line, its newline not counted): a request
        # that would be longer is refused here, before it is sent (MessageTooLarge).
        self._max_message = max_message
        # A session that replaces an expired one on the same transport goes on
        # with its ids and progress tokens: a late frame of the old session
        # can never be taken for one of the new session's.
        self._ids: Iterator[int] = itertools.count(1) if continues is None else continues._ids
        self._tokens: Iterator[int] = itertools.count(1) if continues is None else continues._tokens
        self._calls: dict[int, _Call] = {}  # handle -> call
        self._by_id: dict[RequestId, int] = {}  # request id on the wire -> handle
        # A call's first wire id is its handle; the ids of its retries (a round's answers, a
        # version retry) are kept here, so that ending a call never scans every id in flight.
        self._retry_ids: dict[int, list[RequestId]] = {}
        self._by_token: dict[str, int] = {}  # progress token -> handle
        self._server_requests: set[RequestId] = set()  # asked of us, not yet answered
        self._init_id: int | None = None
        self._state = _State(ready=modern, revision=MODERN if modern else None)
        self._actions: list[ClientAction] = []

    def _check_open(self) -> None:
        if self._state.closed:
            raise LocalProtocolError("the connection to the server is closed")
        if self._state.failed is not None:
            raise LocalProtocolError(self._state.failed)

    def _declared(self, rev: Revision, own: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The capabilities declared in ``rev``: ``own`` (one call's), else the session's, cut to ``rev``.

        Cut once per distinct set and revision (a gateway declares one set per
        host capability set, on every 2026-07-28 request): the last few kept,
        by their JSON text.  Read only; never change what this returns.
        """
        caps = self.capabilities if own is None else own
        last = self._declared_last
        if last is not None and last[1] is caps and last[0] is rev:
            return last[2]
        try:
            key = (rev, orjson.dumps(caps, option=orjson.OPT_SORT_KEYS))
        except TypeError:  # not JSON: cut it every time (sending it fails later, saying why)
            cut: dict[str, Any] = downgrade(caps, "ClientCapabilities", rev)
            return cut
        kept = self._declared_kept.get(key)
        if kept is None:
            kept = downgrade(caps, "ClientCapabilities", rev)
            if len(self._declared_kept) >= _DECLARED_KEPT:
                del self._declared_kept[next(iter(self._declared_kept))]  # the oldest goes
            self._declared_kept[key] = kept
        self._declared_last = (rev, caps, kept)
        return kept

    def _wire_params(self, call: _Call) -> dict[str, Any]:
        """The params of an attempt at ``call``: a dict of their own, or ``call.params`` when nothing is added.

        Neither is changed once sent (``resume`` adds its answers to a fresh one).
        """
        given = call.params.get("_meta")
        if given is None and call.progress_token is None and not self.modern:
            return call.params  # a legacy call with nothing to state: as the caller gave it
        params = dict(call.params)
        meta = dict(given or {})
        if call.progress_token is not None:
            meta["progressToken"] = call.progress_token
        if self.modern:
            meta[META_PROTOCOL_VERSION] = _MODERN_NAME
            meta[META_CLIENT_CAPABILITIES] = self._declared(MODERN, call.capabilities)
            meta[META_CLIENT_INFO] = self.client_info
            if call.log_level is not None:
                meta[META_LOG_LEVEL] = call.log_level
        if meta:
            params["_meta"] = meta
        return params

    def _result(self, result: Mapping[str, Any]) -> dict[str, Any]:
        """An answer to a server request: 2026-07-28 requires ``resultType`` on every result."""
        answer = dict(result)
        if self.modern:
            answer.setdefault("resultType", "complete")
        return answer

    def _send_request(self, method: str, params: dict[str, Any], *, handle: int | None) -> int:
        handle, payload = self._wire_request(method, params, handle)
        self._actions.append(build_send(payload, handle, False, None))
        return handle

    def _wire_request(self, method: str, params: dict[str, Any], handle: int | None) -> tuple[int, bytes]:
        """A request's wire id taken and its bytes made: ``(handle, payload)`` (``MessageTooLarge``, nothing kept)."""
        request_id = next(self._ids)
        handle = request_id if handle is None else handle
        # What Request(id=..., method=..., params=...).to_obj() gives, without building the Request.
        obj = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        try:
            payload = orjson.dumps(obj, option=self._dump_option)
        except orjson.JSONEncodeError as exc:  # nested past orjson's limit, or not JSON at all
            raise ValueError(
                f"{method} params cannot be written as JSON ({exc}); send them less deeply nested"
            ) from None
        if self._max_message is not None:
            size = len(payload) - (self._dump_option == orjson.OPT_APPEND_NEWLINE)
            if size > self._max_message:
                raise MessageTooLarge(method, size, self._max_message)
        self._by_id[request_id] = handle
        if request_id != handle:
            self._retry_ids.setdefault(handle, []).append(request_id)
        return handle, payload

    def _wire_ids(self, handle: int) -> list[RequestId]:
        """The ids call ``handle`` has on the wire still unanswered, oldest first."""
        ids: list[RequestId] = [handle] if self._by_id.get(handle) == handle else []
        ids += [rid for rid in self._retry_ids.get(handle, ()) if rid in self._by_id]
        return ids

    def _send_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        self._emit(Notification(method=method, params=dict(params) if params is not None else None).to_obj())

    def _emit(self, obj: dict[str, Any], stream: int | None = None) -> None:
        self._actions.append(Send(payload=orjson.dumps(obj, option=self._dump_option), stream=stream))

    def _end(self, handle: int) -> _Call | None:
        """Forget call ``handle``: its wire ids and its progress token go with it."""
        call = self._calls.pop(handle, None)
        if call is None:
            return None
        if self._by_id.get(handle) == handle:
            del self._by_id[handle]
        for rid in self._retry_ids.pop(handle, ()):
            self._by_id.pop(rid, None)
        if call.progress_token is not None:
            self._by_token.pop(call.progress_token, None)
        return call

    def _fail(self, handle: int, code: int, message: str, data: Any = None) -> None:
        if self._end(handle) is None:
            return
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self._actions.append(Failed(handle=handle, error=error))

    def _response(self, message: Response | ErrorResponse) -> None:
        handle = self._by_id.pop(message.id, None) if message.id is not None else None
        if handle is None:
            if message.id is None and isinstance(message, ErrorResponse) and len(self._by_id) == 1:
                # The server could not read a request (JSON-RPC 2.0 §5: id null).  With one request
                # on the wire it can only be that one: it fails now, rather than at its timeout.
                ((_, handle),) = self._by_id.items()
                self._fail(
                    handle,
                    message.code,
                    f"the server could not read the request: {message.message}",
                    message.data,
                )
                return
            self._trace("unmatched-response", id=message.id)
            return
        call = self._calls.get(handle)
        if call is None:
            return
        if isinstance(message, ErrorResponse):
            if self._retry_version(call, message):
                return
            self._end(handle)
            if handle == self._init_id:
                self._state.failed = f"initialize failed: {message.message}"
            self._actions.append(Failed(handle=handle, error=message.error_object()))
            return
        self._answered(handle, message.result)

    def _answered(self, handle: int, result: Mapping[str, Any]) -> None:
        """Call ``handle``'s answer is ``result`` (its wire id already forgotten)."""
        call = self._calls.get(handle)
        if call is None:
            return
        if handle == self._init_id:
            self._initialized(call, result)
            return
        kind = result.get("resultType") if type(result) is dict or isinstance(result, Mapping) else None
        if kind == "input_required" and self.modern:
            requests = result.get("inputRequests")
            state = result.get("requestState")
            if not isinstance(requests, dict) or (state is not None and not isinstance(state, str)):
                self._fail(handle, INTERNAL_ERROR, "the server answered input_required without inputRequests")
                return
            call.rounds += 1
            if call.rounds > self._max_rounds:
                self._fail(
                    handle,
                    INTERNAL_ERROR,
                    f"the server asked for input more than {self._max_rounds} times in one call "
                    "(proto.askRounds); the call was stopped",
                )
                self._abandon_wire(handle)
                return
            call.waiting = False
            self._actions.append(InputRequired(handle=handle, input_requests=requests, request_state=state))
            return
        if kind == "task" and self.modern and self._declares_tasks(call):
            pass  # a CreateTaskResult for a call that said it can follow one: the application does
        elif kind not in (None, "complete"):
            self._fail(handle, INTERNAL_ERROR, f"the server answered with an unknown resultType {kind!r}")
            return
        elif call.method == "server/discover" and self.modern:
            self._discovered(result)
        self._end(handle)
        self._actions.append(_completed(handle=handle, result=result))

    def _discovered(self, result: Mapping[str, Any]) -> None:
        """A DiscoverResult (2026-07-28 server/discover): what the server declared, kept for the session."""
        caps = result.get("capabilities")
        info = result.get("serverInfo")
        self._state.server_capabilities = dict(caps) if isinstance(caps, Mapping) else {}
        if isinstance(info, Mapping):
            self._state.server_info = dict(info)
        self._state.discovered = True

    def _declares_tasks(self, call: _Call) -> bool:
        """Whether ``call`` declared the tasks extension (2026-07-28 per-request capabilities)."""
        extensions = self._declared(MODERN, call.capabilities).get("extensions")
        return isinstance(extensions, Mapping) and isinstance(extensions.get(TASKS_EXTENSION), Mapping)

    def _retry_version(self, call: _Call, message: ErrorResponse) -> bool:
        """2026-07-28: a ``-32022`` whose ``supported`` names our revision gets one retry.

        A server may refuse a version it later accepts (a rolling upgrade, a
        load balancer between releases); the retry carries the same params under
        a fresh id.  Otherwise the server's error reaches the caller as it is,
        its ``supported`` list included.
        """
        if not self.modern or message.code != UNSUPPORTED_PROTOCOL_VERSION or call.version_retried:
            return False
        data = message.data if isinstance(message.data, Mapping) else {}
        supported = data.get("supported")
        if not isinstance(supported, list) or str(MODERN) not in supported:
            return False
        call.version_retried = True
        self._trace("version-retry", handle=call.handle, supported=supported)
        self._send_request(call.method, call.sent, handle=call.handle)
        return True

    def _abandon_wire(self, handle: int) -> None:
        if self.modern and self._stream_per_request:
            self._actions.append(AbandonStream(handle=handle))

    def _initialized(self, call: _Call, result: Mapping[str, Any]) -> None:
        self._calls.pop(call.handle, None)
        version = result.get("protocolVersion")
        rev = next((r for r in self._revisions if r == version), None)
        if rev is None:
            spoken = ", ".join(str(r) for r in self._revisions)
            self._state.failed = (
                f"the server answered initialize with protocol version {version!r}; mcpx offered "
                f"{self._offer} and speaks {spoken}"
            )
            self._actions.append(
                Failed(handle=call.handle, error={"code": INTERNAL_ERROR, "message": self._state.failed})
            )
            return
        caps = result.get("capabilities")
        info = result.get("serverInfo")
        instructions = result.get("instructions")
        self._state.revision = rev
        self._state.server_capabilities = caps if isinstance(caps, dict) else {}
        self._state.server_info = info if isinstance(info, dict) else {}
        self._state.ready = True
        self._send_notification("notifications/initialized", None)
        self._actions.append(
            Ready(
                revision=rev,
                capabilities=self._state.server_capabilities,
                server_info=self._state.server_info,
                instructions=instructions if isinstance(instructions, str) else None,
            )
        )

    def _server_request(self, req: Request) -> None:
        if self.modern and not self._answer_modern_requests:
            self._trace("modern-server-request-ignored", method=req.method)
            return  # 2026-07-28 has no server-to-client requests: not answered
        if req.method == "ping":
            self._emit(Response(id=req.id, result=self._result({})).to_obj())
            return
        rev = self._state.revision or NEWEST_LEGACY
        rule = method_rule(req.method, sender=Sender.SERVER)
        needs = _QUESTION_CAPABILITY.get(req.method)
        problem = None
        if rule is None or needs is None:
            problem = f"Method not found: {req.method}"
        elif not rule.defined_in(rev) and not self.modern:
            problem = f"Method not found: {req.method} is not a server request in MCP {rev}"
        elif needs not in self._declared(rev):
            problem = f"Method not found: this client did not declare {needs}"
        if problem is not None:
            self._emit(ErrorResponse(id=req.id, code=METHOD_NOT_FOUND, message=problem).to_obj())
            return
        self._server_requests.add(req.id)
        self._actions.append(ServerRequest(request_id=req.id, method=req.method, params=req.params or {}))

    def _server_notification(self, note: Notification) -> None:
        params = note.params or {}
        if note.method == "notifications/cancelled":
            request_id = params.get("requestId")
            if request_id in self._server_requests:
                self._server_requests.discard(request_id)
                reason = params.get("reason")
                self._actions.append(
                    ServerRequestCancelled(
                        request_id=request_id, reason=reason if isinstance(reason, str) else None
                    )
                )
            return  # a cancel naming anything else is ignored
        if note.method == "notifications/progress":
            token = params.get("progressToken")
            handle = self._by_token.get(token) if isinstance(token, str) else None
            call = self._calls.get(handle) if handle is not None else None
            progress = params.get("progress")
            if call is None or not isinstance(progress, int | float) or isinstance(progress, bool):
                return
            if call.last_progress is not None and not progress > call.last_progress:
                return  # never backwards
            call.last_progress = progress
            total = params.get("total")
            message = params.get("message")
            self._actions.append(
                Progress(
                    handle=call.handle,
                    progress=progress,
                    total=total if isinstance(total, int | float) and not isinstance(total, bool) else None,
                    message=message if isinstance(message, str) else None,
                )
            )
            return
        if note.method == "notifications/tasks/status":
            return  # mcpx polls task state rather than tracking it (spec/client.md §4)
        self._actions.append(ServerNotification(method=note.method, params=params))

    def _trace(self, event: str, **detail: Any) -> None:
        if self._trace_on:
            self._actions.append(Trace(event=event, detail=detail))
