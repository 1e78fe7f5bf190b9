"""Server-Sent Events framing (the WHATWG event-stream format MCP's HTTP transports use).

``encode_event`` writes one event: optional ``id:``, ``event:`` and ``retry:``
fields, then the data split into ``data:`` lines (a JSON-RPC message is one
line; the format allows several).  ``comment`` writes a keep-alive comment,
which every reader must ignore.

``SseDecoder`` reads an event stream arriving in arbitrary pieces: bounded
(an event larger than ``max_event`` bytes is an error rather than a growing
buffer), linear, and tolerant of ``\\r\\n``, ``\\r`` and ``\\n`` line endings as
the format requires.  Events with no data are dispatched only when they carry
an id (a "priming" event), so a client can remember the cursor.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SseDecoder", "SseError", "SseEvent", "comment", "encode_event"]


def encode_event(
    data: bytes | None,
    *,
    event_id: str | None = None,
    event: str | None = None,
    retry_ms: int | None = None,
) -> bytes:
    """One SSE event; ``data=None`` gives an event with an empty data field."""
    parts: list[bytes] = []
    if event_id is not None:
        if "\n" in event_id or "\r" in event_id or "\0" in event_id:
            raise ValueError("an SSE id cannot contain a newline or NUL")
        parts.append(b"id: " + event_id.encode())
    if event is not None:
        parts.append(b"event: " + event.encode())
    if retry_ms is not None:
        parts.append(b"retry: %d" % retry_ms)
    if data is None or data == b"":
        parts.append(b"data: ")
    else:
        for line in data.splitlines():
            parts.append(b"data: " + line)
    return b"\n".join(parts) + b"\n\n"


def comment(text: str = "") -> bytes:
    """A comment line: keeps a quiet stream alive; readers ignore it."""
    return b": " + text.encode() + b"\n\n" if text else b":\n\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class SseEvent:
    data: str
    event: str = "message"
    event_id: str | None = None
    retry_ms: int | None = None


class SseError(Exception):
    """The stream broke the format or a limit.

    ``events`` are the events ``feed`` completed in the same chunk before the
    error: they arrived whole, so a reader may still hand them on.
    """

    def __init__(self, message: str, events: list[SseEvent] | None = None) -> None:
        super().__init__(message)
        self.events: list[SseEvent] = events or []


class SseDecoder:
    """Incremental event-stream reader; ``feed`` returns the events it completed."""

    def __init__(self, max_event: int = 4 * 1024 * 1024) -> None:
        self.max_event = max_event
        self._buf = bytearray()
        self._scan = 0
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._size = 0
        self.last_event_id: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events ``chunk`` completed; ``SseError`` (with those events) when a limit is broken."""
        events: list[SseEvent] = []
        buf = self._buf
        buf += chunk
        start = 0
        try:
            while True:
                line_end, skip = self._find_line_end(buf, max(start, self._scan))
                if line_end < 0:
                    break
                line = bytes(buf[start:line_end])
                start = line_end + skip
                self._scan = start
                self._line(line, events)
        except SseError as exc:
            exc.events = events
            raise
        if start:
            del buf[:start]
        # A trailing CR may be the first half of a CRLF: look at it again.
        self._scan = len(buf) - 1 if buf.endswith(b"\r") else len(buf)
        if len(buf) + self._size > self.max_event:
            raise SseError(f"an SSE event exceeds {self.max_event} bytes", events)
        return events

    def _find_line_end(self, buf: bytearray, start: int) -> tuple[int, int]:
        lf = buf.find(b"\n", start)
        cr = buf.find(b"\r", start)
        if cr < 0 or (0 <= lf < cr):
            return (lf, 1) if lf >= 0 else (-1, 0)
        # A CR: a line end on its own, or the first half of CRLF.
        if cr + 1 < len(buf):
            return (cr, 2) if buf[cr + 1 : cr + 2] == b"\n" else (cr, 1)
        return -1, 0  # wait for the next byte to tell CR from CRLF

    def _line(self, raw: bytes, events: list[SseEvent]) -> None:
        if not raw:
            self._dispatch(events)
            return
        self._size += len(raw)
        if self._size > self.max_event:  # whole lines count too, not only what waits in the buffer
            raise SseError(f"an SSE event exceeds {self.max_event} bytes")
        if raw.startswith(b":"):
            return
        name, sep, value = raw.partition(b":")
        if sep and value.startswith(b" "):
            value = value[1:]
        text = value.decode("utf-8", errors="replace")
        field = name.decode("utf-8", errors="replace")
        if field == "data":
            self._data.append(text)
        elif field == "event":
            self._event = text
        elif field == "id":
            if "\0" not in text:
                self._id = text
        elif field == "retry" and text.isdigit():
            self._retry = int(text)

    def _dispatch(self, events: list[SseEvent]) -> None:
        if self._id is not None:
            self.last_event_id = self._id
        if self._data or self._id is not None:
            events.append(
                SseEvent(
                    data="\n".join(self._data),
                    event=self._event or "message",
                    event_id=self._id,
                    retry_ms=self._retry,
                )
            )
        self._data = []
        self._event = ""
        self._id = None
        self._retry = None
        self._size = 0
