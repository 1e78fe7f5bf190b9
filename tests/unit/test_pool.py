"""The pool's rules with a fake clock: time is the number passed as ``now``.

What a user relies on (spec/gateway.md §7): a server starts on
first use and stays warm; an unused one is reaped after ``pool.idleTimeout``;
a crash fails the calls on it with an error naming the server and the next
start waits out an exponential backoff; a server never starts more than
``pool.maxSpawnsPerMinute`` times a minute; a call may lower
``pool.callTimeout`` but never raise it, and its clock stops while a question
is pending; ``connection`` and ``call`` scopes get instances of their own;
``mcpx restart`` starts afresh.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcpx.core import INTERNAL_ERROR, INVALID_PARAMS, LocalProtocolError
from mcpx.core.pool import (
    ERROR_KINDS,
    CallFailed,
    CallTimedOut,
    Granted,
    InstanceState,
    Pool,
    PoolAction,
    PoolConfig,
    Refused,
    ServerState,
    Spawn,
    Stop,
)

SERVERS = {"files": "shared", "git": "connection", "sandbox": "call"}


def make(**config: Any) -> Pool:
    defaults: dict[str, Any] = {
        "idle_timeout": 300.0,
        "call_timeout": 120.0,
        "max_spawns_per_minute": 30,
        "start_timeout": 30.0,
        "backoff_base": 1.0,
        "backoff_cap": 60.0,
    }
    return Pool(SERVERS, config=PoolConfig(**{**defaults, **config}))


def drain(pool: Pool) -> list[Any]:  # Any: tests read the fields of the kind they expect
    return pool.next_actions()


def warm(
    pool: Pool, server: str = "files", call_id: int = 1, now: float = 0.0, key: str | None = "c1"
) -> int:
    """Acquire ``call_id`` on a cold server, start its instance, return the instance id."""
    pool.acquire(server, key, call_id, now)
    (spawn,) = drain(pool)
    assert isinstance(spawn, Spawn)
    pool.started(spawn.instance, now)
    assert drain(pool) == [Granted(call_id=call_id, instance=spawn.instance)]
    return spawn.instance


def only(actions: list[PoolAction], kind: type) -> list[Any]:
    return [a for a in actions if isinstance(a, kind)]


def assert_names_server(error: Any, server: str, kind: str) -> None:
    assert error["data"]["server"] == server and error["data"]["kind"] == kind
    assert kind in ERROR_KINDS
    assert repr(server) in error["message"]


# -- started on first use, kept warm ---------------------------------------------------------


def test_nothing_runs_until_the_first_call_and_then_it_stays_warm() -> None:
    pool = make()
    assert pool.get_timer() is None and drain(pool) == []
    assert pool.status(0.0)[0].state is ServerState.STOPPED
    pool.acquire("files", "c1", 1, 0.0)
    assert drain(pool) == [Spawn(instance=1, server="files", scope="shared", scope_key=None)]
    pool.acquire("files", "c2", 2, 0.5)  # another caller while it starts: waits for the same instance
    assert drain(pool) == []
    assert pool.status(0.5)[0].state is ServerState.STARTING
    assert pool.deadline_for(1) is None  # no call clock while waiting
    pool.started(1, 2.0)
    assert drain(pool) == [Granted(call_id=1, instance=1), Granted(call_id=2, instance=1)]
    assert pool.calls_on(1) == (1, 2)
    pool.release(1, 3.0)
    pool.release(2, 3.0)
    pool.acquire("files", "c3", 3, 10.0)  # warm: granted at once, no spawn
    assert drain(pool) == [Granted(call_id=3, instance=1)]


def test_callers_wait_while_starting_but_not_forever() -> None:
    pool = make(start_timeout=30.0)
    pool.acquire("files", None, 1, 0.0)
    drain(pool)
    pool.acquire("files", None, 2, 20.0, timeout=5.0)  # its own bound is lower than the start timeout
    assert pool.get_timer() == 25.0
    pool.handle_timer(25.0)
    (refused,) = drain(pool)
    assert isinstance(refused, Refused) and refused.call_id == 2
    assert_names_server(refused.error, "files", "start-timeout")
    assert "still starting" in refused.error["message"]
    assert pool.get_timer() == 30.0
    pool.handle_timer(30.0)  # the instance itself never started: stopped, counted as a failure
    actions = drain(pool)
    assert isinstance(actions[0], Stop) and actions[0].instance == 1
    assert actions[0].reason.startswith("start failed: it did not finish starting within 30s")
    assert_names_server(actions[1].error, "files", "start-failed")
    assert "raise pool.startTimeout or the server's startTimeout (now 30s)" in actions[1].error["message"]
    assert "Check its command" not in actions[1].error["message"]  # said once, in the reason
    assert actions[1].call_id == 1 and actions[1].error["data"]["retryAfterSeconds"] == 1.0
    assert pool.status(30.0)[0].state is ServerState.BACKING_OFF


def test_a_servers_own_start_timeout_bounds_its_start_and_its_callers_wait() -> None:
    """``startTimeout`` of one server: its start and its callers' wait; the others keep ``pool.startTimeout``."""
    pool = Pool(SERVERS, config=PoolConfig(start_timeout=30.0), start_timeouts={"files": 90.0})
    assert pool.start_timeout("files") == 90.0 and pool.start_timeout("git") == 30.0
    pool.acquire("files", None, 1, 0.0)
    pool.acquire("git", "c1", 2, 0.0)
    drain(pool)
    pool.handle_timer(30.0)  # git's start is over; files' goes on
    actions = drain(pool)
    assert [a.server for a in only(actions, Stop)] == ["git"]
    assert [a.call_id for a in only(actions, Refused)] == [2]
    pool.handle_timer(89.9)
    assert not only(drain(pool), Refused)  # files' caller still waits
    pool.handle_timer(90.0)
    (refused,) = only(drain(pool), Refused)
    assert "raise the server's startTimeout (now 90s)" in refused.error["message"], refused.error
    with pytest.raises(ValueError, match="not a server"):
        Pool(SERVERS, start_timeouts={"nope": 1.0})
    with pytest.raises(ValueError, match="positive"):
        Pool(SERVERS, start_timeouts={"files": 0.0})


