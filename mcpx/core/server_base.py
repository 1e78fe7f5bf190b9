"""The server session's state: its records, its configuration, and the fields of every layer.

``ServerSession`` (server_session.py, where its rules are) is written in
layers; this is the lowest.  ``_SessionBase.__init__`` holds every field the
layers share, so a reader finds the session's whole state here; the records
are plain slotted classes, one built per request (``_InFlight``), per
question round (``_Ask``) and per judgement (``_Judgement``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from .actions import Action, Trace
from .downgrade import Ages, downgrade
from .enums import Table
from .jsonrpc import Request, RequestId
from .policy import SpecPolicy
from .revisions import (
    LEGACY_REVISIONS,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    MODERN_REVISIONS,
    OLDEST,
    REVISIONS,
    TASKS_EXTENSION,
    Revision,
)
from .rounds import Question, RoundTable
from .tasks import Task, TaskStore


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


class _LazyByRevision(dict[Revision, Any]):
    """A value per revision, computed the first time a revision asks for it."""

    def __init__(self, compute: Callable[[Revision], Any]) -> None:
        super().__init__()
        self._compute = compute

    def __missing__(self, rev: Revision) -> Any:
        value = self[rev] = self._compute(Revision(rev))
        return value


class _SessionBase:
    """The session's state: every field any layer reads, set once here (see ``ServerSession`` for the rules)."""

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
