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
"""

from __future__ import annotations

import enum
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from .drafts import builder
from .enums import Table
from .errors import INTERNAL_ERROR, INVALID_PARAMS, LocalProtocolError

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

CallId: TypeAlias = int | str
"""The driver's name for one call (unique among the calls the pool holds)."""

SCOPES: Final = ("shared", "host", "connection", "call")
"""The values of ``UpstreamServer.scope`` (``mcpx.config.Scope``), in the same spelling."""

SPAWN_WINDOW: Final = 60.0
"""``pool.maxSpawnsPerMinute`` counts spawns in any window this long."""

ERROR_KINDS: Final = frozenset(
    {
        "unknown-server",  # acquire named a server that is not configured
        "start-failed",  # the instance could not be started (or exited while starting)
        "start-timeout",  # no instance was ready within the caller's wait
        "backing-off",  # the server failed recently; the retry is later than the caller can wait
        "spawn-limit",  # pool.maxSpawnsPerMinute reached; the next spawn is later than the caller can wait
        "crashed",  # the instance exited while the call was running
        "restarted",  # mcpx restart stopped the instance while the call was running
        "connection-closed",  # the connection a connection-scoped instance served ended
        "call-timeout",  # pool.callTimeout (or the caller's lower bound) expired
    }
)
"""The stable ``error.data.kind`` values of ``Refused``, ``CallFailed`` and ``CallTimedOut``."""


# --------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolConfig:
    """The pool's bounds, in seconds.

    The first three are the settings ``pool.idleTimeout``,
    ``pool.callTimeout`` and ``pool.maxSpawnsPerMinute`` (build with
    ``PoolConfig(idle_timeout=settings["pool.idleTimeout"].value, ...)``),
    ``backoff_base`` is ``pool.backoff`` (the daemon raises ``backoff_cap``
    to it when it is longer), ``spare`` is ``pool.spare`` and
    ``start_timeout`` is ``pool.startTimeout`` (a server's own
    ``startTimeout`` is given to ``Pool`` beside it).
    ``max_spawns_per_minute`` applies per server.
    """

    idle_timeout: float = 300.0
    call_timeout: float = 120.0
    max_spawns_per_minute: int = 30
    start_timeout: float = 60.0
    """How long a caller waits for an instance to start, and how long a start may take (era probe included)."""
    backoff_base: float = 1.0
    """The pause before the first retry after a crash or failed start; doubled for each further failure."""
    backoff_cap: float = 60.0
    """The longest pause; also how long an instance must have been up for its crash to start a new streak."""
    spare: bool = False
    """Keep one instance of each connection- or call-scoped server started ahead of need (``pool.spare``)."""

    def __post_init__(self) -> None:
        problems = []
        for name in ("call_timeout", "start_timeout", "backoff_base", "backoff_cap"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                problems.append(f"{name} must be a positive number of seconds, not {value!r}")
        if not (
            isinstance(self.idle_timeout, int | float)
            and math.isfinite(self.idle_timeout)
            and self.idle_timeout >= 0
        ):
            problems.append(f"idle_timeout must be 0 or more seconds, not {self.idle_timeout!r}")
        if (
            not isinstance(self.max_spawns_per_minute, int)
            or isinstance(self.max_spawns_per_minute, bool)
            or self.max_spawns_per_minute < 1
        ):
            problems.append(
                f"max_spawns_per_minute must be a whole number of at least 1, not {self.max_spawns_per_minute!r}"
            )
        if not problems and self.backoff_cap < self.backoff_base:
            problems.append(
                f"backoff_cap ({self.backoff_cap}) must not be below backoff_base ({self.backoff_base})"
            )
        if not isinstance(self.spare, bool):
            problems.append(f"spare must be true or false, not {self.spare!r}")
        if problems:
            raise ValueError("; ".join(problems))

    def backoff(self, failures: int) -> float:
        """The pause before the next start after ``failures`` consecutive failures (``failures >= 1``)."""
        return min(self.backoff_cap, self.backoff_base * 2.0 ** min(max(failures - 1, 0), 60))


# --------------------------------------------------------------------------
# Actions (what the driver does next)
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Spawn:
    """Start ``server`` as ``instance``; report ``started`` or ``start_failed`` (and ``crashed`` later).

    ``scope_key`` is the key the instance serves: ``None`` for a shared
    server, the connection's key for a connection-scoped one, the caller's
    connection key (informational) for a call-scoped one, ``None`` for a
    spare (``PoolConfig.spare``: started before anybody wants it, then given
    to the next connection or call that does).
    """

    instance: int
    server: str
    scope: str
    scope_key: str | None
    lane: str | None = None
    """The caller's lane (``acquire(lane=)``): the instance serves only calls of that lane."""
    spare: bool = False
    """Started as the spare: nobody's when spawned, whoever it is given to later."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Stop:
    """Stop ``instance`` (if it still runs) and forget it; nothing more will be asked of it."""

    instance: int
    server: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Granted:
    """``call_id`` may now be sent to ``instance``; ``release`` it when its answer arrives."""

    call_id: CallId
    instance: int


_granted = builder(Granted)  # one per call, built without __init__ (mcpx/core/drafts.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """``call_id`` got no instance; answer its caller with ``error`` (a JSON-RPC error object)."""

    call_id: CallId
    error: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFailed:
    """The instance ``call_id`` was running on is gone; answer its caller with ``error``.  Do not ``release`` it."""

    call_id: CallId
    instance: int
    error: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallTimedOut:
    """``call_id`` ran out of time: cancel it upstream and answer its caller with ``error``.

    The pool has already let go of the call; a later ``release`` is ignored.
    """

    call_id: CallId
    instance: int
    error: Mapping[str, Any]


PoolAction = Spawn | Stop | Granted | Refused | CallFailed | CallTimedOut


# --------------------------------------------------------------------------
# States and transition tables
# --------------------------------------------------------------------------


class InstanceState(enum.StrEnum):
    STARTING = "starting"  # spawned; waiting for the driver's started / start_failed
    READY = "ready"  # running, with calls in flight
    IDLE = "idle"  # running, no call in flight: the idle clock runs
    STOPPED = "stopped"  # Stop emitted; forgotten


class ServerState(enum.StrEnum):
    """One word for a server in ``status``: the busiest of its instances, else why none runs."""

    READY = "ready"
    STARTING = "starting"
    IDLE = "idle"
    BACKING_OFF = "backing-off"
    STOPPED = "stopped"


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


# --------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------

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


# --------------------------------------------------------------------------
# Introspection
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceStatus:
    instance: int
    state: InstanceState
    scope_key: str | None
    in_flight: int
    waiting: int
    since: float
    spawned_at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "state": str(self.state),
            "scopeKey": self.scope_key,
            "inFlight": self.in_flight,
            "waiting": self.waiting,
            "since": self.since,
            "spawnedAt": self.spawned_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerStatus:
    """One server, for ``GET /v1/servers`` and ``mcpx status``.  Times are the pool's clock."""

    server: str
    scope: str
    state: ServerState
    instances: tuple[InstanceStatus, ...]
    in_flight: int
    waiting: int
    spawn_count: int
    spawns_last_minute: int
    failures: int
    retry_at: float | None
    last_error: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "scope": self.scope,
            "state": str(self.state),
            "instances": [i.to_json() for i in self.instances],
            "inFlight": self.in_flight,
            "waiting": self.waiting,
            "spawnCount": self.spawn_count,
            "spawnsLastMinute": self.spawns_last_minute,
            "failures": self.failures,
            "retryAt": self.retry_at,
            "lastError": self.last_error,
        }


