"""The pool of upstream instances, as a pure state machine: who gets which running server, and when.

The daemon keeps upstream MCP servers warm so that a call does not pay for a
start.  This module decides everything about that and does none of it: it
says ``Spawn`` and ``Stop``, ``Granted`` and ``Refused``, and the driver
starts processes (or opens HTTP clients), sends the calls, and reports back.
spec/gateway.md describes what it does: §7 (the pool's rules), §3 (identity:
who shares an instance), §4 (one instance serves one scope key; ``calls_on``
is what question correlation counts; ``pool.callTimeout`` pauses while a
question is pending).  Settings: ``pool.idleTimeout``, ``pool.callTimeout``,
``pool.maxSpawnsPerMinute``, ``pool.startTimeout`` (and a server's own
``startTimeout``).

Rules
=====

* **Scope.**  Instances are keyed by (server, scope key).  A ``shared``
  server has one instance for everybody; a ``connection`` server one per
  host connection (the scope key ``acquire`` is given: the identity of
  spec/gateway.md §3 — ``_meta["dev.mcpx/session"]``, the stdio process, the
  legacy HTTP session, or a key of its own for each 2026-07-28 request); a
  ``host`` server one per host the same way, except that calls with no
  identity (``acquire`` without a scope key) share one instance, as for
  ``shared``; a ``call`` server a fresh instance for each call, stopped when
  the call ends.  Calls of different
  lanes (``acquire(lane=)``; the gateway's lane is the era of the host, for
  a server that speaks both) never share a shared instance or a spare: a
  shared server has one instance per lane, and each Spawn says its lane.
* **Started on first use.**  Nothing runs until a call wants it.  Callers
  wait while their instance starts, for at most the server's start timeout
  (``start_timeouts[server]``, else ``start_timeout``; or their own requested
  timeout, if lower); an instance that has not started within it is stopped
  and counts as a failed start, whose reason names the setting to raise.
* **Kept warm, reaped when idle.**  An instance with no call in flight is
  stopped ``idle_timeout`` seconds after its last call ended (or after it
  started, if nobody was left waiting).  ``idle_timeout == 0`` stops it as
  soon as it is idle (``pool.idleTimeout = 0s``: "stop it after each use").
* **Failures back off.**  A crash or a failed start puts the server in
  backoff: no new instance of it before ``backoff_base * 2**(n-1)`` seconds
  (at most ``backoff_cap``) after the n-th consecutive failure.  The streak
  ends when a call on the server completes, or when an instance that crashes
  had been up for at least ``backoff_cap``.  Instances are started again on
  demand (the next call to that server retries), not eagerly; callers that
  arrive during backoff wait for the retry when it falls within
  their wait, and are refused at once, with when to try again, when it does
  not.  Instances of the server that are still running keep serving.
* **A spare, if asked for** (``spare``): a host-, connection- or call-scoped server
  that has been used keeps one more instance started, not yet anybody's;
  the next connection (or call) that needs an instance of it gets that one,
  started or still starting, and another spare is spawned.  A spare counts
  as a spawn, waits out backoff, and is reaped when idle like any instance.
* **Spawns are rate-limited per server**: at most ``max_spawns_per_minute``
  in any 60-second window (half-open: a spawn at t leaves the window at
  t + 60).  A caller who cannot get a spawn within its wait is refused with
  when mcpx will try again.
* **Calls in flight are never lost or hung.**  A crash fails every call in
  flight on the instance (``CallFailed``); so do ``restart`` and the end of a
  connection-scoped instance's connection.  Every ``acquire`` ends in exactly
  one of ``Refused``, ``Granted`` then (``release`` | ``CallFailed`` |
  ``CallTimedOut``), or a ``release`` while waiting.
* **Call timeout.**  A granted call may run for ``min(requested,
  call_timeout)`` seconds (the caller may lower the bound, never raise it;
  spec/gateway.md §7).  The clock starts at ``Granted`` — waiting for a start
  is bounded separately — and pauses while a question from the upstream is
  pending on the call (``question_pending``, spec/gateway.md §4).  On expiry
  the pool emits ``CallTimedOut``: the driver cancels the call upstream
  (``notifications/cancelled``) and answers its caller with ``error``.
  Progress does not extend it (2025-11-25 basic/lifecycle, Timeouts, leaves
  that to the implementation; spec/gateway.md §7).
* **Errors name the server and say what to do.**  Every ``Refused``,
  ``CallFailed`` and ``CallTimedOut`` carries a JSON-RPC error object whose
  message names the server and whose ``data`` has ``server``, a stable
  ``kind`` (``ERROR_KINDS``) and, where it applies, ``retryAfterSeconds`` —
  so a dead upstream is an error, never an empty list.

Theory of operation
===================

Three records: ``_Server`` (scope, backoff streak, spawn times, last error),
``_Slot`` (one (server, scope key): its live instance, if any, and the calls
waiting for it) and ``_Call`` / ``_Instance``.  Instance and call states
change only through ``_INSTANCE_TRANSITIONS`` and ``_CALL_TRANSITIONS``
(tables from (state, input) to (effect, next state): the transitions are data,
not code); a pair missing from a table is a ``LocalProtocolError`` with nothing
changed.  Stopped instances and ended calls are forgotten: the driver's late
news about them (a crash reported after the pool stopped the instance, a
``release`` after a timeout) is ignored, while an instance id the pool never
allocated is a ``LocalProtocolError``.  Every ``Spawn`` is followed by exactly
one ``Stop`` for the same instance, whatever ended it (a ``Stop`` for a process
that already exited only frees what the driver holds for it).

Time comes in as ``now`` (monotonic seconds; an earlier ``now`` than one
already seen is taken as the later one).  After every input drain
``next_actions()`` and re-arm the timer from ``get_timer()``; call
``handle_timer(now)`` when it fires.  ``get_timer`` is a scan of the live
records: a pool holds tens of instances, not thousands.

Modules: ``Pool``'s inputs and queries are here; beside it,
``pool_actions`` holds ``PoolConfig``, the actions the pool gives and the
status it reports, and ``pool_base`` the layer ``Pool`` stands on: the
states and transition tables, the records, every field
(``_PoolBase.__init__``), and the effects and helpers the inputs share.
Every public name is importable from this module.
"""

