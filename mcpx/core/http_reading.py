"""Reading an HTTP request, and sending it to the layer that serves its method and path.

A whole, plain request read in one chunk takes the plain path
(``_plain_request``: h11's grammar for HTTP/1.1 request lines and headers,
and nothing that changes how h11 frames the exchange); anything else is
h11's.  Every request is checked before it is served: ``Origin`` must be
loopback, the server's own address or allowed, and ``Host`` must name the
server, so DNS rebinding fails (403; every revision's Streamable HTTP page,
security warning); headers and body must arrive within
``request_timeout`` (408).
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import parse_qs, urlsplit

import h11

from .actions import Trace
from .errors import INTERNAL_ERROR
from .http_base import _LOOPBACK_HOSTS, _WILDCARDS, AppRequest, _Conn, _HttpError, _Out
from .http_legacy_sse import _LegacySse
from .http_streamable import _is_decimal
from .http_wire import buffered, header_map, holds_input, reason_phrase
from .revisions import Revision

# The plain path's grammar: h11's (its _abnf module: token, field-value, request-line) for
# HTTP/1.1 requests only.
_TOKEN: Final = r"[-!#$%&'*+.^_`|~0-9a-zA-Z]+"


_FIELD: Final = r"(" + _TOKEN + r"):[ \t]*((?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?)[ \t]*"


_PLAIN_REQUEST_LINE: Final = re.compile(_TOKEN + r" [\x21-\x7e]+ HTTP/1\.1", re.ASCII)


_PLAIN_HEADER: Final = re.compile(_FIELD, re.ASCII)


_PLAIN_HEADERS: Final = re.compile(r"(?:" + _FIELD + r"\r\n)*" + _FIELD, re.ASCII)


# Headers that change how h11 frames or keeps the exchange: a request with any goes to h11.
_H11_HEADERS: Final = frozenset({"transfer-encoding", "connection", "expect", "upgrade", "te", "trailer"})


def _valid_port(host: str) -> bool:
    """Whether ``host`` (a Host header) has no port, or a port of digits from 1 to 65535 (RFC 9110 §7.2)."""
    host = host.strip()
    end = host.rfind("]") if host.startswith("[") else -1
    rest = host[end + 1 :] if end >= 0 else host
    if end < 0 and rest.count(":") > 1:
        return True  # an unbracketed IPv6 address: _host_part takes it whole, and it names no server
    if ":" not in rest:
        return True
    port = rest.rsplit(":", 1)[1]
    return port.isascii() and port.isdigit() and 1 <= int(port) <= 65535


def _host_part(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class _Reading(_LegacySse):
    """The layer that reads requests, checks ``Origin`` and ``Host``, and routes them."""

    def _process(self, c: _Conn, now: float) -> None:
        # Pipelined requests are read by this loop, never by recursion: a
        # response finished inside it only starts the next cycle.
        if c.reading:
            return
        c.reading = True
        try:
            self._read_events(c, now)
        finally:
            c.reading = False

    def _read_events(self, c: _Conn, now: float) -> None:
        while not c.closed:
            if c.parser.their_state is h11.IDLE:
                c.buffered = buffered(c.parser)
            try:
                event = c.parser.next_event()
            except h11.RemoteProtocolError as exc:
                status = exc.error_status_hint if exc.error_status_hint >= 400 else 400
                message = self._too_large_headers() if status == 431 else f"malformed HTTP request: {exc}"
                self._refuse(c, _HttpError(status, message), close=True)
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                c.started_request = True
                c.method, c.target = event.method, event.target
                # h11 bounds only a header block still arriving; one that came
                # whole is measured here, in the same bytes h11 counts, so the
                # verdict does not depend on how the block was cut into reads.
                size = c.buffered - buffered(c.parser)
                if size > self.http.max_header_bytes:
                    self._refuse(c, _HttpError(431, self._too_large_headers()), close=True)
                    return
                c.headers = header_map(event.headers)
                c.body = bytearray()
                length = c.headers.get("content-length")
                if length is not None and _is_decimal(length) and int(length) > self.http.max_body:
                    self._refuse(
                        c, _HttpError(413, f"the body exceeds {self.http.max_body} bytes"), close=True
                    )
                    return
            elif isinstance(event, h11.Data):
                c.body += event.data
                if len(c.body) > self.http.max_body:
                    self._refuse(
                        c, _HttpError(413, f"the body exceeds {self.http.max_body} bytes"), close=True
                    )
                    return
            elif isinstance(event, h11.EndOfMessage):
                self._request_read(c, now)
                if c.out is not None:
                    # Answered later (the application's, or a stream): until then h11 has only
                    # PAUSED or NEED_DATA to give, and what arrives meanwhile (more bytes, the
                    # client's end) comes through receive_data, which reads again.
                    return
            elif isinstance(event, h11.ConnectionClosed):
                self._detach(c, now)
                self._close(c)
                return

    def _request_read(self, c: _Conn, now: float) -> None:
        """A whole request is in (``c.method``, ``target``, ``headers``, ``body``): answer or route it."""
        c.deadline = None
        try:
            self._route(c, now)
        except _HttpError as exc:
            self._refuse(c, exc)
        except Exception as exc:  # a bug here must cost one request, not the server
            self._actions.append(Trace(event="internal-error", detail={"error": repr(exc)}))
            self._refuse(
                c,
                _HttpError(500, f"internal error in mcpx: {type(exc).__name__}", code=INTERNAL_ERROR),
                close=True,
            )

    def _plain_request(self, c: _Conn, data: bytes) -> tuple[str, dict[str, str], int] | None:
        """``data`` as one whole plain request: (request line, headers, body start), or None for h11."""
        if holds_input(c.parser):
            return None
        end = data.find(b"\r\n\r\n")
        if end < 0 or end + 4 > self.http.max_header_bytes:
            return None
        head = data[:end].decode("latin-1")
        line, _, block = head.partition("\r\n")
        if not line.endswith(" HTTP/1.1") or _PLAIN_REQUEST_LINE.fullmatch(line) is None:
            return None
        if _PLAIN_HEADERS.fullmatch(block) is None:
            return None  # obs-fold, a bad byte, a bare CR or LF: h11 says what is wrong
        headers: dict[str, str] = {}
        for raw_name, value in _PLAIN_HEADER.findall(block):
            name = raw_name.lower()
            if name in _H11_HEADERS:
                return None
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        length = headers.get("content-length")
        host = headers.get("host")
        if (
            length is None
            or not _is_decimal(length)
            or len(length) > 20
            or host is None
            or "," in host  # two Host headers: h11 refuses them
            or int(length) > self.http.max_body
            or len(data) - end - 4 != int(length)
        ):
            return None
        return line, headers, end + 4

    def _read_plain(
        self, c: _Conn, data: bytes, request: tuple[str, dict[str, str], int], now: float
    ) -> None:
        line, headers, start = request
        method, _, rest = line.partition(" ")
        c.method, c.target = method.encode("latin-1"), rest[: -len(" HTTP/1.1")].encode("latin-1")
        c.headers = headers
        c.body = data[start:]
        c.plain = data
        c.reading = True  # as in _process: a response finished inside reads nothing
        try:
            self._request_read(c, now)
        finally:
            c.reading = False
        if c.plain is None and not c.closed and c.out is None and holds_input(c.parser):
            self._process(c, now)  # answered through h11, which holds more: read it

    def _hand_to_h11(self, c: _Conn) -> None:
        """The plain request on ``c`` needs h11 after all: feed it the request's bytes, as it would have had them."""
        raw, c.plain = c.plain, None
        assert raw is not None
        try:
            c.parser.receive_data(raw)
            while not isinstance(c.parser.next_event(), h11.EndOfMessage):
                pass
        except h11.ProtocolError as exc:  # never: the plain grammar is h11's
            self._actions.append(Trace(event="internal-error", detail={"error": repr(exc)}))
            self._close(c)

    def _route(self, c: _Conn, now: float) -> None:
        self._check_origin_and_host(c)
        raw = c.target
        query = ""
        if raw[:1] == b"/" and raw[:2] != b"//" and b"?" not in raw and b"#" not in raw:
            path = raw.decode("latin-1")  # a plain path (origin-form, no query): what urlsplit gives
        else:
            try:
                target = urlsplit(raw.decode("latin-1"))
            except ValueError:
                raise _HttpError(400, "the request target is not a valid URL; request /mcp") from None
            path, query = target.path, target.query
        method = c.method.decode("ascii", "replace")
        if path == self.http.mcp_path:
            if method == "POST":
                self._post(c, now)
            elif method == "GET":
                self._get(c, now)
            elif method == "DELETE":
                self._delete(c, now)
            else:
                raise _HttpError(
                    405, f"{method} is not supported here", headers=(("allow", "GET, POST, DELETE"),)
                )
        elif path == self.http.sse_path and self._serves_http_sse():
            if method != "GET":
                raise _HttpError(405, "the SSE endpoint takes GET", headers=(("allow", "GET"),))
            self._open_legacy_sse(c, now)
        elif path == self.http.messages_path and self._serves_http_sse():
            if method != "POST":
                raise _HttpError(405, "the message endpoint takes POST", headers=(("allow", "POST"),))
            self._post_legacy_sse(c, parse_qs(query), now)
        elif any(path == p or (p.endswith("/") and path.startswith(p)) for p in self.http.app_paths):
            c.out = _Out(conn=c.id, accept_sse=False)
            self._actions.append(
                AppRequest(
                    conn=c.id,
                    method=method,
                    target=c.target.decode("latin-1"),
                    headers=dict(c.headers),
                    body=bytes(c.body),
                )
            )
        else:
            raise _HttpError(404, f"no MCP endpoint at {path}; use {self.http.mcp_path}")

    def app_respond(
        self,
        conn: int,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """Answer an ``AppRequest`` in one piece (a no-op if the connection has gone)."""
        c = self._app_conn(conn)
        if c is None:
            return
        extra = (("content-type", content_type), ("content-length", str(len(body))), *headers)
        self._send(c, h11.Response(status_code=status, headers=list(extra), reason=reason_phrase(status)))
        if body:
            self._send(c, h11.Data(data=body))
        assert c.out is not None
        c.out.mode = "done"
        self._finish_response(c)

    def app_respond_start(
        self, conn: int, status: int, *, content_type: str, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        """Begin a streamed answer to an ``AppRequest``; ``app_respond_data`` then ``app_respond_end`` follow."""
        c = self._app_conn(conn)
        if c is None:
            return
        extra = (("content-type", content_type), ("cache-control", "no-cache"), *headers)
        self._send(c, h11.Response(status_code=status, headers=list(extra), reason=reason_phrase(status)))
        assert c.out is not None
        c.out.mode = "app-stream"

    def app_respond_data(self, conn: int, data: bytes) -> None:
        c = self._conns.get(conn)
        if c is not None and c.out is not None and c.out.mode == "app-stream" and data:
            self._write(c, data)

    def app_respond_end(self, conn: int) -> None:
        c = self._conns.get(conn)
        if c is None or c.closed or c.out is None or c.out.mode != "app-stream":
            return
        c.out.mode = "done"
        self._finish_response(c)

    def _app_conn(self, conn: int) -> _Conn | None:
        c = self._conns.get(conn)
        if c is None or c.closed or c.out is None or c.out.mode != "pending":
            return None
        if c.plain is not None:
            self._hand_to_h11(c)
        if c.closed or c.parser.our_state is not h11.SEND_RESPONSE:
            return None
        return c

    def _too_large_headers(self) -> str:
        return (
            f"the request's headers exceed {self.http.max_header_bytes} bytes "
            "(transport.maxHeaderBytes); send fewer or smaller headers"
        )

    def _serves_http_sse(self) -> bool:
        return Revision.V2024_11_05 in self.config.revisions

    def _check_origin_and_host(self, c: _Conn) -> None:
        # Repeated headers arrive joined with ", " (_headers); neither an origin nor a host holds a
        # comma, so a comma is two headers (or a list in one): which one would the check have seen?
        origin = c.headers.get("origin")
        if origin is not None:
            if "," in origin:
                raise _HttpError(400, f"one Origin, once: got {origin!r}")
            if not self._origin_allowed(origin):
                raise _HttpError(403, f"Origin {origin!r} is not allowed; add it to transport.allowedOrigins")
        host = c.headers.get("host")
        if host is None:
            raise _HttpError(403, "a request must name this server in a Host header")
        if "," in host:
            raise _HttpError(400, f"one Host, once: got {host!r}")
        if not _valid_port(host):
            raise _HttpError(400, f"Host {host!r} is not host[:port] with a port from 1 to 65535")
        if _host_part(host) not in self._allowed_hosts:
            raise _HttpError(
                403, f"Host {host!r} does not name this server; add it to transport.allowedHosts"
            )

    def _origin_allowed(self, origin: str) -> bool:
        if origin in self.http.allowed_origins:
            return True
        try:
            parts = urlsplit(origin)
            hostname = parts.hostname
        except ValueError:
            return False  # not a URL at all
        if parts.scheme not in ("http", "https") or not hostname:
            return False
        try:
            port = parts.port  # a port that is not a number from 0 to 65535 raises
        except ValueError:
            return False
        if port == 0 or parts.netloc.endswith(":"):
            return False  # "http://localhost:0", "http://localhost:": no origin a browser sends
        hostname = hostname.lower()
        bound = self.http.bound_host.lower().strip("[]")
        return hostname in _LOOPBACK_HOSTS or (bound not in _WILDCARDS and hostname == bound)
