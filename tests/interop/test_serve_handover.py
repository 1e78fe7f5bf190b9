"""``mcpx serve`` hands the host's stdio to the daemon: one scope per host, and nothing lost when the daemon dies.

Every test drives the real processes an MCP host would: it spawns
``python -m mcpx serve`` with pipes, writes JSON-RPC lines and reads what
comes back, with a daemon of its own (private HOME and state directory, an
ephemeral port) whose upstream is ``mcpx demo``.  Both eras are spoken: a
legacy host that initializes at 2025-06-18, and a 2026-07-28 host that
states ``_meta`` on every request.  The same tests run with the descriptor
hand-over and with the ``lines`` fallback (``MCPX_SERVE_RELAY=1``).
"""

from __future__ import annotations

import http.client
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from mcpx.gateway._state import daemon_info

from ._daemon_process import watch_events

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "host", "version": "1"},
}


class Host:
    """``mcpx serve`` spawned as a host spawns it: lines in, lines out."""

    def __init__(self, env: dict[str, str], era: str) -> None:
        self.era = era
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mcpx", "serve"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        self.buffer = b""
        self.ids = iter(range(1, 1 << 30))
        if era == "legacy":
            init = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "h", "version": "1"},
            }
            answer = self.request("initialize", init)
            assert answer["result"]["protocolVersion"] == "2025-06-18"
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(orjson.dumps(message) + b"\n")
        self.process.stdin.flush()

    def start(self, method: str, params: dict[str, Any] | None = None) -> int:
        request_id = next(self.ids)
        params = dict(params or {})
        if self.era == "modern":
            params["_meta"] = MODERN_META
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def read(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next message the host receives (waiting for its line, at most ``timeout``)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError(f"nothing arrived within {timeout} s; stderr: {self.stderr()}")
            data = os.read(fd, 65536)
            if not data:
                raise AssertionError(f"mcpx serve closed its stdout; stderr: {self.stderr()}")
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        message: dict[str, Any] = orjson.loads(line)
        return message

    def answer(self, request_id: int, timeout: float = 30.0) -> dict[str, Any]:
        while True:
            message = self.read(timeout)
            if message.get("id") == request_id and "method" not in message:
                return message

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.answer(self.start(method, params))

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.request(
            "tools/call",
            {"name": "mcpx_call", "arguments": {"server": "demo", "tool": tool, "arguments": arguments}},
        )

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=30)

    def stderr(self) -> str:
        if self.process.poll() is None:
            return "(still running)"
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")


def _text(answer: dict[str, Any]) -> str:
    return str(answer["result"]["content"][0]["text"])


def _start_daemon(env: dict[str, str]) -> dict[str, Any]:
    """``mcpx daemon`` started and listening: it has said where its ops API is (after writing daemon.json)."""
    state = Path(env["MCPX_STATE"])
    process = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "daemon", *(["--config", env["CONFIG"]] if "CONFIG" in env else [])],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        start_new_session=True,
    )
    listening = threading.Event()
    said: list[bytes] = []

    def drain() -> None:  # the daemon's stderr, kept and read to its end so that it never blocks
        assert process.stderr is not None
        for line in process.stderr:
            said.append(line)
            if b"ops API at" in line:
                listening.set()
        listening.set()  # it ended: the assertion below says why

    threading.Thread(target=drain, daemon=True).start()
    assert listening.wait(30), b"".join(said).decode(errors="replace")
    info = daemon_info(state)
    assert info is not None and info["pid"] == process.pid, b"".join(said).decode(errors="replace")
    return info


def _stop(env: dict[str, str]) -> None:
    info = daemon_info(Path(env["MCPX_STATE"]))
    if info is not None:
        os.kill(int(info["pid"]), signal.SIGTERM)


def _environment(root: Path, relay: bool, config: str | None = None) -> dict[str, str]:
    env = {**os.environ, "HOME": str(root), "MCPX_STATE": str(root / "state"), "MCPX_TRANSPORT_PORT": "0"}
    env.pop("MCPX_CONFIG", None)
    env.pop("MCPX_SERVE_RELAY", None)
    if relay:
        env["MCPX_SERVE_RELAY"] = "1"
    (root / "state").mkdir(mode=0o700)
    if config is not None:
        (root / "config.toml").write_text(config)
        env["CONFIG"] = env["MCPX_CONFIG"] = str(root / "config.toml")
    return env


@pytest.fixture(params=["fds", "lines"])
def relay(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "lines")


def _pool(env: dict[str, str]) -> dict[str, Any]:
    """The demo server's pool state, as ``GET /v1/servers`` gives it."""
    info = daemon_info(Path(env["MCPX_STATE"]))
    assert info is not None
    url = urlsplit(str(info["url"]))
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    conn.request("GET", "/v1/servers")
    (server,) = orjson.loads(conn.getresponse().read())["servers"]
    conn.close()
    pool: dict[str, Any] = server["pool"]
    return pool


def _pool_scopes(env: dict[str, str]) -> list[str]:
    return [str(i["scopeKey"]) for i in _pool(env)["instances"]]


