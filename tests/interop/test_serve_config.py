"""``mcpx serve`` and the daemon it finds: another configuration is refused, and pass-through is each host's.

One daemon serves a state directory.  A host's ``mcpx serve`` whose
configuration file (``--config``, ``MCPX_CONFIG``), file contents or
settings differ from what the running daemon was started with is not
served by it: the shim says what differs and how to go on, and exits 2.
``mcp.passthrough`` is the host's own choice (``--passthrough``,
``MCPX_MCP_PASSTHROUGH``), carried to the daemon in the hello.
spec/gateway.md §9 "A daemon of another configuration".

Every test runs real processes: ``python -m mcpx serve`` with pipes, as a
host spawns it, against the daemon the first one starts (private HOME and
state directory, an ephemeral port); the upstreams are
``tests/interop/_named_server.py`` processes, ``alpha`` and ``beta``, whose
own tools are ``alpha-hello`` and ``beta-hello``.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from mcpx.gateway._state import daemon_info

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)
GATEWAY_TOOLS = {"mcpx_servers", "mcpx_search", "mcpx_describe", "mcpx_call"}


def _server(name: str, log: Path) -> str:
    python = json.dumps(sys.executable)
    return f'[servers.{name}]\ncommand = {python}\nargs = ["-m", "tests.interop._named_server", "{name}", "{log}"]\n'


class Home:
    """A private HOME and state directory, and a configuration file with ``alpha`` and ``beta`` in it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "state"
        self.config = root / "config.toml"
        self.config.write_text(_server("alpha", root / "alpha.log") + _server("beta", root / "beta.log"))
        self.env = {key: value for key, value in os.environ.items() if not key.startswith("MCPX_")}
        self.env.update(HOME=str(root), MCPX_STATE=str(self.state), MCPX_TRANSPORT_PORT="0")
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

    def serve(self, *args: str, **env: str) -> Host:
        return Host(self, args, env)

    def refused(self, *args: str, **env: str) -> str:
        """A serve that must not be served: its exit code is 2 and nothing is on its stdout; its stderr."""
        done = subprocess.run(
            [sys.executable, "-m", "mcpx", "serve", *args],
            env={**self.env, **env},
            input=b"",
            capture_output=True,
            timeout=60,
            cwd=ROOT,
            check=False,
        )
        said = done.stderr.decode()
        assert done.returncode == 2, said
        assert done.stdout == b"", done.stdout
        assert "Traceback" not in said, said
        return said

    def stop(self) -> None:
        subprocess.run(
            [sys.executable, "-m", "mcpx", "stop"],
            env=self.env,
            capture_output=True,
            timeout=60,
            cwd=ROOT,
            check=False,
        )


class Host:
    """``mcpx serve ARGS`` as a legacy host spawns it (2025-06-18): lines in, lines out."""

    def __init__(self, home: Home, args: tuple[str, ...], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mcpx", "serve", *args],
            env={**home.env, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        self.buffer = b""
        self.ids = iter(range(1, 1 << 30))
        self.heard: list[dict[str, Any]] = []  # the notifications read so far, in order
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "h", "version": "1"},
        }
        self.initialized = self.request("initialize", init)["result"]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(orjson.dumps(message) + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request_id = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})
        return self._read_until(
            lambda message: message.get("id") == request_id and "method" not in message,
            f"an answer to {method}",
        )

    def until_heard(self, method: str) -> dict[str, Any]:
        """The first notification ``method`` the host is sent (one read already counts)."""
        for note in self.heard:
            if note["method"] == method:
                return note
        return self._read_until(
            lambda message: message.get("method") == method and "id" not in message, method
        )

    def _read_until(self, wanted: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        """Read lines until one is ``wanted`` (60 s at most); the notifications on the way are kept."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + 60
        while True:
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    raise AssertionError(f"no {what} within 60 s; {self.describe()}")
                data = os.read(fd, 65536)
                if not data:
                    raise AssertionError(f"mcpx serve closed its stdout; {self.describe()}")
                self.buffer += data
            line, _, self.buffer = self.buffer.partition(b"\n")
            message: dict[str, Any] = orjson.loads(line)
            if "method" in message and "id" not in message:
                self.heard.append(message)
            if wanted(message):
                return message

    def tools(self) -> set[str]:
        answer = self.request("tools/list")
        assert "result" in answer, answer
        return {str(tool["name"]) for tool in answer["result"]["tools"]}

    def describe(self) -> str:
        code = self.process.poll()
        if code is None:
            return "mcpx serve still running"
        assert self.process.stderr is not None
        return f"mcpx serve exited {code}; stderr: {self.process.stderr.read().decode(errors='replace')!r}"

    def close(self) -> str:
        """End the host's input: the exit code is 0; what the serve said on stderr."""
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=30)
        said = self.process.stderr.read().decode(errors="replace")
        assert code == 0, said
        return said


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    made = Home(tmp_path)
    try:
        yield made
    finally:
        made.stop()


