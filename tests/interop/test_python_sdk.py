"""The official MCP Python SDK (``mcp`` 2.3.0) as a client of ``mcpx demo``, over real stdio.

For every revision the SDK can be made to speak and every driver loop, the SDK
spawns ``python -m mcpx demo --loop LOOP`` and holds one conversation covering
negotiation, tools (every content kind, structured content, ``isError``,
errors), progress and logging, resources, prompts and completion.  What the
SDK reports is checked against what the revision allows; a tap on the SDK's
stdio streams checks the wire where the SDK's lenient parsing would hide a
field the server should not have sent.

How the SDK is made to speak each revision:

* 2024-11-05 … 2025-11-25: ``Client(mode="legacy")`` runs the ``initialize``
  handshake, which always offers the SDK's newest handshake revision.  The SDK
  is *pinned* to older ones by patching the constant its session builds
  ``initialize`` from (see ``_sdk_harness.pin_handshake_version``).
* 2026-07-28, ``pinned``: ``Client(mode="2026-07-28")`` adopts the revision
  without any probe (it synthesises a ``server/discover`` result locally) and
  stamps ``_meta`` on every request.
* 2026-07-28, ``discover``: ``Client(mode="auto")`` sends ``server/discover``
  and adopts the server's answer; were mcpx's answer unusable, the SDK would
  silently fall back to ``initialize``, which the version assertion catches.
"""

from __future__ import annotations

import base64
import json
import warnings
from pathlib import Path
from typing import Any, TypeVar

import anyio
import mcp_types as t
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from mcpx.demo import PNG, README, WAV

from ._sdk_harness import (
    LEGACY,
    LOOPS,
    MODERN,
    ProcessSpy,
    WireLog,
    at_least,
    demo_server,
    pin_handshake_version,
    recording_stdio,
)

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
MODERN_ONLY_RESULT_KEYS = ("resultType", "ttlMs", "cacheScope")

INSTRUCTIONS = "A demonstration server: every content type, progress, logging and completions."
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

CONNECTIONS = [
    *(pytest.param(revision, "legacy", id=revision) for revision in LEGACY),
    pytest.param(MODERN, MODERN, id=f"{MODERN}-pinned"),
    pytest.param(MODERN, "auto", id=f"{MODERN}-discover"),
]

