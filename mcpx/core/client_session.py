"""The client session: mcpx talking to one upstream server, both eras, as a pure state machine.

The mirror image of ``server_session`` (basic/lifecycle up to 2025-11-25;
2026-07-28 basic/index, basic/patterns/mrtr and basic/patterns/subscriptions;
spec/client.md §1–§5):

* **Legacy servers negotiate once.**  ``start()`` sends ``initialize``
  offering one revision (the newest legacy one by default); the server's
  answer must name a revision mcpx speaks, else the session fails with a
  message saying which it offered.  ``notifications/initialized`` follows
  and the session is READY; requests before that are a ``LocalProtocolError``.
* **2026-07-28 servers restate everything.**  There is no handshake; every
  request carries ``_meta`` with the protocol version, the client's
  capabilities (cut to 2026-07-28) and its ``clientInfo``.
* **Ids are the core's.**  Requests get ids from a counter of this session, so
  responses are matched by (connection, id) — a session is one connection —
  and never by id alone.  The application holds a *handle*: the first id of
  the call.  A call that is answered ``input_required`` keeps its handle across
  retries, while each retry goes out with a fresh id.
* **Questions from the server, one shape.**  A legacy server's
  ``elicitation/create``, ``sampling/createMessage`` and ``roots/list``
  requests arrive as ``ServerRequest``; a 2026-07-28 result with
  ``resultType: "input_required"`` arrives as ``InputRequired``.  Whoever
  answers them (the resolver) sees the same method and params either way;
  ``resume`` sends the retry with ``inputResponses`` and the ``requestState``
  exactly as received.  A server request the client did not declare the
  capability for, or that its revision lacks, is answered ``-32601`` here.
  A request from a 2026-07-28 server is not answered at all (that revision
  has no server-to-client requests) unless ``answer_modern_requests``; then
  the answer carries ``resultType: "complete"``, as every 2026-07-28 result must.
* **Results are terminal unless they say otherwise.**  A missing
  ``resultType`` (every legacy server) is ``"complete"``; an unknown one is a
  failure of that call, never a guess.  ``"task"`` (a CreateTaskResult of the
  tasks extension) is known only to a call that declared that extension in
  its own capabilities; it completes the call, and following the task
  (``tasks/get``, ``tasks/update``) is up to the application.
* **Cancellation** is ``notifications/cancelled`` — except for a 2026-07-28
  request on a transport with a stream per request (Streamable HTTP), where
  it is closing that stream (``AbandonStream``).  A server's
  ``notifications/cancelled`` for a request it sent withdraws it.
* **Progress** tokens are the session's own (``mcpx-<n>``), unique on the
  connection; reports for a call that has ended, or that do not increase,
  are dropped.

Inputs: ``start``, ``request``, ``resume``, ``refuse_round``, ``cancel``,
``answer``, ``answer_error``, ``notify``, ``receive_json``, ``receive_eof``.  Outputs:
``next_actions()`` after each.

Modules: the session's inputs are here; beside it, ``client_events`` holds
the events it gives its application (``Ready``, ``Completed``, ``Failed``,
``InputRequired``, ``Progress``, ``ServerRequest``, …) and
``client_session_base`` the layer ``ClientSession`` stands on: the records,
every field (``_ClientSessionBase.__init__``), and the internals every
input ends in (sending, reading the server's messages, finishing calls).
Every public name is importable from this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .actions import build_send
from .client_events import (
    AbandonStream,
    ClientAction,
    Completed,
    Failed,
    InputRequired,
    MessageTooLarge,
    Progress,
    Ready,
    ServerNotification,
    ServerRequest,
    ServerRequestCancelled,
)
from .client_session_base import _Call, _ClientSessionBase
from .errors import INTERNAL_ERROR, INVALID_PARAMS, LocalProtocolError
from .jsonrpc import ErrorResponse, InvalidMessage, Notification, Request, RequestId, Response, parse_message
from .revisions import Revision

__all__ = [
    "AbandonStream",
    "ClientAction",
    "ClientSession",
    "Completed",
    "Failed",
    "InputRequired",
    "MessageTooLarge",
    "Progress",
    "Ready",
    "ServerNotification",
    "ServerRequest",
    "ServerRequestCancelled",
]


class ClientSession(_ClientSessionBase):
    """The client side of one connection to an upstream server; see the module docstring."""

    @property
    def ready(self) -> bool:
        return self._state.ready and not self._state.closed

    @property
    def closed(self) -> bool:
        """The server's output ended (``receive_eof``)."""
        return self._state.closed

    @property
    def revision(self) -> Revision | None:
        """The revision requests are sent under (negotiated, or 2026-07-28)."""
        return self._state.revision

    @property
    def server_capabilities(self) -> Mapping[str, Any]:
        """What the server declared: from ``initialize``, or (2026-07-28) the last ``server/discover``."""
        return self._state.server_capabilities

    @property
    def capabilities_known(self) -> bool:
        """Whether ``server_capabilities`` is the server's word: a legacy session once ready, a
        2026-07-28 one once ``server/discover`` was answered (or ``adopt_discovery`` told it)."""
        return self._state.ready if not self.modern else self._state.discovered

    def adopt_discovery(self, capabilities: Mapping[str, Any]) -> None:
        """2026-07-28: what ``server/discover`` answered before this session (the era probe asked it)."""
        if not self.modern:
            raise LocalProtocolError("adopt_discovery is for a 2026-07-28 session")
        self._state.server_capabilities = dict(capabilities)
        self._state.discovered = True

    @property
    def server_info(self) -> Mapping[str, Any]:
        return self._state.server_info

    @property
    def in_flight(self) -> int:
        return len(self._calls)

    def next_actions(self) -> list[ClientAction]:
        actions, self._actions = self._actions, []
        return actions

    def adopt_handshake(
        self,
        *,
        revision: Revision,
        capabilities: Mapping[str, Any],
        server_info: Mapping[str, Any],
        instructions: str | None = None,
    ) -> None:
        """Legacy: go on from a handshake someone else made on this connection (the era probe's).

        ``initialize`` was answered with ``revision``, ``capabilities`` and
        ``server_info``, and ``notifications/initialized`` was sent (MCP
        2025-11-25, Lifecycle, Initialization): nothing is sent now; ``Ready``
        is queued, as after a handshake of the session's own.  Instead of
        ``start``; a ``LocalProtocolError`` (nothing changed) on a modern or
        started session, or for a revision the session does not speak.
        """
        if self.modern or self._state.started:
            raise LocalProtocolError("adopt_handshake is for a legacy session that has not started")
        if revision not in self._revisions:
            raise LocalProtocolError(f"revision {revision} is not among the revisions this client speaks")
        self._state.started = True
        self._state.revision = revision
        self._state.server_capabilities = dict(capabilities)
        self._state.server_info = dict(server_info)
        self._state.ready = True
        self._actions.append(
            Ready(
                revision=revision,
                capabilities=self._state.server_capabilities,
                server_info=self._state.server_info,
                instructions=instructions,
            )
        )

    def start(self) -> int:
        """Legacy: send ``initialize``; returns its handle (``Ready`` or ``Failed`` follows)."""
        if self.modern:
            raise LocalProtocolError("a 2026-07-28 session has no handshake; send requests directly")
        if self._state.started:
            raise LocalProtocolError("start() was called already")
        self._state.started = True
        params = {
            "protocolVersion": str(self._offer),
            "capabilities": self._declared(self._offer),
            "clientInfo": self.client_info,
        }
        handle = self._send_request("initialize", params, handle=None)
        self._init_id = handle
        self._calls[handle] = _Call(handle=handle, method="initialize", params=params)
        return handle

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        progress: bool = False,
        log_level: str | None = None,
        capabilities: Mapping[str, Any] | None = None,
    ) -> int:
        """Send any request; returns the call's handle (``ValueError``, and nothing sent, for params JSON cannot hold).

        ``progress`` asks for progress reports (a token of the session's
        own); ``log_level`` is the 2026-07-28 per-request level.
        ``capabilities`` are the client capabilities this one request
        declares, on its retries too (2026-07-28 restates them on every
        request; a gateway narrows them to its caller's).  ``None`` declares
        the session's.  Legacy sessions declared theirs once, at
        ``initialize``, and ignore it.  ``capabilities`` is read, not
        copied: it must not change once passed (a gateway passes one mapping
        per host capability set, and the cut of it is kept by identity).
        """
        handle, payload = self._new_request(method, params, progress, log_level, capabilities)
        self._actions.append(build_send(payload, handle, False, None))
        return handle

    def request_now(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        progress: bool = False,
        log_level: str | None = None,
        capabilities: Mapping[str, Any] | None = None,
    ) -> tuple[int, bytes] | None:
        """``request``, its bytes handed back to write rather than queued as ``Send``: ``(handle, payload)``.

        Only when nothing is queued before it (its bytes then go in the
        order ``request`` would have sent them); otherwise ``None``, with
        nothing done: use ``request``.  For a machine wrapping this one (the
        router) on every call: no action to build and drain.  Raises as
        ``request`` does.
        """
        if self._actions:
            return None
        return self._new_request(method, params, progress, log_level, capabilities)

    def _new_request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        progress: bool,
        log_level: str | None,
        capabilities: Mapping[str, Any] | None,
    ) -> tuple[int, bytes]:
        """A call put on the wire: its handle and its bytes, which the caller sends (``request``: queued)."""
        state = self._state
        if state.closed or state.failed is not None or not state.ready:
            self._check_open()  # raises, saying why
            raise LocalProtocolError("the session is not ready: start() and wait for Ready first")
        given = dict(params) if params else {}
        token = f"mcpx-{next(self._tokens)}" if progress else None
        # Every field in order (no default_factory run for ``sent``, which is set next).
        call = _Call(0, method, given, token, None, log_level, 0, True, given, False, capabilities)
        call.sent = self._wire_params(call)
        handle, payload = self._wire_request(method, call.sent, None)
        call.handle = handle
        self._calls[handle] = call
        if call.progress_token is not None:
            self._by_token[call.progress_token] = handle
        return handle, payload

    def resume(self, handle: int, responses: Mapping[str, Any], *, request_state: str | None = None) -> None:
        """Answer an ``InputRequired``: the retry goes out with a fresh id.

        ``request_state`` must be the one ``InputRequired`` carried (pass it
        back untouched, or leave ``None`` when there was none).
        """
        call = self._calls.get(handle)
        if call is None or call.waiting:
            raise LocalProtocolError(f"call {handle} is not waiting for answers")
        call.waiting = True
        params = dict(self._wire_params(call))  # its own: call.params stay as the caller gave them
        params["inputResponses"] = dict(responses)
        if request_state is not None:
            params["requestState"] = request_state  # echoed exactly as the server sent it
        call.sent = params
        try:
            self._send_request(call.method, params, handle=handle)
        except MessageTooLarge as exc:  # the answers made it too long to send: the call ends here
            self._end(handle)
            self._actions.append(Failed(handle=handle, error={"code": INVALID_PARAMS, "message": str(exc)}))

    def awaiting_answers(self, handle: int) -> bool:
        """Whether call ``handle`` is open and waits for ``resume`` (or ``refuse_round``).

        False once the call was cancelled, ended with the connection, or resumed.
        """
        call = self._calls.get(handle)
        return call is not None and not call.waiting

    def refuse_round(self, handle: int, error: Mapping[str, Any]) -> None:
        """The application cannot answer an ``InputRequired``: the call ends with ``Failed(error)``.

        2026-07-28 asks a client to produce every requested input before it
        retries, and an ``inputResponses`` value is a result (there is no
        error shape for one key), so an unanswered question ends the call
        instead of a retry that lacks it.  Nothing goes on the wire: the
        server's request already ended with its ``input_required`` result.
        """
        if not self.awaiting_answers(handle):
            raise LocalProtocolError(f"call {handle} is not waiting for answers")
        self._end(handle)
        self._actions.append(Failed(handle=handle, error=dict(error)))

    def cancel(self, handle: int, reason: str | None = None) -> None:
        """The caller gave up on ``handle``: tell the server; nothing more is reported for it."""
        wire_ids = self._wire_ids(handle)
        call = self._end(handle)
        if call is None:
            return
        if call.method == "initialize":
            return  # initialize cannot be cancelled (every revision says so)
        if self.modern and self._stream_per_request:
            self._actions.append(AbandonStream(handle=handle))
            return
        if call.waiting and wire_ids:
            params: dict[str, Any] = {"requestId": wire_ids[-1]}
            if reason is not None:
                params["reason"] = reason
            self._send_notification("notifications/cancelled", params)

    def answer(self, request_id: RequestId, result: Mapping[str, Any]) -> None:
        """Answer a ``ServerRequest`` (dropped if the server withdrew it meanwhile)."""
        if request_id in self._server_requests:
            self._server_requests.discard(request_id)
            self._emit(Response(id=request_id, result=self._result(result)).to_obj())

    def answer_error(self, request_id: RequestId, code: int, message: str, data: Any = None) -> None:
        if request_id in self._server_requests:
            self._server_requests.discard(request_id)
            self._emit(ErrorResponse(id=request_id, code=code, message=message, data=data).to_obj())

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        self._check_open()
        self._send_notification(method, dict(params) if params is not None else None)

    def receive_json(self, obj: Any) -> None:
        """One decoded JSON value from the server."""
        if self._state.closed:
            return
        if type(obj) is dict and len(obj) == 3 and obj.get("jsonrpc") == "2.0":
            # The usual message, a result: exactly these three members, as parse_message would
            # accept them (an integer id, an object result), taken without building a Response.
            result = obj.get("result")
            request_id = obj.get("id")
            if type(result) is dict and type(request_id) is int:
                handle = self._by_id.pop(request_id, None)
                if handle is None:
                    self._trace("unmatched-response", id=request_id)
                else:
                    self._answered(handle, result)
                return
        if isinstance(obj, list):
            for item in obj:  # a 2025-03-26 batch of responses or requests
                self.receive_json(item)
            return
        try:
            message = parse_message(obj)
        except InvalidMessage as exc:
            self._trace("invalid-message", reason=exc.message)
            return
        if isinstance(message, Request):
            self._server_request(message)
        elif isinstance(message, Notification):
            self._server_notification(message)
        else:
            self._response(message)

    def take_answer(self, obj: Any) -> tuple[int, Mapping[str, Any]] | None:
        """``receive_json`` for the usual message, a call's plain result, handed back: ``(handle, result)``.

        What ``receive_json`` would report as ``Completed(handle, result)``,
        with the call forgotten the same way, when ``obj`` is exactly
        ``{jsonrpc, id, result}`` answering an open call (not ``initialize``)
        with a result of no ``resultType`` or ``"complete"`` (and not
        ``server/discover``'s, which the session keeps), and nothing is
        queued before it.  Otherwise ``None``, with nothing done: give
        ``obj`` to ``receive_json``.  For a machine wrapping this one (the
        router), on every answer: no action to build and drain.
        """
        if type(obj) is not dict or len(obj) != 3 or self._actions or self._state.closed:
            return None
        result = obj.get("result")
        request_id = obj.get("id")
        if type(result) is not dict or type(request_id) is not int or obj.get("jsonrpc") != "2.0":
            return None
        handle = self._by_id.get(request_id)
        if handle is None or handle == self._init_id:
            return None
        call = self._calls.get(handle)
        if call is None or call.method == "server/discover":
            return None  # server/discover tells the session what it keeps, as initialize does: receive_json
        kind = result.get("resultType")
        if kind is not None and kind != "complete":
            return None  # a round, a task, or a kind the session refuses: receive_json decides
        del self._by_id[request_id]
        self._end(handle)
        return handle, result

    def receive_eof(self, reason: str = "the server closed the connection before answering") -> None:
        """The server went away (or forgot the session): every call still open fails with ``reason``."""
        if self._state.closed:
            return
        self._state.closed = True
        for handle in list(self._calls):
            self._fail(handle, INTERNAL_ERROR, reason)