@pytest.mark.parametrize("how", ["--config", "MCPX_CONFIG"])
def test_a_serve_with_another_config_is_refused_naming_both_files_and_what_to_do(
    home: Home, how: str
) -> None:
    first = home.serve("--config", str(home.config))
    other = home.root / "other.toml"
    other.write_text(_server("gamma", home.root / "gamma.log"))
    said = home.refused("--config", str(other)) if how == "--config" else home.refused(MCPX_CONFIG=str(other))
    info = daemon_info(home.state)
    assert info is not None
    pid = info["pid"]
    assert f"not served: the daemon running for {home.state} (pid {pid})" in said, said
    assert f"started with the configuration file {home.config}" in said, said
    assert f"this serve reads {other}" in said, said
    assert f"mcpx stop --state {home.state}" in said and "--state DIR" in said, said
    assert f"--config {other}" in said, said  # the entry to put in the host's configuration
    assert first.tools() == GATEWAY_TOOLS  # the daemon's own host is served as before
    first.close()


def test_the_same_config_says_nothing_and_is_served(home: Home) -> None:
    first = home.serve("--config", str(home.config))
    second = home.serve(MCPX_CONFIG=str(home.config))  # the same file, named another way
    assert second.tools() == GATEWAY_TOOLS
    assert second.close() == ""
    assert "started a daemon" in first.close()  # the first started it; the second said nothing at all


def test_servers_added_to_the_file_are_refused_until_the_daemon_is_restarted(home: Home) -> None:
    """A daemon reads its configuration once: an edited file is a difference, and `mcpx stop` is the way on."""
    first = home.serve("--config", str(home.config))
    assert first.tools() == GATEWAY_TOOLS
    first.close()
    with home.config.open("a") as config:
        config.write(_server("gamma", home.root / "gamma.log"))
    said = home.refused("--config", str(home.config))
    assert f"{home.config} has changed since the daemon" in said, said
    assert "reads its configuration only when it starts" in said, said
    home.stop()
    after = home.serve("--config", str(home.config))
    listed = after.request("tools/call", {"name": "mcpx_servers", "arguments": {}})
    names = [server["name"] for server in listed["result"]["structuredContent"]["servers"]]
    assert names == ["alpha", "beta", "gamma"], listed
    after.close()


def test_a_file_touched_but_not_changed_is_no_difference(home: Home) -> None:
    first = home.serve("--config", str(home.config))
    os.utime(home.config, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))  # a new mtime, the same bytes
    second = home.serve("--config", str(home.config))
    assert second.close() == ""
    first.close()


def test_a_setting_from_the_environment_that_differs_is_refused_naming_it(home: Home) -> None:
    first = home.serve("--config", str(home.config))
    said = home.refused("--config", str(home.config), MCPX_POOL_CALL_TIMEOUT="99s")
    assert "pool.callTimeout is 1m39s here (from MCPX_POOL_CALL_TIMEOUT); the daemon's is 2m" in said, said
    assert "configuration file" not in said, said  # the file is the same: only the setting is named
    # a listener setting a stdio host never meets is no difference
    other_port = home.serve("--config", str(home.config), MCPX_TRANSPORT_PORT="9")
    assert other_port.close() == ""
    first.close()


