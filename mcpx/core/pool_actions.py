"""The pool's configuration, the actions it gives its driver, and the status it reports.

``mcpx.core.pool`` has the rules.  ``Spawn``/``Stop`` start and stop an
instance, ``Granted``/``Refused``/``CallFailed``/``CallTimedOut`` end a
caller's wait or call; ``InstanceStatus`` and ``ServerStatus`` are what
``mcpx servers`` and ``GET /v1/servers`` show (spec/gateway.md §7, §8).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from .drafts import builder

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
