"""Pass-through end to end (spec/gateway.md §2): a real daemon, a real upstream, hosts of both eras.

The daemon runs in a thread on loopback with ``mcpx demo --profile
conformance`` (the official suite's fixture tools) as its one upstream,
offered in pass-through mode and scoped per host connection, as
scripts/conformance.sh runs it: a 2026-07-28 request is its own scope, so a
round a test leaves unanswered holds only its own instance, and a question
is always attributable to the one call that caused it.  2026-07-28 hosts are
driven with raw HTTP, so every header and every key on the wire is the
test's own; legacy hosts with mcpx's client, whose resolver answers the
questions the gateway relays.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import http.client
import itertools
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import orjson
import pytest

from mcpx.client import Client, McpCallError, connect_http
from mcpx.config import parse_config
from mcpx.core import Revision
from mcpx.core.client_session import ServerNotification
from tests.interop._daemon_process import watch_events
from tests.interop._daemon_thread import DaemonThread

pytestmark = pytest.mark.timeout(120)

MODERN = "2026-07-28"
EVERYTHING = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}
_ids = itertools.count(1)


class Daemon(DaemonThread):
    """``run_daemon`` in a thread, passing ``mcpx demo --profile conformance`` through."""

    def __init__(self, root: Path, *, scope: str = "connection", transport: str = "") -> None:
        command = orjson.dumps(sys.executable).decode()
        config = f"""
[servers.conformance]
command = {command}
args = ["-m", "mcpx", "demo", "--profile", "conformance"]
scope = "{scope}"

[mcp]
passthrough = ["conformance"]

