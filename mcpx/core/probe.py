"""The era probe: which era an upstream MCP server speaks, found by asking, and remembered.

mcpx as a client meets servers of both eras (2026-07-28 basic/versioning and
server/discover; the transport pages of every revision).  ``EraProbe`` finds
out which one a server is, in the order the 2026-07-28 versioning page gives a
dual-era client, and hands over a settled connection; ``EraCache`` remembers
the answer per server configuration so the probe costs one round trip per
configuration, not one per start.  ``spec/era-probe.md`` is the prose and the
table of answers; this docstring is the API.

Rules
-----
* **Modern first.**  The first request is ``server/discover`` as the most
  preferred modern revision, with the full 2026-07-28 ``params._meta``
  (version, client capabilities, client info).  Over HTTP it is a POST with
  ``MCP-Protocol-Version`` and ``Mcp-Method``; the answer's status, content
  type and body are all read, the body of a 400 included.
* **A recognised modern answer keeps the modern era.**  A DiscoverResult
  whose ``supportedVersions`` (never ``protocolVersions``) lists the version
  sent is the modern era.  A DiscoverResult or a ``-32022`` whose list names
  another modern revision mcpx speaks is retried with it; each revision is
  tried at most once.  ``-32020``, and ``-32021`` with
  ``data.requiredCapabilities``, are modern refusals: the era is modern, the
  capabilities are not known yet.  A list that names only legacy revisions
  mcpx speaks sends the probe to ``initialize`` offering those.
* **Anything else is legacy**, never keyed to one error code: ``-32601``,
  ``-32602``, any other error, a result without a ``supportedVersions`` list,
  silence for ``timeout`` seconds, a line or body that is not JSON-RPC, an
  HTML 404, a 405, a 400 without a recognisable body, a closed connection.
  Over stdio a server whose process ended is started again (``Reconnect``)
  before ``initialize``.  Only 401, 403 and 407 stop the probe at once: they
  are about credentials, not eras.
* **Legacy negotiates once.**  ``initialize`` offers the most preferred legacy
  revision (newest first by default) and accepts the server's counter-offer
  when mcpx speaks it; an error whose ``data.supported`` lists another
  revision mcpx speaks is retried with it (a modern one sends the probe back
  to ``server/discover``).  On success the probe sends
  ``notifications/initialized`` itself (``send_initialized``), so the
  connection it hands over is ready.
* **HTTP falls back once more.**  When ``initialize`` over Streamable HTTP
  gets no JSON-RPC answer (a 404, a 405, an HTML page, a dropped connection),
  or a JSON-RPC error with 400/404/405, the probe GETs ``sse_path`` for a
  2024-11-05 HTTP+SSE stream and ends at its ``endpoint`` event, leaving
  that stream open for the caller: ``era="legacy-sse"``.  The endpoint is
  resolved against ``sse_path`` and must stay on its origin
  (``sse_client.resolve_endpoint``).
* **A cached era is tried first** (``cached=``): legacy starts at
  ``initialize``, legacy-sse at the GET, modern at ``server/discover`` with
  the cached revision.  When the cached path fails in a way that could mean
  "wrong era" (refused, silent, closed, not Streamable HTTP), the probe starts
  afresh, modern first, once.  The outcome says whether the entry was
  ``confirmed`` or ``stale``.
* **Bounded.**  At most ``max_requests`` requests and ``max_restarts``
  process restarts; a timer is armed whenever the probe waits; a body or SSE
  event larger than ``max_body`` is an unusable answer, not a growing buffer.

Theory of operation
-------------------
Every answer is first *judged* into a ``_Verdict`` (with the version or
offer it implies and a line for the trace); ``_TRANSITIONS`` maps
(state, verdict) to (effect, next state).  A missing pair is a bug, never a
peer's doing.  Three guards sit between the judgement and the table: a
failure of the cached path becomes ``STALE`` (start afresh), an effect that
would exceed a budget becomes ``GIVE_UP``, and a step to ``initialize`` with
no legacy revision left to offer becomes ``NO_LEGACY``.

API
---
``EraProbe(config, transport="stdio"|"http", path=..., sse_path=..., cached=...)``
    ``start(now)`` first; then ``receive(event, now)`` for each event and
    ``handle_timer(now)`` once ``get_timer()``'s deadline has passed.  After
    every call drain ``next_actions()`` and carry them out in order.  The
    last action is ``ProbeDone`` or ``ProbeFailed`` (also ``outcome``);
    inputs after it are ignored.
Actions (what the driver does)
    ``SendMessage(payload)`` — write one line to the server's stdin (append
    the newline).  ``HttpRequest(token, method, path, headers, body)`` — send
    it (adding the server's auth headers) and report the answer under
    ``token``.  ``OpenSse(token, path, headers)`` — GET an event stream and
    report it under ``token`` as it arrives.  ``CloseResponse(token)`` — the
    probe no longer reads that answer: close it.  ``Reconnect(reason)`` —
    stdio: the server's process ended; start it again before the next
    action.  ``ProbeDone`` / ``ProbeFailed`` — the outcome, with the trace.
Events (what the driver reports)
    ``LineReceived(line)`` — one line from the server's stdout, undecoded
    (or ``MessageReceived(message)`` when the driver decoded it).
    ``HttpAnswered(token, status, headers, body, complete)`` — an answer's
    head and the body so far; ``complete=False`` means the rest comes as
    ``HttpBody(token, data)``, ``data=b""`` at its end (always so for an
    event stream the driver does not buffer).  ``TransportClosed(reason,
    token)`` — stdio: the server's stdout ended; HTTP: the connection
    carrying ``token`` closed before a complete answer.

Request ids are ``config.id_prefix`` + a counter (strings, so they never
meet the integer ids a client session allocates); HTTP tokens are integers
from 1.  Time is whatever clock the caller passes as ``now`` (monotonic is
right); the cache's ``now`` is wall-clock, because its file outlives the
process.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final, Literal, get_args
from urllib.parse import urlsplit, urlunsplit

import orjson

from .downgrade import downgrade
from .errors import (
    HEADER_MISMATCH,
    INVALID_REQUEST,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    LocalProtocolError,
)
from .jsonrpc import ErrorResponse, InvalidMessage, Notification, Request, Response, parse_message
from .revisions import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    REVISIONS,
    Revision,
)
from .sse import SseDecoder, SseError
from .sse_client import resolve_endpoint

__all__ = [
    "CloseResponse",
    "EraCache",
    "EraEntry",
    "EraName",
    "EraProbe",
    "HttpAnswered",
    "HttpBody",
    "HttpRequest",
    "LineReceived",
    "MessageReceived",
    "OpenSse",
    "ProbeAction",
    "ProbeConfig",
    "ProbeDone",
    "ProbeEvent",
    "ProbeFailed",
    "ProbeState",
    "Reconnect",
    "SendMessage",
    "TransportClosed",
]

EraName = Literal["modern", "legacy", "legacy-sse"]
CacheVerdict = Literal["none", "confirmed", "stale"]
Transport = Literal["stdio", "http"]

ERAS: Final[tuple[str, ...]] = get_args(EraName)
_CACHE_VERDICTS: Final[tuple[str, ...]] = get_args(CacheVerdict)
_AUTH_STATUSES: Final = frozenset({401, 403, 407})
# The old-transport fallback (2025-11-25 basic/transports, Backwards Compatibility).
_NOT_STREAMABLE_STATUSES: Final = frozenset({400, 404, 405})
_MAX_TRACE: Final = 200
_MAX_ITEMS: Final = 64  # JSON-RPC messages looked at in one line or body (a batch)
_R25B: Final = Revision.V2025_06_18

Headers = tuple[tuple[str, str], ...]


def _headers(value: Iterable[tuple[str, str]] | Mapping[str, str]) -> Headers:
    pairs = value.items() if isinstance(value, Mapping) else value
    out = []
    for name, text in pairs:
        if not isinstance(name, str) or not isinstance(text, str):
            raise ValueError("header names and values are strings")
        out.append((name.lower(), text))
    return tuple(out)


def _header(headers: Headers, name: str) -> str | None:
    """The first value of header ``name`` (case-insensitive)."""
    name = name.lower()
    for key, value in headers:
        if key.lower() == name:
            return value
    return None


# --------------------------------------------------------------------------
# Configuration, events and actions
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeConfig:
    """Who mcpx is and what it speaks: the same for every probe of one client.

    ``revisions`` is the preference order (newest first by default); the first
    modern revision is tried first and the first legacy one is offered to
    ``initialize``.  ``capabilities`` and ``client_info`` are in the newest
    shape and cut to each revision before they are sent.  ``timeout`` bounds
    each wait for an answer; ``timeout_setting`` names what sets it (the
    daemon's ``pool.startTimeout``, ``mcpx probe --timeout``), so that a
    failure says what to raise.
    """

    client_info: Mapping[str, Any]
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    revisions: tuple[Revision, ...] = tuple(reversed(REVISIONS))
    timeout: float = 5.0
    timeout_setting: str = "the probe's timeout"
    discover_silence: float = 5.0
    max_requests: int = 8
    max_restarts: int = 2
    max_body: int = 1 << 20
    id_prefix: str = "probe-"
    send_initialized: bool = True

    def __post_init__(self) -> None:
        revisions = tuple(Revision(r) for r in self.revisions)
        if not revisions or len(set(revisions)) != len(revisions):
            raise ValueError("revisions is a non-empty preference list without repeats")
        object.__setattr__(self, "revisions", revisions)
        if not isinstance(self.client_info, Mapping) or not isinstance(self.client_info.get("name"), str):
            raise ValueError("client_info is an Implementation object with at least a name")
        if not isinstance(self.capabilities, Mapping):
            raise ValueError("capabilities is a ClientCapabilities object")
        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise ValueError("timeout is a positive number of seconds")
        if not (math.isfinite(self.discover_silence) and self.discover_silence > 0):
            raise ValueError("discover_silence is a positive number of seconds")
        if not isinstance(self.timeout_setting, str) or not self.timeout_setting:
            raise ValueError("timeout_setting names what sets timeout, for messages")
        if self.max_requests < 1 or self.max_restarts < 0 or self.max_body < 1:
            raise ValueError("max_requests and max_body are at least 1, max_restarts at least 0")

    @property
    def modern(self) -> tuple[Revision, ...]:
        return tuple(r for r in self.revisions if r.is_modern)

    @property
    def legacy(self) -> tuple[Revision, ...]:
        return tuple(r for r in self.revisions if not r.is_modern)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageReceived:
    """One JSON value the server wrote on stdout, already decoded by the driver."""

    message: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class LineReceived:
    """One line the server wrote on stdout, without its newline; the probe decodes it."""

    line: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.line, bytes):
            raise ValueError("line is bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpAnswered:
    """The answer to ``HttpRequest``/``OpenSse`` ``token``: its head and the body read so far.

    ``complete=False``: more of the body follows as ``HttpBody``.  Header
    names are lower-cased when the event is built.
    """

    token: int
    status: int
    headers: Headers = ()
    body: bytes = b""
    complete: bool = True

    def __post_init__(self) -> None:
        if type(self.status) is not int or not 100 <= self.status <= 599:
            raise ValueError(f"status is an HTTP status code, not {self.status!r}")
        if not isinstance(self.body, bytes):
            raise ValueError("body is bytes")
        object.__setattr__(self, "headers", _headers(self.headers))

    def header(self, name: str) -> str | None:
        return _header(self.headers, name)


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpBody:
    """More of an answer's body; ``data=b""`` is its end."""

    token: int
    data: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.data, bytes):
            raise ValueError("data is bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class TransportClosed:
    """stdio: the server's stdout ended.  HTTP: ``token``'s connection closed before a complete answer."""

    reason: str = ""
    token: int | None = None


ProbeEvent = MessageReceived | LineReceived | HttpAnswered | HttpBody | TransportClosed


@dataclass(frozen=True, slots=True, kw_only=True)
class SendMessage:
    """Write ``payload`` (one JSON-RPC message, no newline) to the server's stdin, then a newline."""

    payload: bytes

    @property
    def message(self) -> Any:
        return orjson.loads(self.payload)


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpRequest:
    """Send this request (with the server's auth applied) and report its answer under ``token``."""

    token: int
    method: str
    path: str
    headers: Headers
    body: bytes = b""

    def header(self, name: str) -> str | None:
        return _header(self.headers, name)

    @property
    def message(self) -> Any:
        return orjson.loads(self.body)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenSse:
    """GET ``path`` as an event stream; report the head and then the bytes as they come, under ``token``."""

    token: int
    path: str
    headers: Headers = (("Accept", "text/event-stream"),)


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseResponse:
    """The probe no longer reads the answer to ``token``: close it (for 2026-07-28 that also cancels)."""

    token: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconnect:
    """stdio: the server's process ended; start it again before carrying out the next action."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeDone:
    """The era is settled; the connection is ready for the client session.

    ``modern``: ``revision`` is the one to state in every request;
    ``capabilities``/``server_info`` come from ``server/discover`` (``None``
    after a modern refusal, when only the era is known).  ``legacy``: the
    negotiated revision, the ``InitializeResult``'s capabilities and
    serverInfo, and over HTTP the ``Mcp-Session-Id`` (if the server set one).
    ``legacy-sse``: ``revision`` is ``None`` (nothing negotiated yet);
    ``endpoint`` is where to POST, and the stream opened as ``sse_token``
    stays open and is the caller's.  ``cache`` says what became of the
    cached entry the probe started from.
    """

    era: EraName
    revision: Revision | None
    capabilities: Mapping[str, Any] | None = None
    server_info: Mapping[str, Any] | None = None
    instructions: str | None = None
    session_id: str | None = None
    endpoint: str | None = None
    sse_token: int | None = None
    supported: tuple[str, ...] = ()
    result: Mapping[str, Any] | None = None
    cache: CacheVerdict = "none"
    trace: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_era(self.era, self.revision)
        if (self.era == "legacy-sse") != (self.endpoint is not None):
            raise ValueError("an endpoint comes with the legacy-sse era and only with it")
        if self.cache not in _CACHE_VERDICTS:
            raise ValueError(f"cache is one of {_CACHE_VERDICTS}")
        object.__setattr__(self, "trace", tuple(self.trace))
        object.__setattr__(self, "supported", tuple(self.supported))


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeFailed:
    """No era worked.  ``reason`` says what happened and what to do; ``trace`` every step."""

    reason: str
    cache: CacheVerdict = "none"
    trace: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.reason:
            raise ValueError("a failure has a reason")
        object.__setattr__(self, "trace", tuple(self.trace))


ProbeAction = SendMessage | HttpRequest | OpenSse | CloseResponse | Reconnect | ProbeDone | ProbeFailed


def _check_era(era: str, revision: Revision | None) -> None:
    if era not in ERAS:
        raise ValueError(f"era is one of {ERAS}, not {era!r}")
    if era == "legacy-sse":
        if revision is not None:
            raise ValueError("the legacy-sse era has not negotiated a revision yet")
    elif not isinstance(revision, Revision) or revision.is_modern != (era == "modern"):
        raise ValueError(f"the {era} era needs a {era} revision, not {revision!r}")


# --------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------


class ProbeState(enum.Enum):
    IDLE = "idle"  # built; start() not called
    DISCOVERING = "discovering"  # waiting for the answer to server/discover
    INITIALIZING = "initializing"  # waiting for the answer to initialize
    OPENING_SSE = "opening-sse"  # waiting for the HTTP+SSE endpoint event
    DONE = "done"
    FAILED = "failed"


class _Verdict(enum.Enum):
    START_MODERN = "start modern first"
    START_LEGACY = "start at initialize"
    START_SSE = "start at the HTTP+SSE stream"
    DISCOVERED = "a DiscoverResult listing the version sent"
    OTHER_MODERN = "a DiscoverResult or -32022 naming another modern revision mcpx speaks"
    MODERN_REFUSAL = "-32020, or -32021 with requiredCapabilities"
    NO_COMMON_VERSION = "a DiscoverResult or -32022 naming nothing mcpx can still try"
    NOT_MODERN = "anything else, or a list naming only legacy revisions"
    NO_ANSWER = "silence until the deadline"
    CLOSED = "the server's process ended"
    AUTH = "HTTP 401/403/407"
    INITIALIZED = "an InitializeResult with a revision mcpx speaks"
    OTHER_LEGACY = "an initialize error listing another legacy revision mcpx speaks"
    MODERN_HINT = "an initialize error listing an untried modern revision"
    REFUSED = "initialize refused, or answered with something mcpx cannot use"
    NOT_STREAMABLE = "initialize over HTTP failed the old-transport way"
    ENDPOINT = "the HTTP+SSE stream named its endpoint"
    NO_SSE = "no HTTP+SSE stream"
    STALE = "the cached era failed"
    NO_LEGACY = "legacy needed but mcpx is configured without it"
    GIVE_UP = "a budget is spent"


_S = ProbeState
_V = _Verdict

_TRANSITIONS: Final[Mapping[tuple[ProbeState, _Verdict], tuple[str, ProbeState]]] = MappingProxyType(
    {
        (_S.IDLE, _V.START_MODERN): ("_send_discover", _S.DISCOVERING),
        (_S.IDLE, _V.START_LEGACY): ("_send_initialize", _S.INITIALIZING),
        (_S.IDLE, _V.START_SSE): ("_open_sse", _S.OPENING_SSE),
        (_S.DISCOVERING, _V.DISCOVERED): ("_done_modern", _S.DONE),
        (_S.DISCOVERING, _V.OTHER_MODERN): ("_send_discover", _S.DISCOVERING),
        (_S.DISCOVERING, _V.MODERN_REFUSAL): ("_done_modern", _S.DONE),
        (_S.DISCOVERING, _V.NO_COMMON_VERSION): ("_fail", _S.FAILED),
        (_S.DISCOVERING, _V.NOT_MODERN): ("_send_initialize", _S.INITIALIZING),
        (_S.DISCOVERING, _V.NO_ANSWER): ("_send_initialize", _S.INITIALIZING),
        (_S.DISCOVERING, _V.CLOSED): ("_restart_then_initialize", _S.INITIALIZING),
        (_S.DISCOVERING, _V.AUTH): ("_fail", _S.FAILED),
        (_S.DISCOVERING, _V.NO_LEGACY): ("_fail", _S.FAILED),
        (_S.DISCOVERING, _V.GIVE_UP): ("_fail", _S.FAILED),
        (_S.INITIALIZING, _V.INITIALIZED): ("_done_legacy", _S.DONE),
        (_S.INITIALIZING, _V.OTHER_LEGACY): ("_send_initialize", _S.INITIALIZING),
        (_S.INITIALIZING, _V.MODERN_HINT): ("_send_discover", _S.DISCOVERING),
        (_S.INITIALIZING, _V.REFUSED): ("_fail", _S.FAILED),
        (_S.INITIALIZING, _V.NO_ANSWER): ("_fail", _S.FAILED),
        (_S.INITIALIZING, _V.CLOSED): ("_fail", _S.FAILED),
        (_S.INITIALIZING, _V.NOT_STREAMABLE): ("_open_sse", _S.OPENING_SSE),
        (_S.INITIALIZING, _V.AUTH): ("_fail", _S.FAILED),
        (_S.INITIALIZING, _V.STALE): ("_start_fresh", _S.DISCOVERING),
        (_S.INITIALIZING, _V.NO_LEGACY): ("_fail", _S.FAILED),
        (_S.INITIALIZING, _V.GIVE_UP): ("_fail", _S.FAILED),
        (_S.OPENING_SSE, _V.ENDPOINT): ("_done_sse", _S.DONE),
        (_S.OPENING_SSE, _V.NO_SSE): ("_fail", _S.FAILED),
        (_S.OPENING_SSE, _V.NO_ANSWER): ("_fail", _S.FAILED),
        (_S.OPENING_SSE, _V.AUTH): ("_fail", _S.FAILED),
        (_S.OPENING_SSE, _V.STALE): ("_start_fresh", _S.DISCOVERING),
        (_S.OPENING_SSE, _V.GIVE_UP): ("_fail", _S.FAILED),
    }
)
"""(state, verdict) → (effect, next state); spec/era-probe.md holds ``transition_table()``."""


def transition_table() -> str:
    """``_TRANSITIONS`` as the Markdown table in spec/era-probe.md (a test keeps the two equal)."""
    lines = ["| State | Answer judged as | Effect | Next state |", "| --- | --- | --- | --- |"]
    for (state, verdict), (effect, new_state) in _TRANSITIONS.items():
        lines.append(f"| {state.value} | {verdict.value} | `{effect.lstrip('_')}` | {new_state.value} |")
    return "\n".join(lines) + "\n"


# Failures of a cached path that may mean "wrong era": start afresh instead.
_CACHE_FAILURES: Final = frozenset({_V.REFUSED, _V.NO_ANSWER, _V.CLOSED, _V.NOT_STREAMABLE, _V.NO_SSE})
_SENDING: Final = frozenset(
    {"_send_discover", "_send_initialize", "_restart_then_initialize", "_open_sse", "_start_fresh"}
)
_NEEDS_LEGACY: Final = frozenset({"_send_initialize", "_restart_then_initialize"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Decision:
    verdict: _Verdict
    note: str  # the trace line: what came back and what it means
    version: Revision | None = None  # the revision to try next, when the answer named one
    hint: tuple[Revision, ...] | None = None  # legacy revisions the server listed
    result: Mapping[str, Any] | None = None
    session_id: str | None = None
    endpoint: str | None = None
    token: int | None = None  # the HTTP+SSE stream that named the endpoint
    failure: str | None = None  # the reason, when the verdict ends the probe


@dataclass(slots=True)
class _Wait:
    what: str  # "server/discover" | "initialize" | "GET"
    deadline: float
    limit: float  # seconds, from the wait's start to its deadline
    request_id: str | None = None
    token: int | None = None
    version: Revision | None = None
    status: int | None = None
    headers: Headers = ()
    complete: bool = False
    body: bytearray = field(default_factory=bytearray)
    decoder: SseDecoder | None = None


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _versions(listed: Any) -> tuple[str, ...] | None:
    """A version list as the server wrote it, if it is a non-empty list of strings."""
    if isinstance(listed, list) and listed and all(isinstance(v, str) for v in listed):
        return tuple(listed)
    return None


class EraProbe:
    """One probe of one server; see the module docstring for the rules and the API."""

    def __init__(
        self,
        config: ProbeConfig,
        *,
        transport: Transport,
        path: str = "",
        sse_path: str | None = None,
        cached: EraEntry | None = None,
    ) -> None:
        if transport not in ("stdio", "http"):
            raise ValueError(f"transport is 'stdio' or 'http', not {transport!r}")
        self.config = config
        self.transport: Transport = transport
        self.path = path
        self.sse_path = path if sse_path is None else sse_path
        self.cached = cached
        self._state = ProbeState.IDLE
        self._actions: list[ProbeAction] = []
        self._trace: list[str] = []
        self._dropped_trace = 0
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self._now = 0.0
        self._wait: _Wait | None = None
        self._requests = 0
        self._restarts = 0
        self._closed = False  # stdio: the server's output ended
        self._on_cache = False
        self._tried_modern: set[Revision] = set()
        # Modern revisions whose server/discover met silence: a later -32022 naming one
        # means the server is modern and was slow to start, so it is tried once more.
        self._silent_modern: set[Revision] = set()
        self._last_discover: Revision | None = None
        self._offered_legacy: set[Revision] = set()
        self._legacy_hint: tuple[Revision, ...] | None = None
        self._heard: dict[str, str] = {}  # what each step got, for the failure message
        self._outcome: ProbeDone | ProbeFailed | None = None

    # -- the caller's side --------------------------------------------------

    @property
    def state(self) -> ProbeState:
        return self._state

    @property
    def outcome(self) -> ProbeDone | ProbeFailed | None:
        return self._outcome

    @property
    def trace(self) -> tuple[str, ...]:
        return tuple(self._trace)

    def next_actions(self) -> list[ProbeAction]:
        """Everything queued since the last call, in order.  Call after every input."""
        actions, self._actions = self._actions, []
        return actions

    def get_timer(self) -> float | None:
        """When ``handle_timer`` must next be called; ``None`` only before ``start`` and after the outcome."""
        return self._wait.deadline if self._wait is not None else None

    def start(self, now: float) -> None:
        """Send the first request (or the first step of the cached path).  Drain actions after this."""
        if self._state is not ProbeState.IDLE:
            raise LocalProtocolError("start() is called once")
        self._now = now
        self._decide(self._first_step())

    def receive(self, event: ProbeEvent, now: float) -> None:
        """Feed what the driver saw.  Drain actions after this."""
        if self._state is ProbeState.IDLE:
            raise LocalProtocolError("call start() before feeding events")
        stdio_event = isinstance(event, MessageReceived | LineReceived)
        if stdio_event != (self.transport == "stdio") and not isinstance(event, TransportClosed):
            raise LocalProtocolError(f"{type(event).__name__} is not an event of a {self.transport} probe")
        if self._outcome is not None:
            return  # late answers, e.g. to notifications/initialized: nothing waits for them
        self._now = now
        if isinstance(event, LineReceived):
            try:
                value = orjson.loads(event.line)
            except orjson.JSONDecodeError:
                self._note(f"recv a line that is not JSON, ignored: {_short(event.line)}")
                return
            self._stdio_value(value)
        elif isinstance(event, MessageReceived):
            self._stdio_value(event.message)
        elif isinstance(event, HttpAnswered):
            self._http_head(event)
        elif isinstance(event, HttpBody):
            self._http_body(event)
        else:
            self._transport_closed(event)

    def handle_timer(self, now: float) -> None:
        """Call once ``get_timer()``'s deadline has passed.  Drain actions after this."""
        wait = self._wait
        if wait is None or now < wait.deadline:
            return
        self._now = now
        self._heard[wait.what] = f"no answer within {wait.limit:g}s"
        if wait.what == "server/discover" and self._last_discover is not None:
            self._silent_modern.add(self._last_discover)
        self._decide(
            _Decision(
                verdict=_V.NO_ANSWER,
                note=f"recv nothing for {wait.what} within {wait.limit:g}s",
            )
        )

    # -- trace and actions --------------------------------------------------

    def _note(self, line: str) -> None:
        if len(self._trace) < _MAX_TRACE:
            self._trace.append(line)
        else:
            self._dropped_trace += 1

    def _full_trace(self) -> tuple[str, ...]:
        if self._dropped_trace:
            return (*self._trace, f"… {self._dropped_trace} more steps not recorded")
        return tuple(self._trace)

    def _cache_verdict(self, era: str | None) -> CacheVerdict:
        if self.cached is None:
            return "none"
        return "confirmed" if era == self.cached.era else "stale"

    # -- the table ----------------------------------------------------------

    def _first_step(self) -> _Decision:
        cached, config = self.cached, self.config
        if cached is not None:
            usable = cached.era != "legacy-sse" or self.transport == "http"
            if cached.revision is not None and cached.revision not in config.revisions:
                usable = False
            if cached.era == "legacy-sse" and not config.legacy:
                usable = False
            if usable:
                self._on_cache = True
                where = f"MCP {cached.revision}" if cached.revision else "the HTTP+SSE transport"
                note = f"cache: this server was {cached.era} ({where}); trying that first"
                if cached.era == "modern":
                    return _Decision(verdict=_V.START_MODERN, note=note, version=cached.revision)
                if cached.era == "legacy":
                    return _Decision(verdict=_V.START_LEGACY, note=note)
                return _Decision(verdict=_V.START_SSE, note=note)
            self._note(f"cache: the entry ({cached.era}, {cached.revision}) does not fit this probe; ignored")
        if config.modern:
            return _Decision(verdict=_V.START_MODERN, note="start: modern first", version=config.modern[0])
        # ProbeConfig refuses an empty preference list, so without modern there is legacy
        return _Decision(verdict=_V.START_LEGACY, note="start: mcpx is configured for legacy revisions only")

    def _decide(self, decision: _Decision) -> None:
        verdict = decision.verdict
        if (
            self._on_cache
            and verdict in _CACHE_FAILURES
            and self._state in (_S.INITIALIZING, _S.OPENING_SSE)
            and self.config.modern
        ):
            verdict = _V.STALE
        effect, new_state = self._lookup(verdict)
        if effect in _SENDING and self._requests >= self.config.max_requests:
            verdict = _V.GIVE_UP
            effect, new_state = self._lookup(verdict)
        elif effect in _NEEDS_LEGACY and self._legacy_offer(decision) is None:
            verdict = _V.NO_LEGACY
            effect, new_state = self._lookup(verdict)
        elif (effect == "_restart_then_initialize" or (effect == "_start_fresh" and self._closed)) and (
            self._restarts >= self.config.max_restarts
        ):
            verdict = _V.GIVE_UP
            effect, new_state = self._lookup(verdict)
        self._note(decision.note)
        self._end_wait(keep_open=verdict is _V.ENDPOINT)
        if new_state is not self._state and self._state is not _S.IDLE:
            self._on_cache = False  # the path has left the cached era
        self._state = new_state
        getattr(self, effect)(decision, verdict)

    def _lookup(self, verdict: _Verdict) -> tuple[str, ProbeState]:
        try:
            return _TRANSITIONS[(self._state, verdict)]
        except KeyError:  # the judges only produce verdicts the table has; a miss is a bug here
            raise LocalProtocolError(
                f"no transition for {verdict.name} in state {self._state.value}"
            ) from None

    def _end_wait(self, *, keep_open: bool) -> None:
        wait, self._wait = self._wait, None
        if wait is not None and wait.token is not None and not wait.complete and not keep_open:
            self._actions.append(CloseResponse(token=wait.token))

    # -- effects ------------------------------------------------------------

    def _next_id(self) -> str:
        return f"{self.config.id_prefix}{next(self._ids)}"

    def _limit(self, what: str) -> float:
        """How long the probe waits for the answer to ``what``.

        ``timeout`` (the daemon's ``pool.startTimeout``), except for
        ``server/discover`` on stdio: a legacy server may ignore a method it
        does not know (MCP 2025-11-25 basic/lifecycle has no such method), so
        after ``discover_silence`` the probe offers ``initialize`` instead.  A
        server that is only slow to start loses nothing: it reads both
        requests once it is up, and its answer to ``initialize`` (a legacy or
        dual-era server's session, or a modern-only server's refusal, after
        which ``server/discover`` is tried once more) settles the era.
        """
        if what == "server/discover" and self.transport == "stdio":
            return min(self.config.timeout, self.config.discover_silence)
        return self.config.timeout

    def _send_discover(self, decision: _Decision, verdict: _Verdict) -> None:
        version = decision.version
        if version is None or (version in self._tried_modern and version not in self._silent_modern):
            version = next(r for r in self.config.modern if r not in self._tried_modern)
        self._silent_modern.discard(version)  # one more try at most
        self._tried_modern.add(version)
        self._last_discover = version
        self._requests += 1
        meta = {
            META_PROTOCOL_VERSION: str(version),
            META_CLIENT_CAPABILITIES: downgrade(self.config.capabilities, "ClientCapabilities", version),
            META_CLIENT_INFO: downgrade(self.config.client_info, "Implementation", version),
        }
        request_id = self._next_id()
        message = {"jsonrpc": "2.0", "id": request_id, "method": "server/discover", "params": {"_meta": meta}}
        wait = _Wait(
            what="server/discover",
            deadline=self._now + self._limit("server/discover"),
            limit=self._limit("server/discover"),
            request_id=request_id,
            version=version,
        )
        limit = f"wait up to {wait.limit:g}s"
        if self.transport == "stdio":
            self._actions.append(SendMessage(payload=orjson.dumps(message)))
            self._note(f"send server/discover as MCP {version} (id {request_id}) on stdio; {limit}")
        else:
            self._post(
                wait, message, (("MCP-Protocol-Version", str(version)), ("Mcp-Method", "server/discover"))
            )
            self._note(
                f"send POST {self.path or '(the server URL)'}: server/discover as MCP {version} "
                f"(id {request_id}; MCP-Protocol-Version: {version}, Mcp-Method: server/discover); {limit}"
            )
        self._wait = wait

    def _post(self, wait: _Wait, message: Mapping[str, Any], extra: Headers) -> None:
        """POST ``message`` as the answer ``wait`` waits for (a fresh token names it)."""
        wait.token = next(self._tokens)
        headers = (
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            *extra,
        )
        self._actions.append(
            HttpRequest(
                token=wait.token, method="POST", path=self.path, headers=headers, body=orjson.dumps(message)
            )
        )

    def _legacy_offer(self, decision: _Decision) -> Revision | None:
        if decision.verdict is _V.OTHER_LEGACY:
            return decision.version
        pool = decision.hint if decision.hint is not None else self._legacy_hint
        if pool is None:
            pool = self.config.legacy
        return next((r for r in self.config.legacy if r in pool and r not in self._offered_legacy), None)

    def _send_initialize(self, decision: _Decision, verdict: _Verdict) -> None:
        if decision.hint is not None:
            self._legacy_hint = decision.hint
        offer = self._legacy_offer(decision)
        assert offer is not None  # _decide checked
        self._offered_legacy.add(offer)
        self._requests += 1
        request_id = self._next_id()
        params = {
            "protocolVersion": str(offer),
            "capabilities": downgrade(self.config.capabilities, "ClientCapabilities", offer),
            "clientInfo": downgrade(self.config.client_info, "Implementation", offer),
        }
        message = {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}
        wait = _Wait(
            what="initialize",
            deadline=self._now + self.config.timeout,
            limit=self.config.timeout,
            request_id=request_id,
            version=offer,
        )
        limit = f"wait up to {wait.limit:g}s"
        if self.transport == "stdio":
            self._actions.append(SendMessage(payload=orjson.dumps(message)))
            self._note(f"send initialize offering MCP {offer} (id {request_id}) on stdio; {limit}")
        else:
            self._post(wait, message, ())
            self._note(
                f"send POST {self.path or '(the server URL)'}: initialize offering MCP {offer} "
                f"(id {request_id}); {limit}"
            )
        self._wait = wait

    def _restart_then_initialize(self, decision: _Decision, verdict: _Verdict) -> None:
        self._restart("the server's process ended while probing")
        self._send_initialize(decision, verdict)

    def _restart(self, reason: str) -> None:
        self._restarts += 1
        self._closed = False
        self._actions.append(Reconnect(reason=reason))
        self._note(
            f"send nothing: {reason}; start the server again ({self._restarts}/{self.config.max_restarts})"
        )

    def _open_sse(self, decision: _Decision, verdict: _Verdict) -> None:
        self._requests += 1
        token = next(self._tokens)
        self._actions.append(OpenSse(token=token, path=self.sse_path))
        self._wait = _Wait(
            what="GET", deadline=self._now + self.config.timeout, limit=self.config.timeout, token=token
        )
        self._note(
            f"send GET {self.sse_path or '(the server URL)'} (Accept: text/event-stream), "
            f"expecting a 2024-11-05 HTTP+SSE endpoint event; wait up to {self.config.timeout:g}s"
        )

    def _start_fresh(self, decision: _Decision, verdict: _Verdict) -> None:
        assert self.cached is not None
        self._note(f"cache: the cached era ({self.cached.era}) did not work; probing afresh, modern first")
        self._on_cache = False
        self._tried_modern.clear()
        self._offered_legacy.clear()
        self._legacy_hint = None
        if self._closed:
            self._restart("the server's process ended")
        self._send_discover(_Decision(verdict=_V.START_MODERN, note=""), verdict)

    def _done_modern(self, decision: _Decision, verdict: _Verdict) -> None:
        version = decision.version
        assert version is not None
        result = decision.result
        capabilities: Mapping[str, Any] | None = None
        server_info: Mapping[str, Any] | None = None
        instructions: str | None = None
        supported: tuple[str, ...] = ()
        if result is not None:
            caps = result.get("capabilities")
            capabilities = caps if isinstance(caps, dict) else {}
            meta = result.get("_meta")
            info = meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None
            server_info = info if isinstance(info, dict) else None
            text = result.get("instructions")
            instructions = text if isinstance(text, str) else None
            supported = _versions(result.get("supportedVersions")) or ()
        self._note(f"decide: modern era, MCP {version}")
        self._finish(
            ProbeDone(
                era="modern",
                revision=version,
                capabilities=capabilities,
                server_info=server_info,
                instructions=instructions,
                supported=supported,
                result=result,
                cache=self._cache_verdict("modern"),
            )
        )

    def _done_legacy(self, decision: _Decision, verdict: _Verdict) -> None:
        version, result = decision.version, decision.result
        assert version is not None and result is not None
        caps = result.get("capabilities")
        info = result.get("serverInfo")
        text = result.get("instructions")
        if self.config.send_initialized:
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            if self.transport == "stdio":
                self._actions.append(SendMessage(payload=orjson.dumps(note)))
            else:
                headers: list[tuple[str, str]] = [
                    ("Accept", "application/json, text/event-stream"),
                    ("Content-Type", "application/json"),
                ]
                # Every request after initialize states the revision (2025-06-18
                # basic/transports, Protocol Version Header).
                if version >= _R25B:
                    headers.append(("MCP-Protocol-Version", str(version)))
                if decision.session_id is not None:
                    headers.append(("Mcp-Session-Id", decision.session_id))
                self._actions.append(
                    HttpRequest(
                        token=next(self._tokens),
                        method="POST",
                        path=self.path,
                        headers=tuple(headers),
                        body=orjson.dumps(note),
                    )
                )
            self._note("send notifications/initialized")
        session = f", session {decision.session_id}" if decision.session_id else ""
        self._note(f"decide: legacy era, MCP {version}{session}")
        self._finish(
            ProbeDone(
                era="legacy",
                revision=version,
                capabilities=caps if isinstance(caps, dict) else {},
                server_info=info if isinstance(info, dict) else None,
                instructions=text if isinstance(text, str) else None,
                session_id=decision.session_id,
                result=result,
                cache=self._cache_verdict("legacy"),
            )
        )

    def _done_sse(self, decision: _Decision, verdict: _Verdict) -> None:
        assert decision.endpoint is not None and decision.token is not None
        self._note(f"decide: legacy era over the 2024-11-05 HTTP+SSE transport; POST to {decision.endpoint}")
        self._finish(
            ProbeDone(
                era="legacy-sse",
                revision=None,
                endpoint=decision.endpoint,
                sse_token=decision.token,
                cache=self._cache_verdict("legacy-sse"),
            )
        )

    def _fail(self, decision: _Decision, verdict: _Verdict) -> None:
        reason = self._failure_reason(decision, verdict)
        self._note(f"decide: no era works: {reason}")
        self._finish(ProbeFailed(reason=reason, cache=self._cache_verdict(None)))

    def _finish(self, outcome: ProbeDone | ProbeFailed) -> None:
        self._wait = None
        outcome = replace(outcome, trace=self._full_trace())
        self._state = ProbeState.DONE if isinstance(outcome, ProbeDone) else ProbeState.FAILED
        self._outcome = outcome
        self._actions.append(outcome)

    def _failure_reason(self, decision: _Decision, verdict: _Verdict) -> str:
        if decision.failure is not None and verdict is not _V.GIVE_UP:
            return decision.failure
        timeout = f"{self.config.timeout:g}s"
        speaks = ", ".join(self.config.revisions)
        heard = "; ".join(f"{what} got {got}" for what, got in self._heard.items())
        if verdict is _V.GIVE_UP:
            if self._restarts >= self.config.max_restarts and self.transport == "stdio":
                return (
                    f"The server's process ended {self._restarts + 1} times while being probed ({heard}). "
                    "Run its command by hand and read what it writes on stderr."
                )
            return (
                f"The probe sent {self._requests} requests without settling on an era ({heard}). "
                "This looks like a server bug; report it to the server's authors with this trace."
            )
        if verdict is _V.NO_LEGACY and self.config.legacy:
            return (
                f"The server is not a modern (2026-07-28) server ({heard}), and every legacy revision it "
                "and mcpx have in common was offered and refused. Read the server's log."
            )
        if verdict is _V.NO_LEGACY:
            return (
                f"The server does not answer as a modern (2026-07-28) server ({heard}), and mcpx is "
                f"configured to speak only {speaks}. Allow a legacy revision to reach this server."
            )
        if verdict is _V.CLOSED and self.transport == "stdio":
            return (
                f"The server's process ended before it answered the probe's requests ({heard}). Read "
                "what it wrote on stderr, or run its command by hand."
            )
        if verdict is _V.NO_ANSWER:
            if self.transport == "stdio":
                return (
                    f"The server answered none of the probe's requests ({heard}). Check that the command "
                    "starts an MCP server that writes JSON-RPC on stdout (run it by hand and read its "
                    f"stderr); if it is only slow to start, raise {self.config.timeout_setting} (now {timeout})."
                )
            return (
                f"The server at {self.path or 'the configured URL'} did not answer in time ({heard}). "
                f"Check that it is up and that the URL names its MCP endpoint; if it is only slow, raise "
                f"{self.config.timeout_setting} (now {timeout})."
            )
        if verdict is _V.NO_SSE:
            return (
                f"Nothing at {self.path or 'the configured URL'} speaks MCP ({heard}). Check the URL: it "
                "should name the server's MCP endpoint (often /mcp), or its HTTP+SSE endpoint (often /sse) "
                "for a 2024-11-05 server."
            )
        return f"The probe could not settle on an era ({heard})."

    # -- inputs: stdio ------------------------------------------------------

    def _stdio_value(self, value: Any) -> None:
        items = value if isinstance(value, list) else [value]
        for item in items[:_MAX_ITEMS]:
            wait = self._wait
            if wait is None:
                return
            try:
                message = parse_message(item)
            except InvalidMessage as exc:
                self._note(f"recv something that is not a JSON-RPC message, ignored: {_short(exc.message)}")
                continue
            if isinstance(message, Request):
                self._answer_server_request(message)
            elif isinstance(message, Notification):
                self._note(f"recv notification {_short(message.method, 60)} while probing, ignored")
            elif message.id == wait.request_id or (isinstance(message, ErrorResponse) and message.id is None):
                self._decide(self._judge(message, wait, status=None, headers=()))
            else:
                self._note(
                    f"recv an answer to id {_short(message.id, 60)}, not to {wait.request_id}; ignored"
                )

    def _answer_server_request(self, request: Request) -> None:
        # Before initialize a legacy server may ping; anything else waits for the session.
        if request.method == "ping":
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id, "result": {}}
            self._note("recv ping from the server; answered")
        else:
            error = {"code": INVALID_REQUEST, "message": "mcpx has not finished connecting to this server"}
            reply = {"jsonrpc": "2.0", "id": request.id, "error": error}
            self._note(f"recv request {_short(request.method, 60)} from the server while probing; refused")
        try:
            payload = orjson.dumps(reply)
        except TypeError:  # an integer id JSON allows but no 64-bit peer can read back: no answer
            self._note("the request's id cannot be written back; not answered")
            return
        self._actions.append(SendMessage(payload=payload))

    def _transport_closed(self, event: TransportClosed) -> None:
        wait = self._wait
        if wait is None:
            return
        why = f" ({_short(event.reason, 80)})" if event.reason else ""
        if self.transport == "stdio":
            self._closed = True
            self._heard[wait.what] = f"the process ended{why}"
            self._decide(
                _Decision(verdict=_V.CLOSED, note=f"recv end of output: the server's process ended{why}")
            )
            return
        if event.token is None or event.token != wait.token:
            return
        wait.complete = True  # nothing more will arrive; there is nothing to close
        self._heard[wait.what] = f"a closed connection{why}"
        self._decide(self._no_answer(wait, f"recv a closed connection instead of an answer{why}"))

    # -- inputs: HTTP -------------------------------------------------------

    def _http_head(self, event: HttpAnswered) -> None:
        wait = self._wait
        if wait is None or wait.token != event.token:
            self._note(f"recv an HTTP answer to request {event.token}, which nothing waits for; ignored")
            return
        if wait.status is not None:
            raise LocalProtocolError(f"the answer to request {event.token} was already reported")
        wait.status, wait.headers, wait.complete = event.status, event.headers, event.complete
        self._absorb(wait, event.body, end=event.complete)

    def _http_body(self, event: HttpBody) -> None:
        wait = self._wait
        if wait is None or wait.token != event.token:
            return
        if wait.status is None or wait.complete:
            raise LocalProtocolError(f"body for request {event.token} without an open answer head")
        end = event.data == b""
        wait.complete = end
        self._absorb(wait, event.data, end=end)

    def _describe(self, wait: _Wait) -> str:
        kind = _header(wait.headers, "content-type") or "no content type"
        return f"HTTP {wait.status} ({_short(kind, 60)})"

    def _absorb(self, wait: _Wait, data: bytes, *, end: bool) -> None:
        status = wait.status
        assert status is not None
        described = self._describe(wait)
        if status in _AUTH_STATUSES:
            self._heard[wait.what] = described
            failure = (
                f"The server answered {wait.what} with HTTP {status}: it wants credentials, or refuses "
                "these. Configure auth for this server (bearer, basic, header, query or env) and probe again."
            )
            self._decide(_Decision(verdict=_V.AUTH, note=f"recv {described}", failure=failure))
            return
        event_stream = (_header(wait.headers, "content-type") or "").split(";")[0].strip().lower()
        if wait.what == "GET":
            self._absorb_sse_stream(wait, data, end=end, is_sse=event_stream == "text/event-stream")
            return
        if event_stream == "text/event-stream":
            if wait.decoder is None:
                wait.decoder = SseDecoder(max_event=self.config.max_body)
            try:
                events = wait.decoder.feed(data)
            except SseError:
                self._heard[wait.what] = f"{described}, an event over {self.config.max_body} bytes"
                self._decide(self._no_answer(wait, f"recv {described} with an event too large to read"))
                return
            for sse in events:
                if sse.event != "message" or not sse.data:
                    continue
                try:
                    value = orjson.loads(sse.data)
                except orjson.JSONDecodeError:
                    continue
                answer = self._find_answer(value, wait)
                if answer is not None:
                    self._heard[wait.what] = f"{described}, {self._summary(answer)}"
                    self._decide(self._judge(answer, wait, status=status, headers=wait.headers))
                    return
            if end:
                self._heard[wait.what] = f"{described}, a stream without the answer"
                self._decide(self._no_answer(wait, f"recv {described}: the stream ended without an answer"))
            return
        wait.body += data
        if len(wait.body) > self.config.max_body:
            self._heard[wait.what] = f"{described}, a body over {self.config.max_body} bytes"
            self._decide(self._no_answer(wait, f"recv {described} with a body too large to read"))
            return
        if not end:
            return
        body = bytes(wait.body)
        try:
            answer = self._find_answer(orjson.loads(body), wait) if body else None
        except orjson.JSONDecodeError:
            answer = None
        if answer is None:
            what = "an empty body" if not body else "a body that is not a JSON-RPC answer"
            self._heard[wait.what] = f"{described}, {what}"
            shown = f": {_short(body.decode('utf-8', 'replace'), 80)}" if body else ""
            self._decide(self._no_answer(wait, f"recv {described} with {what}{shown}"))
            return
        self._heard[wait.what] = f"{described}, {self._summary(answer)}"
        self._decide(self._judge(answer, wait, status=status, headers=wait.headers))

    def _absorb_sse_stream(self, wait: _Wait, data: bytes, *, end: bool, is_sse: bool) -> None:
        described = self._describe(wait)
        if wait.status != 200 or not is_sse:
            self._heard["GET"] = described
            self._decide(_Decision(verdict=_V.NO_SSE, note=f"recv {described}: not an HTTP+SSE stream"))
            return
        if wait.decoder is None:
            wait.decoder = SseDecoder(max_event=self.config.max_body)
        try:
            events = wait.decoder.feed(data)
        except SseError:
            self._heard["GET"] = f"{described}, an event over {self.config.max_body} bytes"
            self._decide(_Decision(verdict=_V.NO_SSE, note=f"recv {described} with an event too large"))
            return
        for sse in events:
            if sse.event != "endpoint":
                self._note(f"recv SSE event {_short(sse.event, 40)} before the endpoint event; ignored")
                continue
            uri = sse.data.strip()
            # 2024-11-05 "HTTP with SSE": relative to the SSE URL, and never on another origin
            endpoint = resolve_endpoint(self.sse_path, uri)
            if endpoint is None:
                self._heard["GET"] = f"{described}, an unusable endpoint event"
                self._decide(
                    _Decision(
                        verdict=_V.NO_SSE,
                        note=f"recv an endpoint event naming {_short(uri, 80)!s}: not a URI on the SSE URL's origin",
                    )
                )
                return
            self._decide(
                _Decision(
                    verdict=_V.ENDPOINT,
                    note=f"recv endpoint event: {_short(uri, 200)}",
                    endpoint=endpoint,
                    token=wait.token,
                )
            )
            return
        if end:
            self._heard["GET"] = f"{described}, a stream that ended before its endpoint event"
            self._decide(
                _Decision(verdict=_V.NO_SSE, note="recv the end of the stream before an endpoint event")
            )

    def _find_answer(self, value: Any, wait: _Wait) -> Response | ErrorResponse | None:
        items = value if isinstance(value, list) else [value]
        for item in items[:_MAX_ITEMS]:
            try:
                message = parse_message(item)
            except InvalidMessage:
                continue
            if isinstance(message, Response) and message.id == wait.request_id:
                return message
            if isinstance(message, ErrorResponse) and message.id in (wait.request_id, None):
                return message
        return None

    @staticmethod
    def _summary(answer: Response | ErrorResponse) -> str:
        if isinstance(answer, ErrorResponse):
            return f"error {answer.code} ({_short(answer.message, 60)})"
        return "a result"

    def _no_answer(self, wait: _Wait, note: str) -> _Decision:
        """What an unusable answer means at the step that got it."""
        if wait.what == "server/discover":
            return _Decision(verdict=_V.NOT_MODERN, note=f"{note}; not a modern answer: try initialize")
        if wait.what == "initialize":
            return _Decision(
                verdict=_V.NOT_STREAMABLE, note=f"{note}; not Streamable HTTP: try the HTTP+SSE transport"
            )
        return _Decision(verdict=_V.NO_SSE, note=note)

    # -- judging answers ----------------------------------------------------

    def _judge(
        self, answer: Response | ErrorResponse, wait: _Wait, *, status: int | None, headers: Headers
    ) -> _Decision:
        if wait.what == "server/discover":
            return self._judge_discover(answer, wait)
        return self._judge_initialize(answer, wait, status=status, headers=headers)

    def _known(self, listed: tuple[str, ...]) -> set[Revision]:
        return {Revision(v) for v in listed if v in self._spoken}

    @property
    def _spoken(self) -> frozenset[str]:
        return frozenset(str(r) for r in self.config.revisions)

    def _judge_discover(self, answer: Response | ErrorResponse, wait: _Wait) -> _Decision:
        sent = wait.version
        assert sent is not None
        if isinstance(answer, Response):
            self._heard.setdefault("server/discover", "a result")
            listed = _versions(answer.result.get("supportedVersions"))
            if listed is None:
                why = "no supportedVersions list"
                if "protocolVersions" in answer.result:
                    why += " (it has protocolVersions, which is not the DiscoverResult field)"
                self._heard["server/discover"] = f"a result with {why}"
                return _Decision(
                    verdict=_V.NOT_MODERN,
                    note=f"recv a result with {why}: not a DiscoverResult; try initialize",
                )
            note = f"recv a DiscoverResult: supportedVersions {list(listed)}"
            if sent in self._known(listed):
                return _Decision(verdict=_V.DISCOVERED, note=note, version=sent, result=answer.result)
            return self._pick(listed, note, source="supportedVersions")
        code, data = answer.code, answer.data
        head = f"recv error {code} ({_short(answer.message, 80)})"
        self._heard["server/discover"] = f"error {code} ({_short(answer.message, 60)})"
        if code == UNSUPPORTED_PROTOCOL_VERSION and isinstance(data, dict):
            listed = _versions(data.get("supported"))
            if listed is not None:
                return self._pick(listed, f"{head}: supported {list(listed)}", source="-32022")
        if code == HEADER_MISMATCH or (
            code == MISSING_REQUIRED_CLIENT_CAPABILITY
            and isinstance(data, dict)
            and isinstance(data.get("requiredCapabilities"), dict)
        ):
            return _Decision(
                verdict=_V.MODERN_REFUSAL,
                note=f"{head}: a modern refusal, so the server is modern; its capabilities are not known yet",
                version=sent,
            )
        return _Decision(
            verdict=_V.NOT_MODERN, note=f"{head}: not a recognised modern answer; try initialize"
        )

    def _pick(self, listed: tuple[str, ...], note: str, *, source: str) -> _Decision:
        known = self._known(listed)
        modern = [r for r in self.config.modern if r in known and r not in self._tried_modern]
        if modern:
            return _Decision(
                verdict=_V.OTHER_MODERN,
                note=f"{note}: retry server/discover as MCP {modern[0]}",
                version=modern[0],
            )
        legacy = tuple(r for r in self.config.legacy if r in known)
        if legacy:
            return _Decision(
                verdict=_V.NOT_MODERN,
                note=f"{note}: no modern revision in common; try initialize offering {legacy[0]}",
                hint=legacy,
            )
        refused = [str(r) for r in self.config.modern if r in known]
        if refused:
            failure = (
                f"The server refused MCP {', '.join(refused)} although it lists it ({source}: "
                f"{', '.join(listed)}). This is a server bug; report it to the server's authors with this trace."
            )
        else:
            failure = (
                f"The server speaks {', '.join(listed)} ({source}); mcpx speaks "
                f"{', '.join(self.config.revisions)}, so there is no revision in common. Upgrade mcpx, or "
                "configure the server to speak a revision mcpx knows."
            )
        return _Decision(
            verdict=_V.NO_COMMON_VERSION, note=f"{note}: nothing left in common", failure=failure
        )

    def _judge_initialize(
        self, answer: Response | ErrorResponse, wait: _Wait, *, status: int | None, headers: Headers
    ) -> _Decision:
        offered = wait.version
        assert offered is not None
        if isinstance(answer, Response):
            self._heard.setdefault("initialize", "a result")
            picked = answer.result.get("protocolVersion")
            if isinstance(picked, str) and picked in {str(r) for r in self.config.legacy}:
                version = Revision(picked)
                how = "accepted" if version == offered else f"a counter-offer to {offered}, accepted"
                session_id = _header(headers, "mcp-session-id")
                if session_id is not None and not (
                    session_id and all("\x21" <= ch <= "\x7e" for ch in session_id)
                ):
                    failure = (
                        f"The server's Mcp-Session-Id {_short(session_id, 40)} is not visible ASCII, so it "
                        "cannot be sent back. This is a server bug; report it to the server's authors."
                    )
                    return _Decision(
                        verdict=_V.REFUSED, note="recv an unusable Mcp-Session-Id", failure=failure
                    )
                info = answer.result.get("serverInfo")
                name = (
                    f"; serverInfo {_short(info.get('name'), 40)} {_short(info.get('version'), 20)}"
                    if isinstance(info, dict)
                    else ""
                )
                return _Decision(
                    verdict=_V.INITIALIZED,
                    note=f"recv an InitializeResult: protocolVersion {picked} ({how}){name}",
                    version=version,
                    result=answer.result,
                    session_id=session_id,
                )
            failure = (
                f"The server answered initialize with protocolVersion {_short(picked, 40)}, which is not a "
                f"legacy revision mcpx speaks ({', '.join(self.config.legacy)}). Configure the server for "
                "one of those, or upgrade mcpx."
            )
            return _Decision(
                verdict=_V.REFUSED,
                note=f"recv protocolVersion {_short(picked, 40)}: unusable",
                failure=failure,
            )
        head = f"recv error {answer.code} ({_short(answer.message, 80)})"
        self._heard["initialize"] = f"error {answer.code} ({_short(answer.message, 60)})"
        data = answer.data
        listed = _versions(data.get("supported")) if isinstance(data, dict) else None
        if listed is not None:
            known = self._known(listed)
            legacy = [r for r in self.config.legacy if r in known and r not in self._offered_legacy]
            if legacy:
                return _Decision(
                    verdict=_V.OTHER_LEGACY,
                    note=f"{head}: supported {list(listed)}; offer {legacy[0]}",
                    version=legacy[0],
                )
            modern = [
                r
                for r in self.config.modern
                if r in known and (r not in self._tried_modern or r in self._silent_modern)
            ]
            if modern:
                return _Decision(
                    verdict=_V.MODERN_HINT,
                    note=f"{head}: supported {list(listed)}, a modern server; try server/discover as {modern[0]}",
                    version=modern[0],
                )
        modern_code = answer.code in (
            HEADER_MISMATCH,
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            UNSUPPORTED_PROTOCOL_VERSION,
        )
        if self.transport == "http" and status in _NOT_STREAMABLE_STATUSES and not modern_code:
            return _Decision(
                verdict=_V.NOT_STREAMABLE,
                note=f"{head} with HTTP {status}: not Streamable HTTP; try the HTTP+SSE transport",
            )
        failure = (
            f"The server refused initialize: error {answer.code} ({_short(answer.message, 120)}). "
            f"mcpx offered MCP {offered} and speaks {', '.join(self.config.revisions)}; read the server's "
            "log, or pin the server to one of those revisions."
        )
        return _Decision(verdict=_V.REFUSED, note=f"{head}: initialize refused", failure=failure)


