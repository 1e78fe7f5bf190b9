"""A model-based state machine over ``Pool``: random calls, starts, crashes, questions, restarts and time.

The machine plays the callers (``acquire`` with and without a lower timeout,
``release`` of live, ended and unknown calls, questions pending and
answered), the driver (``started``, ``start_failed`` and ``crashed`` for live
and already-stopped instances, and misuse that must be a
``LocalProtocolError``), the hosts (``connection_closed``), the operator
(``restart``) and the clock — on time, or late (an event arrives after a
timer was due and before ``handle_timer``).  Beside it runs a ledger of every
action; after every step:

* every call is in exactly one of waiting, granted, ended; an action about a
  call is legal for its ledger state (``Granted`` only while waiting;
  ``CallFailed``/``CallTimedOut`` only while granted; ``Refused`` only while
  waiting) — so every ``acquire`` ends exactly once;
* no instance is both running and stopped: ``Granted`` names a spawned,
  unstopped instance; an instance is stopped at most once and never spawned
  twice; a granted call's instance is never stopped (its call would hang);
* spawns per server in any 60-second window never exceed
  ``max_spawns_per_minute``;
* after ``handle_timer(now)``, ``get_timer()`` is ``None`` or later than now;
* ``status`` agrees with the ledger.

At teardown every pending question is answered and the clock runs out: every
call must end without anybody releasing it, every spawned instance must be
stopped, and the timer must go quiet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mcpx.core import LocalProtocolError
from mcpx.core.pool import (
    ERROR_KINDS,
    SPAWN_WINDOW,
    CallFailed,
    CallId,
    CallTimedOut,
    Granted,
    InstanceState,
    Pool,
    PoolConfig,
    Refused,
    Spawn,
    Stop,
)

from ._examples import tick

SERVERS = {"sh": "shared", "co": "connection", "ca": "call"}
CONNECTIONS = ("k1", "k2")
CONFIG = PoolConfig(
    idle_timeout=5.0,
    call_timeout=10.0,
    max_spawns_per_minute=3,
    start_timeout=4.0,
    backoff_base=1.0,
    backoff_cap=8.0,
)


@dataclass
class Ledger:
    """What the actions said, independently of the pool's own records."""

    calls: dict[CallId, str] = field(default_factory=dict)  # call id → waiting | granted | ended
    call_server: dict[CallId, str] = field(default_factory=dict)
    call_instance: dict[CallId, int] = field(default_factory=dict)
    questions: dict[CallId, int] = field(default_factory=dict)
    wait_until: dict[CallId, float] = field(default_factory=dict)  # acquired + its wait bound
    run_until: dict[CallId, float] = field(default_factory=dict)  # granted + its budget, if never questioned
    spawned: dict[int, str] = field(default_factory=dict)  # instance → server
    stopped: set[int] = field(default_factory=set)
    started: set[int] = field(default_factory=set)  # the driver said started
    spawn_times: dict[str, list[float]] = field(default_factory=dict)

    def live(self) -> list[int]:
        return [i for i in self.spawned if i not in self.stopped]

    def open_calls(self, state: str) -> list[CallId]:
        return [c for c, s in self.calls.items() if s == state]


