"""The configuration file's shape, parsed without I/O: text + environment + flags in, ``Config`` out.

Two formats, one model:

TOML (mcpx's own, strict)::

    [pool]
    callTimeout = "90s"

    [servers.github]
    url = "https://example.com/mcp"
    auth = { type = "bearer", tokenEnv = "GITHUB_TOKEN" }

    [servers.files]
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]

JSON (what MCP hosts already write, read as is)::

    {"mcpServers": {"files": {"command": "npx", "args": ["-y", "..."]}}}

Top level: ``servers`` (or ``mcpServers``, in either format) and one table per
settings group (``spec``, ``proto``, ``pool``, ``transport``, ``mcp``,
``state``, ``daemon``); a dotted key (``"pool.callTimeout"``) works too.  In TOML an
unknown top-level key is an error; in JSON it is a warning, since a host's
file carries its own keys.  ``parse_config`` collects every problem — bad
settings, bad servers, a ``mcp.passthrough`` naming a server that is not
configured — into one ``ConfigError``.

Where the file is (``config_location``): ``--config``, else ``$MCPX_CONFIG``,
else ``$XDG_CONFIG_HOME/mcpx/config.toml``, else
``~/.config/mcpx/config.toml``.  The first two must exist; the default may
be missing (defaults apply).  A ``.json`` name is JSON, a ``.toml`` name TOML,
anything else is JSON when it starts with ``{``.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import orjson

from ._servers import Scope, UpstreamServer, parse_server
from ._settings import GROUPS, SETTINGS, ConfigError, Settings, resolve_settings, suggest

__all__ = ["Config", "Format", "config_location", "detect_format", "parse_config"]

Format = Literal["toml", "json"]
_SERVER_TABLES = ("servers", "mcpServers")


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """A whole configuration: the servers, every setting with its provenance, and warnings to show.

    ``path`` is the file consulted (``found`` says whether it existed).
    ``text`` is what was read from it and ``stamp`` its ``(st_mtime_ns,
    st_size)`` when it was read (``load_config`` fills both; ``None`` when no
    file was read): what a running daemon was started with is compared by
    them (``mcpx/gateway/_state.py``, spec/gateway.md §9).
    """

    path: str | None
    found: bool
    format: Format | None
    servers: Mapping[str, UpstreamServer]
    settings: Settings
    warnings: tuple[str, ...] = field(default=())
    text: str | None = field(default=None, repr=False, compare=False)
    stamp: tuple[int, int] | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready and secret-free: what ``mcpx settings --json`` prints."""
        return {
            "config": {"path": self.path, "found": self.found, "format": self.format},
            "settings": self.settings.to_json(),
            "policy": self.settings.policy().describe(),
            "servers": {name: server.describe() for name, server in self.servers.items()},
            "warnings": list(self.warnings),
        }


def detect_format(path: str, text: str) -> Format:
    """``json`` for a ``.json`` name, ``toml`` for ``.toml``; otherwise by the first character."""
    lower = path.lower()
    if lower.endswith(".json"):
        return "json"
    if lower.endswith(".toml"):
        return "toml"
    return "json" if text.lstrip().startswith("{") else "toml"


def config_location(environ: Mapping[str, str], home: str, given: str | None = None) -> tuple[str, str, bool]:
    """``(path, chosen by, must exist)``: ``--config``, ``$MCPX_CONFIG``, then the XDG default."""
    if given:
        return _expand(given, home), "--config", True
    if environ.get("MCPX_CONFIG"):
        return _expand(environ["MCPX_CONFIG"], home), "MCPX_CONFIG", True
    base = environ.get("XDG_CONFIG_HOME") or f"{home.rstrip('/')}/.config"
    return f"{base.rstrip('/')}/mcpx/config.toml", "default", False


def _expand(path: str, home: str) -> str:
    return home.rstrip("/") + path[1:] if path == "~" or path.startswith("~/") else path


def _decode(text: str, fmt: Format, origin: str) -> dict[str, Any]:
    try:
        data: object = tomllib.loads(text) if fmt == "toml" else orjson.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"{origin} is not valid TOML: {exc}; fix the file"]) from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError([f"{origin} is not valid JSON: {exc}; fix the file"]) from None
    if not isinstance(data, dict):
        raise ConfigError([f"{origin} must hold an object at the top level, not {type(data).__name__}"])
    return data


