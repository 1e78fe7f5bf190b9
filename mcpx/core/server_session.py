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
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson

from .actions import (
    Action,
    Answered,
    CancelRequest,
    Close,
    EndStream,
    PeerReplied,
    Send,
    Subscribed,
    SuspendStream,
    Trace,
    build_request,
    build_send,
)
from .downgrade import Ages, downgrade, downgrade_error, envelope
from .enums import Table
from .errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    LocalProtocolError,
    RemoteProtocolError,
)
from .jsonrpc import _EMPTY as _NO_META  # what Request.meta is without a _meta object
from .jsonrpc import (
    ErrorResponse,
    InvalidMessage,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    is_request_id,
    parse_message,
)
from .policy import SpecPolicy
from .revisions import (
    EXTENSION_METHODS,
    LEGACY_REVISIONS,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_RELATED_TASK,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    METHODS,
    MODERN_REVISIONS,
    OLDEST,
    REVISIONS,
    TASKS_EXTENSION,
    Revision,
    Sender,
    method_rule,
)
from .rounds import MRTR_METHODS, Question, RoundTable, StateError, question_refusal, required_capability
from .tasks import Task, TaskStore

__all__ = ["ConnectionState", "ServerConfig", "ServerSession"]


class ConnectionState(Table):
    NEW = "new"  # nothing negotiated: legacy requests are judged as 2024-11-05
    INITIALIZING = "initializing"  # initialize answered; waiting for notifications/initialized
    READY = "ready"
    CLOSING = "closing"  # end of input; answering what is in flight
    CLOSED = "closed"

    # Members are singletons compared by identity: hash them by identity too,
    # in C (Enum's own __hash__ is a Python function, run on every lookup in
    # _TRANSITIONS).
    __hash__ = object.__hash__


class _Input(Table):
    INITIALIZE = "initialize"
    BAD_INITIALIZE = "initialize that cannot be accepted"
    INITIALIZED = "notifications/initialized"
    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    END_OF_INPUT = "end of input"
    TERMINATE = "terminate"
    DRAINED = "drained"

    __hash__ = object.__hash__  # as ConnectionState's


_NEW, _INIT, _READY, _CLOSING, _CLOSED = (
    ConnectionState.NEW,
    ConnectionState.INITIALIZING,
    ConnectionState.READY,
    ConnectionState.CLOSING,
    ConnectionState.CLOSED,
)

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

# The server capability a method needs; calling one the server did not
# declare is -32601 (2026-07-28 basic/index; every revision's server pages).
_NEEDS_CAPABILITY: Final[dict[str, tuple[str, ...]]] = {
    "tools/list": ("tools",),
    "tools/call": ("tools",),
    "prompts/list": ("prompts",),
    "prompts/get": ("prompts",),
    "resources/list": ("resources",),
    "resources/templates/list": ("resources",),
    "resources/read": ("resources",),
    "resources/subscribe": ("resources", "subscribe"),
    "resources/unsubscribe": ("resources", "subscribe"),
    "completion/complete": ("completions",),
    "logging/setLevel": ("logging",),
}

_LIST_CHANGED_KINDS: Final = {"tools", "prompts", "resources"}
_MODERN: Final = frozenset(MODERN_REVISIONS)
_RESULT_SHAPES: Final[dict[str, str]] = {
    rule.method: rule.result or "EmptyResult"
    for rule in METHODS
    if rule.sender is Sender.CLIENT and not rule.notification
}
"""The shape of each client request's result (``downgrade`` cuts it); ``EmptyResult`` for any other."""
_LEVEL_RANK: Final = {level: i for i, level in enumerate(LOG_LEVELS)}