from __future__ import annotations

import math

from .errors import INVALID_PARAMS, LocalProtocolError
from .pool_actions import (
    ERROR_KINDS,
    SCOPES,
    SPAWN_WINDOW,
    CallFailed,
    CallId,
    CallTimedOut,
    Granted,
    InstanceState,
    InstanceStatus,
    PoolAction,
    PoolConfig,
    Refused,
    ServerState,
    ServerStatus,
    Spawn,
    Stop,
)
from .pool_base import _C, _I, _Call, _CallIn, _error, _In, _PoolBase, _seconds, _Server, _Slot, _SlotKey

__all__ = [
    "ERROR_KINDS",
    "SCOPES",
    "SPAWN_WINDOW",
    "CallFailed",
    "CallId",
    "CallTimedOut",
    "Granted",
    "InstanceState",
    "InstanceStatus",
    "Pool",
    "PoolAction",
    "PoolConfig",
    "Refused",
    "ServerState",
    "ServerStatus",
    "Spawn",
    "Stop",
]


def _slot_key(srv: _Server, scope_key: str | None, call_id: CallId, lane: str | None) -> _SlotKey:
    """Which slot a call to ``srv`` takes: the server's one (per lane), its caller's connection's, or its own."""
    if srv.scope == "shared" or (srv.scope == "host" and scope_key is None):
        return (srv.name, "shared", lane)
    if srv.scope in ("connection", "host"):
        return (srv.name, "connection", scope_key)  # one host: one lane
    return (srv.name, "call", call_id)


