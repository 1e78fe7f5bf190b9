"""The era probe, one conversation per path (spec/era-probe.md), and its cache.

Each test plays the server by hand against a fake clock: it reads the
actions the probe queued, answers the request they carry, and checks the
next step and the outcome.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from mcpx.core.errors import LocalProtocolError
from mcpx.core.probe import (
    CloseResponse,
    EraCache,
    EraEntry,
    EraProbe,
    HttpAnswered,
    HttpBody,
    HttpRequest,
    LineReceived,
    MessageReceived,
    OpenSse,
    ProbeAction,
    ProbeConfig,
    ProbeDone,
    ProbeFailed,
    ProbeState,
    Reconnect,
    SendMessage,
    TransportClosed,
    transition_table,
)
from mcpx.core.revisions import Revision
from mcpx.drivers._eracache import (
    era_cache_path,
    load_era_cache,
    record_outcome,
    save_era_cache,
    update_era_cache,
)

R24, R25A, R25B, R25C, R26 = (
    Revision.V2024_11_05,
    Revision.V2025_03_26,
    Revision.V2025_06_18,
    Revision.V2025_11_25,
    Revision.V2026_07_28,
)
CLIENT = {"name": "mcpx-test", "version": "0.0", "title": "mcpx under test"}
CAPS = {"roots": {"listChanged": True}, "elicitation": {"form": {}}}
CONFIG = ProbeConfig(client_info=CLIENT, capabilities=CAPS)
JSON = (("Content-Type", "application/json"),)
HTML = (("content-type", "text/html; charset=utf-8"),)
SSE = (("Content-Type", "text/event-stream"),)


# ----------------------------------------------------------------------------
# A hand-played server
# ----------------------------------------------------------------------------


class Conversation:
    """A probe, a fake clock, and the actions of the last step."""

    def __init__(self, transport: str = "stdio", **kw: Any) -> None:
        config = kw.pop("config", CONFIG)
        self.probe = EraProbe(config, transport=transport, **kw)  # type: ignore[arg-type]
        self.now = 0.0
        self._actions: list[ProbeAction] = []
        self._last_request: dict[str, Any] | None = None
        self.probe.start(self.now)
        self.actions = self.probe.next_actions()

    # what the probe sent ------------------------------------------------
    @property
    def actions(self) -> list[ProbeAction]:
        return self._actions

    @actions.setter
    def actions(self, actions: list[ProbeAction]) -> None:
        self._actions = actions
        for action in actions:
            if isinstance(action, SendMessage | HttpRequest):
                message = action.message
                if isinstance(message, dict) and "method" in message and "id" in message:
                    self._last_request = message

    def last_message(self) -> dict[str, Any]:
        """The last request the probe sent (what the server answers next)."""
        assert self._last_request is not None, "the probe sent no request"
        return self._last_request

    def last_request(self) -> HttpRequest:
        requests = [a for a in self.actions if isinstance(a, HttpRequest)]
        assert requests, f"no HTTP request: {self.actions}"
        return requests[0]

    @property
    def method(self) -> str:
        first = next(a for a in self.actions if isinstance(a, SendMessage | HttpRequest | OpenSse))
        if isinstance(first, OpenSse):
            return "GET"
        return str(first.message["method"])

    @property
    def outcome(self) -> ProbeDone | ProbeFailed:
        last = self.actions[-1]
        assert isinstance(last, ProbeDone | ProbeFailed), self.actions
        assert self.probe.outcome == last
        assert self.probe.get_timer() is None
        return last

    # what the server answers -------------------------------------------
    def step(self, seconds: float = 0.1) -> None:
        self.now += seconds

    def say(self, obj: Any) -> list[ProbeAction]:
        self.step()
        self.probe.receive(MessageReceived(message=obj), self.now)
        self.actions = self.probe.next_actions()
        return self.actions

    def result(self, result: dict[str, Any]) -> list[ProbeAction]:
        return self.say({"jsonrpc": "2.0", "id": self.last_message()["id"], "result": result})

    def error(self, code: int, message: str = "no", data: Any = None) -> list[ProbeAction]:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        return self.say({"jsonrpc": "2.0", "id": self.last_message()["id"], "error": error})

    def wait_out(self) -> list[ProbeAction]:
        deadline = self.probe.get_timer()
        assert deadline is not None
        self.probe.handle_timer(deadline - 0.001)
        assert self.probe.next_actions() == []
        self.now = deadline
        self.probe.handle_timer(self.now)
        self.actions = self.probe.next_actions()
        return self.actions

    def answer_http(
        self,
        status: int,
        headers: tuple[tuple[str, str], ...] = (),
        body: bytes | Any = b"",
        *,
        complete: bool = True,
        token: int | None = None,
    ) -> list[ProbeAction]:
        if token is None:
            token = next(a.token for a in self.actions if isinstance(a, HttpRequest | OpenSse))
        if not isinstance(body, bytes):
            body = orjson.dumps(body)
        self.step()
        self.probe.receive(
            HttpAnswered(token=token, status=status, headers=headers, body=body, complete=complete), self.now
        )
        self.actions = self.probe.next_actions()
        return self.actions


def discover_result(*versions: str, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = {
        "supportedVersions": list(versions),
        "capabilities": {"tools": {"listChanged": True}},
        "ttlMs": 0,
        "cacheScope": "public",
        "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "1.2"}},
    }
    result.update(extra)
    return result


def initialize_result(version: str) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {"prompts": {}},
        "serverInfo": {"name": "old", "version": "0.9"},
        "instructions": "be nice",
    }


def rpc_error(request: HttpRequest, code: int, message: str = "no", data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request.message["id"], "error": error}


# ----------------------------------------------------------------------------
# Modern first
# ----------------------------------------------------------------------------


def test_discover_carries_the_full_modern_meta() -> None:
    c = Conversation()
    assert c.method == "server/discover"
    meta = c.last_message()["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    # cut to 2026-07-28: roots.listChanged is gone there
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"roots": {}, "elicitation": {"form": {}}}
    assert meta["io.modelcontextprotocol/clientInfo"] == CLIENT
    assert c.probe.get_timer() == 5.0
    assert c.probe.state is ProbeState.DISCOVERING


def test_discover_result_settles_the_modern_era() -> None:
    c = Conversation()
    c.result(discover_result("2025-11-25", "2026-07-28", instructions="hi"))
    done = c.outcome
    assert isinstance(done, ProbeDone)
    assert (done.era, done.revision) == ("modern", R26)
    assert done.capabilities == {"tools": {"listChanged": True}}
    assert done.server_info == {"name": "srv", "version": "1.2"}
    assert done.instructions == "hi"
    assert done.supported == ("2025-11-25", "2026-07-28")
    assert done.cache == "none"
    assert any("supportedVersions" in line for line in done.trace)
    assert done.trace[-1] == "decide: modern era, MCP 2026-07-28"
    assert not any(isinstance(a, SendMessage) for a in c.actions)  # nothing more to say on stdio


def test_discover_result_is_read_from_supported_versions_not_protocol_versions() -> None:
    """The Go mcpx read ``protocolVersions``; a result with only that field is not a DiscoverResult."""
    c = Conversation()
    c.result({"protocolVersions": ["2026-07-28"], "capabilities": {}})
    assert c.method == "initialize"
    assert any("protocolVersions" in line for line in c.probe.trace)


def test_unsupported_version_retries_with_a_listed_modern_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    """-32022 naming another modern revision: retry with it, do not fall back.

    Only one modern revision exists today, so 2025-11-25 stands in for a
    second one here.
    """
    monkeypatch.setattr(Revision, "is_modern", property(lambda self: self >= R25C))
    c = Conversation(config=ProbeConfig(client_info=CLIENT, revisions=(R26, R25C, R25B)))
    c.error(-32022, "Unsupported protocol version", {"supported": ["2025-11-25"], "requested": "2026-07-28"})
    assert c.method == "server/discover"
    assert c.last_message()["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2025-11-25"
    c.result(discover_result("2025-11-25"))
    done = c.outcome
    assert isinstance(done, ProbeDone)
    assert (done.era, done.revision) == ("modern", R25C)


def test_unsupported_version_listing_only_legacy_revisions_goes_legacy() -> None:
    c = Conversation()
    c.error(-32022, "Unsupported protocol version", {"supported": ["2025-03-26", "2025-06-18"]})
    assert c.method == "initialize"
    assert c.last_message()["params"]["protocolVersion"] == "2025-06-18"  # the newest one listed


def test_unsupported_version_listing_nothing_mcpx_speaks_fails_without_falling_back() -> None:
    c = Conversation()
    c.error(-32022, "Unsupported protocol version", {"supported": ["2099-01-01"]})
    failed = c.outcome
    assert isinstance(failed, ProbeFailed)
    assert "2099-01-01" in failed.reason and "Upgrade mcpx" in failed.reason


@pytest.mark.parametrize(
    ("code", "data"),
    [(-32021, {"requiredCapabilities": {"sampling": {}}}), (-32020, None)],
    ids=["missing-capability", "header-mismatch"],
)
def test_a_recognised_modern_refusal_keeps_the_modern_era(code: int, data: Any) -> None:
    c = Conversation()
    c.error(code, "refused", data)
    done = c.outcome
    assert isinstance(done, ProbeDone)
    assert (done.era, done.revision, done.capabilities) == ("modern", R26, None)


# ----------------------------------------------------------------------------
# Anything else is legacy
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "data"),
    [
        (-32601, None),
        (-32602, None),
        (-32602, {"supported": "2025-06-18"}),  # not a list: not recognised
        (-32603, None),
        (-32000, None),
        (-32022, None),  # -32022 without data.supported is not the modern error
        (-32021, {"requiredCapabilities": "sampling"}),
        (1, None),
    ],
    ids=[
        "method-not-found",
        "invalid-params",
        "bad-supported",
        "internal",
        "server",
        "bare-32022",
        "bad-32021",
        "odd",
    ],
)
def test_other_errors_fall_back_to_initialize(code: int, data: Any) -> None:
    c = Conversation()
    c.error(code, "nope", data)
    assert c.method == "initialize"
    params = c.last_message()["params"]
    assert params["protocolVersion"] == "2025-11-25"
    assert params["capabilities"] == CAPS
    assert params["clientInfo"] == CLIENT
    assert c.probe.state is ProbeState.INITIALIZING
    c.result(initialize_result("2025-11-25"))
    assert isinstance(c.outcome, ProbeDone)
    assert c.outcome.era == "legacy"


def test_an_error_with_a_null_id_is_an_answer_too() -> None:
    c = Conversation()
    c.say({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}})
    assert c.method == "initialize"


def test_silence_falls_back_after_the_timeout_and_a_late_answer_is_ignored() -> None:
    c = Conversation()
    discover_id = c.last_message()["id"]
    c.wait_out()
    assert c.method == "initialize"
    assert c.probe.get_timer() == 10.0  # a fresh deadline for initialize
    c.say({"jsonrpc": "2.0", "id": discover_id, "result": discover_result("2026-07-28")})
    assert c.actions == []
    c.result(initialize_result("2025-11-25"))
    done = c.outcome
    assert isinstance(done, ProbeDone) and done.era == "legacy"
    assert any("ignored" in line for line in done.trace)


def test_a_modern_server_slow_to_start_is_asked_again_when_initialize_names_its_revision() -> None:
    # Silence to server/discover, then initialize refused with -32022 listing 2026-07-28: the
    # server is modern and was only slow (a package download, a loaded machine).  One more
    # server/discover, and the era is modern; a second silence would not earn a third try.
    c = Conversation()
    c.wait_out()
    assert c.method == "initialize"
    c.say(
        {
            "jsonrpc": "2.0",
            "id": c.last_message()["id"],
            "error": {"code": -32022, "message": "modern only", "data": {"supported": ["2026-07-28"]}},
        }
    )
    assert c.method == "server/discover"
    c.result(discover_result("2026-07-28"))
    done = c.outcome
    assert isinstance(done, ProbeDone) and done.era == "modern"


def test_lines_that_are_not_json_rpc_are_ignored_while_waiting() -> None:
    c = Conversation()
    for line in (b"Starting server...", b"[1, 2", b'{"hello": "world"}', b"[]"):
        c.probe.receive(LineReceived(line=line), 0.5)
        assert c.probe.next_actions() == []
    assert c.probe.get_timer() == 5.0
    c.probe.receive(LineReceived(line=orjson.dumps({"jsonrpc": "2.0", "method": "notifications/message"})), 1)
    assert c.probe.next_actions() == []
    c.wait_out()
    assert c.method == "initialize"


def test_a_ping_from_the_server_is_answered_while_probing() -> None:
    c = Conversation()
    actions = c.say({"jsonrpc": "2.0", "id": 7, "method": "ping"})
    assert [a.message for a in actions if isinstance(a, SendMessage)] == [
        {"jsonrpc": "2.0", "id": 7, "result": {}}
    ]
    actions = c.say({"jsonrpc": "2.0", "id": 8, "method": "roots/list"})
    (reply,) = [a.message for a in actions if isinstance(a, SendMessage)]
    assert reply["id"] == 8 and reply["error"]["code"] == -32600
    assert c.probe.state is ProbeState.DISCOVERING


def test_a_process_that_exits_on_discover_is_restarted_for_initialize() -> None:
    c = Conversation()
    c.probe.receive(TransportClosed(reason="exit status 1"), 0.2)
    c.actions = c.probe.next_actions()
    assert isinstance(c.actions[0], Reconnect)
    assert c.method == "initialize"
    c.result(initialize_result("2025-06-18"))
    assert isinstance(c.outcome, ProbeDone)


def test_a_process_that_keeps_exiting_fails_with_advice() -> None:
    c = Conversation()
    c.probe.receive(TransportClosed(), 0.2)
    c.actions = c.probe.next_actions()
    c.probe.receive(TransportClosed(), 0.3)
    c.actions = c.probe.next_actions()
    failed = c.outcome
    assert isinstance(failed, ProbeFailed)
    assert "stderr" in failed.reason


def test_silence_to_initialize_fails_with_advice() -> None:
    c = Conversation()
    c.wait_out()
    c.wait_out()
    failed = c.outcome
    assert isinstance(failed, ProbeFailed)
    assert "run it by hand" in failed.reason and "5s" in failed.reason


# ----------------------------------------------------------------------------
# Legacy negotiation
# ----------------------------------------------------------------------------


def test_the_counter_offer_is_accepted_and_initialized_is_sent() -> None:
    c = Conversation()
    c.error(-32601, "Method not found")
    c.result(initialize_result("2025-03-26"))
    done = c.outcome
    assert isinstance(done, ProbeDone)
    assert (done.era, done.revision) == ("legacy", R25A)
    assert done.capabilities == {"prompts": {}}
    assert done.server_info == {"name": "old", "version": "0.9"}
    assert done.instructions == "be nice"
    assert done.session_id is None
    sent = [a.message for a in c.actions if isinstance(a, SendMessage)]
    assert sent == [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
    assert any("counter-offer" in line for line in done.trace)


def test_a_counter_offer_mcpx_does_not_speak_fails() -> None:
    c = Conversation()
    c.error(-32601)
    c.result(initialize_result("2023-01-01"))
    failed = c.outcome
    assert isinstance(failed, ProbeFailed)
    assert "2023-01-01" in failed.reason


def test_an_initialize_error_listing_another_legacy_revision_is_retried() -> None:
    c = Conversation()
    c.error(-32601)
    c.error(-32602, "Unsupported protocol version", {"supported": ["2024-11-05"], "requested": "2025-11-25"})
    assert c.method == "initialize"
    assert c.last_message()["params"]["protocolVersion"] == "2024-11-05"
    c.result(initialize_result("2024-11-05"))
    assert isinstance(c.outcome, ProbeDone) and c.outcome.revision == R24


def test_legacy_only_configuration_starts_at_initialize() -> None:
    c = Conversation(config=ProbeConfig(client_info=CLIENT, revisions=(R25B, R24)))
    assert c.method == "initialize"
    assert c.last_message()["params"]["protocolVersion"] == "2025-06-18"


def test_modern_only_configuration_fails_where_legacy_would_be_needed() -> None:
    c = Conversation(config=ProbeConfig(client_info=CLIENT, revisions=(R26,)))
    c.error(-32601)
    failed = c.outcome
    assert isinstance(failed, ProbeFailed) and "Allow a legacy revision" in failed.reason


# ----------------------------------------------------------------------------
# Over HTTP
# ----------------------------------------------------------------------------


def test_http_discover_is_a_modern_post() -> None:
    c = Conversation("http", path="/mcp")
    request = c.last_request()
    assert (request.method, request.path) == ("POST", "/mcp")
    assert request.header("mcp-protocol-version") == "2026-07-28"
    assert request.header("MCP-Method") == "server/discover"
    assert request.header("accept") == "application/json, text/event-stream"
    c.answer_http(
        200, JSON, {"jsonrpc": "2.0", "id": request.message["id"], "result": discover_result("2026-07-28")}
    )
    assert isinstance(c.outcome, ProbeDone) and c.outcome.era == "modern"


def test_http_discover_answered_on_an_event_stream() -> None:
    c = Conversation("http", path="/mcp")
    request = c.last_request()
    answer = {"jsonrpc": "2.0", "id": request.message["id"], "result": discover_result("2026-07-28")}
    c.answer_http(200, SSE, b": keep-alive\n\n", complete=False)
    assert c.actions == []
    c.step()
    c.probe.receive(
        HttpBody(token=request.token, data=b"event: message\ndata: " + orjson.dumps(answer) + b"\n\n"), c.now
    )
    c.actions = c.probe.next_actions()
    assert c.actions[0] == CloseResponse(token=request.token)  # the stream was not over yet
    assert isinstance(c.outcome, ProbeDone) and c.outcome.era == "modern"


def test_http_400_with_a_modern_error_body_keeps_modern() -> None:
    c = Conversation("http", path="/mcp")
    request = c.last_request()
    c.answer_http(
        400, JSON, rpc_error(request, -32021, "need sampling", {"requiredCapabilities": {"sampling": {}}})
    )
    assert isinstance(c.outcome, ProbeDone) and c.outcome.era == "modern"


def test_http_400_with_32022_listing_legacy_revisions_goes_legacy() -> None:
    c = Conversation("http", path="/mcp")
    request = c.last_request()
    c.answer_http(400, JSON, rpc_error(request, -32022, "unsupported", {"supported": ["2025-06-18"]}))
    assert c.method == "initialize"
    assert c.last_message()["params"]["protocolVersion"] == "2025-06-18"


@pytest.mark.parametrize(
    ("status", "headers", "body"),
    [
        (404, HTML, b"<html><body>Not Found</body></html>"),
        (405, (), b""),
        (400, (("content-type", "text/plain"),), b"Bad Request"),
        (400, JSON, "sdk-no-session"),
        (404, JSON, "method-not-found"),
        (200, JSON, "invalid-params"),
        (500, JSON, b'{"detail": "boom"}'),
        (202, (), b""),
        (200, JSON, b"{not json"),
        (200, SSE, b"event: message\ndata: {}\n\n"),
    ],
    ids=[
        "html-404",
        "405",
        "400-text",
        "400-no-session",
        "404-32601",
        "200-32602",
        "500",
        "202",
        "junk",
        "sse-no-answer",
    ],
)
def test_http_legacy_answers_fall_back_to_initialize(
    status: int, headers: tuple[tuple[str, str], ...], body: Any
) -> None:
    c = Conversation("http", path="/mcp")
    request = c.last_request()
    if body == "sdk-no-session":
        body = {
            "jsonrpc": "2.0",
            "id": "server-error",
            "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"},
        }
        body["id"] = None
    elif body == "method-not-found":
        body = rpc_error(request, -32601, "Method not found")
    elif body == "invalid-params":
        body = rpc_error(request, -32602, "Invalid request parameters")
    c.answer_http(status, headers, body)
    assert c.method == "initialize"
    init = c.last_request()
    assert init.header("mcp-protocol-version") is None  # initialize states its version in the body
    assert init.header("mcp-method") is None


def test_http_closed_connection_falls_back_to_initialize() -> None:
    c = Conversation("http", path="/mcp")
    request = c.last_request()
    c.probe.receive(TransportClosed(reason="reset", token=request.token), 0.1)
    c.actions = c.probe.next_actions()
    assert c.method == "initialize"


def test_http_silence_closes_the_request_and_falls_back() -> None:
    c = Conversation("http", path="/mcp")
    token = c.last_request().token
    c.wait_out()
    assert c.actions[0] == CloseResponse(token=token)
    assert c.method == "initialize"


def test_http_legacy_initialize_records_the_session_and_sends_initialized() -> None:
    c = Conversation("http", path="/mcp")
    c.answer_http(405, (), b"")
    request = c.last_request()
    answer = {"jsonrpc": "2.0", "id": request.message["id"], "result": initialize_result("2025-06-18")}
    c.answer_http(200, (*JSON, ("Mcp-Session-Id", "abc-123")), answer)
    done = c.outcome
    assert isinstance(done, ProbeDone)
    assert (done.era, done.revision, done.session_id) == ("legacy", R25B, "abc-123")
    initialized = c.last_request()
    assert initialized.message == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert initialized.header("mcp-session-id") == "abc-123"
    assert initialized.header("mcp-protocol-version") == "2025-06-18"
    # its answer comes after the outcome, and is ignored
    c.probe.receive(HttpAnswered(token=initialized.token, status=202), 9.0)
    assert c.probe.next_actions() == []


def test_http_falls_back_to_the_2024_11_05_sse_transport() -> None:
    c = Conversation("http", path="/mcp", sse_path="/sse")
    c.answer_http(404, HTML, b"<h1>404</h1>")
    assert c.method == "initialize"
    c.answer_http(405, (("content-type", "text/plain"),), b"Method Not Allowed")
    (opened,) = [a for a in c.actions if isinstance(a, OpenSse)]
    assert opened.path == "/sse" and ("Accept", "text/event-stream") in opened.headers
    c.answer_http(200, SSE, b": hi\n\nevent: endpoint\ndata: /messages?session_id=0f9", complete=False)
    assert c.actions == []
    c.step()
    c.probe.receive(HttpBody(token=opened.token, data=b"\n\n"), c.now)
    c.actions = c.probe.next_actions()
    done = c.outcome
    assert isinstance(done, ProbeDone)
    assert (done.era, done.revision) == ("legacy-sse", None)
    assert done.endpoint == "/messages?session_id=0f9"
    assert done.sse_token == opened.token
    assert not any(isinstance(a, CloseResponse) for a in c.actions)  # the stream is the caller's now


def test_http_initialize_with_a_legacy_error_and_400_tries_sse() -> None:
    c = Conversation("http", path="/mcp")
    c.answer_http(404, HTML, b"no")
    request = c.last_request()
    c.answer_http(400, JSON, rpc_error(request, -32600, "Bad Request"))
    assert c.method == "GET"


def test_http_nothing_speaks_mcp_fails_with_advice() -> None:
    c = Conversation("http", path="/api")
    c.answer_http(404, HTML, b"<h1>404</h1>")
    c.answer_http(404, HTML, b"<h1>404</h1>")
    c.answer_http(404, HTML, b"<h1>404</h1>")
    failed = c.outcome
    assert isinstance(failed, ProbeFailed)
    assert "Check the URL" in failed.reason and "/mcp" in failed.reason and "/sse" in failed.reason
    assert "HTTP 404" in failed.reason


@pytest.mark.parametrize("status", [401, 403])
def test_http_auth_refusal_fails_at_once_with_advice(status: int) -> None:
    c = Conversation("http", path="/mcp")
    c.answer_http(status, JSON, b'{"error": "invalid_token"}')
    failed = c.outcome
    assert isinstance(failed, ProbeFailed)
    assert "Configure auth" in failed.reason


# ----------------------------------------------------------------------------
# Starting from the cache
# ----------------------------------------------------------------------------


def test_a_cached_legacy_era_skips_discover() -> None:
    c = Conversation(cached=EraEntry(era="legacy", revision=R25B, at=1.0))
    assert c.method == "initialize"
    c.result(initialize_result("2025-06-18"))
    done = c.outcome
    assert isinstance(done, ProbeDone) and done.cache == "confirmed"
    assert not any("server/discover" in line for line in done.trace)


def test_a_cached_sse_era_goes_straight_to_the_stream() -> None:
    c = Conversation(
        "http", path="/mcp", sse_path="/sse", cached=EraEntry(era="legacy-sse", revision=None, at=1)
    )
    assert c.method == "GET"
    c.answer_http(200, SSE, b"event: endpoint\ndata: /messages?s=1\n\n", complete=False)
    assert isinstance(c.outcome, ProbeDone) and c.outcome.cache == "confirmed"


def test_a_cached_modern_era_is_confirmed_by_discover() -> None:
    c = Conversation(cached=EraEntry(era="modern", revision=R26, at=1))
    assert c.method == "server/discover"
    c.result(discover_result("2026-07-28"))
    assert isinstance(c.outcome, ProbeDone) and c.outcome.cache == "confirmed"


def test_a_cached_legacy_era_that_fails_is_probed_afresh_modern_first() -> None:
    c = Conversation(cached=EraEntry(era="legacy", revision=R25C, at=1))
    assert c.method == "initialize"
    c.error(-32601, "Method not found")  # a server that became modern-only
    assert c.method == "server/discover"
    c.result(discover_result("2026-07-28"))
    done = c.outcome
    assert isinstance(done, ProbeDone)
    assert (done.era, done.cache) == ("modern", "stale")
    assert any("probing afresh" in line for line in done.trace)


def test_a_cached_legacy_era_answered_with_modern_versions_goes_modern() -> None:
    c = Conversation(cached=EraEntry(era="legacy", revision=R25C, at=1))
    c.error(-32602, "initialize is not supported", {"supported": ["2026-07-28"]})
    assert c.method == "server/discover"
    c.result(discover_result("2026-07-28"))
    assert isinstance(c.outcome, ProbeDone) and c.outcome.cache == "stale"


def test_a_cached_era_whose_server_went_silent_is_probed_afresh_then_fails() -> None:
    c = Conversation(cached=EraEntry(era="legacy", revision=R25C, at=1))
    c.wait_out()
    assert c.method == "server/discover"
    c.wait_out()
    assert c.method == "initialize"
    c.wait_out()
    failed = c.outcome
    assert isinstance(failed, ProbeFailed) and failed.cache == "stale"


def test_a_cached_modern_era_that_turned_legacy_is_stale() -> None:
    c = Conversation(cached=EraEntry(era="modern", revision=R26, at=1))
    c.error(-32601)
    c.result(initialize_result("2025-11-25"))
    assert isinstance(c.outcome, ProbeDone) and (c.outcome.era, c.outcome.cache) == ("legacy", "stale")


def test_a_cached_sse_era_over_stdio_is_ignored() -> None:
    c = Conversation(cached=EraEntry(era="legacy-sse", revision=None, at=1))
    assert c.method == "server/discover"


# ----------------------------------------------------------------------------
# The API's edges
# ----------------------------------------------------------------------------


def test_inputs_before_start_and_of_the_wrong_transport_are_local_errors() -> None:
    probe = EraProbe(CONFIG, transport="stdio")
    with pytest.raises(LocalProtocolError):
        probe.receive(MessageReceived(message={}), 0)
    probe.start(0)
    with pytest.raises(LocalProtocolError):
        probe.start(0)
    with pytest.raises(LocalProtocolError):
        probe.receive(HttpAnswered(token=1, status=200), 0)


def test_inputs_after_the_outcome_are_ignored() -> None:
    c = Conversation()
    c.result(discover_result("2026-07-28"))
    outcome = c.outcome
    c.say({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    c.probe.handle_timer(100)
    c.probe.receive(TransportClosed(), 100)
    assert c.probe.next_actions() == [] and c.probe.outcome == outcome


def test_request_ids_are_unique_strings() -> None:
    c = Conversation(cached=EraEntry(era="legacy", revision=R25C, at=1))
    ids = [c.last_message()["id"]]
    c.wait_out()
    ids.append(c.last_message()["id"])
    c.wait_out()
    ids.append(c.last_message()["id"])
    assert len(set(ids)) == 3 and all(isinstance(i, str) for i in ids)


def test_events_and_outcomes_are_validated_when_built() -> None:
    with pytest.raises(ValueError):
        HttpAnswered(token=1, status=42)
    with pytest.raises(ValueError):
        ProbeDone(era="modern", revision=R25C)
    with pytest.raises(ValueError):
        ProbeDone(era="legacy-sse", revision=None)  # no endpoint
    with pytest.raises(ValueError):
        ProbeConfig(client_info=CLIENT, timeout=0)
    with pytest.raises(ValueError):
        ProbeConfig(client_info=CLIENT, revisions=())
    assert HttpAnswered(token=1, status=200, headers=(("X-A", "b"),)).header("x-a") == "b"


# ----------------------------------------------------------------------------
# The cache
# ----------------------------------------------------------------------------


def test_cache_key_is_stable_and_leaves_secrets_out() -> None:
    base = {"command": "srv", "args": ["--stdio"], "env": {"A": "1", "B": "2"}, "cwd": "/tmp"}
    key = EraCache.key(base)
    assert len(key) == 64
    assert (
        EraCache.key({"cwd": "/tmp", "env": {"B": "2", "A": "1"}, "args": ["--stdio"], "command": "srv"})
        == key
    )
    assert EraCache.key({**base, "auth": {"bearer": "s3cret"}, "name": "x"}) == key
    assert EraCache.key({**base, "env": {"A": "1"}}) != key
    assert EraCache.key({**base, "args": []}) != key
    url = EraCache.key({"url": "https://Example.COM:443/mcp"})
    assert url == EraCache.key({"url": "https://user:pw@example.com/mcp#frag", "headers": {"X-Key": "k"}})
    assert url != EraCache.key({"url": "https://example.com/sse"})
    assert url != EraCache.key({"url": "http://example.com/mcp"})
    with pytest.raises(ValueError):
        EraCache.key({"name": "nothing"})


def test_cache_put_get_invalidate_record_and_bytes() -> None:
    cache = EraCache()
    key = EraCache.key({"command": "srv"})
    assert cache.get(key) is None
    c = Conversation()
    c.result(discover_result("2026-07-28"))
    assert isinstance(c.outcome, ProbeDone)
    entry = cache.put(key, c.outcome, 1000.5)
    assert cache.get(key) == entry == EraEntry(era="modern", revision=R26, at=1000.5)
    again = EraCache.from_bytes(cache.to_bytes())
    assert again.items() == cache.items()
    assert cache.invalidate(key) and not cache.invalidate(key)
    cache.record(key, c.outcome, 2000)
    assert key in cache
    cache.record(key, ProbeFailed(reason="x"), 2001)
    assert key not in cache


def test_cache_is_bounded_and_drops_the_oldest() -> None:
    cache = EraCache(max_entries=2)
    keys = [EraCache.key({"command": f"srv{i}"}) for i in range(3)]
    for i, key in enumerate(keys):
        cache.put(key, EraEntry(era="legacy", revision=R25C, at=0), now=float(i))
    assert len(cache) == 2 and keys[0] not in cache


@pytest.mark.parametrize(
    "data",
    [b"", b"garbage", b"[]", b'{"format": 2, "eras": {}}', b'{"format": 1, "eras": []}', b"\xff\xfe"],
)
def test_corrupt_cache_bytes_give_an_empty_cache(data: bytes) -> None:
    assert len(EraCache.from_bytes(data)) == 0


def test_a_bad_entry_is_skipped_alone() -> None:
    good = EraCache.key({"command": "a"})
    doc = {
        "format": 1,
        "eras": {
            good: {"era": "legacy", "revision": "2025-06-18", "at": 5},
            EraCache.key({"command": "b"}): {"era": "modern", "revision": "2025-06-18", "at": 5},
            "not-a-key": {"era": "legacy", "revision": "2025-06-18", "at": 5},
            EraCache.key({"command": "c"}): {"era": "legacy-sse", "revision": None, "at": "now"},
        },
    }
    cache = EraCache.from_bytes(orjson.dumps(doc))
    assert [k for k, _ in cache.items()] == [good]


# ----------------------------------------------------------------------------
# The cache's file
# ----------------------------------------------------------------------------


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "state"


def test_the_cache_file_is_written_owner_only_and_read_back(state_dir: Path) -> None:
    path = era_cache_path(state_dir)
    assert path.name == "upstream-eras.json"
    assert len(load_era_cache(path)) == 0  # missing: empty
    cache = EraCache()
    key = EraCache.key({"url": "http://localhost:3000/mcp"})
    cache.put(key, EraEntry(era="legacy", revision=R25C, at=0), 1.0)
    save_era_cache(path, cache)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    assert load_era_cache(path).items() == cache.items()
    cache.invalidate(key)
    save_era_cache(path, cache)
    assert len(load_era_cache(path)) == 0
    assert sorted(os.listdir(state_dir)) == ["upstream-eras.json"]  # no temporary file left behind


def test_a_probe_keeps_the_entries_others_saved_while_it_ran(state_dir: Path) -> None:
    """Eight servers probed at once each add their entry: none saves the copy it read before its probe."""
    path = era_cache_path(state_dir)
    done = ProbeDone(era="legacy", revision=R25C)
    before = load_era_cache(path)  # what a probe read when it started
    record_outcome(path, EraCache.key({"command": "b"}), done, 1.0)  # another probe ended meanwhile
    record_outcome(path, EraCache.key({"command": "a"}), done, 2.0)  # this one ends
    assert len(before) == 0 and len(load_era_cache(path)) == 2

    keys = [EraCache.key({"command": f"server-{n}"}) for n in range(8)]
    start = threading.Barrier(len(keys))

    def probe(key: str) -> None:
        start.wait()
        for round_ in range(20):
            record_outcome(path, key, done, float(round_))

    threads = [threading.Thread(target=probe, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    kept = {key for key, _ in load_era_cache(path).items()}
    assert set(keys) <= kept, sorted(set(keys) - kept)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    update_era_cache(path, lambda cache: cache.invalidate(keys[0]))  # forgetting one keeps the rest
    assert {key for key, _ in load_era_cache(path).items()} == kept - {keys[0]}


def test_a_corrupt_cache_file_reads_as_empty(state_dir: Path) -> None:
    state_dir.mkdir()
    path = era_cache_path(state_dir)
    path.write_bytes(b'{"format": 1, "eras": {"x": ')
    assert len(load_era_cache(path)) == 0
    path.unlink()
    path.mkdir()  # not even a file
    assert len(load_era_cache(path)) == 0


# ----------------------------------------------------------------------------
# The doc
# ----------------------------------------------------------------------------


def test_the_spec_table_matches_the_machine() -> None:
    text = (Path(__file__).resolve().parents[2] / "spec" / "era-probe.md").read_text()
    start = text.index("<!-- transitions: generated by mcpx.core.probe.transition_table() -->\n")
    end = text.index("<!-- end transitions -->")
    table = text[start:end].split("\n", 1)[1]
    assert table == transition_table(), "regenerate the table in spec/era-probe.md from transition_table()"


# ----------------------------------------------------------------------------
# A long start timeout does not hold a silent legacy server back
# ----------------------------------------------------------------------------


def test_a_legacy_stdio_server_silent_on_discover_is_offered_initialize_after_the_silence_not_the_timeout() -> (
    None
):
    """``pool.startTimeout`` bounds each wait; a ``server/discover`` nobody answers is given up after 5 s."""
    c = Conversation(config=dataclasses.replace(CONFIG, timeout=60.0))
    assert c.method == "server/discover"
    c.wait_out()
    assert c.now == 5.0  # discover_silence, not the 60 s the other waits get
    assert c.method == "initialize"
    assert c.probe.get_timer() == 65.0
    c.result(initialize_result("2025-06-18"))
    outcome = c.outcome
    assert isinstance(outcome, ProbeDone) and outcome.era == "legacy"


def test_a_modern_server_slow_to_start_answers_the_second_discover_after_refusing_initialize() -> None:
    """Silent for the whole discover wait (still starting), then up: its era is still found."""
    c = Conversation(config=dataclasses.replace(CONFIG, timeout=60.0))
    first = c.last_message()
    c.wait_out()
    assert c.method == "initialize"
    # Up at last: it answers the first discover (too late: ignored), then refuses initialize.
    c.say({"jsonrpc": "2.0", "id": first["id"], "result": discover_result("2026-07-28")})
    assert c.probe.outcome is None
    c.error(-32022, "unsupported", {"supported": ["2026-07-28"]})
    assert c.method == "server/discover"
    c.result(discover_result("2026-07-28"))
    outcome = c.outcome
    assert isinstance(outcome, ProbeDone) and outcome.era == "modern"


def test_an_http_servers_discover_waits_the_whole_timeout() -> None:
    """Over HTTP silence is a slow server, not one that ignores the method: the whole timeout."""
    c = Conversation(transport="http", config=dataclasses.replace(CONFIG, timeout=60.0))
    assert c.probe.get_timer() == 60.0
