"""Upstream server definitions: one entry of ``[servers]`` (TOML) or ``mcpServers`` (JSON) → ``UpstreamServer``.

Both spellings describe the same thing and parse to the same model:

* stdio: ``command`` (a string, or an array that includes the arguments),
  ``args``, ``env`` (NAME = value), ``cwd``;
* HTTP: ``url`` (Streamable HTTP; ``http://`` or ``https://`` with a host, no
  credentials in it) and ``headers`` (name = value);
* either: ``auth`` (``mcpx.core.upstream_auth``), ``scope`` (``host``, the
  default for a command: one instance per host, as if each had spawned it,
  identity-less requests sharing one; ``shared``, the default for a url: one
  instance for everyone; ``connection``: one per host connection, every
  2026-07-28 request without a session its own; ``call``: one per call), ``startTimeout`` (a duration, as
  ``pool.startTimeout`` takes it: how long this server may take to start,
  the era probe included), ``era`` (``auto``, the default: a server that
  speaks both eras is spoken to in the era of the host whose call it serves;
  ``legacy`` or ``modern``: always that era), ``type`` (``stdio``, ``http``,
  ``streamable-http``, ``sse``: what MCP hosts write; checked against
  ``command``/``url``, otherwise informational — which HTTP transport a URL
  speaks is the era probe's finding) and ``disabled`` (``true`` leaves the
  server out).

A server's name is its namespace — prompts are offered as ``<name>_<prompt>``
and resources as ``mcpx://<name>/<uri>`` — so it must be lowercase letters,
digits and ``-``, start with a letter, not end with ``-``, and be at most 63
characters (a URI host label); ``mcpx`` is mcpx's own.

The JSON that MCP hosts already use is read as is: keys a host understands
but mcpx does not (``autoApprove``, ``timeout``, …) are reported as warnings
rather than refused.  mcpx's own TOML is strict: an unknown key is an error.
Nothing here does I/O; ``environ`` is only for ``auth``'s indirections.
A secret belongs to the daemon, which starts the servers: an indirection
(``tokenEnv``, …) naming a variable unset in ``environ`` is a warning, and the
server keeps its block to be resolved when it starts (``UpstreamServer.resolved``),
so that a client command run from a shell without the secret still works.
``mcpx.core`` (where ``auth`` and the refused headers are defined) is
imported only for a server that has ``auth`` or ``headers``: reading a
configuration must not load the protocol machines (mcpx/config/_settings.py).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

from ._kinds import SERVER_NAME, SERVER_NAME_RULE, format_duration, parse_duration
from ._settings import suggest

if TYPE_CHECKING:
    from ..core.upstream_auth import Transport, UpstreamAuth

__all__ = ["RESERVED_NAMES", "PendingAuth", "Scope", "UpstreamServer", "check_server_name", "parse_server"]

RESERVED_NAMES: Final = frozenset({"mcpx"})
_KEYS: Final = (
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "auth",
    "scope",
    "startTimeout",
    "era",
    "type",
    "disabled",
)
UpstreamEra = Literal["auto", "legacy", "modern"]
UPSTREAM_ERAS: Final[tuple[UpstreamEra, ...]] = ("auto", "legacy", "modern")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TYPES: Final[Mapping[str, Transport]] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamableHttp": "http",
    "sse": "http",
}


class Scope(enum.StrEnum):
    """Who shares one running instance of an upstream."""

    SHARED = "shared"
    """One instance for every host connection and call (the default for a url server)."""
    HOST = "host"
    """One instance per host, as if each host had spawned it (the default for a command server).

    A host is a stdio host through ``mcpx serve``, a legacy HTTP session, or a
    2026-07-28 request naming ``_meta["dev.mcpx/session"]``; requests with no
    identity (``/v1``, other 2026-07-28 requests) share one instance.
    """
    CONNECTION = "connection"
    """One instance per host connection (a stdio host process, a legacy HTTP session)."""
    CALL = "call"
    """A fresh instance for each call, stopped when it ends."""


@dataclass(frozen=True, slots=True)
class PendingAuth:
    """An ``auth`` block whose secret was not in the environment the configuration was read in.

    ``block`` is the block as JSON text (it holds no resolved secret: a
    literal secret in it would have resolved), ``where`` its place in the
    file, ``variable`` the unset variable it names.
    """

    where: str
    block: str
    variable: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamServer:
    """One configured upstream.  Exactly one of ``command`` (stdio) and ``url`` (HTTP) is set.

    ``env`` and ``headers`` may hold secrets and are left out of ``repr()``;
    ``describe()`` shows only their names.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    auth: UpstreamAuth | None = None
    auth_pending: PendingAuth | None = field(default=None, repr=False)
    """The ``auth`` block to resolve when the server starts, its variable unset when it was read."""
    scope: Scope = Scope.SHARED
    start_timeout: float | None = None
    """Seconds this server may take to start (``startTimeout``); ``None``: ``pool.startTimeout``."""
    era: UpstreamEra = "auto"
    """The era mcpx speaks to it: ``auto`` (the host's, when the server speaks both), ``legacy``, ``modern``."""

    @property
    def transport(self) -> Transport:
        return "stdio" if self.command is not None else "http"

    def argv(self) -> list[str]:
        """What to spawn (no shell): ``[command, *args]``."""
        if self.command is None:
            raise ValueError(f"server {self.name!r} is an HTTP server ({self.url}); it has no command")
        return [self.command, *self.args]

    def resolved(self, environ: Mapping[str, str]) -> UpstreamServer:
        """This server with a pending ``auth`` block resolved against ``environ`` (the daemon's, at start).

        Raises ``AuthConfigError`` (a ``ValueError``) saying what to set when
        the variable is still unset, or the secret is unusable.
        """
        if self.auth_pending is None:
            return self
        from ..core.upstream_auth import AuthConfigError, parse_auth

        pending = self.auth_pending
        auth = parse_auth(
            json.loads(pending.block), environ=environ, transport=self.transport, where=pending.where
        )
        clash = _auth_clash(auth, self.headers)
        if clash:
            raise AuthConfigError(f"{pending.where}: auth sets {clash[0]} and so does headers; keep one")
        return replace(self, auth=auth, auth_pending=None)

    def process_env(self) -> dict[str, str]:
        """Variables to add to mcpx's environment for the spawned process: ``env``, then ``auth`` (type env).

        Pass it as ``connect_stdio(env=...)``, which merges it over ``os.environ``.
        """
        merged = dict(self.env)
        if self.auth is not None:
            merged.update(self.auth.env_vars())
        return merged

    def describe(self) -> dict[str, Any]:
        """JSON-ready and secret-free (variable and header names, never their values)."""
        out: dict[str, Any] = {"transport": self.transport, "scope": str(self.scope)}
        if self.start_timeout is not None:
            out["startTimeout"] = format_duration(self.start_timeout)
        if self.era != "auto":
            out["era"] = self.era
        if self.command is not None:
            out["command"] = self.command
            out["args"] = list(self.args)
            if self.env:
                out["env"] = [name for name, _ in self.env]
            if self.cwd is not None:
                out["cwd"] = self.cwd
        else:
            out["url"] = self.url
            if self.headers:
                out["headers"] = [name for name, _ in self.headers]
        if self.auth is not None:
            out["auth"] = self.auth.describe()
        elif self.auth_pending is not None:
            block = json.loads(self.auth_pending.block)
            out["auth"] = {"type": block.get("type"), "unset": self.auth_pending.variable}
        return out


