"""An upstream's start and stderr, as a user meets it: drained, quoted when it cannot start, and readable with ``mcpx logs``.

spec/gateway.md §7 ("A server that fails to start is quoted"), against a
real daemon (``DaemonProcess``) and the fixture server
``tests/interop/_startup_server.py``: a server that writes far more than a
pipe holds before it answers still starts; one that prints ``FATAL: API_KEY
is not set`` and exits 3 is reported with that line and that exit code; and
a running server's stderr lines are what ``mcpx logs SERVER`` and ``GET
/v1/servers/{name}/log`` show.  And a stdio server's first start spawns it
once: the era probe hands its process over to the pool.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ._daemon_process import ROOT, DaemonProcess

pytestmark = pytest.mark.timeout(120)


def _config(name: str, *options: str) -> str:
    args = ["-m", "tests.interop._startup_server", *options]
    return (
        f"[servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(args)}\n"
        f'cwd = {json.dumps(str(ROOT))}\nscope = "shared"\n'  # one instance: no spare beside it
    )


def _log_until(daemon: DaemonProcess, server: str, wanted: str, within: float = 10.0) -> dict[str, Any]:
    """``GET /v1/servers/{server}/log`` asked again until some instance's lines hold ``wanted``."""
    deadline = time.monotonic() + within
    while True:
        answer = daemon.request("GET", f"/v1/servers/{server}/log")
        assert answer.status == 200, answer.body
        log: dict[str, Any] = answer.json()
        if any(wanted in line for entry in log["instances"] for line in entry["lines"]):
            return log
        assert time.monotonic() < deadline, f"{wanted!r} never reached the log: {log}"


def test_a_server_that_writes_more_than_a_pipe_holds_on_stderr_before_answering_still_starts(
    tmp_path: Path,
) -> None:
    """200 KB of log lines before it reads its stdin: the call is answered, and the log keeps the last lines."""
    daemon = DaemonProcess(tmp_path, _config("chatty", "--stderr-bytes", "200000"))
    try:
        answer = daemon.request(
            "POST", "/v1/call", {"server": "chatty", "tool": "echo", "arguments": {"text": "up"}}
        )
        assert answer.status == 200, answer.body
        assert answer.json()["result"]["content"][0]["text"] == "up"
        log = daemon.request("GET", "/v1/servers/chatty/log?lines=5").json()
        (running,) = [entry for entry in log["instances"] if entry["running"]]
        assert len(running["lines"]) == 5 and all(
            line.startswith("startup log line") for line in running["lines"]
        )
        assert running["bytes"] >= 200_000 and running["dropped"] > 2000, (
            running
        )  # bounded: most lines dropped
        assert running["exitCode"] is None
    finally:
        daemon.close()


def test_a_server_that_fails_at_start_is_reported_with_its_stderr_line_and_exit_code(tmp_path: Path) -> None:
    """``FATAL: API_KEY is not set`` and exit 3: both in the call's error, and in ``mcpx logs``."""
    daemon = DaemonProcess(tmp_path, _config("keyed", "--fatal", "FATAL: API_KEY is not set", "--exit", "3"))
    try:
        answer = daemon.request("POST", "/v1/call", {"server": "keyed", "tool": "echo", "arguments": {}})
        error = answer.json()["error"]
        assert answer.status == 502 and error["code"] == "start-failed", error
        assert "FATAL: API_KEY is not set" in error["message"], error
        assert "exited with code 3" in error["message"], error
        shown = daemon.mcpx("logs", "keyed")
        assert shown.returncode == 0, shown.stderr
        text = shown.stdout.decode()
        assert "FATAL: API_KEY is not set" in text and "exit code 3" in text, text
    finally:
        daemon.close()


def test_mcpx_logs_shows_what_a_running_server_wrote_on_stderr(tmp_path: Path) -> None:
    """A tool that writes a line on stderr: ``mcpx logs`` shows it under the running instance."""
    daemon = DaemonProcess(tmp_path, _config("talker"))
    try:
        for n in (1, 2):
            said = daemon.request(
                "POST", "/v1/call", {"server": "talker", "tool": "say", "arguments": {"text": f"hello {n}"}}
            )
            assert said.status == 200, said.body
        _log_until(daemon, "talker", "hello 2")
        shown = daemon.mcpx("logs", "talker")
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.decode().splitlines()
        header = next(
            i for i, line in enumerate(lines) if line.startswith("== talker instance") and "running" in line
        )
        assert lines.index("hello 1") > header and lines.index("hello 2") == lines.index("hello 1") + 1, lines
        unknown = daemon.mcpx("logs", "nobody")
        assert unknown.returncode != 0 and b"no server named 'nobody'" in unknown.stderr, unknown.stderr
        bad = daemon.request("GET", "/v1/servers/talker/log?lines=lots")
        assert bad.status == 400 and "lines must be a whole number" in bad.json()["error"]["message"]
    finally:
        daemon.close()


def test_each_stderr_line_is_stamped_with_the_unix_time_it_was_read_during_the_probe_and_after(
    tmp_path: Path,
) -> None:
    """``times`` in ``GET /v1/servers/{name}/log`` are Unix seconds, in order, for every line.

    The lines the server writes while the era probe talks to it are read by
    the probe, those after it by the client the process is handed to: both
    stamp them with the wall clock (spec/gateway.md §8), never with a
    monotonic one.
    """
    before = time.time()
    daemon = DaemonProcess(tmp_path, _config("talker", "--stderr-bytes", "2000"))
    try:
        said = daemon.request(
            "POST", "/v1/call", {"server": "talker", "tool": "say", "arguments": {"text": "later"}}
        )
        assert said.status == 200, said.body
        log = _log_until(daemon, "talker", "later")
        after = time.time()
        (entry,) = [e for e in log["instances"] if any("later" in line for line in e["lines"])]
        times = entry["times"]
        assert len(times) == len(entry["lines"]) > 1, entry
        assert all(before - 1 <= t <= after + 1 for t in times), (before, times, after)
        assert times == sorted(times), times
    finally:
        daemon.close()


@pytest.mark.parametrize(
    ("revisions", "era"), [(None, "modern"), ("2025-11-25", "legacy")], ids=["modern", "legacy"]
)
def test_a_stdio_servers_first_start_spawns_it_once(tmp_path: Path, revisions: str | None, era: str) -> None:
    """No era cached: the probe's process is the instance that answers the call; one start, in either era."""
    starts = tmp_path / "starts"
    options = ["--starts", str(starts)] + (["--revisions", revisions] if revisions else [])
    daemon = DaemonProcess(tmp_path, _config("once", *options))
    try:
        call = {"server": "once", "tool": "echo", "arguments": {"text": "first"}}
        answer = daemon.request("POST", "/v1/call", call)
        assert answer.status == 200 and answer.json()["result"]["content"][0]["text"] == "first", answer.body
        assert len(starts.read_text().split()) == 1, starts.read_text()
        cached = json.loads((tmp_path / "state" / "upstream-eras.json").read_text())
        assert [entry["era"] for entry in cached["eras"].values()] == [era], cached
        assert daemon.request("POST", "/v1/call", call).status == 200  # the same instance goes on serving
        assert len(starts.read_text().split()) == 1
    finally:
        daemon.close()
