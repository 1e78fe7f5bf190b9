"""What the server session asks its driver to do.

The session never performs I/O; it queues actions and the driver drains them
with ``next_actions()`` after every input, in order; bytes leave the session
only inside these actions:

``Send``
    Write ``payload`` (one serialised JSON-RPC message or batch, no framing)
    to the peer.  ``stream`` names the request the message belongs to — its
    response, or a notification about it — so a Streamable HTTP binding can
    put it on that request's stream; ``None`` means a connection-level
    message (a legacy list-changed notification, a log without a request).
    ``final`` marks the response that ends ``stream``; ``error_code`` is set
    when that response is a JSON-RPC error (a binding maps it to a status).
``HandleRequest``
    Run the application's handler for a request the session has judged
    legal, and later call ``respond``/``respond_error`` (or ``discard`` once
    it was cancelled) with ``token``.
``CancelRequest``
    The peer cancelled ``token`` (or the connection is closing): stop its
    handler.  Anything the handler still reports is dropped by the session.
``EndStream``
    Nothing more will be sent on ``stream`` (its request was cancelled): a
    Streamable HTTP binding ends that response; stdio ignores it.
``SuspendStream``
    The application asked to close ``stream`` now and go on working (SSE
    polling, 2025-11-25): a Streamable HTTP binding ends the HTTP response
    but keeps the stream, which the client resumes with ``Last-Event-ID``.
``PeerReplied``
    The peer answered a request the server sent (``send_request``).
``Answered``
    The questions a call asked (``ask``) are answered — by the client, by
    answers it sent ahead, or by their deadline — or were refused because the
    client may not be asked them.  Resume the call's handler with it.
``Subscribed``
    A client subscribed to resource ``uri`` (a legacy
    ``resources/subscribe``, or a URI a 2026-07-28 ``subscriptions/listen``
    filter was granted): an application that does not own its resources (a
    gateway) subscribes where they live.  The session needs no answer.
``Close``
    Nothing more will be sent: close the output.
``Trace``
    A decision worth recording (version negotiation, per-request revision
    judgement), emitted only when the session was built with ``trace=True``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .drafts import draft_of
from .jsonrpc import RequestId
from .revisions import Revision

__all__ = [
    "Action",
    "Answered",
    "CancelRequest",
    "Close",
    "EndStream",
    "HandleRequest",
    "PeerReplied",
    "RequestContext",
    "Send",
    "Subscribed",
    "SuspendStream",
    "Trace",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestContext:
    """Everything the application may know about one request.

    ``revision`` is the revision the request is judged under: the one its
    ``_meta`` states (2026-07-28), the one negotiated by ``initialize``, or
    2024-11-05 when it declared nothing.  ``client_capabilities`` are the ones
    that apply to this request (its own ``_meta`` for 2026-07-28, the
    ``initialize`` declaration for legacy peers).
    """

    token: int
    request_id: RequestId
    method: str
    revision: Revision
    client_capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any] | None = None
    log_level: str | None = None
    progress_token: str | int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    identity: str | None = None
    """Who the request is from, as the transport knows it (``session:<id>`` for a legacy HTTP
    session; ``connection`` on stdio; the requester's credentials, or ``anonymous``, for 2026-07-28)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Send:
    payload: bytes
    stream: int | None = None
    final: bool = False
    error_code: int | None = None  # set when the payload is a JSON-RPC error response


@dataclass(frozen=True, slots=True, kw_only=True)
class HandleRequest:
    token: int
    method: str
    params: Mapping[str, Any]
    context: RequestContext


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRequest:
    token: int
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EndStream:
    stream: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SuspendStream:
    stream: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerReplied:
    token: int
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Answered:
    """``answers`` maps each question's key to ``{"result": …}`` or ``{"error": {code, message}}``."""

    token: int
    ask_id: int
    answers: Mapping[str, Mapping[str, Any]] | None = None
    refused: str | None = None
    required: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscribed:
    uri: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Close:
    reason: str = "end of input"


@dataclass(frozen=True, slots=True, kw_only=True)
class Trace:
    event: str
    detail: Mapping[str, Any] = field(default_factory=dict)


Action = (
    Send
    | HandleRequest
    | CancelRequest
    | EndStream
    | SuspendStream
    | PeerReplied
    | Answered
    | Subscribed
    | Close
    | Trace
)


# --------------------------------------------------------------------------
# Building the per-message actions cheaply (private to the core; see drafts.py)
# --------------------------------------------------------------------------


_new = object.__new__
_SEND_DRAFT: Final = draft_of(Send)
_HANDLE_DRAFT: Final = draft_of(HandleRequest)
_CONTEXT_DRAFT: Final = draft_of(RequestContext)


def build_send(payload: bytes, stream: int | None, final: bool, error_code: int | None) -> Send:
    """``Send(payload=..., stream=..., final=..., error_code=...)``, built without ``object.__setattr__``."""
    send: Any = _new(_SEND_DRAFT)
    send.payload = payload
    send.stream = stream
    send.final = final
    send.error_code = error_code
    send.__class__ = Send
    return send  # type: ignore[no-any-return]


def build_request(
    token: int,
    request_id: RequestId,
    method: str,
    params: Mapping[str, Any],
    revision: Revision,
    client_capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any] | None,
    log_level: str | None,
    progress_token: str | int | None,
    meta: Mapping[str, Any],
    identity: str | None,
) -> HandleRequest:
    """``HandleRequest`` with its ``RequestContext``, both built the same cheap way.

    Every request the session hands the application is built here.
    """
    action: Any = _new(_HANDLE_DRAFT)
    action.token = token
    action.method = method
    action.params = params
    action.context = build_request_context(
        token,
        request_id,
        method,
        revision,
        client_capabilities,
        client_info,
        log_level,
        progress_token,
        meta,
        identity,
    )
    action.__class__ = HandleRequest
    return action  # type: ignore[no-any-return]


def build_request_context(
    token: int,
    request_id: RequestId,
    method: str,
    revision: Revision,
    client_capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any] | None,
    log_level: str | None,
    progress_token: str | int | None,
    meta: Mapping[str, Any],
    identity: str | None,
) -> RequestContext:
    """``RequestContext(...)`` with every field given, built the same cheap way."""
    ctx: Any = _new(_CONTEXT_DRAFT)
    ctx.token = token
    ctx.request_id = request_id
    ctx.method = method
    ctx.revision = revision
    ctx.client_capabilities = client_capabilities
    ctx.client_info = client_info
    ctx.log_level = log_level
    ctx.progress_token = progress_token
    ctx.meta = meta
    ctx.identity = identity
    ctx.__class__ = RequestContext
    return ctx  # type: ignore[no-any-return]
