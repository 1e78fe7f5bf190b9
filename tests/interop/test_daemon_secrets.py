"""A server's secret belongs to the daemon that starts it, not to the shell a client command runs in.

``auth`` indirections (``tokenEnv``, ``varsEnv``, …) are read from the
daemon's environment when it starts the server.  A client command run where
the variable is unset still works, and ``mcpx settings`` shows the unset
variable as a warning on that server's row; a daemon that lacks it refuses
that server's calls with ``start-failed`` naming the variable, and serves the
others.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.interop.test_settings_walk import ROOT, WAIT, running

pytestmark = pytest.mark.timeout(90)

CONFIG = f"""
[servers.local]
command = {json.dumps(sys.executable)}
args = ["-m", "tests.interop._env_server"]
cwd = {json.dumps(str(ROOT))}
auth = {{ type = "env", varsEnv = {{ API_TOKEN = "MCPX_TEST_SECRET" }} }}

[servers.plain]
command = {json.dumps(sys.executable)}
args = ["-m", "tests.interop._env_server"]
cwd = {json.dumps(str(ROOT))}
"""


def _client(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``mcpx ARGS`` in ``env`` with the secret's variable removed: a shell that never had it."""
    shell = {k: v for k, v in env.items() if k != "MCPX_TEST_SECRET"}
    return subprocess.run(
        [sys.executable, "-m", "mcpx", *args],
        env=shell,
        capture_output=True,
        text=True,
        timeout=WAIT,
        cwd=ROOT,
        check=False,
    )


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return json.loads(done.stdout)


def test_client_commands_work_without_the_secret_the_daemon_holds(tmp_path: Path) -> None:
    with running(tmp_path, config=CONFIG, MCPX_TEST_SECRET="s3cret") as daemon:
        assert "MCPX_TEST_SECRET" not in os.environ
        called = _json(_client(daemon.env, "call", "local", "getenv", "--arg", "name=API_TOKEN", "--json"))
        assert called["content"][0]["text"] == "s3cret", called
        servers = _client(daemon.env, "servers")
        assert servers.returncode == 0 and "local" in servers.stdout, servers
        tools = _client(daemon.env, "tools", "local")
        assert tools.returncode == 0 and "getenv" in tools.stdout, tools
        status = _client(daemon.env, "status")
        assert status.returncode == 0, status
        shown = _client(daemon.env, "settings")
        assert shown.returncode == 0, shown
        (row,) = [line for line in shown.stdout.splitlines() if line.startswith("  local ")]
        assert "$MCPX_TEST_SECRET is unset here" in row, row
        assert "s3cret" not in shown.stdout + shown.stderr


def test_a_daemon_without_the_secret_refuses_that_server_and_serves_the_others(tmp_path: Path) -> None:
    with running(tmp_path, config=CONFIG) as daemon:
        refused = _client(daemon.env, "call", "local", "getenv", "--arg", "name=API_TOKEN", "--json")
        assert refused.returncode == 1, refused
        said = refused.stdout + refused.stderr
        assert "MCPX_TEST_SECRET" in said and "where the daemon starts" in said, said
        assert "could not be started" not in said, said  # said once, by the pool
        assert "Check its command" not in said, said  # the secret's own advice is the advice
        status, _, body = daemon.http(
            "POST", "/v1/call", {"server": "local", "tool": "getenv", "arguments": {}}
        )
        error = json.loads(body)["error"]
        assert status == 502 and error["code"] == "start-failed" and "MCPX_TEST_SECRET" in error["message"], (
            error
        )
        served = _json(_client(daemon.env, "call", "plain", "getenv", "--arg", "name=API_TOKEN", "--json"))
        assert served["content"][0]["text"] == "<unset>", served