def check_server_name(name: object) -> str | None:
    """Why ``name`` cannot be a server name (a namespace), or ``None`` when it can."""
    if not isinstance(name, str) or not SERVER_NAME.match(name):
        hint = ""
        if isinstance(name, str):
            fixed = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:63].strip("-")
            if fixed and not fixed[0].isalpha():
                fixed = f"s-{fixed}"[:63].strip("-")
            if fixed and SERVER_NAME.match(fixed) and fixed not in RESERVED_NAMES:
                hint = f", e.g. {fixed!r}"
        return (
            f"server name {name!r} cannot be used as a namespace (it prefixes prompts as <name>_<prompt> "
            f"and is the host of mcpx://<name>/ URIs): use {SERVER_NAME_RULE}{hint}"
        )
    if name in RESERVED_NAMES:
        return f"server name {name!r} is reserved for mcpx's own tools and resources; choose another name"
    return None


def parse_server(
    name: str,
    entry: object,
    *,
    where: str,
    environ: Mapping[str, str],
    strict: bool,
    problems: list[str],
    warnings: list[str],
) -> UpstreamServer | None:
    """One server entry; problems and warnings are appended (each saying what to do), ``None`` when unusable.

    ``strict`` (mcpx's TOML) refuses unknown keys; otherwise (a host's JSON)
    they are warnings.  A ``disabled`` server is ``None`` with a warning.
    """
    before = len(problems)
    reason = check_server_name(name)
    if reason is not None:
        problems.append(f"{where}: {reason}")
    if not isinstance(entry, Mapping):
        problems.append(f"{where} must be a table/object with command or url, not {type(entry).__name__}")
        return None
    for key in entry:
        if key not in _KEYS:
            text = f"{where}: unknown key {key!r}{suggest(str(key), _KEYS)}"
            if strict:
                problems.append(f"{text}; a server takes {', '.join(_KEYS)}")
            else:
                warnings.append(f"{text} ignored (mcpx reads {', '.join(_KEYS)})")
    disabled = entry.get("disabled", False)
    if not isinstance(disabled, bool):
        problems.append(f"{where}.disabled must be true or false, not {disabled!r}")
    elif disabled:
        warnings.append(f"{where} is disabled and left out")
        return None
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        problems.append(
            f"{where} needs exactly one of command (a program to spawn, over stdio) or url "
            "(a Streamable HTTP endpoint)" + ("; it has both" if command is not None else "")
        )
        return None
    transport: Transport = "stdio" if command is not None else "http"
    declared = entry.get("type")
    if declared is not None:
        if declared not in _TYPES:
            problems.append(
                f"{where}.type {declared!r} is not a transport; use stdio, http or streamable-http"
            )
        elif _TYPES[declared] != transport:
            has = "command" if transport == "stdio" else "url"
            problems.append(f"{where}.type is {declared} but the server has a {has}; make them agree")
    default_scope = Scope.HOST if transport == "stdio" else Scope.SHARED
    scope_raw = entry.get("scope", str(default_scope))
    try:
        scope = Scope(scope_raw)
    except ValueError:
        scope = default_scope
        problems.append(f"{where}.scope {scope_raw!r} is not a scope; use {', '.join(Scope)}")
    start_timeout: float | None = None
    if entry.get("startTimeout") is not None:
        raw = entry["startTimeout"]
        try:
            start_timeout = parse_duration(raw)
        except ValueError:
            start_timeout = 0.0
        if start_timeout <= 0:
            problems.append(
                f"{where}.startTimeout {raw!r} is not a duration of more than 0s; use seconds (90) or "
                "90s, 2m, 1h30m, 500ms"
            )
    era = entry.get("era", "auto")
    if era not in UPSTREAM_ERAS:
        problems.append(f"{where}.era {era!r} is not an era; use {', '.join(UPSTREAM_ERAS)}")
        era = "auto"

    argv: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    if transport == "stdio":
        argv = _argv(command, entry.get("args"), where, problems)
        env = _env(entry.get("env"), where, problems)
        cwd = entry.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not cwd or "\0" in cwd):
            problems.append(f"{where}.cwd must be a directory path")
        for key in ("headers",):
            if key in entry:
                problems.append(f"{where}.{key} is for url servers; a command server takes env instead")
    else:
        _url(url, where, problems)
        headers = _headers(entry.get("headers"), where, problems)
        for key in ("args", "env", "cwd"):
            if key in entry:
                problems.append(f"{where}.{key} is for command servers; a url server takes headers and auth")
    auth: UpstreamAuth | None = None
    pending: PendingAuth | None = None
    if entry.get("auth") is not None:
        from ..core.upstream_auth import AuthConfigError, SecretUnset, parse_auth

        try:
            auth = parse_auth(entry["auth"], environ=environ, transport=transport, where=f"{where}.auth")
        except SecretUnset as exc:
            # The daemon reads it when it starts the server; here it may not be needed at all.
            pending = PendingAuth(f"{where}.auth", json.dumps(entry["auth"], default=str), exc.variable)
            warnings.append(f"{exc}; {name} cannot start until the daemon has it")
        except AuthConfigError as exc:
            problems.append(str(exc))
    if auth is not None:
        for header in _auth_clash(auth, headers):
            problems.append(f"{where}: auth sets {header} and so does headers; keep one")
    if len(problems) > before:
        return None
    return UpstreamServer(
        name=name,
        command=argv[0] if argv else None,
        args=argv[1:],
        env=env,
        cwd=cwd,
        url=url if transport == "http" else None,
        headers=headers,
        auth=auth,
        auth_pending=pending,
        scope=scope,
        start_timeout=start_timeout,
        era=era,
    )