def test_a_failed_start_refuses_its_waiters_with_the_reason() -> None:
    pool = make()
    pool.acquire("files", None, 1, 0.0)
    pool.acquire("files", None, 2, 0.0)
    drain(pool)
    pool.start_failed(1, "npx: command not found", 1.0)
    actions = drain(pool)
    assert actions[0] == Stop(instance=1, server="files", reason="start failed: npx: command not found")
    for refused in actions[1:]:
        assert isinstance(refused, Refused)
        assert_names_server(refused.error, "files", "start-failed")
        assert "npx: command not found" in refused.error["message"]
        assert refused.error["code"] == INTERNAL_ERROR
    assert [a.call_id for a in actions[1:]] == [1, 2]
    assert pool.status(1.0)[0].last_error == "npx: command not found"
    assert "Check its command or url" in actions[1].error["message"]


def test_a_failed_start_whose_reason_says_what_to_do_is_not_told_to_check_the_command() -> None:
    pool = make()
    pool.acquire("files", None, 1, 0.0)
    drain(pool)
    pool.start_failed(1, "tokenEnv names API_TOKEN, which is not set: export API_TOKEN", 1.0, advised=True)
    (_, refused) = drain(pool)
    assert isinstance(refused, Refused) and "export API_TOKEN" in refused.error["message"]
    assert "Check its command" not in refused.error["message"], refused.error


# -- reaped when idle ----------------------------------------------------------------------