CONNECTION_SCOPED = f"""
[servers.demo]
command = {orjson.dumps(sys.executable).decode()}
args = ["-m", "mcpx", "demo"]
scope = "connection"

[pool]
spare = false
"""


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_host_through_mcpx_serve_is_one_scope_in_both_eras(tmp_path: Path, era: str, relay: bool) -> None:
    """A connection-scoped upstream is started once per host, whatever the era, and stops when the host ends."""
    env = _environment(tmp_path, relay, CONNECTION_SCOPED)
    _start_daemon(env)
    try:
        first, second = Host(env, era), Host(env, era)
        for n in range(3):
            assert _text(first.call("echo", text=f"a{n}")) == f"a{n}"
            assert _text(second.call("echo", text=f"b{n}")) == f"b{n}"
        scopes = _pool_scopes(env)
        hosts = [key for key in scopes if key.startswith("host:")]
        assert len(hosts) == 2 and len(set(hosts)) == 2, scopes  # one instance per host, six calls made
        instances = {int(i["instance"]) for i in _pool(env)["instances"]}
        info = daemon_info(Path(env["MCPX_STATE"]))
        assert info is not None
        with watch_events(str(info["url"])) as events:
            assert first.close() == 0
            # Its process has gone, and the pool holds it no more, once /v1/events says it stopped.
            stopped = next(
                d for kind, d in events if kind == "instance.stopped" and d["instance"] in instances
            )
        gone = [key for key in hosts if stopped["reason"] == f"the connection it served ({key}) closed"]
        left = [key for key in _pool_scopes(env) if key.startswith("host:")]
        assert len(gone) == 1 and left == [key for key in hosts if key not in gone], (stopped, left)
        assert _text(second.call("echo", text="still")) == "still"
        assert second.close() == 0
    finally:
        _stop(env)


@pytest.fixture
def env(tmp_path: Path, relay: bool) -> Iterator[dict[str, str]]:
    environment = _environment(tmp_path, relay)
    yield environment
    _stop(environment)


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_daemon_killed_mid_call_answers_in_flight_requests_and_the_next_call_works(
    env: dict[str, str], era: str
) -> None:
    """SIGKILL with calls in flight: each answered with an error within 2 s; then a new daemon, no new initialize."""
    info = _start_daemon(env)
    host = Host(env, era)
    assert _text(host.call("echo", text="before")) == "before"
    in_flight = [
        host.start(
            "tools/call",
            {
                "name": "mcpx_call",
                "arguments": {"server": "demo", "tool": "sleep", "arguments": {"seconds": 30}},
            },
        )
        for _ in range(3)
    ]
    # A call reaching the upstream shows in GET /v1/servers only (the host is sent nothing, the demo's
    # sleep says nothing): looked at again until every call has reached it.
    deadline = time.monotonic() + 30
    while _pool(env)["inFlight"] < len(in_flight):
        assert time.monotonic() < deadline, _pool(env)
        time.sleep(0.02)
    os.kill(int(info["pid"]), signal.SIGKILL)
    killed = time.monotonic()
    answers = [host.answer(request_id, timeout=5) for request_id in in_flight]
    assert time.monotonic() - killed <= 2.0
    for answer in answers:
        assert answer["error"]["code"] == -32603 and "daemon stopped" in answer["error"]["message"]
    # The next call reaches a daemon started again; a legacy host is not asked to initialize.
    assert _text(host.call("echo", text="after")) == "after"
    new = daemon_info(Path(env["MCPX_STATE"]))
    assert new is not None and new["pid"] != info["pid"]
    assert host.close() == 0
    assert "Traceback" not in host.stderr()


def test_a_daemon_lost_three_times_within_a_minute_is_given_up_on(env: dict[str, str]) -> None:
    """Twice the next call works on a daemon started again; the third loss ends mcpx serve, naming the log."""
    state = Path(env["MCPX_STATE"])
    _start_daemon(env)
    host = Host(env, "legacy")
    sleep = {
        "name": "mcpx_call",
        "arguments": {"server": "demo", "tool": "sleep", "arguments": {"seconds": 30}},
    }
    for loss in (1, 2, 3):
        long = host.start("tools/call", sleep)
        # Answered after the long call was read and started: the daemon has it in flight.
        assert _text(host.call("echo", text=f"before {loss}")) == f"before {loss}"
        info = daemon_info(state)
        assert info is not None
        os.kill(int(info["pid"]), signal.SIGKILL)
        # The shim has seen the loss once it answers the call in flight; then it starts a daemon again.
        assert host.answer(long, timeout=10)["error"]["data"] == {"kind": "daemon-lost"}
        if loss < 3:
            continue
        assert host.process.wait(timeout=30) == 1
        stderr = host.stderr()
        assert "stopped 3 times within a minute; giving up" in stderr, stderr
        assert str(state / "daemon.log") in stderr and "Traceback" not in stderr


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_shim_exits_when_the_host_ends_and_keeps_nothing_open(env: dict[str, str], loop: str) -> None:
    """End of input: the daemon drains, says the connection ended, and the shim exits 0 with stdout closed.

    The echo's call starts the upstream while the host's pipes are the
    daemon's: the process it spawns must not hold them (on uvloop, whose
    spawn closes only close-on-exec descriptors, it did).
    """
    env["MCPX_LOOP"] = loop
    _start_daemon(env)
    host = Host(env, "legacy")
    assert _text(host.call("echo", text="x")) == "x"
    assert host.close() == 0
    assert host.process.stdout is not None and host.process.stdout.read() == b""


def test_mcpx_serve_imports_neither_typer_nor_the_protocol_machines(env: dict[str, str]) -> None:
    """The shim a host spawns loads the standard library and the settings, not the daemon's machinery."""
    _start_daemon(env)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "mcpx", "serve"],
        input=orjson.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}}
        )
        + b"\n",
        env=env,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    answer = orjson.loads(done.stdout.splitlines()[0])
    assert answer["id"] == 1 and "mcpx_call" in [tool["name"] for tool in answer["result"]["tools"]]
    imported = {
        line.split(b"|")[-1].strip().decode()
        for line in done.stderr.splitlines()
        if line.startswith(b"import time:")
    }
    assert "mcpx.gateway._shim" in imported
    heavy = ("typer", "click", "anyio", "h11", "mcpx.core", "mcpx.client", "mcpx.drivers", "mcpx.cli._main")
    assert sorted(m for m in imported if m.startswith(heavy)) == []
