"""Newline-delimited framing for the stdio transport (every revision).

MCP's stdio transport (digest §13a) sends one JSON-RPC message per line,
UTF-8, no embedded newlines.  ``LineReader`` turns a byte stream that arrives
in arbitrary pieces into lines:

* Bounded: a line longer than ``max_line`` bytes is reported once as
  ``LineTooLong`` and its bytes are discarded as they arrive, up to and
  including the newline that ends it, so one oversized line never grows the
  buffer and never poisons the next line.
* Linear: the newline search resumes where the previous one stopped, and
  consumed bytes are dropped once per ``feed``, so the cost of feeding is
  proportional to the bytes fed, however they are split.
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
        self._scan = 0  # bytes of _buf already known to hold no newline
        self._discarding = False  # inside an overlong line, waiting for its newline
        self._ended = False

    @property
    def buffered(self) -> int:
        """Bytes held waiting for a newline (never more than ``max_line``)."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[FrameEvent]:
        """Consume ``data`` (``b""`` = end of input) and return the events it completes."""
        if self._ended:
            raise RuntimeError("feed() after end of input")
        events: list[FrameEvent] = []
        if not data:
            self._ended = True
            if self._buf and not self._discarding:
                self._emit(bytes(self._buf), events)
            self._buf.clear()
            self._scan = 0
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
        buf += data
        start = 0
        while True:
            nl = buf.find(b"\n", max(self._scan, start))
            if nl < 0:
                break
            if nl - start > self.max_line:
                events.append(LineTooLong(self.max_line))
            else:
                self._emit(bytes(buf[start:nl]), events)
            start = nl + 1
            self._scan = start
        if start:
            del buf[:start]
        self._scan = len(buf)
        if len(buf) > self.max_line:
            # The line in progress is already too long: report it once and drop
            # its bytes as they arrive until its newline.
            events.append(LineTooLong(self.max_line))
            buf.clear()
            self._scan = 0
            self._discarding = True
        return events

    @staticmethod
    def _emit(line: bytes, events: list[FrameEvent]) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            events.append(Line(line))