def _auth_clash(auth: UpstreamAuth, headers: tuple[tuple[str, str], ...]) -> list[str]:
    """The headers (lowercase) both ``auth`` and a server's ``headers`` set."""
    return sorted({n.lower() for n, _ in auth.headers} & {n.lower() for n, _ in headers})


def _argv(command: object, args: object, where: str, problems: list[str]) -> tuple[str, ...]:
    if isinstance(command, str) and command.strip():
        head: list[str] = [command]
    elif isinstance(command, list) and command and all(isinstance(c, str) and c for c in command):
        head = list(command)
    else:
        problems.append(
            f"{where}.command must be a program name or path (or an array: program and arguments)"
        )
        return ()
    if args is None:
        return tuple(head)
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        problems.append(f"{where}.args must be an array of strings (quote numbers)")
        return ()
    if any("\0" in part for part in (*head, *args)):
        problems.append(f"{where}: command and args cannot contain NUL characters")
        return ()
    return (*head, *args)


def _env(table: object, where: str, problems: list[str]) -> tuple[tuple[str, str], ...]:
    if table is None:
        return ()
    if not isinstance(table, Mapping):
        problems.append(f"{where}.env must be a table of NAME = string")
        return ()
    out: list[tuple[str, str]] = []
    for name, value in table.items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            problems.append(
                f"{where}.env: {name!r} is not an environment variable name (letters, digits and _, "
                "not starting with a digit)"
            )
        elif not isinstance(value, str):
            problems.append(f"{where}.env.{name} must be a string (quote it)")
        elif "\0" in value:
            problems.append(f"{where}.env.{name} contains a NUL character, which no environment can hold")
        else:
            out.append((name, value))
    return tuple(out)


