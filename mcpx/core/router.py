"""The gateway's middle, as a pure state machine: host calls in flight through mcpx, and their upstreams.

A host connection's request, once its server session has judged it and the
caller has picked the upstream connection that serves it, is handed to the
``Router``.  The router owns it until its host is answered: it sends it on
that upstream's ``ClientSession`` (which it wraps, one per upstream
connection), relays the upstream's progress and log messages, puts the
upstream's questions to the host whose call they belong to, carries the
answers back, times the call, and answers the host exactly once.  It is the
pure form of the rules ``mcpx/gateway/_upstreams.py`` and
``mcpx/gateway/_server.py`` carry out with futures and callbacks
(spec/gateway.md §4 and §5); a driver loop over it replaces that glue.

It follows MCP 2025-06-18 basic/utilities/cancellation (a cancelled request
is not answered; the cancel names the request's own id on its own
connection), basic/utilities/progress (the requester's token; reports only
while the request runs), server/utilities/logging, client/elicitation,
client/sampling and client/roots (the three questions a server may ask), and
MCP 2026-07-28 basic/patterns/mrtr (an ``input_required`` result is the
server's answer to one request: the client answers every input and retries
with ``inputResponses`` and the ``requestState`` exactly as sent) and
basic/patterns/cancellation (on a transport with a stream per request,
closing that stream is the cancel).

Rules
=====

* **Correlation is by (connection, id), never by id alone.**  A host call is
  known by ``(host, request_id)``: two hosts may both send id 1, and one host
  may reuse an id once its call has ended.  Upstream, the session's own ids
  and progress tokens (``mcpx-<n>``) are matched per upstream connection, so a
  late answer to a call that ended can never be taken for a newer call's.
* **What goes upstream.**  The host's params without ``task`` (it asked mcpx
  for a task) and without the ``_meta`` keys of the host → mcpx hop
  (``progressToken``, ``io.modelcontextprotocol/*``, ``dev.mcpx/*``); every
  other ``_meta`` key (trace context, the host's own) is carried.  The call
  declares mcpx's own capabilities narrowed by the host's
  (``narrowed_capabilities``; a 2026-07-28 session states them on every
  attempt, a legacy one declared its own at ``initialize``), asks for the
  session's progress token only when the host gave one, and asks for
  ``debug`` logs (2026-07-28 per-request level; each host filters by its own).
* **Every host call is answered exactly once, or not at all when its host
  gave up.**  The upstream's result is relayed without its envelope
  (``relayed``: ``resultType``, ``ttlMs``, ``cacheScope`` and
  ``_meta["io.modelcontextprotocol/serverInfo"]`` describe the upstream's
  answer to mcpx); its JSON-RPC error as sent.  A ``resultType: "task"``
  result (a 2026-07-28 upstream that made the call a task) is handed over
  whole as the answer: following the upstream task (``tasks/get``,
  ``tasks/update``) stays with the driver for now.  A lost upstream answers
  each of its calls ``-32603`` naming the reason; a timeout answers
  ``-32603`` with ``data.kind = "call-timeout"``.  A call its host cancelled
  (``host_cancelled``), or whose host connection closed (``host_closed``), is
  cancelled upstream and never answered; once a host closed, nothing more is
  sent to it.
* **Progress and logs go only to the call's own host.**  A progress report
  reaches the host under the host's own token, and only if it gave one.  An
  upstream's log message goes to every host with a call in flight on that
  connection (a log names no request), and is also handed to the caller as
  ``UpstreamNotification`` for its own record.  Other notifications (list
  changes, resource updates) are the caller's: ``UpstreamNotification``.
* **Questions reach the host whose call they belong to, and no other.**  A
  2026-07-28 upstream's ``input_required`` round belongs to its call whatever
  else runs on the connection: the host is asked the whole round at once,
  under the upstream's own keys, and its answers go back with ``resume``
  (a refusal ends the call with that error: ``refuse_round``).  A legacy
  upstream's server request (``elicitation/create``,
  ``sampling/createMessage``, ``roots/list``; a 2026-07-28 one's too, when
  its session answers them under ``spec.lenient``) names no call, so it is
  put to a host only when exactly one call is in flight on that connection
  (the session's count, the caller's own requests on it included); then the
  answer goes back with ``answer`` (or ``answer_error``).  Otherwise nobody is
  asked and the upstream is answered ``-32603`` ("mcpx cannot tell which of
  its callers … is for; not asked").  ``roots/list`` for a host that declared
  no ``roots`` is answered by mcpx itself (``{"roots": []}``).  A question no
  longer wanted (the upstream withdrew it, its call ended, the upstream was
  lost) is withdrawn from the host (``WithdrawAsk``), and a legacy upstream
  still waiting for its answer is answered ``-32603`` saying why.  At most
  ``max_questions`` questions are out for one call at once.
* **The call timeout pauses while a question is out.**  A person may take
  longer to answer than the timeout allows: while any question of the call is
  out, its clock stands still, and the time left resumes when the last one is
  settled.  A timed-out call is cancelled upstream.  A question that arrives
  after its call's deadline (the driver woke late) is not asked: the call
  times out first.
* **Misuse is a ``LocalProtocolError`` and changes nothing**: an unknown
  upstream, a duplicate ``(host, request_id)`` while that one is in flight,
  answers that do not match the questions' keys, an ask id never issued or
  another host's.  Late news is ignored: a cancel for a call that already
  ended, an answer to a question already withdrawn.

Theory of operation
===================

Three records: ``_Upstream`` (the wrapped session, the router's calls on it
by session handle, and its legacy questions by the upstream's request id),
``_Call`` (one host call: where it runs, the host's progress token, its
clock and the questions it has out) and ``_Ask`` (one question put to a
host: a legacy server request, or a whole 2026-07-28 round).  A call changes
state only through ``_CALL_TRANSITIONS``, a table from (state, input) to
(next state, what happens to its clock); ``TIME_OUT`` while ``ASKING`` is
missing from it, so the rule that a timeout never fires while a question is out
is the table's, not a check scattered through the code.  Ended calls and
settled questions are forgotten at once: every map shrinks when its call ends,
and the capability cache is bounded.

Every input ends by draining the sessions it touched: each session action is
translated (``Send`` → ``SendUpstream``, ``Completed``/``Failed`` →
``AnswerHost``, ``InputRequired``/``ServerRequest`` → ``AskHost`` or an
answer of mcpx's own, …), and what the router does in reply (an answer, a
refusal, a retry) queues more session actions, drained in the same loop.
After every input the caller drains ``next_actions()``, performs them in
order, and re-arms its timer from ``get_timer()``; ``handle_timer(now)``
when it fires.  Time comes in as ``now`` (monotonic seconds; an earlier one
than already seen counts as the later).  ``get_timer`` is a scan of the calls
in flight: a gateway holds hundreds, not millions.
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeAlias

import orjson

from .actions import Send, Trace
from .client_session import (
    AbandonStream,
    ClientSession,
    Completed,
    Failed,
    InputRequired,
    Progress,
    Ready,
    ServerNotification,
    ServerRequest,
    ServerRequestCancelled,
)
from .drafts import builder
from .enums import Table
from .errors import INTERNAL_ERROR, INVALID_PARAMS, LocalProtocolError
from .gateway_tools import narrowed_capabilities
from .jsonrpc import RequestId
from .revisions import LOG_LEVELS

__all__ = [
    "OWN_ROOTS",
    "QUESTION_METHODS",
    "AbandonUpstream",
    "AnswerHost",
    "AskHost",
    "HostKey",
    "NotifyHost",
    "Router",
    "RouterAction",
    "SendUpstream",
    "UpstreamKey",
    "UpstreamNotification",
    "UpstreamOutcome",
    "WithdrawAsk",
    "relayed",
    "upstream_params",
]

HostKey: TypeAlias = Hashable
"""The caller's name for one host connection (opaque; ``str`` or ``int`` will do)."""
UpstreamKey: TypeAlias = Hashable
"""The caller's name for one upstream connection (opaque; an instance id will do)."""
ProgressToken: TypeAlias = str | int
_CallKey: TypeAlias = tuple[Hashable, RequestId]

