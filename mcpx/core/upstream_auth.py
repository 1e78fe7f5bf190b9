"""Per-server upstream auth: an ``auth`` block in, the headers, query or environment to add out, pure.

Every connection mcpx makes to a configured upstream carries the same
credentials (spec/configuration.md, "Upstream auth"; spec/client.md §8): each
request of an HTTP connection — POST, the GET stream, the closing DELETE —
gets the same extra headers and query parameters, and a spawned (stdio) server
gets extra environment variables.  This module turns the ``auth`` block of a
server's configuration into that one frozen value;
``mcpx.client.connect_http(auth=...)`` applies it and
``mcpx.config.UpstreamServer.process_env()`` merges its variables.

Nothing here does I/O: the gateway's environment comes in as a ``Mapping``
(``environ``) for the ``...Env`` indirections, and is read once, when the block
is parsed.

Rules
-----
Types (``type`` is required)
    ``bearer``  ``token`` or ``tokenEnv`` → ``Authorization: Bearer <token>``.
    ``basic``   ``username`` + ``password`` or ``passwordEnv`` →
                ``Authorization: Basic <base64(user:password)>`` (RFC 7617, UTF-8).
    ``header``  ``name`` + ``value`` or ``valueEnv`` → ``<name>: <value>``.
    ``query``   ``name`` + ``value`` or ``valueEnv`` → ``?<name>=<value>``
                appended to the URL's own query, percent-encoded.
    ``env``     ``vars`` (name → value) and/or ``varsEnv`` (name → the name of
                a variable of mcpx's environment to copy) → variables of the
                spawned process.  Refused for HTTP servers, as the four HTTP
                types are refused for stdio servers: a credential that cannot
                reach its server is a configuration mistake, not a no-op.
    ``oauth``   refused: mcpx has no OAuth client (spec/client.md §8).
Exactly one of a literal and its ``...Env`` indirection; an indirection that
names an unset or empty variable is refused.  Unknown keys are refused.
Headers the transport owns are never taken from configuration
    Hop-by-hop and framing names (RFC 9110 §7.6.1: ``Connection``,
    ``Keep-Alive``, ``Proxy-*``, ``TE``, ``Trailer``, ``Transfer-Encoding``,
    ``Upgrade``; ``Host``, ``Content-Length``), the names the Streamable HTTP
    binding sets itself (``Accept``, ``Content-Type``, ``User-Agent``) and
    every MCP protocol header (``MCP-Protocol-Version``, ``Mcp-Session-Id``,
    ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``, any other ``Mcp-*``,
    ``Last-Event-ID``): their values follow from the protocol state of each
    request, so a configured value would be wrong on some request.
Secrets stay out of sight
    ``repr()``, ``describe()`` and every error message name the type, the
    header/parameter/variable names and where the secret came from — never a
    token, password or value.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

__all__ = [
    "AUTH_TYPES",
    "AuthConfigError",
    "SecretUnset",
    "Transport",
    "UpstreamAuth",
    "parse_auth",
    "refused_header_reason",
]

Transport = Literal["http", "stdio"]

AUTH_TYPES: Final[tuple[str, ...]] = ("bearer", "basic", "header", "query", "env")
"""The types mcpx implements; ``oauth`` is recognised only to be refused with a reason."""

_HTTP_TYPES: Final = frozenset({"bearer", "basic", "header", "query"})
_KEYS: Final[Mapping[str, frozenset[str]]] = {
    "bearer": frozenset({"type", "token", "tokenEnv"}),
    "basic": frozenset({"type", "username", "password", "passwordEnv"}),
    "header": frozenset({"type", "name", "value", "valueEnv"}),
    "query": frozenset({"type", "name", "value", "valueEnv"}),
    "env": frozenset({"type", "vars", "varsEnv"}),
}
# RFC 9110 §5.1 field-name = token
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# What h11 will put in a header value: visible ASCII and inner spaces/tabs.
_HEADER_VALUE: Final = re.compile(r"[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?\Z")
_BEARER_TOKEN: Final = re.compile(r"[\x21-\x7e]+\Z")

_HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length"}
)
_BINDING_OWNED: Final = frozenset({"accept", "content-type", "user-agent"})
_MCP_HEADERS: Final = frozenset(
    {"mcp-protocol-version", "mcp-session-id", "mcp-method", "mcp-name", "last-event-id"}
)


class AuthConfigError(ValueError):
    """An ``auth`` block (or a header in configuration) mcpx cannot use; the message says what to do.

    The message never contains a secret.
    """


class SecretUnset(AuthConfigError):
    """An ``...Env`` indirection names a variable that is unset (or empty) in the ``environ`` given.

    Not a mistake in the block itself: the variable may well be set where the
    server is started (the daemon's environment, not a client command's), so
    configuration readers report it as a warning and resolve the block again
    when the server starts (``mcpx.config.UpstreamServer.resolved``).
    ``variable`` is the name looked up.
    """

    def __init__(self, message: str, variable: str) -> None:
        super().__init__(message)
        self.variable = variable


def refused_header_reason(name: str) -> str | None:
    """Why ``name`` may not be set from configuration, or ``None`` when it may.

    Used for auth headers and for a server's ``headers`` map alike.
    """
    if not _TOKEN.match(name):
        return "is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)"
    low = name.lower()
    if low in _HOP_BY_HOP or low.startswith("proxy-"):
        return "is a hop-by-hop or framing header, which belongs to the connection, not to configuration"
    if low in _BINDING_OWNED:
        return "is set by mcpx's Streamable HTTP binding on every request"
    if low in _MCP_HEADERS or low.startswith("mcp-"):
        return "is an MCP protocol header; mcpx sets it from the protocol state of each request"
    return None


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class UpstreamAuth:
    """What to add to every connection to one upstream; build it with ``parse_auth``.

    ``headers`` and ``query`` go on every HTTP request (``connect_http(auth=)``
    adds them; ``apply_to_url`` appends the query); ``env`` goes into a
    spawned server's environment.  ``secret_from`` names where each secret
    came from (``"config"`` or ``"env NAME"``), for display.
    """

    type: str
    headers: tuple[tuple[str, str], ...] = ()
    query: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    secret_from: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        # Built by parse_auth, but validated here too, when built: a value that exists is usable.
        if self.type not in AUTH_TYPES:
            raise AuthConfigError(f"auth type {self.type!r} is not one of {_types()}")
        for name, _ in self.headers:
            reason = refused_header_reason(name)
            if reason is not None:
                raise AuthConfigError(f"header {name!r} {reason}")
        for name, _ in self.env:
            _check_env_name(name, "auth env")
        if (self.headers or self.query) and self.env:
            raise AuthConfigError(
                "an auth is for HTTP (headers, query) or for a spawned server (env), not both"
            )

    def __repr__(self) -> str:
        parts = [f"type={self.type!r}"]
        if self.headers:
            parts.append(f"headers={[name for name, _ in self.headers]!r}")
        if self.query:
            parts.append(f"query={[name for name, _ in self.query]!r}")
        if self.env:
            parts.append(f"env={[name for name, _ in self.env]!r}")
        parts.append(f"secret_from={list(self.secret_from)!r}")
        return f"UpstreamAuth({', '.join(parts)})"

    __str__ = __repr__

    @property
    def transport(self) -> Transport:
        """The kind of server this auth can reach."""
        return "stdio" if self.type == "env" else "http"

    def env_vars(self) -> dict[str, str]:
        """The variables to add to a spawned server's environment (``type: env``)."""
        return dict(self.env)

    def apply_to_url(self, url: str) -> str:
        """``url`` with this auth's query parameters appended (percent-encoded) to its own query.

        Raises ``ValueError`` (naming ``url``, which holds no secret yet) when
        ``url`` is not an http(s) URL with a host.
        """
        try:
            parts = urlsplit(url)
            _ = parts.port
        except ValueError as exc:
            raise ValueError(f"not a usable URL: {url!r} ({exc})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"an MCP server URL is http:// or https:// with a host, not {url!r}")
        if not self.query:
            return url
        extra = urlencode(self.query, quote_via=quote)
        query = f"{parts.query}&{extra}" if parts.query else extra
        return urlunsplit(parts._replace(query=query))

    def describe(self) -> dict[str, Any]:
        """JSON-ready and secret-free: the type, the names it sets and where the secrets come from."""
        return {
            "type": self.type,
            "headers": [name for name, _ in self.headers],
            "query": [name for name, _ in self.query],
            "env": [name for name, _ in self.env],
            "secretFrom": list(self.secret_from),
        }


def parse_auth(
    block: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    transport: Transport | None = None,
    where: str = "auth",
) -> UpstreamAuth:
    """Validate an ``auth`` block and resolve its ``...Env`` indirections against ``environ``.

    ``transport`` is the kind of server it belongs to (``"http"`` for a
    ``url``, ``"stdio"`` for a ``command``); a type that cannot reach that
    kind is refused.  ``where`` prefixes every message (e.g.
    ``servers.github.auth``).  Raises ``AuthConfigError`` with a message that
    says what to change; it never contains a secret.
    """
    if not isinstance(block, Mapping):
        raise AuthConfigError(
            f"{where} must be a table/object with a type ({_types()}), not {type(block).__name__}"
        )
    kind = block.get("type")
    if kind is None:
        raise AuthConfigError(f"{where} needs a type: one of {_types()}")
    if kind == "oauth":
        raise AuthConfigError(
            f"{where}: type oauth is not implemented — mcpx has no OAuth client yet. Obtain a token "
            f"yourself and use type bearer (token or tokenEnv), or one of {_types()}"
        )
    if not isinstance(kind, str) or kind not in _KEYS:
        raise AuthConfigError(f"{where}.type {kind!r} is not an auth type mcpx knows; use one of {_types()}")
    unknown = sorted(str(k) for k in block if k not in _KEYS[kind])
    if unknown:
        allowed = ", ".join(sorted(_KEYS[kind] - {"type"}))
        raise AuthConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)} for type {kind}; it takes {allowed}"
        )
    if transport == "http" and kind == "env":
        raise AuthConfigError(
            f"{where}: type env sets variables of a spawned (command) server; for a url server "
            "use bearer, basic, header or query"
        )
    if transport == "stdio" and kind in _HTTP_TYPES:
        raise AuthConfigError(
            f"{where}: type {kind} adds HTTP headers or query parameters, which a spawned (command) "
            "server never sees; use type env to pass the secret in its environment"
        )
    reader = _Reader(block, environ, where)
    if kind == "bearer":
        token = reader.secret("token")
        if not _BEARER_TOKEN.match(token):
            raise AuthConfigError(
                f"{where}: the bearer token ({reader.origin('token')}) must be visible ASCII without "
                "spaces; check that it was copied whole"
            )
        return UpstreamAuth(
            type=kind, headers=(("Authorization", f"Bearer {token}"),), secret_from=reader.sources
        )
    if kind == "basic":
        username = reader.plain("username")
        if ":" in username or not username.isprintable():
            raise AuthConfigError(
                f"{where}.username must not contain ':' or control characters (RFC 7617); fix the username"
            )
        password = reader.secret("password")
        if not password.isprintable():
            raise AuthConfigError(
                f"{where}: the password ({reader.origin('password')}) contains control characters; "
                "check that it was copied whole"
            )
        encoded = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
        return UpstreamAuth(
            type=kind, headers=(("Authorization", f"Basic {encoded}"),), secret_from=reader.sources
        )
    if kind == "header":
        name = reader.plain("name")
        reason = refused_header_reason(name)
        if reason is not None:
            raise AuthConfigError(f"{where}.name: header {name!r} {reason}; choose another header")
        value = reader.secret("value")
        if not _HEADER_VALUE.match(value):
            raise AuthConfigError(
                f"{where}: the value of header {name} ({reader.origin('value')}) must be visible ASCII "
                "(inner spaces allowed, no leading or trailing space, no control characters)"
            )
        return UpstreamAuth(type=kind, headers=((name, value),), secret_from=reader.sources)
    if kind == "query":
        name = reader.plain("name")
        value = reader.secret("value")
        return UpstreamAuth(type=kind, query=((name, value),), secret_from=reader.sources)
    return _parse_env(block, environ, where)


