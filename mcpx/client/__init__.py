"""``mcpx.client``: talk to one MCP server from async Python (asyncio or trio, through anyio).

A thin driver around the pure ``ClientSession`` (``mcpx.core.client_session``): it
spawns the server (stdio), moves bytes, and turns the session's actions into
awaited results.  Both eras, one API::

    async with connect_stdio(["python", "-m", "some_server"], resolver=answer) as client:
        tools = await client.list_tools()
        result = await client.call_tool("echo", {"text": "hi"})

``resolver(method, params)`` answers the server's questions —
``elicitation/create``, ``sampling/createMessage``, ``roots/list`` — whether a
legacy server sent them as requests or a 2026-07-28 server answered
``input_required``: the same function, the same arguments (spec/client.md §4).
The client declares only the capabilities it is given, so a server never asks
what nobody can answer.

The spawned server runs without a shell; its stderr is kept, bounded, for
error messages; closing the client closes the server's stdin, waits, then
terminates and finally kills it.

Modules: the ``connect_*`` functions are here; ``Client``, what callers
use, is in ``_client``, and the layer it stands on (its fields, the linked
mode the gateway's router drives, the loop that carries out the session's
actions and answers the server's questions) in ``_driver``.  The list
policy is the core's (``mcpx.core.client_lists``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio
import anyio.abc

from ..core import INTERNAL_ERROR, Revision, Send
from ..core.client_session import ClientSession
from ..core.framing import DEFAULT_MAX_LINE, LineReader
from ..core.http_client import HttpClientConfig, HttpClientConnection, tool_header_params
from ..core.sse_client import SseClientConfig, SseClientConnection
from ..core.upstream_auth import UpstreamAuth
from ..drivers._http_transport import HttpTransport
from ..drivers._probe_stdio import StdioHandover
from ..drivers._process import open_server_process, signal_group, stop_process
from ..drivers._sse_transport import SseTransport
from ..drivers._stderr import StderrLog
from ._client import Client
from ._driver import (
    CLIENT_INFO,
    HTTP_CLOSE_TIMEOUT,
    STDERR_KEPT,
    McpCallError,
    Resolver,
    RoundResolver,
    UpstreamLink,
    _pipe_reader,
    _pipe_write_nowait,
    _stdout_transport,
)

__all__ = [
    "Client",
    "McpCallError",
    "Resolver",
    "RoundResolver",
    "UpstreamLink",
    "connect_http",
    "connect_sse",
    "connect_stdio",
]


@contextlib.asynccontextmanager
async def connect_stdio(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    modern: bool = False,
    offer: Revision | None = None,
    capabilities: Mapping[str, Any] | None = None,
    resolver: Resolver | None = None,
    client_info: Mapping[str, Any] | None = None,
    max_line: int = DEFAULT_MAX_LINE,
    start_timeout: float = 30.0,
    call_timeout: float = 120.0,
    shutdown_grace: float = 2.0,
    answer_modern_requests: bool = False,
    max_rounds: int = 8,
    stderr_log: StderrLog | None = None,
    adopt: StdioHandover | None = None,
) -> AsyncIterator[Client]:
    """Spawn ``argv`` (no shell) and talk MCP to it over its stdin and stdout.

    ``adopt``: go on with the process the era probe started and settled
    (``probe_stdio_handing_over``) instead of spawning one: no second
    process, no second handshake; ``modern`` and ``offer`` must be what the
    probe found.  It is stopped at the end like a spawned one.

    Its stderr is read to the end, always, into ``client.stderr_log``
    (``stderr_log`` when given: the pool keeps one per instance), which also
    gets the exit code; a failed handshake says both.

    ``modern`` speaks 2026-07-28 (no handshake); otherwise ``initialize``
    offers ``offer`` (the newest legacy revision by default).
    ``answer_modern_requests`` answers requests a 2026-07-28 server sends
    anyway (that revision has none; by default they are dropped), under the
    legacy rules; ``max_rounds`` bounds the ``input_required`` rounds of one call.
    """
    session = ClientSession(
        client_info=client_info or CLIENT_INFO,
        capabilities=capabilities,
        modern=modern,
        offer=offer,
        newline=True,
        answer_modern_requests=answer_modern_requests,
        max_rounds=max_rounds,
        max_message=max_line,  # what mcpx takes from a peer, it sends no peer more than
    )
    full_env = {**os.environ, **env} if env is not None else None
    if adopt is not None:
        settled = adopt.outcome
        if (settled.era == "modern") != modern or settled.era == "legacy-sse":
            with anyio.CancelScope(shield=True):  # it is ours now, used or not
                await stop_process(adopt.process, shutdown_grace)
                await adopt.process.aclose()
            raise ValueError(f"connect_stdio(modern={modern}) cannot adopt a {settled.era} connection")
        process = adopt.process
    else:
        process = await open_server_process(argv, env=full_env, cwd=cwd)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr

    log = stderr_log if stderr_log is not None else StderrLog()

    async def keep_stderr(client: Client) -> None:  # drained, or a chatty server blocks on a full pipe
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in stderr:
                client.stderr.extend(chunk)
                del client.stderr[: max(0, len(client.stderr) - STDERR_KEPT)]
                log.feed(chunk, time.time())
        log.close(time.time())
        client.stderr_done.set()

    async def keep_exit_code() -> None:
        log.exit_code = await process.wait()

    async def write(data: bytes) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await stdin.send(data)

    write_nowait = _pipe_write_nowait(stdin)

    failure: McpCallError | None = None
    try:
        async with anyio.create_task_group() as tg:
            client = Client(session, write, tg, resolver)
            client.attach_pipe(
                write_nowait, _pipe_reader(stdout), _stdout_transport(process), LineReader(max_line)
            )
            client.call_timeout = call_timeout
            client.stderr_log = log
            tg.start_soon(keep_stderr, client)
            tg.start_soon(keep_exit_code)
            if adopt is not None:  # what the probe settled, and what it read past its last answer
                settled = adopt.outcome
                if not modern and settled.revision is not None:
                    session.adopt_handshake(
                        revision=settled.revision,
                        capabilities=settled.capabilities or {},
                        server_info=settled.server_info or {},
                        instructions=settled.instructions,
                    )
                elif settled.capabilities is not None and session.modern:  # what its discover said
                    session.adopt_discovery(settled.capabilities)
                client.take_leftover(adopt.leftover)
                await client.flush()
            tg.start_soon(client.read_from, stdout, max_line)
            if not modern and adopt is None:
                failure = await client.handshake(start_timeout, "the server", stderr=True)
            if failure is None:
                try:
                    yield client
                finally:
                    with anyio.CancelScope(shield=True):
                        await stop_process(process, shutdown_grace)
            tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                signal_group(process, signal.SIGKILL)
                await process.wait()
            await process.aclose()


class _SessionReceiver:
    """What the HTTP binding decodes, fed to a ``Client``'s session (see ``HttpTransport``)."""

    def __init__(self) -> None:
        self.client: Client | None = None

    def json(self, message: Any, handle: int | None) -> None:
        assert self.client is not None
        self.client.session.receive_json(message)

    def closed(self) -> None:
        assert self.client is not None
        self.client.session.receive_eof()

    def expired(self, session_id: str) -> None:
        # The session is gone: its calls fail; the next request opens a new one.
        assert self.client is not None
        self.client.expired = True
        self.client.session.receive_eof(
            f"the server ended session {session_id} (HTTP 404) before answering; "
            "mcpx opens a new session for the next request, so the call can be retried"
        )


