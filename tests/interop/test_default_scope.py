"""A command server behaves by default as if each host had spawned it: one instance per host.

Two hosts that each spawned a server with state of its own (a thinking or a
memory server) would each see their own; through mcpx they do too, unless
the server is configured ``scope = "shared"``.  Requests that name no host
(a 2026-07-28 request without a session, ``/v1/call``) share one instance:
never a process spawned per request.  spec/configuration.md, scopes.
"""

from __future__ import annotations

import http.client
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from mcpx.gateway._state import daemon_info

from .test_serve_handover import ROOT, Host, _environment, _pool, _start_daemon, _stop, _text

pytestmark = pytest.mark.timeout(120)

MODERN = "2026-07-28"


def _config(scope: str | None) -> str:
    return (
        f"[servers.demo]\ncommand = {orjson.dumps(sys.executable).decode()}\n"
        f'args = ["-m", "tests.interop._tally_server"]\ncwd = {orjson.dumps(str(ROOT)).decode()}\n'
        + (f'scope = "{scope}"\n' if scope else "")
    )


def _post(env: dict[str, str], path: str, body: Any, headers: dict[str, str]) -> Any:
    info = daemon_info(Path(env["MCPX_STATE"]))
    assert info is not None
    url = urlsplit(str(info["url"]))
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        conn.request(
            "POST", path, body=orjson.dumps(body), headers={"content-type": "application/json", **headers}
        )
        return orjson.loads(conn.getresponse().read())
    finally:
        conn.close()


def _modern_request(env: dict[str, str]) -> str:
    """One 2026-07-28 ``tally`` over ``/mcp`` that names no session: the tally it got."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {
        "name": "mcpx_call",
        "arguments": {"server": "demo", "tool": "tally", "arguments": {}},
        "_meta": meta,
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "mcpx_call",
    }
    answer = _post(
        env, "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers
    )
    return _text(answer)


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_each_host_has_its_own_instance_of_a_command_server_by_default(tmp_path: Path, era: str) -> None:
    env = _environment(tmp_path, False, _config(None))
    _start_daemon(env)
    try:
        first, second = Host(env, era), Host(env, era)
        seen = [(_text(first.call("tally")), _text(second.call("tally"))) for _ in range(2)]
        assert seen == [("1", "1"), ("2", "2")]  # each its own history, as if each had spawned it
        hosts = [i["scopeKey"] for i in _pool(env)["instances"] if str(i["scopeKey"]).startswith("host:")]
        assert len(set(hosts)) == 2, _pool(env)
        assert first.close() == 0 and second.close() == 0
    finally:
        _stop(env)


def test_shared_is_one_instance_for_every_host(tmp_path: Path) -> None:
    env = _environment(tmp_path, False, _config("shared"))
    _start_daemon(env)
    try:
        first, second = Host(env, "legacy"), Host(env, "legacy")
        seen = [_text(host.call("tally")) for _ in range(2) for host in (first, second)]
        assert seen == ["1", "2", "3", "4"]
        assert first.close() == 0 and second.close() == 0
    finally:
        _stop(env)


def test_requests_that_name_no_host_share_one_instance_not_a_process_each(tmp_path: Path) -> None:
    env = _environment(tmp_path, False, _config(None))
    _start_daemon(env)
    try:
        tallies = [_modern_request(env) for _ in range(3)]
        v1 = _post(env, "/v1/call", {"server": "demo", "tool": "tally", "arguments": {}}, {})
        tallies.append(v1["result"]["content"][0]["text"])
        assert tallies == ["1", "2", "3", "4"]
        pool = _pool(env)
        assert pool["spawnCount"] <= 2, pool  # the shared instance, and a spare for the next host
    finally:
        _stop(env)
