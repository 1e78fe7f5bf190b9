"""The gateway's commands: ``mcpx daemon`` and the commands that talk to it over /v1.

``mcpx daemon`` serves /mcp and /v1 on one listener (mcpx/gateway/_daemon.py)
and records where in ``<state>/daemon.json``; ``mcpx servers``, ``mcpx tools``,
``mcpx call SERVER TOOL``, ``mcpx restart`` and ``mcpx status`` read that file
and ask the daemon.  Each prints JSON with ``--json`` (or when stdout is not a
terminal) and something shorter for a person otherwise.
"""

from __future__ import annotations

import http.client
import os
import sys
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

import orjson
import typer

from ._settings import collect_flags

StateOption = Annotated[
    str | None,
    typer.Option("--state", help="State directory (default: MCPX_STATE, else ~/.local/state/mcpx)."),
]
ConfigOption = Annotated[
    str | None,
    typer.Option(
        "--config", help="The configuration file (default: $MCPX_CONFIG, else ~/.config/mcpx/config.toml)."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


class DaemonError(Exception):
    """The daemon could not be reached, or answered with an error; ``str()`` says what to do."""


def _load(config: str | None, named: dict[str, tuple[str, str | None]]) -> Any:
    from ..config import ConfigError, load_config

    try:
        flags, origins = collect_flags([], named)
        return load_config(config, flags=flags, flag_origins=origins)
    except (ConfigError, ValueError) as exc:
        typer.echo(f"mcpx: {exc}", err=True)
        raise typer.Exit(2) from None


def daemon_info(state_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``<state>/daemon.json`` of a daemon that is still running, else ``None``."""
    path = Path(state_dir) / "daemon.json"
    try:
        info = orjson.loads(path.read_bytes())
        os.kill(int(info["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        return None
    return info if isinstance(info, dict) and info.get("url") else None


def daemon_request(
    state_dir: str | os.PathLike[str], method: str, path: str, body: Any = None, *, timeout: float = 600.0
) -> tuple[int, Any]:
    """One /v1 request to the running daemon: (HTTP status, JSON body)."""
    info = daemon_info(state_dir)
    if info is None:
        raise DaemonError(
            f"no mcpx daemon is running for state directory {state_dir}; start one with `mcpx daemon`"
        )
    url = urlsplit(str(info["url"]))
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=timeout)
    payload = orjson.dumps(body) if body is not None else None
    headers = {"content-type": "application/json"} if payload is not None else {}
    try:
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        data = response.read()
    except OSError as exc:
        raise DaemonError(
            f"the mcpx daemon at {info['url']} did not answer: {exc}; restart it with `mcpx daemon`"
        ) from None
    finally:
        connection.close()
    try:
        return response.status, orjson.loads(data) if data else None
    except orjson.JSONDecodeError:
        raise DaemonError(f"the daemon answered {response.status} with something that is not JSON") from None


def _state(given: str | None, config: str | None = None) -> str:
    loaded = _load(config, {"state.dir": ("--state", given)})
    return str(loaded.settings.value("state.dir"))


def _ask(state: str, method: str, path: str, body: Any = None) -> Any:
    try:
        status, answer = daemon_request(state, method, path, body)
    except DaemonError as exc:
        typer.echo(f"mcpx: {exc}", err=True)
        raise typer.Exit(2) from None
    if status >= 400:
        error = (answer or {}).get("error", {}) if isinstance(answer, dict) else {}
        typer.echo(f"mcpx: {error.get('message') or f'the daemon answered HTTP {status}'}", err=True)
        raise typer.Exit(1 if status == 502 else 2)
    return answer


def _show(value: Any, as_json: bool) -> bool:
    """Print ``value`` as JSON when asked or when stdout is not a terminal; whether it did."""
    if as_json or not sys.stdout.isatty():
        typer.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())
        return True
    return False


def register(app: typer.Typer) -> None:
    """Add the gateway's commands to ``app``."""

    @app.command()
    def daemon(
        config: ConfigOption = None,
        port: Annotated[
            str | None, typer.Option(help="TCP port on --address (transport.port; 0 picks one).")
        ] = None,
        address: Annotated[
            str | None, typer.Option(help="Address to bind (transport.address; default loopback).")
        ] = None,
        passthrough: Annotated[
            str | None, typer.Option(help="Servers offered under their own names (mcp.passthrough).")
        ] = None,
        mcp_spec: Annotated[str | None, typer.Option("--mcp-spec", help="spec.first.")] = None,
        loop: Annotated[str, typer.Option(help="asyncio, uvloop or trio.", envvar="MCPX_LOOP")] = "asyncio",
        state: StateOption = None,
    ) -> None:
        """Serve the gateway: /mcp (MCP, every revision) and /v1 (the ops API) on one listener.

        Without a configuration file the upstream is mcpx's own demo server,
        named demo.  Stop it with Ctrl-C (or SIGTERM).
        """
        from ..gateway import run_daemon

        if loop not in ("asyncio", "uvloop", "trio"):
            raise typer.BadParameter("--loop must be asyncio, uvloop or trio")
        loaded = _load(
            config,
            {
                "transport.port": ("--port", port),
                "transport.address": ("--address", address),
                "mcp.passthrough": ("--passthrough", passthrough),
                "spec.first": ("--mcp-spec", mcp_spec),
                "state.dir": ("--state", state),
            },
        )
        for warning in loaded.warnings:
            typer.echo(f"mcpx: warning: {warning}", err=True)
        if not loaded.found:
            typer.echo(
                f"mcpx: no configuration file at {loaded.path}; serving the built-in default: "
                "mcpx's demo server as 'demo'",
                err=True,
            )

        def ready(urls: list[str]) -> None:
            for url in urls:
                typer.echo(f"mcpx: daemon serving MCP at {url}", err=True)
            base = next((u.rsplit("/", 1)[0] for u in urls if u.startswith("http")), None)
            if base:
                typer.echo(f"mcpx: ops API at {base}/v1 (try `mcpx servers`)", err=True)

        try:
            run_daemon(loaded, loop=loop, ready=ready)
        except (OSError, ValueError) as exc:
            typer.echo(f"mcpx: the daemon could not start: {exc}", err=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            pass

    @app.command()
    def serve(
        transport: Annotated[str, typer.Option(help="stdio (the only one: see below).")] = "stdio",
        config: ConfigOption = None,
        loop: Annotated[str, typer.Option(help="asyncio, uvloop or trio.", envvar="MCPX_LOOP")] = "asyncio",
        state: StateOption = None,
    ) -> None:
        """Be the gateway for an MCP host that spawns its servers: stdio relayed to the daemon's /mcp.

        The daemon is started if none is running.  There is no HTTP form:
        run `mcpx daemon --port N` and point the host at http://HOST:N/mcp.
        """
        if transport != "stdio":
            typer.echo(
                "mcpx: `mcpx serve` speaks stdio only; for HTTP run `mcpx daemon --port N` "
                "(add --address 0.0.0.0 to leave loopback) and use http://HOST:N/mcp",
                err=True,
            )
            raise typer.Exit(2)
        if loop not in ("asyncio", "uvloop", "trio"):
            raise typer.BadParameter("--loop must be asyncio, uvloop or trio")
        import anyio

        from ..drivers._stdio_streams import open_stdio
        from ..gateway._shim import ensure_daemon, serve_shim

        where = Path(_state(state, config))
        try:
            info = ensure_daemon(where, config=config)
        except RuntimeError as exc:
            typer.echo(f"mcpx: {exc}", err=True)
            raise typer.Exit(2) from None
        backend = "trio" if loop == "trio" else "asyncio"

        async def main() -> None:
            async with open_stdio(backend) as (reader, writer):
                await serve_shim(str(info["mcp"]), reader, writer)

        options: dict[str, object] = {"use_uvloop": True} if loop == "uvloop" else {}
        anyio.run(main, backend=backend, backend_options=options)

    @app.command()
    def servers(state: StateOption = None, as_json: JsonOption = False) -> None:
        """List the daemon's upstream servers and their pool state."""
        answer = _ask(_state(state), "GET", "/v1/servers")
        if _show(answer, as_json):
            return
        for server in answer["servers"]:
            pool = server.get("pool") or {}
            where = server.get("url") or " ".join([server.get("command", ""), *server.get("args", [])])
            typer.echo(f"{server['name']:<16} {pool.get('state', '?'):<12} {server['transport']:<6} {where}")

    @app.command()
    def tools(
        server: Annotated[str | None, typer.Argument(help="Only this server's tools.")] = None,
        state: StateOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """List the tools of every upstream server (or of SERVER)."""
        path = "/v1/tools" + (f"?server={quote(server)}" if server else "")
        answer = _ask(_state(state), "GET", path)
        if _show(answer, as_json):
            return
        for tool in answer["tools"]:
            description = str(tool.get("description") or "").strip().splitlines()
            typer.echo(f"{tool['server']}/{tool['name']:<24} {description[0] if description else ''}")
        for error in answer.get("errors", []):
            typer.echo(f"mcpx: {error['server']}: {error['message']}", err=True)

    @app.command()
    def restart(
        server: Annotated[str | None, typer.Argument(help="Only this server.")] = None,
        state: StateOption = None,
    ) -> None:
        """Restart a server's instances (or every server's) on the next call."""
        answer = _ask(_state(state), "POST", "/v1/restart", {"server": server} if server else {})
        typer.echo(f"restarted: {', '.join(answer['restarted'])}")

    @app.command()
    def status(state: StateOption = None, as_json: JsonOption = False) -> None:
        """Is a daemon running, where, and how are its servers."""
        where = _state(state)
        info = daemon_info(where)
        if info is None:
            typer.echo(f"mcpx: no daemon is running for {where}; start one with `mcpx daemon`", err=True)
            raise typer.Exit(1)
        health = _ask(where, "GET", "/health")
        listed = _ask(where, "GET", "/v1/servers")
        summary = {"daemon": info, "health": health, "servers": listed["servers"]}
        if _show(summary, as_json):
            return
        typer.echo(f"mcpx daemon {health['version']} (pid {info['pid']}) at {info['mcp']}")
        for server in listed["servers"]:
            typer.echo(f"  {server['name']:<16} {(server.get('pool') or {}).get('state', '?')}")


def call_through_daemon(
    server: str,
    tool: str,
    arguments: dict[str, Any],
    *,
    state: str | None,
    timeout: float | None,
    as_json: bool,
) -> None:
    """``mcpx call SERVER TOOL``: POST /v1/call; the result printed, exit 1 on isError or an upstream error."""
    body: dict[str, Any] = {"server": server, "tool": tool, "arguments": arguments}
    if timeout is not None:
        body["timeout"] = timeout
    answer = _ask(_state(state), "POST", "/v1/call", body)
    result = answer["result"]
    if not _show(result, as_json):
        for block in result.get("content", []):
            if block.get("type") == "text":
                typer.echo(block.get("text", ""))
            else:
                typer.echo(f"[{block.get('type')} content; --json shows it]")
        if "structuredContent" in result and not result.get("content"):
            typer.echo(orjson.dumps(result["structuredContent"], option=orjson.OPT_INDENT_2).decode())
    if result.get("isError"):
        raise typer.Exit(1)
