"""The gateway's commands: ``mcpx daemon`` and the commands that talk to a daemon.

``mcpx daemon`` serves /mcp and /v1 on one listener (mcpx/gateway/_daemon.py)
and records where in ``<state>/daemon.json``; ``mcpx servers``, ``mcpx tools``,
``mcpx call SERVER TOOL``, ``mcpx restart`` and ``mcpx status`` read that file
and ask the daemon over /v1; ``mcpx stop`` ends the daemon it names (SIGTERM,
then waits for the process to be gone).  Each prints JSON with ``--json`` (or when stdout
is not a terminal) and something shorter for a person otherwise.

``--daemon`` (the ``daemon.endpoint`` setting, ``MCPX_DAEMON``;
mcpx/config/_endpoint.py) names another daemon: ``http://host:port`` is its
/v1 directly; ``ssh://[user@]host[:port]`` runs ``ssh … mcpx serve
--transport stdio`` and does the same work with the gateway's MCP tools
(``mcpx_servers``; ``mcpx_search`` + ``mcpx_describe`` for ``tools``;
``mcpx_call``).  ``restart`` and ``status`` have no MCP counterpart and say so.
Every failure to reach a daemon is one line on stderr saying what to do, and
exit code 2.

While ``mcpx call`` runs, the upstream's progress is drawn on stderr when
stderr is a terminal (``/v1/call`` with ``"progress": true``, read line by
line as application/x-ndjson; not over ssh://).  stdout carries only the
result, so ``--json`` and pipes get exactly what they got before.

The /v1 requests themselves, their failures and the printed result live in
mcpx/cli/_v1.py, which ``mcpx call``'s fast path (mcpx/cli/_fast.py) shares.
"""

from __future__ import annotations

import os
import select
import shlex
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar
from urllib.parse import quote

import orjson
import typer

from ..config._endpoint import DaemonEndpoint
from ..config._settings import format_duration
from ..gateway._state import daemon_info
from ._settings import collect_flags
from ._v1 import Daemon, DaemonError, call_body, one_line, refusal, result_lines

if TYPE_CHECKING:
    from ..client import Client

T = TypeVar("T")

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
DaemonOption = Annotated[
    str | None,
    typer.Option(
        "--daemon",
        help=(
            "The daemon to ask: ssh://[user@]host[:port] or http://host:port "
            "(daemon.endpoint; default: MCPX_DAEMON, else this machine's)."
        ),
    ),
]


def _load(config: str | None, named: dict[str, tuple[str, str | None]]) -> Any:
    from ..config import ConfigError, load_config

    try:
        flags, origins = collect_flags([], named)
        return load_config(config, flags=flags, flag_origins=origins)
    except (ConfigError, ValueError) as exc:
        typer.echo(f"mcpx: {exc}", err=True)
        raise typer.Exit(2) from None


def daemon_request(
    state_dir: str | os.PathLike[str],
    method: str,
    path: str,
    body: Any = None,
    *,
    timeout: float = 600.0,
    endpoint: DaemonEndpoint | None = None,
) -> tuple[int, Any]:
    """One /v1 request: (HTTP status, JSON body).

    To ``endpoint`` when it is an http:// one, else to the daemon recorded in
    ``<state_dir>/daemon.json``.  An ssh:// endpoint has no /v1 to reach:
    ``DaemonError`` (callers route ssh:// through ``_over_ssh`` instead).
    """
    if endpoint is not None and endpoint.scheme == "ssh":
        raise DaemonError(
            f"{endpoint} reaches the daemon's MCP surface only, not its ops API (/v1); "
            f"use --daemon http://HOST:PORT, or run the command there: {shlex.join(endpoint.ssh_argv(['mcpx']))} ..."
        )
    if endpoint is not None:
        daemon = Daemon(endpoint.base_url, remote=True)
    else:
        info = daemon_info(state_dir)
        if info is None:
            raise DaemonError(
                f"no mcpx daemon is running for state directory {state_dir}; start one with `mcpx daemon`, "
                "or name another with --daemon ssh://HOST (or MCPX_DAEMON)"
            )
        daemon = Daemon(str(info["url"]))
    return daemon.request(method, path, body, timeout=timeout)