[transport]
port = 0
{transport}
"""
        environ = {"MCPX_STATE": str(root / "state"), "HOME": str(root)}
        self.config = parse_config(config, environ=environ, home=str(root))
        super().__init__(self.config)

    def post(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        capabilities: Mapping[str, Any] = EVERYTHING,
        headers: Mapping[str, str] | None = None,
        timeout: float = 60,
    ) -> tuple[int, dict[str, Any]]:
        """``timeout`` bounds the whole answer (``TimeoutError``), keep-alive comments or not."""
        pool = concurrent.futures.ThreadPoolExecutor(1)  # not `with`: that would wait for a hung answer
        try:
            return pool.submit(self._post, method, params, capabilities, headers).result(timeout=timeout)
        finally:
            pool.shutdown(wait=False)

    def _request(
        self,
        method: str,
        params: Mapping[str, Any],
        capabilities: Mapping[str, Any],
        headers: Mapping[str, str] | None,
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """One 2026-07-28 request as a host spells it: its JSON-RPC body and its HTTP headers."""
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "passthrough-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": dict(capabilities),
        }
        body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": {**params, "_meta": meta}}
        sent = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MODERN,
            "mcp-method": method,
        }
        if "name" in params or "taskId" in params:  # tasks/* name their task in Mcp-Name
            sent["mcp-name"] = str(params.get("name", params.get("taskId")))
        sent.update(headers or {})
        return body, sent

    def _post(
        self,
        method: str,
        params: Mapping[str, Any],
        capabilities: Mapping[str, Any],
        headers: Mapping[str, str] | None,
    ) -> tuple[int, dict[str, Any]]:
        """One 2026-07-28 request; the HTTP status and the JSON-RPC response."""
        body, sent = self._request(method, params, capabilities, headers)
        url = urlsplit(self.mcp)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
        try:
            conn.request("POST", url.path, body=orjson.dumps(body), headers=sent)
            response = conn.getresponse()
            data = response.read()
            kind = response.getheader("content-type") or ""
        finally:
            conn.close()
        if kind.startswith("text/event-stream"):  # the answer is the last data line that is a response
            frames = [orjson.loads(line[5:]) for line in data.splitlines() if line.startswith(b"data:")]
            data = orjson.dumps(next(f for f in reversed(frames) if "id" in f))
        answer = orjson.loads(data)
        assert answer["id"] == body["id"]
        return response.status, answer

    @contextlib.contextmanager
    def listen(
        self, notifications: Mapping[str, Any], *, capabilities: Mapping[str, Any] = EVERYTHING
    ) -> Iterator[Iterator[dict[str, Any]]]:
        """A ``subscriptions/listen`` stream on a connection of its own: its JSON-RPC frames as they arrive.

        Each frame waits for its line (60 s at most, then ``TimeoutError``);
        leaving the block closes the stream.
        """
        body, sent = self._request(
            "subscriptions/listen", {"notifications": dict(notifications)}, capabilities, None
        )
        url = urlsplit(self.mcp)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        try:
            conn.request("POST", url.path, body=orjson.dumps(body), headers=sent)
            response = conn.getresponse()
            assert response.status == 200, response.read()

            def frames() -> Iterator[dict[str, Any]]:
                while line := response.readline():
                    if line.startswith(b"data:") and line[5:].strip():
                        yield orjson.loads(line[5:])

            yield frames()
        finally:
            conn.close()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    running = Daemon(tmp_path_factory.mktemp("passthrough"))
    yield running
    running.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """The same, with one upstream instance for every host (``scope = "shared"``, the default)."""
    running = Daemon(tmp_path_factory.mktemp("shared"), scope="shared")
    yield running
    running.close()


def call(name: str, arguments: Mapping[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    return {"name": name, "arguments": dict(arguments or {}), **more}


def text_of(result: Mapping[str, Any]) -> str:
    return str(result["content"][0]["text"])


def answer_the_greeting(daemon: Daemon, request_state: str) -> str:
    """Retry ``test_input_required_result_capabilities`` with its sampling question answered; the text."""
    sampled = {"role": "assistant", "content": {"type": "text", "text": "hey"}, "model": "m"}
    params = call(
        "test_input_required_result_capabilities",
        inputResponses={"greeting": sampled},
        requestState=request_state,
    )
    status, done = daemon.post("tools/call", params, capabilities={"sampling": {}})
    assert status == 200, done
    return text_of(done["result"])


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


# -- Mcp-Param-* headers of a pass-through tool's x-mcp-header arguments ---------------------


def test_the_mcp_param_headers_of_a_passthrough_tool_are_checked_against_its_arguments(
    daemon: Daemon,
) -> None:
    status, listed = daemon.post("tools/list", {})
    assert status == 200
    tool = next(t for t in listed["result"]["tools"] if t["name"] == "test_x_mcp_header")
    assert (
        tool["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"
    )  # listed as the upstream has it

    status, answer = daemon.post("tools/call", call("test_x_mcp_header", {"region": "Hello"}))
    assert status == 400 and answer["error"]["code"] == -32020  # the argument is there, its header is not
    assert "Mcp-Param-Region" in answer["error"]["message"]
    for bad in ("=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "Goodbye"):
        status, answer = daemon.post(
            "tools/call", call("test_x_mcp_header", {"region": "Hello"}), headers={"mcp-param-region": bad}
        )
        assert status == 400 and answer["error"]["code"] == -32020, bad

    for good in ("Hello", b64("Hello")):
        status, answer = daemon.post(
            "tools/call", call("test_x_mcp_header", {"region": "Hello"}), headers={"mcp-param-region": good}
        )
        assert status == 200 and text_of(answer["result"]) == "region: Hello", good
    # A tool without x-mcp-header arguments asks for no header.
    status, answer = daemon.post("tools/call", call("test_simple_text"))
    assert status == 200 and not answer["result"].get("isError")


def test_mcpx_own_modern_client_sends_the_headers_the_gateway_checks(daemon: Daemon) -> None:
    async def main() -> None:
        async with connect_http(daemon.mcp, modern=True) as client:
            await client.list_tools()  # learns the tool's x-mcp-header mapping
            result = await client.call_tool("test_x_mcp_header", {"region": "Zürich"})
            assert text_of(result) == "region: Zürich"

    anyio.run(main)


# -- an upstream's input round, as the host sees it ------------------------------------------


def test_an_upstream_round_reaches_a_modern_host_whole_and_under_the_upstreams_keys(daemon: Daemon) -> None:
    status, first = daemon.post("tools/call", call("test_input_required_result_multiple_inputs"))
    assert status == 200
    result = first["result"]
    assert result["resultType"] == "input_required"
    asked = result["inputRequests"]
    assert {key: q["method"] for key, q in asked.items()} == {
        "user_name": "elicitation/create",
        "greeting": "sampling/createMessage",
        "client_roots": "roots/list",
    }
    responses = {
        "user_name": {"action": "accept", "content": {"name": "Alice"}},
        "greeting": {
            "role": "assistant",
            "content": {"type": "text", "text": "Hello there!"},
            "model": "test-model",
            "stopReason": "endTurn",
        },
        "client_roots": {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]},
    }
    status, done = daemon.post(
        "tools/call",
        call(
            "test_input_required_result_multiple_inputs",
            inputResponses=responses,
            requestState=result["requestState"],
        ),
    )
    assert status == 200 and done["result"]["resultType"] == "complete"
    assert text_of(done["result"]) == "Got client_roots, greeting, user_name"

    status, one = daemon.post("tools/call", call("test_input_required_result_elicitation"))
    assert list(one["result"]["inputRequests"]) == ["user_name"]  # not a key of mcpx's making


def test_rounds_of_calls_sharing_an_upstream_instance_each_reach_their_own_host(shared: Daemon) -> None:
    # A 2026-07-28 round is the upstream's answer to one call: it belongs to that call's host
    # even while another host's round is open on the same instance.
    status, first = shared.post("tools/call", call("test_input_required_result_elicitation"))
    assert status == 200 and list(first["result"]["inputRequests"]) == ["user_name"]
    status, second = shared.post(
        "tools/call", call("test_input_required_result_capabilities"), capabilities={"sampling": {}}
    )
    assert status == 200 and list(second["result"]["inputRequests"]) == ["greeting"]
    assert answer_the_greeting(shared, second["result"]["requestState"]) == "Got client_roots, greeting"
    status, done = shared.post(
        "tools/call",
        call(
            "test_input_required_result_elicitation",
            inputResponses={"user_name": {"action": "accept", "content": {"name": "Carol"}}},
            requestState=first["result"]["requestState"],
        ),
        timeout=15,
    )
    assert text_of(done["result"]) == "Hello, Carol!"


def test_a_legacy_host_is_asked_each_question_of_the_round(daemon: Daemon) -> None:
    asked: list[str] = []

    async def resolver(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        asked.append(method)
        if method == "elicitation/create":
            return {"action": "accept", "content": {"name": "Bob"}}
        if method == "sampling/createMessage":
            return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
        return {"roots": [{"uri": "file:///r"}]}

    async def main() -> None:
        async with connect_http(
            daemon.mcp, offer=Revision.V2025_11_25, resolver=resolver, capabilities=EVERYTHING
        ) as client:
            result = await client.call_tool("test_input_required_result_multiple_inputs")
            assert text_of(result) == "Got client_roots, greeting, user_name"

    anyio.run(main)
    assert sorted(asked) == ["elicitation/create", "roots/list", "sampling/createMessage"]


# -- the host's capabilities, not mcpx's, reach the upstream ---------------------------------


def test_the_upstream_asks_only_what_the_calling_host_declared(daemon: Daemon) -> None:
    status, first = daemon.post(
        "tools/call", call("test_input_required_result_capabilities"), capabilities={"sampling": {}}
    )
    assert status == 200
    # No elicitation: the host did not declare it.  No roots question either: the host
    # declared none, so mcpx answered the upstream with its own (spec/gateway.md §4).
    assert list(first["result"]["inputRequests"]) == ["greeting"]
    assert answer_the_greeting(daemon, first["result"]["requestState"]) == "Got client_roots, greeting"

    # Another host declaring everything is asked everything.
    status, other = daemon.post("tools/call", call("test_input_required_result_capabilities"))
    assert set(other["result"]["inputRequests"]) == {"user_name", "greeting", "client_roots"}


def test_a_tool_needing_what_the_host_did_not_declare_is_the_upstreams_minus_32021(daemon: Daemon) -> None:
    status, answer = daemon.post("tools/call", call("test_missing_capability"), capabilities={})
    assert status == 400
    error = answer["error"]
    assert error["code"] == -32021
    assert error["data"] == {
        "requiredCapabilities": {"sampling": {}}
    }  # the schema's shape, as the upstream said


# -- list changes are relayed ------------------------------------------------------------------


async def until_heard(client: Client, check: Callable[[ServerNotification], bool]) -> None:
    """Until ``client`` has heard a notification ``check`` accepts (10 s at most)."""
    if any(check(note) for note in client.notifications):
        return
    found = anyio.Event()
    client.on_notification = lambda note: found.set() if check(note) else None
    try:
        with anyio.fail_after(10):
            await found.wait()
    finally:
        client.on_notification = None


def listens_for_tool_changes(note: ServerNotification) -> bool:
    """The server acknowledged a listen stream whose filter has tools list changes."""
    agreed = note.params.get("notifications", {})
    return (
        note.method == "notifications/subscriptions/acknowledged" and agreed.get("toolsListChanged") is True
    )


@pytest.mark.parametrize("host", ["2026-07-28", "2025-11-25"])
def test_an_upstream_list_change_reaches_the_host_and_the_new_tool_is_listed(
    shared: Daemon, host: str
) -> None:
    """A 2026-07-28 host hears it on its listen stream, a legacy one unsolicited (spec/gateway.md §5)."""

    async def main() -> None:
        era: dict[str, Any] = {"modern": True} if host == MODERN else {"offer": Revision(host)}
        async with connect_http(shared.mcp, capabilities=EVERYTHING, **era) as client:
            await client.start_listening()
            await client.list_tools()  # the upstream's instance is running (and listening)
            if host == MODERN:  # the host's listen stream is open, list changes in its filter
                await until_heard(client, listens_for_tool_changes)
            # (A legacy host's changes wait in its session's GET stream, open or not yet.)
            assert text_of(await client.call_tool("test_trigger_tool_change")) == "tool list changed"
            await until_heard(client, lambda note: note.method == "notifications/tools/list_changed")
            assert "test_dynamic_tool" in {tool["name"] for tool in await client.list_tools()}

    anyio.run(main)


# -- tasks: the upstream's task, followed by mcpx, is the host's task ------------------------------

TASKS = {**EVERYTHING, "extensions": {"io.modelcontextprotocol/tasks": {}}}


def until_settled(shared: Daemon, task_id: str, *, stop_at: str | None = None) -> dict[str, Any]:
    """The task's state once it ends (or reaches ``stop_at``), as ``tasks/get`` then answers.

    The task's own ``notifications/tasks`` on a listen stream (its state at
    once, then each change) say when.
    """
    ends = ("completed", "failed", "cancelled", stop_at)
    with shared.listen({"taskIds": [task_id]}, capabilities=TASKS) as frames:
        for frame in frames:
            if frame.get("method") == "notifications/subscriptions/acknowledged":
                assert frame["params"]["notifications"].get("taskIds") == [task_id], frame  # it is followed
            elif frame.get("method") == "notifications/tasks" and frame["params"]["status"] in ends:
                break
        else:
            raise AssertionError(f"the listen stream ended before task {task_id} settled")
    status, got = shared.post("tasks/get", {"taskId": task_id}, capabilities=TASKS)
    assert status == 200, got
    state = got["result"]
    assert state["status"] in ends, state
    return dict(state)


def test_a_required_task_tool_runs_as_a_task_of_mcpx_and_ends_as_the_upstream_task_did(
    shared: Daemon,
) -> None:
    status, created = shared.post("tools/call", {"name": "failing_job", "arguments": {}}, capabilities=TASKS)
    assert status == 200 and created["result"]["resultType"] == "task", created
    state = until_settled(shared, created["result"]["taskId"])
    assert state["status"] == "completed"  # a tool error is a completed task with an isError result
    assert state["result"]["isError"] is True
    assert "failing_job failed" in text_of(state["result"])
    status, created = shared.post(
        "tools/call", {"name": "protocol_error_job", "arguments": {}}, capabilities=TASKS
    )
    state = until_settled(shared, created["result"]["taskId"])
    assert state["status"] == "failed" and "protocol_error_job broke down" in state["error"]["message"]
    # Without the extension the host is told what to declare, by mcpx, before anything runs upstream.
    status, refused = shared.post("tools/call", {"name": "failing_job", "arguments": {}})
    assert status == 400 and refused["error"]["code"] == -32021


def test_the_first_call_of_a_fresh_daemon_is_a_task_when_the_upstream_makes_it_one(tmp_path: Path) -> None:
    """Before mcpx has listed the upstream (its start-up listing races the call), the upstream decides."""
    fresh = Daemon(tmp_path, scope="shared")
    try:
        status, created = fresh.post(
            "tools/call", {"name": "failing_job", "arguments": {}}, capabilities=TASKS
        )
        assert status == 200 and created["result"]["resultType"] == "task", created
        assert until_settled(fresh, created["result"]["taskId"])["status"] == "completed"
    finally:
        fresh.close()


def test_mcpx_call_runs_as_a_task_as_its_execution_says(shared: Daemon) -> None:
    arguments = {"server": "conformance", "tool": "slow_compute", "arguments": {"seconds": 1}}
    status, created = shared.post(
        "tools/call", {"name": "mcpx_call", "arguments": arguments}, capabilities=TASKS
    )
    assert status == 200 and created["result"]["resultType"] == "task", created
    done = until_settled(shared, created["result"]["taskId"])
    assert done["status"] == "completed" and text_of(done["result"]) == "job: computed after 1 s"


def test_v1_call_reaches_a_connection_scoped_server_as_a_connection_of_its_own(daemon: Daemon) -> None:
    """/v1 has no host connection; a connection-scoped server still answers (and its instance goes after)."""
    url = urlsplit(daemon.mcp)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    body = {"server": "conformance", "tool": "test_simple_text", "arguments": {}}
    conn.request("POST", "/v1/call", body=orjson.dumps(body), headers={"content-type": "application/json"})
    response = conn.getresponse()
    answer = orjson.loads(response.read())
    assert response.status == 200, answer
    assert answer["result"]["content"][0]["text"] == "This is a simple text response for testing."


def test_an_upstream_task_waiting_for_input_asks_the_host_through_tasks_get_and_update(
    shared: Daemon,
) -> None:
    status, created = shared.post(
        "tools/call", {"name": "confirm_delete", "arguments": {"filename": "a.txt"}}, capabilities=TASKS
    )
    assert status == 200 and created["result"]["resultType"] == "task", created
    task_id = created["result"]["taskId"]
    waiting = until_settled(shared, task_id, stop_at="input_required")
    assert waiting["status"] == "input_required" and list(waiting["inputRequests"]) == ["confirm"]
    answer = {"action": "accept", "content": {"confirm": True}}
    status, ack = shared.post(
        "tasks/update", {"taskId": task_id, "inputResponses": {"confirm": answer}}, capabilities=TASKS
    )
    assert status == 200 and ack["result"]["resultType"] == "complete"
    done = until_settled(shared, task_id)
    assert done["status"] == "completed" and text_of(done["result"]) == "Deleted a.txt"


# -- SSE polling: a long call's stream is closed and resumed (2025-11-25) --------------------------


class LegacySession:
    """A 2025-11-25 host over Streamable HTTP, by hand: initialize, then POSTs in the session."""

    def __init__(self, daemon: Daemon) -> None:
        self.url = urlsplit(daemon.mcp)
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "legacy-test", "version": "1"},
        }
        response, _ = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        self.headers = {
            "mcp-session-id": response.getheader("mcp-session-id") or "",
            "mcp-protocol-version": "2025-11-25",
        }
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=30)

    def post(self, body: Mapping[str, Any]) -> tuple[http.client.HTTPResponse, bytes]:
        sent = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        conn = self.connection()
        conn.request(
            "POST", self.url.path, body=orjson.dumps(body), headers={**sent, **getattr(self, "headers", {})}
        )
        response = conn.getresponse()
        return response, response.read()

    def answer(self, request_id: int, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """The response to one request, from a JSON body or the event stream."""
        _, data = self.post({"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)})
        return next(m for m in messages(data) if m.get("id") == request_id)


def messages(data: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an HTTP body: one JSON object, or an event stream's data lines."""
    if data.lstrip().startswith(b"{"):
        return [orjson.loads(data)]
    return [
        orjson.loads(line[5:]) for line in data.splitlines() if line.startswith(b"data:") and line[5:].strip()
    ]


