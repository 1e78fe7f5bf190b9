"""``StderrLog`` (mcpx/drivers/_stderr.py): the bounded ring of a server's last stderr lines."""

from __future__ import annotations

import random

import pytest

from mcpx.drivers._stderr import StderrLog

TEXT = b"".join(f"line {n}\n".encode() for n in range(50)) + b"no newline yet"


def test_the_ring_keeps_the_last_lines_whatever_the_split_and_bounds_every_line() -> None:
    whole = StderrLog(max_lines=10)
    whole.feed(TEXT, 1.0)
    by_byte = StderrLog(max_lines=10)
    for i in range(len(TEXT)):
        by_byte.feed(TEXT[i : i + 1], 1.0)
    rng = random.Random(15)
    cuts = sorted(rng.sample(range(1, len(TEXT)), 20))
    random_split = StderrLog(max_lines=10)
    for start, end in zip([0, *cuts], [*cuts, len(TEXT)], strict=True):
        random_split.feed(TEXT[start:end], 1.0)
    for log in (whole, by_byte, random_split):
        assert [line.text for line in log.lines()] == [f"line {n}" for n in range(40, 50)]
        assert log.dropped == 40 and log.bytes_read == len(TEXT)
        assert log.tail(lines=2) == "line 49 | no newline yet"  # the partial line is quoted, not listed
        log.close(2.0)
        assert log.lines()[-1].text == "no newline yet"
    long = StderrLog(max_lines=3, max_line=8)
    long.feed(b"x" * 100_000 + b"\r\nshort\n", 3.0)
    first, second = long.lines()
    assert (first.text, first.cut) == ("x" * 8, True) and (second.text, second.cut) == ("short", False)
    assert long.to_json(last=1) == {
        "exitCode": None,
        "lines": ["short"],
        "times": [3.0],
        "dropped": 1,
        "bytes": 100_008,
    }
    with pytest.raises(ValueError, match="at least 1"):
        StderrLog(max_lines=0)
