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

Modules: ``Router``'s inputs are here (introspection, upstream connections,
host calls, time); beside it, ``router_actions`` holds the actions it gives
and what a message becomes on the other hop (``upstream_params``,
``relayed``), and ``router_base`` the layer ``Router`` stands on: the call's
transitions, the records, every field (``_RouterBase.__init__``), and the
internals every input ends in (a call's life, the sessions' outputs
drained).  Every public name is importable from this module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .client_session import ClientSession, Completed
from .errors import INTERNAL_ERROR, LocalProtocolError
from .jsonrpc import RequestId
from .router_actions import (
    OWN_ROOTS,
    QUESTION_METHODS,
    AbandonUpstream,
    AnswerHost,
    AskHost,
    HostKey,
    NotifyHost,
    ProgressToken,
    RouterAction,
    SendUpstream,
    UpstreamKey,
    UpstreamNotification,
    UpstreamOutcome,
    WithdrawAsk,
    _CallKey,
    _send_upstream,
    relayed,
    upstream_params,
)
from .router_base import _S, _Call, _error, _RouterBase, _Upstream, _valid_id

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


class Router(_RouterBase):
    """Host calls in flight through the gateway and the upstream connections they run on.

    ``capabilities`` are what mcpx declares to its upstreams (narrowed per
    host for each call).  ``max_questions`` bounds the questions one call may
    have out to its host at once (a round's keys, or a legacy upstream's
    concurrent server requests); ``capability_cache`` bounds the narrowed
    capability sets kept.  After every input drain ``next_actions()``, then
    re-arm the timer from ``get_timer()``.  See the module docstring.
    """

    @property
    def in_flight(self) -> int:
        """Host calls the router holds (not answered, cancelled or dropped yet)."""
        return len(self._calls)

    @property
    def has_actions(self) -> bool:
        """Whether actions are queued: ``next_actions()`` would give some."""
        return bool(self._actions)

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
        self._answered(upstream, up, handle, up.calls.get(handle), result)

    def _answered(
        self,
        upstream: UpstreamKey,
        up: _Upstream,
        handle: int,
        key: _CallKey | None,
        result: Mapping[str, Any],
    ) -> None:
        """The session's usual answer to ``handle``, taken: its call ends (or the caller's own request)."""
        if key is None:  # one of the caller's own requests (a catalog read, a task poll)
            self._actions.append(
                UpstreamOutcome(upstream=upstream, event=Completed(handle=handle, result=result))
            )
            return
        call = self._calls[key]
        asked = bool(call.asks)
        self._end(call, result=result)
        if asked:  # a legacy question still out was answered upstream: on the session, to drain
            self._drain(upstream, up)

    def take_answer(
        self, upstream: UpstreamKey, obj: Any, *, now: float
    ) -> tuple[HostKey, RequestId, Mapping[str, Any]] | None:
        """``upstream_data`` for the usual message, a host call's plain result, handed back.

        What ``upstream_data`` would queue as ``AnswerHost``, as
        ``(host, request_id, result)`` (the result as the host gets it, its
        envelope taken off), with the call forgotten the same way, when
        ``obj`` is the upstream session's usual answer (``ClientSession.
        take_answer``) to a host call with no question out, whose host is
        still there, and nothing is queued before it.  Otherwise ``None``, and
        ``obj`` went to ``upstream_data``: drain actions after this.
        """
        up = self._upstreams.get(upstream)
        if up is not None and not self._actions:
            answer = up.session.take_answer(obj)
            if answer is not None:
                if now > self._now:  # noqa: PLR1730 - on every answer: a comparison, not a call to max()
                    self._now = now
                handle, result = answer
                key = up.calls.get(handle)
                call = None if key is None else self._calls[key]
                if call is None or call.asks or call.silent or call.verbatim:
                    self._answered(upstream, up, handle, key, result)
                    return None
                call.state = _S.ENDED  # (running, end): the usual end, as _end makes it
                call.deadline = call.left = None
                del self._calls[key]  # type: ignore[arg-type]  # a call was found under it
                del up.calls[handle]
                return call.host, call.request_id, relayed(result)
        self.upstream_data(upstream, obj, now=now)
        return None

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
        self._host_request(
            host,
            request_id,
            method,
            params,
            upstream,
            host_capabilities,
            progress_token,
            now,
            timeout,
            verbatim,
        )

    def host_request_now(
        self,
        host: HostKey,
        request_id: RequestId,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        upstream: UpstreamKey,
        host_capabilities: Mapping[str, Any],
        now: float,
    ) -> tuple[int, bytes] | None:
        """``host_request``, its bytes handed back to write rather than queued: ``(stream, payload)``.

        What ``SendUpstream`` would carry, for the usual call (no progress
        token, no timeout of the router's, not verbatim) when nothing is
        queued before it, on the router or on the upstream's session: its
        bytes then go in the order ``host_request`` would have sent them.
        Otherwise ``None``, with nothing done: use ``host_request``.  For the
        gateway's relay lane, on every call: no action to build and drain.
        Raises as ``host_request`` does, and ``LocalProtocolError`` for an
        upstream already lost.
        """
        if self._actions:
            return None
        return self._host_request(
            host,
            request_id,
            method,
            params,
            upstream,
            host_capabilities,
            None,
            now,
            None,
            False,
            now_only=True,
        )

    def _host_request(
        self,
        host: HostKey,
        request_id: RequestId,
        method: str,
        params: Mapping[str, Any] | None,
        upstream: UpstreamKey,
        host_capabilities: Mapping[str, Any],
        progress_token: ProgressToken | None,
        now: float,
        timeout: float | None,
        verbatim: bool,
        *,
        now_only: bool = False,
    ) -> tuple[int, bytes] | None:
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
        if now_only and up.lost:
            raise LocalProtocolError(f"upstream {upstream!r} is lost: nothing can be written to it")
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
        if now_sent is None and now_only:
            return None
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
        elif now_only:
            return now_sent
        elif not up.lost:
            self._actions.append(_send_upstream(upstream=upstream, payload=now_sent[1], stream=handle))
        return None

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