def test_a_legacy_hosts_task_runs_as_mcpxs_task_over_the_upstreams_own(shared: Daemon) -> None:
    """2025-11-25 core tasks from the host; the 2026-07-28 upstream's task-only tool still runs."""
    host = LegacySession(shared)
    host.answer(
        1, "tools/list", {}
    )  # mcpx has seen the upstream's tools (a fresh daemon lists them at start)
    created = host.answer(1, "tools/call", {"name": "failing_job", "arguments": {}, "task": {"ttl": 60000}})
    task = created["result"]["task"]
    assert task["status"] in ("working", "completed"), created
    final = host.answer(2, "tasks/result", {"taskId": task["taskId"]})
    assert final["result"]["isError"] is True and "failing_job failed" in text_of(final["result"])


def test_a_long_call_of_a_legacy_host_is_resumed_with_last_event_id(tmp_path: Path) -> None:
    """``transport.ssePollAfter``: the stream ends without the answer; a GET with Last-Event-ID brings it."""
    daemon = Daemon(tmp_path, scope="shared", transport='ssePollAfter = "100ms"')
    try:
        host = LegacySession(daemon)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "test_reconnection"}}
        response, data = host.post(call)
        assert response.getheader("content-type", "").startswith("text/event-stream")
        ids = [line[3:].strip() for line in data.splitlines() if line.startswith(b"id:")]
        assert ids and not [m for m in messages(data) if m.get("id") == 2]  # closed before the answer
        conn = host.connection()
        resume = {**host.headers, "accept": "text/event-stream", "last-event-id": ids[-1].decode()}
        conn.request("GET", host.url.path, headers=resume)
        (answer,) = [m for m in messages(conn.getresponse().read()) if m.get("id") == 2]
        assert text_of(answer["result"]) == "Reconnection test completed"
    finally:
        daemon.close()