def _unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """``MCPX_<GROUP>_…`` variables that are no setting's: most likely a misspelt one."""
    known = [s.env for s in SETTINGS]
    prefixes = tuple(f"MCPX_{group.upper()}_" for group in GROUPS)
    return [
        f"environment variable {name} is not a setting{suggest(name, known)}; it is ignored"
        for name in sorted(environ)
        if name.startswith(prefixes) and name not in known
    ]


def parse_config(
    text: str | None,
    *,
    format: Format = "toml",
    origin: str = "config",
    environ: Mapping[str, str] = {},
    flags: Mapping[str, object] = {},
    flag_origins: Mapping[str, str] = {},
    home: str = "~",
    found: bool = True,
) -> Config:
    """The configuration ``text`` (``None``: no file) says, overlaid by ``environ`` and ``flags``.

    Pure.  ``origin`` names the file in messages and provenance.  Raises
    ``ConfigError`` listing every problem, each with what to change.
    """
    data = _decode(text, format, origin) if text is not None else {}
    strict = format == "toml"
    problems: list[str] = []
    warnings: list[str] = []
    file_values: dict[str, object] = {}
    server_tables = [key for key in _SERVER_TABLES if key in data]
    if len(server_tables) > 1:
        problems.append(f"{origin}: has both servers and mcpServers; put every server under one of them")
    for key, value in data.items():
        if key in _SERVER_TABLES:
            continue
        if key in GROUPS:
            if not isinstance(value, Mapping):
                problems.append(f"{origin}: {key} must be a table of settings ({key}.<name> = value)")
                continue
            for name, raw in value.items():
                file_values[f"{key}.{name}"] = raw
        elif "." in key and key.split(".")[0] in GROUPS:
            file_values[key] = value
        else:
            text_ = (
                f"{origin}: unknown top-level key {key!r}{suggest(key, [*sorted(GROUPS), *_SERVER_TABLES])}"
            )
            allowed = ", ".join([*_SERVER_TABLES, *sorted(GROUPS)])
            if strict:
                problems.append(f"{text_}; the top level holds {allowed}")
            else:
                warnings.append(f"{text_} ignored (mcpx reads {allowed})")
    servers: dict[str, UpstreamServer] = {}
    for table_key in server_tables:
        table = data[table_key]
        if not isinstance(table, Mapping):
            problems.append(f"{origin}: {table_key} must be a table of name = server")
            continue
        for name, entry in table.items():
            server = parse_server(
                name,
                entry,
                where=f"{table_key}.{name}",
                environ=environ,
                strict=strict,
                problems=problems,
                warnings=warnings,
            )
            if server is not None:
                servers[name] = server
    if not server_tables and not (found and text is not None):
        # No file (or one without servers): mcpx's own demo server, so the daemon has something to serve.
        servers = builtin_servers()
    try:
        settings = resolve_settings(
            file_values,
            file_origin=origin,
            environ=environ,
            flags=flags,
            flag_origins=flag_origins,
            home=home,
        )
    except ConfigError as exc:
        problems.extend(exc.problems)
    else:
        passthrough = settings["mcp.passthrough"]
        for name in passthrough.value:
            if name not in servers:
                configured = ", ".join(servers) or "none"
                problems.append(
                    f"mcp.passthrough names {name!r} ({passthrough.origin}), which is not a configured "
                    f"server{suggest(name, list(servers))}; configured servers: {configured}"
                )
    warnings.extend(_unknown_variables(environ))
    if problems:
        raise ConfigError(problems)
    return Config(
        path=origin,
        found=found and text is not None,
        format=format if text is not None else None,
        servers=MappingProxyType(servers),
        settings=settings,
        warnings=tuple(warnings),
    )


def builtin_servers() -> dict[str, UpstreamServer]:
    """The servers of the built-in default: mcpx's demo server (this interpreter) as ``demo``."""
    return {
        "demo": UpstreamServer(
            name="demo", command=sys.executable, args=("-m", "mcpx", "demo"), scope=Scope.HOST
        )
    }
