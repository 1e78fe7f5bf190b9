"""The official MCP Python SDK (``mcp`` 2.3.0) as an HTTP client of ``mcpx demo --http 0``.

One server per driver loop (a module-scoped fixture) serves every test for
that loop.  The SDK connects with its own HTTP transports:

* Streamable HTTP (``mcp.client.streamable_http.streamable_http_client``, what
  ``Client(url)`` uses) with a legacy session at 2024-11-05, 2025-03-26,
  2025-06-18 and 2025-11-25 (``Client(mode="legacy")``, pinned with
  ``_sdk_harness.pin_handshake_version``), and with per-request 2026-07-28
  POSTs, both pinned (``mode="2026-07-28"``) and discovered (``mode="auto"``).
  2024-11-05 predates Streamable HTTP, but the handshake does not care which
  transport carries it: the SDK offers it and mcpx accepts it as offered, so
  that mix is covered too.
* The 2024-11-05 HTTP+SSE transport (``mcp.client.sse.sse_client``), pinned to
  2024-11-05.

Two views of each connection:

* ``test_conversation`` checks what the SDK reports (negotiation, tools, the
  revision-dependent shape of results, ``isError``, progress and logging,
  resources, prompts) plus a tap on the SDK's message streams, as the stdio
  interop test does.
* ``test_http_exchange`` checks the HTTP underneath, recorded with httpx2
  event hooks on the client the SDK is given: the legacy session's
  ``Mcp-Session-Id`` (minted on ``initialize``, sent back on every later
  request, ended with DELETE when the SDK closes, 404 afterwards); no session
  at 2026-07-28; a request with progress answered as ``text/event-stream``; and
  for HTTP+SSE, the endpoint the stream names and the end of the session with
  the stream.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import mcp_types as t
import pytest
from mcp.client import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from mcpx.demo import README
from tests.conformance.http_peer import start_http_server, stop_http_server

from ._sdk_harness import (
    LOOPS,
    MODERN,
    WireLog,
    _TapReceive,
    _TapSend,
    at_least,
    pin_handshake_version,
)

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
MODERN_ONLY_RESULT_KEYS = ("resultType", "ttlMs", "cacheScope")

WEATHER = {"city": "Oslo", "temperature": 21.5, "conditions": "sunny"}
DEMO_TOOLS = {
    "echo",
    "add",
    "tiny_image",
    "tiny_audio",
    "embedded_note",
    "readme_link",
    "weather",
    "count",
    "fail",
    "sleep",
}

STREAMABLE = "streamable"
SSE = "sse"

CONNECTIONS = [
    pytest.param("2024-11-05", "legacy", SSE, id="2024-11-05-sse"),
    pytest.param("2024-11-05", "legacy", STREAMABLE, id="2024-11-05-streamable"),
    *(
        pytest.param(revision, "legacy", STREAMABLE, id=revision)
        for revision in ("2025-03-26", "2025-06-18", "2025-11-25")
    ),
    pytest.param(MODERN, MODERN, STREAMABLE, id=f"{MODERN}-pinned"),
    pytest.param(MODERN, "auto", STREAMABLE, id=f"{MODERN}-discover"),
]

CALL_TIMEOUT = 10.0  # per request, SDK-side
CONVERSATION_TIMEOUT = 30.0  # one whole connection, opening and closing included
SESSION_END_TIMEOUT = 5.0  # how long mcpx may take to notice an HTTP+SSE stream went away


# --------------------------------------------------------------------------
# the server: one per loop, shared by the module's tests
# --------------------------------------------------------------------------


@dataclass
class DemoServer:
    loop: str
    mcp_url: str  # the Streamable HTTP endpoint, http://127.0.0.1:PORT/mcp

    @property
    def sse_url(self) -> str:
        parts = urlsplit(self.mcp_url)
        return f"{parts.scheme}://{parts.netloc}/sse"


@pytest.fixture(scope="module", params=LOOPS)
def demo(request: pytest.FixtureRequest) -> Iterator[DemoServer]:
    proc, url = start_http_server(request.param)
    try:
        yield DemoServer(request.param, url)
    finally:
        status = stop_http_server(proc)
    # SIGINT ends the HTTP server cleanly on every loop.
    assert status == 0, f"mcpx demo --http --loop {request.param} exited with {status}"


# --------------------------------------------------------------------------
# recording: the JSON-RPC messages and the HTTP exchanges
# --------------------------------------------------------------------------


@asynccontextmanager
async def recording(
    transport: AbstractAsyncContextManager[tuple[Any, Any]], wire: WireLog
) -> AsyncIterator[tuple[Any, Any]]:
    """Any SDK transport, with the stdio harness's taps on its two message streams."""
    async with transport as (read_stream, write_stream):
        yield _TapReceive(read_stream, wire.received), _TapSend(write_stream, wire.sent)


