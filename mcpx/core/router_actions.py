"""What the router asks its driver to do, and what a message becomes on the other hop.

``mcpx.core.router`` has the rules.  ``SendUpstream``/``AbandonUpstream``
go to an upstream connection; ``AnswerHost``, ``NotifyHost``, ``AskHost``
and ``WithdrawAsk`` to a host's call; ``UpstreamNotification`` and
``UpstreamOutcome`` report what an upstream said outside a call.
``upstream_params`` drops from a host's request what belongs to the host's
hop (``task``, and ``_meta``'s progress token and protocol keys);
``relayed`` drops the envelope of the upstream's result (its
``resultType``, ``ttlMs``, ``cacheScope`` and server info), which the host's
session sets for its own hop.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from .actions import Trace
from .client_session import Completed, Failed, InputRequired, Progress, ServerRequest, ServerRequestCancelled
from .drafts import builder
from .jsonrpc import RequestId

HostKey: TypeAlias = Hashable
"""The caller's name for one host connection (opaque; ``str`` or ``int`` will do)."""


UpstreamKey: TypeAlias = Hashable
"""The caller's name for one upstream connection (opaque; an instance id will do)."""


ProgressToken: TypeAlias = str | int


_CallKey: TypeAlias = tuple[Hashable, RequestId]


QUESTION_METHODS: Final = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
"""What a server may ask a client (MCP 2025-06-18 client/*; 2026-07-28 basic/patterns/mrtr ``InputRequest``)."""


OWN_ROOTS: Final[Mapping[str, Any]] = MappingProxyType({"roots": []})
"""mcpx's answer to ``roots/list`` for a host that declared no roots (spec/gateway.md §4)."""


_HOP_META_PREFIXES: Final = ("io.modelcontextprotocol/", "dev.mcpx/")


_ENVELOPE_KEYS: Final = frozenset({"resultType", "ttlMs", "cacheScope"})


_ENVELOPE_META: Final = "io.modelcontextprotocol/serverInfo"


@dataclass(frozen=True, slots=True, kw_only=True)
class SendUpstream:
    """Write ``payload`` to upstream connection ``upstream`` (``stream``: the session's ``Send.stream``)."""

    upstream: UpstreamKey
    payload: bytes
    stream: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AbandonUpstream:
    """Close the stream of call ``handle`` on ``upstream`` (how 2026-07-28 HTTP cancels a request)."""

    upstream: UpstreamKey
    handle: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerHost:
    """The one answer to host call ``(host, request_id)``: exactly one of ``result`` and ``error``."""

    host: HostKey
    request_id: RequestId
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if (self.result is None) == (self.error is None):
            raise ValueError("an answer carries exactly one of result and error")


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifyHost:
    """A notification for ``host``: progress of call ``request_id``, or a log message (``request_id`` None)."""

    host: HostKey
    request_id: RequestId | None
    method: str
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class AskHost:
    """Put ``requests`` (key → ``{"method", "params"}``) to ``host`` for its call ``request_id``.

    Answer with ``Router.host_answered(host, ask_id, {key: result, …})`` —
    every key, nothing else — or ``Router.host_refused(host, ask_id, error)``.
    """

    host: HostKey
    request_id: RequestId
    ask_id: int
    requests: Mapping[str, Mapping[str, Any]]

    def __post_init__(self) -> None:
        if not self.requests:
            raise ValueError("a question asks something")


@dataclass(frozen=True, slots=True, kw_only=True)
class WithdrawAsk:
    """Question ``ask_id`` is no longer wanted: stop asking ``host``; an answer to it is ignored."""

    host: HostKey
    ask_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamNotification:
    """An upstream notification for the caller: list changes, resource updates, and a copy of each log."""

    upstream: UpstreamKey
    method: str
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamOutcome:
    """A session event for a request the router did not send (the caller's own use of the session)."""

    upstream: UpstreamKey
    event: Completed | Failed | InputRequired | Progress | ServerRequest | ServerRequestCancelled


# The two actions of every call, built without __init__ (mcpx/core/drafts.py).
_send_upstream = builder(SendUpstream)


_answer = builder(AnswerHost)


RouterAction: TypeAlias = (
    SendUpstream
    | AbandonUpstream
    | AnswerHost
    | NotifyHost
    | AskHost
    | WithdrawAsk
    | UpstreamNotification
    | UpstreamOutcome
    | Trace
)


def upstream_params(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The host's params as they go upstream: without ``task`` and without the hop's ``_meta`` keys.

    ``progressToken`` and ``io.modelcontextprotocol/*`` are the host → mcpx
    hop's (the session states its own upstream), ``dev.mcpx/*`` are mcpx's;
    every other ``_meta`` key is the call's and is carried (spec/gateway.md §5).
    When there is nothing to take out, the host's own params are returned:
    read them, never change them (a client session copies what it sends).
    """
    params = params or {}
    if "_meta" not in params and "task" not in params:
        return params  # the usual call
    out = {k: v for k, v in params.items() if k not in ("_meta", "task")}
    meta = params.get("_meta")
    if meta is not None and isinstance(meta, Mapping):
        kept = {
            k: v
            for k, v in meta.items()
            if not (k == "progressToken" or (isinstance(k, str) and k.startswith(_HOP_META_PREFIXES)))
        }
        if kept:
            out["_meta"] = kept
    return out


def relayed(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """An upstream's result as the host gets it: its content verbatim, its envelope not (spec/gateway.md §1).

    A result with no envelope (a legacy upstream's) is returned itself.
    """
    meta = result.get("_meta")
    if _ENVELOPE_KEYS.isdisjoint(result) and (
        meta is None or (type(meta) is dict and _ENVELOPE_META not in meta)
    ):
        return result
    out = {k: v for k, v in result.items() if k not in _ENVELOPE_KEYS}
    meta = out.get("_meta")
    if meta is not None and isinstance(meta, Mapping) and _ENVELOPE_META in meta:
        rest = {k: v for k, v in meta.items() if k != _ENVELOPE_META}
        if rest:
            out["_meta"] = rest
        else:
            del out["_meta"]
    return out