@dataclass(slots=True, eq=False)
class ToolHints:
    """What a server knows of its tools that a call is judged by before it is routed: data, kept current by the application.

    ``task_support`` maps a tool's name to its ``execution.taskSupport``
    (``"forbidden"``, ``"optional"``, ``"required"``; 2025-11-25
    server/tools, and the 2026-07-28 tasks extension), and ``unknown`` is
    what a name it does not hold gets (``None``: the server does not know the
    tool, so its call is never a task).  ``header_params`` maps a tool's name
    to the arguments 2026-07-28 HTTP mirrors as ``Mcp-Param-*`` headers
    (``{argument: header name}``; basic/transports/streamable-http).  The
    application changes the mappings in place (a server as it registers a
    tool, a gateway when a catalog changes); the session and the HTTP binding
    only read them, when they judge a ``tools/call``.
    """

    task_support: dict[str, str] = field(default_factory=dict)
    unknown: str | None = None
    header_params: dict[str, Mapping[str, str]] = field(default_factory=dict)

    def support(self, tool: str) -> str | None:
        """``tool``'s ``execution.taskSupport``, or ``unknown`` for a name not held."""
        return self.task_support.get(tool, self.unknown)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """What a server session needs to know about the server it fronts.

    ``capabilities`` is the server's declaration in the newest spelling (a
    union over revisions: ``tasks`` is cut away for anything but 2025-11-25,
    ``extensions`` for anything but 2026-07-28).  ``revisions`` restricts the
    revisions this server speaks (all five by default).  ``drain`` is
    ``transport.stdioDrain``: seconds requests in flight get after end of
    input.  ``question_ttl`` is ``proto.askTimeout`` for a legacy client:
    seconds a question may go unanswered before it is withdrawn and its call
    cancelled (a 2026-07-28 client's parked calls expire by the
    ``RoundTable``'s ``ask_timeout``).
    """

    server_info: Mapping[str, Any]
    capabilities: Mapping[str, Any]
    instructions: str | None = None
    policy: SpecPolicy = field(default_factory=SpecPolicy.default)
    revisions: tuple[Revision, ...] = REVISIONS
    ages: Ages = field(default_factory=Ages)
    drain: float = 2.0
    question_ttl: float = 120.0
    trace: bool = False
    # What the server knows of its tools before a call is routed (task support, and
    # the arguments 2026-07-28 HTTP mirrors as headers).  Without it no call is a task.
    tools: ToolHints | None = None
    task_after: float = 0.25  # a 2026-07-28 call becomes a task after this long

    def __post_init__(self) -> None:
        if not self.revisions:
            raise ValueError("a server must speak at least one revision")
        if not isinstance(self.server_info.get("name"), str) or not isinstance(
            self.server_info.get("version"), str
        ):
            raise ValueError("server_info needs a string name and version")


@dataclass(slots=True)
class _Listen:
    tools: bool
    prompts: bool
    resources: bool
    uris: frozenset[str]
    task_ids: frozenset[str] = frozenset()


@dataclass(slots=True)
class _Batch:
    stream: int
    pending: int
    replies: list[dict[str, Any]] = field(default_factory=list)
    sent: bool = False


class _InFlight:
    """One request received and not yet answered (a plain slotted record: one is built per request)."""

    __slots__ = (
        "batch",
        "capabilities",
        "core_task_ttl",
        "dispatched",
        "held",
        "id",
        "last_progress",
        "listen",
        "log_level",
        "method",
        "modern",
        "params",
        "progress_token",
        "revision",
        "round",
        "shape_revision",
        "stream",
        "task",
        "task_support",
        "token",
    )

    def __init__(
        self,
        token: int,
        id: RequestId,
        method: str,
        revision: Revision,
        shape_revision: Revision,
        modern: bool,
        stream: int,
        dispatched: bool,
        progress_token: str | int | None,
        log_level: str | None,
        batch: _Batch | None,
        params: Mapping[str, Any],
        capabilities: Mapping[str, Any],
    ) -> None:
        self.token = token
        self.id = id
        self.method = method
        self.revision = revision  # the peer's revision for this request
        self.shape_revision = shape_revision  # the revision whose shapes the result takes
        self.modern = modern
        self.stream = stream
        self.dispatched = dispatched
        self.progress_token = progress_token
        self.last_progress: float | None = None
        self.log_level = log_level
        self.batch = batch
        self.listen: _Listen | None = None
        self.params = params  # the request's, for a question's binding
        self.capabilities = capabilities  # what this request's client declared
        self.held: dict[str, Any] = {}  # 2026-07-28 answers sent ahead of the questions
        self.round = 0  # rounds of input_required this call has had
        self.task: Task | None = None  # the task this call runs as (its request was answered already)
        self.task_support: str | None = None  # 2026-07-28: the call may become a task ("optional"/"required")
        self.core_task_ttl: int | None = (
            None  # 2025-11-25: the call asked to run as a task (ttl, 0 = default)
        )


@dataclass(slots=True)
class _Ask:
    """Questions a call put to a legacy client over the wire."""

    token: int
    ask_id: int
    pending: dict[int, Question]  # server request id -> question
    answers: dict[str, Mapping[str, Any]]
    deadline: float
    deferred: list[Question] = field(default_factory=list)  # a task's, until tasks/result opens a stream