def _http_transport(
    http: HttpClientConnection, tg: anyio.abc.TaskGroup
) -> tuple[HttpTransport, _SessionReceiver]:
    receiver = _SessionReceiver()
    return HttpTransport(http, tg, receiver), receiver


@contextlib.asynccontextmanager
async def connect_http(
    url: str,
    *,
    modern: bool = False,
    offer: Revision | None = None,
    capabilities: Mapping[str, Any] | None = None,
    resolver: Resolver | None = None,
    client_info: Mapping[str, Any] | None = None,
    headers: Sequence[tuple[str, str]] = (),
    auth: UpstreamAuth | None = None,
    start_timeout: float = 30.0,
    call_timeout: float = 120.0,
    answer_modern_requests: bool = False,
    max_rounds: int = 8,
) -> AsyncIterator[Client]:
    """Talk MCP to the Streamable HTTP endpoint ``url`` (``headers`` for auth, on every request).

    ``modern`` speaks 2026-07-28 (one POST per request, no session);
    otherwise ``initialize`` offers ``offer`` and the session id it gets is
    sent on every later request, and ``DELETE`` ends it on close.
    ``auth`` (``mcpx.config.parse_auth``) adds its headers and query
    parameters to every request of the connection — POST, GET stream, DELETE;
    a ``type: env`` auth is for spawned servers and refused here.
    ``answer_modern_requests`` and ``max_rounds`` are as for ``connect_stdio``.
    """
    if auth is not None and auth.transport != "http":
        raise ValueError(f"auth type {auth.type} is for spawned (command) servers, not for {url}")
    target = auth.apply_to_url(url) if auth is not None else url  # may hold a secret: never in messages
    extra = (*headers, *(auth.headers if auth is not None else ()))

    def session_for(expired: ClientSession | None = None) -> ClientSession:
        return ClientSession(
            continues=expired,
            client_info=client_info or CLIENT_INFO,
            capabilities=capabilities,
            modern=modern,
            offer=offer,
            stream_per_request=True,
            answer_modern_requests=answer_modern_requests,
            max_rounds=max_rounds,
        )

    session = session_for()
    http = HttpClientConnection(HttpClientConfig(url=target, modern=modern, headers=extra))
    failure: McpCallError | None = None
    async with anyio.create_task_group() as tg:
        transport, receiver = _http_transport(http, tg)

        async def never(_: bytes) -> None:
            raise AssertionError("an HTTP client sends whole Send actions")

        async def send(action: Send) -> None:
            await transport.send(action.payload, action.stream)

        def on_tools(tools: list[Any]) -> list[Any]:
            kept = []
            for tool in tools:
                params = tool_header_params(tool) if isinstance(tool, Mapping) else None
                if params is None or not isinstance(tool.get("name"), str):
                    continue  # an invalid x-mcp-header annotation: the tool cannot be called correctly
                http.set_tool_headers(tool["name"], params)
                kept.append(tool)
            return kept

        client = Client(
            session,
            never,
            tg,
            resolver,
            send=send,
            abandon=transport.abandon,
            lock=transport.lock,  # one lock for the session and the binding
            on_tools=on_tools,
        )
        client.call_timeout = call_timeout
        transport.after = client.flush_held
        receiver.client = client
        tg.start_soon(transport.run_timer)

        async def start_session() -> McpCallError | None:
            failure = await client.handshake(start_timeout, f"the server at {url}")
            if failure is None:
                # What the server sends outside any request (questions included) comes on
                # the session's GET stream; a server without one answers 405, which is fine.
                async with transport.lock:
                    http.open_get_stream(time.monotonic())
                    await transport.flush()
            return failure

        async def renew() -> None:
            """The server forgot the session (404): a fresh ClientSession and a new ``initialize``."""
            client.session = session_for(client.session)
            client.ready, client.ready_info, client.init_error = anyio.Event(), None, None
            client.forget_lists()
            client.expired = False
            failure = await start_session()
            if failure is not None:
                client.expired = True  # try again on the next request
                raise failure
            await client.resubscribe()  # the new session knows none of the old one's subscriptions

        if not modern:
            client.renew = renew
            failure = await start_session()
        if failure is None:
            try:
                yield client
            finally:
                with anyio.CancelScope(shield=True):
                    await transport.aclose(HTTP_CLOSE_TIMEOUT)
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