@dataclass
class Exchange:
    """One HTTP request the SDK made, and (once it came) the head of mcpx's answer."""

    request: httpx2.Request
    body: Any  # the JSON-RPC message a POST carried
    status: int | None = None
    headers: httpx2.Headers | None = None

    @property
    def method(self) -> str:
        return self.request.method

    @property
    def rpc_method(self) -> str | None:
        return self.body.get("method") if isinstance(self.body, dict) else None

    @property
    def content_type(self) -> str:
        assert self.headers is not None, f"{self} was never answered"
        return self.headers.get("content-type", "").split(";")[0].strip()

    def __repr__(self) -> str:
        sent = {k: v for k, v in self.request.headers.items() if k.startswith("mcp-")}
        return (
            f"<{self.method} {self.request.url} {self.rpc_method or ''} {sent} "
            f"-> {self.status} {dict(self.headers or {})}>"
        )


@dataclass
class HttpLog:
    """httpx2 event hooks: every request as it leaves, every response head as it arrives."""

    exchanges: list[Exchange] = field(default_factory=list)
    get_answered: anyio.Event = field(
        default_factory=anyio.Event
    )  # the head of a GET stream's response arrived

    async def _on_request(self, request: httpx2.Request) -> None:
        body = json.loads(request.content) if request.method == "POST" and request.content else None
        self.exchanges.append(Exchange(request, body))

    async def _on_response(self, response: httpx2.Response) -> None:
        exchange = next(e for e in reversed(self.exchanges) if e.request is response.request)
        exchange.status = response.status_code
        exchange.headers = response.headers
        if response.request.method == "GET":
            self.get_answered.set()

    def instrument(self, client: httpx2.AsyncClient) -> httpx2.AsyncClient:
        client.event_hooks = {"request": [self._on_request], "response": [self._on_response]}
        return client

    def posts(self, rpc_method: str) -> list[Exchange]:
        return [e for e in self.exchanges if e.method == "POST" and e.rpc_method == rpc_method]


