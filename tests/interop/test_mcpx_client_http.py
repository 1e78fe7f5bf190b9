"""``mcpx.client.connect_http`` against real Streamable HTTP servers on loopback.

mcpx's demo server (``mcpx demo --http 0``) in the legacy session shape and
per-request 2026-07-28, with a question the server asks answered through the
same resolver either way, and the official Python SDK's Streamable HTTP
server.  A small recording server (``http.server`` on a thread) checks how a
connection ends: a legacy session is ``DELETE``d, whether the connection closed
normally or the scope around it was cancelled; a 2026-07-28 one has nothing to end.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from mcpx.client import McpCallError, connect_http
from mcpx.core import Revision
from tests.conformance.http_peer import start_http_server, stop_http_server

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["asyncio", "trio"])
def demo_url(request: pytest.FixtureRequest) -> Iterator[str]:
    proc, url = start_http_server(request.param)
    yield url
    stop_http_server(proc)


async def answer(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
    assert method == "elicitation/create", method
    return {"action": "accept", "content": {"name": "Ada"}}


@pytest.mark.parametrize("revision", ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"])
def test_connect_http_talks_to_mcpx_demo(demo_url: str, revision: str) -> None:
    modern = revision == "2026-07-28"

    async def main() -> None:
        async with connect_http(
            demo_url,
            modern=modern,
            offer=None if modern else Revision(revision),
            capabilities={"elicitation": {}},
            resolver=answer,
        ) as client:
            assert client.revision == Revision(revision)
            assert "echo" in {t["name"] for t in await client.list_tools()}
            echoed = await client.call_tool("echo", {"text": "over http"})
            assert echoed["content"][0]["text"] == "over http"
            if revision != "2025-03-26":
                assert (await client.call_tool("ask_name"))["content"][0]["text"] == "Hello, Ada!"
            with pytest.raises(McpCallError) as unknown:
                await client.call_tool("no_such_tool")
            assert unknown.value.code == -32602

    anyio.run(main)


def test_max_rounds_reaches_the_session_through_connect_http(demo_url: str) -> None:
    async def main() -> None:
        async with connect_http(
            demo_url, modern=True, capabilities={"elicitation": {}}, resolver=answer, max_rounds=0
        ) as client:
            with pytest.raises(McpCallError, match="more than 0 times in one call"):
                await client.call_tool("ask_name")
            assert (await client.call_tool("echo", {"text": "next"}))["content"][0]["text"] == "next"

    anyio.run(main)


def test_cancelling_an_http_call_frees_the_server(demo_url: str) -> None:
    async def main() -> None:
        async with connect_http(demo_url, modern=True) as client:
            with anyio.move_on_after(0.5):
                await client.call_tool("sleep", {"seconds": 30})
            with anyio.fail_after(10):
                assert (await client.call_tool("echo", {"text": "next"}))["content"][0]["text"] == "next"

    anyio.run(main)


def test_connect_http_talks_to_the_official_sdk_server() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "sdk_http_echo_server.py"), "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert proc.stdout is not None
        url = None
        for _ in range(200):
            line = proc.stdout.readline().decode()
            if "Uvicorn running on http://" in line:  # uvicorn names the bound address; the SDK serves /mcp
                url = line[line.index("http://") :].split()[0].rstrip("/") + "/mcp"
                break
        assert url, "the SDK server did not print its URL"

        async def main() -> None:
            for modern in (False, True):
                async with connect_http(url, modern=modern) as client:
                    echoed = await client.call_tool("echo", {"text": "sdk"})
                    assert echoed["content"][0]["text"] == "sdk"

        anyio.run(main)
    finally:
        proc.terminate()
        proc.wait(10)


def test_mcpx_call_takes_a_url(demo_url: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcpx",
            "call",
            "echo",
            "--arg",
            "text=by url",
            "--mcp-spec",
            "2026-07-28",
            demo_url,
        ],
        check=False,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["result"]["content"][0]["text"] == "by url"


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_the_conformance_client_runs_a_scenario_and_refuses_what_it_cannot(
    demo_url: str, version: str
) -> None:
    env = {**os.environ, "MCP_CONFORMANCE_PROTOCOL_VERSION": version}
    command = [sys.executable, "-m", "mcpx", "conformance-client", demo_url]
    ok = subprocess.run(
        command,
        env={**env, "MCP_CONFORMANCE_SCENARIO": "initialize"},
        check=False,
        capture_output=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    auth = subprocess.run(
        command,
        env={**env, "MCP_CONFORMANCE_SCENARIO": "auth/metadata-default"},
        check=False,
        capture_output=True,
        timeout=60,
    )
    assert auth.returncode == 1 and b"not supported" in auth.stderr


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_forgotten_session_is_replaced_and_the_refused_call_sent_again(backend: str) -> None:
    """The server restarts and forgets every session: the next call still gets its answer."""
    proc, url = start_http_server("asyncio")
    port = url.split(":")[2].split("/")[0]
    procs = [proc]

    async def main() -> None:
        async with connect_http(url, offer=Revision.V2025_11_25) as client:
            first = client.session
            assert (await client.call_tool("echo", {"text": "one"}))["content"][0]["text"] == "one"
            await anyio.to_thread.run_sync(stop_http_server, proc)
            again, _ = await anyio.to_thread.run_sync(start_http_server, "asyncio", "--http", port)
            procs.append(again)
            # The POST carries the old session id; the new server answers 404 and never runs the tool.
            assert (await client.call_tool("echo", {"text": "two"}))["content"][0]["text"] == "two"
            assert client.session is not first and client.revision == Revision.V2025_11_25
            assert (await client.call_tool("echo", {"text": "three"}))["content"][0]["text"] == "three"

    try:
        anyio.run(main, backend=backend)
    finally:
        for p in procs:
            stop_http_server(p)


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "2025-11-25"])
def test_two_clients_with_rounds_open_at_once_each_get_their_own_answer(demo_url: str, modern: bool) -> None:
    """Two calls asking at the same time, each on its own session: neither answer wakes the other call."""

    def answering(name: str, both_asked: anyio.Event, asked: list[str]) -> Any:
        async def resolve(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
            asked.append(name)
            if len(asked) == 2:
                both_asked.set()
            with anyio.fail_after(20):
                await both_asked.wait()  # both rounds are open before either is answered
            return {"action": "accept", "content": {"name": name}}

        return resolve

    async def main() -> None:
        both_asked, asked = anyio.Event(), []
        results: dict[str, str] = {}

        async def one(name: str) -> None:
            async with connect_http(
                demo_url,
                modern=modern,
                capabilities={"elicitation": {}},
                resolver=answering(name, both_asked, asked),
            ) as client:
                result = await client.call_tool("ask_name", {})
                results[name] = result["content"][0]["text"]

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "Ada")
            tg.start_soon(one, "Grace")
        assert "Ada" in results["Ada"] and "Grace" in results["Grace"], results

    anyio.run(main)


# -- how a connection ends -----------------------------------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    """Just enough Streamable HTTP: a legacy session (its GET stream held open until the session
    is deleted) or 2026-07-28 POSTs; every request's method and headers are kept."""

    protocol_version = "HTTP/1.1"
    server: _RecordingServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: Any = None, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if not self.server.keep_alive:
            self.send_header("Connection", "close")
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self.server.seen.append((self.command, dict(self.headers.items())))
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in message:
            self._reply(202)
            return
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if message["method"] == "initialize":
            reply["result"] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "recorder", "version": "1"},
            }
            self._reply(200, reply, {"Mcp-Session-Id": self.server.session_id})
            return
        if message["method"] == "tools/call":  # never answered: the call is in flight until it is cancelled
            self.server.calls.release()
            self.server.stopping.wait(30)
            self.close_connection = True
            return
        assert message["method"] == "tools/list", message
        reply["result"] = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        if self.headers.get("MCP-Protocol-Version") == "2026-07-28":
            reply["result"] |= {"resultType": "complete", "ttlMs": 0, "cacheScope": "public"}
        self._reply(200, reply)

    def do_GET(self) -> None:
        self.server.seen.append((self.command, dict(self.headers.items())))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.flush()
        self.server.streaming.set()
        self.server.deleted.wait(30)  # the session's stream lasts as long as the session
        self.close_connection = True

    def do_DELETE(self) -> None:
        self.server.seen.append((self.command, dict(self.headers.items())))
        self.server.deleted.set()
        if self.server.answer_delete:
            self._reply(200)
        else:  # gone quiet: neither an answer nor the end of the connection
            self.server.stopping.wait(30)
            self.close_connection = True