class _Judgement:
    """The revision a request is judged under and what its client declared (never changed once built)."""

    __slots__ = ("capabilities", "client_info", "log_level", "modern", "revision")

    def __init__(
        self,
        revision: Revision,
        modern: bool,
        capabilities: Mapping[str, Any],
        client_info: Mapping[str, Any] | None,
        log_level: str | None,
    ) -> None:
        self.revision = revision
        self.modern = modern
        self.capabilities = capabilities
        self.client_info = client_info
        self.log_level = log_level


class ServerSession:
    """The server side of one connection; see the module docstring for the rules.

    Drive it with ``receive_message``/``receive_batch``/``receive_invalid``/
    ``receive_eof``; after each call (and after ``respond``, ``progress``,
    ``log``, ``notify_*``) drain ``next_actions()`` and carry them out.
    ``newline=True`` appends ``\\n`` to every payload (stdio framing).
    ``can_push`` says whether this connection can carry unsolicited messages
    (a stdio pipe can; a sessionless HTTP POST cannot) — without it, legacy
    ``listChanged``/``subscribe`` are not declared.
    """

    def __init__(
        self,
        config: ServerConfig,
        *,
        newline: bool = False,
        can_push: bool = True,
        stateless: bool = False,
        tokens: Iterator[int] | None = None,
        rounds: RoundTable | None = None,
        owns_rounds: bool = True,
        tasks: TaskStore | None = None,
        identity: str = "connection",
        defer_task_questions: bool = False,
    ) -> None:
        self.config = config
        self._tasks = tasks
        self._identity = identity  # whose tasks this peer may see (spec/messages.md §6)
        self._runners: dict[str, int] = {}  # task id -> token of the call running it
        self._result_waiters: dict[str, list[_InFlight]] = {}  # 2025-11-25 tasks/result, by task id
        self._core_tasks: set[str] = set()  # 2025-11-25 tasks created here: status notifications
        self._promotions: dict[int, float] = {}  # token -> when the call becomes a task
        self._task_listens: set[int] = set()  # tokens of listens that follow tasks
        self._watching = False
        # Streamable HTTP: a 2025-11-25 task's questions go out on the stream
        # of the client's tasks/result (basic/utilities/tasks), so they wait
        # for one; stdio has one channel and sends them at once.
        self._defer_task_questions = defer_task_questions
        self._rounds = rounds
        self._owns_rounds = owns_rounds and rounds is not None
        self._asks: dict[int, _Ask] = {}
        self._question_ids: dict[int, int] = {}  # server request id -> ask id
        self._ask_ids: Iterator[int] = itertools.count(1)
        self._now = 0.0
        self._stateless = stateless
        self._tokens = tokens if tokens is not None else itertools.count(1)
        self._input_stream: int | None = None
        self._input_revision: Revision | None = None
        self._dump_option = orjson.OPT_APPEND_NEWLINE if newline else 0
        self._can_push = can_push
        self._state = ConnectionState.NEW
        self._actions: list[Action] = []
        self._next_server_id = -1
        self._inflight: dict[int, _InFlight] = {}
        self._cancelled_tokens: set[int] = set()  # cancelled, handler not yet reported back
        self._by_peer_id: dict[RequestId, int] = {}
        self._outgoing: dict[int, str] = {}  # server request id -> method
        self._negotiated: Revision | None = None
        self._client_capabilities: Mapping[str, Any] = {}
        self._client_info: Mapping[str, Any] | None = None
        self._log_level: str | None = None
        self._subscriptions: set[str] = set()
        self._drain_deadline: float | None = None
        self._legacy = tuple(r for r in LEGACY_REVISIONS if r in config.revisions)
        self._modern = tuple(r for r in MODERN_REVISIONS if r in config.revisions)
        self._caps = _LazyByRevision(self._cut_capabilities)
        self._server_info = _LazyByRevision(lambda rev: downgrade(config.server_info, "Implementation", rev))
        # The quick way for plain requests (_receive_plain); a traced session
        # records every judgement, so it always goes the general way.
        self._plain_ok = not config.trace
        self._plain_routes = _LazyByRevision(lambda rev: {})
        self._modern_by_name: dict[str, Revision] = {str(r): r for r in self._modern}
        self._strict = {rev: config.policy.strict(rev) for rev in REVISIONS}
        self._gated = tasks is not None and config.tools is not None  # whether _task_gate can refuse

    # ------------------------------------------------------------------
    # Introspection
    # ------------------------------------------------------------------

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

    # ------------------------------------------------------------------
    # Inputs from the peer
    # ------------------------------------------------------------------

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

    # ------------------------------------------------------------------
    # Inputs from the application
    # ------------------------------------------------------------------

    def respond(self, token: int, result: Mapping[str, Any]) -> None:
        """Answer request ``token`` with ``result`` (newest shape; it is never edited)."""
        if self._asks:
            self._drop_asks(token)
        rec = self._inflight.get(token)
        if rec is not None and rec.task is None and rec.task_support != "required" and rec.batch is None:
            # An ordinary answer: what _settles_task, _take (_forget), _shape_result and _reply
            # do for it, in line (this runs for nearly every answer).
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
            shaped = downgrade(
                result, _RESULT_SHAPES.get(method, "EmptyResult"), rev, strict=self._strict[rev]
            )
            reply = {"jsonrpc": "2.0", "id": request_id, "result": shaped}
            self._actions.append(
                build_send(orjson.dumps(reply, option=self._dump_option), rec.stream, True, None)
            )
            if self._state is _CLOSING:
                self._maybe_drained()
            return
        if self._settles_task(token, result=result):
            return
        rec = self._take(token)
        if rec is None:
            return
        self._reply(rec, Response(id=rec.id, result=self._shape_result(rec, result)).to_obj())

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

    # ------------------------------------------------------------------
    # Questions a call asks its client (spec/messages.md §5; rounds.py for the rules)
    # ------------------------------------------------------------------

    def ask(self, token: int, questions: list[Question]) -> int:
        """Put ``questions`` to the client of call ``token``; returns the ask id.

        The answer comes as an ``Answered`` action with that id: the client's
        answers, or a refusal when this client may not be asked (it did not
        declare the capability, its revision lacks the request, the request
        came outside a session).  A legacy client is sent server requests on
        the call's stream; a 2026-07-28 request is answered ``input_required``
        and the call waits, parked, for the retry that brings the answers.
        """
        rec = self._inflight.get(token)
        if rec is None:
            raise LocalProtocolError(f"no request with token {token} is in flight")
        if not questions:
            raise LocalProtocolError("ask at least one question")
        keys = [q.key for q in questions]
        if len(set(keys)) != len(keys):
            raise LocalProtocolError(f"question keys must be unique: {keys}")
        ask_id = next(self._ask_ids)
        refusal = self._refusal(rec, questions)
        if refusal is not None:
            reason, required = refusal
            self._trace("question-refused", request_id=rec.id, reason=reason)
            self._actions.append(Answered(token=token, ask_id=ask_id, refused=reason, required=required))
            return ask_id
        if rec.modern and rec.task is not None:
            self._ask_in_task(rec, ask_id, questions)
        elif rec.modern:
            self._ask_modern(rec, ask_id, questions)
        else:
            self._ask_legacy(rec, ask_id, questions)
        return ask_id

    def _refusal(
        self, rec: _InFlight, questions: list[Question]
    ) -> tuple[str, Mapping[str, Any] | None] | None:
        if rec.modern:
            if rec.method not in MRTR_METHODS:
                return (
                    f"2026-07-28 lets only tools/call, prompts/get and resources/read ask; not {rec.method}",
                    None,
                )
            if self._rounds is None and rec.task is None:
                return ("this server keeps no state for questions; it cannot ask a 2026-07-28 client", None)
        else:
            if not self._can_push:
                return ("the request came outside any session, so the client cannot be asked anything", None)
            if self._state is not _READY or self._negotiated is None:
                return ("the client never finished initialize, so it cannot be asked anything", None)
        for question in questions:
            reason = question_refusal(question, rec.revision, rec.capabilities)
            if reason is not None:
                return (reason, required_capability(question))
        return None

    def _ask_legacy(self, rec: _InFlight, ask_id: int, questions: list[Question]) -> None:
        ask = _Ask(
            token=rec.token,
            ask_id=ask_id,
            pending={},
            answers={},
            deadline=self._now + self.config.question_ttl,
        )
        self._asks[ask_id] = ask
        stream = None
        if rec.task is not None and self._tasks is not None:
            self._tasks.ask(rec.task, ask_id, questions, self._now)
            waiters = self._result_waiters.get(rec.task.task_id)
            if waiters:
                stream = waiters[0].stream
            elif self._defer_task_questions:
                ask.deferred = list(questions)
                return
        self._send_questions(rec, ask, questions, stream)

    def _send_questions(
        self, rec: _InFlight, ask: _Ask, questions: list[Question], stream: int | None
    ) -> None:
        for question in questions:
            params = self._question_params(question, rec.revision)
            if rec.task is not None:  # 2025-11-25: every message tied to a task says so
                meta = dict(params.get("_meta") or {})
                meta[META_RELATED_TASK] = {"taskId": rec.task.task_id}
                params["_meta"] = meta
            request_id = self.send_request(question.method, params, related=rec.token, stream=stream)
            ask.pending[request_id] = question
            self._question_ids[request_id] = ask.ask_id

    @staticmethod
    def _question_params(question: Question, rev: Revision) -> dict[str, Any]:
        params = dict(question.params)
        if question.method == "elicitation/create" and rev < Revision.V2025_11_25:
            params.pop("mode", None)  # 2025-06-18 knows only forms, and no mode field
        return params

    def _answer(self, ask_id: int, request_id: int, answer: Mapping[str, Any]) -> None:
        ask = self._asks.get(ask_id)
        if ask is None:
            return
        question = ask.pending.pop(request_id, None)
        if question is None:
            return
        ask.answers[question.key] = answer
        if not ask.pending and not ask.deferred:
            self._finish_ask(ask)

    def _finish_ask(self, ask: _Ask) -> None:
        """Every question of ``ask`` has its answer: the call resumes (its task is working again)."""
        del self._asks[ask.ask_id]
        rec = self._inflight.get(ask.token)
        if rec is not None and rec.task is not None and self._tasks is not None:
            self._tasks.resume(rec.task, self._now)
        self._actions.append(Answered(token=ask.token, ask_id=ask.ask_id, answers=ask.answers))

    def _ask_timed_out(self, ask: _Ask) -> None:
        """The question's own deadline passed: the client is told, the call gets *cancel*."""
        for question in ask.deferred:  # never sent: no tasks/result came to carry it
            ask.answers[question.key] = self._unanswered(question)
        ask.deferred = []
        for request_id, question in list(ask.pending.items()):
            self._withdraw(request_id, "no answer within the question's deadline")
            self._answer(ask.ask_id, request_id, self._unanswered(question))
        if ask.ask_id in self._asks and not ask.pending:
            self._finish_ask(ask)  # only deferred questions were left: _answer never finished it

    @staticmethod
    def _unanswered(question: Question) -> Mapping[str, Any]:
        if question.method == "elicitation/create":
            return {"result": {"action": "cancel"}}  # not answered is not declined
        return {"error": {"code": -32001, "message": "the client did not answer in time"}}

    def _withdraw(self, request_id: int, reason: str) -> None:
        self._question_ids.pop(request_id, None)
        if self._outgoing.pop(request_id, None) is not None and self._state is not _CLOSED:
            self._emit(
                Notification(
                    method="notifications/cancelled", params={"requestId": request_id, "reason": reason}
                ).to_obj(),
                None,
                False,
            )

    def _drop_asks(self, token: int, *, withdraw: bool = False) -> None:
        for ask in [a for a in self._asks.values() if a.token == token]:
            del self._asks[ask.ask_id]
            for request_id in list(ask.pending):
                if withdraw:
                    self._withdraw(request_id, "the request that asked was cancelled")
                else:
                    # The call ended first: a late answer is dropped quietly,
                    # never handed to the application as a reply of its own.
                    self._question_ids.pop(request_id, None)
                    self._outgoing.pop(request_id, None)

    def _ask_modern(self, rec: _InFlight, ask_id: int, questions: list[Question]) -> None:
        answers = {q.key: {"result": rec.held.pop(q.key)} for q in questions if q.key in rec.held}
        remaining = [q for q in questions if q.key not in answers]
        if not remaining:
            self._actions.append(Answered(token=rec.token, ask_id=ask_id, answers=answers))
            return
        self._park(rec, ask_id, remaining, answers)

    def _park(
        self,
        rec: _InFlight,
        ask_id: int,
        questions: list[Question],
        answered: Mapping[str, Mapping[str, Any]],
    ) -> None:
        """Answer the current request ``input_required``; the call waits for the retry."""
        assert self._rounds is not None
        self._promotions.pop(rec.token, None)  # the retry decides afresh
        try:
            parked = self._rounds.park(
                token=rec.token,
                method=rec.method,
                params=rec.params,
                ask_id=ask_id,
                questions=questions,
                round=rec.round + 1,
                now=self._now,
            )
        except StateError as exc:
            self._cancelled_tokens.add(rec.token)
            self._actions.append(CancelRequest(token=rec.token, reason=exc.message))
            rec_token = rec.token
            self._reply(
                rec,
                ErrorResponse(id=rec.id, code=INTERNAL_ERROR, message=exc.message).to_obj(),
                INTERNAL_ERROR,
            )
            self._forget_token(rec_token)
            return
        parked.answered = dict(answered)
        parked.held = rec.held  # what the first request sent ahead stays for later questions
        result = {
            "resultType": "input_required",
            "inputRequests": {q.key: q.as_input_request() for q in questions},
            "requestState": parked.state,
        }
        self._trace("input-required", request_id=rec.id, round=parked.round, keys=sorted(parked.questions))
        self._forget(rec)
        self._reply(rec, Response(id=rec.id, result=self._shape_result(rec, result)).to_obj())

    def _forget_token(self, token: int) -> None:
        rec = self._inflight.get(token)
        if rec is not None:
            self._forget(rec)

    def _resume(self, rec: _InFlight, req: Request, params: Mapping[str, Any]) -> None:
        """A 2026-07-28 retry: take over the parked call its ``requestState`` names."""
        assert self._rounds is not None
        responses = params.get("inputResponses", {})
        if not _answers_shape(responses):
            self._error_in(
                rec.batch,
                req.id,
                INVALID_PARAMS,
                "Invalid params: inputResponses must be an object whose values are the answers' objects",
                None,
                rec.revision,
                rec.stream,
            )
            return
        try:
            parked = self._rounds.resume(
                params.get("requestState"), method=req.method, params=params, now=self._now
            )
        except StateError as exc:
            self._trace("state-refused", request_id=req.id, kind=exc.kind)
            self._error_in(
                rec.batch,
                req.id,
                INVALID_PARAMS,
                f"Invalid params: {exc.message}",
                None,
                rec.revision,
                rec.stream,
            )
            return
        # The retry answers under the call's token: the handler still runs as it.
        if req.method == "tools/call" and not self._task_gate(rec, params):
            self._rounds.forget(parked.token)
            self._cancelled_tokens.add(parked.token)
            self._actions.append(CancelRequest(token=parked.token, reason="the retry was refused"))
            return
        rec.token = parked.token
        rec.round = parked.round
        rec.held = parked.held
        self._cancelled_tokens.discard(parked.token)
        if rec.task_support is not None:
            self._promotions[rec.token] = self._now + self.config.task_after
        self._inflight[rec.token] = rec
        self._by_peer_id[req.id] = rec.token
        answers = dict(parked.answered)
        for key in parked.questions:
            if key in responses:
                answers[key] = {"result": responses[key]}  # keys nobody asked are ignored (SEP-2322)
        missing = [q for k, q in parked.questions.items() if k not in answers]
        if missing:
            self._park(rec, parked.ask_id, missing, answers)  # ask again for what is still missing
            return
        self._trace("resumed", request_id=req.id, round=parked.round)
        self._actions.append(Answered(token=rec.token, ask_id=parked.ask_id, answers=answers))

    # ------------------------------------------------------------------
    # Tasks (2025-11-25 basic/utilities/tasks, the 2026-07-28 tasks extension;
    # spec/messages.md §6; tasks.py for the store)
    # ------------------------------------------------------------------

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

    # ------------------------------------------------------------------
    # Dispatch of peer input
    # ------------------------------------------------------------------

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

    # -- transition effects ---------------------------------------------

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

    # -- the plain request, the quick way --------------------------------
    #
    # Nearly every message a busy connection carries is one request for an
    # application method, its envelope exactly {jsonrpc, id, method, params},
    # on a connection that is open and (legacy) negotiated.  _receive_plain
    # serves that case without building a Request, walking the transition
    # table or judging the method afresh: what _check_method decides depends
    # only on (method, revision) for a method the session does not answer
    # itself, so it is remembered per revision.  Every check comes before the
    # first change: anything else returns False untouched and takes the
    # general way (receive_message -> _receive -> _transition -> _serve),
    # which produces the same actions for the same input.  tests/unit/
    # test_plain_path.py holds the two ways to that.

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
        # Every other notification (progress, roots/list_changed, …) needs no
        # reply; unknown ones are ignored, as JSON-RPC asks.

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

    # ------------------------------------------------------------------
    # Judging a request
    # ------------------------------------------------------------------

    def _judge(self, req: Request) -> _Judgement:
        meta = req.meta
        params = req.params or {}
        has_meta = isinstance(params.get("_meta"), dict)
        if self._modern_shaped(req):
            return self._judge_modern(req, meta, has_meta)
        rev = self._peer_revision()
        return _Judgement(
            revision=rev,
            modern=False,
            capabilities=self._client_capabilities,
            client_info=self._client_info,
            log_level=None,
        )

    def _judge_modern(self, req: Request, meta: Mapping[str, Any], has_meta: bool) -> _Judgement:
        version = meta.get(META_PROTOCOL_VERSION)
        caps = meta.get(META_CLIENT_CAPABILITIES)
        if not isinstance(version, str) or not isinstance(caps, dict):
            missing = []
            if not isinstance(version, str):
                missing.append(f"{META_PROTOCOL_VERSION} (a string)")
            if not isinstance(caps, dict):
                missing.append(f"{META_CLIENT_CAPABILITIES} (an object)")
            where = "params._meta" if has_meta else "params._meta (absent)"
            raise RemoteProtocolError(
                f"Invalid params: {where} must carry {' and '.join(missing)}; a 2026-07-28 request "
                "restates its protocol version and client capabilities on every request",
                code=INVALID_PARAMS,
            )
        rev = next((r for r in self._modern if r == version), None)
        if rev is None:
            supported = [str(r) for r in self._modern]
            self._trace("unsupported-version", request_id=req.id, requested=version)
            options = []
            if supported:
                options.append(f"send one of {', '.join(supported)} in _meta")
            if self._legacy and (version in self._legacy or not supported):
                options.append(f"negotiate one of {', '.join(self._legacy)} with initialize")
            hint = " or ".join(options) if options else "this server speaks no revision you can use"
            raise RemoteProtocolError(
                f"Unsupported protocol version {version!r} in params._meta; {hint}",
                code=UNSUPPORTED_PROTOCOL_VERSION,
                data={"supported": supported, "requested": version},
            )
        level = meta.get(META_LOG_LEVEL)
        if level is not None and not (isinstance(level, str) and level in _LEVEL_RANK):
            raise RemoteProtocolError(
                f"Invalid params: {META_LOG_LEVEL} must be one of {', '.join(LOG_LEVELS)}",
                code=INVALID_PARAMS,
            )
        info = meta.get(META_CLIENT_INFO)
        self._trace("judged", request_id=req.id, revision=str(rev), era="modern")
        return _Judgement(
            revision=rev,
            modern=True,
            capabilities=caps,
            client_info=info if isinstance(info, dict) else None,
            log_level=level if isinstance(level, str) else None,
        )

    def _check_method(self, method: str, request_id: RequestId | None, judged: _Judgement) -> Revision:
        """Raise the error a request for ``method`` earns; return its defining revision.

        For a method the session does not answer itself the outcome depends only
        on ``method`` and ``judged.revision`` (``_plain_route`` relies on it).
        """
        rev = judged.revision
        rule = method_rule(method, sender=Sender.CLIENT)
        ext_methods = EXTENSION_METHODS[TASKS_EXTENSION]
        if judged.modern and method in ext_methods and not method.startswith("notifications/"):
            _require_tasks_extension(judged, method)
            return rev
        if rule is None:
            raise RemoteProtocolError(f"Method not found: {method}", code=METHOD_NOT_FOUND, http_status=404)
        if rule.removed_for(rev):
            self._trace("removed-method", request_id=request_id, method=method, revision=str(rev))
            instead = f"; use {rule.replacement}" if rule.replacement else ""
            raise RemoteProtocolError(
                f"Method not found: {method} was removed in MCP {rule.removed_in}{instead}",
                code=METHOD_NOT_FOUND,
                http_status=404,
            )
        needs = _NEEDS_CAPABILITY.get(method)
        if needs is not None and not self._declares(needs, rev):
            raise RemoteProtocolError(
                f"Method not found: this server does not offer {'.'.join(needs)} ({method})",
                code=METHOD_NOT_FOUND,
                http_status=404,
            )
        return rule.since

    def _declares(self, path: tuple[str, ...], rev: Revision) -> bool:
        node: Any = self.config.capabilities
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return False
            node = node[key]
        return node is not False and node is not None

    # ------------------------------------------------------------------
    # Methods the session answers itself
    # ------------------------------------------------------------------

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
        # stays open until cancelled or end of input

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

    def _listens(self) -> Iterable[_InFlight]:
        return [r for r in self._inflight.values() if r.listen is not None]

    def _finish_listen(self, rec: _InFlight) -> None:
        self.respond(rec.token, {"_meta": {META_SUBSCRIPTION_ID: rec.id}})

    # ------------------------------------------------------------------
    # Output
    # ------------------------------------------------------------------

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

    # ------------------------------------------------------------------
    # Helpers
    # ------------------------------------------------------------------

    def _peer_revision(self) -> Revision:
        """What a legacy request is judged as: negotiated, else the transport's word, else 2024-11-05."""
        return self._negotiated or self._input_revision or OLDEST

    def _attempted_revision(self, req: Request) -> Revision:
        """The revision whose error codes a refused request is answered with.

        A request shaped as 2026-07-28 is answered in that revision's terms
        (``-32022`` stays ``-32022``) even when its version was unusable.
        """
        if self._modern_shaped(req):
            return MODERN_REVISIONS[-1]
        return self._peer_revision()

    def _modern_shaped(self, req: Request) -> bool:
        """Whether ``req`` claims a per-request revision: by its ``_meta``, its method, or its transport."""
        meta = req.meta
        return (
            META_PROTOCOL_VERSION in meta
            or META_CLIENT_CAPABILITIES in meta
            or req.method == "server/discover"
            or (self._input_revision is not None and self._input_revision.is_modern)
        )

    def _default_log_level(self) -> str | None:
        # Legacy revisions let the server choose what to send before
        # logging/setLevel; 2026-07-28 says no level, no messages.  The
        # precedence decides (spec/revision-conflicts.md).
        return None if self.config.policy.first().is_modern else "info"

    def _cut_capabilities(self, rev: Revision) -> dict[str, Any]:
        caps = downgrade(self.config.capabilities, "ServerCapabilities", rev)
        caps = {k: (dict(v) if isinstance(v, dict) else v) for k, v in caps.items()}
        if not self._can_push and not rev.is_modern:
            for kind in ("tools", "prompts", "resources"):
                if isinstance(caps.get(kind), dict):
                    caps[kind].pop("listChanged", None)
            if isinstance(caps.get("resources"), dict):
                caps["resources"].pop("subscribe", None)
        if self._tasks is None or self.config.tools is None:  # nowhere to keep a task
            caps.pop("tasks", None)
            extensions = caps.get("extensions")
            if isinstance(extensions, dict) and TASKS_EXTENSION in extensions:
                caps["extensions"] = {k: v for k, v in extensions.items() if k != TASKS_EXTENSION}
                if not caps["extensions"]:
                    del caps["extensions"]
        return caps

    def _trace(self, event: str, **detail: Any) -> None:
        if self.config.trace:
            self._actions.append(Trace(event=event, detail=detail))


