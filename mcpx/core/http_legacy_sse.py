"""The 2024-11-05 HTTP+SSE transport (2024-11-05 basic/transports, "HTTP with SSE").

A GET on ``sse_path`` opens the session's stream, whose first event,
``endpoint``, names ``messages_path?session_id=…``; messages POSTed there
get 202 and their answers go down the stream.  Losing the stream ends the
session.
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from .errors import PARSE_ERROR
from .http_base import _Conn, _HttpError, _Out
from .http_streamable import _Streamable
from .jsonrpc import ErrorResponse
from .sse import encode_event


def _accepts_event_stream(accept: str) -> bool:
    """Whether an Accept header admits ``text/event-stream`` (the type itself, ``text/*`` or ``*/*``)."""
    for item in accept.split(","):
        media, _, params = item.partition(";")
        if media.strip().lower() in ("text/event-stream", "text/*", "*/*"):
            q = next(
                (p.split("=", 1)[1] for p in params.split(";") if p.strip().lower().startswith("q=")), "1"
            )
            try:
                if float(q) > 0:
                    return True
            except ValueError:
                continue
    return False


class _LegacySse(_Streamable):
    """The layer of the 2024-11-05 HTTP+SSE transport."""

    def _open_legacy_sse(self, c: _Conn, now: float) -> None:
        # 2024-11-05 asks nothing of the client's Accept here: any range that
        # covers text/event-stream will do (curl sends */*).
        if not _accepts_event_stream(c.headers.get("accept", "text/event-stream")):
            raise _HttpError(
                406, "the SSE endpoint answers text/event-stream; send Accept: text/event-stream"
            )
        if len(self._sessions) >= self.http.max_sessions and not self._evict_idle():
            raise _HttpError(503, "too many open sessions; try again later")
        hs = self._open_session(now, legacy_sse=True)
        stream = hs.standalone = self._new_stream(hs, "legacy-sse", resumable=False)
        out = _Out(conn=c.id, accept_sse=True, stream=stream, keepalive_at=now + self.http.sse_keepalive)
        self._arm_conn(c, now + self.http.sse_keepalive, "keepalive")
        c.out = out
        stream.out = out
        self._start_sse(c, out, prime=False)
        endpoint = f"{self.http.messages_path}?session_id={hs.id}"
        self._write(c, encode_event(endpoint.encode(), event="endpoint"))

    def _post_legacy_sse(self, c: _Conn, query: Mapping[str, list[str]], now: float) -> None:
        content_type = c.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            raise _HttpError(415, "a POST body must be JSON (Content-Type: application/json)")
        ids = query.get("session_id") or query.get("sessionId") or []
        hs = self._sessions.get(ids[0]) if ids else None
        if hs is None or not hs.legacy_sse or hs.standalone is None:
            raise _HttpError(404, "unknown session; open the SSE endpoint first")
        hs.last_active = now
        raw = bytes(c.body)  # before the 202: answering may start the next pipelined request
        self._respond_plain(c, 202, b"")
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            body = None
            error = ErrorResponse(id=None, code=PARSE_ERROR, message=f"Parse error: {exc}").to_obj()
            self._deliver(hs.standalone, orjson.dumps(error), final=False, error_code=PARSE_ERROR)
        if body is not None:
            hs.session.receive_json(body, stream=hs.standalone.key, now=self._now)
            self._pump(hs.session)