@asynccontextmanager
async def sdk_transport(demo: DemoServer, kind: str, http: HttpLog) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's own HTTP transport for ``kind``, its httpx2 client instrumented by ``http``.

    Both are built exactly as the SDK builds them by default (``create_mcp_http_client``,
    its timeouts), with only the event hooks added.
    """
    if kind == SSE:

        def factory(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            return http.instrument(create_mcp_http_client(headers=headers, timeout=timeout, auth=auth))

        async with sse_client(demo.sse_url, httpx_client_factory=factory) as streams:
            yield streams
    else:
        # What Client(url) does, but with a client we hand over (so we also close it).
        async with (
            http.instrument(create_mcp_http_client()) as client,
            streamable_http_client(demo.mcp_url, http_client=client) as streams,
        ):
            yield streams


def _run(main: Any) -> None:
    try:
        anyio.run(main, backend="asyncio")
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap whatever a check raised; report the check itself.
        leaves = _leaves(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    leaves: list[BaseException] = []
    for exc in group.exceptions:
        leaves.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return leaves


def _show(wire: WireLog | None, http: HttpLog) -> None:
    """Printed by pytest with a failure: the HTTP exchanges and the messages."""
    print("--- http ---", *map(repr, http.exchanges), sep="\n")
    if wire is not None:
        print("--- sent ---", *map(json.dumps, wire.sent), sep="\n")
        print("--- received ---", *map(json.dumps, wire.received), sep="\n")


# --------------------------------------------------------------------------
# what the SDK reports
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("revision", "mode", "kind"), CONNECTIONS)
def test_conversation(
    demo: DemoServer, revision: str, mode: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mode == "legacy":
        pin_handshake_version(monkeypatch, revision)
    wire = WireLog()
    http = HttpLog()
    logs: Arrivals[t.LoggingMessageNotificationParams] = Arrivals()

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def main() -> None:
        with anyio.fail_after(CONVERSATION_TIMEOUT):
            client = Client(
                recording(sdk_transport(demo, kind, http), wire),
                mode=mode,
                read_timeout_seconds=CALL_TIMEOUT,
                logging_callback=on_log,
                # 2026-07-28 logging is opt-in per request; handshake-era
                # connections use logging/setLevel instead (below).
                log_level="info",
            )
            async with client:
                _check_negotiation(client, revision, mode, wire)
                await _check_tools(client, revision)
                await _check_progress_and_logging(client, mode, revision, wire, logs)
                await _check_resources_and_prompts(client, revision)
        _check_wire(revision, wire)

    try:
        _run(main)
    except BaseException:
        _show(wire, http)
        raise


def _check_negotiation(client: Client, revision: str, mode: str, wire: WireLog) -> None:
    assert client.protocol_version == revision
    if mode == MODERN:
        # Pinned: the SDK adopts the revision without asking, so nothing is on the wire yet.
        assert wire.sent == []
        assert client.server_info is None
        return
    first = wire.sent[0]
    if mode == "legacy":
        # The pin took: the SDK offered `revision`, and mcpx accepted it as offered.
        assert first["method"] == "initialize"
        assert first["params"]["protocolVersion"] == revision
        assert wire.sent[1] == {"jsonrpc": "2.0", "method": "notifications/initialized"}
        init = client.session.initialize_result
        assert init is not None and init.protocol_version == revision
    else:
        # mode="auto": discover, and no fallback to initialize.
        assert first["method"] == "server/discover"
        assert first["params"]["_meta"][META_VERSION] == MODERN
        assert not any(m.get("method") == "initialize" for m in wire.sent)
        discovered = client.session.discover_result
        assert discovered is not None and MODERN in discovered.supported_versions
    info = client.server_info
    assert info is not None and (info.name, info.version) == ("mcpx-demo", "0.1.0")
    caps = client.server_capabilities
    assert caps.tools is not None and caps.resources is not None and caps.prompts is not None


def _text(result: t.CallToolResult) -> str:
    assert not result.is_error, result
    assert len(result.content) == 1, result.content
    block = result.content[0]
    assert isinstance(block, t.TextContent), block
    return block.text


async def _check_tools(client: Client, revision: str) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) >= DEMO_TOOLS, sorted(tools)
    assert set(tools["add"].input_schema["properties"]) == {"a", "b"}
    # outputSchema arrived in 2025-06-18.
    assert (tools["weather"].output_schema is not None) == at_least(revision, "2025-06-18")

    text = "héllo, wörld 🌍"
    assert _text(await client.call_tool("echo", {"text": text})) == text
    assert _text(await client.call_tool("add", {"a": 2, "b": 3})) == "5"
    assert _text(await client.call_tool("add", {"a": 2, "b": 3.5})) == "5.5"

    # structuredContent from 2025-06-18 on; before, the same JSON arrives as text only.
    weather = await client.call_tool("weather", {"city": "Oslo"})
    assert json.loads(_text(weather)) == WEATHER
    assert weather.structured_content == (WEATHER if at_least(revision, "2025-06-18") else None)

    failed = await client.call_tool("fail")
    assert failed.is_error is True
    assert [(b.type, getattr(b, "text", None)) for b in failed.content] == [
        ("text", "this tool always fails")
    ]
    custom = await client.call_tool("fail", {"message": "nope"})
    assert custom.is_error is True
    assert isinstance(custom.content[0], t.TextContent) and custom.content[0].text == "nope"

    # Protocol errors survive HTTP (at 2026-07-28 they come with a 4xx status
    # and the JSON-RPC error as the body, which the SDK surfaces as such).
    with pytest.raises(MCPError) as unknown:
        await client.call_tool("no_such_tool", {})
    assert unknown.value.code == -32602
    # Arguments failing the input schema: -32602 up to 2025-06-18, isError from 2025-11-25.
    if at_least(revision, "2025-11-25"):
        assert (await client.call_tool("add", {"a": 1})).is_error is True
    else:
        with pytest.raises(MCPError) as invalid:
            await client.call_tool("add", {"a": 1})
        assert invalid.value.code == -32602


_T = TypeVar("_T")


class Arrivals(list[_T]):
    """What one of the SDK's callbacks delivered, in order; ``until(n)`` waits for the ``n``-th."""

    _grew: anyio.Event | None = None  # set by the next append

    def append(self, item: _T) -> None:
        super().append(item)
        if self._grew is not None:
            self._grew.set()

    async def until(self, count: int) -> None:
        while len(self) < count:
            grew = self._grew = anyio.Event()
            await grew.wait()