def test_an_idle_instance_is_reaped_after_idle_timeout_and_not_before() -> None:
    pool = make(idle_timeout=300.0)
    inst = warm(pool)
    assert pool.status(0.0)[0].state is ServerState.READY
    pool.release(1, 10.0)
    assert pool.status(10.0)[0].state is ServerState.IDLE
    assert pool.get_timer() == 310.0
    pool.handle_timer(200.0)  # early wake-up: nothing
    assert drain(pool) == []
    pool.acquire("files", None, 2, 200.0)  # a call in flight: not idle
    assert drain(pool) == [Granted(call_id=2, instance=inst)]
    pool.release(2, 250.0)
    assert pool.get_timer() == 550.0  # the idle clock restarts from the last call's end
    pool.handle_timer(550.0)
    assert drain(pool) == [Stop(instance=inst, server="files", reason="idle for 300s (pool.idleTimeout)")]
    assert pool.get_timer() is None
    assert pool.instance_state(inst) is InstanceState.STOPPED
    pool.acquire("files", None, 3, 600.0)  # the next call starts a fresh one
    assert only(drain(pool), Spawn) == [
        Spawn(instance=inst + 1, server="files", scope="shared", scope_key=None)
    ]


def test_an_instance_nobody_waits_for_any_more_still_starts_and_then_idles() -> None:
    pool = make()
    pool.acquire("files", None, 1, 0.0)
    drain(pool)
    pool.release(1, 1.0)  # the caller gave up while it started
    assert drain(pool) == []
    pool.started(1, 2.0)
    assert drain(pool) == []
    assert pool.get_timer() == 302.0


def test_idle_timeout_zero_stops_after_each_use() -> None:
    pool = make(idle_timeout=0.0)
    inst = warm(pool)
    pool.release(1, 1.0)
    assert drain(pool) == [Stop(instance=inst, server="files", reason="idle, and pool.idleTimeout is 0s")]
    assert pool.get_timer() is None


# -- crash, restart with backoff ------------------------------------------------------------


def test_a_crash_fails_the_calls_in_flight_naming_the_server() -> None:
    pool = make()
    inst = warm(pool)
    pool.acquire("files", None, 2, 1.0)
    drain(pool)
    pool.crashed(inst, "exit status 1", 5.0)
    actions = drain(pool)
    failed = only(actions, CallFailed)
    assert [f.call_id for f in failed] == [1, 2]
    for f in failed:
        assert_names_server(f.error, "files", "crashed")
        assert "exit status 1" in f.error["message"]
    assert actions[-1] == Stop(instance=inst, server="files", reason="crashed: exit status 1")
    pool.release(1, 6.0)  # the driver's late release is ignored
    assert drain(pool) == []
    pool.crashed(inst, "exit status 1", 6.0)  # and so is a late report of the same crash
    assert drain(pool) == []


def test_restarts_back_off_exponentially_up_to_the_cap() -> None:
    pool = make(backoff_base=1.0, backoff_cap=4.0, start_timeout=30.0)
    now = 0.0
    delays = []
    for n in range(1, 5):
        pool.acquire("files", None, n, now)
        spawns = only(drain(pool), Spawn)
        if not spawns:  # waiting out the backoff: the spawn comes at the retry time
            retry = pool.get_timer()
            assert retry is not None
            delays.append(retry - now)
            now = retry
            pool.handle_timer(now)
            spawns = only(drain(pool), Spawn)
        (spawn,) = spawns
        pool.started(spawn.instance, now)
        drain(pool)
        pool.crashed(spawn.instance, "segfault", now)
        drain(pool)
    assert delays == [1.0, 2.0, 4.0]  # after the 1st, 2nd and 3rd failures; the cap holds
    assert pool.status(now)[0].failures == 4
    assert pool.get_timer() == now + 4.0


def test_a_call_arriving_during_backoff_waits_for_the_retry_when_it_can() -> None:
    pool = make(backoff_base=2.0, start_timeout=30.0)
    inst = warm(pool)
    pool.crashed(inst, "killed", 10.0)
    drain(pool)
    pool.acquire("files", None, 2, 10.5)
    assert drain(pool) == []  # no spawn during backoff
    assert pool.status(10.5)[0].state is ServerState.BACKING_OFF
    assert pool.get_timer() == 12.0
    pool.handle_timer(12.0)
    (spawn,) = drain(pool)
    assert isinstance(spawn, Spawn)
    pool.started(spawn.instance, 13.0)
    assert drain(pool) == [Granted(call_id=2, instance=spawn.instance)]


