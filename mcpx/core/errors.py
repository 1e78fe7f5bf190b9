"""The two kinds of error in mcpx.core, and the JSON-RPC error codes MCP uses.

A ``LocalProtocolError`` means the caller of the core misused its API: the
machine's state is unchanged and the exception is for the programmer.  A
``RemoteProtocolError`` means the peer sent something the protocol does not
allow; it carries the JSON-RPC code (and the HTTP status a Streamable HTTP
binding should answer with) so that the mistake becomes an error reply on that
connection and nothing else, never an exception that escapes the driver
(after h11's ``error_status_hint``).

Error codes are those of each revision's schema (spec/revisions.md, "Error
codes"): the JSON-RPC 2.0 codes shared by every revision, ``-32002``
(resource not found, 2024-11-05 … 2025-11-25 only), and the 2026-07-28 codes
``-32020`` … ``-32022``.  Which revision may receive which code is data in
``revisions``; this module only names them.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "PARSE_ERROR",
    "RESOURCE_NOT_FOUND",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "URL_ELICITATION_REQUIRED",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002  # legacy revisions; 2026-07-28 uses -32602 with data.uri
URL_ELICITATION_REQUIRED = -32042  # 2025-11-25 only
HEADER_MISMATCH = -32020  # 2026-07-28
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021  # 2026-07-28
UNSUPPORTED_PROTOCOL_VERSION = -32022  # 2026-07-28


class ProtocolError(Exception):
    """Base class of the core's two error kinds."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class LocalProtocolError(ProtocolError):
    """The caller of the core asked for something the protocol forbids.

    The machine that raised it is left exactly as it was.
    """


class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol.

    ``code`` is the JSON-RPC error code to answer with, ``data`` the optional
    ``error.data`` member, and ``http_status`` the status a Streamable HTTP
    binding should use (400 unless the code says otherwise).
    """

    def __init__(
        self,
        message: str,
        *,
        code: int = INVALID_REQUEST,
        data: Any = None,
        http_status: int = 400,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.data = data
        self.http_status = http_status

    def to_error_object(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member for this error."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error
