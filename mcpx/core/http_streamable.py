"""Streamable HTTP: POST, GET and DELETE on the MCP endpoint, in both eras.

A legacy ``initialize`` mints ``Mcp-Session-Id``; other legacy requests
name their session (404 for one unknown or ended); a 2026-07-28 request
names none and must restate ``MCP-Protocol-Version``, ``Mcp-Method``,
``Mcp-Name`` and its ``Mcp-Param-*`` headers, which must agree with the
body (-32020, 400; 2026-07-28 basic/transports/streamable-http).  GET opens
a legacy session's stream for what the server pushes, or resumes one by
``Last-Event-ID``; DELETE ends a session.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from .errors import HEADER_MISMATCH, INVALID_REQUEST, PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION
from .http_base import HEADERLESS, _Conn, _HttpError, _HttpSession, _Out, _Stream
from .http_sessions import _Sessions
from .jsonrpc import RequestId, repeated_member
from .revisions import META_PROTOCOL_VERSION, REVISIONS, Revision

_NAME_PARAM: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


_BASE64_VALUE: Final = re.compile(r"=\?base64\?([A-Za-z0-9+/=]*)\?=\Z")


def _id_of(body: Any) -> RequestId | None:
    if isinstance(body, dict):
        value = body.get("id")
        if type(value) in (str, int):
            return value
    return None


def _has_listen(body: Any) -> bool:
    items = body if isinstance(body, list) else [body]
    return any(isinstance(m, dict) and m.get("method") == "subscriptions/listen" and "id" in m for m in items)


def _is_decimal(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts ``²`` and other digits ``int`` refuses."""
    return text.isascii() and text.isdigit()


def _is_initialize(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and body.get("method") == "initialize"
        and "id" in body
        and not _looks_modern(body)
    )


