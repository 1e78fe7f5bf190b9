"""The conversation suite: `mcpx demo` over stdio and HTTP, every revision, every driver.

Each test spawns ``mcpx demo --loop X`` (with ``--http 0`` for the HTTP
transport) and talks to it as an MCP host would, at one revision: over HTTP,
2024-11-05 uses the HTTP+SSE transport, the other legacy revisions a
Streamable HTTP session, and 2026-07-28 its per-request POSTs.  Every frame received is validated against that revision's
official schema in strict mode (``tests/schema_sweep.py``).  What is checked
is what a host would see: the negotiated version, which fields a result
carries at this revision, which notifications arrive, which errors come back.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.http_peer import HttpPeer
from tests.conformance.peer import LOOPS, MODERN, REVISIONS, StdioPeer, at_least
from tests.conformance.sweep import SWEEP

Peer = StdioPeer | HttpPeer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=REVISIONS)
def revision(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=("stdio", "http"))
def peer(loop: str, request: pytest.FixtureRequest) -> Iterator[Peer]:
    p: Peer = StdioPeer(loop) if request.param == "stdio" else HttpPeer(loop)
    yield p
    p.kill()


@pytest.fixture(params=("stdio", "http"))
def holding_peer(loop: str, request: pytest.FixtureRequest) -> Iterator[Peer]:
    """``peer``, but over HTTP mcpx says as soon as it is holding a slow answer (``wait_held``)."""
    p: Peer = StdioPeer(loop) if request.param == "stdio" else HttpPeer(loop, "--sse-keepalive", "0.05")
    yield p
    p.kill()


@pytest.fixture
def sessionless(loop: str) -> Iterator[HttpPeer]:
    """Legacy POSTs outside any session, judged by their MCP-Protocol-Version header."""
    p = HttpPeer(loop, mode="sessionless")
    yield p
    p.kill()


@pytest.fixture
def stdio_peer(loop: str) -> Iterator[StdioPeer]:
    p = StdioPeer(loop)
    yield p
    p.kill()


def texts(result: dict[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"] if block["type"] == "text"]


def wait_until_running(peer: Peer, request_id: Any) -> None:
    """Return once mcpx has taken ``request_id`` up and is running it."""
    if isinstance(peer, HttpPeer):
        peer.wait_held(request_id)
        return
    # stdin is read in order: once a request sent after it is answered, it is under way.
    assert texts(peer.result("tools/call", {"name": "echo", "arguments": {"text": "after"}})) == ["after"]


# --------------------------------------------------------------------------
# Negotiation
# --------------------------------------------------------------------------


def test_negotiation_declares_what_the_revision_defines(peer: Peer, revision: str) -> None:
    if revision == MODERN:
        peer.speak(MODERN)
        result = peer.result("server/discover")
        assert result["supportedVersions"] == [MODERN]
        assert result["resultType"] == "complete"
        assert result["cacheScope"] == "public" and isinstance(result["ttlMs"], int)
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcpx-demo"
        caps = result["capabilities"]
    else:
        result = peer.initialize(revision)
        assert result["protocolVersion"] == revision
        assert result["serverInfo"]["name"] == "mcpx-demo"
        assert ("title" in result["serverInfo"]) == at_least(revision, "2025-06-18")
        assert "resultType" not in result
        caps = result["capabilities"]
    assert {"tools", "prompts", "resources", "logging"} <= set(caps)
    assert ("completions" in caps) == at_least(revision, "2025-03-26")
    # The demo has tools that run as tasks: 2025-11-25 declares the core
    # capability, 2026-07-28 the extension, and no other revision either.
    assert ("tasks" in caps) == (revision == "2025-11-25")
    assert ("extensions" in caps) == (revision == MODERN)
    assert caps["tools"] == {"listChanged": False}  # the demo's list is fixed
    assert peer.close() == 0


@pytest.mark.parametrize("offered", ["2099-01-01", "2026-07-28", "1.0"])
def test_unknown_version_gets_a_counter_offer_never_an_error(loop: str, offered: str) -> None:
    peer = StdioPeer(loop)
    try:
        result = peer.initialize(offered)
        assert result["protocolVersion"] == "2025-11-25"
        assert peer.result("ping") == {}
    finally:
        peer.kill()


def test_counter_offer_is_the_newest_revision_the_server_speaks(loop: str) -> None:
    peer = StdioPeer(loop, "--revisions", "2024-11-05,2025-03-26")
    try:
        assert peer.initialize("2025-11-25")["protocolVersion"] == "2025-03-26"
    finally:
        peer.kill()


def test_a_request_that_declared_nothing_is_answered_as_2024_11_05(stdio_peer: StdioPeer) -> None:
    peer = stdio_peer
    result = peer.result("tools/call", {"name": "weather", "arguments": {"city": "Oslo"}})
    assert "structuredContent" not in result and "resultType" not in result
    assert '"city":"Oslo"' in texts(result)[0]


def test_initialize_twice_is_refused(stdio_peer: StdioPeer) -> None:
    peer = stdio_peer
    peer.initialize("2025-06-18")
    error = peer.error("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}})
    assert error["code"] == -32600
    assert peer.result("ping") == {}


# --------------------------------------------------------------------------
# The surface: list, call, read, get, complete
# --------------------------------------------------------------------------


def test_tools_list_fields_follow_the_revision(peer: Peer, revision: str) -> None:
    peer.speak(revision)
    result = peer.result("tools/list")
    tools = {t["name"]: t for t in result["tools"]}
    assert {"echo", "add", "weather", "count", "fail", "tiny_audio", "readme_link"} <= set(tools)
    assert ("outputSchema" in tools["weather"]) == at_least(revision, "2025-06-18")
    assert ("title" in tools["weather"]) == at_least(revision, "2025-06-18")
    assert ("annotations" in tools["echo"]) == at_least(revision, "2025-03-26")
    assert ("resultType" in result) == (revision == MODERN)
    assert ("ttlMs" in result) == (revision == MODERN)
    if revision == MODERN:
        assert result["cacheScope"] == "public"


def test_tool_calls_at_every_revision(peer: Peer, revision: str) -> None:
    peer.speak(revision)
    echo = peer.result("tools/call", {"name": "echo", "arguments": {"text": "hi there"}})
    assert texts(echo) == ["hi there"]
    assert ("resultType" in echo) == (revision == MODERN)
    assert texts(peer.result("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})) == ["5"]

    weather = peer.result("tools/call", {"name": "weather", "arguments": {"city": "Oslo"}})
    if at_least(revision, "2025-06-18"):
        assert weather["structuredContent"] == {"city": "Oslo", "temperature": 21.5, "conditions": "sunny"}
    else:
        assert "structuredContent" not in weather
    assert '"conditions":"sunny"' in texts(weather)[0]  # nothing the tool said is lost

    audio = peer.result("tools/call", {"name": "tiny_audio"})
    block = audio["content"][0]
    if at_least(revision, "2025-03-26"):
        assert block["type"] == "audio" and block["mimeType"] == "audio/wav"
    else:
        assert block["type"] == "resource" and block["resource"]["mimeType"] == "audio/wav"
        assert base64.b64decode(block["resource"]["blob"]).startswith(b"RIFF")

    link = peer.result("tools/call", {"name": "readme_link"})
    kinds = [b["type"] for b in link["content"]]
    if at_least(revision, "2025-06-18"):
        assert kinds == ["text", "resource_link"]
    else:
        assert kinds == ["text", "text"] and "demo://readme" in link["content"][1]["text"]

    image = peer.result("tools/call", {"name": "tiny_image"})
    assert image["content"][0]["type"] == "image"
    note = peer.result("tools/call", {"name": "embedded_note"})
    assert note["content"][0]["resource"]["uri"] == "demo://readme"

    failed = peer.result("tools/call", {"name": "fail", "arguments": {"message": "nope"}})
    assert failed["isError"] is True and texts(failed) == ["nope"]


def test_unknown_tool_is_invalid_params(peer: Peer, revision: str) -> None:
    peer.speak(revision)
    error = peer.error("tools/call", {"name": "no_such_tool", "arguments": {}})
    assert error["code"] == -32602 and "no_such_tool" in error["message"]


def test_bad_arguments_follow_the_revision(peer: Peer, revision: str) -> None:
    peer.speak(revision)
    frame = peer.call("tools/call", {"name": "add", "arguments": {"a": "two"}})
    if at_least(revision, "2025-11-25"):  # SEP-1303: input validation is a tool error
        assert frame["result"]["isError"] is True
    else:
        assert frame["error"]["code"] == -32602


def test_resources_prompts_and_completion(peer: Peer, revision: str) -> None:
    peer.speak(revision)
    listed = peer.result("resources/list")
    assert {r["uri"] for r in listed["resources"]} == {"demo://readme", "demo://logo.png"}
    if revision == MODERN:
        assert listed["cacheScope"] == "private"
    templates = peer.result("resources/templates/list")
    assert templates["resourceTemplates"][0]["uriTemplate"] == "demo://greeting/{name}"

    readme = peer.result("resources/read", {"uri": "demo://readme"})
    assert readme["contents"][0]["text"].startswith("mcpx demo server")
    if revision == MODERN:
        assert readme["cacheScope"] == "private" and readme["ttlMs"] == 0
    logo = peer.result("resources/read", {"uri": "demo://logo.png"})
    assert base64.b64decode(logo["contents"][0]["blob"]).startswith(b"\x89PNG")
    greeting = peer.result("resources/read", {"uri": "demo://greeting/Ada"})
    assert greeting["contents"][0]["text"] == "Hello, Ada!"

    missing = peer.error("resources/read", {"uri": "demo://missing"})
    # -32002 until 2026-07-28 removed it in favour of -32602 with data.uri.
    assert missing["code"] == (-32602 if revision == MODERN else -32002)
    assert missing["data"] == {"uri": "demo://missing"}

    prompts = peer.result("prompts/list")
    assert {p["name"] for p in prompts["prompts"]} == {"greet", "review"}
    greet = peer.result("prompts/get", {"name": "greet", "arguments": {"name": "Grace"}})
    assert greet["messages"][0]["content"]["text"] == "Please greet Grace warmly."
    assert peer.error("prompts/get", {"name": "greet"})["code"] == -32602  # missing required argument

    completion = peer.result(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "A"}},
    )
    assert completion["completion"]["values"] == ["Ada", "Alan"]
    assert peer.close() == 0


def test_invalid_cursor_is_invalid_params(peer: Peer, revision: str) -> None:
    peer.speak(revision)
    assert peer.error("tools/list", {"cursor": "not-a-cursor-we-issued"})["code"] == -32602


# --------------------------------------------------------------------------
# Progress and log messages: only where the revision and the request allow
# --------------------------------------------------------------------------


def _count_notifications(peer: Peer, method: str) -> list[dict[str, Any]]:
    return [n for n in peer.notifications if n["method"] == method]


def test_progress_only_for_a_request_with_a_token(peer: Peer, revision: str) -> None:
    peer.speak(revision)
    peer.result("tools/call", {"name": "count", "arguments": {"to": 3}})
    assert _count_notifications(peer, "notifications/progress") == []

    peer.result("tools/call", {"name": "count", "arguments": {"to": 3}}, meta={"progressToken": "tok"})
    progress = _count_notifications(peer, "notifications/progress")
    assert [p["params"]["progress"] for p in progress] == [1, 2, 3]
    assert all(p["params"]["progressToken"] == "tok" for p in progress)
    # progress message exists from 2025-03-26 on; held strictly, it is not sent before.
    assert all(("message" in p["params"]) == at_least(revision, "2025-03-26") for p in progress)


def test_log_messages_only_at_the_level_asked_for(peer: Peer, revision: str) -> None:
    peer.speak(revision)
    peer.result("tools/call", {"name": "count", "arguments": {"to": 2}})
    assert _count_notifications(peer, "notifications/message") == []  # no level, no messages
    if revision == MODERN:
        peer.result(
            "tools/call",
            {"name": "count", "arguments": {"to": 2}},
            meta={"io.modelcontextprotocol/logLevel": "info"},
        )
        logs = _count_notifications(peer, "notifications/message")
        assert [m["params"]["data"] for m in logs] == ["counted 1", "counted 2"]
        peer.notifications.clear()
        peer.result(
            "tools/call",
            {"name": "count", "arguments": {"to": 2}},
            meta={"io.modelcontextprotocol/logLevel": "warning"},
        )
        assert _count_notifications(peer, "notifications/message") == []
    else:
        assert peer.result("logging/setLevel", {"level": "info"}) == {}
        peer.result("tools/call", {"name": "count", "arguments": {"to": 2}})
        logs = _count_notifications(peer, "notifications/message")
        assert [m["params"]["data"] for m in logs] == ["counted 1", "counted 2"]
        assert all(m["params"]["level"] == "info" and m["params"]["logger"] == "demo.count" for m in logs)
        peer.notifications.clear()
        peer.result("logging/setLevel", {"level": "error"})
        peer.result("tools/call", {"name": "count", "arguments": {"to": 2}})
        assert _count_notifications(peer, "notifications/message") == []
        assert peer.error("logging/setLevel", {"level": "loud"})["code"] == -32602


# --------------------------------------------------------------------------
# Removed methods, accepted newer methods
# --------------------------------------------------------------------------

REMOVED_IN_2026 = ("initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe")


def test_removed_methods_are_method_not_found_only_for_2026(peer: Peer, revision: str) -> None:
    peer.speak(revision)
    params = {
        "initialize": {
            "protocolVersion": MODERN,
            "capabilities": {},
            "clientInfo": {"name": "x", "version": "1"},
        },
        "logging/setLevel": {"level": "info"},
        "resources/subscribe": {"uri": "demo://readme"},
        "resources/unsubscribe": {"uri": "demo://readme"},
    }
    for method in REMOVED_IN_2026:
        if method == "initialize" and revision != MODERN:
            continue  # a legacy peer initialized already; covered by test_initialize_twice_is_refused
        frame = peer.call(method, params.get(method))
        if revision == MODERN:
            assert frame["error"]["code"] == -32601, (method, frame)
            assert "removed" in frame["error"]["message"]
        else:
            assert frame["result"] == {}, (method, frame)


def test_legacy_peer_may_listen_for_notifications(stdio_peer: StdioPeer, revision: str) -> None:
    """subscriptions/listen is answered for any peer, in its 2026-07-28 shape."""
    peer = stdio_peer
    peer.speak(revision)
    listen_id = peer.request(
        "subscriptions/listen",
        {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["demo://readme"]}},
    )
    ack = peer.recv()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == listen_id
    # tools.listChanged is false for the demo, so only the resource subscription is honoured.
    assert ack["params"]["notifications"] == {"resourceSubscriptions": ["demo://readme"]}
    assert peer.close() == 0
    final = [f for f in peer.received if f.get("id") == listen_id]
    assert final and final[0]["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == listen_id


def test_tasks_are_answered_but_none_exist(peer: Peer, revision: str) -> None:
    peer.speak(revision)
    if revision == MODERN:
        assert peer.error("tasks/list")["code"] == -32601  # removed in 2026-07-28
        missing = peer.error("tasks/get", {"taskId": "t1"})
        assert missing["code"] == -32021  # the tasks extension was not declared
        assert missing["data"]["requiredCapabilities"]["extensions"] == {"io.modelcontextprotocol/tasks": {}}
        declared = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        unknown = peer.error(
            "tasks/get", {"taskId": "t1"}, meta={"io.modelcontextprotocol/clientCapabilities": declared}
        )
        assert unknown["code"] == -32602
    else:
        assert peer.result("tasks/list") == {"tasks": []}
        assert peer.error("tasks/get", {"taskId": "t1"})["code"] == -32602


# --------------------------------------------------------------------------
# 2026-07-28 request judgement
# --------------------------------------------------------------------------


def test_modern_request_errors(stdio_peer: StdioPeer) -> None:
    peer = stdio_peer
    no_meta = peer.error("server/discover", modern=False)
    assert no_meta["code"] == -32602 and "_meta" in no_meta["message"]
    half = peer.call(
        "tools/list",
        {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}},
        modern=False,
    )
    assert half["error"]["code"] == -32602
    old = peer.error(
        "tools/list", meta={"io.modelcontextprotocol/protocolVersion": "2025-06-18"}, modern=True
    )
    assert old["code"] == -32022
    assert old["data"] == {"supported": [MODERN], "requested": "2025-06-18"}
    unknown = peer.error(
        "tools/list", meta={"io.modelcontextprotocol/protocolVersion": "2031-01-01"}, modern=True
    )
    assert unknown["code"] == -32022
    assert peer.error("no/such/method", modern=True)["code"] == -32601


def test_both_eras_on_one_connection(stdio_peer: StdioPeer) -> None:
    """A legacy session and per-request 2026-07-28 requests coexist on one pipe."""
    peer = stdio_peer
    peer.initialize("2025-03-26")
    legacy = peer.result("tools/call", {"name": "weather", "arguments": {"city": "Rome"}})
    modern = peer.result("tools/call", {"name": "weather", "arguments": {"city": "Rome"}}, modern=True)
    assert "structuredContent" not in legacy and "resultType" not in legacy
    assert modern["structuredContent"]["city"] == "Rome" and modern["resultType"] == "complete"
    assert peer.result("ping") == {}  # still the legacy session


# --------------------------------------------------------------------------
# Cancellation and end of input
# --------------------------------------------------------------------------


def test_cancelled_request_gets_no_response(holding_peer: Peer, revision: str) -> None:
    peer = holding_peer
    peer.speak(revision)
    slow = peer.request("tools/call", {"name": "sleep", "arguments": {"seconds": 30}})
    wait_until_running(peer, slow)
    peer.cancel(slow, "user gave up")
    started = time.monotonic()
    ping_params = {"name": "echo", "arguments": {"text": "still here"}}
    assert texts(peer.result("tools/call", ping_params)) == ["still here"]
    assert peer.close(timeout=10) == 0
    assert time.monotonic() - started < 8
    assert not [f for f in peer.received if f.get("id") == slow], "a cancelled request must not be answered"


def test_cancelling_a_threaded_handler(holding_peer: Peer) -> None:
    """A sync tool runs on a worker thread; cancelling it stops it and nothing is answered."""
    peer = holding_peer
    peer.initialize("2025-11-25")
    slow = peer.request("tools/call", {"name": "sleep_sync", "arguments": {"seconds": 30}})
    wait_until_running(peer, slow)
    peer.cancel(slow)
    quick = peer.result("tools/call", {"name": "sleep_sync", "arguments": {"seconds": 0.05}})
    assert texts(quick) == ["slept 0.05s"]
    assert peer.close(timeout=10) == 0
    assert not [f for f in peer.received if f.get("id") == slow]


def test_end_of_input_drains_requests_in_flight(loop: str) -> None:
    peer = StdioPeer(loop)
    try:
        peer.initialize("2025-06-18")
        quick = peer.request("tools/call", {"name": "sleep", "arguments": {"seconds": 0.3}})
        assert peer.close(timeout=10) == 0
        answered = [f for f in peer.received if f.get("id") == quick]
        assert answered and answered[0]["result"]["content"][0]["text"] == "slept 0.3s"
    finally:
        peer.kill()


@pytest.mark.parametrize("tool", ["sleep", "sleep_sync"])
def test_drain_time_bounds_how_long_end_of_input_waits(loop: str, tool: str) -> None:
    peer = StdioPeer(loop, "--drain", "0.5")
    try:
        peer.initialize("2025-06-18")
        slow = peer.request("tools/call", {"name": tool, "arguments": {"seconds": 30}})
        wait_until_running(peer, slow)  # in flight when stdin closes: the drain time is what ends it
        started = time.monotonic()
        assert peer.close(timeout=10) == 0
        assert time.monotonic() - started < 5
        assert not [f for f in peer.received if f.get("id") == slow]
    finally:
        peer.kill()


# --------------------------------------------------------------------------
# Bad input: a precise error, and the connection keeps working
# --------------------------------------------------------------------------


def test_bad_lines_get_parse_errors_and_the_connection_survives(stdio_peer: StdioPeer, revision: str) -> None:
    peer = stdio_peer
    peer.speak(revision)
    peer.send_raw(b"this is not json\n")
    frame = peer.recv()
    assert frame["id"] is None and frame["error"]["code"] == -32700
    peer.send_raw(b'{"jsonrpc":"2.0","id":5,"method":"tools/list","params":[1,2]}\n')
    assert peer.recv()["error"]["code"] == -32602
    peer.send_raw(b'{"jsonrpc":"1.0","id":6,"method":"tools/list"}\n')
    assert peer.recv() == {
        "jsonrpc": "2.0",
        "id": 6,
        "error": {"code": -32600, "message": 'Invalid Request: "jsonrpc" must be "2.0"'},
    }
    peer.send_raw(b'{"jsonrpc":"2.0","id":7,"method":"tools/list","Method":"x"}\n')
    assert peer.recv()["error"]["code"] == -32600
    assert texts(peer.result("tools/call", {"name": "echo", "arguments": {"text": "ok"}})) == ["ok"]


def test_line_limit(loop: str) -> None:
    peer = StdioPeer(loop, "--max-line", "1024")
    try:
        peer.initialize("2025-11-25")
        big = "x" * 4096
        peer.send_raw(
            b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"'
            + big.encode()
            + b'"}}}\n'
        )
        frame = peer.recv()
        assert frame["id"] is None and frame["error"]["code"] == -32700
        assert "1024" in frame["error"]["message"]
        assert texts(peer.result("tools/call", {"name": "echo", "arguments": {"text": "small"}})) == ["small"]
    finally:
        peer.kill()


def test_batches_only_for_2025_03_26(stdio_peer: StdioPeer, revision: str) -> None:
    peer = stdio_peer
    peer.speak(revision)
    peer.send(
        [
            {"jsonrpc": "2.0", "id": "b1", "method": "ping"},
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": 1, "progress": 1},
            },
            {
                "jsonrpc": "2.0",
                "id": "b2",
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "x"}},
            },
        ]
    )
    if revision == "2025-03-26":
        # A batch response is one array; the sweep checks each member.
        frame = peer.frames.get(timeout=10)
        assert isinstance(frame, list)
        assert sorted(r["id"] for r in frame) == ["b1", "b2"]
        for member in frame:
            SWEEP.validate_sent(member, revision, "ping" if member["id"] == "b1" else "tools/call")
    else:
        frame = peer.recv()
        assert frame["id"] is None and frame["error"]["code"] == -32600
        assert "2025-03-26" in frame["error"]["message"]
    if revision != MODERN:
        assert peer.result("ping") == {}
    assert peer.result("tools/list")["tools"]


def test_duplicate_id_in_flight_is_refused(stdio_peer: StdioPeer) -> None:
    peer = stdio_peer
    peer.initialize("2025-11-25")
    peer.request("tools/call", {"name": "sleep", "arguments": {"seconds": 0.5}}, id=42)
    peer.send({"jsonrpc": "2.0", "id": 42, "method": "ping"})
    first = peer.recv()
    # The refusal carries a null id: id 42's answer is still to come, and a
    # second reply for 42 could not be told apart from it.
    assert first["id"] is None and first["error"]["code"] == -32600 and "42" in first["error"]["message"]
    second = peer.recv()
    assert second["id"] == 42 and second["result"]["content"][0]["text"] == "slept 0.5s"


def test_modern_meta_is_never_remembered(peer: Peer) -> None:
    """Each 2026-07-28 request stands alone: a log level on one does not carry to the next."""
    peer.speak(MODERN)
    peer.result(
        "tools/call",
        {"name": "count", "arguments": {"to": 1}},
        meta={"io.modelcontextprotocol/logLevel": "debug"},
    )
    assert len(_count_notifications(peer, "notifications/message")) == 1
    peer.notifications.clear()
    peer.result("tools/call", {"name": "count", "arguments": {"to": 1}})
    assert _count_notifications(peer, "notifications/message") == []


def test_a_peer_that_stops_reading_ends_the_server_quietly(loop: str) -> None:
    """No traceback and a clean exit when stdout's reader goes away."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "demo", "--loop", loop],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    try:
        proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n' * 50)
        proc.stdin.flush()
        if loop != "blocking":
            # The event-loop drivers end as soon as they find stdout's reader gone, stdin still open.
            assert proc.wait(timeout=10) == 0
        # The blocking driver drops what it cannot write and ends at end of input; it reads the
        # pings, and answers them into the closed pipe, before it can see that end.
        proc.stdin.close()
    except BrokenPipeError:
        pass
    assert proc.wait(timeout=10) == 0
    assert b"Traceback" not in proc.stderr.read()