QUESTION_METHODS: Final = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
"""What a server may ask a client (MCP 2025-06-18 client/*; 2026-07-28 basic/patterns/mrtr ``InputRequest``)."""
OWN_ROOTS: Final[Mapping[str, Any]] = MappingProxyType({"roots": []})
"""mcpx's answer to ``roots/list`` for a host that declared no roots (spec/gateway.md §4)."""

_HOP_META_PREFIXES: Final = ("io.modelcontextprotocol/", "dev.mcpx/")
_ENVELOPE_KEYS: Final = frozenset({"resultType", "ttlMs", "cacheScope"})
_ENVELOPE_META: Final = "io.modelcontextprotocol/serverInfo"


# --------------------------------------------------------------------------
# Actions
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SendUpstream:
    """Write ``payload`` to upstream connection ``upstream`` (``stream``: the session's ``Send.stream``)."""

    upstream: UpstreamKey
    payload: bytes
    stream: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AbandonUpstream:
    """Close the stream of call ``handle`` on ``upstream`` (how 2026-07-28 HTTP cancels a request)."""

    upstream: UpstreamKey
    handle: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerHost:
    """The one answer to host call ``(host, request_id)``: exactly one of ``result`` and ``error``."""

    host: HostKey
    request_id: RequestId
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if (self.result is None) == (self.error is None):
            raise ValueError("an answer carries exactly one of result and error")


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifyHost:
    """A notification for ``host``: progress of call ``request_id``, or a log message (``request_id`` None)."""

    host: HostKey
    request_id: RequestId | None
    method: str
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class AskHost:
    """Put ``requests`` (key → ``{"method", "params"}``) to ``host`` for its call ``request_id``.

    Answer with ``Router.host_answered(host, ask_id, {key: result, …})`` —
    every key, nothing else — or ``Router.host_refused(host, ask_id, error)``.
    """

    host: HostKey
    request_id: RequestId
    ask_id: int
    requests: Mapping[str, Mapping[str, Any]]

    def __post_init__(self) -> None:
        if not self.requests:
            raise ValueError("a question asks something")


@dataclass(frozen=True, slots=True, kw_only=True)
class WithdrawAsk:
    """Question ``ask_id`` is no longer wanted: stop asking ``host``; an answer to it is ignored."""

    host: HostKey
    ask_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamNotification:
    """An upstream notification for the caller: list changes, resource updates, and a copy of each log."""

    upstream: UpstreamKey
    method: str
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamOutcome:
    """A session event for a request the router did not send (the caller's own use of the session)."""

    upstream: UpstreamKey
    event: Completed | Failed | InputRequired | Progress | ServerRequest | ServerRequestCancelled