@dataclass(frozen=True, slots=True)
class Target:
    """The daemon a command talks to: ``endpoint``, or (``None``) the one recorded in ``state``."""

    state: str
    endpoint: DaemonEndpoint | None = None


def _target(state: str | None, daemon: str | None, config: str | None = None) -> Target:
    """state.dir and daemon.endpoint from every layer; exit 2 with the reason when either is bad."""
    loaded = _load(config, {"state.dir": ("--state", state), "daemon.endpoint": ("--daemon", daemon)})
    endpoint = loaded.settings.value("daemon.endpoint")
    return Target(str(loaded.settings.value("state.dir")), endpoint)


def _state(given: str | None, config: str | None = None) -> str:
    loaded = _load(config, {"state.dir": ("--state", given)})
    return str(loaded.settings.value("state.dir"))


def _fail(message: str, code: int = 2) -> typer.Exit:
    """Say ``message`` on stderr as one line; the ``typer.Exit`` to raise."""
    typer.echo(one_line(message), err=True)
    return typer.Exit(code)


def _ask(target: Target | str, method: str, path: str, body: Any = None) -> Any:
    """One /v1 request to ``target`` (a ``Target``, or a state directory); exits on an error answer."""
    where = target if isinstance(target, Target) else Target(target)
    try:
        status, answer = daemon_request(where.state, method, path, body, endpoint=where.endpoint)
    except DaemonError as exc:
        raise _fail(str(exc)) from None
    refused = refusal(status, answer)
    if refused is not None:
        raise _fail(*refused)
    return answer


def _over_ssh(target: Target, work: Callable[[Client], Awaitable[T]]) -> T:
    """Run ``work`` against the daemon behind an ssh:// endpoint, over ``ssh … mcpx serve``'s stdio.

    A gateway tool's refusal (``isError``) or a failure to reach the daemon
    exits 2; an upstream's JSON-RPC error exits 1, as a 502 from /v1 does.
    """
    import anyio

    from ..client import McpCallError, connect_stdio

    endpoint = target.endpoint
    assert endpoint is not None and endpoint.scheme == "ssh"
    argv = endpoint.ssh_argv()
    check = f"check that `{shlex.join(argv)}` runs from this shell (mcpx on the remote PATH)"

    async def main() -> T:
        # A failure leaves connect_stdio's task group before it is raised, so it is not an ExceptionGroup.
        failure: Exception
        async with connect_stdio(argv, modern=True, start_timeout=60.0, call_timeout=600.0) as client:
            try:
                return await work(client)
            except DaemonError as exc:
                failure = exc
            except McpCallError as exc:
                if not client.session.closed:
                    failure = exc  # the daemon (or its upstream) answered with an error
                else:
                    failure = DaemonError(f"the connection to {endpoint} ended: {exc.message}; {check}")
        raise failure

    try:
        return anyio.run(main)
    except FileNotFoundError:
        raise _fail(
            f"ssh is not on PATH; install OpenSSH's client ({endpoint} runs `{shlex.join(argv)}`)"
        ) from None
    except OSError as exc:
        raise _fail(f"could not start ssh for {endpoint}: {exc}") from None
    except DaemonError as exc:
        raise _fail(str(exc)) from None
    except McpCallError as exc:
        raise _fail(exc.message, 1) from None


async def _gateway_tool(client: Client, name: str, arguments: dict[str, Any]) -> Any:
    """A gateway tool's structured answer; ``DaemonError`` with its text when it refused (``isError``)."""
    result = await client.call_tool(name, arguments)
    texts = [str(b.get("text", "")) for b in result.get("content", []) if b.get("type") == "text"]
    if result.get("isError"):
        raise DaemonError(" ".join(texts) or f"{name} failed")
    if isinstance(result.get("structuredContent"), dict):
        return result["structuredContent"]
    try:  # a revision before 2025-06-18 has no structuredContent: the same object as text
        return orjson.loads(texts[0])
    except (IndexError, orjson.JSONDecodeError):
        raise DaemonError(
            f"{name} answered something that is not JSON; is the remote mcpx current?"
        ) from None


_SEARCH_MAX = 100  # mcpx_search's largest limit (mcpx/core/gateway.py)