def test_stdin_that_is_already_at_its_end_exits_cleanly(loop: str) -> None:
    """/dev/null cannot be polled by epoll; the driver must still see end of input and exit."""
    with open(os.devnull, "rb") as devnull:
        done = subprocess.run(
            [sys.executable, "-m", "mcpx", "demo", "--loop", loop],
            stdin=devnull,
            capture_output=True,
            timeout=20,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"" and b"Traceback" not in done.stderr


# --------------------------------------------------------------------------
# Legacy POSTs outside any session (Streamable HTTP only)
# --------------------------------------------------------------------------

SESSIONLESS = ("2025-03-26", "2025-06-18", "2025-11-25")


@pytest.mark.parametrize("revision", SESSIONLESS)
def test_sessionless_posts_are_answered_at_their_header_revision(
    sessionless: HttpPeer, revision: str
) -> None:
    sessionless.speak(revision)
    weather = sessionless.result("tools/call", {"name": "weather", "arguments": {"city": "Oslo"}})
    assert ("structuredContent" in weather) == at_least(revision, "2025-06-18")
    assert "resultType" not in weather
    tools = sessionless.result("tools/list")
    assert ("outputSchema" in {t["name"]: t for t in tools["tools"]}["weather"]) == at_least(
        revision, "2025-06-18"
    )
    progress = sessionless.result(
        "tools/call", {"name": "count", "arguments": {"to": 2}}, meta={"progressToken": 9}
    )
    assert texts(progress) == ["counted to 2"]
    steps = [
        n["params"]["progress"] for n in sessionless.notifications if n["method"] == "notifications/progress"
    ]
    assert steps == [1, 2]
    assert all("mcp-session-id" not in headers for headers in sessionless.headers.values())
    assert sessionless.close() == 0


def test_a_headerless_post_is_judged_as_2025_03_26(sessionless: HttpPeer) -> None:
    sessionless.speak("2025-03-26")  # 2025-03-26 predates the header: none is sent
    weather = sessionless.result("tools/call", {"name": "weather", "arguments": {"city": "Rome"}})
    assert "structuredContent" not in weather
    audio = sessionless.result("tools/call", {"name": "tiny_audio"})
    assert audio["content"][0]["type"] == "audio"  # 2025-03-26 has audio, 2024-11-05 does not
