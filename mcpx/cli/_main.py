"""``mcpx``: the command line.

Settings come from defaults, then the environment (``MCPX_*``), then flags.
Every command that serves MCP accepts the revision policy
(spec/revision-conflicts.md; spec/configuration.md, "Settings"):
``--mcp-spec`` (``MCPX_MCP_SPEC``, spec.first), ``--spec-precedence``
(``MCPX_SPEC_PRECEDENCE``) and ``--spec-lenient`` (``MCPX_SPEC_LENIENT``); an
unknown revision is refused with the list of valid ones.
"""

from __future__ import annotations

import contextlib
from typing import Annotated

import orjson
import typer

from .. import __version__
from ..core import INTERNAL_ERROR
from ..core.framing import DEFAULT_MAX_LINE
from ..core.policy import SpecPolicy
from ..core.revisions import REVISIONS, parse_revision
from ..drivers import LOOPS, HttpConfig

app = typer.Typer(
    name="mcpx",
    help="A Model Context Protocol gateway that speaks every MCP revision in both directions.",
    no_args_is_help=True,
    add_completion=False,
)


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()] if value else []


def build_policy(first: str | None, precedence: str | None, lenient: str | None) -> SpecPolicy:
    """The effective spec policy; exits with a clear message on an unknown revision."""
    try:
        return SpecPolicy.build(precedence=_split(precedence), lenient=_split(lenient), first=first or None)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


@app.command()
def version() -> None:
    """Print mcpx's version and the MCP revisions it speaks."""
    typer.echo(f"mcpx {__version__} (MCP {', '.join(REVISIONS)})")


@app.command()
def demo(
    loop: Annotated[
        str, typer.Option(help=f"Event loop: {', '.join(LOOPS)}.", envvar="MCPX_LOOP")
    ] = "asyncio",
    mcp_spec: Annotated[
        str | None,
        typer.Option(
            "--mcp-spec", help="Revision whose rules win conflicts (spec.first).", envvar="MCPX_MCP_SPEC"
        ),
    ] = None,
    spec_precedence: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated revisions, first wins (spec.precedence).", envvar="MCPX_SPEC_PRECEDENCE"
        ),
    ] = None,
    spec_lenient: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated revisions not held strictly (spec.lenient).", envvar="MCPX_SPEC_LENIENT"
        ),
    ] = None,
    revisions: Annotated[
        str | None,
        typer.Option(help="Comma-separated revisions to speak (default: all five).", envvar="MCPX_REVISIONS"),
    ] = None,
    drain: Annotated[
        float, typer.Option(help="Seconds requests in flight get after stdin closes (transport.stdioDrain).")
    ] = 2.0,
    max_line: Annotated[
        int, typer.Option(help="Longest accepted stdio line in bytes (transport.maxLine).")
    ] = DEFAULT_MAX_LINE,
    trace: Annotated[bool, typer.Option(help="Write version decisions to stderr.")] = False,
    http: Annotated[
        int | None,
        typer.Option("--http", help="Serve Streamable HTTP on this port (0 picks one) instead of stdio."),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to bind with --http.")] = "127.0.0.1",
    unix: Annotated[str | None, typer.Option(help="Also (or only) serve HTTP on this unix socket.")] = None,
    profile: Annotated[
        str, typer.Option(help="demo (small and friendly) or conformance (the official suite's fixtures).")
    ] = "demo",
    allowed_origin: Annotated[
        list[str] | None,
        typer.Option(help="An Origin to accept besides loopback (transport.allowedOrigins); repeatable."),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            help="A Host to accept besides loopback and the bound address (transport.allowedHosts)."
        ),
    ] = None,
    max_body: Annotated[int, typer.Option(help="Largest HTTP request body in bytes (413 beyond).")] = 4
    * 1024
    * 1024,
    request_timeout: Annotated[
        float, typer.Option(help="Seconds a client has to send a request's headers and body (408 beyond).")
    ] = 10.0,
    sse_keepalive: Annotated[
        float,
        typer.Option(help="Seconds of silence before a slow answer becomes an event stream with comments."),
    ] = 15.0,
) -> None:
    """Serve the built-in demo server over stdio (or HTTP with --http / --unix)."""
    from ..demo import build_demo_server
    from ..drivers import serve_http, serve_stdio

    if loop not in LOOPS:
        raise typer.BadParameter(f"unknown loop {loop!r}; choose one of {', '.join(LOOPS)}")
    policy = build_policy(mcp_spec, spec_precedence, spec_lenient)
    try:
        spoken = tuple(parse_revision(r) for r in _split(revisions)) or REVISIONS
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if profile == "demo":
        server = build_demo_server()
    elif profile == "conformance":
        from ..demo.conformance import build_conformance_server

        server = build_conformance_server()
    else:
        raise typer.BadParameter(f"unknown profile {profile!r}; choose demo or conformance")
    config = server.session_config(policy=policy, revisions=spoken, drain=drain, trace=trace)
    if http is None and unix is None:
        serve_stdio(server, loop=loop, config=config, max_line=max_line, trace=trace)
        return

    def ready(urls: list[str]) -> None:
        for url in urls:
            typer.echo(f"mcpx: serving MCP at {url}", err=True)

    http_config = HttpConfig(
        bound_host=host,
        allowed_origins=frozenset(allowed_origin or ()),
        allowed_hosts=frozenset(allowed_host or ()),
        max_body=max_body,
        request_timeout=request_timeout,
        sse_keepalive=sse_keepalive,
    )
    with contextlib.suppress(KeyboardInterrupt):
        serve_http(
            server,
            loop=loop,
            host=host,
            port=http,
            unix_path=unix,
            config=config,
            http=http_config,
            trace=trace,
            ready=ready,
        )