def _url(url: object, where: str, problems: list[str]) -> None:
    if not isinstance(url, str):
        problems.append(f"{where}.url must be a string (http:// or https://)")
        return
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError as exc:
        problems.append(f"{where}.url is not a usable URL ({exc})")
        return
    if parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append(f"{where}.url must be http:// or https:// with a host")
    elif parts.username is not None or parts.password is not None:
        problems.append(
            f"{where}.url carries credentials; remove them from the URL and use auth "
            "(type basic, bearer, header or query) instead"
        )


def _headers(table: object, where: str, problems: list[str]) -> tuple[tuple[str, str], ...]:
    if table is None:
        return ()
    if not isinstance(table, Mapping):
        problems.append(f"{where}.headers must be a table of Header-Name = string")
        return ()
    from ..core.upstream_auth import refused_header_reason

    out: list[tuple[str, str]] = []
    for name, value in table.items():
        reason = refused_header_reason(str(name))
        if reason is not None:
            problems.append(f"{where}.headers: {name!r} {reason}; remove it")
        elif not isinstance(value, str) or not value.isascii() or not value.isprintable():
            problems.append(
                f"{where}.headers.{name} must be a string of visible ASCII characters (its value is not shown)"
            )
        else:
            out.append((name, value.strip()))
    lowered = [name.lower() for name, _ in out]
    for dup in sorted({n for n in lowered if lowered.count(n) > 1}):
        problems.append(f"{where}.headers names {dup} twice (header names ignore case); keep one")
    return tuple(out)