def test_a_call_that_cannot_wait_out_the_backoff_is_refused_with_when_to_try_again() -> None:
    pool = make(backoff_base=20.0, backoff_cap=60.0, start_timeout=30.0)
    inst = warm(pool)
    pool.crashed(inst, "killed", 0.0)
    drain(pool)
    pool.acquire("files", None, 2, 1.0, timeout=5.0)  # it waits at most 5s; the retry is in 19s
    (refused,) = drain(pool)
    assert isinstance(refused, Refused)
    assert_names_server(refused.error, "files", "backing-off")
    assert refused.error["data"]["retryAfterSeconds"] == 19.0
    assert "19s" in refused.error["message"] and "killed" in refused.error["message"]
    assert "mcpx restart files" in refused.error["message"]


def test_a_completed_call_ends_the_failure_streak() -> None:
    pool = make(backoff_base=1.0)
    inst = warm(pool)
    pool.crashed(inst, "x", 0.0)
    pool.handle_timer(1.0)
    drain(pool)
    inst = warm(pool, call_id=2, now=1.0)
    assert pool.status(1.0)[0].failures == 1
    pool.release(2, 2.0)
    assert pool.status(2.0)[0].failures == 0
    pool.crashed(inst, "y", 3.0)
    assert pool.get_timer() == 4.0  # base delay again


def test_a_crash_after_a_long_uptime_starts_a_new_streak() -> None:
    pool = make(backoff_base=1.0, backoff_cap=8.0)
    inst = warm(pool)
    pool.crashed(inst, "x", 0.0)
    pool.handle_timer(1.0)
    drain(pool)
    inst = warm(pool, call_id=2, now=1.0)  # failures == 1, the call still in flight
    pool.crashed(inst, "y", 100.0)  # up for 99s ≥ the cap
    assert pool.status(100.0)[0].failures == 1
    assert pool.get_timer() == 101.0


# -- spawn-rate limit ------------------------------------------------------------------------


def test_spawns_per_server_per_minute_are_limited_and_the_refusal_says_when() -> None:
    pool = make(max_spawns_per_minute=3, start_timeout=10.0)
    for n, t in enumerate((0.0, 1.0, 2.0), start=1):
        pool.acquire("sandbox", None, n, t)  # call scope: a fresh instance each time
        assert len(only(drain(pool), Spawn)) == 1
    pool.acquire("sandbox", None, 4, 5.0)  # the next spawn is allowed at 60.0: beyond its 10s wait
    (refused,) = drain(pool)
    assert isinstance(refused, Refused)
    assert_names_server(refused.error, "sandbox", "spawn-limit")
    assert refused.error["data"]["retryAfterSeconds"] == 55.0
    assert "pool.maxSpawnsPerMinute" in refused.error["message"] and "55s" in refused.error["message"]
    status = {s.server: s for s in pool.status(5.0)}["sandbox"]
    assert status.spawns_last_minute == 3 and status.spawn_count == 3
    pool.acquire("sandbox", None, 5, 55.0)  # within 10s of the limit's end: it waits
    assert drain(pool) == []
    for call in (1, 2, 3):
        pool.release(call, 55.0)
    drain(pool)
    assert pool.get_timer() == 60.0
    pool.handle_timer(60.0)  # the spawn at 0.0 has left the window
    assert [type(a) for a in drain(pool)] == [Spawn]
    pool.acquire("files", None, 6, 60.0)  # other servers were never limited by sandbox's spawns
    assert len(only(drain(pool), Spawn)) == 1


# -- call timeout ----------------------------------------------------------------------------


