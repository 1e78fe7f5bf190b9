"""The daemon gives freed heap back after start-up and after a burst (mcpx/gateway/_daemon.py, spec/gateway.md §8).

``QuietWatch`` decides, from the daemon's CPU time at each look, when a
trim is due: once the daemon falls quiet after it worked, and not while it
works or while it idles with nothing done since the last trim.
"""

from __future__ import annotations

import sys

import pytest

from mcpx.gateway._daemon import QUIET_CHECK, QuietWatch, heap_trimmer


def _looks(watch: QuietWatch, cpu_times: list[float]) -> list[bool]:
    return [watch.look(cpu) for cpu in cpu_times]


def test_a_trim_is_due_at_the_first_quiet_look_after_a_burst_and_not_again() -> None:
    watch = QuietWatch(cpu=1.0, interval=QUIET_CHECK)
    # Busy (a second of CPU per look), then quiet: one trim, at the first quiet look.
    assert _looks(watch, [2.0, 3.0, 4.0, 4.001, 4.002, 4.003]) == [False, False, False, True, False, False]
    # Another burst: due again once it ends.
    assert _looks(watch, [5.0, 5.5, 5.501]) == [False, False, True]


def test_no_trim_is_due_while_the_daemon_idles_having_done_next_to_nothing() -> None:
    watch = QuietWatch(cpu=1.0, interval=QUIET_CHECK)
    # A few calls' worth of CPU, spread thin: quiet at every look, but not worth a trim.
    assert _looks(watch, [1.0 + 0.001 * k for k in range(1, 60)]) == [False] * 59


def _anon_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon:"))


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="malloc_trim is glibc's; elsewhere there is none"
)
def test_on_linux_the_trimmer_gives_freed_heap_pages_back() -> None:
    trim = heap_trimmer()
    assert trim is not None
    # 64 MB in 4 KiB blocks (the C heap's, not Python's small-object arenas), every 64th kept so
    # that the heap's top stays in use and glibc's own trimming cannot give the rest back.
    blocks = [bytes(4096) for _ in range(16384)]
    kept = blocks[::64]
    del blocks
    held = _anon_kib()
    trim()
    assert held - _anon_kib() > 32 * 1024, "the freed blocks' pages were not given back"
    assert len(kept) == 256
