"""Daemon endpoints: ``--daemon ssh://host`` and ``--daemon http://host:port`` against a real daemon.

The daemon runs in a thread (``tests/interop/test_daemon.py``'s ``Daemon``)
with its own state directory.  A fake ``ssh`` first on PATH plays the remote
host: it records its argv, drops ssh's options and the destination, and runs
the remote command here with HOME and MCPX_STATE pointed at the daemon's, so
``mcpx serve --transport stdio`` on the "remote" side finds that daemon.  The
CLI under test runs with an empty state directory of its own, so whatever it
reaches, it reached through the endpoint.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from mcpx.config._endpoint import parse_endpoint
from tests.interop.test_daemon import Daemon

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(90)

FAKE_SSH = """#!{python}
import json, os, sys
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
while args and args[0] != "--" and args[0].startswith("-"):  # ssh's options: -p PORT and flags
    args = args[2:] if args[0] in ("-p", "-l", "-o", "-i", "-F", "-J") else args[1:]
if args and args[0] == "--":
    args = args[1:]
command = args[1:]  # after the destination: the remote command
if command and command[0] == "mcpx":
    command = [{python!r}, "-m", "mcpx", *command[1:]]
remote = {{**os.environ, "HOME": {home!r}, "MCPX_STATE": {state!r}}}
os.execve(command[0], command, remote)
"""


@dataclass
class Remote:
    daemon: Daemon
    env: dict[str, str]  # the CLI's: the fake ssh first on PATH, an empty state directory
    log: Path  # one JSON argv per line, per ssh the CLI ran

    def mcpx(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mcpx", *args],
            env={**self.env, **extra},
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            check=False,
        )

    def ssh_runs(self) -> list[list[str]]:
        return [orjson.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    root = tmp_path_factory.mktemp("endpoint")
    daemon = Daemon(root / "state", root)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    log = root / "ssh.log"
    ssh = bin_dir / "ssh"
    ssh.write_text(
        FAKE_SSH.format(python=sys.executable, log=str(log), home=str(root), state=str(root / "state"))
    )
    ssh.chmod(0o755)
    client_home = root / "client"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(client_home),
        "MCPX_STATE": str(client_home / "state"),  # no daemon here: only the endpoint can answer
    }
    for name in ("MCPX_CONFIG", "MCPX_DAEMON"):
        env.pop(name, None)
    yield Remote(daemon, env, log)
    daemon.close()


def _without_envelope(result: dict[str, Any]) -> dict[str, Any]:
    # The 2026-07-28 envelope's serverInfo names whoever answered: the gateway over MCP, the upstream on /v1.
    return {k: v for k, v in result.items() if k != "_meta"}


def test_servers_over_ssh_are_the_daemons_servers(remote: Remote) -> None:
    done = remote.mcpx("servers", "--json", "--daemon", "ssh://buildbox")
    assert done.returncode == 0, done.stderr
    status, local = remote.daemon.request("GET", "/v1/servers")
    assert status == 200
    listed = orjson.loads(done.stdout)["servers"]
    assert [s["name"] for s in listed] == [s["name"] for s in local["servers"]] == ["demo"]
    assert listed[0]["status"] == "ready" and listed[0]["tools"] > 0
    assert remote.ssh_runs()[-1] == ["--", "buildbox", "mcpx", "serve", "--transport", "stdio"]


def test_call_over_ssh_gives_what_the_local_daemon_gives(remote: Remote) -> None:
    through_ssh = remote.mcpx(
        "call", "demo", "echo", "--arg", "text=hi", "--json", MCPX_DAEMON="ssh://me@buildbox:2222"
    )
    assert through_ssh.returncode == 0, through_ssh.stderr
    local = remote.mcpx(
        "call",
        "demo",
        "echo",
        "--arg",
        "text=hi",
        "--json",
        MCPX_STATE=str(remote.daemon.config.settings.value("state.dir")),
    )
    assert local.returncode == 0, local.stderr
    assert _without_envelope(orjson.loads(through_ssh.stdout)) == _without_envelope(
        orjson.loads(local.stdout)
    )
    assert orjson.loads(through_ssh.stdout)["content"] == [{"type": "text", "text": "hi"}]
    assert remote.ssh_runs()[-1] == [
        "-p", "2222", "--", "me@buildbox", "mcpx", "serve", "--transport", "stdio",
    ]  # fmt: skip

    failed = remote.mcpx("call", "demo", "no_such_tool", "--daemon", "ssh://buildbox")
    assert failed.returncode == 1  # the upstream's own error, as a 502 from /v1 exits
    assert len(failed.stderr.strip().splitlines()) == 1 and "no_such_tool" in failed.stderr


def test_tools_over_ssh_are_the_v1_listing(remote: Remote) -> None:
    done = remote.mcpx("tools", "demo", "--json", "--daemon", "ssh://buildbox")
    assert done.returncode == 0, done.stderr
    status, local = remote.daemon.request("GET", "/v1/tools?server=demo")
    assert status == 200 and orjson.loads(done.stdout) == local  # full definitions, same order
    unknown = remote.mcpx("tools", "nope", "--daemon", "ssh://buildbox")
    assert (
        unknown.returncode == 2 and "configured: demo" in unknown.stderr and "Traceback" not in unknown.stderr
    )


def test_endpoints_that_could_carry_ssh_options_are_refused_before_ssh_runs(remote: Remote) -> None:
    before = remote.ssh_runs()
    done = remote.mcpx("servers", "--daemon", "ssh://-oProxyCommand=x")  # the rest: see the refusals below
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "ssh would read as an option" in done.stderr and "~/.ssh/config" in done.stderr, done.stderr
    restart = remote.mcpx("restart", "--daemon", "ssh://me@buildbox")
    assert restart.returncode == 2 and "ssh -- me@buildbox mcpx restart" in restart.stderr
    assert len(restart.stderr.strip().splitlines()) == 1
    assert remote.ssh_runs() == before  # ssh never ran


def test_an_http_endpoint_is_the_daemons_v1(remote: Remote) -> None:
    endpoint = remote.daemon.base  # http://127.0.0.1:PORT
    called = remote.mcpx("call", "demo", "echo", "--arg", "text=hi", "--json", "--daemon", endpoint)
    assert called.returncode == 0, called.stderr
    assert orjson.loads(called.stdout)["content"] == [{"type": "text", "text": "hi"}]
    status = remote.mcpx("status", "--json", "--daemon", endpoint)
    assert status.returncode == 0, status.stderr
    assert orjson.loads(status.stdout)["daemon"] == {"url": endpoint}


def test_the_endpoint_is_a_setting_with_its_provenance(remote: Remote) -> None:
    done = remote.mcpx("settings", "--json", MCPX_DAEMON="ssh://buildbox")
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["settings"]["daemon.endpoint"] == {
        "value": "ssh://buildbox",
        "source": "env",
        "origin": "MCPX_DAEMON",
    }


@pytest.mark.parametrize(
    ("text", "argv"),
    [
        ("ssh://buildbox", ["ssh", "--", "buildbox"]),
        ("ssh://me@build-box.example:2222", ["ssh", "-p", "2222", "--", "me@build-box.example"]),
        ("ssh://[::1]", ["ssh", "--", "::1"]),
    ],
)
def test_ssh_endpoints_become_one_fixed_command(text: str, argv: list[str]) -> None:
    assert parse_endpoint(text).ssh_argv() == [*argv, "mcpx", "serve", "--transport", "stdio"]
    assert str(parse_endpoint(text)) == text


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("ssh://-oProxyCommand=x", "starts with '-'"),
        ("ssh://-l@host", "starts with '-'"),
        ("ssh://host;id", "only letters"),
        ("ssh://host%20-oX", "only letters"),
        ("ssh://me:secret@host", "no password"),
        ("ssh://host/bin/sh", "no path"),
        ("ssh://host:0", "1 to 65535"),
        ("ssh://::1", "brackets"),
        ("http://127.0.0.1:8899/mcp", "without a path"),
        ("buildbox", "ssh://[user@]host[:port] or http://host:port"),
    ],
)
def test_endpoint_refusals_say_why(text: str, reason: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_endpoint(text)
    assert reason in str(refused.value)
