"""Per-server auth on the wire: ``connect_http(auth=...)`` against a loopback server that records requests,
and ``type: env`` reaching a spawned server's environment.

The server is a few lines of ``http.server`` speaking just enough Streamable
HTTP (legacy session: initialize with ``Mcp-Session-Id``, ``tools/list``, 405
on the GET stream, DELETE at close; 2026-07-28: one POST per request).  It
keeps the method, target and headers of every request, so each test can say
that the credentials arrived on *every* request of the connection — POST,
GET, DELETE — and that the protocol headers were the binding's, not the
configuration's.  The stdio case spawns a three-line mcpx server whose tool
reads its own environment.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import anyio
import pytest

from mcpx.client import connect_http, connect_stdio
from mcpx.config import parse_auth, parse_config

pytestmark = pytest.mark.timeout(30)

Seen = tuple[str, str, list[tuple[str, str]]]


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _record(self) -> None:
        self.server.seen.append((self.command, self.path, list(self.headers.items())))

    def _reply(
        self, status: int, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self._record()
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in message:
            self._reply(202)
            return
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        method = message["method"]
        if method == "initialize":
            reply["result"] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "recorder", "version": "1"},
            }
            self._reply(200, reply, {"Mcp-Session-Id": "session-1"})
            return
        if method == "tools/list":
            reply["result"] = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
            if self.headers.get("MCP-Protocol-Version") == "2026-07-28":
                reply["result"] |= {"resultType": "complete", "ttlMs": 0, "cacheScope": "public"}
        else:
            reply["error"] = {"code": -32601, "message": f"no {method}"}
        self._reply(200, reply)

    def do_GET(self) -> None:
        self._record()
        self._reply(405, headers={"Allow": "POST, DELETE"})

    def do_DELETE(self) -> None:
        self._record()
        self._reply(200)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Recorder)
        self.seen: list[Seen] = []


@pytest.fixture
def recorder() -> Iterator[_Server]:
    server = _Server()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def _url(server: _Server, query: str = "") -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/mcp{query}"


def _header(headers: list[tuple[str, str]], name: str) -> list[str]:
    return [value for key, value in headers if key.lower() == name.lower()]


def _talk(url: str, *, modern: bool = False, **kwargs: Any) -> None:
    async def main() -> None:
        async with connect_http(url, modern=modern, **kwargs) as client:
            assert [t["name"] for t in await client.list_tools()] == ["echo"]
            await client.list_tools()

    anyio.run(main)


def _methods(seen: list[Seen]) -> list[str]:
    return [method for method, _, _ in seen]


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ({"type": "bearer", "tokenEnv": "UPSTREAM_TOKEN"}, ("Authorization", "Bearer tok-123")),
        (
            {"type": "basic", "username": "ada", "passwordEnv": "UPSTREAM_TOKEN"},
            ("Authorization", "Basic " + base64.b64encode(b"ada:tok-123").decode()),
        ),
        ({"type": "header", "name": "X-Api-Key", "valueEnv": "UPSTREAM_TOKEN"}, ("X-Api-Key", "tok-123")),
    ],
)
def test_auth_headers_arrive_on_every_request_of_a_legacy_session(
    recorder: _Server, block: dict[str, Any], expected: tuple[str, str]
) -> None:
    auth = parse_auth(block, environ={"UPSTREAM_TOKEN": "tok-123"}, transport="http")
    _talk(_url(recorder), auth=auth)
    methods = _methods(recorder.seen)
    assert methods[0] == "POST" and "GET" in methods and methods[-1] == "DELETE", methods
    for method, _, headers in recorder.seen:
        assert _header(headers, expected[0]) == [expected[1]], method
    # the binding's own headers are still its own: one session id, from the server
    assert all(_header(h, "Mcp-Session-Id") in ([], ["session-1"]) for _, _, h in recorder.seen)


def test_auth_query_is_appended_to_every_request_target(recorder: _Server) -> None:
    auth = parse_auth({"type": "query", "name": "api_key", "value": "a b&c=d"}, environ={}, transport="http")
    _talk(_url(recorder, "?tenant=t1"), auth=auth)
    assert {"POST", "GET", "DELETE"} <= set(_methods(recorder.seen))
    for method, target, _ in recorder.seen:
        parts = urlsplit(target)
        assert parts.path == "/mcp", method
        assert parse_qsl(parts.query) == [("tenant", "t1"), ("api_key", "a b&c=d")], method


def test_modern_requests_carry_auth_and_their_own_protocol_headers(recorder: _Server) -> None:
    auth = parse_auth({"type": "bearer", "token": "tok-modern"}, environ={}, transport="http")
    _talk(_url(recorder), modern=True, auth=auth)
    assert set(_methods(recorder.seen)) == {"POST"}
    for _, _, headers in recorder.seen:
        assert _header(headers, "Authorization") == ["Bearer tok-modern"]
        assert _header(headers, "Mcp-Method") == ["tools/list"]
        assert _header(headers, "MCP-Protocol-Version") == ["2026-07-28"]


def test_a_configured_server_connects_with_its_headers_and_auth(recorder: _Server) -> None:
    config = parse_config(
        f"""
        [servers.remote]
        url = "{_url(recorder)}"
        headers = {{ X-Team = "blue" }}
        auth = {{ type = "bearer", tokenEnv = "REMOTE_TOKEN" }}
        """,
        environ={"REMOTE_TOKEN": "from-env"},
    )
    server = config.servers["remote"]
    assert server.url is not None
    _talk(server.url, headers=server.headers, auth=server.auth)
    for _, _, headers in recorder.seen:
        assert _header(headers, "X-Team") == ["blue"]
        assert _header(headers, "Authorization") == ["Bearer from-env"]


def test_env_auth_is_refused_for_an_http_connection(recorder: _Server) -> None:
    auth = parse_auth({"type": "env", "vars": {"TOKEN": "x"}}, environ={})

    async def main() -> None:
        async with connect_http(_url(recorder), auth=auth):
            pass

    with pytest.raises(ValueError, match="spawned"):
        anyio.run(main)
    assert recorder.seen == []


_ENV_SERVER = """
import os
from mcpx.drivers import serve_stdio
from mcpx.server import Server
server = Server("env-echo", "1")

@server.tool
async def getenv(name: str) -> str:
    return os.environ.get(name, "<unset>")

serve_stdio(server)
"""


def test_env_auth_reaches_a_spawned_server_over_its_own_env() -> None:
    config = parse_config(
        f"""
        [servers.local]
        command = {json.dumps(sys.executable)}
        args = ["-c", {json.dumps(_ENV_SERVER)}]
        env = {{ PLAIN = "from-server-env", SHARED = "server" }}
        auth = {{ type = "env", vars = {{ SHARED = "auth" }}, varsEnv = {{ API_TOKEN = "GATEWAY_SECRET" }} }}
        """,
        environ={"GATEWAY_SECRET": "s3cret"},
    )
    server = config.servers["local"]
    seen: dict[str, str] = {}

    async def main() -> None:
        async with connect_stdio(server.argv(), env=server.process_env(), cwd=server.cwd) as client:
            for name in ("PLAIN", "SHARED", "API_TOKEN", "GATEWAY_SECRET"):
                result = await client.call_tool("getenv", {"name": name})
                seen[name] = result["content"][0]["text"]

    anyio.run(main)
    # auth wins over the server's env; GATEWAY_SECRET was only in the parser's environ: it arrives as API_TOKEN
    assert seen == {
        "PLAIN": "from-server-env",
        "SHARED": "auth",
        "API_TOKEN": "s3cret",
        "GATEWAY_SECRET": "<unset>",
    }