# --------------------------------------------------------------------------
# The cache
# --------------------------------------------------------------------------

_KEY_FIELDS_STDIO: Final = ("command", "args", "env", "cwd")
_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True, kw_only=True)
class EraEntry:
    """What the cache remembers of a probe: the era, the revision, and when (wall-clock seconds)."""

    era: EraName
    revision: Revision | None
    at: float

    def __post_init__(self) -> None:
        _check_era(self.era, self.revision)
        if isinstance(self.at, bool) or not isinstance(self.at, int | float) or not math.isfinite(self.at):
            raise ValueError("at is a finite number of seconds")

    @classmethod
    def from_outcome(cls, done: ProbeDone, now: float) -> EraEntry:
        return cls(era=done.era, revision=done.revision, at=now)

    def to_obj(self) -> dict[str, Any]:
        return {
            "era": self.era,
            "revision": None if self.revision is None else str(self.revision),
            "at": self.at,
        }

    @classmethod
    def from_obj(cls, obj: Any) -> EraEntry | None:
        """The entry ``obj`` describes, or ``None`` if it describes none."""
        if not isinstance(obj, dict):
            return None
        era, revision, at = obj.get("era"), obj.get("revision"), obj.get("at")
        if era not in ERAS or (revision is not None and revision not in {str(r) for r in REVISIONS}):
            return None
        if isinstance(at, bool) or not isinstance(at, int | float):
            return None
        try:
            return cls(era=era, revision=None if revision is None else Revision(revision), at=at)
        except (ValueError, TypeError):
            return None


