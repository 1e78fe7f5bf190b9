"""The pool's states, transition tables and records, and the effects its inputs share.

The layer ``Pool`` (pool.py, where the rules are) stands on.  Instance and
call states change only through ``_INSTANCE_TRANSITIONS`` and
``_CALL_TRANSITIONS``; the effects the instance table names are here, with
the helpers that spawn, grant, time out, refuse and let go.
``_PoolBase.__init__`` holds every field.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from .enums import Table
from .errors import INTERNAL_ERROR, LocalProtocolError
from .pool_actions import (
    SCOPES,
    SPAWN_WINDOW,
    CallFailed,
    CallId,
    CallTimedOut,
    InstanceState,
    PoolAction,
    PoolConfig,
    Refused,
    Spawn,
    Stop,
    _granted,
)


class _In(Table):
    STARTED = "started"
    START_FAILED = "start_failed"
    START_TIMEOUT = "start timeout"
    CRASHED = "crashed"
    GRANT = "grant"
    CALL_ENDED = "a call ended, others in flight"
    LAST_CALL_ENDED = "the last call in flight ended"
    STOP = "stop (idle, restart, connection closed, call ended)"


_I = InstanceState


_INSTANCE_TRANSITIONS: Final[Mapping[tuple[InstanceState, _In], tuple[str, InstanceState]]] = (
    MappingProxyType(
        {
            (_I.STARTING, _In.STARTED): ("_on_started", _I.IDLE),  # then the waiters are granted
            (_I.STARTING, _In.START_FAILED): ("_on_start_failed", _I.STOPPED),
            (_I.STARTING, _In.CRASHED): ("_on_start_failed", _I.STOPPED),
            (_I.STARTING, _In.START_TIMEOUT): ("_on_start_failed", _I.STOPPED),
            (_I.STARTING, _In.STOP): ("_on_stop", _I.STOPPED),
            (_I.IDLE, _In.GRANT): ("_nothing", _I.READY),
            (_I.READY, _In.GRANT): ("_nothing", _I.READY),
            (_I.READY, _In.CALL_ENDED): ("_nothing", _I.READY),
            (_I.READY, _In.LAST_CALL_ENDED): ("_on_idle", _I.IDLE),
            (_I.IDLE, _In.CRASHED): ("_on_crash", _I.STOPPED),
            (_I.READY, _In.CRASHED): ("_on_crash", _I.STOPPED),
            (_I.IDLE, _In.STOP): ("_on_stop", _I.STOPPED),
            (_I.READY, _In.STOP): ("_on_stop", _I.STOPPED),
            # Late news: the driver reports on an instance the pool already stopped.
            (_I.STOPPED, _In.STARTED): ("_nothing", _I.STOPPED),
            (_I.STOPPED, _In.START_FAILED): ("_nothing", _I.STOPPED),
            (_I.STOPPED, _In.CRASHED): ("_nothing", _I.STOPPED),
        }
    )
)
"""(instance state, input) → (effect, next state).  ``started``/``start_failed`` on a running instance are missing: illegal."""


class _CallState(Table):
    WAITING = "waiting"  # acquired; no instance yet
    RUNNING = "running"  # granted
    ENDED = "ended"  # forgotten


class _CallIn(Table):
    GRANT = "grant"
    REFUSE = "refuse"
    RELEASE = "release"
    FAIL = "fail"
    TIME_OUT = "time out"
    ASK = "question pending"
    ANSWER = "question answered"


_C = _CallState


_CALL_TRANSITIONS: Final[Mapping[tuple[_CallState, _CallIn], _CallState]] = MappingProxyType(
    {
        (_C.WAITING, _CallIn.GRANT): _C.RUNNING,
        (_C.WAITING, _CallIn.REFUSE): _C.ENDED,
        (_C.WAITING, _CallIn.RELEASE): _C.ENDED,  # the caller stopped waiting
        (_C.RUNNING, _CallIn.RELEASE): _C.ENDED,
        (_C.RUNNING, _CallIn.FAIL): _C.ENDED,
        (_C.RUNNING, _CallIn.TIME_OUT): _C.ENDED,
        (_C.RUNNING, _CallIn.ASK): _C.RUNNING,
        (_C.RUNNING, _CallIn.ANSWER): _C.RUNNING,
    }
)
"""(call state, input) → next state.  A question on a call that has no instance yet is missing: illegal."""


_SlotKey: TypeAlias = tuple[str, str, CallId | None]
"""(server, scope, key): key is None (shared), the connection key, or the call id."""


@dataclass(slots=True)
class _Server:
    name: str
    scope: str
    spawns: deque[float]  # the last max_spawns_per_minute spawn times
    spawn_count: int = 0
    failures: int = 0  # consecutive crashes / failed starts
    retry_at: float | None = None  # end of the backoff pause
    last_error: str | None = None
    start_timeout: float = 60.0  # its own startTimeout, else pool.startTimeout
    own_start_timeout: bool = False  # whether it is the server's own


@dataclass(slots=True)
class _Slot:
    key: _SlotKey
    scope_key: str | None  # what Spawn reports
    lane: str | None = None  # what Spawn reports: the callers' lane
    instance: int | None = None  # the live instance, if any
    waiting: list[CallId] = field(default_factory=list)  # FIFO

    @property
    def server(self) -> str:
        return self.key[0]


_CHECK_COMMAND: Final = ". Check its command or url (`mcpx servers`)"


@dataclass(slots=True)
class _Instance:
    id: int
    server: str
    slot: _SlotKey
    scope_key: str | None
    state: InstanceState
    since: float  # entered its current state
    spawned_at: float
    ready_at: float | None = None
    calls: dict[CallId, None] = field(default_factory=dict)  # in flight, in grant order
    advice: str = _CHECK_COMMAND  # what a failed start's refusal tells the caller to do


@dataclass(slots=True)
class _Call:
    id: CallId
    server: str
    slot: _SlotKey
    state: _CallState
    acquired_at: float
    wait_deadline: float
    budget: float  # min(requested, call_timeout)
    requested: float | None
    instance: int | None = None
    deadline: float | None = None  # None while waiting or paused
    remaining: float = 0.0  # the budget left while paused
    questions: int = 0


def _seconds(value: float) -> str:
    """A duration for a message, rounded up to a tenth: ``2s``, ``1.5s``."""
    return f"{math.ceil(value * 10 - 1e-9) / 10:g}s"


def _error(
    server: str, kind: str, message: str, *, code: int = INTERNAL_ERROR, retry_after: float | None = None
) -> dict[str, Any]:
    data: dict[str, Any] = {"server": server, "kind": kind}
    if retry_after is not None:
        data["retryAfterSeconds"] = math.ceil(retry_after * 10 - 1e-9) / 10
    return {"code": code, "message": message, "data": data}


class _PoolBase:
    """The pool's fields, its output, and the effects and helpers its inputs share (see ``Pool``)."""

    if TYPE_CHECKING:  # defined by a later layer

        def instance_state(self, instance: int) -> InstanceState: ...

    def __init__(
        self,
        servers: Mapping[str, str],
        *,
        config: PoolConfig | None = None,
        start_timeouts: Mapping[str, float] | None = None,
    ) -> None:
        """``servers``: name -> scope.  ``start_timeouts``: a server's own start timeout (its ``startTimeout``).

        A server not in ``start_timeouts`` has ``config.start_timeout``
        (``pool.startTimeout``).
        """
        self.config = config if config is not None else PoolConfig()
        self._servers: dict[str, _Server] = {}
        own = dict(start_timeouts or {})
        for name in own:
            if name not in servers:
                raise ValueError(f"start_timeouts names {name!r}, which is not a server")
        for name, scope in servers.items():
            if str(scope) not in SCOPES:
                raise ValueError(f"server {name!r}: scope {scope!r} is not one of {', '.join(SCOPES)}")
            start_timeout = own.get(name, self.config.start_timeout)
            if not (
                isinstance(start_timeout, int | float) and math.isfinite(start_timeout) and start_timeout > 0
            ):
                raise ValueError(f"server {name!r}: start timeout must be a positive number of seconds")
            self._servers[name] = _Server(
                name=name,
                scope=str(scope),
                spawns=deque(maxlen=self.config.max_spawns_per_minute),
                start_timeout=float(start_timeout),
                own_start_timeout=name in own,
            )
        self._slots: dict[_SlotKey, _Slot] = {}
        self._instances: dict[int, _Instance] = {}
        self._calls: dict[CallId, _Call] = {}
        self._next_instance = 1
        self._now = -math.inf
        self._actions: list[PoolAction] = []
        # The earliest deadline set since ``take_lowest_set`` last ran (every place that sets one
        # lowers it): what a driver compares with the time its timer sleeps until, per chunk of
        # input, instead of scanning every call and instance (``get_timer``) to find out.
        self._lowest_set = math.inf

    def next_actions(self) -> list[PoolAction]:
        """The actions queued since the last call, in the order to perform them."""
        actions, self._actions = self._actions, []
        return actions

    def take_lowest_set(self) -> float:
        """The earliest deadline set since this was last called (``math.inf``: none); forgotten here.

        For a driver whose timer sleeps until some time ``t``: when this is
        earlier than ``t``, ``get_timer()`` may be too, and the timer must be
        set again; otherwise nothing new is due before ``t``.  Call it before
        the ``get_timer`` that sets the timer, and after each input.
        """
        lowest, self._lowest_set = self._lowest_set, math.inf
        return lowest

    def _lower(self, deadline: float) -> None:
        if deadline < self._lowest_set:  # noqa: PLR1730 - for every deadline set: not a call to min()
            self._lowest_set = deadline

    def _lower_to_limit(self, srv: _Server) -> None:
        """The spawn limit's end for ``srv``, if it is reached: a deadline of the calls it holds back."""
        limit = self._limit_until(srv)
        if limit is not None:
            self._lower(limit)

    def get_timer(self) -> float | None:
        """When ``handle_timer`` must next be called, or ``None`` when nothing is pending."""
        # The earliest of the deadlines below, kept as it goes (the driver asks after every
        # chunk of input: no list, no min()).
        soonest = math.inf
        for call in self._calls.values():
            due = call.wait_deadline if call.state is _C.WAITING else call.deadline
            if due is not None and due < soonest:
                soonest = due
        for inst in self._instances.values():
            state = inst.state
            if state is _I.STARTING:
                due = inst.spawned_at + self._servers[inst.server].start_timeout
            elif state is _I.IDLE:
                due = inst.since + self.config.idle_timeout
            else:
                continue
            if due < soonest:  # noqa: PLR1730 - a comparison costs less than a call to min()
                soonest = due
        for srv in self._servers.values():
            retry_at = srv.retry_at
            if retry_at is not None and retry_at < soonest:
                soonest = retry_at
        for slot in self._slots.values():
            if slot.waiting and slot.instance is None:
                limit = self._limit_until(self._servers[slot.server])
                if limit is not None and self._now < limit < soonest:
                    soonest = limit
        return None if soonest == math.inf else soonest

    def _transition(
        self, inst: _Instance, event: _In, now: float, reason: str, kind: str = "crashed"
    ) -> None:
        try:
            effect, new_state = _INSTANCE_TRANSITIONS[(inst.state, event)]
        except KeyError:
            raise LocalProtocolError(
                f"{event.value} is not allowed for instance {inst.id} in state {inst.state.value}"
            ) from None
        old_state = inst.state
        if new_state is not old_state:
            inst.state = new_state
            inst.since = now
            if new_state is _I.IDLE:
                self._lower(now + self.config.idle_timeout)
        if effect != "_nothing":
            getattr(self, effect)(inst, old_state, now, reason, kind)

    def _nothing(self, inst: _Instance, old: InstanceState, now: float, reason: str, kind: str) -> None:
        pass

    def _on_started(self, inst: _Instance, old: InstanceState, now: float, reason: str, kind: str) -> None:
        inst.ready_at = now
        slot = self._slots[inst.slot]
        if slot.waiting:
            self._grant_waiters(slot, inst, now)
        else:
            self._on_idle(inst, old, now, reason, kind)

    def _on_idle(self, inst: _Instance, old: InstanceState, now: float, reason: str, kind: str) -> None:
        if inst.slot[1] == "call":
            self._transition(inst, _In.STOP, now, "the call it was started for ended")
        elif self.config.idle_timeout == 0:
            self._transition(inst, _In.STOP, now, "idle, and pool.idleTimeout is 0s")

    def _on_start_failed(
        self, inst: _Instance, old: InstanceState, now: float, reason: str, kind: str
    ) -> None:
        srv = self._servers[inst.server]
        self._failed(srv, reason, now)
        self._let_go(inst, f"start failed: {reason}")
        slot = self._slots[inst.slot]
        retry = srv.retry_at if srv.retry_at is not None else now
        for call_id in list(slot.waiting):
            self._refuse(
                self._calls[call_id],
                _error(
                    srv.name,
                    "start-failed",
                    f"server {srv.name!r} failed to start: {reason.rstrip('.')}{inst.advice}; mcpx starts "
                    f"it again for a call made after {_seconds(retry - now)}",
                    retry_after=retry - now,
                ),
            )
        self._forget_slot_if_unused(slot)

    def _on_crash(self, inst: _Instance, old: InstanceState, now: float, reason: str, kind: str) -> None:
        srv = self._servers[inst.server]
        if inst.ready_at is not None and now - inst.ready_at >= self.config.backoff_cap:
            srv.failures = 0  # it had been up a good while: a new streak
        self._failed(srv, reason, now)
        self._fail_calls(
            inst,
            now,
            "crashed",
            f"server {srv.name!r} exited while the call was running ({reason}); the call did not "
            "complete. Call again: mcpx starts the server again",
        )
        self._let_go(inst, f"crashed: {reason}")
        self._forget_slot_if_unused(self._slots[inst.slot])

    def _on_stop(self, inst: _Instance, old: InstanceState, now: float, reason: str, kind: str) -> None:
        if old is not _I.STARTING:
            if kind == "restarted":
                message = (
                    f"server {inst.server!r} was restarted (mcpx restart) while the call was running; "
                    "call again"
                )
            else:
                message = (
                    f"server {inst.server!r} was stopped while the call was running ({reason}); call again"
                )
            self._fail_calls(inst, now, kind, message)
        self._let_go(inst, reason)
        slot = self._slots[inst.slot]
        if kind != "restarted":  # restart serves its waiters itself, once every instance is stopped
            self._forget_slot_if_unused(slot)

    def _clock(self, now: float) -> float:
        if now > self._now:  # noqa: PLR1730 - on every input: a comparison, not a call to max()
            self._now = now
        return self._now

    def _emit(self, action: PoolAction) -> None:
        self._actions.append(action)

    def _driver_news(self, instance: int, event: _In, now: float, reason: str) -> None:
        inst = self._instances.get(instance)
        state = self.instance_state(instance) if inst is None else inst.state  # raises for an unknown id
        if (state, event) not in _INSTANCE_TRANSITIONS:
            raise LocalProtocolError(
                f"{event.value} is not allowed for instance {instance} in state {state.value}"
            )
        now = self._clock(now)
        if inst is not None:  # otherwise stopped and forgotten: late news, which the table ignores
            self._transition(inst, event, now, reason)

    def _move_call(self, call: _Call, event: _CallIn, *, check_only: bool = False) -> None:
        new_state = _CALL_TRANSITIONS.get((call.state, event))
        if new_state is None:
            raise LocalProtocolError(
                f"{event.value} is not allowed for call {call.id!r} while {call.state.value}"
            )
        if check_only:
            return
        call.state = new_state
        if new_state is _C.ENDED:
            del self._calls[call.id]

    def _limit_until(self, srv: _Server) -> float | None:
        """When the spawn limit next lets ``srv`` start an instance, if it is reached."""
        if len(srv.spawns) < self.config.max_spawns_per_minute:
            return None
        return srv.spawns[0] + SPAWN_WINDOW  # the oldest of the last max spawns leaves the window

    def _blocked_until(self, srv: _Server, now: float) -> tuple[float, str] | None:
        """When ``srv`` may next be spawned and why not now (``backing-off`` / ``spawn-limit``), or None."""
        blocked: tuple[float, str] | None = None
        if srv.retry_at is not None and srv.retry_at > now:
            blocked = (srv.retry_at, "backing-off")
        limit = self._limit_until(srv)
        if limit is not None and limit > now and (blocked is None or limit > blocked[0]):
            blocked = (limit, "spawn-limit")
        return blocked

    def _serve_waiters(self, slot: _Slot, now: float) -> None:
        """Start an instance for the slot's waiting calls, or refuse those who cannot wait for one."""
        if not slot.waiting or slot.instance is not None:
            self._forget_slot_if_unused(slot)
            return
        srv = self._servers[slot.server]
        blocked = self._blocked_until(srv, now)
        if blocked is None:
            self._spawn(slot, now)
            return
        at, kind = blocked
        self._lower(at)  # the waiters' spawn, once the backoff or the spawn limit lets it
        self._lower_to_limit(srv)
        for call_id in list(slot.waiting):
            call = self._calls[call_id]
            if call.wait_deadline <= at:  # it would be refused at its deadline before the spawn
                self._refuse(call, self._blocked_error(srv, kind, at, now))
        self._forget_slot_if_unused(slot)

    def _spawn(self, slot: _Slot, now: float) -> None:
        srv = self._servers[slot.server]
        inst = _Instance(
            id=self._next_instance,
            server=srv.name,
            slot=slot.key,
            scope_key=slot.scope_key,
            state=_I.STARTING,
            since=now,
            spawned_at=now,
        )
        self._next_instance += 1
        self._instances[inst.id] = inst
        slot.instance = inst.id
        srv.spawns.append(now)
        srv.spawn_count += 1
        srv.retry_at = None
        self._lower(now + srv.start_timeout)
        self._lower_to_limit(srv)
        self._emit(
            Spawn(
                instance=inst.id,
                server=srv.name,
                scope=srv.scope,
                scope_key=slot.scope_key,
                lane=slot.lane,
            )
        )

    def _adopt_spare(self, slot: _Slot) -> None:
        """Give ``slot`` its server's spare instance, started or starting, if there is one."""
        spare = self._slots.get((slot.server, "spare", slot.lane))
        if spare is None or spare.instance is None:
            return
        inst = self._instances[spare.instance]
        spare.instance = None
        self._forget_slot_if_unused(spare)
        inst.slot, inst.scope_key = slot.key, slot.scope_key
        slot.instance = inst.id

    def _keep_spare(self, srv: _Server, now: float, lane: str | None) -> None:
        """``spare``: a connection- or call-scoped server in use has one instance started ahead of need.

        A 2026-07-28 request is a connection of its own (spec/gateway.md §3),
        so without it every such request to a connection-scoped server waits
        for a start.  The spare is spawned only when nothing holds spawns back
        (backoff, the spawn limit), and is reaped when idle like any instance.
        """
        if not self.config.spare or srv.scope == "shared" or self.config.idle_timeout == 0:
            return
        key: _SlotKey = (srv.name, "spare", lane)
        spare = self._slots.get(key)
        if (spare is not None and spare.instance is not None) or self._blocked_until(srv, now) is not None:
            return
        if spare is None:
            spare = self._slots[key] = _Slot(key=key, scope_key=None, lane=lane)
        self._spawn(spare, now)

    def _grant_waiters(self, slot: _Slot, inst: _Instance, now: float) -> None:
        waiting, slot.waiting = slot.waiting, []
        for call_id in waiting:
            self._grant(self._calls[call_id], inst, now)
            self._emit(_granted(call_id=call_id, instance=inst.id))

    def _add_call(
        self, call_id: CallId, server: str, key: _SlotKey, now: float, timeout: float | None
    ) -> _Call:
        """A call acquired at ``now``, waiting: its bounds are the configured ones, lowered by ``timeout``."""
        config = self.config
        start_timeout = self._servers[server].start_timeout
        limit = None if timeout is None else float(timeout)
        call = _Call(
            id=call_id,
            server=server,
            slot=key,
            state=_C.WAITING,
            acquired_at=now,
            wait_deadline=now + (start_timeout if limit is None else min(limit, start_timeout)),
            budget=config.call_timeout if limit is None else min(limit, config.call_timeout),
            requested=limit,
        )
        self._calls[call_id] = call
        self._lower(call.wait_deadline)
        return call

    def _grant(self, call: _Call, inst: _Instance, now: float) -> None:
        self._move_call(call, _CallIn.GRANT)
        call.instance = inst.id
        call.deadline = now + call.budget
        self._lower(call.deadline)
        inst.calls[call.id] = None
        self._transition(inst, _In.GRANT, now, "")

    def _end_running(self, call: _Call, event: _CallIn, now: float) -> None:
        self._move_call(call, event)
        assert call.instance is not None
        inst = self._instances[call.instance]
        del inst.calls[call.id]
        self._transition(inst, _In.CALL_ENDED if inst.calls else _In.LAST_CALL_ENDED, now, "")

    def _time_out(self, call: _Call, now: float) -> None:
        assert call.instance is not None
        instance = call.instance
        asked = (
            f"; this call asked for {_seconds(call.requested)}"
            if call.requested is not None and call.requested < self.config.call_timeout
            else ""
        )
        error = _error(
            call.server,
            "call-timeout",
            f"server {call.server!r} did not answer within {_seconds(call.budget)} (pool.callTimeout is "
            f"{_seconds(self.config.call_timeout)}{asked}); the call was cancelled upstream. Call again, "
            "or raise pool.callTimeout for a tool that needs longer",
        )
        self._emit(CallTimedOut(call_id=call.id, instance=instance, error=error))  # before any Stop it causes
        self._end_running(call, _CallIn.TIME_OUT, now)

    def _refuse(self, call: _Call, error: Mapping[str, Any]) -> None:
        self._move_call(call, _CallIn.REFUSE)
        slot = self._slots[call.slot]
        slot.waiting.remove(call.id)
        self._emit(Refused(call_id=call.id, error=error))
        if call.slot[1] == "call" and slot.instance is not None:  # started for this call alone
            self._transition(
                self._instances[slot.instance], _In.STOP, self._now, "the call it was started for ended"
            )
        self._forget_slot_if_unused(slot)

    def _fail_calls(self, inst: _Instance, now: float, kind: str, message: str) -> None:
        for call_id in list(inst.calls):
            self._move_call(self._calls[call_id], _CallIn.FAIL)
            self._emit(
                CallFailed(call_id=call_id, instance=inst.id, error=_error(inst.server, kind, message))
            )
        inst.calls.clear()

    def _failed(self, srv: _Server, reason: str, now: float) -> None:
        srv.failures += 1
        srv.last_error = reason
        srv.retry_at = now + self.config.backoff(srv.failures)
        self._lower(srv.retry_at)

    def _let_go(self, inst: _Instance, reason: str) -> None:
        del self._instances[inst.id]
        slot = self._slots[inst.slot]
        if slot.instance == inst.id:
            slot.instance = None
        self._emit(Stop(instance=inst.id, server=inst.server, reason=reason))

    def _forget_slot_if_unused(self, slot: _Slot) -> None:
        if not slot.waiting and slot.instance is None:
            self._slots.pop(slot.key, None)

    def _not_ready_error(self, call: _Call, now: float) -> dict[str, Any]:
        slot = self._slots[call.slot]
        srv = self._servers[call.server]
        if slot.instance is None:
            blocked = self._blocked_until(srv, now)
            if blocked is not None:
                return self._blocked_error(srv, blocked[1], blocked[0], now)
        waited = _seconds(now - call.acquired_at)
        still = "it is still starting" if slot.instance is not None else "no instance could be started"
        return _error(
            srv.name,
            "start-timeout",
            f"server {srv.name!r} was not ready for this call within {waited}; {still}. Call again in a moment",
        )

    def _blocked_error(self, srv: _Server, kind: str, at: float, now: float) -> dict[str, Any]:
        if kind == "spawn-limit":
            message = (
                f"server {srv.name!r} was started {self.config.max_spawns_per_minute} times in the last "
                f"minute (pool.maxSpawnsPerMinute); mcpx can start it again in {_seconds(at - now)}. "
                "Call again then"
            )
        else:
            message = (
                f"server {srv.name!r} is failing ({srv.last_error}); mcpx will try it again in "
                f"{_seconds(at - now)} (backoff after {srv.failures} failure"
                f"{'s' if srv.failures != 1 else ''}). Call again then, or `mcpx restart {srv.name}`"
            )
        return _error(srv.name, kind, message, retry_after=at - now)