@contextlib.asynccontextmanager
async def connect_sse(
    url: str,
    *,
    offer: Revision = Revision.V2024_11_05,
    capabilities: Mapping[str, Any] | None = None,
    resolver: Resolver | None = None,
    client_info: Mapping[str, Any] | None = None,
    headers: Sequence[tuple[str, str]] = (),
    auth: UpstreamAuth | None = None,
    start_timeout: float = 30.0,
    call_timeout: float = 120.0,
    answer_modern_requests: bool = False,
    max_rounds: int = 8,
) -> AsyncIterator[Client]:
    """Talk MCP to a 2024-11-05 server over its HTTP+SSE transport; ``url`` is its SSE endpoint (often /sse).

    MCP 2024-11-05, Transports → "HTTP with SSE": a GET opens the event
    stream, its ``endpoint`` event names where every message is POSTed (on
    the same origin, or the connection fails), and the server's messages
    arrive on the stream.  ``initialize`` offers ``offer`` (2024-11-05: the
    revision of this transport; a newer server that kept it may counter-offer
    one mcpx speaks).  ``headers`` (auth) go on the GET and every POST.
    Closing the client closes the stream, which ends the session on the server.
    ``auth`` adds its headers to the GET and every POST; query-string auth
    is refused here, since the POST URL is the server's to name.
    ``answer_modern_requests`` and ``max_rounds`` are taken for a signature
    like ``connect_stdio``'s; a session over this transport is never
    2026-07-28, so neither changes anything here.
    """
    if auth is not None and (auth.transport != "http" or auth.query):
        raise ValueError(
            f"auth type {auth.type} cannot be used over the 2024-11-05 HTTP+SSE transport of {url}; "
            "use bearer, basic or header auth"
        )
    extra = (*headers, *(auth.headers if auth is not None else ()))
    session = ClientSession(
        client_info=client_info or CLIENT_INFO,
        capabilities=capabilities,
        offer=offer,
        answer_modern_requests=answer_modern_requests,
        max_rounds=max_rounds,
    )
    config = SseClientConfig(url=url, headers=extra, endpoint_timeout=start_timeout)
    sse = SseClientConnection(config)
    failure: McpCallError | None = None
    async with anyio.create_task_group() as tg:
        transport = SseTransport(sse, session, tg)

        async def never(_: bytes) -> None:
            raise AssertionError("an HTTP+SSE client sends whole Send actions")

        client = Client(session, never, tg, resolver, send=transport.send, lock=transport.lock)
        client.call_timeout = call_timeout
        transport.after = client.flush_held
        tg.start_soon(transport.run_timer)
        try:
            await transport.open()
            failure = await client.handshake(start_timeout, f"the server at {url}")
            if failure is not None and sse.endpoint is None and sse.ended is not None:
                why = f"mcpx could not open the HTTP+SSE stream at {url}: {sse.ended}"
                failure = McpCallError({"code": INTERNAL_ERROR, "message": why})
            if failure is None:
                yield client
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await transport.aclose()
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
