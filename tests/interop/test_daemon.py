"""The daemon end to end: /v1 and /mcp on one listener, over a pool of real upstream processes.

The daemon runs in a thread on loopback with a temporary state directory and
mcpx's demo server as its stdio upstream (the built-in default).  /v1 is
driven with the standard library's HTTP client; /mcp with mcpx's own client
in both eras, and every frame either side sends goes through the strict
schema sweep (the client's) — the daemon's answers are checked by the client
tests' assertions on their content.  The CLI test runs the newcomer's path:
``mcpx daemon``, then ``mcpx call demo echo --arg text=hi``.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import orjson
import pytest

from mcpx.client import McpCallError, connect_http, connect_stdio
from mcpx.config import parse_config
from mcpx.core import Revision
from tests.interop._daemon_thread import DaemonThread

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(90)


class Daemon(DaemonThread):
    def __init__(self, state: Path, home: Path) -> None:
        environ = {"MCPX_STATE": str(state), "MCPX_TRANSPORT_PORT": "0", "HOME": str(home)}
        self.config = parse_config(
            None,
            format=None,
            origin=None,
            environ=environ,
            flags={},
            flag_origins={},
            home=str(home),
            found=False,
        )
        super().__init__(self.config)
        self.base = self.mcp.rsplit("/", 1)[0]

    def request(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
        url = urlsplit(self.base)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        payload = raw if raw is not None else (orjson.dumps(body) if body is not None else None)
        headers = {"content-type": "application/json"} if payload is not None else {}
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        return response.status, orjson.loads(data) if data else None


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    root = tmp_path_factory.mktemp("daemon")
    running = Daemon(root / "state", root)
    yield running
    running.close()
    assert not (root / "state" / "daemon.json").exists()  # removed when it stops


def direct_echo(text: str) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with connect_stdio([sys.executable, "-m", "mcpx", "demo"], modern=True) as client:
            return dict(await client.call_tool("echo", {"text": text}))

    return anyio.run(main)


def test_v1_call_returns_the_upstreams_result_verbatim(daemon: Daemon) -> None:
    status, answer = daemon.request(
        "POST", "/v1/call", {"server": "demo", "tool": "echo", "arguments": {"text": "hi"}}
    )
    assert status == 200 and answer["server"] == "demo" and answer["tool"] == "echo"
    assert answer["result"] == direct_echo("hi")  # byte-for-byte what the upstream says to mcpx directly
    status, answer = daemon.request("POST", "/v1/call", {"server": "demo", "tool": "fail", "arguments": {}})
    assert (
        status == 200 and answer["result"]["isError"] is True
    )  # a tool error is a result, not an HTTP error


def test_v1_call_declares_no_capabilities_so_the_upstream_asks_nobody(daemon: Daemon) -> None:
    """/v1/call is a call without a host (spec/gateway.md §11): the router carries it, and nobody can be asked.

    A 2026-07-28 upstream is told the call declares no capabilities, so it
    refuses to ask and says why; the daemon goes on answering.
    """
    status, answer = daemon.request(
        "POST", "/v1/call", {"server": "demo", "tool": "ask_name", "arguments": {}}
    )
    assert status == 502 and answer["error"]["data"]["server"] == "demo", answer
    refused = answer["error"]["data"]["jsonrpc"]
    assert "elicitation" in refused["data"]["requiredCapabilities"], answer
    status, answer = daemon.request(
        "POST", "/v1/call", {"server": "demo", "tool": "echo", "arguments": {"text": "on"}}
    )
    assert status == 200 and answer["result"]["content"][0]["text"] == "on"


def test_v1_errors_are_json_with_a_stable_code_and_what_to_do(daemon: Daemon) -> None:
    status, answer = daemon.request("POST", "/v1/call", {"server": "nope", "tool": "echo"})
    assert status == 404 and answer["error"]["code"] == "unknown-server"
    assert "configured: demo" in answer["error"]["message"]
    status, answer = daemon.request("POST", "/v1/call", raw=b"{not json")
    assert status == 400 and answer["error"]["code"] == "bad-json"
    status, answer = daemon.request("GET", "/v1/call")
    assert status == 405 and answer["error"]["code"] == "method-not-allowed"
    status, answer = daemon.request("GET", "/v1/nothing")
    assert status == 404 and "/v1/call" in answer["error"]["message"]
    status, answer = daemon.request("POST", "/v1/call", {"server": "demo", "tool": "no_such_tool"})
    assert status == 502 and answer["error"]["data"]["server"] == "demo"  # the upstream's own -32602, carried
    assert answer["error"]["data"]["jsonrpc"]["code"] == -32602


def test_v1_lists_servers_tools_protocol_and_describes_itself(daemon: Daemon) -> None:
    status, health = daemon.request("GET", "/health")
    assert status == 200 and health["status"] == "ok"
    status, listed = daemon.request("GET", "/v1/servers")
    assert status == 200 and [s["name"] for s in listed["servers"]] == ["demo"]
    status, tools = daemon.request("GET", "/v1/tools?server=demo")
    assert status == 200 and {"echo", "add", "fail"} <= {t["name"] for t in tools["tools"]}
    assert all(t["server"] == "demo" and "inputSchema" in t for t in tools["tools"])
    status, protocol = daemon.request("GET", "/v1/protocol")
    assert status == 200 and protocol["revisions"][0] == "2024-11-05" and protocol["newest"] == "2026-07-28"
    status, api = daemon.request("GET", "/openapi.json")
    assert status == 200 and {"/v1/call", "/v1/servers", "/v1/tools"} <= set(api["paths"])


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"])
def test_mcp_hosts_of_every_revision_reach_the_upstream_through_the_gateway(
    daemon: Daemon, revision: str
) -> None:
    rev = Revision(revision)

    async def main() -> None:
        async with connect_http(
            daemon.mcp, modern=rev.is_modern, offer=None if rev.is_modern else rev
        ) as client:
            names = [t["name"] for t in await client.list_tools()]
            assert names == ["mcpx_call", "mcpx_servers", "mcpx_search", "mcpx_describe"]
            called = await client.call_tool(
                "mcpx_call", {"server": "demo", "tool": "echo", "arguments": {"text": revision}}
            )
            assert called["content"] == [{"type": "text", "text": revision}] and not called.get("isError")
            found = await client.call_tool("mcpx_search", {"query": "echo"})
            assert "echo" in orjson.dumps(found).decode()
            prompts = [p["name"] for p in await client.list_all("prompts/list", "prompts")]
            assert "demo_greet" in prompts
            resources = [r["uri"] for r in await client.list_all("resources/list", "resources")]
            readme = next(u for u in resources if u.startswith("mcpx://demo/"))
            read = await client.request("resources/read", {"uri": readme})
            assert read["contents"][0]["uri"] == readme  # rewritten to a URI /mcp can read again
            with pytest.raises(McpCallError) as refused:
                await client.request("resources/read", {"uri": "mcpx://nowhere/x"})
            assert refused.value.code in (-32002, -32602)

    anyio.run(main)


def test_many_hosts_with_the_same_ids_get_their_own_answers(daemon: Daemon) -> None:
    async def host(n: int, results: dict[int, str]) -> None:
        async with connect_http(daemon.mcp, modern=n % 2 == 0) as client:  # every client starts at id 1
            for k in range(3):
                called = await client.call_tool(
                    "mcpx_call", {"server": "demo", "tool": "echo", "arguments": {"text": f"{n}-{k}"}}
                )
                results[n * 10 + k] = called["content"][0]["text"]

    async def main() -> None:
        results: dict[int, str] = {}
        async with anyio.create_task_group() as tg:
            for n in range(8):
                tg.start_soon(host, n, results)
        assert results == {n * 10 + k: f"{n}-{k}" for n in range(8) for k in range(3)}

    anyio.run(main)


def test_the_newcomers_path_on_the_command_line(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "MCPX_STATE": str(tmp_path / "state")}
    env.pop("MCPX_CONFIG", None)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "daemon", "--port", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    listening = threading.Event()
    said: list[bytes] = []

    def drain() -> None:  # the daemon's stderr, kept and read to its end so that it never blocks
        assert daemon.stderr is not None
        for line in daemon.stderr:
            said.append(line)
            if b"ops API at" in line:  # said once daemon.json is written
                listening.set()
        listening.set()  # it ended: the assertion below says why

    threading.Thread(target=drain, daemon=True).start()
    try:
        assert listening.wait(30), b"".join(said).decode(errors="replace")
        assert (tmp_path / "state" / "daemon.json").exists(), b"".join(said).decode(errors="replace")
        called = subprocess.run(
            [sys.executable, "-m", "mcpx", "call", "demo", "echo", "--arg", "text=hi", "--json"],
            env=env,
            check=False,
            capture_output=True,
            timeout=60,
            cwd=ROOT,
        )
        assert called.returncode == 0, called.stderr
        assert orjson.loads(called.stdout)["content"] == [{"type": "text", "text": "hi"}]
        missing = subprocess.run(
            [sys.executable, "-m", "mcpx", "call", "nope", "echo"],
            env=env,
            check=False,
            capture_output=True,
            timeout=60,
            cwd=ROOT,
        )
        assert missing.returncode == 2 and b"configured: demo" in missing.stderr
    finally:
        daemon.terminate()
        daemon.wait(20)
    assert not (tmp_path / "state" / "daemon.json").exists()
    gone = subprocess.run(
        [sys.executable, "-m", "mcpx", "call", "demo", "echo"],
        env=env,
        check=False,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    assert gone.returncode == 2 and b"start one with `mcpx daemon`" in gone.stderr