@app.command()
def call(
    target: Annotated[
        list[str],
        typer.Argument(
            help="SERVER TOOL (through the running daemon), or TOOL -- COMMAND... | TOOL -- URL (directly)."
        ),
    ],
    arg: Annotated[
        list[str] | None,
        typer.Option("--arg", help="An argument: key=value (typed by the tool's input schema) or key:=JSON."),
    ] = None,
    json_arguments: Annotated[
        str | None, typer.Option("--json-args", help="All arguments as one JSON object.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON (through the daemon).")
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds this call may take (can only lower pool.callTimeout; through the daemon)."
        ),
    ] = None,
    mcp_spec: Annotated[
        str | None,
        typer.Option("--mcp-spec", help="Speak this revision (2026-07-28 or a legacy one to offer)."),
    ] = None,
    loop: Annotated[str, typer.Option(help="asyncio or trio.")] = "asyncio",
    state: Annotated[
        str | None, typer.Option("--state", help="State directory (era cache).", envvar="MCPX_STATE")
    ] = None,
    daemon: Annotated[
        str | None,
        typer.Option(
            "--daemon", help="The daemon to call through: ssh://[user@]host[:port] or http://host:port."
        ),
    ] = None,
) -> None:
    """Call a tool: `mcpx call SERVER TOOL` through the daemon, or `mcpx call TOOL -- COMMAND...|URL` directly.

    Through the daemon, SERVER is a configured server (`mcpx servers` lists
    them) and the result is printed as text on a terminal, as JSON otherwise
    or with --json.  Directly, the server is a command to spawn over stdio or
    an HTTP URL, and the outcome is printed as JSON.
    A URL without --mcp-spec is probed first (as `mcpx probe URL`, through the
    era cache) and spoken to as the probe found it: 2026-07-28 or a legacy
    revision over Streamable HTTP, or the 2024-11-05 HTTP+SSE transport.
    Exits 1 when the server answers a JSON-RPC error or the tool reports
    isError, after printing what it said.
    """
    import sys

    import anyio

    from ..client import Client, McpCallError, connect_http, connect_sse, connect_stdio
    from ..core.probe import ProbeConfig, ProbeFailed
    from ..drivers._eracache import era_cache_path
    from ..drivers._probe_http import probe_http
    from ._fast import call_arguments

    try:
        arguments, texts = call_arguments(arg or [], json_arguments)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    direct = "--" in sys.argv[1:] or any(t.startswith(("http://", "https://")) for t in target[1:])
    if not direct:
        if len(target) != 2:
            raise typer.BadParameter(
                "use `mcpx call SERVER TOOL --arg k=v` (through the daemon) or `mcpx call TOOL -- COMMAND...`"
            )
        from ._gateway import call_through_daemon

        call_through_daemon(
            target[0],
            target[1],
            arguments,
            state=state,
            timeout=timeout,
            as_json=as_json,
            daemon=daemon,
            texts=texts,
        )
        return
    tool, command = target[0], target[1:]
    if not command:
        raise typer.BadParameter("after --, give the command to spawn or the server's URL")
    revision = parse_revision(mcp_spec) if mcp_spec else None
    modern = revision is not None and revision.is_modern
    if loop not in ("asyncio", "trio"):
        raise typer.BadParameter("--loop must be asyncio or trio")
    outcome: dict[str, object] = {}

    is_url = len(command) == 1 and command[0].startswith(("http://", "https://"))

    async def main() -> None:
        offer = None if modern else revision
        connection: contextlib.AbstractAsyncContextManager[Client]
        if is_url and revision is None:  # no --mcp-spec: the era probe decides (spec/era-probe.md)
            config = ProbeConfig(client_info={"name": "mcpx", "version": __version__})
            found = await probe_http(command[0], config, cache_path=era_cache_path(_state_dir(state)))
            if isinstance(found, ProbeFailed):
                raise McpCallError({"code": INTERNAL_ERROR, "message": found.reason})
            if found.era == "legacy-sse":
                connection = connect_sse(command[0])
            else:
                legacy = found.revision if found.era == "legacy" else None
                connection = connect_http(command[0], modern=found.era == "modern", offer=legacy)
        elif is_url:
            connection = connect_http(command[0], modern=modern, offer=offer)
        else:
            connection = connect_stdio(command, modern=modern, offer=offer)
        async with connection as client:
            try:
                if texts:  # typed by the tool's input schema, as the server lists it
                    from ..gateway._arguments import input_schema_of, needs_schema, typed_arguments

                    schema = input_schema_of(await client.list_tools(), tool) if needs_schema(texts) else None
                    arguments.update(typed_arguments(texts, schema))
                outcome["result"] = await client.call_tool(tool, arguments)
            except McpCallError as exc:
                outcome["error"] = {"code": exc.code, "message": exc.message, "data": exc.data}

    try:
        anyio.run(main, backend=loop)
    except McpCallError as exc:
        typer.echo(f"mcpx: {exc.message}", err=True)
        raise typer.Exit(2) from None
    except ValueError as exc:  # a URL mcpx cannot use
        typer.echo(f"mcpx: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        typer.echo(f"mcpx: could not start {command[0]!r}: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(orjson.dumps(outcome, option=orjson.OPT_INDENT_2).decode())
    result = outcome.get("result")
    if "error" in outcome or (isinstance(result, dict) and result.get("isError")):
        raise typer.Exit(1)


def _state_dir(given: str | None) -> str:
    """``--state``, else ``MCPX_STATE``, else ``$XDG_STATE_HOME/mcpx`` (``~/.local/state/mcpx``)."""
    import os

    if given:
        return given
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "mcpx")