def _types() -> str:
    return ", ".join(AUTH_TYPES)


class _Reader:
    """Reads literal-or-indirect keys of one block, remembering where each secret came from."""

    def __init__(self, block: Mapping[str, Any], environ: Mapping[str, str], where: str) -> None:
        self.block = block
        self.environ = environ
        self.where = where
        self.sources: tuple[str, ...] = ()
        self._origins: dict[str, str] = {}

    def plain(self, key: str) -> str:
        value = self.block.get(key)
        if value is None:
            raise AuthConfigError(f"{self.where} of type {self.block['type']} needs {key}")
        if not isinstance(value, str) or not value:
            raise AuthConfigError(f"{self.where}.{key} must be a non-empty string")
        return value

    def secret(self, key: str) -> str:
        indirect = f"{key}Env"
        literal, name = self.block.get(key), self.block.get(indirect)
        if literal is not None and name is not None:
            raise AuthConfigError(f"{self.where}: give {key} or {indirect}, not both")
        if literal is None and name is None:
            raise AuthConfigError(
                f"{self.where} of type {self.block['type']} needs {key} (the secret itself) or "
                f"{indirect} (the name of an environment variable that holds it)"
            )
        if literal is not None:
            if not isinstance(literal, str) or not literal:
                raise AuthConfigError(f"{self.where}.{key} must be a non-empty string")
            self._origins[key] = f"{self.where}.{key}"
            self.sources += ("config",)
            return literal
        value = _lookup(name, self.environ, f"{self.where}.{indirect}", f"{self.where}.{key}")
        self._origins[key] = f"from ${name}"
        self.sources += (f"env {name}",)
        return value

    def origin(self, key: str) -> str:
        return self._origins.get(key, f"{self.where}.{key}")