def test_the_call_timeout_is_the_configured_one_and_fires_as_call_timed_out() -> None:
    pool = make(call_timeout=120.0)
    inst = warm(pool, now=5.0)
    assert pool.deadline_for(1) == 125.0 and pool.budget_for(1) == 120.0
    pool.handle_timer(124.9)
    assert drain(pool) == []
    pool.handle_timer(125.0)
    (timed_out,) = drain(pool)
    assert isinstance(timed_out, CallTimedOut) and (timed_out.call_id, timed_out.instance) == (1, inst)
    assert_names_server(timed_out.error, "files", "call-timeout")
    assert "120s" in timed_out.error["message"]
    assert pool.deadline_for(1) is None and pool.calls_on(inst) == ()
    pool.release(1, 126.0)  # the driver's release after the timeout is ignored
    assert drain(pool) == []
    assert pool.instance_state(inst) is InstanceState.IDLE  # the instance itself stays warm


def test_a_caller_may_lower_the_call_timeout_but_not_raise_it() -> None:
    pool = make(call_timeout=120.0)
    warm(pool)
    pool.release(1, 0.0)
    pool.acquire("files", None, 2, 10.0, timeout=5.0)
    pool.acquire("files", None, 3, 10.0, timeout=500.0)
    drain(pool)
    assert pool.deadline_for(2) == 15.0  # honoured
    assert pool.deadline_for(3) == 130.0  # clamped
    pool.handle_timer(15.0)
    (timed_out,) = drain(pool)
    assert timed_out.call_id == 2 and "this call asked for 5s" in timed_out.error["message"]
    pool.handle_timer(130.0)
    assert [a.call_id for a in only(drain(pool), CallTimedOut)] == [3]
    with pytest.raises(LocalProtocolError):
        pool.acquire("files", None, 4, 131.0, timeout=0.0)
    with pytest.raises(LocalProtocolError):
        pool.acquire("files", None, 4, 131.0, timeout=float("nan"))


def test_the_call_timeout_pauses_while_a_question_is_pending() -> None:
    pool = make(call_timeout=100.0)
    warm(pool)  # deadline 100
    pool.question_pending(1, True, 40.0)  # 60s left
    assert pool.deadline_for(1) is None and pool.get_timer() is None
    pool.handle_timer(500.0)  # a person takes their time: the call is not killed
    assert only(drain(pool), CallTimedOut) == []
    pool.question_pending(1, True, 510.0)  # a second question, in parallel
    pool.question_pending(1, False, 520.0)  # one answered: still paused
    assert pool.deadline_for(1) is None
    pool.question_pending(1, False, 600.0)  # both answered: 60s left from here
    assert pool.deadline_for(1) == 660.0
    pool.handle_timer(660.0)
    assert [a.call_id for a in only(drain(pool), CallTimedOut)] == [1]
    pool.question_pending(1, False, 661.0)  # ended: ignored


def test_question_misuse_is_a_local_error_and_changes_nothing() -> None:
    pool = make()
    inst = warm(pool)
    with pytest.raises(LocalProtocolError):
        pool.question_pending(1, False, 1.0)  # nothing pending
    pool.acquire("git", "c9", 2, 1.0)  # waiting for a start
    drain(pool)
    with pytest.raises(LocalProtocolError):
        pool.question_pending(2, True, 1.0)
    assert pool.deadline_for(1) == 120.0 and pool.calls_on(inst) == (1,)


# -- scopes -----------------------------------------------------------------------------------


def test_connection_scope_gives_each_connection_its_own_instance() -> None:
    pool = make()
    a = warm(pool, "git", 1, key="alice")
    b = warm(pool, "git", 2, key="bob")
    assert a != b
    pool.acquire("git", "alice", 3, 1.0)
    assert drain(pool) == [Granted(call_id=3, instance=a)]
    keys = {i.instance: i.scope_key for i in {s.server: s for s in pool.status(1.0)}["git"].instances}
    assert keys == {a: "alice", b: "bob"}
    pool.connection_closed("alice", 2.0)
    actions = drain(pool)
    assert [a_.call_id for a_ in only(actions, CallFailed)] == [1, 3]
    assert_names_server(only(actions, CallFailed)[0].error, "git", "connection-closed")
    assert only(actions, Stop) == [
        Stop(instance=a, server="git", reason="the connection it served (alice) closed")
    ]
    assert pool.instance_state(b) is InstanceState.READY  # bob's is untouched
    assert pool.status(2.0)[1].failures == 0  # a closed connection is not a failure
    with pytest.raises(LocalProtocolError):
        pool.acquire("git", None, 9, 3.0)  # a connection-scoped server needs the caller's key