@pytest.mark.parametrize("mode", ["fds", "lines"])
def test_passthrough_gives_that_host_the_server_s_own_tools_and_another_host_the_gateway_s(
    home: Home, mode: str
) -> None:
    relay = {"MCPX_SERVE_RELAY": "1"} if mode == "lines" else {}
    gateway = home.serve("--config", str(home.config), **relay)
    passed = home.serve("--config", str(home.config), "--passthrough", "alpha", **relay)
    both = home.serve("--config", str(home.config), "--passthrough", "alpha,beta", **relay)
    env_passed = home.serve("--config", str(home.config), MCPX_MCP_PASSTHROUGH="beta", **relay)
    assert passed.tools() == {"alpha-hello", *GATEWAY_TOOLS}  # pass-through keeps the gateway's tools
    assert passed.initialized["capabilities"]["tools"]["listChanged"] is True
    assert both.tools() == {"alpha-hello", "beta-hello", *GATEWAY_TOOLS}
    assert env_passed.tools() == {
        "beta-hello",
        *GATEWAY_TOOLS,
    }  # the environment of the host's own serve is honoured
    assert gateway.tools() == GATEWAY_TOOLS
    assert gateway.initialized["capabilities"]["tools"]["listChanged"] is False
    hello = passed.request("tools/call", {"name": "alpha-hello", "arguments": {}})
    assert hello["result"]["content"][0]["text"] == "hello from alpha", hello
    for host in (passed, both, env_passed):
        assert host.close() == ""  # a pass-through choice is no difference: nothing to say
    assert "started a daemon" in gateway.close()


def test_a_passthrough_the_daemon_was_started_with_does_not_leak_to_a_host_that_chose_none(
    home: Home,
) -> None:
    first = home.serve(
        "--config", str(home.config), MCPX_MCP_PASSTHROUGH="alpha"
    )  # starts the daemon with it
    plain = home.serve("--config", str(home.config))
    assert first.tools() == {"alpha-hello", *GATEWAY_TOOLS}
    assert plain.tools() == GATEWAY_TOOLS
    plain.close()
    first.close()


def test_an_unknown_passthrough_name_is_refused_with_the_configured_names(home: Home) -> None:
    said = home.refused("--config", str(home.config), "--passthrough", "alpah")
    assert "mcp.passthrough names 'alpah' (--passthrough)" in said, said
    assert "configured servers: alpha, beta" in said, said


def test_the_daemon_refuses_a_hello_naming_a_server_it_does_not_have(home: Home) -> None:
    """The daemon's own check, for a shim that did not make it: a refusal naming its servers, no connection."""
    first = home.serve("--config", str(home.config))
    info = daemon_info(home.state)
    assert info is not None
    read, write = os.pipe()
    mirror = os.memfd_create("mirror")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(info["serve"])
        hello = orjson.dumps({"v": 1, "mode": "fds", "resume": None, "passthrough": ["gamma"]}) + b"\n"
        socket.send_fds(sock, [hello], [read, write, mirror])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    for fd in (read, write, mirror):
        os.close(fd)
    refused = orjson.loads(answer)["refused"]
    assert refused == "--passthrough names gamma, not a server of the daemon (configured: alpha, beta)"
    assert first.tools() == GATEWAY_TOOLS
    first.close()


