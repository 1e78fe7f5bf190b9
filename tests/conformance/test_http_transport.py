"""The HTTP listeners themselves: a unix socket beside the port, and the warning beyond loopback."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import pytest

from tests.conformance.http_peer import stop_http_server
from tests.conformance.peer import LOOPS

PING = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "host": "localhost",
}


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(self.path)


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    """Read stderr up to mcpx's word that it is listening on ``path`` (said once it listens)."""
    assert proc.stderr is not None
    said = []
    while line := proc.stderr.readline().decode():
        said.append(line)
        if f"serving MCP at unix:{path}" in line:
            return
    raise AssertionError("mcpx exited before listening:\n" + "".join(said))


@pytest.mark.parametrize("loop", LOOPS)
def test_http_on_a_unix_socket(loop: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mcp.sock"
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcpx", "demo", "--loop", loop, "--unix", str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            _wait_for(path, proc)
            assert oct(os.stat(path).st_mode & 0o777) == "0o600"  # only its owner can connect
            conn = UnixConnection(str(path))
            conn.request("POST", "/mcp", body=PING, headers=HEADERS)
            response = conn.getresponse()
            assert response.status == 200
            assert orjson.loads(response.read()) == {"jsonrpc": "2.0", "id": 1, "result": {}}
            conn.close()
        finally:
            assert stop_http_server(proc) == 0
        assert not path.exists(), "the socket file is removed when the server stops"


def test_binding_beyond_loopback_warns() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "demo", "--http", "0", "--host", "0.0.0.0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        first = proc.stderr.readline().decode()
        assert "warning" in first and "can run" in first and "0.0.0.0" in first
        assert "serving MCP at http://0.0.0.0:" in proc.stderr.readline().decode()
    finally:
        assert stop_http_server(proc) == 0


def test_the_daemon_bound_beyond_loopback_warns(tmp_path: Path) -> None:
    """``mcpx daemon --address 0.0.0.0``: whatever can route to the port can run tools, and it says so."""
    env = {**os.environ, "HOME": str(tmp_path), "MCPX_STATE": str(tmp_path / "state")}
    env.pop("MCPX_CONFIG", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "daemon", "--address", "0.0.0.0", "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stderr is not None
    try:
        said = [proc.stderr.readline().decode() for _ in range(2)]  # the built-in default's note, then this
        assert any("warning" in line and "can run" in line and "0.0.0.0" in line for line in said), said
    finally:
        stop_http_server(proc)  # an interrupted daemon exits 130, as a shell expects