# The two actions of every call, built without __init__ (mcpx/core/drafts.py).
_send_upstream = builder(SendUpstream)
_answer = builder(AnswerHost)

RouterAction: TypeAlias = (
    SendUpstream
    | AbandonUpstream
    | AnswerHost
    | NotifyHost
    | AskHost
    | WithdrawAsk
    | UpstreamNotification
    | UpstreamOutcome
    | Trace
)


# --------------------------------------------------------------------------
# What a message becomes on the other hop
# --------------------------------------------------------------------------


def upstream_params(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The host's params as they go upstream: without ``task`` and without the hop's ``_meta`` keys.

    ``progressToken`` and ``io.modelcontextprotocol/*`` are the host → mcpx
    hop's (the session states its own upstream), ``dev.mcpx/*`` are mcpx's;
    every other ``_meta`` key is the call's and is carried (spec/gateway.md §5).
    When there is nothing to take out, the host's own params are returned:
    read them, never change them (a client session copies what it sends).
    """
    params = params or {}
    if "_meta" not in params and "task" not in params:
        return params  # the usual call
    out = {k: v for k, v in params.items() if k not in ("_meta", "task")}
    meta = params.get("_meta")
    if meta is not None and isinstance(meta, Mapping):
        kept = {
            k: v
            for k, v in meta.items()
            if not (k == "progressToken" or (isinstance(k, str) and k.startswith(_HOP_META_PREFIXES)))
        }
        if kept:
            out["_meta"] = kept
    return out


def relayed(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """An upstream's result as the host gets it: its content verbatim, its envelope not (spec/gateway.md §1).

    A result with no envelope (a legacy upstream's) is returned itself.
    """
    meta = result.get("_meta")
    if _ENVELOPE_KEYS.isdisjoint(result) and (
        meta is None or (type(meta) is dict and _ENVELOPE_META not in meta)
    ):
        return result
    out = {k: v for k, v in result.items() if k not in _ENVELOPE_KEYS}
    meta = out.get("_meta")
    if meta is not None and isinstance(meta, Mapping) and _ENVELOPE_META in meta:
        rest = {k: v for k, v in meta.items() if k != _ENVELOPE_META}
        if rest:
            out["_meta"] = rest
        else:
            del out["_meta"]
    return out


# --------------------------------------------------------------------------
# The call's transitions
# --------------------------------------------------------------------------


class _CallState(Table):
    RUNNING = "running"  # the upstream works on it; its clock runs
    ASKING = "asking"  # at least one question of it is out to the host; its clock stands still
    ENDED = "ended"  # forgotten


class _CallIn(Table):
    ASK = "ask the host"
    SETTLE = "a question settled, others still out"
    SETTLE_LAST = "the last question settled"
    END = "end"  # answered, cancelled by its host, its upstream lost, its host gone
    TIME_OUT = "time out"


class _Clock(Table):
    KEEP = "keep"
    PAUSE = "pause"  # keep the time left; no deadline
    RESUME = "resume"  # a deadline again, the time left from now
    STOP = "stop"


_S = _CallState
_CALL_TRANSITIONS: Final[Mapping[tuple[_CallState, _CallIn], tuple[_CallState, _Clock]]] = MappingProxyType(
    {
        (_S.RUNNING, _CallIn.ASK): (_S.ASKING, _Clock.PAUSE),
        (_S.ASKING, _CallIn.ASK): (_S.ASKING, _Clock.KEEP),
        (_S.ASKING, _CallIn.SETTLE): (_S.ASKING, _Clock.KEEP),
        (_S.ASKING, _CallIn.SETTLE_LAST): (_S.RUNNING, _Clock.RESUME),
        (_S.RUNNING, _CallIn.END): (_S.ENDED, _Clock.STOP),
        (_S.ASKING, _CallIn.END): (_S.ENDED, _Clock.STOP),
        (_S.RUNNING, _CallIn.TIME_OUT): (_S.ENDED, _Clock.STOP),
    }
)
"""(call state, input) → (next state, clock).  No ``TIME_OUT`` while ``ASKING``: the clock is paused then."""


# --------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------


@dataclass(slots=True)
class _Call:
    key: _CallKey
    host: HostKey  # key[0]
    request_id: RequestId  # key[1]
    upstream: UpstreamKey
    handle: int
    method: str
    progress_token: ProgressToken | None
    declares_roots: bool
    timeout: float | None
    verbatim: bool = False  # the result as the upstream sent it, envelope and all
    deadline: float | None = None  # while RUNNING with a timeout
    left: float | None = None  # while ASKING with a timeout: the time it had left
    state: _CallState = _S.RUNNING
    asks: dict[int, None] = field(default_factory=dict)  # ask ids, in the order asked
    silent: bool = False  # its host is gone: nothing more goes to it


@dataclass(slots=True)
class _Ask:
    ask_id: int
    call: _CallKey
    keys: frozenset[str]
    server_request: RequestId | None = None  # a legacy question: the upstream's request id
    own: dict[str, Any] = field(default_factory=dict)  # a round: the answers mcpx gave itself
    request_state: str | None = None  # a round: echoed exactly as the upstream sent it


@dataclass(slots=True)
class _Upstream:
    session: ClientSession
    calls: dict[int, _CallKey] = field(default_factory=dict)  # session handle → the router's call
    questions: dict[RequestId, int] = field(default_factory=dict)  # upstream request id → ask id
    lost: bool = False  # its output ended: nothing more can be written to it


def _error(code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


_CALL_EVENTS: Final = (Completed, Failed, InputRequired, Progress)  # what a session says of one call


def _valid_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


# --------------------------------------------------------------------------
# The router
# --------------------------------------------------------------------------


class Router:
    """Host calls in flight through the gateway and the upstream connections they run on.

    ``capabilities`` are what mcpx declares to its upstreams (narrowed per
    host for each call).  ``max_questions`` bounds the questions one call may
    have out to its host at once (a round's keys, or a legacy upstream's
    concurrent server requests); ``capability_cache`` bounds the narrowed
    capability sets kept.  After every input drain ``next_actions()``, then
    re-arm the timer from ``get_timer()``.  See the module docstring.
    """

    def __init__(
        self,
        *,
        capabilities: Mapping[str, Any],
        max_questions: int = 8,
        capability_cache: int = 64,
        trace: bool = False,
    ) -> None:
        if max_questions < 1 or capability_cache < 1:
            raise ValueError("max_questions and capability_cache must be at least 1")
        self.capabilities: Mapping[str, Any] = dict(capabilities)
        self.max_questions = max_questions
        self._cache_limit = capability_cache
        self._trace_on = trace
        self._upstreams: dict[UpstreamKey, _Upstream] = {}
        self._calls: dict[_CallKey, _Call] = {}
        self._asks: dict[int, _Ask] = {}
        self._ask_ids: Iterator[int] = itertools.count(1)
        self._last_ask_id = 0
        self._narrowed: OrderedDict[bytes, dict[str, Any]] = OrderedDict()
        self._narrowed_last: tuple[Mapping[str, Any], dict[str, Any]] | None = None
        self._now = -math.inf
        self._actions: list[RouterAction] = []

    # -- introspection ----------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Host calls the router holds (not answered, cancelled or dropped yet)."""
        return len(self._calls)

    @property
    def questions_out(self) -> int:
        """Questions out to hosts, not yet answered, refused or withdrawn."""
        return len(self._asks)

    @property
    def idle(self) -> bool:
        """Nothing in flight: every per-call and per-question map is empty (upstreams may stay)."""
        return (
            not self._calls
            and not self._asks
            and all(not up.calls and not up.questions for up in self._upstreams.values())
        )

    @property
    def upstreams(self) -> frozenset[UpstreamKey]:
        return frozenset(self._upstreams)

    def calls_on(self, upstream: UpstreamKey) -> int:
        """The router's calls in flight on ``upstream`` (0 for one it does not hold)."""
        up = self._upstreams.get(upstream)
        return 0 if up is None else len(up.calls)

    def next_actions(self) -> list[RouterAction]:
        actions, self._actions = self._actions, []
        return actions

    def get_timer(self) -> float | None:
        """The earliest call deadline (paused calls have none), or ``None``."""
        deadlines = [c.deadline for c in self._calls.values() if c.deadline is not None]
        return min(deadlines) if deadlines else None

    # -- upstream connections ----------------------------------------------------------

    def add_upstream(self, upstream: UpstreamKey, session: ClientSession) -> None:
        """A connection that is ready (legacy handshake done, or 2026-07-28): the session is now the router's.

        Every request on it goes through ``host_request`` from here on; an
        outcome of a request the caller sends on it itself comes back as
        ``UpstreamOutcome``.  Drain actions after this (a leftover ``Send`` of
        the handshake is passed on).
        """
        if upstream in self._upstreams:
            raise LocalProtocolError(f"upstream {upstream!r} was added already")
        if not session.ready:
            raise LocalProtocolError(
                f"upstream {upstream!r} is not ready: finish its handshake (Ready) before adding it"
            )
        self._upstreams[upstream] = _Upstream(session=session)
        self._drain(upstream)

    def upstream_data(self, upstream: UpstreamKey, obj: Any, *, now: float) -> None:
        """One decoded JSON value ``upstream`` sent; drain actions after this.

        ``now`` times what the value starts or ends: a question pauses its
        call's clock, an answer settles a call.
        """
        up = self._upstreams.get(upstream)
        if up is None:
            up = self._upstream(upstream)  # raises, saying why
        if now > self._now:  # noqa: PLR1730 - on every answer: a comparison, not a call to max()
            self._now = now
        session = up.session
        answer = session.take_answer(obj)  # the usual answer, handed back: no Completed to drain
        if answer is None:
            session.receive_json(obj)
            self._drain(upstream, up)
            return
        handle, result = answer
        key = up.calls.get(handle)
        if key is None:  # one of the caller's own requests (a catalog read, a task poll)
            self._actions.append(
                UpstreamOutcome(upstream=upstream, event=Completed(handle=handle, result=result))
            )
        else:
            call = self._calls[key]
            asked = bool(call.asks)
            self._end(call, result=result)
            if asked:  # a legacy question still out was answered upstream: on the session, to drain
                self._drain(upstream, up)

    def drain(self, upstream: UpstreamKey) -> None:
        """The caller used ``upstream``'s session itself (a request of its own, a cancel): translate what it queued.

        Drain actions after this: its ``Send`` comes out as ``SendUpstream``,
        in order with the router's own.
        """
        self._upstream(upstream)
        self._drain(upstream)

    def upstream_lost(self, upstream: UpstreamKey, reason: str, now: float) -> None:
        """``upstream`` died: each call on it answers its host ``-32603`` with ``reason``; drain after this.

        Its questions out to hosts are withdrawn, and the connection is
        forgotten (add a new one under the same key if it comes back).  A
        connection already lost, or never added, is ignored.
        """
        up = self._upstreams.get(upstream)
        if up is None:
            return
        self._clock(now)
        up.lost = True
        up.session.receive_eof(reason)  # every call still open fails with the reason
        self._drain(upstream)
        for handle in list(up.calls):  # the session fails every call it holds; none should be left
            self._end(self._calls[up.calls[handle]], error=_error(INTERNAL_ERROR, reason))
        self._trace("upstream-lost", upstream=repr(upstream), reason=reason)
        del self._upstreams[upstream]

    # -- host calls ------------------------------------------------------------------------

    def host_request(
        self,
        host: HostKey,
        request_id: RequestId,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        upstream: UpstreamKey,
        host_capabilities: Mapping[str, Any],
        progress_token: ProgressToken | None = None,
        now: float,
        timeout: float | None = None,
        verbatim: bool = False,
    ) -> None:
        """Send the host's call upstream; its answer comes as ``AnswerHost``.  Drain actions after this.

        The call was judged by the host's server session and routed by the
        caller.  ``progress_token`` is the host's own (its reports come back
        under it); ``timeout`` is seconds of upstream time, paused while a
        question of the call is out to the host.  ``verbatim``: the result
        is answered as the upstream sent it, its envelope kept (a caller that
        is no MCP host: ``/v1/call``).  ``host_capabilities`` are
        read, never changed: a mapping once passed must not change after
        (a session's never do).  ``LocalProtocolError``,
        with nothing changed, for an unknown upstream, a ``(host,
        request_id)`` already in flight, or a session that cannot send.
        """
        kind = type(request_id)
        if kind is not int and kind is not str and not _valid_id(request_id):
            raise LocalProtocolError(f"a request id is a string or an integer, not {request_id!r}")
        if progress_token is not None and not _valid_id(progress_token):
            raise LocalProtocolError(f"a progress token is a string or an integer, not {progress_token!r}")
        if timeout is not None and not (
            isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0
        ):
            raise LocalProtocolError(f"timeout must be a positive number of seconds, not {timeout!r}")
        key: _CallKey = (host, request_id)
        if key in self._calls:
            raise LocalProtocolError(f"host {host!r} already has request {request_id!r} in flight")
        up = self._upstreams.get(upstream)
        if up is None:
            up = self._upstream(upstream)  # raises, saying why
        narrowed = self._narrowed_for(host_capabilities)
        if now > self._now:
            self._now = now
        else:
            now = self._now
        roots = host_capabilities.get("roots")
        session = up.session
        sent = upstream_params(params)
        progress = progress_token is not None
        # Raises before changing anything when the session cannot send.  The usual call: its bytes
        # handed straight back (nothing of the session's was queued before them), no Send to drain.
        now_sent = session.request_now(
            method, sent, progress=progress, log_level="debug", capabilities=narrowed
        )
        if now_sent is None:
            handle = session.request(
                method, sent, progress=progress, log_level="debug", capabilities=narrowed
            )
        else:
            handle = now_sent[0]
        call = _Call(  # every field, in order: this runs for every call
            key,
            host,
            request_id,
            upstream,
            handle,
            method,
            progress_token,
            roots is not None and (type(roots) is dict or isinstance(roots, Mapping)),  # declares_roots
            timeout,
            verbatim,
            None if timeout is None else now + timeout,  # deadline
            None,  # left
            _S.RUNNING,
            {},  # asks
            False,  # silent
        )
        self._calls[key] = call
        up.calls[handle] = key
        if now_sent is None:
            self._drain(upstream, up)
        elif not up.lost:
            self._actions.append(_send_upstream(upstream=upstream, payload=now_sent[1], stream=handle))

    def host_cancelled(self, host: HostKey, request_id: RequestId, reason: str | None = None) -> None:
        """The host gave up on its call: it is cancelled upstream and never answered.  Drain after this.

        A question out for it is withdrawn.  A cancel for a call that already
        ended (or never was) is ignored (MCP 2025-06-18
        basic/utilities/cancellation: a late cancel is ignored).
        """
        call = self._calls.get((host, request_id))
        if call is None:
            return
        up = self._upstreams[call.upstream]
        self._end(call, upstream_reason="the call it was asked for was cancelled")
        up.session.cancel(call.handle, reason)
        self._drain(call.upstream)

    def host_closed(self, host: HostKey, now: float) -> None:
        """The host connection ended: its calls are cancelled upstream, its questions refused there.

        A legacy question is answered ``-32603``; a round is refused
        (``refuse_round``).  Nothing more is sent to ``host``.  Drain actions
        after this.
        """
        self._clock(now)
        touched: dict[UpstreamKey, None] = {}
        # The host's calls, in the order they came: found among the calls in flight (a host closes
        # once; keeping each host's calls apart would cost every call).
        for key in [key for key in self._calls if key[0] == host]:
            call = self._calls.get(key)
            if call is None:
                continue
            call.silent = True
            up = self._upstreams[call.upstream]
            touched[call.upstream] = None
            if up.session.awaiting_answers(call.handle):  # a round is out: refuse it, as the host would
                up.session.refuse_round(
                    call.handle, _error(INTERNAL_ERROR, "the host's connection closed before it answered")
                )
                self._drain(call.upstream)  # Failed ends the call here, silently
            if call.key in self._calls:
                self._end(call, upstream_reason="the host it was for closed its connection")
                up.session.cancel(call.handle, "the host closed its connection")
        for upstream in touched:
            self._drain(upstream)

    def host_answered(self, host: HostKey, ask_id: int, answers: Mapping[str, Any], *, now: float) -> None:
        """The host's answers to question ``ask_id``: one result per key asked.  Drain actions after this.

        A legacy question's answer goes back to the upstream's request; a
        round's answers (with any mcpx gave itself) go back as the retry.
        The call's clock resumes when its last question is settled.  An
        answer to a question already withdrawn is ignored;
        ``LocalProtocolError`` for an ask id never issued, another host's,
        or answers whose keys are not exactly the ones asked.
        """
        ask = self._ask_of(host, ask_id)
        if ask is None:
            return
        if not isinstance(answers, Mapping) or set(answers) != ask.keys:
            got = sorted(answers) if isinstance(answers, Mapping) else answers
            raise LocalProtocolError(f"question {ask_id} asked for {sorted(ask.keys)}, not {got}")
        if not all(isinstance(value, Mapping) for value in answers.values()):
            raise LocalProtocolError("each answer is a result object")
        now = self._clock(now)
        call = self._calls[ask.call]
        up = self._upstreams[call.upstream]
        self._settle(call, ask, now)
        if ask.server_request is not None:
            (answer,) = answers.values()
            up.session.answer(ask.server_request, answer)
        else:
            up.session.resume(call.handle, {**ask.own, **answers}, request_state=ask.request_state)
        self._drain(call.upstream)

    def host_refused(self, host: HostKey, ask_id: int, error: Mapping[str, Any], *, now: float) -> None:
        """The host will not answer question ``ask_id``: ``error`` is its JSON-RPC error object.

        A legacy upstream gets that error for its request; a round's call
        ends with it (MCP 2026-07-28 basic/patterns/mrtr: a retry must carry
        every input, and an input has no error shape).  Drain actions after
        this.  Late and misused ask ids as for ``host_answered``.
        """
        code, message = error.get("code"), error.get("message")
        if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
            raise LocalProtocolError(f"an error object has an integer code and a string message: {error!r}")
        ask = self._ask_of(host, ask_id)
        if ask is None:
            return
        now = self._clock(now)
        call = self._calls[ask.call]
        up = self._upstreams[call.upstream]
        self._settle(call, ask, now)
        if ask.server_request is not None:
            up.session.answer_error(ask.server_request, code, message, error.get("data"))
        else:
            up.session.refuse_round(call.handle, dict(error))  # Failed: the host's call ends with it
        self._drain(call.upstream)

    # -- time ------------------------------------------------------------------------------

    def handle_timer(self, now: float) -> None:
        """Time out every call whose deadline has come; drain actions and re-arm the timer after this."""
        now = self._clock(now)
        due = sorted(
            (c for c in self._calls.values() if c.deadline is not None and c.deadline <= now),
            key=lambda c: c.deadline or 0.0,
        )
        touched: dict[UpstreamKey, None] = {}
        for call in due:
            touched[call.upstream] = None
            self._time_out(call)
        for upstream in touched:
            self._drain(upstream)

    # -- internals: the caller's inputs -----------------------------------------------------

    def _clock(self, now: float) -> float:
        self._now = max(self._now, now)
        return self._now

    def _upstream(self, upstream: UpstreamKey) -> _Upstream:
        up = self._upstreams.get(upstream)
        if up is None:
            raise LocalProtocolError(
                f"upstream {upstream!r} is not one the router holds (add_upstream first)"
            )
        return up

    def _narrowed_for(self, host_capabilities: Mapping[str, Any]) -> dict[str, Any]:
        """mcpx's capabilities narrowed by the host's: once per distinct set, the last few kept.

        A legacy host's every call carries the one mapping its session read
        at ``initialize`` (never changed after): that mapping, by identity,
        is answered without writing it out again.
        """
        last = self._narrowed_last
        if last is not None and last[0] is host_capabilities:
            return last[1]
        try:
            key = orjson.dumps(host_capabilities, option=orjson.OPT_SORT_KEYS)
        except TypeError as exc:
            raise LocalProtocolError(f"host capabilities must be JSON: {exc}") from None
        narrowed = self._narrowed.get(key)
        if narrowed is not None:
            self._narrowed.move_to_end(key)
        else:
            narrowed = narrowed_capabilities(self.capabilities, host_capabilities)
            self._narrowed[key] = narrowed
            if len(self._narrowed) > self._cache_limit:
                self._narrowed.popitem(last=False)
        self._narrowed_last = (host_capabilities, narrowed)
        return narrowed

    def _ask_of(self, host: HostKey, ask_id: int) -> _Ask | None:
        if not isinstance(ask_id, int) or isinstance(ask_id, bool) or not 1 <= ask_id <= self._last_ask_id:
            raise LocalProtocolError(f"question {ask_id!r} was never asked")
        ask = self._asks.get(ask_id)
        if ask is None:
            return None  # withdrawn or settled already: a late answer
        if ask.call[0] != host:
            raise LocalProtocolError(f"question {ask_id} was put to another host, not to {host!r}")
        return ask

    # -- internals: the call's life ---------------------------------------------------------

    def _move(self, call: _Call, event: _CallIn, now: float) -> None:
        found = _CALL_TRANSITIONS.get((call.state, event))
        if found is None:
            raise LocalProtocolError(f"{event.value} is not allowed for a call while {call.state.value}")
        call.state, clock = found
        if clock is _Clock.PAUSE and call.deadline is not None:
            call.left, call.deadline = max(call.deadline - now, 0.0), None
        elif clock is _Clock.RESUME and call.left is not None:
            call.deadline, call.left = now + call.left, None
        elif clock is _Clock.STOP:
            call.deadline = call.left = None

    def _end(
        self,
        call: _Call,
        *,
        result: Mapping[str, Any] | None = None,
        error: Mapping[str, Any] | None = None,
        event: _CallIn = _CallIn.END,
        upstream_reason: str = "the call it was asked for has ended",
    ) -> None:
        """Forget ``call``: its questions withdrawn, then its answer (if any) to its host.

        A legacy question still out is answered ``-32603`` upstream with
        ``upstream_reason`` (unless the upstream is lost).  The caller cancels
        the call upstream where that is needed.
        """
        up = self._upstreams[call.upstream]
        if call.asks:
            for ask_id in list(call.asks):
                ask = self._asks.pop(ask_id)
                if ask.server_request is not None:
                    del up.questions[ask.server_request]
                    if not up.lost:
                        up.session.answer_error(
                            ask.server_request, INTERNAL_ERROR, f"{upstream_reason}; not answered"
                        )
                if not call.silent:
                    self._actions.append(WithdrawAsk(host=call.host, ask_id=ask_id))
            call.asks.clear()
        if event is _CallIn.END and call.state is _S.RUNNING:  # the usual end: (running, end) in line
            call.state = _S.ENDED
            call.deadline = call.left = None
        else:
            self._move(call, event, self._now)
        del self._calls[call.key]
        del up.calls[call.handle]
        if call.silent:
            return
        if error is not None:
            self._actions.append(
                _answer(host=call.host, request_id=call.request_id, result=None, error=dict(error))
            )
        elif result is not None:
            keep = call.verbatim or result.get("resultType") == "task"
            answer = dict(result) if keep else relayed(result)
            self._actions.append(
                _answer(host=call.host, request_id=call.request_id, result=answer, error=None)
            )

    def _time_out(self, call: _Call) -> None:
        assert call.timeout is not None
        seconds = f"{call.timeout:g}s"
        message = (
            f"{call.method} did not finish within {seconds} (the call timeout; time spent waiting for "
            "the host's answers is not counted); mcpx cancelled it upstream. Call again, or raise "
            "pool.callTimeout for a tool that needs longer"
        )
        error = _error(INTERNAL_ERROR, message, {"kind": "call-timeout", "timeoutSeconds": call.timeout})
        up = self._upstreams[call.upstream]
        self._end(
            call, error=error, event=_CallIn.TIME_OUT, upstream_reason="the call it was asked for timed out"
        )
        up.session.cancel(call.handle, f"timed out after {seconds}")

    def _late(self, call: _Call, now: float) -> bool:
        """Whether ``call``'s deadline passed before this question came (the driver woke late)."""
        return call.deadline is not None and call.deadline <= now

    def _ask(self, call: _Call, ask: _Ask, requests: Mapping[str, Mapping[str, Any]]) -> None:
        self._asks[ask.ask_id] = ask
        self._last_ask_id = ask.ask_id
        call.asks[ask.ask_id] = None
        self._move(call, _CallIn.ASK, self._now)
        self._actions.append(
            AskHost(host=call.host, request_id=call.request_id, ask_id=ask.ask_id, requests=dict(requests))
        )

    def _settle(self, call: _Call, ask: _Ask, now: float) -> None:
        """Question ``ask`` is answered, refused or withdrawn: forget it; the clock resumes after the last."""
        del self._asks[ask.ask_id]
        del call.asks[ask.ask_id]
        if ask.server_request is not None:
            del self._upstreams[call.upstream].questions[ask.server_request]
        self._move(call, _CallIn.SETTLE if call.asks else _CallIn.SETTLE_LAST, now)

    # -- internals: the session's outputs ---------------------------------------------------

    def _drain(self, upstream: UpstreamKey, up: _Upstream | None = None) -> None:
        """Translate ``upstream``'s session actions, and those the translation itself causes."""
        if up is None:
            up = self._upstreams[upstream]
        while actions := up.session.next_actions():
            for action in actions:
                self._translate(upstream, up, action)

    def _translate(self, upstream: UpstreamKey, up: _Upstream, action: Any) -> None:
        if isinstance(action, Send):
            if not up.lost:
                self._actions.append(
                    _send_upstream(upstream=upstream, payload=action.payload, stream=action.stream)
                )
        elif isinstance(action, _CALL_EVENTS):  # the usual answer comes here: second in line
            key = up.calls.get(action.handle)
            if key is None:
                self._actions.append(UpstreamOutcome(upstream=upstream, event=action))
            elif isinstance(action, Completed):
                self._end(self._calls[key], result=action.result)
            elif isinstance(action, Failed):
                self._end(self._calls[key], error=action.error)
            elif isinstance(action, InputRequired):
                self._round(up, self._calls[key], action)
            else:
                self._progress(self._calls[key], action)
        elif isinstance(action, AbandonStream):
            if not up.lost:
                self._actions.append(AbandonUpstream(upstream=upstream, handle=action.handle))
        elif isinstance(action, ServerRequest):
            self._question(upstream, up, action)
        elif isinstance(action, ServerRequestCancelled):
            ask_id = up.questions.get(action.request_id)
            if ask_id is not None:  # its question was put to a host: withdrawn there
                ask = self._asks[ask_id]
                call = self._calls[ask.call]
                self._settle(call, ask, self._now)
                self._actions.append(WithdrawAsk(host=call.host, ask_id=ask_id))
            else:  # perhaps one the caller is answering (see _question): its own to withdraw
                self._actions.append(UpstreamOutcome(upstream=upstream, event=action))
        elif isinstance(action, ServerNotification):
            self._notification(upstream, up, action)
        elif isinstance(action, Trace):
            if self._trace_on:
                self._actions.append(action)
        elif not isinstance(action, Ready):  # Ready: the handshake, done before add_upstream
            raise AssertionError(f"unexpected session action {action!r}")

    def _progress(self, call: _Call, report: Progress) -> None:
        """A report for ``call``, under the host's own token (MCP 2025-06-18 basic/utilities/progress)."""
        if call.progress_token is None or call.silent:
            return
        params: dict[str, Any] = {"progressToken": call.progress_token, "progress": report.progress}
        if report.total is not None:
            params["total"] = report.total
        if report.message is not None:
            params["message"] = report.message
        self._actions.append(
            NotifyHost(
                host=call.host, request_id=call.request_id, method="notifications/progress", params=params
            )
        )

    def _notification(self, upstream: UpstreamKey, up: _Upstream, note: ServerNotification) -> None:
        """A log message to every host with a call on ``upstream`` (spec/gateway.md §5); everything to the caller."""
        params = note.params
        level = params.get("level")
        if note.method == "notifications/message" and isinstance(level, str) and level in LOG_LEVELS:
            log: dict[str, Any] = {"level": level, "data": params.get("data")}
            logger = params.get("logger")
            if isinstance(logger, str):
                log["logger"] = logger
            hosts = dict.fromkeys(self._calls[key].host for key in up.calls.values())
            for host in hosts:
                self._actions.append(
                    NotifyHost(host=host, request_id=None, method="notifications/message", params=dict(log))
                )
        self._actions.append(UpstreamNotification(upstream=upstream, method=note.method, params=params))

    def _question(self, upstream: UpstreamKey, up: _Upstream, request: ServerRequest) -> None:
        """A legacy upstream's question: its call's host is asked only if that call is alone on the connection.

        The session holds every request on the connection (the caller's own
        included), so "alone" is the session's count, not the router's.  When
        the router has no call on the connection, the question can only be
        for one of the caller's own requests: it is the caller's to answer
        (``UpstreamOutcome``), as its withdrawal is.
        """
        session, rid, method = up.session, request.request_id, request.method
        if not up.calls:
            self._actions.append(UpstreamOutcome(upstream=upstream, event=request))
            return
        call = self._calls[next(iter(up.calls.values()))] if len(up.calls) == 1 else None
        if call is None or session.in_flight != 1:
            self._trace(
                "question-unattributed", upstream=repr(upstream), method=method, calls=session.in_flight
            )
            session.answer_error(
                rid, INTERNAL_ERROR, f"mcpx cannot tell which of its callers {method} is for; not asked"
            )
            return
        if method == "roots/list" and not call.declares_roots:
            session.answer(rid, OWN_ROOTS)
            return
        if self._late(call, self._now):
            self._time_out(call)
            session.answer_error(rid, INTERNAL_ERROR, f"the call {method} was for timed out; not asked")
            return
        if len(call.asks) >= self.max_questions:
            session.answer_error(
                rid,
                INTERNAL_ERROR,
                f"the call {method} is for has {len(call.asks)} questions out already "
                f"(at most {self.max_questions}); not asked",
            )
            return
        ask = _Ask(ask_id=next(self._ask_ids), call=call.key, keys=frozenset({method}), server_request=rid)
        up.questions[rid] = ask.ask_id
        self._ask(call, ask, {method: {"method": method, "params": dict(request.params)}})

    def _round(self, up: _Upstream, call: _Call, required: InputRequired) -> None:
        """A 2026-07-28 round: the call's host is asked the whole of it, under the upstream's keys."""
        session = up.session
        own: dict[str, Any] = {}
        asked: dict[str, Mapping[str, Any]] = {}
        for key, item in required.input_requests.items():
            method = item.get("method") if isinstance(item, Mapping) else None
            params = item.get("params", {}) if isinstance(item, Mapping) else None
            if not isinstance(method, str) or not isinstance(params, Mapping):
                problem = f"the server's question {key!r} names no method and params"
                session.refuse_round(call.handle, _error(INVALID_PARAMS, problem))
                return
            if method not in QUESTION_METHODS:
                problem = f"the server's question {key!r} cannot be asked: {method} is not a question"
                session.refuse_round(call.handle, _error(INVALID_PARAMS, problem))
                return
            if method == "roots/list" and not call.declares_roots:
                own[key] = dict(OWN_ROOTS)
            else:
                asked[key] = {"method": method, "params": dict(params)}
        if not asked:  # mcpx answered it all: the retry goes out at once
            session.resume(call.handle, own, request_state=required.request_state)
            return
        if len(asked) > self.max_questions:
            problem = (
                f"the server asked {len(asked)} questions at once (mcpx asks at most {self.max_questions})"
            )
            session.refuse_round(call.handle, _error(INTERNAL_ERROR, problem))
            return
        if self._late(call, self._now):
            self._time_out(call)
            return
        ask = _Ask(
            ask_id=next(self._ask_ids),
            call=call.key,
            keys=frozenset(asked),
            own=own,
            request_state=required.request_state,
        )
        self._ask(call, ask, asked)

    def _trace(self, event: str, **detail: Any) -> None:
        if self._trace_on:
            self._actions.append(Trace(event=event, detail=detail))
