"""``mcpx.client.connect_http`` against real Streamable HTTP servers on loopback.

mcpx's demo server (``mcpx demo --http 0``) in the legacy session shape and
per-request 2026-07-28, with a question the server asks answered through the
same resolver either way, and the official Python SDK's Streamable HTTP
server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
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
            with pytest.raises(McpCallError, match="more than 0 rounds"):
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