@pytest.mark.parametrize("mode", ["fds", "lines"])
def test_a_daemons_refusal_ends_the_serve_with_it_in_either_mode(tmp_path: Path, mode: str) -> None:
    """A refusal is the shim's to report and end on: never relayed to the host, never taken for a lost daemon.

    The daemon here is the test's own socket (``daemon.json`` names it and
    the test's pid): it refuses every hello, as the daemon refuses one naming
    a server it lacks.  In ``lines`` mode the socket is also the host's
    channel, so the refusal must not reach the host's stdout, and the shim
    must not reconnect as it does after a daemon died.
    """
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = str(tmp_path / "serve.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    listener.settimeout(30)
    info = {"pid": os.getpid(), "url": "http://127.0.0.1:9/", "mcp": "http://127.0.0.1:9/mcp", "serve": path}
    (state / "daemon.json").write_text(json.dumps(info))
    env = {**os.environ, "HOME": str(tmp_path), "MCPX_STATE": str(state)}
    env.pop("MCPX_CONFIG", None)
    env.pop("MCPX_SERVE_RELAY", None)
    if mode == "lines":
        env["MCPX_SERVE_RELAY"] = "1"
    process = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "serve"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    message = "--passthrough names gamma, not a server of the daemon (configured: alpha, beta)"
    hellos = []
    try:
        with listener:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(30)
                data, fds, _, _ = socket.recv_fds(conn, 65536, 3)
                for fd in fds:
                    os.close(fd)
                while b"\n" not in data:
                    data += conn.recv(65536)
                hellos.append(orjson.loads(data.partition(b"\n")[0]))
                conn.sendall(orjson.dumps({"refused": message}) + b"\n")
            listener.settimeout(2)
            with pytest.raises(TimeoutError):  # no second hello: the shim took no refusal for a lost daemon
                listener.accept()[0].close()
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        started = daemon_info(state)  # a shim that took the refusal for a lost daemon starts a real one
        if started is not None and started["pid"] != os.getpid():
            os.kill(int(started["pid"]), 15)
    said = err.decode(errors="replace")
    assert [hello["mode"] for hello in hellos] == [mode]
    assert process.returncode == 2, said
    assert out == b"", out  # nothing reached the host: the refusal is not a message of its
    assert f"mcpx: not served: {message}" in said, said
    assert "Traceback" not in said and "stopped" not in said, said


def test_a_list_change_reaches_the_hosts_whose_view_passes_the_server_and_no_other(home: Home) -> None:
    """Per-host views (spec/gateway.md §9): only a view passing the server has its tools change.

    Three hosts on one daemon: one passes ``conformance`` through, one passes
    ``alpha`` (its tools can change too: ``tools.listChanged`` is true for
    both), and one has the gateway's fixed tools (false).  The upstream's
    list change reaches the first, which then lists the new tool, and
    neither other: each one's ping, sent once the change was read and
    stored, comes back with nothing before it.
    """
    python = json.dumps(sys.executable)
    with home.config.open("a") as config:
        config.write(
            f'[servers.conformance]\ncommand = {python}\nargs = ["-m", "mcpx", "demo", "--profile", "conformance"]\n'
            'scope = "shared"\n'
        )
    plain = home.serve("--config", str(home.config))
    other = home.serve("--config", str(home.config), "--passthrough", "alpha")
    passed = home.serve("--config", str(home.config), "--passthrough", "conformance")
    for host, can_change in ((passed, True), (other, True), (plain, False)):
        assert host.initialized["capabilities"]["tools"]["listChanged"] is can_change
    assert "test_dynamic_tool" not in passed.tools()
    assert other.tools() == {"alpha-hello", *GATEWAY_TOOLS} and plain.tools() == GATEWAY_TOOLS
    changed = passed.request("tools/call", {"name": "test_trigger_tool_change", "arguments": {}})
    assert changed["result"]["content"][0]["text"] == "tool list changed", changed
    passed.until_heard("notifications/tools/list_changed")
    assert "test_dynamic_tool" in passed.tools()  # the change was read again and stored for every view
    for host in (other, plain):
        assert host.request("ping")["result"] == {}
        assert host.heard == [], host.heard  # nothing for a view that does not pass the server
    assert other.tools() == {"alpha-hello", *GATEWAY_TOOLS} and plain.tools() == GATEWAY_TOOLS
    for host in (passed, other, plain):
        host.close()
