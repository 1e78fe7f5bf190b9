"""What a client session tells its application: the events ``ClientSession.next_actions()`` gives.

``mcpx.core.client_session`` has the rules.  ``Ready`` (a legacy handshake
done), ``Completed``/``Failed`` (a call's end), ``InputRequired`` and
``ServerRequest`` (a question, 2026-07-28 and legacy), ``Progress``,
``ServerRequestCancelled``, ``ServerNotification``, and ``AbandonStream``
(close a 2026-07-28 request's stream to cancel it); ``MessageTooLarge`` is
what a message over the session's bound raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .actions import Send, Trace
from .drafts import builder
from .jsonrpc import RequestId
from .revisions import Revision


@dataclass(frozen=True, slots=True, kw_only=True)
class Ready:
    """``initialize`` succeeded: what the server negotiated and declared."""

    revision: Revision
    capabilities: Mapping[str, Any]
    server_info: Mapping[str, Any]
    instructions: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Completed:
    handle: int
    result: Mapping[str, Any]


_completed = builder(Completed)  # built per answer without __init__ (mcpx/core/drafts.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class Failed:
    """The call ended with a JSON-RPC error (the server's, or the session's own)."""

    handle: int
    error: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRequired:
    """A 2026-07-28 server needs answers; ``resume(handle, responses)`` sends the retry."""

    handle: int
    input_requests: Mapping[str, Any]
    request_state: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    handle: int
    progress: float
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerRequest:
    """A legacy server asks something; answer with ``answer``/``answer_error``."""

    request_id: RequestId
    method: str
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerRequestCancelled:
    request_id: RequestId
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerNotification:
    method: str
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class AbandonStream:
    """Close the stream of call ``handle`` (how 2026-07-28 HTTP cancels a request)."""

    handle: int


ClientAction = (
    Send
    | Ready
    | Completed
    | Failed
    | InputRequired
    | Progress
    | ServerRequest
    | ServerRequestCancelled
    | ServerNotification
    | AbandonStream
    | Trace
)


class MessageTooLarge(ValueError):
    """A request longer, as it would be sent, than the server's message limit: refused, not sent.

    ``size`` is the request's length in bytes as written (what the caller
    added, ``_meta`` and the id, included), ``limit`` the most the server
    takes; ``over`` what it would exceed it by.
    """

    def __init__(self, method: str, size: int, limit: int) -> None:
        self.method, self.size, self.limit = method, size, limit
        super().__init__(
            f"{method} would be {size} bytes as sent to the server (what mcpx adds, _meta and the id, "
            f"counted), over the {limit}-byte limit on one message by {size - limit} bytes; send less"
        )

    @property
    def over(self) -> int:
        return self.size - self.limit