async def _mcp_tools(client: Client, server: str | None) -> dict[str, Any]:
    """``GET /v1/tools``'s answer, built from mcpx_servers, mcpx_search and mcpx_describe."""
    import anyio

    from ..client import McpCallError
    from ..core import INTERNAL_ERROR

    listed = await _gateway_tool(client, "mcpx_servers", {})
    names = [str(s["name"]) for s in listed["servers"]]
    if server is not None and server not in names:
        raise DaemonError(
            f"no server named {server!r} is configured (configured: {', '.join(names) or 'none'})"
        )
    errors = [
        {"server": s["name"], "message": s.get("detail") or s["status"]}
        for s in listed["servers"]
        if s["status"] == "failed" and (server is None or s["name"] == server)
    ]
    found: list[dict[str, Any]] = []
    for name in [server] if server is not None else names:
        page = await _gateway_tool(client, "mcpx_search", {"query": "", "server": name, "limit": _SEARCH_MAX})
        found.extend(page["tools"])
        if page["total"] > len(page["tools"]):
            errors.append(
                {
                    "server": name,
                    "message": f"only {len(page['tools'])} of {page['total']} tools are listed over ssh://",
                }
            )
    described: dict[int, dict[str, Any]] = {}

    async def describe(i: int, entry: dict[str, Any]) -> None:
        try:
            answer = await _gateway_tool(
                client, "mcpx_describe", {"server": entry["server"], "tool": entry["name"]}
            )
        except (DaemonError, McpCallError) as exc:  # listed a moment ago, gone now: say so, list the rest
            errors.append({"server": entry["server"], "message": str(exc)})
            return
        described[i] = {"server": entry["server"], **answer["tool"]}

    async with anyio.create_task_group() as tg:
        for i, entry in enumerate(found):
            tg.start_soon(describe, i, entry)
    order = {name: i for i, name in enumerate(names)}
    tools = sorted(described.values(), key=lambda t: (order[t["server"]], str(t.get("name"))))
    if server is not None and errors and not tools:  # as /v1/tools' 502: the upstream failed, exit 1
        raise McpCallError({"code": INTERNAL_ERROR, "message": errors[0]["message"]})
    return {"tools": tools, "errors": errors}


def _call_answer(target: Target, body: dict[str, Any]) -> Any:
    """``POST /v1/call``'s answer from ``target``: over /v1, or through ``mcpx_call`` for ssh://."""
    if target.endpoint is None or target.endpoint.scheme != "ssh":
        return _ask(target, "POST", "/v1/call", body)
    names = body["server"], body["tool"]
    call = {"server": names[0], "tool": names[1], "arguments": body["arguments"]}

    async def work(client: Client) -> Any:
        texts = body.get("args")
        if texts:  # typed here, by the schema mcpx_describe shows, as the daemon types /v1/call's args
            call["arguments"] = {**call["arguments"], **await _typed_over_mcp(client, names, texts)}
        result = await client.request(
            "tools/call", {"name": "mcpx_call", "arguments": call}, timeout=body.get("timeout")
        )
        return {"server": names[0], "tool": names[1], "result": dict(result)}

    return _over_ssh(target, work)


async def _typed_over_mcp(client: Client, names: tuple[str, str], texts: dict[str, str]) -> dict[str, Any]:
    """``--arg k=v`` texts typed by the input schema the remote daemon's ``mcpx_describe`` shows."""
    from ..gateway._arguments import needs_schema, typed_arguments

    schema = None
    if needs_schema(texts):
        described = await client.request(
            "tools/call", {"name": "mcpx_describe", "arguments": {"server": names[0], "tool": names[1]}}
        )
        structured = described.get("structuredContent") if not described.get("isError") else None
        tool = structured.get("tool") if isinstance(structured, dict) else None
        schema = tool.get("inputSchema") if isinstance(tool, dict) else None
    return typed_arguments(texts, schema)


def _no_mcp_counterpart(command: str, target: Target) -> None:
    """Exit 2 when ``command`` (which needs /v1) is pointed at an ssh:// endpoint."""
    endpoint = target.endpoint
    if endpoint is not None and endpoint.scheme == "ssh":
        raise _fail(
            f"`mcpx {command}` needs the daemon's ops API (/v1), which {endpoint} does not reach (it speaks "
            f"MCP only); run it there: {shlex.join(endpoint.ssh_argv(['mcpx', command]))}, "
            "or use --daemon http://HOST:PORT"
        )


