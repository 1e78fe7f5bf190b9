"""The Streamable HTTP client binding's configuration, its actions, and the header values it writes.

``mcpx.core.http_client`` has the rules.  ``HttpClientConfig`` is built
once per server URL and drops the extra headers that would name a protocol
or hop-by-hop field (``refused_headers``).  A 2026-07-28 ``Mcp-Name`` or
``Mcp-Param-*`` value that is not plain visible ASCII, has leading or
trailing spaces, or looks like the sentinel itself is sent as
``=?base64?…?=`` (2026-07-28 basic/transports/streamable-http).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from .http_wire import CloseConnection, SendBytes
from .revisions import Revision

MODERN: Final = Revision.V2026_07_28


_SENTINEL: Final = re.compile(r"=\?base64\?.*\?=\Z", re.IGNORECASE | re.DOTALL)


_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")


# Names the binding owns, and RFC 9110 §7.6.1 hop-by-hop names: never taken from config.headers.
_OWN_HEADERS: Final = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "accept",
        "user-agent",
        "last-event-id",
        "mcp-protocol-version",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)


_HEADER_TYPES: Final = frozenset({"string", "integer", "boolean"})


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpClientConfig:
    """One upstream MCP URL and how to talk to it.  ``host``/``port``/``tls`` are derived from ``url``."""

    url: str = field(repr=False)  # query-string auth may be in it
    modern: bool = False
    revision: Revision = MODERN  # 2026-07-28: the version stated when a body does not say
    user_agent: str = "mcpx"
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may carry credentials
    tool_headers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    max_body: int = 4 * 1024 * 1024
    max_event: int = 4 * 1024 * 1024
    max_header_bytes: int = 64 * 1024
    max_connections: int = 16
    max_idle: int = 4
    retry: float = 1.0  # seconds before resuming when the server sent no retry:
    max_retry: float = 300.0  # a server's retry: beyond this is capped
    max_resumes: int = 5
    # derived in __post_init__
    tls: bool = field(init=False, default=False)
    host: str = field(init=False, default="")
    port: int = field(init=False, default=0)
    authority: str = field(init=False, default="")
    target: str = field(init=False, default="/", repr=False)  # may carry query-string auth
    refused_headers: tuple[str, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        try:
            parts = urlsplit(self.url)
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"not a usable URL: {self.url!r} ({exc})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"an MCP server URL is http:// or https:// with a host, not {self.url!r}")
        if parts.username is not None or parts.password is not None:
            raise ValueError("put credentials in headers (Authorization), not in the URL")
        tls = parts.scheme == "https"
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        kept: list[tuple[str, str]] = []
        refused: list[str] = []
        for name, value in self.headers:
            if not _TOKEN.match(name) or any(ch in value for ch in "\r\n\0"):
                raise ValueError(f"header {name!r} is not a valid HTTP header")
            low = name.lower()
            if low in _OWN_HEADERS or low.startswith("mcp-"):
                refused.append(name)
            else:
                kept.append((name, value))
        if min(self.max_body, self.max_event, self.max_header_bytes, self.max_connections) < 1:
            raise ValueError("limits must be positive")
        set_ = object.__setattr__
        set_(self, "tls", tls)
        set_(self, "host", parts.hostname)
        set_(self, "port", port if port is not None else (443 if tls else 80))
        set_(self, "authority", parts.netloc)
        set_(self, "target", target)
        set_(self, "headers", tuple(kept))
        set_(self, "refused_headers", tuple(refused))


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenConnection:
    """Connect to ``config.host``:``config.port`` (TLS when ``config.tls``); report ``connection_made``."""

    conn: int


@dataclass(frozen=True, slots=True, kw_only=True)
class JsonReceived:
    """One JSON value (a message or a batch) for the client session; ``handle`` is the stream's call."""

    message: Any
    handle: int | None
    synthesized: bool = False  # an error mcpx made: the server's answer did not answer this request


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionExpired:
    """The server no longer knows ``session_id`` (HTTP 404): start a new session with ``initialize``."""

    session_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEnded:
    """A stream ended before all its answers; ``handle=None`` is the GET stream."""

    handle: int | None
    reason: str
    resuming: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRefused:
    """A POST of notifications or responses was refused (there is no call to fail)."""

    status: int
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Closed:
    """``close()`` is done: every connection is closed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExchangeHead:
    """The head of the answer to ``exchange(token, …)``: its status and headers, as the server sent them."""

    token: int
    status: int
    headers: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExchangeData:
    """Bytes of the body of the answer to ``exchange(token, …)``, as they came; ``b""`` once it ended."""

    token: int
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class ExchangeFailed:
    """``exchange(token, …)`` ended before its answer did (no connection, a malformed answer, a drop)."""

    token: int
    reason: str


HttpClientAction = (
    OpenConnection
    | SendBytes
    | CloseConnection
    | JsonReceived
    | SessionExpired
    | StreamEnded
    | RequestRefused
    | Closed
    | ExchangeHead
    | ExchangeData
    | ExchangeFailed
)


def encode_header_value(value: str) -> str:
    """A 2026-07-28 ``Mcp-Name``/``Mcp-Param-*`` value: as is when plain, else ``=?base64?…?=``."""
    plain = (
        all(0x20 <= ord(ch) <= 0x7E for ch in value)
        and not value.startswith(" ")
        and not value.endswith(" ")
        and not _SENTINEL.match(value)
    )
    if plain:
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8", "surrogatepass")).decode("ascii") + "?="


def _param_text(value: Any) -> str | None:
    """An argument's ``Mcp-Param-*`` value; None: not sent (2026-07-28 streamable-http, Value Encoding)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    return None


def tool_header_params(tool: Mapping[str, Any]) -> dict[str, str] | None:
    """``{argument: header name}`` for a tool's ``x-mcp-header`` annotations; None when invalid.

    A tool with an invalid annotation must be left out of ``tools/list`` by an
    HTTP client (2026-07-28 basic/transports/streamable-http, Schema
    Extension).  Only top-level properties are mapped.
    """
    schema = tool.get("inputSchema")
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return {}
    found: dict[str, str] = {}
    seen: set[str] = set()
    for argument, prop in props.items():
        if not isinstance(prop, Mapping) or "x-mcp-header" not in prop:
            continue
        header = prop["x-mcp-header"]
        if not isinstance(header, str) or not _TOKEN.match(header) or header.lower() in seen:
            return None
        if prop.get("type") not in _HEADER_TYPES:
            return None
        seen.add(header.lower())
        found[str(argument)] = header
    return found
