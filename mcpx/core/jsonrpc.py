"""JSON-RPC 2.0 messages as MCP uses them, on orjson.

Four message kinds — ``Request``, ``Notification``, ``Response``,
``ErrorResponse`` — as frozen, slotted, keyword-only dataclasses validated
when built, never filled in later.  ``decode`` turns bytes into JSON
(``-32700`` on failure); ``parse_message`` turns JSON into one message or
raises ``InvalidMessage`` carrying the code and, when it could be read, the
request id to answer with.  ``encode`` serialises a message.

Reading rules (JSON-RPC 2.0; basic/index from 2025-03-26 on, 2024-11-05
basic/messages; spec/messages.md §1):

* ``jsonrpc`` must be ``"2.0"``; a request id is a string or an integer, never
  ``null``, a float or a boolean.
* ``params`` is an object; ``"params": null`` is read as absent.
* Members the envelope does not define are kept in ``extra`` and written back
  by ``encode``: mcpx forwards its own re-serialisation of what it parsed,
  never the bytes it received, so a message has exactly one reading.  For the
  same reason a member whose name differs from an envelope member only in
  case (``"Method"`` beside or instead of ``"method"``) is refused: another
  parser might read it as the envelope member.  Duplicate keys are resolved
  by the parser once (orjson keeps the last) and never forwarded as
  duplicates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeGuard

import orjson

from .drafts import builder
from .errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, RemoteProtocolError

__all__ = [
    "ErrorResponse",
    "InvalidMessage",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "decode",
    "encode",
    "encode_batch",
    "is_request_id",
    "parse_message",
]

RequestId = str | int
_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})
_ENVELOPE: Final = frozenset({"jsonrpc", "id", "method", "params", "result", "error"})
_ENVELOPE_FOLDED: Final = {name.casefold(): name for name in _ENVELOPE}


def is_request_id(value: object) -> TypeGuard[RequestId]:
    """A JSON-RPC id MCP accepts: a string or an integer (``bool`` is not one)."""
    return type(value) is str or type(value) is int


class InvalidMessage(RemoteProtocolError):
    """A frame that is JSON but not a message MCP accepts.

    ``request_id`` is the id to answer with, or ``None`` when it could not be
    read (the error then goes out with ``"id": null``, JSON-RPC 2.0 §5).
    """

    def __init__(self, message: str, *, code: int = INVALID_REQUEST, request_id: RequestId | None = None):
        super().__init__(message, code=code)
        self.request_id = request_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    id: RequestId
    method: str
    params: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not is_request_id(self.id):
            raise ValueError(f"request id must be a string or an integer, not {self.id!r}")
        if not isinstance(self.method, str):
            raise ValueError("method must be a string")

    @property
    def meta(self) -> Mapping[str, Any]:
        """``params._meta`` when it is an object, else an empty mapping."""
        if self.params is not None:
            meta = self.params.get("_meta")
            if isinstance(meta, dict):
                return meta
        return _EMPTY

    def reply(self, result: Mapping[str, Any]) -> Response:
        return Response(id=self.id, result=result)

    def reply_error(self, code: int, message: str, data: Any = None) -> ErrorResponse:
        return ErrorResponse(id=self.id, code=code, message=message, data=data)

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"jsonrpc": "2.0", "id": self.id, "method": self.method}
        if self.params is not None:
            obj["params"] = self.params
        if self.extra:
            obj.update(self.extra)
        return obj


@dataclass(frozen=True, slots=True, kw_only=True)
class Notification:
    method: str
    params: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not isinstance(self.method, str):
            raise ValueError("method must be a string")

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"jsonrpc": "2.0", "method": self.method}
        if self.params is not None:
            obj["params"] = self.params
        if self.extra:
            obj.update(self.extra)
        return obj


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    id: RequestId
    result: Mapping[str, Any]
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not is_request_id(self.id):
            raise ValueError(f"response id must be a string or an integer, not {self.id!r}")

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"jsonrpc": "2.0", "id": self.id, "result": self.result}
        if self.extra:
            obj.update(self.extra)
        return obj


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorResponse:
    id: RequestId | None
    code: int
    message: str
    data: Any = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if self.id is not None and not is_request_id(self.id):
            raise ValueError(f"error id must be a string, an integer or None, not {self.id!r}")
        if type(self.code) is not int:
            raise ValueError("error code must be an integer")

    def error_object(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"jsonrpc": "2.0", "id": self.id, "error": self.error_object()}
        if self.extra:
            obj.update(self.extra)
        return obj


Message = Request | Notification | Response | ErrorResponse


def decode(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON text; ``RemoteProtocolError(-32700)`` if it is not JSON.

    A message whose JSON-RPC member appears twice is ``-32600``
    (``repeated_member``): a parser keeps one of the two, and the checks
    must not judge one value while another is served.
    """
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise parse_error(exc) from None
    if type(obj) is dict:
        repeated = repeated_member(data, obj)
        if repeated is not None:
            raise repeated_error(repeated)
    return obj


def parse_error(exc: orjson.JSONDecodeError) -> RemoteProtocolError:
    """What ``decode`` raises for text that is not JSON."""
    return RemoteProtocolError(f"Parse error: {exc}", code=PARSE_ERROR)


def repeated_error(member: str) -> RemoteProtocolError:
    """What ``decode`` raises for a message that names JSON-RPC member ``member`` twice."""
    return RemoteProtocolError(
        f"Invalid Request: member {member!r} appears more than once in the message", code=INVALID_REQUEST
    )