def daemon_events(daemon: DaemonThread) -> contextlib.AbstractContextManager[Iterator[tuple[str, Any]]]:
    """``GET /v1/events``, open (its watcher registered): its events (kind, data) as they arrive."""
    return watch_events(daemon.mcp)


def test_in_gateway_mode_an_upstream_list_change_refreshes_what_the_discovery_tools_see(
    tmp_path: Path,
) -> None:
    """Not passed through, a 2026-07-28 upstream's list changes still reach mcpx's cache (its listen stream)."""
    command = orjson.dumps(sys.executable).decode()
    text = f"""
[servers.conformance]
command = {command}
args = ["-m", "mcpx", "demo", "--profile", "conformance"]

[transport]
port = 0
"""
    config = parse_config(text, environ={"MCPX_STATE": str(tmp_path / "state")}, home=str(tmp_path))
    daemon = DaemonThread(config)

    async def main() -> None:
        async with connect_http(daemon.mcp, modern=True) as client:

            async def found() -> list[Any]:
                result = await client.call_tool("mcpx_search", {"query": "test_dynamic_tool"})
                return [t for t in result["structuredContent"]["tools"] if t["name"] == "test_dynamic_tool"]

            assert await found() == []
            with daemon_events(daemon) as events:
                arguments = {"server": "conformance", "tool": "test_trigger_tool_change", "arguments": {}}
                assert text_of(await client.call_tool("mcpx_call", arguments)) == "tool list changed"
                changed = ("list.changed", {"server": "conformance", "kind": "tools"})
                heard = await anyio.to_thread.run_sync(
                    lambda: next((e for e in events if e == changed), None)
                )
                assert heard == changed  # the change reached mcpx: published as it marks its catalog stale
            assert await found()

    try:
        anyio.run(main)
    finally:
        daemon.close()


