"""The HTTP+SSE client binding's configuration and actions, and where its ``endpoint`` event points.

``mcpx.core.sse_client`` has the rules.  ``resolve_endpoint`` reads the
``endpoint`` event's data as a URI reference against the SSE URL and keeps
it only on that URL's origin, since mcpx POSTs nowhere else (2024-11-05
basic/transports, "HTTP with SSE").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urljoin, urlsplit

from .http_client_actions import (
    Closed,
    HttpClientConfig,
    JsonReceived,
    OpenConnection,
    RequestRefused,
    StreamEnded,
)
from .http_wire import CloseConnection, SendBytes

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


_REASON_BYTES: Final = 4096  # of a refused GET's body: enough for the reason, never more


def _origin(url: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an absolute http(s) URL, default port filled in; None otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else _DEFAULT_PORTS[scheme]


def resolve_endpoint(sse_url: str, data: str) -> str | None:
    """Where the ``endpoint`` event ``data`` says to POST, or None when it names nothing usable.

    2024-11-05 "HTTP with SSE": the URI is resolved against the SSE URL
    (``/messages?session_id=1`` and ``messages?x`` and an absolute URL all
    work).  With an absolute ``sse_url`` the result must be http(s) on the
    same origin; with a relative one (a path, as in unit tests) the result
    must stay relative too, since its origin could not be compared.  A URI
    with white space or control characters inside is refused.
    """
    uri = data.strip()
    if not uri or any(ch.isspace() or not ch.isprintable() for ch in uri):
        return None
    try:
        resolved = urljoin(sse_url, uri) if sse_url else uri
        parts = urlsplit(resolved)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return None
    base = _origin(sse_url)
    if base is None:  # a relative base: only a relative result can be checked, and it is same-origin
        return resolved if not parts.scheme and not parts.netloc else None
    return resolved if _origin(resolved) == base else None


@dataclass(frozen=True, slots=True, kw_only=True)
class SseClientConfig:
    """The SSE URL of one 2024-11-05 server and how to talk to it.

    ``headers`` (auth) go on the GET and on every POST; protocol and
    hop-by-hop names are dropped as ``HttpClientConfig`` drops them (listed in
    ``refused_headers``).  ``host``/``port``/``tls``/``authority``/``target``
    are derived from ``url``.
    """

    url: str
    user_agent: str = "mcpx"
    headers: tuple[tuple[str, str], ...] = ()
    endpoint_timeout: float | None = 30.0
    max_event: int = 4 * 1024 * 1024
    max_body: int = 64 * 1024
    max_header_bytes: int = 64 * 1024
    max_queued: int = 1024
    # derived in __post_init__
    tls: bool = field(init=False, default=False)
    host: str = field(init=False, default="")
    port: int = field(init=False, default=0)
    authority: str = field(init=False, default="")
    target: str = field(init=False, default="/")
    refused_headers: tuple[str, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        # The URL and header rules are Streamable HTTP's: one place checks them.
        http = HttpClientConfig(url=self.url, headers=self.headers, user_agent=self.user_agent)
        if min(self.max_event, self.max_body, self.max_header_bytes, self.max_queued) < 1:
            raise ValueError("limits must be positive")
        if self.endpoint_timeout is not None and not self.endpoint_timeout > 0:
            raise ValueError("endpoint_timeout is a positive number of seconds, or None")
        set_ = object.__setattr__
        for name in ("tls", "host", "port", "authority", "target", "headers", "refused_headers"):
            set_(self, name, getattr(http, name))


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointReady:
    """The stream named its endpoint: messages are POSTed to ``url`` (absolute, same origin)."""

    url: str


SseClientAction = (
    OpenConnection
    | SendBytes
    | CloseConnection
    | EndpointReady
    | JsonReceived
    | RequestRefused
    | StreamEnded
    | Closed
)