class Pool(_PoolBase):
    """Upstream instances for every configured server; see the module docstring for the rules.

    ``servers`` maps each server's name to its scope (``"shared"``, ``"host"``,
    ``"connection"`` or ``"call"``; ``mcpx.config.Scope`` values will do):
    ``Pool({s.name: s.scope for s in config.servers.values()}, config=...)``.

    Every input may queue actions: drain ``next_actions()`` after it, perform
    them in order, then re-arm the timer from ``get_timer()``.
    """

    def acquire(
        self,
        server: str,
        scope_key: str | None,
        call_id: CallId,
        now: float,
        *,
        timeout: float | None = None,
        lane: str | None = None,
    ) -> None:
        """A call wants an instance of ``server``.

        ``scope_key`` is the caller's identity (spec/gateway.md §3); a
        connection-scoped server needs one.  ``timeout`` is the caller's own
        bound for this call (``--pool-call-timeout``); it is clamped to
        ``call_timeout``.  ``lane`` keeps calls apart that must not share an
        instance (the gateway's: the era of the host, for a server that speaks
        both): instances, and spares, serve the calls of one lane.  The call
        ends in ``Refused``, or in ``Granted`` and later ``release`` /
        ``CallFailed`` / ``CallTimedOut``; ``release`` it to stop waiting.
        """
        if call_id in self._calls:
            raise LocalProtocolError(f"call {call_id!r} is already in the pool; call ids must be unique")
        if timeout is not None and not (
            isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0
        ):
            raise LocalProtocolError(
                f"a call's timeout must be a positive number of seconds, not {timeout!r}"
            )
        srv = self._servers.get(server)
        if srv is not None and srv.scope == "connection" and scope_key is None:
            raise LocalProtocolError(
                f"server {server!r} is connection-scoped: acquire needs the caller's scope key"
            )
        now = self._clock(now)
        if srv is None:
            configured = ", ".join(sorted(self._servers)) or "none"
            self._emit(
                Refused(
                    call_id=call_id,
                    error=_error(
                        server,
                        "unknown-server",
                        f"no server named {server!r} is configured (configured: {configured}); "
                        "`mcpx servers` lists them",
                        code=INVALID_PARAMS,
                    ),
                )
            )
            return
        key = _slot_key(srv, scope_key, call_id, lane)
        self._add_call(call_id, server, key, now, timeout)
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _Slot(
                key=key, scope_key=None if srv.scope == "shared" else scope_key, lane=lane
            )
        slot.waiting.append(call_id)
        if slot.instance is None:
            self._adopt_spare(slot)
        if slot.instance is not None:
            inst = self._instances[slot.instance]
            if inst.state is not _I.STARTING:
                self._grant_waiters(slot, inst, now)
        else:
            self._serve_waiters(slot, now)
        self._keep_spare(srv, now, lane)

    def acquire_now(
        self, server: str, scope_key: str | None, call_id: CallId, now: float, lane: str | None = None
    ) -> int | None:
        """``acquire`` for a call an instance can take at once: that instance, and no ``Granted`` follows.

        The usual call to a running server: its slot (shared, or the caller's
        connection) has an instance that is not starting and no call waits
        before this one.  Otherwise ``None`` with nothing changed: ``acquire``
        it.  The call is then the pool's as if ``acquire`` had granted it:
        ``release`` it, or it ends in ``CallFailed`` / ``CallTimedOut``.
        """
        srv = self._servers.get(server)
        if srv is None or call_id in self._calls:
            return None
        key = _slot_key(srv, scope_key, call_id, lane)
        slot = self._slots.get(key)  # a call-scoped call's slot is new: never found
        if slot is None or slot.instance is None or slot.waiting:
            return None
        inst = self._instances[slot.instance]
        state = inst.state
        if state is _I.STARTING:
            return None
        now = self._clock(now)
        # ``_add_call`` then ``_grant``, in line (this runs for nearly every call): the call is
        # RUNNING at once, and the instance READY (``(IDLE|READY, grant)`` has no effect).
        budget = self.config.call_timeout
        self._calls[call_id] = _Call(
            call_id,
            server,
            key,
            _C.RUNNING,
            now,
            now + srv.start_timeout,
            budget,
            None,
            inst.id,
            now + budget,
        )
        self._lower(now + budget)
        inst.calls[call_id] = None
        if state is not _I.READY:
            self._transition(inst, _In.GRANT, now, "")
        if srv.scope != "shared":  # a shared server keeps no spare; once it is there, nothing to do
            spare = self._slots.get((server, "spare", lane))
            if spare is None or spare.instance is None:
                self._keep_spare(srv, now, lane)
        return inst.id

    def release(self, call_id: CallId, now: float) -> None:
        """The call's answer arrived (or its caller gave up): let go of it.

        A call that is still waiting stops waiting.  A call the pool already
        ended (``Refused``, ``CallFailed``, ``CallTimedOut``) or never held is
        ignored: the driver's release races with the pool's timers.
        """
        call = self._calls.get(call_id)
        if call is None:
            return
        now = self._clock(now)
        if call.state is _C.WAITING:
            self._move_call(call, _CallIn.RELEASE)
            slot = self._slots[call.slot]
            slot.waiting.remove(call_id)
            if call.slot[1] == "call" and slot.instance is not None:
                self._transition(
                    self._instances[slot.instance], _In.STOP, now, "the call it was started for ended"
                )
            self._forget_slot_if_unused(slot)
            return
        self._servers[call.server].failures = 0  # a call completed: the server works
        if call.state is _C.RUNNING:  # ``_end_running``, in line: the usual release
            call.state = _C.ENDED
            del self._calls[call_id]
            inst = self._instances[call.instance]  # type: ignore[index]  # a running call has one
            calls = inst.calls
            del calls[call_id]
            if calls and inst.state is _I.READY:
                return  # ``(READY, call ended)``: nothing changes
            self._transition(inst, _In.CALL_ENDED if calls else _In.LAST_CALL_ENDED, now, "")
            return
        self._end_running(call, _CallIn.RELEASE, now)

    def question_pending(self, call_id: CallId, pending: bool, now: float) -> None:
        """A question from the upstream is pending on ``call_id`` (``True``), or was answered / expired (``False``).

        Once per question: the call's timeout is paused while any is pending
        (spec/gateway.md §4) and resumes with the time it had left.  A call the
        pool already ended is ignored; a call that was never granted, or a
        ``False`` with no question pending, is a ``LocalProtocolError``.
        """
        call = self._calls.get(call_id)
        if call is None:
            return
        self._move_call(call, _CallIn.ASK if pending else _CallIn.ANSWER, check_only=True)
        if not pending and call.questions == 0:
            raise LocalProtocolError(f"call {call_id!r} has no question pending")
        now = self._clock(now)
        if pending:
            if call.questions == 0:
                assert call.deadline is not None
                if call.deadline <= now:  # expired before the question came: the timer was late
                    self._time_out(call, now)
                    return
                call.remaining = call.deadline - now
                call.deadline = None
            call.questions += 1
        else:
            call.questions -= 1
            if call.questions == 0:
                call.deadline = now + call.remaining
                self._lower(call.deadline)

    def connection_closed(self, scope_key: str, now: float) -> None:
        """The host connection ``scope_key`` ended: stop the connection-scoped instances that served it.

        Their calls in flight fail and their waiting calls are refused.  Calls
        the connection made to shared or call-scoped servers are untouched
        (the driver releases them as it sees fit).
        """
        now = self._clock(now)
        for key in [k for k in self._slots if k[1] == "connection" and k[2] == scope_key]:
            slot = self._slots[key]
            reason = f"the connection it served ({scope_key}) closed"
            for call_id in list(slot.waiting):
                self._refuse(
                    self._calls[call_id],
                    _error(
                        slot.server,
                        "connection-closed",
                        f"the connection closed before server {slot.server!r} was ready for this call",
                    ),
                )
            if slot.instance is not None:
                self._transition(self._instances[slot.instance], _In.STOP, now, reason, "connection-closed")
            self._forget_slot_if_unused(slot)

    def restart(self, server: str | None, now: float) -> None:
        """``mcpx restart [SERVER]``: stop every instance of ``server`` (of every server if ``None``).

        Calls in flight on them fail with an error saying so; the backoff
        streak is cleared (the spawn limit is not).  Calls waiting for a start
        get a fresh instance.  An unknown server is a ``LocalProtocolError``.
        """
        if server is not None and server not in self._servers:
            raise LocalProtocolError(f"no server named {server!r} is configured")
        now = self._clock(now)
        names = set(self._servers) if server is None else {server}
        for inst in [i for i in self._instances.values() if i.server in names]:
            self._transition(inst, _In.STOP, now, "restart requested", "restarted")
        for name in names:
            srv = self._servers[name]
            srv.failures = 0
            srv.retry_at = None
        for slot in [s for s in self._slots.values() if s.server in names]:
            self._serve_waiters(slot, now)

    def start_timeout(self, server: str) -> float:
        """How long an instance of ``server`` may take to start: its ``startTimeout``, else ``pool.startTimeout``."""
        return self._servers[server].start_timeout

    def start_timeout_setting(self, server: str) -> str:
        """The setting that bounds ``server``'s start, for a message: what to raise when it is too slow."""
        return (
            "the server's startTimeout"
            if self._servers[server].own_start_timeout
            else ("pool.startTimeout or the server's startTimeout")
        )

    def started(self, instance: int, now: float) -> None:
        """The instance is up and answered its handshake: its waiting calls are granted."""
        self._driver_news(instance, _In.STARTED, now, "")

    def start_failed(self, instance: int, reason: str, now: float, *, advised: bool = False) -> None:
        """The instance could not be started; ``reason`` says why (it is shown to callers).

        The callers are told to check the server's command or url, unless
        ``advised``: the reason says itself what to do (an unset secret).
        """
        inst = self._instances.get(instance)
        if inst is not None and advised:
            inst.advice = ""
        self._driver_news(instance, _In.START_FAILED, now, reason)

    def crashed(self, instance: int, reason: str, now: float) -> None:
        """The instance exited, or its connection broke; ``reason`` says how."""
        self._driver_news(instance, _In.CRASHED, now, reason)

    def handle_timer(self, now: float) -> None:
        """Time has reached ``get_timer()``: expire calls, starts and waits; reap idle instances; retry."""
        now = self._clock(now)
        for call in list(self._calls.values()):
            if call.state is _C.RUNNING and call.deadline is not None and call.deadline <= now:
                self._time_out(call, now)
        for inst in list(self._instances.values()):
            srv = self._servers[inst.server]
            if inst.state is _I.STARTING and inst.spawned_at + srv.start_timeout <= now:
                reason = (
                    f"it did not finish starting within {_seconds(srv.start_timeout)}. If it is only slow, "
                    f"raise {self.start_timeout_setting(srv.name)} (now {_seconds(srv.start_timeout)}), or check "
                    "its command or url (`mcpx servers`)"
                )
                inst.advice = ""  # the reason says what to do
                self._transition(inst, _In.START_TIMEOUT, now, reason)
        for call in list(self._calls.values()):
            if call.state is _C.WAITING and call.wait_deadline <= now:
                self._refuse(call, self._not_ready_error(call, now))
        for inst in list(self._instances.values()):
            if inst.state is _I.IDLE and inst.since + self.config.idle_timeout <= now:
                reason = f"idle for {_seconds(self.config.idle_timeout)} (pool.idleTimeout)"
                self._transition(inst, _In.STOP, now, reason)
        for srv in self._servers.values():
            if srv.retry_at is not None and srv.retry_at <= now:
                srv.retry_at = None
        for slot in list(self._slots.values()):
            if slot.waiting and slot.instance is None:
                self._serve_waiters(slot, now)

    def deadline_for(self, call_id: CallId) -> float | None:
        """When ``call_id``'s timeout fires: ``None`` while it waits for an instance, is paused, or has ended."""
        call = self._calls.get(call_id)
        return None if call is None else call.deadline

    def budget_for(self, call_id: CallId) -> float | None:
        """The call's whole timeout, ``min(requested, call_timeout)``; ``None`` once it has ended."""
        call = self._calls.get(call_id)
        return None if call is None else call.budget

    def instance_of(self, call_id: CallId) -> int | None:
        """The instance a granted call runs on."""
        call = self._calls.get(call_id)
        return None if call is None else call.instance

    @property
    def calls_in_flight(self) -> int:
        """The calls acquired and not yet released: waiting for an instance or running on one."""
        return len(self._calls)

    def calls_on(self, instance: int) -> tuple[CallId, ...]:
        """The calls in flight on ``instance``, in grant order (spec/gateway.md §4: who may own a question on it)."""
        inst = self._instances.get(instance)
        return () if inst is None else tuple(inst.calls)

    def is_spare(self, instance: int) -> bool:
        """Whether ``instance`` is the spare now: started ahead of need and given to nobody yet."""
        inst = self._instances.get(instance)
        return inst is not None and inst.slot[1] == "spare"

    def instance_state(self, instance: int) -> InstanceState:
        """``STOPPED`` for an instance the pool has let go of; an id it never allocated is a ``LocalProtocolError``."""
        if instance >= self._next_instance or instance < 1:
            raise LocalProtocolError(f"instance {instance} was never spawned by this pool")
        inst = self._instances.get(instance)
        return _I.STOPPED if inst is None else inst.state

    def status(self, now: float) -> tuple[ServerStatus, ...]:
        """Every configured server, in configuration order."""
        out = []
        for srv in self._servers.values():
            instances = tuple(
                InstanceStatus(
                    instance=inst.id,
                    state=inst.state,
                    scope_key=inst.scope_key,
                    in_flight=len(inst.calls),
                    waiting=len(self._slots[inst.slot].waiting),
                    since=inst.since,
                    spawned_at=inst.spawned_at,
                )
                for inst in self._instances.values()
                if inst.server == srv.name
            )
            states = {i.state for i in instances}
            retry_at = srv.retry_at if srv.retry_at is not None and srv.retry_at > now else None
            state = next(
                (ServerState(s.value) for s in (_I.READY, _I.STARTING, _I.IDLE) if s in states),
                ServerState.BACKING_OFF if retry_at is not None else ServerState.STOPPED,
            )
            out.append(
                ServerStatus(
                    server=srv.name,
                    scope=srv.scope,
                    state=state,
                    instances=instances,
                    in_flight=sum(i.in_flight for i in instances),
                    waiting=sum(
                        1 for c in self._calls.values() if c.server == srv.name and c.state is _C.WAITING
                    ),
                    spawn_count=srv.spawn_count,
                    spawns_last_minute=sum(1 for t in srv.spawns if t + SPAWN_WINDOW > now),
                    failures=srv.failures,
                    retry_at=retry_at,
                    last_error=srv.last_error,
                )
            )
        return tuple(out)