def test_a_legacy_hosts_connection_scoped_upstream_stops_when_its_session_ends(daemon: Daemon) -> None:
    """``scope = "connection"``: the session's DELETE ends its scope, and the instance it had goes."""
    base = daemon.mcp.rsplit("/", 1)[0]

    def instances() -> dict[str, int]:
        """The pool's instances of the server, by the scope each serves."""
        url = urlsplit(base)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        conn.request("GET", "/v1/servers")
        (server,) = orjson.loads(conn.getresponse().read())["servers"]
        return {str(i["scopeKey"]): int(i["instance"]) for i in server["pool"]["instances"]}

    ours: dict[str, int] = {}

    async def main() -> None:
        before = instances()
        async with connect_http(daemon.mcp, offer=Revision.V2025_11_25) as client:
            await client.call_tool("test_simple_text")
            ours.update(
                {k: n for k, n in instances().items() if k not in before and k.startswith("session:")}
            )
            assert len(ours) == 1

    with watch_events(daemon.mcp) as events:
        anyio.run(main)
        (instance,) = ours.values()
        # Its process has gone, and the pool holds it no more, once /v1/events says it stopped.
        stopped = next(
            data for kind, data in events if kind == "instance.stopped" and data["instance"] == instance
        )
    (scope,) = ours
    assert stopped["reason"] == f"the connection it served ({scope}) closed", stopped
    assert not set(ours) & set(instances())


def test_a_legacy_upstreams_task_only_tool_runs_as_a_core_task_mcpx_asks_for(tmp_path: Path) -> None:
    """A 2025-11-25 upstream runs a ``required`` tool only with ``params.task``: mcpx asks, then waits for it."""
    command = orjson.dumps(sys.executable).decode()
    text = f"""
[servers.legacy]
command = {command}
args = ["-m", "mcpx", "demo", "--profile", "conformance", "--revisions", "2025-11-25"]

[transport]
port = 0
"""
    config = parse_config(text, environ={"MCPX_STATE": str(tmp_path / "state")}, home=str(tmp_path))
    daemon = DaemonThread(config)

    async def main() -> None:
        async with connect_http(daemon.mcp, modern=True) as client:
            arguments = {"server": "legacy", "tool": "failing_job", "arguments": {}}
            result = await client.call_tool("mcpx_call", arguments)
            assert result["isError"] is True and "failing_job failed" in text_of(result)
            arguments = {"server": "legacy", "tool": "protocol_error_job", "arguments": {}}
            with pytest.raises(McpCallError, match="protocol_error_job broke down"):
                await client.call_tool("mcpx_call", arguments)

    try:
        anyio.run(main)
    finally:
        daemon.close()