CALL_TIMEOUT = 10.0  # per request, SDK-side
CONVERSATION_TIMEOUT = 40.0  # the whole conversation, spawn and shutdown included


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize(("revision", "mode"), CONNECTIONS)
def test_sdk_client_converses_with_demo(
    revision: str, mode: str, loop: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if mode == "legacy":
        pin_handshake_version(monkeypatch, revision)
    spy = ProcessSpy(monkeypatch)
    wire = WireLog()
    stderr_path = tmp_path / "server-stderr.txt"

    async def main() -> None:
        with anyio.fail_after(CONVERSATION_TIMEOUT), stderr_path.open("w") as errlog:
            await _conversation(revision, mode, loop, wire, errlog)

    try:
        try:
            anyio.run(main, backend="asyncio")
        except BaseExceptionGroup as group:
            # The SDK's task groups wrap whatever a check raised; report the check itself.
            leaves = _leaves(group)
            if len(leaves) == 1:
                raise leaves[0] from None
            raise
        assert len(spy.processes) == 1, "the SDK should have spawned exactly one server"
        # The SDK closes the server's stdin, waits 2 s, then SIGTERMs the process
        # group: exit status 0 means mcpx noticed end of input and left by itself.
        assert spy.processes[0].returncode == 0, f"server exit status {spy.processes[0].returncode}"
    except BaseException:
        # Shown by pytest with the failure: what the server said, and the wire.
        print(f"--- server stderr ({loop}) ---\n{stderr_path.read_text() if stderr_path.exists() else ''}")
        print("--- sent ---", *map(json.dumps, wire.sent), sep="\n")
        print("--- received ---", *map(json.dumps, wire.received), sep="\n")
        raise


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    leaves: list[BaseException] = []
    for exc in group.exceptions:
        leaves.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return leaves


async def _conversation(revision: str, mode: str, loop: str, wire: WireLog, errlog: Any) -> None:
    logs: Arrivals[t.LoggingMessageNotificationParams] = Arrivals()

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    client = Client(
        recording_stdio(demo_server(loop), wire, errlog),
        mode=mode,
        read_timeout_seconds=CALL_TIMEOUT,
        logging_callback=on_log,
        # 2026-07-28 logging is opt-in per request; the SDK stamps this level on every request.
        # Handshake-era connections ignore it and use logging/setLevel instead (below).
        log_level="info",
    )
    async with client:
        _check_negotiation(client, revision, mode, wire)
        await _check_tools_listing(client, revision)
        await _check_tool_calls(client, revision)
        await _check_tool_errors(client, revision)
        await _check_progress_and_logging(client, revision, mode, wire, logs)
        await _check_resources(client, revision)
        await _check_prompts_and_completion(client, revision)
    _check_wire(revision, mode, wire)


# --------------------------------------------------------------------------
# negotiation
# --------------------------------------------------------------------------


def _check_negotiation(client: Client, revision: str, mode: str, wire: WireLog) -> None:
    assert client.protocol_version == revision
    if mode == MODERN:
        # Pinned modern mode: nothing to negotiate, so nothing has been sent yet.
        assert wire.sent == []
        # No handshake and no discover: the SDK synthesised its view of the
        # server, so there is no server identity, capability set or instructions
        # to check here (the serverInfo stamp on results is checked in _check_wire).
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
    elif mode == "auto":
        assert first["method"] == "server/discover"
        assert first["params"]["_meta"][META_VERSION] == MODERN
        discovered = client.session.discover_result
        assert discovered is not None and MODERN in discovered.supported_versions
    handshakes = [
        m["method"] for m in wire.sent if m["method"] in ("initialize", "notifications/initialized")
    ]
    assert handshakes == (["initialize", "notifications/initialized"] if mode == "legacy" else [])

    info = client.server_info
    assert info is not None
    assert (info.name, info.version) == ("mcpx-demo", "0.1.0")
    # Implementation.title arrived in 2025-06-18.
    assert info.title == ("mcpx demo server" if at_least(revision, "2025-06-18") else None)
    assert client.instructions == INSTRUCTIONS
    caps = client.server_capabilities
    assert caps.tools is not None and caps.prompts is not None and caps.resources is not None
    assert caps.logging is not None
    # The completions capability arrived in 2025-03-26 (completion/complete itself is older).
    assert (caps.completions is not None) == at_least(revision, "2025-03-26")


# --------------------------------------------------------------------------
# tools
# --------------------------------------------------------------------------


async def _check_tools_listing(client: Client, revision: str) -> None:
    listing = await client.list_tools()
    tools = {tool.name: tool for tool in listing.tools}
    assert set(tools) >= DEMO_TOOLS, sorted(tools)
    assert set(tools["add"].input_schema["properties"]) == {"a", "b"}
    assert tools["echo"].description == "Return the text you sent."

    # ToolAnnotations arrived in 2025-03-26; Tool.title and outputSchema in 2025-06-18.
    echo_annotations = tools["echo"].annotations
    if at_least(revision, "2025-03-26"):
        assert echo_annotations is not None
        assert (echo_annotations.title, echo_annotations.read_only_hint) == ("Echo", True)
    else:
        assert echo_annotations is None
    weather = tools["weather"]
    if at_least(revision, "2025-06-18"):
        assert weather.title == "Weather"
        assert weather.output_schema is not None
        assert weather.output_schema["required"] == ["city", "temperature", "conditions"]
    else:
        assert weather.title is None
        assert weather.output_schema is None


def _only(result: t.CallToolResult, kind: type[Any]) -> Any:
    assert not result.is_error, result
    assert len(result.content) == 1, result.content
    block = result.content[0]
    assert isinstance(block, kind), block
    return block


async def _check_tool_calls(client: Client, revision: str) -> None:
    text = "héllo, wörld 🌍"
    assert _only(await client.call_tool("echo", {"text": text}), t.TextContent).text == text
    assert _only(await client.call_tool("add", {"a": 2, "b": 3}), t.TextContent).text == "5"
    assert _only(await client.call_tool("add", {"a": 2, "b": 3.5}), t.TextContent).text == "5.5"

    # weather: structuredContent exists from 2025-06-18 on (and the SDK has then
    # already validated it against the listed outputSchema).  Before, mcpx drops
    # it and the same JSON still arrives as text.
    weather = await client.call_tool("weather", {"city": "Oslo"})
    assert json.loads(_only(weather, t.TextContent).text) == WEATHER
    if at_least(revision, "2025-06-18"):
        assert weather.structured_content == WEATHER
    else:
        assert weather.structured_content is None

    image = _only(await client.call_tool("tiny_image"), t.ImageContent)
    assert (image.mime_type, base64.b64decode(image.data)) == ("image/png", PNG)

    # Audio content arrived in 2025-03-26; for 2024-11-05 mcpx sends the same
    # bytes as an embedded blob resource.
    audio = await client.call_tool("tiny_audio")
    if at_least(revision, "2025-03-26"):
        block = _only(audio, t.AudioContent)
        assert (block.mime_type, base64.b64decode(block.data)) == ("audio/wav", WAV)
    else:
        contents = _only(audio, t.EmbeddedResource).resource
        assert isinstance(contents, t.BlobResourceContents), contents
        assert (contents.mime_type, base64.b64decode(contents.blob)) == ("audio/wav", WAV)

    note = _only(await client.call_tool("embedded_note"), t.EmbeddedResource).resource
    assert isinstance(note, t.TextResourceContents), note
    assert (note.uri, note.text) == ("demo://readme", README)

    # resource_link arrived in 2025-06-18; before, mcpx names the link in a text block.
    linked = await client.call_tool("readme_link")
    assert not linked.is_error
    assert len(linked.content) == 2
    assert isinstance(linked.content[0], t.TextContent)
    assert linked.content[0].text == "The readme:"
    link = linked.content[1]
    if at_least(revision, "2025-06-18"):
        assert isinstance(link, t.ResourceLink), link
        assert (link.uri, link.name, link.mime_type) == ("demo://readme", "readme", "text/plain")
    else:
        assert isinstance(link, t.TextContent), link
        assert "demo://readme" in link.text


async def _check_tool_errors(client: Client, revision: str) -> None:
    failed = await client.call_tool("fail")
    assert failed.is_error is True
    assert [(b.type, getattr(b, "text", None)) for b in failed.content] == [
        ("text", "this tool always fails")
    ]
    custom = await client.call_tool("fail", {"message": "nope"})
    assert custom.is_error is True
    assert isinstance(custom.content[0], t.TextContent) and custom.content[0].text == "nope"

    with pytest.raises(MCPError) as unknown:
        await client.call_tool("no_such_tool", {})
    assert unknown.value.code == -32602

    # Arguments that fail the input schema: a protocol error (-32602) up to
    # 2025-06-18, a tool execution error (isError) from 2025-11-25 (SEP-1303).
    if at_least(revision, "2025-11-25"):
        bad = await client.call_tool("add", {"a": 1})
        assert bad.is_error is True
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
    revision: str,
    mode: str,
    wire: WireLog,
    logs: Arrivals[t.LoggingMessageNotificationParams],
) -> None:
    if mode == "legacy":
        # Handshake-era log delivery is governed by logging/setLevel (deprecated in the SDK).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level("info")

    progress: Arrivals[tuple[float, float | None, str | None]] = Arrivals()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    before = len(wire.sent)
    result = await client.call_tool("count", {"to": 3}, progress_callback=on_progress)
    assert _only(result, t.TextContent).text == "counted to 3"

    # The SDK runs progress and log callbacks as tasks of their own, so they
    # may still be pending when the result is handed back: wait for the three
    # of each (5 s at most; the assertions below then say what did or did not arrive).
    with anyio.move_on_after(5):
        await progress.until(3)
        await logs.until(3)

    values = [value for value, _, _ in progress]
    assert values == sorted(values) and len(set(values)) == len(values), progress
    assert values == [1, 2, 3]
    assert all(total == 3 for _, total, _ in progress)
    # The progress message field arrived in 2025-03-26.
    expected_messages = (
        [f"step {i} of 3" for i in (1, 2, 3)] if at_least(revision, "2025-03-26") else [None] * 3
    )
    assert [message for _, _, message in progress] == expected_messages

    assert [(log.level, log.logger, log.data) for log in logs] == [
        ("info", "demo.count", f"counted {i}") for i in (1, 2, 3)
    ]

    # On the wire: the request carried a progress token, and every progress
    # notification for it arrived before its response.
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