async def _check_progress_and_logging(
    client: Client,
    mode: str,
    revision: str,
    wire: WireLog,
    logs: Arrivals[t.LoggingMessageNotificationParams],
) -> None:
    if mode == "legacy":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level("info")

    progress: Arrivals[tuple[float, float | None, str | None]] = Arrivals()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    before = len(wire.sent)
    result = await client.call_tool("count", {"to": 3}, progress_callback=on_progress)
    assert _text(result) == "counted to 3"
    # The SDK runs these callbacks as tasks of their own: wait for the three of each
    # (5 s at most; the assertions below then say what did or did not arrive).
    with anyio.move_on_after(5):
        await progress.until(3)
        await logs.until(3)

    values = [value for value, _, _ in progress]
    assert values == [1, 2, 3], progress  # increasing, one per step
    assert all(total == 3 for _, total, _ in progress), progress
    # The progress message field arrived in 2025-03-26.
    assert [message for _, _, message in progress] == (
        [f"step {i} of 3" for i in (1, 2, 3)] if at_least(revision, "2025-03-26") else [None] * 3
    )
    assert [(log.level, log.logger, log.data) for log in logs] == [
        ("info", "demo.count", f"counted {i}") for i in (1, 2, 3)
    ]

    # Every progress notification for the call arrived before its response.
    call = next(m for m in wire.sent[before:] if m.get("method") == "tools/call")
    token = call["params"]["_meta"]["progressToken"]
    notes = [
        m
        for m in wire.received_notifications("notifications/progress")
        if m["params"]["progressToken"] == token
    ]
    assert [n["params"]["progress"] for n in notes] == [1, 2, 3]
    response_at = next(i for i, m in enumerate(wire.received) if m.get("id") == call["id"])
    assert all(wire.received.index(n) < response_at for n in notes)


async def _check_resources_and_prompts(client: Client, revision: str) -> None:
    resources = {r.uri for r in (await client.list_resources()).resources}
    assert {"demo://readme", "demo://logo.png"} <= resources, sorted(resources)
    (readme,) = (await client.read_resource("demo://readme")).contents
    assert isinstance(readme, t.TextResourceContents), readme
    assert (readme.uri, readme.mime_type, readme.text) == ("demo://readme", "text/plain", README)
    (greeting,) = (await client.read_resource("demo://greeting/Ada")).contents
    assert isinstance(greeting, t.TextResourceContents) and greeting.text == "Hello, Ada!"
    # Resource not found: -32002 up to 2025-11-25, -32602 at 2026-07-28 (SEP-2164).
    with pytest.raises(MCPError) as missing:
        await client.read_resource("demo://missing")
    assert missing.value.code == (-32602 if revision == MODERN else -32002)

    assert {p.name for p in (await client.list_prompts()).prompts} == {"greet", "review"}
    got = await client.get_prompt("greet", {"name": "Ada"})
    assert [(m.role, m.content) for m in got.messages] == [
        ("user", t.TextContent(type="text", text="Please greet Ada warmly."))
    ]


def _check_wire(revision: str, wire: WireLog) -> None:
    results = wire.results()
    assert len(results) >= 13, "the tap should have seen the whole conversation"
    if revision == MODERN:
        for request in wire.sent_requests():
            assert request["params"]["_meta"][META_VERSION] == MODERN, request
        assert not wire.sent_notifications(), wire.sent_notifications()
        for result in results:
            assert result.get("resultType") == "complete", result
            assert result["_meta"][META_SERVER_INFO]["name"] == "mcpx-demo", result
    else:
        for request in wire.sent_requests():
            assert META_VERSION not in (request.get("params") or {}).get("_meta", {}), request
        for result in results:
            assert not set(MODERN_ONLY_RESULT_KEYS) & set(result), result
            assert META_SERVER_INFO not in result.get("_meta", {}), result
        if not at_least(revision, "2025-06-18"):
            assert not any("structuredContent" in result for result in results)


