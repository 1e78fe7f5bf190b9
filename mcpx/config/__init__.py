"""``mcpx.config``: the configuration file, the settings with their provenance, and the state directory.

What mcpx is configured with comes from four layers, each overriding the one
before: built-in defaults, the configuration file, the environment
(``MCPX_*``) and command-line flags.  ``spec/configuration.md`` describes the
file, every setting and every auth type.

Pure (text, environment and flags in; values out)
    ``parse_config`` → ``Config`` (servers + ``Settings`` + warnings);
    ``resolve_settings`` → ``Settings``; ``parse_auth`` → ``UpstreamAuth``;
    ``config_location`` says which file to read.  Every refusal is a
    ``ConfigError`` (or ``AuthConfigError``) whose message says what to change.
I/O
    ``load_config`` finds and reads the file and calls ``parse_config``;
    ``ensure_state_dir`` and ``write_state_file`` keep the state directory
    owner-only (0700 / 0600).

Connecting to a configured server::

    server = config.servers["github"]
    if server.transport == "http":
        connect_http(server.url, headers=server.headers, auth=server.auth)
    else:
        connect_stdio(server.argv(), env=server.process_env(), cwd=server.cwd)

Importing this package does not import ``mcpx.core``: the auth names below
are fetched from it on first use, and the settings and servers modules import
it only for what needs it (a revision, an ``auth`` table), so a command that
only reads its settings starts quickly (mcpx/cli/_fast.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._file import Config, config_location, detect_format, parse_config
from ._io import ensure_state_dir, load_config, write_state_file
from ._servers import Scope, UpstreamServer, check_server_name
from ._settings import (
    SETTINGS,
    ConfigError,
    Setting,
    SettingDef,
    Settings,
    Source,
    default_state_dir,
    env_name,
    format_duration,
    parse_duration,
    resolve_settings,
)

if TYPE_CHECKING:
    from ..core.upstream_auth import AUTH_TYPES, AuthConfigError, UpstreamAuth, parse_auth

_FROM_CORE = frozenset({"AUTH_TYPES", "AuthConfigError", "UpstreamAuth", "parse_auth"})

__all__ = [
    "AUTH_TYPES",
    "SETTINGS",
    "AuthConfigError",
    "Config",
    "ConfigError",
    "Scope",
    "Setting",
    "SettingDef",
    "Settings",
    "Source",
    "UpstreamAuth",
    "UpstreamServer",
    "check_server_name",
    "config_location",
    "default_state_dir",
    "detect_format",
    "ensure_state_dir",
    "env_name",
    "format_duration",
    "load_config",
    "parse_auth",
    "parse_config",
    "parse_duration",
    "resolve_settings",
    "write_state_file",
]


def __getattr__(name: str) -> Any:
    if name in _FROM_CORE:
        from ..core import upstream_auth

        return getattr(upstream_auth, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