def test_calls_of_another_lane_never_share_an_instance_or_a_spare() -> None:
    """The gateway's lanes (the host's era, for a dual-era server): a shared server has one instance per lane."""
    pool = make(spare=True)
    usual = warm(pool, "files", 1)
    pool.acquire("files", "c2", 2, 1.0, lane="legacy")
    (spawn,) = drain(pool)
    assert spawn == Spawn(
        instance=spawn.instance, server="files", scope="shared", scope_key=None, lane="legacy"
    )
    pool.started(spawn.instance, 2.0)
    assert drain(pool) == [Granted(call_id=2, instance=spawn.instance)]
    assert pool.acquire_now("files", "c3", 3, 3.0, "legacy") == spawn.instance
    assert pool.acquire_now("files", "c4", 4, 3.0) == usual
    # A connection-scoped server's spare is kept per lane too: a legacy host never gets the usual one.
    pool.acquire("git", "alice", 5, 4.0)
    first, spare = drain(pool)
    assert (first.lane, spare.lane, spare.scope_key) == (None, None, None)
    pool.acquire("git", "bob", 6, 5.0, lane="legacy")
    bobs, legacy_spare = drain(pool)
    assert bobs.lane == legacy_spare.lane == "legacy" and bobs.instance not in (
        first.instance,
        spare.instance,
    )


def test_connection_closed_refuses_calls_still_waiting_and_leaves_shared_ones() -> None:
    pool = make()
    shared = warm(pool, "files", 1, key="alice")
    pool.acquire("git", "alice", 2, 0.0)
    (spawn,) = drain(pool)
    pool.connection_closed("alice", 1.0)
    actions = drain(pool)
    assert isinstance(actions[0], Refused) and actions[0].call_id == 2
    assert_names_server(actions[0].error, "git", "connection-closed")
    assert actions[1] == Stop(
        instance=spawn.instance, server="git", reason="the connection it served (alice) closed"
    )
    assert pool.instance_state(shared) is InstanceState.READY
    pool.started(spawn.instance, 2.0)  # late news about the stopped instance: ignored
    assert drain(pool) == []


def test_call_scope_gives_each_call_a_fresh_instance_stopped_after_it() -> None:
    pool = make()
    first = warm(pool, "sandbox", 1)
    second = warm(pool, "sandbox", 2)
    assert first != second
    pool.release(1, 1.0)
    assert drain(pool) == [Stop(instance=first, server="sandbox", reason="the call it was started for ended")]
    pool.acquire("sandbox", None, 3, 2.0)
    (spawn,) = drain(pool)
    pool.release(3, 2.5)  # gave up while it started: its instance goes too
    assert drain(pool) == [
        Stop(instance=spawn.instance, server="sandbox", reason="the call it was started for ended")
    ]
    pool.handle_timer(1000.0)  # call 2 times out; its instance goes with it
    assert [type(a) for a in drain(pool)] == [CallTimedOut, Stop]
    assert pool.get_timer() is None


# -- restart -----------------------------------------------------------------------------------


def test_restart_stops_instances_fails_their_calls_and_clears_the_backoff() -> None:
    pool = make(backoff_base=30.0, backoff_cap=60.0)
    files = warm(pool, "files", 1)
    git = warm(pool, "git", 2, key="alice")
    pool.crashed(git, "x", 1.0)
    drain(pool)
    assert pool.status(1.0)[1].state is ServerState.BACKING_OFF
    pool.restart("git", 2.0)
    assert drain(pool) == []
    assert pool.status(2.0)[1].state is ServerState.STOPPED  # backoff cleared
    pool.acquire("git", "alice", 3, 2.0)
    assert len(only(drain(pool), Spawn)) == 1
    pool.restart("files", 3.0)
    actions = drain(pool)
    (failed,) = only(actions, CallFailed)
    assert failed.call_id == 1
    assert_names_server(failed.error, "files", "restarted")
    assert only(actions, Stop) == [Stop(instance=files, server="files", reason="restart requested")]
    with pytest.raises(LocalProtocolError):
        pool.restart("nope", 4.0)