def _show(value: Any, as_json: bool) -> bool:
    """Print ``value`` as JSON when asked or when stdout is not a terminal; whether it did."""
    if as_json or not sys.stdout.isatty():
        typer.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())
        return True
    return False


def _echo_collisions(collisions: Any) -> None:
    """One line per name several passed-through servers offer: what each is offered as instead."""
    for found in collisions:
        offered = ", ".join(f"{o['server']}'s as {o['as']}" for o in found["offered"])
        typer.echo(
            f"collision: {found['kind']} {found['name']!r} of {', '.join(found['servers'])}: {offered}"
        )


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
        loop: Annotated[
            str | None,
            typer.Option(help="asyncio, uvloop or trio [default: asyncio].", envvar="MCPX_LOOP"),
        ] = None,
        state: StateOption = None,
    ) -> None:
        """Serve the gateway: /mcp (MCP, every revision) and /v1 (the ops API) on one listener.

        Without a configuration file the upstream is mcpx's own demo server,
        named demo.  Stop it with Ctrl-C (or SIGTERM).
        """
        from ._daemon_command import DEFAULT_LOOP, run

        loop = loop or DEFAULT_LOOP
        if loop not in ("asyncio", "uvloop", "trio"):
            raise typer.BadParameter("--loop must be asyncio, uvloop or trio")
        named = {
            "--port": port,
            "--address": address,
            "--passthrough": passthrough,
            "--mcp-spec": mcp_spec,
            "--state": state,
        }
        code = run(config, named, loop)
        if code:
            raise typer.Exit(code)

    @app.command()
    def serve(
        transport: Annotated[str, typer.Option(help="stdio (the only one: see below).")] = "stdio",
        config: ConfigOption = None,
        loop: Annotated[
            str | None,
            typer.Option(
                help="The event loop of a daemon it starts: asyncio, uvloop or trio [default: the daemon's].",
                envvar="MCPX_LOOP",
            ),
        ] = None,
        state: StateOption = None,
        passthrough: Annotated[
            list[str] | None,
            typer.Option(
                "--passthrough",
                help="Offer this configured server's own tools to this host (repeatable, or a comma list).",
            ),
        ] = None,
    ) -> None:
        """Be the gateway for an MCP host that spawns its servers: the host's stdio handed to the daemon.

        The daemon is started if none is running, and serves the host's
        pipes itself.  A daemon started with another configuration is not
        used: mcpx serve says what differs and how to go on.  There is no
        HTTP form: run `mcpx daemon --port N` and point the host at
        http://HOST:N/mcp.
        """
        if transport != "stdio":
            typer.echo(
                "mcpx: `mcpx serve` speaks stdio only; for HTTP run `mcpx daemon --port N` "
                "(add --address 0.0.0.0 to leave loopback) and use http://HOST:N/mcp",
                err=True,
            )
            raise typer.Exit(2)
        if loop is not None and loop not in ("asyncio", "uvloop", "trio"):
            raise typer.BadParameter("--loop must be asyncio, uvloop or trio")
        from ..gateway._shim import run_shim

        named = {"state.dir": ("--state", state)}
        if passthrough:
            named["mcp.passthrough"] = ("--passthrough", ",".join(passthrough))
        loaded = _load(config, named)
        where = Path(str(loaded.settings.value("state.dir")))
        raise typer.Exit(run_shim(where, config=config, loop=loop, configured=loaded))

    @app.command()
    def servers(state: StateOption = None, as_json: JsonOption = False, daemon: DaemonOption = None) -> None:
        """List the daemon's upstream servers and their pool state (over ssh://: mcpx_servers' view)."""
        target = _target(state, daemon)
        if target.endpoint is not None and target.endpoint.scheme == "ssh":

            async def listed(client: Client) -> Any:
                return await _gateway_tool(client, "mcpx_servers", {})

            found = _over_ssh(target, listed)
            if _show(found, as_json):
                return
            for entry in found["servers"]:
                era = entry.get("revision") or "-"
                typer.echo(
                    f"{entry['name']:<16} {entry['status']:<12} {era:<10} {entry.get('tools', 0)} tools"
                )
            _echo_collisions(found.get("collisions", ()))
            return
        answer = _ask(target, "GET", "/v1/servers")
        if _show(answer, as_json):
            return
        for server in answer["servers"]:
            pool = server.get("pool") or {}
            catalog = server.get("catalog") or {}
            where = server.get("url") or " ".join([server.get("command", ""), *server.get("args", [])])
            typer.echo(
                f"{server['name']:<16} {pool.get('state', '?'):<12} {catalog.get('status', '?'):<12} "
                f"{server['transport']:<6} {where}"
            )
            if catalog.get("detail"):
                typer.echo(f"  {catalog['status']}: {catalog['detail']}")
        _echo_collisions(answer.get("collisions", ()))

    @app.command()
    def tools(
        server: Annotated[str | None, typer.Argument(help="Only this server's tools.")] = None,
        state: StateOption = None,
        as_json: JsonOption = False,
        daemon: DaemonOption = None,
    ) -> None:
        """List the tools of every upstream server (or of SERVER)."""
        target = _target(state, daemon)
        if target.endpoint is not None and target.endpoint.scheme == "ssh":

            async def listed(client: Client) -> Any:
                return await _mcp_tools(client, server)

            answer = _over_ssh(target, listed)
        else:
            answer = _ask(target, "GET", "/v1/tools" + (f"?server={quote(server)}" if server else ""))
        if _show(answer, as_json):
            return
        for tool in answer["tools"]:
            description = str(tool.get("description") or "").strip().splitlines()
            typer.echo(f"{tool['server']}/{tool['name']:<24} {description[0] if description else ''}")
        for error in answer.get("errors", []):
            typer.echo(f"mcpx: {error['server']}: {error['message']}", err=True)

    @app.command()
    def logs(
        server: Annotated[str, typer.Argument(help="The server whose stderr to show.")],
        lines: Annotated[
            int, typer.Option("--lines", "-n", min=1, max=10_000, help="The last N lines of each instance.")
        ] = 200,
        state: StateOption = None,
        as_json: JsonOption = False,
        daemon: DaemonOption = None,
    ) -> None:
        """Show what SERVER's instances wrote on stderr lately (running ones and the last ended), oldest first.

        Each instance's lines come under a header naming it and, once it has
        ended, why and its exit code.  The daemon keeps the last 200 lines of
        each instance (GET /v1/servers/NAME/log).
        """
        target = _target(state, daemon)
        _no_mcp_counterpart("logs", target)
        answer = _ask(target, "GET", f"/v1/servers/{quote(server, safe='')}/log?lines={lines}")
        if as_json:
            typer.echo(orjson.dumps(answer, option=orjson.OPT_INDENT_2).decode())
            return
        if not answer["instances"]:
            typer.echo(f"mcpx: {server} has not been started since the daemon started", err=True)
            return
        for entry in answer["instances"]:
            state_text = "running" if entry["running"] else f"ended: {entry['ended']}"
            if entry["exitCode"] is not None:
                state_text += f" (exit code {entry['exitCode']})"
            dropped = f", {entry['dropped']} earlier lines not kept" if entry["dropped"] else ""
            typer.echo(f"== {server} instance {entry['instance']}, {state_text}{dropped}")
            for line in entry["lines"]:
                typer.echo(line)

    @app.command()
    def restart(
        server: Annotated[str | None, typer.Argument(help="Only this server.")] = None,
        state: StateOption = None,
        daemon: DaemonOption = None,
    ) -> None:
        """Restart a server's instances (or every server's) on the next call."""
        target = _target(state, daemon)
        _no_mcp_counterpart("restart", target)
        answer = _ask(target, "POST", "/v1/restart", {"server": server} if server else {})
        typer.echo(f"restarted: {', '.join(answer['restarted'])}")

    @app.command()
    def stop(
        state: StateOption = None,
        wait: Annotated[
            float, typer.Option("--wait", help="Seconds to wait for it to end before saying it has not.")
        ] = 30.0,
    ) -> None:
        """Stop this machine's daemon (SIGTERM): it ends its upstreams' processes before it exits."""
        where = _state(state)
        info = daemon_info(where)
        if info is None:
            typer.echo(f"mcpx: no daemon is running for {where}", err=True)
            raise typer.Exit(1)
        pid = int(info["pid"])
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            typer.echo(f"mcpx: the daemon for {where} (pid {pid}) had already stopped")
            return
        except PermissionError:
            raise _fail(f"the daemon for {where} (pid {pid}) belongs to another user; not stopped") from None
        if not wait_for_exit(pid, wait):
            raise _fail(
                f"the daemon for {where} (pid {pid}) has not stopped within {wait:g} s; its log is "
                f"{Path(where) / 'daemon.log'} (`kill -9 {pid}` ends it at once)",
                1,
            )
        typer.echo(f"mcpx: stopped the daemon for {where} (pid {pid})")

    @app.command()
    def status(state: StateOption = None, as_json: JsonOption = False, daemon: DaemonOption = None) -> None:
        """Is a daemon running, where, and how are its servers."""
        target = _target(state, daemon)
        _no_mcp_counterpart("status", target)
        if target.endpoint is not None:
            info: dict[str, Any] = {"url": target.endpoint.base_url}
        else:
            found = daemon_info(target.state)
            if found is None:
                typer.echo(
                    f"mcpx: no daemon is running for {target.state}; start one with `mcpx daemon`", err=True
                )
                raise typer.Exit(1)
            info = found
        health = _ask(target, "GET", "/health")
        listed = _ask(target, "GET", "/v1/servers")
        summary = {"daemon": info, "health": health, "servers": listed["servers"]}
        if _show(summary, as_json):
            return
        where = f"(pid {info['pid']}) at {info['mcp']}" if "pid" in info else f"at {info['url']}"
        up = health.get("uptimeSeconds")
        since = f", up {format_duration(round(float(up)))}" if isinstance(up, int | float) else ""
        typer.echo(
            f"mcpx daemon {health['version']} {where}{since}: "
            f"{health.get('instances', '?')} upstream instances, {health.get('inFlight', '?')} calls in flight"
        )
        for server in listed["servers"]:
            pool = server.get("pool") or {}
            typer.echo(
                f"  {server['name']:<16} {pool.get('state', '?'):<9} "
                f"{len(pool.get('instances') or [])} instances, {pool.get('inFlight', 0)} in flight"
            )


