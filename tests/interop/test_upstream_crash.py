"""An upstream killed mid-call: every caller answered within 2 s, naming the server and ``kind: crashed``.

A real daemon (its upstream mcpx's demo server, shared by every caller) and
real callers: ``/v1/call`` from threads, and a legacy host through ``mcpx
serve``, each in a ``sleep`` call when the upstream is SIGKILLed (``ROUNDS``
times).  Round
after round the next call works (the pool starts the server again), no
zombie is left, and the daemon's descriptors come back to where they were.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ..fuzz._mcp import initialize, notification, request
from ..fuzz._serve_host import Daemon, Host
from ._daemon_process import DaemonProcess, children
from .test_settings_walk import DEMO

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not Path("/proc").is_dir(), reason="the upstream and the daemon's fds are read from /proc"
    ),
]
ROUNDS = 100
CALLERS = 3
# Each round's next call starts the server again: after ``pool.backoff`` (1 s by default) and
# within ``pool.maxSpawnsPerMinute`` (30 by default).  A short pause and a high limit keep 100
# rounds to about a minute, the restarts' own cost.
SETTINGS = {"MCPX_POOL_BACKOFF": "20ms", "MCPX_POOL_MAX_SPAWNS_PER_MINUTE": "1000"}


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _call_in_flight(daemon: DaemonProcess, answers: list[tuple[float, Any]]) -> None:
    answer = daemon.request(
        "POST", "/v1/call", {"server": "demo", "tool": "sleep", "arguments": {"seconds": 60}}
    )
    answers.append((time.monotonic(), (answer.status, answer.json())))


def test_an_upstream_killed_mid_call_answers_every_caller_in_time(tmp_path: Path) -> None:
    # One process serves every caller: the demo shared and its era pinned, or the host's call would
    # go to an instance of its own (a host's own by default; a legacy host's, as the era follows it).
    daemon = DaemonProcess(tmp_path, DEMO + 'era = "modern"\nscope = "shared"\n', env=SETTINGS)
    shim_env = Daemon(tmp_path)
    shim_env.env.update(daemon.env)
    shim_env.env["MCPX_CONFIG"] = str(tmp_path / "config.toml")  # the daemon's own (its --config)
    host = Host(shim_env, "2025-11-25", "fds", handshake=False)
    try:
        host.send(initialize("init", "2025-11-25"))
        host.replies(1)
        host.send(notification("notifications/initialized"))
        warm = daemon.request(
            "POST", "/v1/call", {"server": "demo", "tool": "echo", "arguments": {"text": "x"}}
        )
        assert warm.status == 200, warm.body
        fds_at_start = _fds(daemon.process.pid)
        for round_ in range(ROUNDS):
            answers: list[tuple[float, Any]] = []
            callers = [
                threading.Thread(target=_call_in_flight, args=(daemon, answers)) for _ in range(CALLERS)
            ]
            for caller in callers:
                caller.start()
            host.send(
                request(
                    round_,
                    "tools/call",
                    {
                        "name": "mcpx_call",
                        "arguments": {"server": "demo", "tool": "sleep", "arguments": {"seconds": 60}},
                    },
                )
            )
            deadline = time.monotonic() + 30
            while (status := daemon.request("GET", "/v1/servers").json()["servers"][0]["pool"])[
                "inFlight"
            ] < CALLERS + 1:
                assert time.monotonic() < deadline, status  # every call reached the upstream
                time.sleep(0.01)
            (upstream,) = [pid for pid, state in children(daemon.process.pid).items() if state != "Z"]
            os.kill(upstream, signal.SIGKILL)
            killed = time.monotonic()
            (hosts,) = host.replies(1)
            host_took = time.monotonic() - killed
            for caller in callers:
                caller.join(30)
            assert len(answers) == CALLERS
            for answered_at, (code, body) in answers:
                assert answered_at - killed < 2.0, (round_, answered_at - killed)
                assert code == 502 and body["error"]["code"] == "crashed", body
                assert body["error"]["data"]["server"] == "demo", body
            assert host_took < 2.0, (round_, host_took)
            error = hosts["error"]
            assert error["data"] == {"server": "demo", "kind": "crashed"} and "demo" in error["message"], (
                hosts
            )
            again = daemon.request(
                "POST", "/v1/call", {"server": "demo", "tool": "echo", "arguments": {"text": "x"}}
            )
            assert again.status == 200, (round_, again.body)
        assert all(state != "Z" for state in children(daemon.process.pid).values())
        assert (
            _fds(daemon.process.pid) <= fds_at_start + 2
        )  # a spare pipe or two in flight, no leak per round
    finally:
        host.kill()
        daemon.close()


def test_a_server_that_fails_to_start_is_reported_in_its_own_words(tmp_path: Path) -> None:
    """The last lines of its stderr are in the error, with ``kind: start-failed`` and when mcpx tries again."""
    script = "import sys; sys.stderr.write('boom: MY_API_KEY is not set\\n'); sys.exit(3)"
    config = f'[servers.bad]\ncommand = {json.dumps(sys.executable)}\nargs = ["-c", {json.dumps(script)}]\n'
    daemon = DaemonProcess(tmp_path, config)
    try:
        answer = daemon.request("POST", "/v1/call", {"server": "bad", "tool": "anything"})
        error = answer.json()["error"]
        assert answer.status == 502 and error["code"] == "start-failed", error
        assert "boom: MY_API_KEY is not set" in error["message"] and "again" in error["message"], error
        assert ".." not in error["message"], error
    finally:
        daemon.close()