class EraCache:
    """The era of each server configuration, in memory and as the bytes of ``upstream-eras.json``.

    Keys are ``EraCache.key(config)``: a SHA-256 of what identifies a server
    (see ``key``), so the file names no command, URL or secret.  The cache is
    bounded: past ``max_entries`` the oldest entries go.
    """

    FILE_NAME: Final = "upstream-eras.json"
    FORMAT: Final = 1

    def __init__(self, *, max_entries: int = 512) -> None:
        if max_entries < 1:
            raise ValueError("max_entries is at least 1")
        self.max_entries = max_entries
        self._entries: dict[str, EraEntry] = {}

    @staticmethod
    def key(config: Mapping[str, Any]) -> str:
        """A stable digest of what identifies a server.

        stdio: ``command``, ``args``, ``env`` and ``cwd`` (env is part of it
        because it can change what a server is; only the digest is ever
        stored).  HTTP: ``url`` with scheme and host lower-cased, a default
        port, user info and fragment dropped, and ``transport`` when the
        configuration forces one.  Auth settings (``auth``, ``headers``) and
        everything else are left out: credentials do not change a server's
        era, and a rotated token should not cost a probe.  ``ValueError`` when
        ``config`` names neither a command nor a URL.
        """
        identity: dict[str, Any]
        url = config.get("url")
        command = config.get("command")
        if isinstance(url, str) and url:
            identity = {"kind": "http", "url": _normal_url(url)}
            transport = config.get("transport")
            if isinstance(transport, str):
                identity["transport"] = transport
        elif isinstance(command, str) and command:
            args = config.get("args") or []
            env = config.get("env") or {}
            cwd = config.get("cwd")
            if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
                raise ValueError("args is a list of strings")
            if not isinstance(env, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in env.items()
            ):
                raise ValueError("env maps strings to strings")
            if cwd is not None and not isinstance(cwd, str):
                raise ValueError("cwd is a string")
            identity = {"kind": "stdio", "command": command, "args": list(args), "env": dict(env), "cwd": cwd}
        else:
            raise ValueError("a server configuration names a command or a url")
        canonical = orjson.dumps({"v": 1, **identity}, option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(canonical).hexdigest()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def items(self) -> list[tuple[str, EraEntry]]:
        return sorted(self._entries.items())

    def get(self, key: str) -> EraEntry | None:
        return self._entries.get(key)

    def put(self, key: str, outcome: ProbeDone | EraEntry, now: float) -> EraEntry:
        """Remember ``outcome`` for ``key`` as of ``now`` (wall-clock); returns the entry stored."""
        if not _HEX64.fullmatch(key):
            raise ValueError("a key is what EraCache.key returns")
        entry = EraEntry(era=outcome.era, revision=outcome.revision, at=now)
        self._entries[key] = entry
        if len(self._entries) > self.max_entries:
            oldest = sorted(self._entries.items(), key=lambda kv: (kv[1].at, kv[0]))
            for old, _ in oldest[: len(self._entries) - self.max_entries]:
                del self._entries[old]
        return entry

    def invalidate(self, key: str) -> bool:
        """Forget ``key`` (its era stopped working); whether there was an entry."""
        return self._entries.pop(key, None) is not None

    def record(self, key: str, outcome: ProbeDone | ProbeFailed, now: float) -> None:
        """What to do with a probe's outcome: remember a success, forget the entry of a failure."""
        if isinstance(outcome, ProbeDone):
            self.put(key, outcome, now)
        else:
            self.invalidate(key)

    def to_bytes(self) -> bytes:
        doc = {"format": self.FORMAT, "eras": {k: e.to_obj() for k, e in self.items()}}
        return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"

    @classmethod
    def from_bytes(cls, data: bytes, *, max_entries: int = 512) -> EraCache:
        """The cache ``data`` holds.  Never raises: corrupt data gives an empty cache, a bad entry is skipped."""
        cache = cls(max_entries=max_entries)
        try:
            doc = orjson.loads(data)
        except (orjson.JSONDecodeError, TypeError):
            return cache
        if (
            not isinstance(doc, dict)
            or doc.get("format") != cls.FORMAT
            or not isinstance(doc.get("eras"), dict)
        ):
            return cache
        for key, obj in doc["eras"].items():
            entry = EraEntry.from_obj(obj)
            if entry is not None and isinstance(key, str) and _HEX64.fullmatch(key):
                cache.put(key, entry, entry.at)
        return cache


def _normal_url(url: str) -> str:
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"  # IPv6 literal
    port = parts.port
    netloc = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