# --------------------------------------------------------------------------
# resources, prompts, completion
# --------------------------------------------------------------------------


async def _check_resources(client: Client, revision: str) -> None:
    resources = {r.uri: r for r in (await client.list_resources()).resources}
    assert {"demo://readme", "demo://logo.png"} <= set(resources), sorted(resources)
    assert resources["demo://readme"].mime_type == "text/plain"
    # Resource.title arrived in 2025-06-18.
    assert resources["demo://readme"].title == ("Read me" if at_least(revision, "2025-06-18") else None)
    templates = [tpl.uri_template for tpl in (await client.list_resource_templates()).resource_templates]
    assert templates == ["demo://greeting/{name}"]

    (readme,) = (await client.read_resource("demo://readme")).contents
    assert isinstance(readme, t.TextResourceContents), readme
    assert (readme.uri, readme.mime_type, readme.text) == ("demo://readme", "text/plain", README)
    (logo,) = (await client.read_resource("demo://logo.png")).contents
    assert isinstance(logo, t.BlobResourceContents), logo
    assert (logo.mime_type, base64.b64decode(logo.blob)) == ("image/png", PNG)
    (greeting,) = (await client.read_resource("demo://greeting/Ada")).contents
    assert isinstance(greeting, t.TextResourceContents) and greeting.text == "Hello, Ada!"

    # Resource not found: -32002 up to 2025-11-25, -32602 at 2026-07-28 (SEP-2164).
    with pytest.raises(MCPError) as missing:
        await client.read_resource("demo://missing")
    assert missing.value.code == (-32602 if revision == MODERN else -32002)


