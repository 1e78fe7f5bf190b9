"""The router's call transitions, records and fields, and the internals every input ends in.

The layer ``Router`` (router.py, where the rules are) stands on.  A call
changes state only through ``_CALL_TRANSITIONS``; the caller's inputs, a
call's life (granted, answered, asked, timed out, ended) and the draining of
the upstream sessions' actions into the router's own are here.
``_RouterBase.__init__`` holds every field.
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

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
from .enums import Table
from .errors import INTERNAL_ERROR, INVALID_PARAMS, LocalProtocolError
from .gateway_tools import narrowed_capabilities
from .jsonrpc import RequestId
from .revisions import LOG_LEVELS
from .router_actions import (
    OWN_ROOTS,
    QUESTION_METHODS,
    AbandonUpstream,
    AskHost,
    HostKey,
    NotifyHost,
    ProgressToken,
    RouterAction,
    UpstreamKey,
    UpstreamNotification,
    UpstreamOutcome,
    WithdrawAsk,
    _answer,
    _CallKey,
    _send_upstream,
    relayed,
)


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


class _RouterBase:
    """The router's fields and its internals (see ``Router``)."""

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
