"""The server session: one downstream peer, both eras, as a pure state machine.

Rules (basic/lifecycle up to 2025-11-25; 2026-07-28 basic/index and
basic/versioning; each revision's cancellation and progress pages;
spec/messages.md §1–§4):

* **Legacy peers negotiate once.**  ``initialize`` picks the revision for the
  connection: the one the client asked for when mcpx speaks it, otherwise a
  counter-offer of the newest legacy revision mcpx speaks — never an error.
  ``notifications/initialized`` moves the connection to READY.  A second
  ``initialize`` is ``-32600``.
* **Modern peers restate everything.**  A request whose ``params._meta``
  carries ``io.modelcontextprotocol/protocolVersion`` (or the capabilities
  key) is judged on its own, whatever the connection negotiated: both keys
  must be present (``-32602`` otherwise), the version must be one mcpx serves
  per request (``-32022`` with ``data.supported`` otherwise), and nothing is
  remembered for the next request.  ``server/discover`` without ``_meta`` is
  ``-32602``.
* **A request that declared nothing** on a connection that never
  negotiated is judged as 2024-11-05, the revision every newer one
  understands (spec/revision-conflicts.md, "A request that declared nothing
  is 2024-11-05": guessing downward is recoverable).
* **Removal is method-not-found.**  A method the peer's revision removed
  (``initialize``, ``ping``, ``logging/setLevel``, ``resources/subscribe``,
  ``resources/unsubscribe``, ``tasks/result``, ``tasks/list`` for
  2026-07-28) is ``-32601``; every older revision is answered.
* **Accept liberally.**  A method introduced after the peer's revision that
  mcpx implements (``subscriptions/listen``, core ``tasks/*``) is answered,
  in the shape of the revision that defines it; it is declared only under
  that revision.
* **Send conservatively.**  Every result is built in the newest shape and
  cut to the peer's revision by ``downgrade``; capabilities are declared per
  revision; progress only for a request that asked with a progress token, never
  backwards; log messages only at or above the level the request (2026-07-28)
  or the connection (``logging/setLevel``) asked for.
* Server-initiated request ids are negative, so they can never collide with
  the peer's own ids in a table keyed by id.
* ``notifications/cancelled`` cancels the named request; nothing more is sent
  for it.  ``initialize`` cannot be cancelled.
* **End of input** gives requests in flight ``drain`` seconds to answer, then
  cancels them; open ``subscriptions/listen`` requests get their final result.

Theory of operation: the connection-level legacy state lives in
``_TRANSITIONS``, a table from (state, input) to (effect, next state); a
missing pair is a ``LocalProtocolError``.  Everything per request lives in
``_InFlight`` records keyed by an opaque integer token.  Inputs are
``receive_message``, ``receive_batch``, ``receive_invalid``, ``receive_eof``
and ``handle_timer``, plus the application's ``respond``/``respond_error``/
``progress``/``log``/``notify_*``.  Outputs are drained with
``next_actions()`` after each input.

Layers: ``ServerSession`` is one machine written in layers, one module per
subject, each layer a subclass of the one below it (no layer adds state of
its own: ``_SessionBase.__init__`` holds all of it, so a reader finds every
field in one place):

==================== ======================================================
``server_base``      the records (``_InFlight``, ``_Ask``, ``_Judgement``),
                     ``ServerConfig``, ``ToolHints``, the session's fields
``server_output``    what the application asks the session to send
                     (``respond``, ``progress``, ``log``, ``notify_*``,
                     ``send_request``) and the output every layer uses
``server_questions`` questions a call puts to its client, both eras
``server_tasks``     calls that run as tasks, ``tasks/*``
``server_methods``   the methods the session answers itself
``server_judging``   which revision a request is judged under
``server_session``   the inputs, the transition table, a request's way
==================== ======================================================

A layer that calls a method of a later one declares it under
``TYPE_CHECKING`` at the top of its class: that list is what the subject
needs from the rest.  This file is longer than the others (about 800
lines) for a reason: the rules above, the transition table and the way of
a request (``_serve``, and ``_receive_plain``, its quick form that nearly
every message takes) are read together, and splitting them would part the
table from the effects it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .actions import Action, CancelRequest, Close, PeerReplied, build_request
from .errors import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, LocalProtocolError, RemoteProtocolError
from .jsonrpc import _EMPTY as _NO_META
from .jsonrpc import (
    ErrorResponse,
    InvalidMessage,
    Message,
    Notification,
    Request,
    Response,
    is_request_id,
    parse_message,
)
from .revisions import (
    EXTENSION_METHODS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    OLDEST,
    TASKS_EXTENSION,
    Revision,
)
from .rounds import MRTR_METHODS
from .server_base import (
    _CLOSED,
    _CLOSING,
    _INIT,
    _NEW,
    _READY,
    ConnectionState,
    ServerConfig,
    ToolHints,
    _Batch,
    _InFlight,
    _Input,
    _Judgement,
)
from .server_judging import _Judging
from .server_output import _LEVEL_RANK
from .server_questions import _answers_shape

__all__ = ["ConnectionState", "ServerConfig", "ServerSession", "ToolHints"]


_TRANSITIONS: Final[dict[tuple[ConnectionState, _Input], tuple[str, ConnectionState]]] = {
    (_NEW, _Input.INITIALIZE): ("_negotiate", _INIT),
    (_NEW, _Input.BAD_INITIALIZE): ("_reject_initialize", _NEW),
    (_NEW, _Input.INITIALIZED): ("_ignore", _NEW),  # premature: nothing was negotiated
    (_NEW, _Input.REQUEST): ("_serve", _NEW),
    (_NEW, _Input.NOTIFICATION): ("_notification", _NEW),
    (_NEW, _Input.RESPONSE): ("_peer_response", _NEW),
    (_NEW, _Input.END_OF_INPUT): ("_start_drain", _CLOSING),
    (_INIT, _Input.INITIALIZE): ("_already_initialized", _INIT),
    (_INIT, _Input.BAD_INITIALIZE): ("_already_initialized", _INIT),
    (_INIT, _Input.INITIALIZED): ("_ignore", _READY),
    (_INIT, _Input.REQUEST): ("_serve", _INIT),
    (_INIT, _Input.NOTIFICATION): ("_notification", _INIT),
    (_INIT, _Input.RESPONSE): ("_peer_response", _INIT),
    (_INIT, _Input.END_OF_INPUT): ("_start_drain", _CLOSING),
    (_READY, _Input.INITIALIZE): ("_already_initialized", _READY),
    (_READY, _Input.BAD_INITIALIZE): ("_already_initialized", _READY),
    (_READY, _Input.INITIALIZED): ("_ignore", _READY),
    (_READY, _Input.REQUEST): ("_serve", _READY),
    (_READY, _Input.NOTIFICATION): ("_notification", _READY),
    (_READY, _Input.RESPONSE): ("_peer_response", _READY),
    (_READY, _Input.END_OF_INPUT): ("_start_drain", _CLOSING),
    (_CLOSING, _Input.DRAINED): ("_closed", _CLOSED),
    (_NEW, _Input.TERMINATE): ("_terminate", _CLOSED),
    (_INIT, _Input.TERMINATE): ("_terminate", _CLOSED),
    (_READY, _Input.TERMINATE): ("_terminate", _CLOSED),
    (_CLOSING, _Input.TERMINATE): ("_terminate", _CLOSED),
}
"""Connection-level transitions.  Requests are judged one by one in ``_serve``;
what is missing here (input after end of input, a second end) is illegal."""


_SERVING: Final = frozenset(
    state
    for (state, event), (effect, new_state) in _TRANSITIONS.items()
    if event is _Input.REQUEST and effect == "_serve" and new_state is state
)
"""The states in which a request is served and the state stays as it is (``_receive_plain``)."""


_UNSEEN: Final[Any] = object()


# Methods the session answers itself; everything else legal goes to the application.
_CORE_METHODS: Final = frozenset(
    {
        "ping",
        "server/discover",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "subscriptions/listen",
        "tasks/get",
        "tasks/result",
        "tasks/cancel",
        "tasks/list",
        "tasks/update",
    }
)


class ServerSession(_Judging):
    """The server side of one connection; see the module docstring for the rules.

    Drive it with ``receive_message``/``receive_batch``/``receive_invalid``/
    ``receive_eof``; after each call (and after ``respond``, ``progress``,
    ``log``, ``notify_*``) drain ``next_actions()`` and carry them out.
    ``newline=True`` appends ``\\n`` to every payload (stdio framing).
    ``can_push`` says whether this connection can carry unsolicited messages
    (a stdio pipe can; a sessionless HTTP POST cannot) — without it, legacy
    ``listChanged``/``subscribe`` are not declared.
    """

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def negotiated_revision(self) -> Revision | None:
        """The revision ``initialize`` agreed on, or ``None`` before (or without) it."""
        return self._negotiated

    @property
    def in_flight(self) -> int:
        """Requests received and not yet answered (including open listens)."""
        return len(self._inflight)

    def handshake(self) -> dict[str, Any] | None:
        """What a legacy peer's ``initialize`` settled, once it is READY; ``None`` before, and for 2026-07-28.

        ``protocolVersion`` (the negotiated revision), ``capabilities`` and
        ``clientInfo``: what ``resume`` needs to go on in another session.
        """
        if self._state is not ConnectionState.READY or self._negotiated is None:
            return None
        found: dict[str, Any] = {
            "protocolVersion": str(self._negotiated),
            "capabilities": dict(self._client_capabilities),
        }
        if self._client_info is not None:
            found["clientInfo"] = dict(self._client_info)
        return found

    def resume(self, handshake: Mapping[str, Any]) -> None:
        """Start READY, on a ``handshake()`` another session settled with the same peer; nothing is sent.

        For a server that takes over a connection mid-life (a restarted
        daemon serving a host that initialized with the one before): the
        peer must not be asked to initialize again.  Only a NEW session can
        resume, and only on a legacy revision this server speaks.
        """
        if self._state is not ConnectionState.NEW:
            raise LocalProtocolError(f"resume() needs a new session, not one in state {self._state.value}")
        revision = next((r for r in self._legacy if r == handshake.get("protocolVersion")), None)
        if revision is None:
            raise LocalProtocolError(
                f"cannot resume on {handshake.get('protocolVersion')!r}: not spoken here"
            )
        caps = handshake.get("capabilities")
        info = handshake.get("clientInfo")
        self._client_capabilities = dict(caps) if isinstance(caps, Mapping) else {}
        self._client_info = dict(info) if isinstance(info, Mapping) else None
        self._negotiated = revision
        self._state = ConnectionState.READY
        self._trace("resumed", revision=str(revision))

    def capabilities_for(self, rev: Revision) -> Mapping[str, Any]:
        """The server capabilities this session declares to a peer on ``rev``."""
        caps: Mapping[str, Any] = self._caps[rev]
        return caps

    def next_actions(self) -> list[Action]:
        """Everything queued since the last call, in order.  Call after every input."""
        self._sync_watch()
        actions, self._actions = self._actions, []
        return actions

    def get_timer(self) -> float | None:
        """When ``handle_timer`` must next be called, or ``None``."""
        if (
            not self._asks
            and not self._promotions
            and self._state is not _CLOSING
            and not (self._owns_rounds and self._rounds is not None and self._rounds.holds_calls)
        ):
            return None  # the usual answer, after every input: nothing timed
        times = [a.deadline for a in self._asks.values()]
        times.extend(self._promotions.values())
        if self._state is _CLOSING and self._drain_deadline is not None:
            times.append(self._drain_deadline)
        if self._owns_rounds and self._rounds is not None:
            parked = self._rounds.get_timer()
            if parked is not None:
                times.append(parked)
        return min(times, default=None)

    def advance(self, now: float) -> None:
        """Tell the session the time (the monotonic clock every machine takes) before calls that take none."""
        self._now = max(self._now, now)

    def receive_message(
        self,
        message: Message,
        *,
        stream: int | None = None,
        revision: Revision | None = None,
        now: float,
    ) -> None:
        """One message from the peer.

        A transport that carries each request on its own stream (Streamable
        HTTP) passes ``stream``: every reply to this input names it.  ``revision``
        is what the transport says the peer speaks (HTTP's
        ``MCP-Protocol-Version``): for a legacy revision it judges legacy
        requests when this session negotiated nothing; a per-request revision
        makes the request answer to 2026-07-28's rules even without ``_meta``.
        ``now`` (monotonic) checks a ``requestState``'s expiry, through the round table's ``wall_offset``.
        """
        self.advance(now)
        outer = self._enter_input(stream, revision)
        try:
            self._receive(message, None)
        finally:
            self._input_stream, self._input_revision = outer

    def receive_json(
        self,
        obj: Any,
        *,
        stream: int | None = None,
        revision: Revision | None = None,
        now: float,
    ) -> None:
        """One decoded JSON value: a message or (2025-03-26) a batch; ``now`` as ``receive_message``."""
        self.advance(now)
        if (
            type(obj) is dict
            and self._plain_ok
            # The transport's revision (an HTTP header) changes nothing for a legacy request on a
            # negotiated session: _peer_revision prefers the negotiated one, _modern_shaped looks
            # only at a modern header.  Anything else takes the general way.
            and (revision is None or (self._negotiated is not None and not revision.is_modern))
            and self._receive_plain(obj, stream)
        ):
            return
        if isinstance(obj, list):
            self.receive_batch(obj, stream=stream, revision=revision)
            return
        try:
            message = parse_message(obj)
        except InvalidMessage as exc:
            self.receive_invalid(exc, stream=stream, revision=revision)
            return
        self.receive_message(message, stream=stream, revision=revision, now=now)

    def receive_invalid(
        self, error: RemoteProtocolError, *, stream: int | None = None, revision: Revision | None = None
    ) -> None:
        """A frame that could not be read: answer it and carry on."""
        self._check_open()
        outer = self._enter_input(stream, revision)
        try:
            request_id = error.request_id if isinstance(error, InvalidMessage) else None
            self._send_error(
                request_id, error.code, error.message, error.data, self._peer_revision(), self._input_stream
            )
        finally:
            self._input_stream, self._input_revision = outer

    def receive_batch(
        self, items: list[Any], *, stream: int | None = None, revision: Revision | None = None
    ) -> None:
        """A JSON-RPC batch: defined by 2025-03-26 only (2025-03-26 basic/index)."""
        self._check_open()
        outer = self._enter_input(stream, revision)
        try:
            self._batch(items)
        finally:
            self._input_stream, self._input_revision = outer

    def _batch(self, items: list[Any]) -> None:
        rev = self._peer_revision()
        if rev is not Revision.V2025_03_26:
            negotiated = f" (this connection negotiated {rev})" if self._negotiated else ""
            self._send_error(
                None,
                INVALID_REQUEST,
                f"JSON-RPC batches are defined only in MCP 2025-03-26{negotiated}; send each message on its own",
                None,
                rev,
                self._input_stream,
            )
            return
        if not items:
            self._send_error(
                None, INVALID_REQUEST, "Invalid Request: empty batch", None, rev, self._input_stream
            )
            return
        batch = _Batch(stream=self._reply_stream(), pending=0)
        messages: list[Message] = []
        for item in items:
            try:
                message = parse_message(item)
            except InvalidMessage as exc:
                error = ErrorResponse(
                    id=self._unambiguous(exc.request_id), code=exc.code, message=exc.message
                )
                batch.replies.append(error.to_obj())
                continue
            if isinstance(message, Request) and message.method == "initialize":
                error = ErrorResponse(
                    id=self._unambiguous(message.id),
                    code=INVALID_REQUEST,
                    message="initialize must not be part of a batch",
                )
                batch.replies.append(error.to_obj())
                continue
            messages.append(message)
        # Count every request first, so the batch is answered only once all are.
        batch.pending = sum(isinstance(m, Request) for m in messages)
        for message in messages:
            self._receive(message, batch)
        self._flush_batch(batch)

    def receive_eof(self, now: float) -> None:
        """The peer closed its side: drain what is in flight, then close."""
        self._transition(_Input.END_OF_INPUT, now)

    def abandon(self, stream: int) -> None:
        """The transport lost ``stream``: cancel every request whose replies go on it.

        For 2026-07-28 over HTTP, closing a request's stream is its
        cancellation; the caller decides when a lost stream means that (a
        legacy session's dropped POST does not).
        """
        for rec in [r for r in self._inflight.values() if r.stream == stream]:
            self._trace("abandoned", request_id=rec.id)
            self._cancel(rec, "the client closed the stream")
        self._maybe_drained()

    def terminate(self) -> None:
        """End the session now (HTTP ``DELETE``, a lost HTTP+SSE stream): cancel everything, close."""
        self._transition(_Input.TERMINATE)

    def handle_timer(self, now: float) -> None:
        """Call when ``get_timer()``'s deadline has passed."""
        self.advance(now)
        for ask in [a for a in self._asks.values() if now >= a.deadline]:
            self._ask_timed_out(ask)
        for token, due in list(self._promotions.items()):
            if now >= due:
                del self._promotions[token]
                rec = self._inflight.get(token)
                if rec is not None:
                    self._start_task(rec)
        if self._owns_rounds and self._rounds is not None:
            for parked in self._rounds.expire(now):
                self._trace("call-abandoned", token=parked.token, round=parked.round)
                self._cancelled_tokens.add(parked.token)
                self._actions.append(
                    CancelRequest(token=parked.token, reason="the client did not come back with its answers")
                )
        if self._state is _CLOSING and self._drain_deadline is not None and now >= self._drain_deadline:
            for rec in list(self._inflight.values()):
                self._cancel(rec, "the peer closed its input and the drain time ran out")
            self._transition(_Input.DRAINED, now)

    def _check_open(self) -> None:
        if self._state in (_CLOSING, _CLOSED):
            raise LocalProtocolError("input after end of input")

    def _receive(self, message: Message, batch: _Batch | None) -> None:
        self._check_open()
        if isinstance(message, Request):
            if self._is_legacy_initialize(message):
                ok = self._initialize_problem(message) is None
                self._transition(_Input.INITIALIZE if ok else _Input.BAD_INITIALIZE, message)
            else:
                self._transition(_Input.REQUEST, message, batch)
        elif isinstance(message, Notification):
            kind = (
                _Input.INITIALIZED if message.method == "notifications/initialized" else _Input.NOTIFICATION
            )
            self._transition(kind, message)
        else:
            self._transition(_Input.RESPONSE, message)

    def _transition(self, event: _Input, *args: Any) -> None:
        try:
            effect, new_state = _TRANSITIONS[(self._state, event)]
        except KeyError:
            raise LocalProtocolError(f"{event.value} is not allowed in state {self._state.value}") from None
        old_state = self._state
        self._state = new_state
        try:
            getattr(self, effect)(*args)
        except BaseException:
            self._state = old_state
            raise

    @staticmethod
    def _is_legacy_initialize(message: Request) -> bool:
        if message.method != "initialize":
            return False
        meta = message.meta
        return META_PROTOCOL_VERSION not in meta and META_CLIENT_CAPABILITIES not in meta

    def _ignore(self, *_: Any) -> None:
        pass

    def _initialize_problem(self, req: Request) -> tuple[int, str, Any] | None:
        """Why this legacy ``initialize`` cannot be accepted, or ``None``."""
        if req.id in self._by_peer_id:
            return (INVALID_REQUEST, f"request id {req.id!r} is already in use by a request in flight", None)
        if not isinstance((req.params or {}).get("protocolVersion"), str):
            return (
                INVALID_PARAMS,
                "initialize needs params.protocolVersion, a string naming the revision the client speaks",
                None,
            )
        if not self._legacy:
            return (
                METHOD_NOT_FOUND,
                "this server speaks only per-request revisions; send server/discover with _meta instead",
                {"supported": [str(r) for r in self._modern]},
            )
        return None

    def _reject_initialize(self, req: Request) -> None:
        problem = self._initialize_problem(req)
        assert problem is not None
        code, message, data = problem
        self._send_error(req.id, code, message, data, OLDEST, self._reply_stream())

    def _negotiate(self, req: Request) -> None:
        params = req.params or {}
        requested = params["protocolVersion"]
        chosen = next((r for r in self._legacy if r == requested), None)
        counter_offer = chosen is None
        if chosen is None:
            chosen = self._legacy[-1]
        caps = params.get("capabilities")
        self._client_capabilities = caps if isinstance(caps, dict) else {}
        info = params.get("clientInfo")
        self._client_info = info if isinstance(info, dict) else None
        self._negotiated = chosen
        self._trace(
            "negotiated",
            requested=requested,
            chosen=str(chosen),
            counter_offer=counter_offer,
        )
        result: dict[str, Any] = {
            "protocolVersion": str(chosen),
            "capabilities": self._caps[chosen],
            "serverInfo": self._server_info[chosen],
        }
        if self.config.instructions:
            result["instructions"] = self.config.instructions
        self._emit(Response(id=req.id, result=result).to_obj(), self._reply_stream(), True)

    def _already_initialized(self, req: Request) -> None:
        self._send_error(
            req.id,
            INVALID_REQUEST,
            f"this connection already negotiated MCP {self._negotiated}; "
            "initialize is sent once per connection",
            None,
            self._negotiated or OLDEST,
            self._reply_stream(),
        )

    def _serve(self, req: Request, batch: _Batch | None = None) -> None:
        token = self._take_token()
        # Every request gets a token, answered or refused, and its replies name
        # a stream: the transport's, the batch's, or its own token.
        if batch is not None:
            stream = batch.stream
        else:
            stream = self._input_stream if self._input_stream is not None else token
        if req.id in self._by_peer_id:
            self._error_in(
                batch,
                req.id,
                INVALID_REQUEST,
                f"request id {req.id!r} is already in use by a request still in flight; ids must be unique "
                "(this error carries a null id so it is not taken for that request's answer)",
                None,
                self._peer_revision(),
                stream,
            )
            return
        try:
            judged = self._judge(req)
            rule_since = self._check_method(req.method, req.id, judged)
        except RemoteProtocolError as exc:
            self._error_in(
                batch, req.id, exc.code, exc.message, exc.data, self._attempted_revision(req), stream
            )
            return
        meta = req.meta
        params = req.params or {}
        progress_token = meta.get("progressToken")
        rec = _InFlight(
            token,
            req.id,
            req.method,
            judged.revision,
            max(judged.revision, rule_since),
            judged.modern,
            stream,
            req.method not in _CORE_METHODS,
            progress_token if is_request_id(progress_token) else None,
            judged.log_level,
            batch,
            params,
            judged.capabilities,
        )
        if judged.modern and req.method in MRTR_METHODS and self._rounds is not None:
            if "requestState" in params:
                self._resume(rec, req, params)
                return
            if "inputResponses" in params:
                held = params["inputResponses"]
                if not _answers_shape(held):
                    self._error_in(
                        batch,
                        req.id,
                        INVALID_PARAMS,
                        "Invalid params: inputResponses must be an object whose values are the answers' objects",
                        None,
                        rec.revision,
                        stream,
                    )
                    return
                rec.held = dict(held)  # answers sent ahead of the questions: kept for them
        if not self._admit(rec):
            return
        if rec.dispatched:
            self._actions.append(
                build_request(
                    token,
                    req.id,
                    req.method,
                    params,
                    judged.revision,
                    judged.capabilities,
                    judged.client_info,
                    judged.log_level if judged.modern else self._log_level,
                    rec.progress_token,
                    meta,
                    self._identity,
                )
            )
        else:
            self._core_request(rec, req, judged)

    def _admit(self, rec: _InFlight) -> bool:
        """Put ``rec`` in flight; ``False`` when its ``tools/call`` was refused (the error is queued).

        A ``tools/call`` passes the task gate first; a 2025-11-25 call that asked
        to run as a task is answered with its task here, before the tool runs.
        """
        if rec.method == "tools/call" and self._gated and not self._task_gate(rec, rec.params):
            return False
        token = rec.token
        self._inflight[token] = rec
        self._by_peer_id[rec.id] = token
        if rec.task_support is not None:
            self._promotions[token] = self._now + self.config.task_after
        if rec.core_task_ttl is not None:
            self._start_task(rec)  # 2025-11-25: {task} goes back before the tool runs
        return True

    def _receive_plain(self, obj: dict[str, Any], stream: int | None = None) -> bool:
        """Serve ``obj`` if it is a plain request (see above); ``False``, nothing done, otherwise.

        ``stream`` is the transport's name for the request's stream (an HTTP
        request's); ``None``: its replies name its own token, as ``_serve``'s do.
        """
        if (
            len(obj) != 4
            or self._state not in _SERVING
            or self._input_stream is not None
            or self._input_revision is not None
        ):
            return False
        request_id = obj.get("id")
        method = obj.get("method")
        params = obj.get("params")
        if (
            obj.get("jsonrpc") != "2.0"
            or type(params) is not dict
            or type(method) is not str
            or (type(request_id) is not int and type(request_id) is not str)
            or request_id in self._by_peer_id
        ):
            return False
        found = params.get("_meta")
        meta: Mapping[str, Any]
        progress_token: str | int | None = None
        if isinstance(found, dict):
            meta = found
            progress = found.get("progressToken")
            if type(progress) is str or type(progress) is int:  # is_request_id
                progress_token = progress
        else:
            meta = _NO_META
        caps: Mapping[str, Any]
        client_info: Mapping[str, Any] | None
        if found is not None and (META_PROTOCOL_VERSION in meta or META_CLIENT_CAPABILITIES in meta):
            version = meta.get(META_PROTOCOL_VERSION)
            declared = meta.get(META_CLIENT_CAPABILITIES)
            if not isinstance(version, str) or not isinstance(declared, dict):
                return False
            caps = declared
            rev = self._modern_by_name.get(version)
            level = meta.get(META_LOG_LEVEL)
            if rev is None or (level is not None and not (isinstance(level, str) and level in _LEVEL_RANK)):
                return False
            if (
                self._rounds is not None
                and method in MRTR_METHODS
                and ("requestState" in params or "inputResponses" in params)
            ):
                return False
            info = meta.get(META_CLIENT_INFO)
            modern = True
            client_info = info if isinstance(info, dict) else None
            context_level = level
        else:
            rev = self._negotiated or OLDEST
            caps = self._client_capabilities
            modern = False
            client_info = self._client_info
            level = None
            context_level = self._log_level
        routes = self._plain_routes[rev]
        shape_revision = routes.get(method, _UNSEEN)
        if shape_revision is _UNSEEN:
            shape_revision = routes[method] = self._plain_route(method, rev, modern)
        if shape_revision is None:
            return False
        token = next(self._tokens)
        rec = _InFlight(
            token,
            request_id,
            method,
            rev,
            shape_revision,
            modern,
            token if stream is None else stream,
            True,
            progress_token,
            level,
            None,
            params,
            caps,
        )
        if not self._admit(rec):
            return True
        self._actions.append(
            build_request(
                token,
                request_id,
                method,
                params,
                rev,
                caps,
                client_info,
                context_level,
                progress_token,
                meta,
                self._identity,
            )
        )
        return True

    def _plain_route(self, method: str, rev: Revision, modern: bool) -> Revision | None:
        """The revision whose shapes answer ``method`` at ``rev``, if its requests may go the quick way."""
        if method in _CORE_METHODS or method == "initialize" or method in EXTENSION_METHODS[TASKS_EXTENSION]:
            return None
        judged = _Judgement(rev, modern, {}, None, None)
        try:
            since = self._check_method(method, None, judged)
        except RemoteProtocolError:
            return None  # refused: the general way answers it (and traces it)
        return max(rev, since)

    def _notification(self, note: Notification) -> None:
        if note.method == "notifications/cancelled":
            params = note.params or {}
            request_id = params.get("requestId")
            token = self._by_peer_id.get(request_id) if is_request_id(request_id) else None
            if token is None:
                return  # late or unknown: ignored, as every revision asks
            rec = self._inflight[token]
            reason = params.get("reason")
            self._trace("cancelled", request_id=rec.id, reason=reason)
            self._cancel(rec, reason if isinstance(reason, str) else None)
            self._maybe_drained()

    def _peer_response(self, message: Response | ErrorResponse) -> None:
        if message.id is None or message.id not in self._outgoing:
            self._trace("unmatched-response", id=message.id)
            return
        request_id = message.id
        assert isinstance(request_id, int)
        del self._outgoing[request_id]
        ask_id = self._question_ids.pop(request_id, None)
        if ask_id is not None:
            answer = (
                {"result": message.result}
                if isinstance(message, Response)
                else {"error": message.error_object()}
            )
            self._answer(ask_id, request_id, answer)
            return
        if isinstance(message, Response):
            self._actions.append(PeerReplied(token=request_id, result=message.result))
        else:
            self._actions.append(PeerReplied(token=request_id, error=message.error_object()))

    def _start_drain(self, now: float) -> None:
        self._drain_deadline = now + self.config.drain
        for rec in list(self._listens()):
            self._finish_listen(rec)  # the last one may complete the drain
        self._maybe_drained()

    def _terminate(self) -> None:
        for rec in list(self._inflight.values()):
            self._cancel(rec, "the session ended")
        self._closed()

    def _closed(self, *_: Any) -> None:
        self._drain_deadline = None
        self._actions.append(Close())