class _LazyByRevision(dict[Revision, Any]):
    """A value per revision, computed the first time a revision asks for it."""

    def __init__(self, compute: Callable[[Revision], Any]) -> None:
        super().__init__()
        self._compute = compute

    def __missing__(self, rev: Revision) -> Any:
        value = self[rev] = self._compute(Revision(rev))
        return value


def _answers_shape(value: Any) -> bool:
    """``inputResponses``: an object whose every value is an answer object."""
    return isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())


_TASKS_REQUIRED: Final[Mapping[str, Any]] = {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
"""The ``data`` of ``-32021`` for a client that did not declare the tasks extension."""


def _declares_tasks_extension(capabilities: Mapping[str, Any]) -> bool:
    declared = capabilities.get("extensions")
    return isinstance(declared, dict) and TASKS_EXTENSION in declared


def _require_tasks_extension(judged: _Judgement, what: str) -> None:
    """``-32021`` unless this request declared the tasks extension (ext-tasks, 2026-07-28)."""
    if not _declares_tasks_extension(judged.capabilities):
        raise RemoteProtocolError(
            f"{what} belongs to the {TASKS_EXTENSION} extension; declare it in "
            "clientCapabilities.extensions on this request",
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            data=_TASKS_REQUIRED,
        )


_CoreHandler = Callable[[ServerSession, _InFlight, Mapping[str, Any], _Judgement], dict[str, Any] | None]
_CORE_HANDLERS: Final[dict[str, _CoreHandler]] = {
    "ping": ServerSession._ping,
    "server/discover": ServerSession._discover,
    "logging/setLevel": ServerSession._set_level,
    "resources/subscribe": ServerSession._subscribe,
    "resources/unsubscribe": ServerSession._subscribe,
    "subscriptions/listen": ServerSession._listen,
    "tasks/get": ServerSession._task_requests,
    "tasks/result": ServerSession._task_requests,
    "tasks/cancel": ServerSession._task_requests,
    "tasks/list": ServerSession._task_requests,
    "tasks/update": ServerSession._task_requests,
}
