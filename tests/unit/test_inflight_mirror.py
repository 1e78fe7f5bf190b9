"""The in-flight mirror (spec/gateway.md §4): what the daemon marks running is what the shim reads back."""

from __future__ import annotations

import os
import tempfile

from mcpx.gateway._state import SLOT, SLOTS, InflightMirror, read_mirror


def _mirror() -> tuple[InflightMirror, int]:
    fd, path = tempfile.mkstemp()
    os.unlink(path)
    return InflightMirror(fd), fd


def test_running_ids_are_read_back_and_answered_ones_are_not() -> None:
    mirror, fd = _mirror()
    try:
        for request_id in (1, "a", 7, "x" * 20):
            assert mirror.add(request_id)
        assert mirror.done(7)
        assert not mirror.done(7), "an id answered once is not running any more"
        assert not mirror.done(8), "an id never added is not running"
        assert sorted(map(str, read_mirror(fd))) == sorted(["1", "a", "x" * 20])
        assert read_mirror(fd) == [], "the shim's read clears the mirror"
    finally:
        mirror.close()
        os.close(fd)


def test_an_id_reused_while_running_is_held_once_per_request() -> None:
    mirror, fd = _mirror()
    try:
        assert mirror.add(3) and mirror.add(3) and mirror.add("3")
        assert mirror.done(3)
        assert sorted(read_mirror(fd), key=str) == [3, "3"], "one request 3 and the string '3' still run"
        assert mirror.done(3) and mirror.done("3")
        assert not mirror.done(3)
    finally:
        mirror.close()
        os.close(fd)


def test_ids_that_do_not_fit_are_refused_for_the_socket_to_carry() -> None:
    mirror, fd = _mirror()
    try:
        assert not mirror.add("y" * SLOT), "too long for a slot: the caller reports it on the socket"
        for n in range(SLOTS):
            assert mirror.add(n)
        assert not mirror.add(SLOTS), "no slot free"
        assert mirror.done(0) and mirror.add(SLOTS), "a slot freed is used again"
        assert len(read_mirror(fd)) == SLOTS
    finally:
        mirror.close()
        os.close(fd)
