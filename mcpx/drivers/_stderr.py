"""The last lines a spawned server wrote on stderr: a bounded ring, fed whatever the pipe gives.

A stdio server's stderr is its log (MCP 2025-11-25 and 2026-07-28, Transports,
stdio: "The server MAY write UTF-8 strings to its standard error (stderr) for
logging purposes"), and the place a server that cannot start says why.  The
driver that spawns it reads the pipe to its end, always (a pipe holds 64 KiB;
a server that writes more blocks until somebody reads), and feeds each chunk
here.  What is kept is bounded whatever the server writes: at most
``max_lines`` lines, each cut to ``max_line`` characters, and a partial line
of at most ``max_line`` bytes; older lines are dropped and counted.

Nothing here does I/O or reads a clock: ``feed(chunk, now)`` is given the
time, and the reader drains the pipe.  One ring belongs to one process; the
pool keeps one per instance (``mcpx logs SERVER``, ``GET
/v1/servers/{name}/log``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

__all__ = ["StderrLine", "StderrLog"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StderrLine:
    """One line the server wrote, without its newline; ``at`` when it was read (seconds, the feeder's clock)."""

    at: float
    text: str
    cut: bool = False  # longer than the ring keeps: the rest was dropped


class StderrLog:
    """The last ``max_lines`` lines of one process's stderr, and the exit code once it is known."""

    def __init__(self, *, max_lines: int = 200, max_line: int = 2000) -> None:
        if max_lines < 1 or max_line < 1:
            raise ValueError("max_lines and max_line are at least 1")
        self.max_lines = max_lines
        self.max_line = max_line
        self._lines: deque[StderrLine] = deque(maxlen=max_lines)
        self._partial = bytearray()
        self._partial_cut = False
        self._partial_at = 0.0
        self.dropped = 0  # lines that fell out of the ring
        self.bytes_read = 0
        self.exit_code: int | None = None  # set by the driver when the process has ended

    def feed(self, chunk: bytes, now: float) -> None:
        """Take what the pipe gave (any split; ``b""`` is nothing).  Call ``close`` when the pipe ends."""
        self.bytes_read += len(chunk)
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._take_partial(chunk[start:], now)
                return
            self._take_partial(chunk[start:end], now)
            self._end_line(now)
            start = end + 1

    def close(self, now: float) -> None:
        """The pipe ended: a last line without a newline is kept as a line."""
        if self._partial or self._partial_cut:
            self._end_line(now)

    def lines(self, last: int | None = None) -> list[StderrLine]:
        """The lines kept, oldest first (the ``last`` ones when given); a partial line is not among them."""
        kept = list(self._lines)
        return kept if last is None else kept[max(0, len(kept) - last) :]

    def tail(self, lines: int = 5, chars: int = 600) -> str:
        """The last few non-blank lines on one line (`` | `` between), at most ``chars`` characters."""
        texts = [line.text.strip() for line in self._lines if line.text.strip()]
        pending = self._partial.decode(errors="replace").strip()
        if pending:
            texts.append(pending)
        return " | ".join(texts[-lines:])[-chars:]

    def to_json(self, last: int | None = None) -> dict[str, Any]:
        """What ``GET /v1/servers/{name}/log`` shows of this process (see spec/gateway.md)."""
        shown = self.lines(last)
        return {
            "exitCode": self.exit_code,
            "lines": [line.text for line in shown],
            "times": [line.at for line in shown],
            "dropped": self.dropped + len(self._lines) - len(shown),
            "bytes": self.bytes_read,
        }

    def _take_partial(self, piece: bytes, now: float) -> None:
        if not piece:
            return
        if not self._partial and not self._partial_cut:
            self._partial_at = now
        room = self.max_line - len(self._partial)
        if len(piece) > room:
            self._partial_cut = True
            piece = piece[: max(0, room)]
        self._partial.extend(piece)

    def _end_line(self, now: float) -> None:
        at = self._partial_at if self._partial or self._partial_cut else now
        text = self._partial.decode(errors="replace").removesuffix("\r")
        if len(self._lines) == self.max_lines:
            self.dropped += 1
        self._lines.append(StderrLine(at=at, text=text, cut=self._partial_cut))
        self._partial.clear()
        self._partial_cut = False