def _looks_modern(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    params = body.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta


def _decode_header_value(raw: str) -> str | None:
    """A header value as the client meant it: ``=?base64?…?=`` decoded; None if invalid."""
    value = raw.strip()
    match = _BASE64_VALUE.match(value)
    if match:
        try:
            return base64.b64decode(match.group(1), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    if any(ord(ch) < 0x20 or ord(ch) > 0x7E for ch in value):
        return None
    return value


def _param_matches(header: str, value: Any) -> bool:
    if isinstance(value, bool):
        return header == ("true" if value else "false")
    if isinstance(value, int):
        try:
            return int(header) == value
        except ValueError:
            return False
    if isinstance(value, str):
        return header == value
    return False


class _Streamable(_Sessions):
    """The layer of POST, GET and DELETE on the MCP endpoint."""

    def _post(self, c: _Conn, now: float) -> None:
        content_type = c.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            raise _HttpError(415, "a POST body must be JSON (Content-Type: application/json)")
        accept = c.headers.get("accept", "")
        accept_sse = "text/event-stream" in accept or "*/*" in accept
        try:
            body = orjson.loads(c.body)
        except orjson.JSONDecodeError as exc:
            raise _HttpError(400, f"Parse error: {exc}", code=PARSE_ERROR) from None
        repeated = repeated_member(c.body) if type(body) is dict else None
        if repeated is not None:  # which of the two would the checks below have judged?
            raise _HttpError(
                400,
                f"Invalid Request: member {repeated!r} appears more than once in the message",
                code=INVALID_REQUEST,
            )
        if not accept_sse and _has_listen(body):
            raise _HttpError(
                406,
                "subscriptions/listen is answered on an event stream; send Accept: text/event-stream",
                request_id=_id_of(body),
            )
        version_header = c.headers.get("mcp-protocol-version")
        header_rev = self._header_revision(version_header, body)
        if header_rev is not None and header_rev.is_modern:
            self._post_modern(c, body, accept_sse, now)
            return
        if _looks_modern(body):
            raise _HttpError(
                400,
                "a request with 2026-07-28 _meta needs the MCP-Protocol-Version header to match it",
                code=HEADER_MISMATCH,
                request_id=_id_of(body),
            )
        session_id = c.headers.get("mcp-session-id")
        params = body.get("params") if isinstance(body, dict) else None
        if (
            _is_initialize(body)
            and isinstance(params, dict)
            and isinstance(params.get("protocolVersion"), str)
        ):
            self._initialize(c, body, accept_sse, now)
            return
        if session_id is not None:
            hs = self._sessions.get(session_id)
            if hs is None or hs.legacy_sse:
                raise _HttpError(
                    404,
                    "unknown or terminated session; send initialize without Mcp-Session-Id",
                    request_id=_id_of(body),
                )
            negotiated = hs.session.negotiated_revision
            if header_rev is not None and negotiated is not None and header_rev != negotiated:
                raise _HttpError(
                    400,
                    f"this session negotiated {negotiated}, but MCP-Protocol-Version says {header_rev}",
                    request_id=_id_of(body),
                )
            hs.last_active = now
            stream = self._new_stream(hs, "post", resumable=True)
            self._feed(c, hs.session, body, stream, None, accept_sse, ())
            return
        stream = self._new_stream(None, "post", resumable=False)
        self._feed(
            c, self._ephemeral_session(stream, c), body, stream, header_rev or HEADERLESS, accept_sse, ()
        )

    def _header_revision(self, value: str | None, body: Any) -> Revision | None:
        if value is None:
            return None
        value = value.strip()
        if value in REVISIONS and Revision(value) in self.config.revisions:
            return Revision(value)
        supported = [str(r) for r in self._modern]
        raise _HttpError(
            400,
            f"Unsupported protocol version {value!r} in MCP-Protocol-Version; this server speaks "
            f"{', '.join(str(r) for r in self.config.revisions)}",
            code=UNSUPPORTED_PROTOCOL_VERSION,
            data={"supported": supported, "requested": value},
            request_id=_id_of(body),
        )

    def _initialize(self, c: _Conn, body: Any, accept_sse: bool, now: float) -> None:
        if len(self._sessions) >= self.http.max_sessions and not self._evict_idle():
            raise _HttpError(503, "too many open sessions; try again later", request_id=_id_of(body))
        hs = self._open_session(now, legacy_sse=False)
        stream = self._new_stream(hs, "post", resumable=True)
        self._feed(c, hs.session, body, stream, None, accept_sse, (("mcp-session-id", hs.id),))
        if hs.session.negotiated_revision is None:  # refused: no session after all
            self._forget_session(hs)

    def _post_modern(self, c: _Conn, body: Any, accept_sse: bool, now: float) -> None:
        if not isinstance(body, dict):
            raise _HttpError(400, "a 2026-07-28 POST carries one JSON-RPC request or notification")
        self._check_modern_headers(c, body)
        stream = self._new_stream(None, "post", resumable=False, modern=True)
        self._feed(
            c,
            self._ephemeral_session(stream, c),
            body,
            stream,
            Revision.V2026_07_28,
            accept_sse,
            (),
            status_by_code=True,
        )

    def _check_modern_headers(self, c: _Conn, body: dict[str, Any]) -> None:
        """2026-07-28 header/body agreement; -32020 and 400 on any mismatch."""
        request_id = _id_of(body)

        def mismatch(message: str) -> _HttpError:
            return _HttpError(400, message, code=HEADER_MISMATCH, request_id=request_id)

        method = body.get("method")
        raw_params = body.get("params")
        params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
        header_version = c.headers["mcp-protocol-version"].strip()
        raw_meta = params.get("_meta")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        meta_version = meta.get(META_PROTOCOL_VERSION)
        if meta_version is not None and meta_version != header_version:
            raise mismatch(f"MCP-Protocol-Version {header_version!r} does not match _meta's {meta_version!r}")
        if "id" not in body:
            return  # notifications: header rules are not defined for them
        header_method = c.headers.get("mcp-method")
        if header_method is None:
            raise mismatch("the Mcp-Method header is required on every 2026-07-28 request")
        if header_method.strip() != method:
            raise mismatch(
                f"Mcp-Method {header_method.strip()!r} does not match the body's method {method!r}"
            )
        name_param = _NAME_PARAM.get(method) if isinstance(method, str) else None
        header_name = c.headers.get("mcp-name")
        if name_param is not None:
            value = params.get(name_param)
            if header_name is None:
                raise mismatch(
                    f"the Mcp-Name header is required on {method} (it carries params.{name_param})"
                )
            decoded = _decode_header_value(header_name)
            if decoded is None:
                raise mismatch("Mcp-Name is not a valid value (bad characters or base64)")
            if decoded != value:
                raise mismatch(f"Mcp-Name {decoded!r} does not match params.{name_param} {value!r}")
        if method == "tools/call" and self.config.tools is not None and isinstance(params.get("name"), str):
            self._check_param_headers(c, params, mismatch)

    def _check_param_headers(
        self, c: _Conn, params: Mapping[str, Any], mismatch: Callable[[str], _HttpError]
    ) -> None:
        assert self.config.tools is not None
        mapping = self.config.tools.header_params.get(params["name"], {})
        raw_arguments = params.get("arguments")
        arguments: dict[str, Any] = raw_arguments if isinstance(raw_arguments, dict) else {}
        for argument, header in mapping.items():
            raw = c.headers.get("mcp-param-" + header.lower())
            value = arguments.get(argument)
            if value is None:
                if raw is not None:
                    raise mismatch(f"Mcp-Param-{header} is sent but {argument} is not in the arguments")
                continue
            if raw is None:
                raise mismatch(f"Mcp-Param-{header} is required: the arguments carry {argument}")
            decoded = _decode_header_value(raw)
            if decoded is None:
                raise mismatch(f"Mcp-Param-{header} is not a valid value (bad characters or base64)")
            if not _param_matches(decoded, value):
                raise mismatch(f"Mcp-Param-{header} {decoded!r} does not match argument {argument} {value!r}")

    def _get(self, c: _Conn, now: float) -> None:
        session_id = c.headers.get("mcp-session-id")
        if session_id is None:
            raise _HttpError(
                405,
                "GET needs a legacy session (Mcp-Session-Id); 2026-07-28 has no GET stream, use subscriptions/listen",
                headers=(("allow", "POST"),),
            )
        hs = self._sessions.get(session_id)
        if hs is None or hs.legacy_sse:
            raise _HttpError(404, "unknown or terminated session; send initialize without Mcp-Session-Id")
        if "text/event-stream" not in c.headers.get("accept", ""):
            raise _HttpError(406, "a GET stream is text/event-stream; send Accept: text/event-stream")
        hs.last_active = now
        last = c.headers.get("last-event-id")
        if last is not None:
            stream, after = self._stream_for_event_id(hs, last)
        else:
            if hs.standalone is None:
                hs.standalone = self._new_stream(hs, "get", resumable=True)
            stream, after = hs.standalone, None
            if stream.out is not None:
                raise _HttpError(409, "this session's GET stream is already open")
        if stream.out is not None:  # resuming a stream another connection still holds: take it over
            self._end_response(stream.out, close=True)
        out = _Out(conn=c.id, accept_sse=True, stream=stream, keepalive_at=now + self.http.sse_keepalive)
        self._arm_conn(c, now + self.http.sse_keepalive, "keepalive")
        c.out = out
        stream.out = out
        self._start_sse(c, out, prime=after is None)
        for seq, frame in list(stream.buffer):
            if after is None or seq > after:
                self._write(c, frame)
        if stream.done and stream.kind == "post":
            self._end_response(out)

    def _stream_for_event_id(self, hs: _HttpSession, event_id: str) -> tuple[_Stream, int]:
        key_text, _, seq_text = event_id.strip().partition("-")
        if not (_is_decimal(key_text) and _is_decimal(seq_text)):
            raise _HttpError(400, f"Last-Event-ID {event_id!r} is not an event id this server issued")
        stream = hs.streams.get(int(key_text))
        if stream is None:
            raise _HttpError(404, f"Last-Event-ID {event_id!r} names no stream of this session")
        return stream, int(seq_text)

    def _delete(self, c: _Conn, now: float) -> None:
        session_id = c.headers.get("mcp-session-id")
        if session_id is None:
            raise _HttpError(
                405, "DELETE ends a legacy session; name it with Mcp-Session-Id", headers=(("allow", "POST"),)
            )
        hs = self._sessions.get(session_id)
        if hs is None or hs.legacy_sse:
            raise _HttpError(404, "unknown or terminated session")
        self._end_session(hs, "deleted")
        self._respond_plain(c, 200, b"")
