"""``mcpx probe URL`` (and ``mcpx call URL``) against real HTTP servers on loopback: the era, and the cache.

spec/era-probe.md, the HTTP steps: ``server/discover`` as a POST, then
``initialize``, then the 2024-11-05 HTTP+SSE transport (MCP 2024-11-05,
Transports → "HTTP with SSE").  mcpx's demo server over Streamable HTTP
restricted to 2026-07-28, to legacy revisions, to 2024-11-05, or speaking
both eras; the demo's HTTP+SSE endpoint (``/sse``, where a POST is refused);
a stand-alone server that has only the HTTP+SSE transport; and a web server
that is not MCP at all.  Each probe runs twice: the second must start from
the cached answer.
"""

from __future__ import annotations

import http.client
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from tests.conformance.http_peer import start_http_server, stop_http_server
from tests.interop._legacy_sse_server import LegacySseServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)


def mcpx(state: Path, *argv: str) -> tuple[int, Any, str]:
    done = subprocess.run(
        [sys.executable, "-m", "mcpx", *argv],
        check=False,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "MCPX_STATE": str(state)},
    )
    shown = orjson.loads(done.stdout) if done.stdout.strip() else None
    return done.returncode, shown, done.stderr.decode(errors="replace")


def probe(state: Path, url: str) -> tuple[int, Any]:
    code, shown, stderr = mcpx(state, "probe", url)
    return code, shown if shown is not None else stderr


@pytest.fixture
def demo(request: pytest.FixtureRequest) -> Iterator[str]:
    """``mcpx demo --http 0`` with the revisions the test names (``indirect`` parameter); its MCP URL."""
    revisions: str | None = request.param
    proc, url = start_http_server("asyncio", *(["--revisions", revisions] if revisions else []))
    yield url
    stop_http_server(proc)


@pytest.mark.parametrize(
    ("demo", "era", "revision"),
    [
        ("2026-07-28", "modern", "2026-07-28"),
        ("2025-06-18,2025-11-25", "legacy", "2025-11-25"),
        ("2024-11-05", "legacy", "2024-11-05"),  # mcpx serves 2024-11-05 over Streamable HTTP too
        (None, "modern", "2026-07-28"),  # both eras: modern first
    ],
    ids=["modern-only", "legacy-only", "2024-11-05-only", "dual"],
    indirect=["demo"],
)
def test_probe_names_the_era_of_a_streamable_http_server_and_caches_it(
    tmp_path: Path, demo: str, era: str, revision: str
) -> None:
    code, first = probe(tmp_path, demo)
    assert code == 0, first
    assert (first["era"], first["revision"]) == (era, revision), first
    assert first["server"]["name"] == "mcpx-demo"
    assert first["cache"] == "none" and first["trace"][0] == "start: modern first"
    assert f"send POST {demo}: server/discover" in first["trace"][1]
    cache = tmp_path / "upstream-eras.json"
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o600
    assert len(orjson.loads(cache.read_bytes())["eras"]) == 1
    code, second = probe(tmp_path, demo)
    assert code == 0 and second["cache"] == "confirmed", second
    assert (second["era"], second["revision"]) == (era, revision)
    if era == "legacy":
        assert "server/discover" not in " ".join(second["trace"])  # straight to initialize
        # The probe ended the session it opened (nothing adopts it): the server forgot it.
        session = first["trace"][-1].rsplit("session ", 1)[1]
        assert _status_in_session(demo, session, revision) == 404


def _status_in_session(url: str, session: str, revision: str) -> int:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=10)
    try:
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Mcp-Session-Id": session,
            "MCP-Protocol-Version": revision,
        }
        connection.request("POST", parts.path, body=body, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.parametrize("demo", [None], indirect=True)
def test_the_demos_sse_endpoint_is_found_by_the_fallback_and_cached(tmp_path: Path, demo: str) -> None:
    sse = demo.rsplit("/", 1)[0] + "/sse"
    code, first = probe(tmp_path, sse)
    assert code == 0, first
    assert (first["era"], first["revision"], first["cache"]) == ("legacy-sse", None, "none")
    trace = " ".join(first["trace"])
    assert "server/discover" in trace and "initialize" in trace and f"send GET {sse}" in trace
    assert "POST to " + demo.rsplit("/", 1)[0] + "/messages?session_id=" in first["trace"][-1]
    code, second = probe(tmp_path, sse)
    assert code == 0 and (second["era"], second["cache"]) == ("legacy-sse", "confirmed"), second
    assert "server/discover" not in " ".join(second["trace"])  # straight to the GET
    # mcpx call follows the probe's answer: over HTTP+SSE, at 2024-11-05
    code, shown, stderr = mcpx(tmp_path, "call", "echo", "--arg", "text=via sse", sse)
    assert code == 0, stderr
    assert shown["result"]["content"][0]["text"] == "via sse"
    assert "resultType" not in shown["result"]  # a 2024-11-05 result, not a 2026-07-28 one


def test_a_server_with_only_the_http_sse_transport(tmp_path: Path) -> None:
    with LegacySseServer() as server:
        url = server.base + "/sse"
        code, first = probe(tmp_path, url)
        assert code == 0, first
        assert (first["era"], first["revision"]) == ("legacy-sse", None), first
        assert any("HTTP 404 (text/html)" in line for line in first["trace"])  # no Streamable HTTP here
        code, second = probe(tmp_path, url)
        assert code == 0 and second["cache"] == "confirmed", second
        code, shown, stderr = mcpx(tmp_path, "call", "echo", "--arg", "text=old school", url)
        assert code == 0, stderr
        assert shown["result"]["content"][0]["text"] == "old school"
        methods = [m.get("method") for m in server.seen]
        assert methods[:3] == ["initialize", "notifications/initialized", "tools/call"], methods


def test_an_endpoint_on_another_origin_is_not_an_http_sse_server(tmp_path: Path) -> None:
    with LegacySseServer(endpoint="http://192.0.2.1:9/messages?session_id=1") as server:
        code, failed = probe(tmp_path, server.base + "/sse")
    assert code == 1 and failed["era"] is None, failed
    assert any("not a URI on the SSE URL's origin" in line for line in failed["trace"])


def test_a_web_server_that_is_not_mcp_fails_with_advice(tmp_path: Path) -> None:
    with LegacySseServer(not_mcp=True) as server:
        url = server.base + "/api"
        code, failed = probe(tmp_path, url)
        assert code == 1 and failed["era"] is None, failed
        assert "Check the URL" in failed["error"] and "/mcp" in failed["error"] and "/sse" in failed["error"]
        assert "HTTP 404" in failed["error"]
        assert failed["cache"] == "none"
        assert orjson.loads((tmp_path / "upstream-eras.json").read_bytes())["eras"] == {}  # nothing cached
        code, shown, stderr = mcpx(tmp_path, "call", "echo", url)
        assert code == 2 and shown is None and "Check the URL" in stderr


def test_nothing_listening_fails_with_a_reason(tmp_path: Path) -> None:
    with LegacySseServer() as server:
        url = server.base + "/mcp"
    code, failed = probe(tmp_path, url)  # the port is closed now
    assert code == 1 and failed["era"] is None
    assert "could not connect" in " ".join(failed["trace"])


def test_a_url_mcpx_cannot_use_is_refused(tmp_path: Path) -> None:
    code, shown, stderr = mcpx(tmp_path, "probe", "http://user:secret@127.0.0.1:1/mcp")
    assert code == 2 and shown is None and "credentials" in stderr and "secret" not in stderr
