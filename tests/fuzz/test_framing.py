"""Properties of ``LineReader``: the framing of the stdio transport.

The oracle is the module docstring of ``mcpx.core.framing`` read literally:
split the whole stream at every ``\\n``; a piece longer than ``max_line``
bytes is one ``LineTooLong``; otherwise one trailing ``\\r`` is dropped and
the piece is a ``Line`` unless it is empty or only whitespace; the piece after
the last newline is the last line (or too long), then ``EndOfInput``.  However
the stream is cut into ``feed`` calls, the events must be exactly these, and
the reader never holds more than ``max_line`` bytes between calls.
"""

from __future__ import annotations

import functools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpx.core.framing import EndOfInput, Line, LineReader, LineTooLong

from ._examples import tick
from ._mcp import cut

FrameEvent = Line | LineTooLong | EndOfInput


# ----------------------------------------------------------------------------
# Strategies
# ----------------------------------------------------------------------------

_PIECES = st.one_of(
    st.sampled_from([b"\n", b"\r", b"\r\n", b"\n\n", b" ", b"\t", b"a", b"bc", b"{}", b"\x00", b"\xff"]),
    st.binary(max_size=6),
    st.integers(min_value=0, max_value=40).map(lambda n: b"x" * n),  # runs that cross the limit
)

streams = st.lists(_PIECES, max_size=30).map(b"".join)
limits = st.integers(min_value=1, max_value=24)


@st.composite
def stream_and_chunks(draw: st.DrawFn) -> tuple[bytes, int, list[bytes]]:
    data = draw(streams)
    limit = draw(limits)
    points = draw(st.lists(st.integers(min_value=0, max_value=max(len(data), 1)), max_size=12))
    return data, limit, cut(data, points)


# ----------------------------------------------------------------------------
# The oracle and the driver
# ----------------------------------------------------------------------------


def _line_event(piece: bytes, limit: int) -> list[FrameEvent]:
    if len(piece) > limit:
        return [LineTooLong(limit)]
    if piece.endswith(b"\r"):
        piece = piece[:-1]
    return [Line(piece)] if piece.strip() else []


def expected_events(data: bytes, limit: int) -> list[FrameEvent]:
    *complete, tail = data.split(b"\n")
    events: list[FrameEvent] = []
    for piece in complete:
        events += _line_event(piece, limit)
    events += _line_event(tail, limit)
    events.append(EndOfInput())
    return events


def run(chunks: list[bytes], limit: int) -> list[FrameEvent]:
    """Feed ``chunks`` then end of input; check the buffer bound after every call."""
    reader = LineReader(limit)
    events: list[FrameEvent] = []
    for chunk in chunks:
        assert chunk, "b'' is end of input; the test must not send it mid-stream"
        events += reader.feed(chunk)
        assert 0 <= reader.buffered <= limit, (reader.buffered, limit)
        assert not any(isinstance(e, EndOfInput) for e in events)
    events += reader.feed(b"")
    assert reader.buffered == 0
    with pytest.raises(RuntimeError):
        reader.feed(b"more")
    with pytest.raises(RuntimeError):
        reader.feed(b"")
    return events


# ----------------------------------------------------------------------------
# Properties
# ----------------------------------------------------------------------------


@given(stream_and_chunks())
def test_every_split_gives_the_same_events(case: tuple[bytes, int, list[bytes]]) -> None:
    """Whole, byte by byte, or cut anywhere: the same events, and the ones the docstring promises."""
    tick()
    data, limit, chunks = case
    expected = expected_events(data, limit)
    assert run(chunks, limit) == expected
    whole = [data] if data else []
    assert run(whole, limit) == expected
    assert run([data[i : i + 1] for i in range(len(data))], limit) == expected
    # Every event is well formed.
    for event in expected:
        if isinstance(event, Line):
            assert b"\n" not in event.data
            assert not event.data.endswith(b"\r\n")
            assert len(event.data) <= limit
            assert event.data.strip()
        elif isinstance(event, LineTooLong):
            assert event.limit == limit


@functools.cache
def _lines_within(room: int) -> st.SearchStrategy[list[bytes]]:
    """Lines of at most ``room`` bytes, none empty, none only whitespace, no CR or LF."""
    line = st.binary(min_size=1, max_size=room).map(_printable_line)
    return st.lists(line, max_size=3)


def _printable_line(raw: bytes) -> bytes:
    line = raw.replace(b"\n", b"n").replace(b"\r", b"r")
    return line if line.strip() else b"y" + line[1:]


@given(
    limit=st.integers(min_value=3, max_value=24),
    excess=st.integers(min_value=1, max_value=60),
    filler=st.sampled_from([b"x", b" ", b"\r", b"\x00", b"{"]),
    crlf=st.booleans(),
    data=st.data(),
)
def test_overlong_line_is_reported_once_and_the_next_line_survives(
    limit: int, excess: int, filler: bytes, crlf: bool, data: st.DataObject
) -> None:
    tick()
    eol = b"\r\n" if crlf else b"\n"
    room = limit - len(eol) + 1  # the longest line that fits together with its terminator
    before = data.draw(_lines_within(room), label="before")
    after = data.draw(_lines_within(room), label="after") or [b"ok"[:room]]
    overlong = filler * (limit + excess)
    stream = b"".join(b + eol for b in before) + overlong + eol + b"".join(a + eol for a in after)
    points = data.draw(st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=10))
    events = run(cut(stream, points), limit)
    expected: list[FrameEvent] = [Line(b) for b in before]
    expected.append(LineTooLong(limit))
    expected += [Line(a) for a in after]
    expected.append(EndOfInput())
    assert events == expected


@given(
    lines=st.lists(st.binary(max_size=10).map(lambda b: b.replace(b"\n", b"n").removesuffix(b"\r"))),
    last_newline=st.booleans(),
    data=st.data(),
)
def test_crlf_and_lf_streams_carry_the_same_lines(
    lines: list[bytes], last_newline: bool, data: st.DataObject
) -> None:
    tick()
    limit = 64
    lf = b"\n".join(lines) + (b"\n" if last_newline else b"")
    crlf = b"\r\n".join(lines) + (b"\r\n" if last_newline else b"")
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(crlf)), max_size=8))
    from_lf = run(cut(lf, cuts), limit)
    from_crlf = run(cut(crlf, cuts), limit)
    assert from_crlf == from_lf
    assert [e.data for e in from_lf if isinstance(e, Line)] == [line for line in lines if line.strip()]
    # A CR in the middle of a line is data, not a line break.
    assert all(isinstance(e, Line | EndOfInput) for e in from_crlf)


@given(limit=limits, chunks=st.lists(st.binary(min_size=1, max_size=50), max_size=20))
def test_buffer_never_exceeds_the_limit_and_counts_what_is_held(limit: int, chunks: list[bytes]) -> None:
    tick()
    reader = LineReader(limit)
    seen = b""
    for chunk in chunks:
        reader.feed(chunk)
        seen += chunk
        tail = seen.rsplit(b"\n", 1)[-1]
        # What is held is exactly the unfinished line, unless that line is already too long.
        assert reader.buffered == (len(tail) if len(tail) <= limit else 0)