class PoolMachine(RuleBasedStateMachine):
    config = CONFIG

    def __init__(self) -> None:
        super().__init__()
        tick()
        self.pool = Pool(SERVERS, config=self.config)
        self.now = 0.0
        self.ledger = Ledger()
        self.next_call = 1
        self.budgets: dict[CallId, float] = {}
        self.planned = math.inf  # when the daemon's timer (mcpx/gateway/_upstreams.py) would wake

    # -- the ledger ------------------------------------------------------------------------------

    def drain(self, actions: list[Any] | None = None) -> None:
        led = self.ledger
        for action in self.pool.next_actions() if actions is None else actions:
            if isinstance(action, Spawn):
                assert action.instance not in led.spawned, f"instance {action.instance} spawned twice"
                assert action.server in SERVERS and action.scope == SERVERS[action.server]
                led.spawned[action.instance] = action.server
                led.spawn_times.setdefault(action.server, []).append(self.now)
            elif isinstance(action, Stop):
                assert action.instance in led.spawned, f"Stop for unspawned {action.instance}"
                assert action.instance not in led.stopped, f"instance {action.instance} stopped twice"
                assert led.spawned[action.instance] == action.server
                led.stopped.add(action.instance)
            elif isinstance(action, Granted):
                assert led.calls.get(action.call_id) == "waiting", f"Granted for {action}: {led.calls}"
                assert action.instance in led.spawned and action.instance not in led.stopped
                assert action.instance in led.started, "granted on an instance that never started"
                assert led.spawned[action.instance] == led.call_server[action.call_id]
                led.calls[action.call_id] = "granted"
                led.call_instance[action.call_id] = action.instance
                led.run_until[action.call_id] = self.now + self.budgets[action.call_id]
            elif isinstance(action, Refused):
                assert led.calls.get(action.call_id) == "waiting", f"Refused for {action}"
                self.check_error(action.error, led.call_server[action.call_id])
                led.calls[action.call_id] = "ended"
            elif isinstance(action, CallFailed | CallTimedOut):
                assert led.calls.get(action.call_id) == "granted", f"{action} for a call not granted"
                assert led.call_instance[action.call_id] == action.instance
                self.check_error(action.error, led.call_server[action.call_id])
                led.calls[action.call_id] = "ended"
                led.questions.pop(action.call_id, None)
            else:  # pragma: no cover
                raise AssertionError(f"unknown action {action!r}")

    @staticmethod
    def check_error(error: Any, server: str) -> None:
        assert isinstance(error["code"], int) and error["data"]["server"] == server
        assert error["data"]["kind"] in ERROR_KINDS
        assert repr(server) in error["message"], error["message"]
        if "retryAfterSeconds" in error["data"]:
            assert error["data"]["retryAfterSeconds"] >= 0

    def advance(self, dt: float, *, late: bool) -> None:
        """Move the clock; on time, every timer due on the way is handled when it falls due."""
        target = self.now + dt
        if not late:
            while (timer := self.pool.get_timer()) is not None and timer <= target:
                self.now = max(self.now, timer)
                self.pool.handle_timer(self.now)
                self.drain()
                after = self.pool.get_timer()
                assert after is None or after > self.now, f"timer {after} not after {self.now}"
        self.now = target
        if not late:  # every bound that has passed was enforced
            for call in self.ledger.open_calls("waiting"):
                assert self.ledger.wait_until[call] > self.now, f"call {call} waits past its bound"
            for call in self.ledger.open_calls("granted"):
                if call in self.ledger.run_until:
                    assert self.ledger.run_until[call] > self.now, f"call {call} runs past its timeout"

    # -- callers ---------------------------------------------------------------------------------

    @rule(
        server=st.sampled_from([*SERVERS, "nope"]),
        key=st.sampled_from(CONNECTIONS),
        timeout=st.sampled_from([None, None, 2.0, 50.0]),
    )
    def acquire(self, server: str, key: str, timeout: float | None) -> None:
        call = self.next_call
        self.next_call += 1
        self.ledger.calls[call] = "waiting"
        self.ledger.call_server[call] = server
        self.budgets[call] = min(timeout or CONFIG.call_timeout, CONFIG.call_timeout)
        self.ledger.wait_until[call] = self.now + min(timeout or CONFIG.start_timeout, CONFIG.start_timeout)
        self.pool.acquire(server, key, call, self.now, timeout=timeout)
        self.drain()
        deadline = self.pool.deadline_for(call)
        if deadline is not None:
            budget = min(timeout or CONFIG.call_timeout, CONFIG.call_timeout)
            assert deadline == self.now + budget, "a caller's timeout is clamped, never raised"

    @rule(key=st.sampled_from(CONNECTIONS))
    def acquire_shared(self, key: str) -> None:
        """The commonest call of all: a shared server, the configured timeout."""
        self.acquire(server="sh", key=key, timeout=None)

    @rule(server=st.sampled_from([*SERVERS, "nope"]), key=st.sampled_from(CONNECTIONS))
    def acquire_now(self, server: str, key: str) -> None:
        """The router's way: granted at once (no ``Granted``), or nothing changed and ``acquire`` after."""
        call = self.next_call
        self.next_call += 1
        before = self.pool.status(self.now)
        instance = self.pool.acquire_now(server, key, call, self.now)
        if instance is None:
            assert self.pool.status(self.now) == before, "acquire_now changed the pool and granted nothing"
            assert self.pool.instance_of(call) is None
            assert self.pool.next_actions() == []
            self.next_call -= 1
            self.acquire(server=server, key=key, timeout=None)
            event("acquire_now: not at once")
            return
        event("acquire_now: granted at once")
        led = self.ledger
        actions = self.pool.next_actions()  # a spare started beside it, perhaps; never a Granted for it
        assert not any(isinstance(a, Granted) and a.call_id == call for a in actions), "granted twice"
        assert instance in led.started and instance not in led.stopped, "granted on an instance not running"
        assert led.spawned[instance] == server
        self.drain(actions)
        led.calls[call] = "granted"
        led.call_server[call] = server
        led.call_instance[call] = instance
        self.budgets[call] = CONFIG.call_timeout
        led.wait_until[call] = self.now + CONFIG.start_timeout
        led.run_until[call] = self.now + CONFIG.call_timeout
        assert self.pool.deadline_for(call) == self.now + CONFIG.call_timeout

    @precondition(lambda self: self.ledger.calls)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        call = data.draw(st.sampled_from(sorted(self.ledger.calls)))
        was = self.ledger.calls[call]
        self.pool.release(call, self.now)
        if was != "ended":
            self.ledger.calls[call] = "ended"
            self.ledger.questions.pop(call, None)
        self.drain()

    @precondition(lambda self: self.ledger.open_calls("granted"))
    @rule(data=st.data(), pending=st.booleans())
    def question(self, data: st.DataObject, pending: bool) -> None:
        call = data.draw(st.sampled_from(self.ledger.open_calls("granted")))
        asked = self.ledger.questions.get(call, 0)
        if not pending and asked == 0:
            with pytest.raises(LocalProtocolError):
                self.pool.question_pending(call, False, self.now)
            return
        self.pool.question_pending(call, pending, self.now)
        self.ledger.run_until.pop(call, None)  # paused at least once: the pool's own deadline applies
        self.drain()
        if self.ledger.calls[call] == "granted":
            self.ledger.questions[call] = asked + (1 if pending else -1)
            paused = self.ledger.questions[call] > 0
            assert (self.pool.deadline_for(call) is None) == paused

    @precondition(lambda self: self.ledger.open_calls("waiting"))
    @rule(data=st.data())
    def question_on_waiting_call_is_misuse(self, data: st.DataObject) -> None:
        call = data.draw(st.sampled_from(self.ledger.open_calls("waiting")))
        with pytest.raises(LocalProtocolError):
            self.pool.question_pending(call, True, self.now)
        assert self.pool.next_actions() == []

    # -- the driver ------------------------------------------------------------------------------

    def _in_state(self, *states: InstanceState) -> list[int]:
        return [i for i in self.ledger.live() if self.pool.instance_state(i) in states]

    @precondition(lambda self: self._in_state(InstanceState.STARTING))
    @rule(data=st.data(), ok=st.sampled_from([True, True, True, False]))
    def start_finishes(self, data: st.DataObject, ok: bool) -> None:
        inst = data.draw(st.sampled_from(self._in_state(InstanceState.STARTING)))
        if ok:
            self.ledger.started.add(inst)
            self.pool.started(inst, self.now)
        else:
            self.pool.start_failed(inst, "boom", self.now)
        self.drain()
        assert (inst in self.ledger.stopped) != ok

    @precondition(lambda self: self._in_state(InstanceState.READY, InstanceState.IDLE))
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        inst = data.draw(st.sampled_from(self._in_state(InstanceState.READY, InstanceState.IDLE)))
        self.pool.crashed(inst, "exit status 1", self.now)
        self.drain()
        assert inst in self.ledger.stopped

    @precondition(lambda self: self.ledger.spawned)
    @rule(data=st.data(), news=st.sampled_from(["started", "start_failed", "crashed"]))
    def driver_news_about_any_instance(self, data: st.DataObject, news: str) -> None:
        """Any news about any instance: late news about a stopped one is ignored, misuse refused."""
        inst = data.draw(st.sampled_from(sorted(self.ledger.spawned)))
        state = self.pool.instance_state(inst)
        if news != "crashed" and state in (InstanceState.READY, InstanceState.IDLE):
            with pytest.raises(LocalProtocolError):
                getattr(self.pool, news)(inst, *(["boom"] if news != "started" else []), self.now)
            assert self.pool.next_actions() == []
            return
        if news == "started" and state is InstanceState.STARTING:
            self.ledger.started.add(inst)
        getattr(self.pool, news)(inst, *(["boom"] if news != "started" else []), self.now)
        self.drain()
        if state is InstanceState.STOPPED:
            assert self.ledger.calls == self.ledger.calls  # nothing to check beyond the ledger
        elif news != "started":
            assert inst in self.ledger.stopped

    @rule(kind=st.sampled_from(["release", "instance", "duplicate"]))
    def misuse_and_unknowns(self, kind: str) -> None:
        """Unknown ids: a release is ignored (it races timeouts); an instance id or a reused call id is misuse."""
        if kind == "release":
            self.pool.release(-1, self.now)
        elif kind == "instance":
            with pytest.raises(LocalProtocolError):
                self.pool.crashed(len(self.ledger.spawned) + 1, "x", self.now)
        else:
            live = [c for c, state in self.ledger.calls.items() if state != "ended"]
            if live:
                with pytest.raises(LocalProtocolError):
                    self.pool.acquire("sh", "k1", live[0], self.now)
        assert self.pool.next_actions() == []

    # -- hosts, operator, clock ------------------------------------------------------------------

    @rule(key=st.sampled_from(CONNECTIONS))
    def connection_closed(self, key: str) -> None:
        self.pool.connection_closed(key, self.now)
        self.drain()

    @rule(server=st.sampled_from([*SERVERS, None]))
    def restart(self, server: str | None) -> None:
        self.pool.restart(server, self.now)
        self.drain()

    @rule(dt=st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.5, 4.0, 6.0, 11.0, 61.0]), late=st.booleans())
    def clock(self, dt: float, late: bool) -> None:
        self.advance(dt, late=late)

    @rule()
    def timer(self) -> None:
        self.pool.handle_timer(self.now)
        self.drain()
        after = self.pool.get_timer()
        assert after is None or after > self.now, f"timer {after} not after {self.now}"

    # -- invariants ------------------------------------------------------------------------------

    @invariant()
    def a_timer_told_only_of_deadlines_set_never_sleeps_past_one(self) -> None:
        """The daemon's way: its timer sleeps until ``planned`` and, after each input, asks only
        ``take_lowest_set``; a deadline earlier than ``planned`` is always among those reported."""
        lowest = self.pool.take_lowest_set()
        timer = self.pool.get_timer()
        if timer is not None and timer < self.planned:
            assert lowest <= timer, (
                f"the timer moved to {timer}, before {self.planned}, unreported ({lowest})"
            )
        if lowest < self.planned or self.now >= self.planned:  # woken, or its time came: it looks again
            self.planned = math.inf if timer is None else timer

    @invariant()
    def granted_calls_run_on_live_instances(self) -> None:
        for call in self.ledger.open_calls("granted"):
            inst = self.ledger.call_instance[call]
            assert inst not in self.ledger.stopped, f"call {call} hangs on stopped instance {inst}"
            assert call in self.pool.calls_on(inst)

    @invariant()
    def the_pool_and_the_ledger_agree(self) -> None:
        live = set(self.ledger.live())
        seen: set[int] = set()
        for status in self.pool.status(self.now):
            for inst in status.instances:
                assert inst.instance in live and inst.state is not InstanceState.STOPPED
                seen.add(inst.instance)
            assert status.spawn_count == len(self.ledger.spawn_times.get(status.server, []))
        assert seen == live
        for stopped in self.ledger.stopped:
            assert self.pool.instance_state(stopped) is InstanceState.STOPPED

    @invariant()
    def spawns_respect_the_limit_in_every_window(self) -> None:
        for times in self.ledger.spawn_times.values():
            for i, t in enumerate(times):
                in_window = [s for s in times[: i + 1] if s + SPAWN_WINDOW > t]
                assert len(in_window) <= CONFIG.max_spawns_per_minute, times

    def teardown(self) -> None:
        # Every pending question is answered; then nobody does anything but the clock.
        for call, asked in list(self.ledger.questions.items()):
            for _ in range(asked):
                self.pool.question_pending(call, False, self.now)
        self.drain()
        for _ in range(50):
            self.advance(100.0, late=False)
        open_calls = [c for c, s in self.ledger.calls.items() if s != "ended"]
        assert open_calls == [], f"calls never ended: {open_calls}"
        assert set(self.ledger.live()) == set(), f"instances never stopped: {self.ledger.live()}"
        assert self.pool.get_timer() is None


PoolMachine.TestCase.settings = settings(stateful_step_count=50)
test_pool_machine = PoolMachine.TestCase


class SparePoolMachine(PoolMachine):
    """The same rules and invariants with ``spare``: instances started ahead of need, then adopted."""

    config = replace(CONFIG, spare=True)


SparePoolMachine.TestCase.settings = settings(stateful_step_count=50)
test_spare_pool_machine = SparePoolMachine.TestCase
