"""What the HTTP bindings share, server and clients alike: the two connection actions and h11 helpers.

The server binding (``http_server.py``: Streamable HTTP and HTTP+SSE) and the
client bindings (``http_client.py``: Streamable HTTP; ``sse_client.py``:
the 2024-11-05 HTTP+SSE transport) each drive one ``h11.Connection`` per
connection, and each asks its driver for the same two things, in the same
words: write these bytes on connection ``conn`` (``SendBytes``), close it
(``CloseConnection``).  Neither side imports the other; both import this.
The MCP revisions' transport pages (2025-03-26 onwards: Streamable HTTP;
2024-11-05: HTTP with SSE) say nothing about HTTP/1.1 itself, which is
RFC 9112's: header names are case-insensitive, and a field sent twice is
one field whose values are joined with commas (RFC 9110 §5.3).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus

import h11

__all__ = ["CloseConnection", "SendBytes", "buffered", "header_map", "holds_input", "reason_phrase"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SendBytes:
    """Write ``data`` on connection ``conn``."""

    conn: int
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseConnection:
    """Close connection ``conn``: nothing more is written to it or read from it."""

    conn: int


def header_map(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header fields by lower-cased name; a field sent more than once is its values joined by ``", "``."""
    out: dict[str, str] = {}
    # h11's Headers is a Sequence: iterating it goes through the ABC item by item; its raw_items is a list.
    raw_items = getattr(raw, "raw_items", None)
    for name, value in raw if raw_items is None else raw_items():
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        out[key] = f"{out[key]}, {text}" if key in out else text
    return out


_REASONS: dict[int, bytes] = {}


def reason_phrase(status: int) -> bytes:
    """The standard reason phrase of ``status`` (``b""`` for a code with none), kept once looked up."""
    reason = _REASONS.get(status)
    if reason is None:
        try:
            reason = HTTPStatus(status).phrase.encode()
        except ValueError:
            reason = b""
        _REASONS[status] = reason
    return reason


def buffered(parser: h11.Connection) -> int:
    """How many received bytes h11 holds unparsed."""
    buffer = getattr(parser, "_receive_buffer", None)  # h11 keeps no public length of it
    if buffer is not None:
        return len(buffer)
    return len(parser.trailing_data[0])


def holds_input(parser: h11.Connection) -> bool:
    """Whether h11 holds received bytes or the peer's end, not yet read as events."""
    buffer = getattr(parser, "_receive_buffer", None)  # as in buffered: h11 keeps no public length
    if buffer is None:
        data, closed = parser.trailing_data
        return bool(data) or closed
    return bool(buffer) or bool(getattr(parser, "_receive_buffer_closed", True))
