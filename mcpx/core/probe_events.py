"""The era probe's configuration, the events its driver reports and the actions it carries out.

``mcpx.core.probe`` has the rules and the API (what a driver does with each
action, and reports as each event); this module holds the data: frozen,
slotted, keyword-only dataclasses, checked when built.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

import orjson

from .revisions import REVISIONS, Revision

EraName = Literal["modern", "legacy", "legacy-sse"]


CacheVerdict = Literal["none", "confirmed", "stale"]


ERAS: Final[tuple[str, ...]] = get_args(EraName)


_CACHE_VERDICTS: Final[tuple[str, ...]] = get_args(CacheVerdict)


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
