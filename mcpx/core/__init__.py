"""mcpx.core: the MCP protocol as pure state machines.

Nothing in this package performs I/O, reads a clock or draws randomness:
bytes and events go in, actions come out, time comes in as ``now``
(STYLE.md §1).  ``tests/unit/test_core_purity.py`` fails if a module here
imports asyncio, trio, anyio, socket, subprocess, threading, time or logging.

The public surface is this module's ``__all__``; the underscore modules are
private and may change.
"""

from ._actions import (
    Action,
    Answered,
    CancelRequest,
    Close,
    EndStream,
    HandleRequest,
    PeerReplied,
    RequestContext,
    Send,
    SuspendStream,
    Trace,
)
from ._downgrade import Ages, downgrade, downgrade_error, envelope
from ._errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    RESOURCE_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    URL_ELICITATION_REQUIRED,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
)
from ._framing import DEFAULT_MAX_LINE, EndOfInput, Line, LineReader, LineTooLong
from ._http import CloseConnection, HttpConfig, HttpServer, SendBytes, http_status_for
from ._jsonrpc import (
    ErrorResponse,
    InvalidMessage,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    decode,
    encode,
    parse_message,
)
from ._policy import AtOrAfter, Before, Between, Only, SpecPolicy
from ._revisions import (
    LEGACY_REVISIONS,
    LOG_LEVELS,
    MODERN_REVISIONS,
    NEWEST,
    OLDEST,
    REVISIONS,
    Era,
    Revision,
    parse_revision,
)
from ._rounds import Question, RoundTable
from ._session import ConnectionState, ServerConfig, ServerSession
from ._sse import SseDecoder, SseEvent, comment, encode_event
from ._stdio import StdioServerConnection
from ._tasks import Task, TaskStore

__all__ = [
    "DEFAULT_MAX_LINE",
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LEGACY_REVISIONS",
    "LOG_LEVELS",
    "METHOD_NOT_FOUND",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "MODERN_REVISIONS",
    "NEWEST",
    "OLDEST",
    "PARSE_ERROR",
    "RESOURCE_NOT_FOUND",
    "REVISIONS",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "URL_ELICITATION_REQUIRED",
    "Action",
    "Ages",
    "Answered",
    "AtOrAfter",
    "Before",
    "Between",
    "CancelRequest",
    "Close",
    "CloseConnection",
    "ConnectionState",
    "EndOfInput",
    "EndStream",
    "Era",
    "ErrorResponse",
    "HandleRequest",
    "HttpConfig",
    "HttpServer",
    "InvalidMessage",
    "Line",
    "LineReader",
    "LineTooLong",
    "LocalProtocolError",
    "Message",
    "Notification",
    "Only",
    "PeerReplied",
    "ProtocolError",
    "Question",
    "RemoteProtocolError",
    "Request",
    "RequestContext",
    "RequestId",
    "Response",
    "Revision",
    "RoundTable",
    "Send",
    "SendBytes",
    "ServerConfig",
    "ServerSession",
    "SpecPolicy",
    "SseDecoder",
    "SseEvent",
    "StdioServerConnection",
    "SuspendStream",
    "Task",
    "TaskStore",
    "Trace",
    "comment",
    "decode",
    "downgrade",
    "downgrade_error",
    "encode",
    "encode_event",
    "envelope",
    "http_status_for",
    "parse_message",
    "parse_revision",
]
