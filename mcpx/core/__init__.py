"""mcpx.core: the MCP protocol as pure state machines.

Nothing in this package performs I/O, reads a clock or draws randomness:
bytes and events go in, actions come out, time comes in as ``now`` and a
machine says when it next wants to be woken.  ``tests/unit/test_core_purity.py``
fails if a module here imports asyncio, trio, anyio, socket, subprocess,
threading, time, logging, os, sys, secrets or uuid.

The face of the package is this module's ``__all__``: the machines, their
configurations, the events they take and the actions they give, the errors
(with a named constant for every JSON-RPC error code mcpx uses) and
``Revision``, the value every machine is configured with.  Everything else
lives in a named submodule, one per subject, with names that pair up:

=====================  ======================================================
``server_session``     the server side of one MCP connection (``ServerSession``),
                       in layers: ``server_base``, ``server_output``,
                       ``server_questions``, ``server_tasks``,
                       ``server_methods``, ``server_judging``
``client_session``     the client side (``ClientSession``); its events in
                       ``client_events``, its layer ``client_session_base``
``client_lists``       the client's list policy: paging, ``ttlMs``, what drops
                       a list, the listen filter and its back-off
``stdio``              newline-delimited JSON framing around a server session
``http_server``        the server's HTTP binding: Streamable HTTP, HTTP+SSE,
                       in layers: ``http_base``, ``http_sessions``,
                       ``http_streamable``, ``http_legacy_sse``, ``http_reading``
``http_client``        the client's Streamable HTTP binding; beside it
                       ``http_client_actions``, ``http_client_base``
``sse_client``         the client's HTTP+SSE binding (2024-11-05); beside it
                       ``sse_client_actions``, ``sse_client_base``
``http_wire``          what both HTTP bindings write: ``SendBytes``, headers
``probe``              which era a server speaks, and its cache; beside it
                       ``probe_events``, ``probe_cache``, and its layers
                       ``probe_base``, ``probe_judging``, ``probe_reading``
``pool``               upstream instances: start, idle, backoff, call timeout;
                       beside it ``pool_actions``, ``pool_base``
``router``             the gateway's middle: host calls to upstream sessions;
                       beside it ``router_actions``, ``router_base``
``gateway``            what a host sees over the upstreams' catalogs; beside
                       it ``gateway_results``, ``gateway_cursors``,
                       ``gateway_lists``
``gateway_uris``       ``mcpx://`` URIs; ``gateway_tools`` the gateway's tools
``rounds``, ``tasks``  questions and 2026-07-28 rounds; tasks
``revisions``          the five revisions and what each defines
``policy``             which peers' messages to accept beyond the revision
``jsonrpc``            JSON-RPC 2.0 messages; ``framing`` lines; ``sse`` events
``downgrade``          a result made fit for an older revision
``errors``             error codes and the three exception classes
``actions``            the server session's actions and request context
``upstream_auth``      a server's ``auth`` block: headers, query, environment
``drafts``, ``enums``  building actions cheaply; the tables of the machines
``revisions_doc``      spec/revisions.md, rendered from ``revisions``
=====================  ======================================================

Underscored names inside a submodule are private and may change.
``spec/machines.md`` lists each machine's inputs, actions and events.
"""

from .actions import (
    Action,
    Answered,
    CancelRequest,
    Close,
    EndStream,
    HandleRequest,
    PeerReplied,
    RequestContext,
    Send,
    Subscribed,
    SuspendStream,
    Trace,
)
from .client_session import (
    AbandonStream,
    ClientAction,
    ClientSession,
    Completed,
    Failed,
    InputRequired,
    Progress,
    Ready,
    ServerNotification,
    ServerRequest,
    ServerRequestCancelled,
)
from .errors import (
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
from .gateway import (
    GatewaySurface,
)
from .http_client import (
    Closed,
    HttpClientAction,
    HttpClientConfig,
    HttpClientConnection,
    JsonReceived,
    OpenConnection,
    RequestRefused,
    SessionExpired,
    StreamEnded,
)
from .http_server import (
    AppRequest,
    HttpConfig,
    HttpServer,
    SessionEnded,
)
from .http_wire import (
    CloseConnection,
    SendBytes,
)
from .pool import (
    CallFailed,
    CallTimedOut,
    Granted,
    Pool,
    PoolAction,
    PoolConfig,
    Refused,
    Spawn,
    Stop,
)
from .probe import (
    CloseResponse,
    EraProbe,
    HttpAnswered,
    HttpBody,
    HttpRequest,
    LineReceived,
    MessageReceived,
    OpenSse,
    ProbeAction,
    ProbeConfig,
    ProbeDone,
    ProbeEvent,
    ProbeFailed,
    Reconnect,
    SendMessage,
    TransportClosed,
)
from .revisions import (
    Revision,
)
from .rounds import (
    RoundTable,
)
from .router import (
    AbandonUpstream,
    AnswerHost,
    AskHost,
    NotifyHost,
    Router,
    RouterAction,
    SendUpstream,
    UpstreamNotification,
    UpstreamOutcome,
    WithdrawAsk,
)
from .server_session import (
    ServerConfig,
    ServerSession,
    ToolHints,
)
from .sse_client import (
    EndpointReady,
    SseClientAction,
    SseClientConfig,
    SseClientConnection,
)
from .stdio import (
    StdioServerConnection,
)
from .tasks import (
    TaskStore,
)

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
    "AbandonStream",
    "AbandonUpstream",
    "Action",
    "AnswerHost",
    "Answered",
    "AppRequest",
    "AskHost",
    "CallFailed",
    "CallTimedOut",
    "CancelRequest",
    "ClientAction",
    "ClientSession",
    "Close",
    "CloseConnection",
    "CloseResponse",
    "Closed",
    "Completed",
    "EndStream",
    "EndpointReady",
    "EraProbe",
    "Failed",
    "GatewaySurface",
    "Granted",
    "HandleRequest",
    "HttpAnswered",
    "HttpBody",
    "HttpClientAction",
    "HttpClientConfig",
    "HttpClientConnection",
    "HttpConfig",
    "HttpRequest",
    "HttpServer",
    "InputRequired",
    "JsonReceived",
    "LineReceived",
    "LocalProtocolError",
    "MessageReceived",
    "NotifyHost",
    "OpenConnection",
    "OpenSse",
    "PeerReplied",
    "Pool",
    "PoolAction",
    "PoolConfig",
    "ProbeAction",
    "ProbeConfig",
    "ProbeDone",
    "ProbeEvent",
    "ProbeFailed",
    "Progress",
    "ProtocolError",
    "Ready",
    "Reconnect",
    "Refused",
    "RemoteProtocolError",
    "RequestContext",
    "RequestRefused",
    "Revision",
    "RoundTable",
    "Router",
    "RouterAction",
    "Send",
    "SendBytes",
    "SendMessage",
    "SendUpstream",
    "ServerConfig",
    "ServerNotification",
    "ServerRequest",
    "ServerRequestCancelled",
    "ServerSession",
    "SessionEnded",
    "SessionExpired",
    "Spawn",
    "SseClientAction",
    "SseClientConfig",
    "SseClientConnection",
    "StdioServerConnection",
    "Stop",
    "StreamEnded",
    "Subscribed",
    "SuspendStream",
    "TaskStore",
    "ToolHints",
    "Trace",
    "TransportClosed",
    "UpstreamNotification",
    "UpstreamOutcome",
    "WithdrawAsk",
]