class _RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Recorder)
        self.session_id = secrets.token_urlsafe(12)
        self.keep_alive = True  # False: every answer closes its connection, so none waits in the pool
        self.answer_delete = True
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.streaming = threading.Event()  # the session's GET stream is open
        self.deleted = threading.Event()
        self.stopping = threading.Event()
        self.calls = threading.Semaphore(0)  # released once per tools/call received

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/mcp"

    def deletes(self) -> list[dict[str, str]]:
        return [headers for method, headers in self.seen if method == "DELETE"]


@pytest.fixture
def recorder() -> Iterator[_RecordingServer]:
    server = _RecordingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.deleted.set()
    server.stopping.set()
    server.shutdown()
    server.server_close()
    thread.join(5)


def _open_and_end(server: _RecordingServer, backend: str, ending: str, *, modern: bool = False) -> float:
    """Open ``connect_http`` in a task group, then leave it (``normal``) or cancel the group
    (``cancelled``, as a daemon shutting down cancels its pool's); how long the ending took (s)."""
    took: list[float] = []

    async def main() -> None:
        opened = anyio.Event()

        async def use() -> None:
            async with connect_http(server.url, modern=modern, offer=Revision.V2025_11_25) as client:
                if not modern:
                    await anyio.to_thread.run_sync(server.streaming.wait, 10)  # the session's GET stream
                assert [t["name"] for t in await client.list_tools()] == ["echo"]
                opened.set()
                if ending == "normal":
                    took.append(time.monotonic())
                    return
                await anyio.sleep_forever()

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(use)
                await opened.wait()
                if ending == "cancelled":
                    took.append(time.monotonic())
                    tg.cancel_scope.cancel()
        took.append(time.monotonic())

    anyio.run(main, backend=backend)
    return took[1] - took[0]


