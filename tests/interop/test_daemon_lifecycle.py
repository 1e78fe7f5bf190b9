"""The daemon's life is the user's to see and end: ``mcpx stop``, one daemon per state directory, said aloud.

Real processes on loopback: ``mcpx daemon`` in a private HOME and state
directory (its upstream the built-in default, mcpx's demo server), the
commands a person runs against it, and ``mcpx serve`` as a host spawns it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from mcpx.cli._gateway import wait_for_exit

from ._daemon_process import ROOT, DaemonProcess, children
from .test_settings_walk import ASKING, legacy_host, mcpx_call, running, text_of

pytestmark = pytest.mark.timeout(120)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="the upstream's process is looked for in /proc")
def test_mcpx_stop_ends_the_daemon_and_its_upstreams(tmp_path: Path) -> None:
    daemon = DaemonProcess(tmp_path)
    try:
        answer = daemon.request(
            "POST", "/v1/call", {"server": "demo", "tool": "echo", "arguments": {"text": "x"}}
        )
        assert answer.status == 200, answer.body
        pid = daemon.process.pid
        upstreams = set(children(pid))
        assert upstreams, "the demo server runs as the daemon's child"
        stopped = daemon.mcpx("stop")
        assert stopped.returncode == 0, stopped.stderr
        assert f"pid {pid}".encode() in stopped.stdout
        assert daemon.process.poll() is not None  # mcpx stop returned once it had gone
        assert not any(_alive(child) for child in upstreams)
        assert not (tmp_path / "state" / "daemon.json").exists()
        again = daemon.mcpx("stop")
        assert again.returncode == 1 and b"no daemon is running" in again.stderr
    finally:
        daemon.close()


@pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")
def test_what_an_upstream_started_does_not_outlive_the_daemon(tmp_path: Path) -> None:
    """An upstream that started a process of its own (``npx`` → ``node``): ``mcpx stop`` ends both."""
    pidfile = tmp_path / "grandchild.pid"
    config = (
        f"[servers.forking]\ncommand = {orjson.dumps(sys.executable).decode()}\n"
        f'args = ["-m", "tests.interop._forking_server", {orjson.dumps(str(pidfile)).decode()}]\n'
        f"cwd = {orjson.dumps(str(ROOT)).decode()}\n"
    )
    daemon = DaemonProcess(tmp_path, config)
    try:
        answer = daemon.request(
            "POST", "/v1/call", {"server": "forking", "tool": "echo", "arguments": {"text": "x"}}
        )
        assert answer.status == 200, answer.body
        grandchild = int(pidfile.read_text())
        assert _alive(grandchild)
        assert daemon.mcpx("stop").returncode == 0
        assert wait_for_exit(grandchild, 10), "the upstream's own child outlived the daemon"
    finally:
        daemon.close()


def test_mcpx_stop_lets_the_calls_in_flight_finish(tmp_path: Path) -> None:
    """A call held by its upstream's question when ``mcpx stop`` runs: answered in full, then all ends."""
    with (
        running(tmp_path, config=ASKING) as daemon,
        legacy_host(daemon, capabilities={"elicitation": {}}) as host,
    ):
        host.send(mcpx_call(1, "asking", "ask_twice"))
        first = host.message()
        assert first.get("method") == "elicitation/create", first
        upstreams = set(children(daemon.process.pid))
        stopping = subprocess.Popen(
            [sys.executable, "-m", "mcpx", "stop"],
            env=daemon.env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert "1 call in flight" in daemon.said("stopping:")  # it has the signal and is draining
        assert stopping.poll() is None and daemon.process.poll() is None
        question = first
        for word in ("still", "here"):
            answer = {"action": "accept", "content": {"word": word}}
            host.send({"jsonrpc": "2.0", "id": question["id"], "result": answer})
            if word == "still":
                question = host.message()
                assert question.get("method") == "elicitation/create", question
        answered = host.message()
        assert answered.get("id") == 1 and text_of(answered) == "still here", answered
        out, err = stopping.communicate(timeout=60)
        assert stopping.returncode == 0 and b"stopped the daemon" in out, (out, err)
        assert daemon.process.poll() == 0
        assert not any(_alive(pid) for pid in upstreams), "an upstream outlived the daemon"


def test_a_second_signal_ends_the_drain_at_once(tmp_path: Path) -> None:
    """Ctrl-C while draining (the default pool.drain, 10 s): the daemon and its upstreams end now."""
    with (
        running(tmp_path, config=ASKING) as daemon,
        legacy_host(daemon, capabilities={"elicitation": {}}) as host,
    ):
        host.send(mcpx_call(1, "asking", "ask_twice"))
        assert host.message().get("method") == "elicitation/create"
        upstreams = set(children(daemon.process.pid))
        daemon.process.send_signal(signal.SIGINT)
        assert "up to 10s" in daemon.said("stopping:")
        daemon.process.send_signal(signal.SIGINT)
        again = time.monotonic()
        assert daemon.process.wait(60) == 0
        assert time.monotonic() - again < 5
        assert all(wait_for_exit(pid, 10) for pid in upstreams), "an upstream outlived the daemon"


def test_mcpx_status_shows_uptime_instances_and_calls_in_flight(tmp_path: Path) -> None:
    """Two hosts, each with a call held by its upstream's question: both in flight, on one instance.

    The server is shared (one instance for every host), and its era pinned to 2026-07-28: over one legacy session (where a legacy host's calls
    would go) a question names no call, so two hosts' questions at once could not be told apart.
    """
    with running(tmp_path, config=ASKING + 'era = "modern"\nscope = "shared"\n') as daemon:
        hosts = [legacy_host(daemon, capabilities={"elicitation": {}}) for _ in range(2)]
        try:
            for host in hosts:
                host.send(mcpx_call(1, "asking", "ask_twice"))
                assert host.message()["method"] == "elicitation/create"  # the call is in the upstream's hands
            shown = daemon.mcpx("status", "--json")
            health = orjson.loads(shown.stdout)["health"]
            assert health["inFlight"] == 2 and health["instances"] == 1, health
            assert health["uptimeSeconds"] > 0, health
        finally:
            for host in hosts:
                host.kill()


def test_a_second_daemon_names_the_running_one(tmp_path: Path) -> None:
    daemon = DaemonProcess(tmp_path)
    try:
        info = orjson.loads((tmp_path / "state" / "daemon.json").read_bytes())
        second = daemon.mcpx("daemon", "--port", "0")
        said = second.stderr.decode()
        assert second.returncode == 2, said
        assert f"pid {info['pid']}" in said and info["mcp"] in said and "mcpx stop" in said, said
        assert daemon.process.poll() is None and daemon.request("GET", "/health").status == 200
    finally:
        daemon.close()


def test_a_port_in_use_is_named_with_what_to_do(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        env = {**os.environ, "HOME": str(tmp_path), "MCPX_STATE": str(tmp_path / "state")}
        env.pop("MCPX_CONFIG", None)
        done = subprocess.run(
            [sys.executable, "-m", "mcpx", "daemon", "--port", str(port)],
            env=env,
            capture_output=True,
            timeout=60,
            cwd=ROOT,
            check=False,
        )
    said = done.stderr.decode()
    assert done.returncode == 2, said
    assert f"127.0.0.1:{port} is in use" in said and "--port" in said and "Traceback" not in said, said


def test_mcpx_serve_says_when_it_starts_a_daemon(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPX_")}
    env.update(HOME=str(tmp_path), MCPX_STATE=str(tmp_path / "state"), MCPX_TRANSPORT_PORT="0")

    def mcpx(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "mcpx", *args],
            input=b"",
            check=False,
            env=env,
            capture_output=True,
            timeout=60,
            cwd=ROOT,
        )

    try:
        first = mcpx("serve")  # a host that ends at once
        said = first.stderr.decode()
        assert first.returncode == 0, said
        assert "started a daemon" in said and str(tmp_path / "state" / "daemon.log") in said, said
        assert "mcpx stop" in said
        assert "started a daemon" not in mcpx("serve").stderr.decode()  # it found the one running
    finally:
        mcpx("stop")