# --------------------------------------------------------------------------
# the HTTP underneath
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("revision", "mode", "kind"), CONNECTIONS)
def test_http_exchange(
    demo: DemoServer, revision: str, mode: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mode == "legacy":
        pin_handshake_version(monkeypatch, revision)
    http = HttpLog()
    progress: Arrivals[float] = Arrivals()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def main() -> None:
        with anyio.fail_after(CONVERSATION_TIMEOUT):
            client = Client(sdk_transport(demo, kind, http), mode=mode, read_timeout_seconds=CALL_TIMEOUT)
            async with client:
                assert client.protocol_version == revision
                assert (await client.list_tools()).tools
                result = await client.call_tool("count", {"to": 3}, progress_callback=on_progress)
                assert _text(result) == "counted to 3"
                with anyio.move_on_after(5):  # the SDK's callbacks run as tasks of their own
                    await progress.until(3)
                assert progress == [1, 2, 3]
                if kind != SSE and revision != MODERN:
                    # The SDK opens the session's GET stream in a task of its own: the head of
                    # mcpx's answer is waited for, not assumed, before the client closes.
                    with anyio.move_on_after(CALL_TIMEOUT):
                        await http.get_answered.wait()
            # The client is closed: what it did on the way out, and what mcpx made of it.
            if kind == SSE:
                await _check_http_sse(http)
            elif revision == MODERN:
                _check_http_modern(http, mode)
            else:
                await _check_http_session(http, revision, demo)

    try:
        _run(main)
    except BaseException:
        _show(None, http)
        raise


async def _check_http_session(http: HttpLog, revision: str, demo: DemoServer) -> None:
    """Streamable HTTP with a legacy session."""
    exchanges = http.exchanges
    assert all(e.request.url == demo.mcp_url for e in exchanges), exchanges

    # initialize is sent without a session and mints one.
    initialize, *rest = exchanges
    assert initialize.rpc_method == "initialize", exchanges
    assert initialize.body["params"]["protocolVersion"] == revision
    assert "mcp-session-id" not in initialize.request.headers
    assert initialize.status == 200 and initialize.content_type == "application/json", initialize
    session_id = initialize.headers.get("mcp-session-id") if initialize.headers else None
    assert session_id, "initialize over Streamable HTTP must mint Mcp-Session-Id"
    assert all(0x21 <= ord(ch) <= 0x7E for ch in session_id), session_id

    # Every later request (POST, the GET stream, the DELETE) carries it back, and
    # the negotiated revision (the SDK sends the header at 2025-03-26 as well).
    for exchange in rest:
        assert exchange.request.headers.get("mcp-session-id") == session_id, exchange
        assert exchange.request.headers.get("mcp-protocol-version") == revision, exchange
    # mcpx never names another session.
    for exchange in exchanges:
        if exchange.headers is not None:
            assert exchange.headers.get("mcp-session-id") in (None, session_id), exchange

    (initialized,) = http.posts("notifications/initialized")
    assert initialized.status == 202, initialized
    # After initialized the SDK opens the session's GET stream; mcpx serves it.
    gets = [e for e in exchanges if e.method == "GET"]
    assert gets, "the SDK should have opened its GET stream"
    assert gets[0].status == 200 and gets[0].content_type == "text/event-stream", gets[0]

    # A plain request is answered with JSON; one with progress becomes an event stream.
    (listing,) = http.posts("tools/list")
    assert listing.status == 200 and listing.content_type == "application/json", listing
    (count,) = http.posts("tools/call")
    assert count.status == 200 and count.content_type == "text/event-stream", count

    # Closing the SDK's client ends the session with DELETE (terminate_on_close
    # defaults to True), its last request besides a GET reconnection.
    deletes = [e for e in exchanges if e.method == "DELETE"]
    assert len(deletes) == 1, exchanges
    assert [e for e in exchanges if e.method != "GET"][-1] is deletes[0]
    assert deletes[0].status == 200, deletes[0]

    # ... after which mcpx no longer knows the session.
    async with httpx2.AsyncClient(timeout=10) as probe:
        after = await probe.post(
            demo.mcp_url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={
                "accept": "application/json, text/event-stream",
                "mcp-session-id": session_id,
                "mcp-protocol-version": revision,
            },
        )
    assert after.status_code == 404, (after.status_code, after.text)


def _check_http_modern(http: HttpLog, mode: str) -> None:
    """2026-07-28: POSTs only, each standing alone; no session anywhere."""
    exchanges = http.exchanges
    assert [e.method for e in exchanges] == ["POST"] * len(exchanges), exchanges
    methods = [e.rpc_method for e in exchanges]
    expected = ["tools/list", "tools/call"]
    assert methods == (["server/discover", *expected] if mode == "auto" else expected), exchanges
    for exchange in exchanges:
        assert "mcp-session-id" not in exchange.request.headers, exchange
        assert exchange.headers is not None and "mcp-session-id" not in exchange.headers, exchange
        assert exchange.request.headers.get("mcp-protocol-version") == MODERN, exchange
        assert exchange.request.headers.get("mcp-method") == exchange.rpc_method, exchange
        assert exchange.status == 200, exchange
    (listing,) = http.posts("tools/list")
    assert listing.content_type == "application/json", listing
    (count,) = http.posts("tools/call")
    assert count.request.headers.get("mcp-name") == "count", count
    assert count.content_type == "text/event-stream", count


async def _check_http_sse(http: HttpLog) -> None:
    """2024-11-05 HTTP+SSE: one GET stream, POSTs to the endpoint it named."""
    stream, *posts = http.exchanges
    assert stream.method == "GET" and stream.request.url.path == "/sse", stream
    assert stream.status == 200 and stream.content_type == "text/event-stream", stream
    assert posts and all(e.method == "POST" for e in posts), http.exchanges
    endpoint = posts[0].request.url
    assert endpoint.path == "/messages", endpoint
    assert len(parse_qs(endpoint.query.decode())["session_id"]) == 1, endpoint
    assert all(e.request.url == endpoint for e in posts), posts
    assert posts[0].rpc_method == "initialize"
    assert posts[0].body["params"]["protocolVersion"] == "2024-11-05"
    # Every message is accepted with 202; its answer goes down the stream.  The
    # answer and the 202 travel on two connections, so the SDK may read the last
    # call's answer first and close before its POST task reads the 202: only the
    # last POST may go without a response head, and every head that came is 202.
    *earlier, last = posts
    assert all(e.status == 202 for e in earlier), posts
    assert last.status in (202, None), last
    # This transport has no Mcp-Session-Id, and the SDK sends no DELETE: it
    # ends the session by closing its stream ...
    for exchange in http.exchanges:
        assert "mcp-session-id" not in exchange.request.headers, exchange
        assert exchange.headers is None or "mcp-session-id" not in exchange.headers, exchange
    assert stream.headers is not None and all(e.headers is not None for e in earlier), http.exchanges

    # ... which mcpx notices: the endpoint soon stops taking messages.  (The
    # probe is a notification nobody defines, harmless should it still land.)
    # Nothing tells a client that the server noticed: the endpoint's answer is
    # the only sign of it, so it is asked again until it says 404.
    status = None
    async with httpx2.AsyncClient(timeout=10) as probe:
        with anyio.move_on_after(SESSION_END_TIMEOUT):
            while True:
                response = await probe.post(endpoint, json={"jsonrpc": "2.0", "method": "notifications/x"})
                status = response.status_code
                if status != 202:
                    break
                await anyio.sleep(0.05)
    assert status == 404, (
        f"the endpoint still answered {status} {SESSION_END_TIMEOUT}s after the stream closed"
    )


# --------------------------------------------------------------------------
# the plain entry point
# --------------------------------------------------------------------------


def test_client_with_a_url(demo: DemoServer) -> None:
    """``Client(url)`` as documented, nothing wrapped: ``auto`` finds 2026-07-28, ``legacy`` 2025-11-25."""

    async def main() -> None:
        with anyio.fail_after(CONVERSATION_TIMEOUT):
            async with Client(demo.mcp_url, read_timeout_seconds=CALL_TIMEOUT) as client:
                assert client.protocol_version == MODERN
                assert _text(await client.call_tool("echo", {"text": "hi"})) == "hi"
            async with Client(demo.mcp_url, mode="legacy", read_timeout_seconds=CALL_TIMEOUT) as client:
                assert client.protocol_version == "2025-11-25"
                assert _text(await client.call_tool("echo", {"text": "hi"})) == "hi"

    _run(main)