@pytest.mark.parametrize("keep_alive", [True, False], ids=["pooled-connections", "no-pooled-connection"])
@pytest.mark.parametrize("ending", ["normal", "cancelled"])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_closing_a_legacy_connection_deletes_its_session(
    recorder: _RecordingServer, backend: str, ending: str, keep_alive: bool
) -> None:
    """However the scope around ``connect_http`` ends, the session is ``DELETE``d, promptly.

    Cancelled, the tasks reading the connection's sockets are gone with the
    scope: the close must neither wait for an answer on a pooled connection
    nobody reads any more nor open the DELETE's connection in that group.
    """
    recorder.keep_alive = keep_alive
    took = _open_and_end(recorder, backend, ending)
    deletes = recorder.deletes()
    assert len(deletes) == 1, [method for method, _ in recorder.seen]
    assert deletes[0].get("Mcp-Session-Id") == recorder.session_id
    assert deletes[0].get("MCP-Protocol-Version") == "2025-11-25"
    assert took < 3, f"closing took {took:.1f}s"  # a hang check: the server answers the DELETE at once


@pytest.mark.parametrize("ending", ["normal", "cancelled"])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_server_that_never_answers_the_delete_delays_the_close_briefly(
    recorder: _RecordingServer, backend: str, ending: str
) -> None:
    recorder.answer_delete = False
    took = _open_and_end(recorder, backend, ending)
    assert len(recorder.deletes()) == 1
    assert took < 4, f"closing took {took:.1f}s"  # mcpx waits 2 s for the answer


@pytest.mark.parametrize("ending", ["normal", "cancelled"])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_closing_a_modern_connection_sends_no_delete(
    recorder: _RecordingServer, backend: str, ending: str
) -> None:
    took = _open_and_end(recorder, backend, ending, modern=True)
    assert [method for method, _ in recorder.seen] == ["POST"]
    assert took < 3, f"closing took {took:.1f}s"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_call_cancelled_by_the_same_shutdown_as_its_connection_ends_quietly(
    recorder: _RecordingServer, backend: str
) -> None:
    """A daemon shutting down cancels the callers and the connection at once: no error escapes either."""

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            opened = anyio.Event()

            async def call(client: Any) -> None:
                await client.call_tool("echo", {})

            async def use() -> None:
                async with connect_http(recorder.url, offer=Revision.V2025_11_25) as client:
                    await anyio.to_thread.run_sync(recorder.streaming.wait, 10)
                    for _ in range(4):
                        tg.start_soon(call, client)
                    for _ in range(4):  # each call has reached the server: all four are in flight
                        assert await anyio.to_thread.run_sync(recorder.calls.acquire, True, 10)
                    opened.set()
                    await anyio.sleep_forever()

            tg.start_soon(use)
            with anyio.fail_after(20):
                await opened.wait()
            tg.cancel_scope.cancel()

    anyio.run(main, backend=backend)
    assert len(recorder.deletes()) == 1
