"""The in-flight mirror (spec/gateway.md §4): what the daemon marks running is what the shim reads back."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from mcpx.gateway._state import SLOT, SLOTS, InflightMirror, read_mirror


@pytest.fixture
def mirror() -> Iterator[tuple[InflightMirror, int]]:
    """The daemon's side of a mirror, and the descriptor the shim reads it through."""
    fd, path = tempfile.mkstemp()
    os.unlink(path)
    daemon_side = InflightMirror(fd)
    yield daemon_side, fd
    daemon_side.close()
    os.close(fd)


def test_running_ids_are_read_back_and_answered_ones_are_not(mirror: tuple[InflightMirror, int]) -> None:
    marks, fd = mirror
    for request_id in (1, "a", 7, "x" * 20):
        assert marks.add(request_id)
    assert marks.done(7)
    assert not marks.done(7), "an id answered once is not running any more"
    assert not marks.done(8), "an id never added is not running"
    assert sorted(map(str, read_mirror(fd))) == sorted(["1", "a", "x" * 20])
    assert read_mirror(fd) == [], "the shim's read clears the mirror"


def test_an_id_reused_while_running_is_held_once_per_request(mirror: tuple[InflightMirror, int]) -> None:
    marks, fd = mirror
    assert marks.add(3) and marks.add(3) and marks.add("3")
    assert marks.done(3)
    assert sorted(read_mirror(fd), key=str) == [3, "3"], "one request 3 and the string '3' still run"
    assert marks.done(3) and marks.done("3")
    assert not marks.done(3)


def test_ids_that_do_not_fit_are_refused_for_the_socket_to_carry(mirror: tuple[InflightMirror, int]) -> None:
    marks, fd = mirror
    assert not marks.add("y" * SLOT), "too long for a slot: the caller reports it on the socket"
    for n in range(SLOTS):
        assert marks.add(n)
    assert not marks.add(SLOTS), "no slot free"
    assert marks.done(0) and marks.add(SLOTS), "a slot freed is used again"
    assert len(read_mirror(fd)) == SLOTS