def _lookup(name: object, environ: Mapping[str, str], setting: str, literal: str) -> str:
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise AuthConfigError(
            f"{setting} must name an environment variable (letters, digits and _, not starting with a digit)"
        )
    value = environ.get(name)
    if value is None:
        raise SecretUnset(
            f"{setting} names {name}, which is not set in mcpx's environment: export {name} where the "
            f"daemon starts (`mcpx stop` ends a daemon started without it), or give the value itself "
            f"as {literal}",
            name,
        )
    if not value:
        raise SecretUnset(f"{setting} names {name}, which is set but empty: give it the secret's value", name)
    return value


def _parse_env(block: Mapping[str, Any], environ: Mapping[str, str], where: str) -> UpstreamAuth:
    literal, indirect = block.get("vars", {}), block.get("varsEnv", {})
    for key, table in (("vars", literal), ("varsEnv", indirect)):
        if not isinstance(table, Mapping) or not all(isinstance(v, str) for v in table.values()):
            raise AuthConfigError(f"{where}.{key} must be a table of variable name = string")
    if not literal and not indirect:
        raise AuthConfigError(
            f"{where} of type env needs vars (NAME = value) or varsEnv (NAME = the name of a variable "
            "of mcpx's environment to copy)"
        )
    out: dict[str, str] = {}
    sources: list[str] = []
    for name, value in literal.items():
        _check_env_name(name, f"{where}.vars")
        if "\0" in value:
            raise AuthConfigError(
                f"{where}.vars.{name} contains a NUL character, which no environment can hold"
            )
        out[name] = value
        sources.append("config")
    for name, source in indirect.items():
        _check_env_name(name, f"{where}.varsEnv")
        if name in out:
            raise AuthConfigError(f"{where}: {name} is in both vars and varsEnv; keep one")
        out[name] = _lookup(source, environ, f"{where}.varsEnv.{name}", f"{where}.vars.{name}")
        sources.append(f"env {source}")
    return UpstreamAuth(type="env", env=tuple(out.items()), secret_from=tuple(sources))


def _check_env_name(name: object, where: str) -> None:
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise AuthConfigError(
            f"{where}: {name!r} is not an environment variable name (letters, digits and _, "
            "not starting with a digit)"
        )