def test_restart_of_everything_gives_waiting_calls_a_fresh_instance() -> None:
    pool = make()
    pool.acquire("files", None, 1, 0.0)
    (old,) = drain(pool)
    pool.restart(None, 1.0)
    actions = drain(pool)
    assert actions[0] == Stop(instance=old.instance, server="files", reason="restart requested")
    assert isinstance(actions[1], Spawn) and actions[1].instance != old.instance
    pool.started(actions[1].instance, 2.0)
    assert drain(pool) == [Granted(call_id=1, instance=actions[1].instance)]


# -- errors, misuse, introspection -----------------------------------------------------------


def test_an_unknown_server_is_refused_naming_the_configured_ones() -> None:
    pool = make()
    pool.acquire("nope", None, 1, 0.0)
    (refused,) = drain(pool)
    assert isinstance(refused, Refused) and refused.error["code"] == INVALID_PARAMS
    assert_names_server(refused.error, "nope", "unknown-server")
    assert "files, git, sandbox" in refused.error["message"]


def test_misuse_is_a_local_error_and_changes_nothing() -> None:
    pool = make()
    inst = warm(pool)
    with pytest.raises(LocalProtocolError):
        pool.acquire("files", None, 1, 1.0)  # call id in use
    with pytest.raises(LocalProtocolError):
        pool.started(inst, 1.0)  # already running
    with pytest.raises(LocalProtocolError):
        pool.start_failed(inst, "x", 1.0)
    with pytest.raises(LocalProtocolError):
        pool.crashed(99, "x", 1.0)  # never spawned
    with pytest.raises(LocalProtocolError):
        pool.instance_state(0)
    assert drain(pool) == [] and pool.calls_on(inst) == (1,)
    pool.release("never-acquired", 1.0)  # ignored, as a release racing a timeout is
    assert drain(pool) == []


def test_time_never_goes_backwards() -> None:
    pool = make(call_timeout=10.0)
    warm(pool, now=100.0)
    pool.acquire("files", None, 2, 50.0)  # a driver's stale timestamp counts as the latest one seen
    drain(pool)
    assert pool.deadline_for(2) == 110.0


def test_status_reports_states_counts_errors_and_spawns() -> None:
    pool = make()
    warm(pool, "files", 1)
    pool.acquire("files", None, 2, 0.0)
    pool.acquire("git", "alice", 3, 0.0)
    drain(pool)
    files, git, sandbox = pool.status(0.0)
    assert (files.state, files.in_flight, files.spawn_count) == (ServerState.READY, 2, 1)
    assert (git.state, git.waiting, git.scope) == (ServerState.STARTING, 1, "connection")
    assert sandbox.state is ServerState.STOPPED and sandbox.instances == ()
    pool.start_failed(git.instances[0].instance, "bad token", 1.0)
    doc = pool.status(1.0)[1].to_json()
    assert doc["state"] == "backing-off" and doc["lastError"] == "bad token" and doc["retryAt"] == 2.0
    assert files.to_json()["instances"][0]["state"] == "ready"


def test_every_spawn_is_followed_by_exactly_one_stop() -> None:
    pool = make(idle_timeout=5.0)
    warm(pool, "files", 1)
    warm(pool, "git", 2, key="a")
    warm(pool, "sandbox", 3)
    pool.crashed(2, "x", 1.0)
    pool.release(1, 1.0)
    pool.release(3, 1.0)
    pool.handle_timer(6.0)
    pool.handle_timer(100.0)
    actions = drain(pool)
    assert sorted(a.instance for a in only(actions, Stop)) == [1, 2, 3]
    assert pool.get_timer() is None