@app.command()
def probe(
    command: Annotated[
        list[str],
        typer.Argument(help="The server to spawn (after --), e.g. -- python -m srv; or its http(s) URL."),
    ],
    state: Annotated[
        str | None, typer.Option("--state", help="State directory (era cache).", envvar="MCPX_STATE")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each answer.")] = 5.0,
) -> None:
    """Find out which era a server (spawned from COMMAND, or at a URL) speaks; print it, the revision and the trace.

    A URL is probed over Streamable HTTP, falling back to the 2024-11-05
    HTTP+SSE transport ("era": "legacy-sse") when Streamable HTTP is not there.
    The answer is cached per server configuration in <state>/upstream-eras.json,
    so the next probe starts from it ("cache": "confirmed").  Exits 1 when no
    era worked.
    """
    import anyio

    from ..core.probe import ProbeConfig
    from ..drivers._eracache import era_cache_path
    from ..drivers._probe_http import probe_http
    from ..drivers._probe_stdio import describe, probe_stdio

    config = ProbeConfig(
        client_info={"name": "mcpx", "version": __version__}, timeout=timeout, timeout_setting="--timeout"
    )
    cache_path = era_cache_path(_state_dir(state))
    is_url = len(command) == 1 and command[0].startswith(("http://", "https://"))

    async def main() -> object:
        if is_url:
            return await probe_http(command[0], config, cache_path=cache_path)
        return await probe_stdio(command, config, cache_path=cache_path)

    try:
        outcome = anyio.run(main)
    except ValueError as exc:  # a URL mcpx cannot use
        typer.echo(f"mcpx: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        typer.echo(f"mcpx: could not start {command[0]!r}: {exc}", err=True)
        raise typer.Exit(2) from None
    shown = describe(outcome)  # type: ignore[arg-type]
    typer.echo(orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode())
    if shown["era"] is None:
        raise typer.Exit(1)


@app.command("settings")
def settings(
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            help="The configuration file (default: $MCPX_CONFIG, else ~/.config/mcpx/config.toml).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (values, sources, servers).")] = False,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="A setting as key=value (the flag layer); repeatable.")
    ] = None,
    mcp_spec: Annotated[str | None, typer.Option("--mcp-spec", help="spec.first.")] = None,
    spec_precedence: Annotated[str | None, typer.Option(help="spec.precedence (comma-separated).")] = None,
    spec_lenient: Annotated[str | None, typer.Option(help="spec.lenient (comma-separated).")] = None,
    passthrough: Annotated[str | None, typer.Option(help="mcp.passthrough (comma-separated).")] = None,
    address: Annotated[str | None, typer.Option(help="transport.address.")] = None,
    port: Annotated[str | None, typer.Option(help="transport.port.")] = None,
    state: Annotated[str | None, typer.Option("--state", help="state.dir.")] = None,
    daemon: Annotated[str | None, typer.Option("--daemon", help="daemon.endpoint.")] = None,
) -> None:
    """Show each effective setting and where it came from (default, file, env, flag), and the servers.

    Layers, lowest first: defaults, the configuration file, MCPX_* variables,
    flags.  Exits 2, listing every problem, when the configuration is not
    usable.  Secrets are never printed.
    """
    from ..config import ConfigError, load_config
    from ._settings import collect_flags, render_text

    named = {
        "spec.first": ("--mcp-spec", mcp_spec),
        "spec.precedence": ("--spec-precedence", spec_precedence),
        "spec.lenient": ("--spec-lenient", spec_lenient),
        "mcp.passthrough": ("--passthrough", passthrough),
        "transport.address": ("--address", address),
        "transport.port": ("--port", port),
        "state.dir": ("--state", state),
        "daemon.endpoint": ("--daemon", daemon),
    }
    try:
        flags, origins = collect_flags(set_ or [], named)
        loaded = load_config(config, flags=flags, flag_origins=origins)
    except (ConfigError, ValueError) as exc:
        typer.echo(f"mcpx: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(orjson.dumps(loaded.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        typer.echo(render_text(loaded))


from ._gateway import register as _register_gateway  # noqa: E402  (the commands are defined above it)

_register_gateway(app)


@app.command("conformance-client")
def conformance_client(url: Annotated[str, typer.Argument(help="The suite's mock server URL.")]) -> None:
    """Act as the official conformance suite's client leg asks (scenario in MCP_CONFORMANCE_SCENARIO)."""
    from ..client.conformance import main as run

    raise typer.Exit(run([url]))
