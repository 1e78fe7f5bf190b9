"""Every size limit at its cap and one byte over: directly (``mcpx demo``) and through the gateway.

``transport.maxLine`` (stdio) and ``transport.maxBody`` (HTTP), each set to a
small value so a test can reach it: a message exactly at the cap is served,
one byte more is refused precisely (stdio: a ``-32700``/``-32600`` with
``"id": null``, and the connection goes on; HTTP: 413, and the next request is
served).  Directly: ``mcpx demo`` over stdio (``--max-line``) and over HTTP
(``--max-body``).  Through the gateway: the daemon's ``/mcp`` and ``/v1/call``
(``MCPX_TRANSPORT_MAX_BODY``); ``mcpx serve``'s line cap is
``tests/fuzz/test_serve_input.py::test_a_line_at_the_cap_and_one_byte_over``.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from typing import Any
from urllib.parse import urlsplit

import pytest

from ..conformance.http_peer import start_http_server, stop_http_server
from ..fuzz._serve_host import ROOT, WAIT
from .test_settings_walk import running

pytestmark = pytest.mark.timeout(90)

CAP = 4096


def _padded(template: dict[str, Any], size: int, *, pad: tuple[str, ...]) -> bytes:
    """``template`` as JSON exactly ``size`` bytes long, the string at path ``pad`` grown to fit."""

    def with_text(text: str) -> bytes:
        value = json.loads(json.dumps(template))
        node = value
        for key in pad[:-1]:
            node = node[key]
        node[pad[-1]] = text
        return json.dumps(value, separators=(",", ":")).encode()

    data = with_text("x" * (size - len(with_text(""))))
    assert len(data) == size, len(data)
    return data


ECHO = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": ""}},
}
ECHO_TEXT = ("params", "arguments", "text")


def _stdio_exchange(process: subprocess.Popen[bytes], line: bytes) -> Any:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(line + b"\n")
    process.stdin.flush()
    return json.loads(process.stdout.readline())


def test_mcpx_demo_over_stdio_at_the_line_cap_and_one_byte_over() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "demo", "--max-line", str(CAP)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        modern = {**ECHO, "params": {**ECHO["params"], "_meta": _MODERN_META}}
        at_cap = _stdio_exchange(process, _padded(modern, CAP, pad=ECHO_TEXT))
        assert at_cap["id"] == 1 and len(at_cap["result"]["content"][0]["text"]) > CAP - 300, str(at_cap)[
            :300
        ]
        over = _stdio_exchange(process, _padded(modern, CAP + 1, pad=ECHO_TEXT))
        assert over["id"] is None and over["error"]["code"] in (-32700, -32600), over
        small = {**modern, "id": 2, "params": {**modern["params"], "arguments": {"text": "on"}}}
        after = _stdio_exchange(process, json.dumps(small).encode())
        assert after["id"] == 2 and after["result"]["content"][0]["text"] == "on", after
    finally:
        assert process.stdin is not None
        process.stdin.close()
        assert process.wait(WAIT) == 0
    assert process.stderr is not None and b"Traceback" not in process.stderr.read()


_MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "caps", "version": "1"},
}
_MODERN_HEADERS = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo"}


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=WAIT)
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream", **headers}
    try:
        conn.request("POST", parts.path, body=body, headers=sent)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _body_cap_holds(
    url: str, template: dict[str, Any], pad: tuple[str, ...], headers: dict[str, str]
) -> None:
    status, body = _post(url, _padded(template, CAP, pad=pad), headers)
    assert status == 200, (status, body[:300])
    status, body = _post(url, _padded(template, CAP + 1, pad=pad), headers)
    assert status == 413, (status, body[:300])
    status, body = _post(url, json.dumps(template).encode(), headers)  # and on it goes
    assert status == 200, (status, body[:300])


def test_mcpx_demo_over_http_at_the_body_cap_and_one_byte_over() -> None:
    process, url = start_http_server("asyncio", "--max-body", str(CAP))
    try:
        modern = {**ECHO, "params": {**ECHO["params"], "_meta": _MODERN_META}}
        _body_cap_holds(url, modern, ECHO_TEXT, _MODERN_HEADERS)
    finally:
        assert stop_http_server(process) == 0


def test_the_daemon_at_the_body_cap_and_one_byte_over(tmp_path: Any) -> None:
    with running(tmp_path, MCPX_TRANSPORT_MAX_BODY=str(CAP)) as daemon:
        base = f"http://{daemon.host}:{daemon.port}"
        call = {
            **ECHO,
            "params": {
                "name": "mcpx_call",
                "arguments": {"server": "demo", "tool": "echo", "arguments": {"text": ""}},
                "_meta": _MODERN_META,
            },
        }
        headers = {**_MODERN_HEADERS, "mcp-name": "mcpx_call"}
        _body_cap_holds(f"{base}/mcp", call, ("params", "arguments", "arguments", "text"), headers)
        v1 = {"server": "demo", "tool": "echo", "arguments": {"text": ""}}
        _body_cap_holds(f"{base}/v1/call", v1, ("arguments", "text"), {})