def test_the_config_is_validated_when_built() -> None:
    with pytest.raises(ValueError, match="call_timeout"):
        PoolConfig(call_timeout=0)
    with pytest.raises(ValueError, match="max_spawns_per_minute"):
        PoolConfig(max_spawns_per_minute=0)
    with pytest.raises(ValueError, match="backoff_cap"):
        PoolConfig(backoff_base=10, backoff_cap=5)
    with pytest.raises(ValueError, match="scope"):
        Pool({"x": "global"})
    assert PoolConfig().backoff(1) == 1.0 and PoolConfig().backoff(1000) == 60.0


def test_the_pool_accepts_the_configurations_scope_enum() -> None:
    from mcpx.config import Scope

    pool = Pool({"a": Scope.CONNECTION})
    pool.acquire("a", "k", 1, 0.0)
    assert drain(pool) == [Spawn(instance=1, server="a", scope="connection", scope_key="k")]


# -- a spare, started ahead of need (pool.spare) -----------------------------------------------------


def test_a_spare_is_started_beside_the_first_connection_and_given_to_the_next_at_once() -> None:
    pool = make(spare=True)
    pool.acquire("git", "c1", 1, 0.0)
    first, spare = drain(pool)
    assert (first.scope_key, spare.scope_key) == ("c1", None)  # the caller's, and nobody's yet
    assert pool.is_spare(spare.instance) and not pool.is_spare(first.instance)
    pool.started(first.instance, 0.5)
    pool.started(spare.instance, 0.5)
    assert [type(a) for a in drain(pool)] == [Granted]
    pool.acquire("git", "c2", 2, 1.0)  # a new connection: the spare is granted without waiting
    granted, replacement = drain(pool)
    assert isinstance(granted, Granted) and granted.instance == spare.instance
    assert isinstance(replacement, Spawn) and replacement.scope_key is None
    assert not pool.is_spare(spare.instance) and pool.is_spare(replacement.instance)  # c2's now
    assert pool.calls_on(spare.instance) == (2,)
    pool.connection_closed("c2", 2.0)  # the adopted spare is c2's now, and goes with it
    failed, stopped = drain(pool)
    assert isinstance(failed, CallFailed) and failed.call_id == 2
    assert isinstance(stopped, Stop) and stopped.instance == spare.instance


def test_a_starting_spare_serves_the_next_call_when_it_starts_and_shared_servers_get_none() -> None:
    pool = make(spare=True)
    pool.acquire("sandbox", "c1", 1, 0.0)
    first, spare = drain(pool)
    pool.acquire("sandbox", "c1", 2, 0.1)  # a call-scoped server: a fresh instance per call
    replacement = drain(pool)[-1]  # the spare is call 2's, still starting; another spare is spawned
    assert isinstance(replacement, Spawn) and replacement.instance not in (first.instance, spare.instance)
    pool.started(spare.instance, 0.5)
    (granted,) = drain(pool)
    assert (granted.call_id, granted.instance) == (2, spare.instance)
    pool.acquire("files", None, 3, 1.0)
    assert [type(a) for a in drain(pool)] == [Spawn]  # shared: one instance for everybody, no spare


def test_no_spare_while_the_server_backs_off_or_when_idle_instances_stop_at_once() -> None:
    pool = make(spare=True, idle_timeout=0.0)
    pool.acquire("git", "c1", 1, 0.0)
    assert [type(a) for a in drain(pool)] == [Spawn]  # idle instances stop at once: a spare would too
    pool = make(spare=True)
    pool.acquire("git", "c1", 1, 0.0)
    first, spare = drain(pool)
    pool.start_failed(first.instance, "boom", 0.1)  # backoff begins
    pool.crashed(spare.instance, "boom", 0.2)
    drain(pool)
    pool.acquire("git", "c3", 3, 0.3)  # within the backoff: neither an instance nor a spare now
    assert not [a for a in drain(pool) if isinstance(a, Spawn)]
