"""``mcpx settings``: every effective setting, where it came from, and the configured servers.

The command collects its flags into ``{key: text}`` (each a flag layer
value), lets ``mcpx.config.load_config`` do the rest, and prints the result as
a table or, with ``--json``, as ``Config.to_json()``.  Nothing printed here
contains a secret: servers show variable and header names, auth shows its
type and where the secret comes from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..config import Config, Setting, Source

__all__ = ["collect_flags", "render_text"]


def collect_flags(
    sets: Sequence[str], named: Mapping[str, tuple[str, str | None]]
) -> tuple[dict[str, object], dict[str, str]]:
    """``--set key=value`` items and the dedicated flags (key → (flag, value)) as flags + their origins.

    A dedicated flag wins over ``--set`` for the same key.  Raises
    ``ValueError`` for a ``--set`` without ``=``.
    """
    flags: dict[str, object] = {}
    origins: dict[str, str] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set takes key=value (e.g. pool.callTimeout=90s), not {item!r}")
        flags[key.strip()] = value
        origins[key.strip()] = f"--set {key.strip()}"
    for key, (flag, given) in named.items():
        if given is not None:
            flags[key] = given
            origins[key] = flag
    return flags, origins


def _where(setting: Setting) -> str:
    if setting.source is Source.DEFAULT:
        return "default"
    return f"{setting.source} {setting.origin}"


def render_text(config: Config) -> str:
    """The human table: config file, settings with sources, servers, warnings."""
    lines: list[str] = []
    if config.found:
        lines.append(f"config file: {config.path} ({config.format})")
    else:
        lines.append(f"config file: {config.path} (not found: no servers, defaults apply)")
    rows = [(key, s.text(), _where(s)) for key, s in config.settings.items()]
    key_w = max(len("SETTING"), *(len(r[0]) for r in rows))
    val_w = min(60, max(len("VALUE"), *(len(r[1]) for r in rows)))
    lines.append("")
    lines.append(f"{'SETTING':<{key_w}}  {'VALUE':<{val_w}}  SOURCE")
    lines.extend(f"{key:<{key_w}}  {value:<{val_w}}  {where}" for key, value, where in rows)
    lines.append("")
    if not config.servers:
        lines.append("servers: none configured")
    else:
        lines.append("servers:")
        for name, server in config.servers.items():
            if server.transport == "stdio":
                target = " ".join([server.command or "", *server.args])
                extras = [f"env {', '.join(n for n, _ in server.env)}"] if server.env else []
            else:
                target = server.url or ""
                extras = [f"headers {', '.join(n for n, _ in server.headers)}"] if server.headers else []
            if server.auth is not None:
                names = [n for n, _ in (*server.auth.headers, *server.auth.query, *server.auth.env)]
                extras.append(
                    f"auth {server.auth.type} ({', '.join(names)}; secret from {', '.join(server.auth.secret_from)})"
                )
            elif server.auth_pending is not None:
                variable = server.auth_pending.variable
                extras.append(
                    f"auth: warning, ${variable} is unset here; the daemon must have it to start {name}"
                )
            extras.append(f"scope {server.scope}")
            lines.append(f"  {name}  {server.transport}  {target}  [{'; '.join(extras)}]")
    for warning in config.warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)