async def _check_prompts_and_completion(client: Client, revision: str) -> None:
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert set(prompts) == {"greet", "review"}
    greet = prompts["greet"]
    assert greet.description == "Greet someone by name"
    assert [(a.name, a.required) for a in greet.arguments or []] == [("name", True)]
    # Prompt.title arrived in 2025-06-18.
    assert greet.title == ("Greet" if at_least(revision, "2025-06-18") else None)

    got = await client.get_prompt("greet", {"name": "Ada"})
    assert [(m.role, m.content) for m in got.messages] == [
        ("user", t.TextContent(type="text", text="Please greet Ada warmly."))
    ]
    review = await client.get_prompt("review", {"code": "x = 1", "language": "rust"})
    assert [getattr(m.content, "text", None) for m in review.messages] == ["Review this rust code:", "x = 1"]

    names = await client.complete(
        t.PromptReference(type="ref/prompt", name="greet"), {"name": "name", "value": "A"}
    )
    assert names.completion.values == ["Ada", "Alan"]
    languages = await client.complete(
        t.PromptReference(type="ref/prompt", name="review"), {"name": "language", "value": "r"}
    )
    assert languages.completion.values == ["rust"]
    greeting = await client.complete(
        t.ResourceTemplateReference(type="ref/resource", uri="demo://greeting/{name}"),
        {"name": "name", "value": "g"},
    )
    assert greeting.completion.values == ["Grace"]


# --------------------------------------------------------------------------
# the wire
# --------------------------------------------------------------------------


def _check_wire(revision: str, mode: str, wire: WireLog) -> None:
    requests = wire.sent_requests()
    results = wire.results()
    assert len(results) >= 20, "the tap should have seen the whole conversation"
    if revision == MODERN:
        # Every request restates the revision and capabilities; mcpx stamps
        # every result with resultType and its identity.
        for request in requests:
            meta = request["params"]["_meta"]
            assert meta[META_VERSION] == MODERN, request
            assert isinstance(meta[META_CAPABILITIES], dict), request
        # No notifications/initialized (and nothing was cancelled).
        assert not wire.sent_notifications(), wire.sent_notifications()
        for result in results:
            assert result.get("resultType") == "complete", result
            assert result["_meta"][META_SERVER_INFO]["name"] == "mcpx-demo", result
    else:
        # A handshake-era conversation carries none of 2026-07-28's envelope.
        for request in requests:
            assert META_VERSION not in (request.get("params") or {}).get("_meta", {}), request
        for result in results:
            assert not set(MODERN_ONLY_RESULT_KEYS) & set(result), result
            assert META_SERVER_INFO not in result.get("_meta", {}), result
        # ... nor anything the negotiated revision does not define.
        if not at_least(revision, "2025-06-18"):
            assert not any("structuredContent" in result for result in results)
            for result in results:
                for tool in result.get("tools", []):
                    assert "outputSchema" not in tool and "title" not in tool, tool
