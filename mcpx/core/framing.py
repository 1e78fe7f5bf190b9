"""Newline-delimited framing for the stdio transport (every revision).

MCP's stdio transport (basic/transports up to 2025-11-25, 2026-07-28
basic/transports/stdio) sends one JSON-RPC message per line, UTF-8, no
embedded newlines.  ``LineReader`` turns a byte stream that arrives in
arbitrary pieces into lines:

* Bounded: a line longer than ``max_line`` bytes is reported once as
  ``LineTooLong`` and its bytes are discarded as they arrive, up to and
  including the newline that ends it, so one oversized line never grows the
  buffer and never poisons the next line.
* Linear: only the bytes just fed are searched for a newline, and the bytes
  held for an unfinished line are copied once more, when a newline ends it,
  so the cost of feeding is proportional to the bytes fed, however they are
  split.
* ``feed(b"")`` is the end of input; a last line without its newline is still
  a line.

A trailing ``\\r`` is dropped (a CRLF peer is still understood); lines that are
empty or only whitespace are skipped, since they carry no message.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_LINE", "EndOfInput", "Line", "LineReader", "LineTooLong"]

DEFAULT_MAX_LINE = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Line:
    data: bytes


@dataclass(frozen=True, slots=True)
class LineTooLong:
    limit: int


@dataclass(frozen=True, slots=True)
class EndOfInput:
    pass


FrameEvent = Line | LineTooLong | EndOfInput


class LineReader:
    """Split a byte stream into lines; see the module docstring for the rules."""

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        if max_line < 1:
            raise ValueError("max_line must be positive")
        self.max_line = max_line
        self._buf = bytearray()
        self._discarding = False  # inside an overlong line, waiting for its newline
        self._ended = False

    @property
    def buffered(self) -> int:
        """Bytes held waiting for a newline (never more than ``max_line``)."""
        return len(self._buf)

    def take_buffered(self) -> bytes:
        """The bytes held waiting for a newline, handed to whoever reads the stream next; held no more.

        For a reader that hands its stream over, leftover bytes and all (the
        era probe to the client session).  Inside an overlong line nothing is
        held: its rest is the next reader's to discard.
        """
        held = bytes(self._buf)
        self._buf.clear()
        return held

    def feed(self, data: bytes) -> list[FrameEvent]:
        """Consume ``data`` (``b""`` = end of input) and return the events it completes."""
        return [Line(e) if type(e) is bytes else e for e in self.feed_raw(data)]  # type: ignore[misc]

    def feed_raw(self, data: bytes) -> list[bytes | LineTooLong | EndOfInput]:
        """``feed``, with each complete line as its bytes rather than a ``Line`` (one object fewer per line)."""
        if self._ended:
            raise RuntimeError("feed() after end of input")
        events: list[bytes | LineTooLong | EndOfInput] = []
        if not data:
            self._ended = True
            if self._buf and not self._discarding:
                self._emit(bytes(self._buf), events)
            self._buf.clear()
            events.append(EndOfInput())
            return events

        if self._discarding:
            cut = data.find(b"\n")
            if cut < 0:
                return events
            self._discarding = False
            data = data[cut + 1 :]
            if not data:
                return events

        buf = self._buf
        if b"\n" in data:
            # Lines end here: split what is held and what came in one pass.
            # Each byte is copied at most once more, when its line completes.
            if buf:
                buf += data
                whole = bytes(buf)
                buf.clear()
            else:
                whole = data if type(data) is bytes else bytes(data)
            *lines, rest = whole.split(b"\n")
            limit = self.max_line
            for raw in lines:
                if len(raw) > limit:
                    events.append(LineTooLong(limit))
                    continue
                line = raw[:-1] if raw[-1:] == b"\r" else raw
                if line and not line.isspace():  # isspace: the bytes strip() would remove, all of them
                    events.append(line)
            if rest:
                buf += rest
        else:
            buf += data
        if len(buf) > self.max_line:
            # The line in progress is already too long: report it once and drop
            # its bytes as they arrive until its newline.
            events.append(LineTooLong(self.max_line))
            buf.clear()
            self._discarding = True
        return events

    @staticmethod
    def _emit(line: bytes, events: list[bytes | LineTooLong | EndOfInput]) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            events.append(line)