# --------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------


def _slot_key(srv: _Server, scope_key: str | None, call_id: CallId, lane: str | None) -> _SlotKey:
    """Which slot a call to ``srv`` takes: the server's one (per lane), its caller's connection's, or its own."""
    if srv.scope == "shared" or (srv.scope == "host" and scope_key is None):
        return (srv.name, "shared", lane)
    if srv.scope in ("connection", "host"):
        return (srv.name, "connection", scope_key)  # one host: one lane
    return (srv.name, "call", call_id)


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


class Pool:
    """Upstream instances for every configured server; see the module docstring for the rules.

    ``servers`` maps each server's name to its scope (``"shared"``, ``"host"``,
    ``"connection"`` or ``"call"``; ``mcpx.config.Scope`` values will do):
    ``Pool({s.name: s.scope for s in config.servers.values()}, config=...)``.

    Every input may queue actions: drain ``next_actions()`` after it, perform
    them in order, then re-arm the timer from ``get_timer()``.
    """

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

    # -- output --------------------------------------------------------------

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

    # -- inputs from callers ---------------------------------------------------

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

    # -- per server -----------------------------------------------------------

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

    # -- inputs from the driver ---------------------------------------------------

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

    # -- queries ------------------------------------------------------------------

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

    # -- instance effects (named in _INSTANCE_TRANSITIONS) ---------------------------

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

    # -- helpers ----------------------------------------------------------------------

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
                spare=slot.key[1] == "spare",
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