_MEMBERS = ("jsonrpc", "id", "method", "params", "result", "error")  # counted, quoted, in repeated_member


def repeated_member(
    data: bytes | bytearray | memoryview | str, parsed: Mapping[str, Any] | None = None
) -> str | None:
    """The JSON-RPC member a JSON object's text names twice at its top level, else ``None``.

    The usual message names each once, which a count of the quoted names
    shows; only text that names one twice anywhere (``"id"`` inside a
    tool's arguments, say) is parsed again, keeping every key, to look at
    the top level alone.  ``parsed`` is the object the text decodes to, when
    the caller has it: a member named twice at the top level is one of its
    keys (the parser keeps one of the two), so only those are counted — a
    request's four names, not all six.
    """
    raw = data if type(data) is bytes else data.encode() if isinstance(data, str) else bytes(data)
    count = raw.count  # a few scans of a short text: this runs for every message
    if parsed is not None:
        if (
            ("id" not in parsed or count(b'"id"') < 2)
            and ("method" not in parsed or count(b'"method"') < 2)
            and ("params" not in parsed or count(b'"params"') < 2)
            and ("jsonrpc" not in parsed or count(b'"jsonrpc"') < 2)
            and ("result" not in parsed or count(b'"result"') < 2)
            and ("error" not in parsed or count(b'"error"') < 2)
        ):
            return None
    elif (
        count(b'"id"') < 2
        and count(b'"method"') < 2
        and count(b'"params"') < 2
        and count(b'"jsonrpc"') < 2
        and count(b'"result"') < 2
        and count(b'"error"') < 2
    ):
        return None
    levels: list[list[str]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        levels.append([key for key, _ in items])
        return dict(items)

    try:
        json.loads(raw, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None  # orjson read it; whatever this parser makes of it, judge it as orjson did
    if not levels:
        return None
    top = levels[-1]  # the hook sees the outermost object last
    return next((name for name in _MEMBERS if top.count(name) > 1), None)


def encode(message: Message) -> bytes:
    """Serialise one message (no trailing newline)."""
    return orjson.dumps(message.to_obj())


def encode_batch(messages: list[Message]) -> bytes:
    return orjson.dumps([m.to_obj() for m in messages])


def _readable_id(obj: Mapping[str, Any]) -> RequestId | None:
    value = obj.get("id")
    return value if is_request_id(value) else None


# What parse_message builds, already validated: without __init__ (mcpx/core/drafts.py).
_request = builder(Request)
_response = builder(Response)


def parse_message(obj: Any) -> Message:
    """Classify one decoded JSON value as a message, or raise ``InvalidMessage``."""
    if not isinstance(obj, dict):
        raise InvalidMessage("Invalid Request: a JSON-RPC message must be a JSON object")
    extra: dict[str, Any] | None = None
    for key in obj:
        if key in _ENVELOPE:
            continue
        folded = _ENVELOPE_FOLDED.get(key.casefold())
        if folded is not None:
            raise InvalidMessage(
                f"Invalid Request: member {key!r} differs from the JSON-RPC member {folded!r} only in case",
                request_id=_readable_id(obj),
            )
        if extra is None:
            extra = {}
        extra[key] = obj[key]
    frozen_extra: Mapping[str, Any] = extra if extra is not None else _EMPTY
    if obj.get("jsonrpc") != "2.0":
        raise InvalidMessage('Invalid Request: "jsonrpc" must be "2.0"', request_id=_readable_id(obj))

    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str) or not method:
            raise InvalidMessage(
                'Invalid Request: "method" must be a non-empty string', request_id=_readable_id(obj)
            )
        params = obj.get("params")
        if params is not None and not isinstance(params, dict):
            raise InvalidMessage(
                'Invalid params: "params" must be an object',
                code=INVALID_PARAMS,
                request_id=_readable_id(obj),
            )
        if "id" not in obj:
            return Notification(method=method, params=params, extra=frozen_extra)
        request_id = obj["id"]
        if not is_request_id(request_id):
            raise InvalidMessage("Invalid Request: a request id must be a string or an integer")
        return _request(id=request_id, method=method, params=params, extra=frozen_extra)

    has_result = "result" in obj
    has_error = "error" in obj
    if has_result == has_error:
        raise InvalidMessage(
            'Invalid Request: a message needs "method", or exactly one of "result" and "error"',
            request_id=_readable_id(obj),
        )
    response_id = obj.get("id")
    if has_result:
        result = obj["result"]
        if not is_request_id(response_id):
            raise InvalidMessage("Invalid Request: a response id must be a string or an integer")
        if not isinstance(result, dict):
            raise InvalidMessage('Invalid Request: "result" must be an object', request_id=_readable_id(obj))
        return _response(id=response_id, result=result, extra=frozen_extra)
    error = obj["error"]
    if (
        not isinstance(error, dict)
        or type(error.get("code")) is not int
        or not isinstance(error.get("message"), str)
    ):
        raise InvalidMessage(
            'Invalid Request: "error" must be an object with an integer "code" and a string "message"',
            request_id=_readable_id(obj),
        )
    if response_id is not None and not is_request_id(response_id):
        raise InvalidMessage("Invalid Request: a response id must be a string, an integer or null")
    return ErrorResponse(
        id=response_id,
        code=error["code"],
        message=error["message"],
        data=error.get("data"),
        extra=frozen_extra,
    )
