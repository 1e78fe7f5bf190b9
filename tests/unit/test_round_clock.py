"""A ``requestState``'s expiry is wall-clock time, while every machine takes a monotonic ``now``.

``RoundTable`` (mcpx/core/rounds.py) is given its process's ``wall_offset``
(wall clock minus monotonic) once, by the driver.  Two replicas sharing a
state key have monotonic clocks that agree on nothing; the wall clock is
what they share, so a retry carrying state one replica signed is judged by
the other at the same wall-clock instant, whatever their monotonic readings
(2026-07-28 basic/patterns/mrtr: a server may be several processes).
"""

from __future__ import annotations

import pytest

from mcpx.core.rounds import Question, RoundTable, StateError

KEY = bytes(32)
TTL = 100.0
PARAMS = {"name": "confirm", "arguments": {}}


def _state_from(table: RoundTable, now: float) -> str:
    parked = table.park(
        token=1,
        method="tools/call",
        params=PARAMS,
        ask_id=1,
        questions=[Question(key="q", method="elicitation/create")],
        round=1,
        now=now,
    )
    return parked.state


def _judged_by(table: RoundTable, state: str, now: float) -> str:
    with pytest.raises(StateError) as refused:
        table.resume(state, method="tools/call", params=PARAMS, now=now)
    return refused.value.kind


def test_another_replica_judges_the_expiry_by_the_wall_clock_not_its_own_monotonic_one() -> None:
    # Replica A: monotonic 10 is wall 1,000,010.  Replica B: monotonic 90,000 is wall 1,000,010 too.
    a = RoundTable(key=KEY, instance="a", state_ttl=TTL, wall_offset=1_000_000.0)
    b = RoundTable(key=KEY, instance="b", state_ttl=TTL, wall_offset=910_010.0)
    state = _state_from(a, now=10.0)
    # Within the TTL by the wall clock: B finds the state genuine and unexpired (the call is A's).
    assert _judged_by(b, state, now=90_000.0 + TTL - 1) == "unknown-call"
    # Past it: expired, though B's monotonic clock is far beyond A's either way.
    assert _judged_by(b, state, now=90_000.0 + TTL + 1) == "expired"


def test_the_replica_that_parked_the_call_resumes_it_within_the_ttl_and_not_after() -> None:
    table = RoundTable(key=KEY, instance="a", state_ttl=TTL, ask_timeout=10 * TTL, wall_offset=5_000.0)
    state = _state_from(table, now=10.0)
    assert table.resume(state, method="tools/call", params=PARAMS, now=10.0 + TTL - 1).token == 1
    state = _state_from(table, now=10.0)
    assert _judged_by(table, state, now=10.0 + TTL + 1) == "expired"