def wait_for_exit(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` (not a child of ours) ends within ``seconds``: on its pidfd where there is one."""
    deadline = time.monotonic() + seconds
    if hasattr(os, "pidfd_open"):
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return True
        try:
            readable, _, _ = select.select([fd], [], [], seconds)  # a pidfd is readable once it has exited
            return bool(readable)
        finally:
            os.close(fd)
    while time.monotonic() < deadline:  # no pidfd (macOS): look again every 20 ms
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def _call_showing_progress(target: Target, body: dict[str, Any], label: str) -> Any:
    """``POST /v1/call``'s answer, the upstream's progress drawn on stderr meanwhile; exits as ``_ask`` does.

    Over ssh:// (MCP only), or with no daemon to reach, this is
    ``_call_answer``: no progress, and the same messages as every command.
    """
    if target.endpoint is not None and target.endpoint.scheme == "ssh":
        return _call_answer(target, body)
    info = daemon_info(target.state) if target.endpoint is None else {"url": target.endpoint.base_url}
    if info is None:
        return _call_answer(target, body)
    try:
        status, answer = Daemon(str(info["url"])).call_showing_progress(body, label)
    except DaemonError as exc:  # not retried: the tool may have run
        raise _fail(str(exc)) from None
    refused = refusal(status, answer)
    if refused is not None:
        raise _fail(*refused)
    return answer


def call_through_daemon(
    server: str,
    tool: str,
    arguments: dict[str, Any],
    *,
    state: str | None,
    timeout: float | None,
    as_json: bool,
    daemon: str | None = None,
    texts: dict[str, str] | None = None,
) -> None:
    """``mcpx call SERVER TOOL``: POST /v1/call (or mcpx_call over ssh://); exit 1 on isError or an upstream error.

    ``texts`` are ``--arg k=v``'s, typed by the tool's input schema where it is known.
    """
    body = call_body(server, tool, arguments, timeout, texts)
    target = _target(state, daemon)
    if sys.stderr.isatty():  # a person is watching: show the upstream's progress there
        answer = _call_showing_progress(target, body, f"{server}/{tool}")
    else:
        answer = _call_answer(target, body)
    result = answer["result"]
    if not _show(result, as_json):
        for line in result_lines(result):
            typer.echo(line)
    if result.get("isError"):
        raise typer.Exit(1)
