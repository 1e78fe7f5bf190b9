"""Every setting ``mcpx settings`` shows changes what it says, on a running daemon or ``mcpx serve``.

One proof per key of the settings table (``PROOFS``), each a test that
starts a daemon (``mcpx daemon`` in a private HOME and state directory) with
the setting given as a user gives it, in the environment, and checks the
behaviour the setting's description promises, at a value where the default
would behave otherwise.  ``test_every_setting_has_its_proof`` fails when a
key is added to the table without one.  A setting that is not in force yet
(``NOT_YET``) is refused with the reason, wherever it is set.

Hosts are real processes: ``mcpx serve`` with pipes (``Host``), and raw
HTTP on loopback for ``/mcp`` and ``/v1``.  Waits are for a line, an answer
or a process; where a setting is a length of time, the proof waits for it
to pass and no longer.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpx.cli._gateway import wait_for_exit
from mcpx.config._settings import NOT_YET, SETTINGS, env_name

from ..fuzz._mcp import CC, CI, MODERN, PV, initialize, notification, request, to_line
from ..fuzz._serve_host import ROOT, WAIT, Daemon, Host
from ._daemon_process import children, daemons_of

pytestmark = pytest.mark.timeout(120)

PROOFS: dict[str, str] = {}  # setting key -> the test that proves it


def proves(*keys: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def register(test: Callable[..., None]) -> Callable[..., None]:
        for key in keys:
            PROOFS[key] = test.__name__
        return test

    return register


# ----------------------------------------------------------------------------
# A daemon with settings, and what talks to it
# ----------------------------------------------------------------------------

ASKING = f"""
[servers.asking]
command = {json.dumps(sys.executable)}
args = ["-m", "tests.interop._asking_server"]
cwd = {json.dumps(str(ROOT))}
"""


class Running(Daemon):
    """``mcpx daemon`` started with ``settings_env`` (``MCPX_*`` variables) and, when given, a config file."""

    def __init__(self, root: Path, config: str | None = None, **settings_env: str) -> None:
        super().__init__(root)
        self.env.update(settings_env)
        if config is not None:
            (root / "config.toml").write_text(config)
            self.env["MCPX_CONFIG"] = str(root / "config.toml")
        self.state.mkdir(mode=0o700, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mcpx", "daemon"],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        assert self.process.stderr is not None
        said = []
        for line in self.process.stderr:  # daemon.json is written before the daemon says where it serves
            said.append(line.decode(errors="replace"))
            if b"daemon serving MCP at http" in line:
                break
        else:
            raise AssertionError(f"the daemon did not start: {''.join(said)}")
        self.info: dict[str, Any] = json.loads((self.state / "daemon.json").read_bytes())
        host, _, port = self.info["url"].removeprefix("http://").rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)

    def said(self, fragment: str) -> str:
        """The daemon's next line on stderr that holds ``fragment`` (read until it comes, or stderr ends)."""
        assert self.process.stderr is not None
        heard = []
        for raw in self.process.stderr:
            line = raw.decode(errors="replace")
            if fragment in line:
                return line
            heard.append(line)
        raise AssertionError(f"the daemon never said {fragment!r}: {''.join(heard)}")

    def close(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(WAIT)
        # A host's ``mcpx serve`` starts a daemon again when this one ends under it (a test that
        # stops the daemon mid-call), with ``--state`` this one's: it goes too.  The host's shim
        # has been killed by now (its context ends first), so every daemon it started is listed.
        for pid in daemons_of(self.state):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                if not wait_for_exit(pid, WAIT):
                    os.kill(pid, signal.SIGKILL)

    def http(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=WAIT)
        payload = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        sent = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        sent.update(headers or {})
        try:
            conn.putrequest(method, path, skip_host="host" in sent, skip_accept_encoding=True)
            for name, value in sent.items():
                conn.putheader(name, value)
            if payload is not None:
                conn.putheader("content-length", str(len(payload)))
            conn.endheaders(payload)
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def servers(self) -> dict[str, Any]:
        status, _, body = self.http("GET", "/v1/servers")
        assert status == 200, body
        return {s["name"]: s for s in json.loads(body)["servers"]}

    def mcpx(self, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "mcpx", *args],
            env={**self.env, **env},
            capture_output=True,
            timeout=WAIT,
            cwd=ROOT,
            check=False,
        )

    def legacy_session(self, version: str = "2025-11-25") -> str:
        """A legacy Streamable HTTP session on /mcp: its ``Mcp-Session-Id``."""
        status, headers, body = self.http("POST", "/mcp", initialize(1, version))
        assert status == 200, body
        session = headers["mcp-session-id"]
        status, _, body = self.http(
            "POST",
            "/mcp",
            notification("notifications/initialized"),
            {"mcp-session-id": session, "mcp-protocol-version": version},
        )
        assert status == 202, body
        return session


@contextlib.contextmanager
def running(
    tmp_path: Path, name: str = "d", config: str | None = None, **settings_env: str
) -> Iterator[Running]:
    (tmp_path / name).mkdir()
    daemon = Running(tmp_path / name, config, **settings_env)
    try:
        yield daemon
    finally:
        daemon.close()


def mcpx_call(request_id: Any, server: str, tool: str, meta: Any = None, **arguments: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "name": "mcpx_call",
        "arguments": {"server": server, "tool": tool, "arguments": arguments},
    }
    if meta is not None:
        params["_meta"] = meta
    return request(request_id, "tools/call", params)


def legacy_host(daemon: Daemon, version: str = "2025-11-25", capabilities: Any = None) -> Host:
    host = Host(daemon, version, "fds", handshake=False)
    host.send(initialize("init", version, capabilities))
    (answer,) = host.replies(1)
    assert answer["result"]["protocolVersion"] == version, answer
    host.send(notification("notifications/initialized"))
    return host


def text_of(answer: dict[str, Any]) -> str:
    result = answer.get("result")
    assert result is not None, answer
    return " ".join(block.get("text", "") for block in result.get("content", []))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# ----------------------------------------------------------------------------
# The walk
# ----------------------------------------------------------------------------


def test_every_setting_has_its_proof() -> None:
    """Each key ``mcpx settings`` prints has a proof below, and each proof is a test of this module."""
    root = Daemon(Path("/nonexistent-home"))
    shown = root.settings_shown()
    assert set(shown) == {d.key for d in SETTINGS}
    missing = sorted(set(shown) - set(PROOFS))
    assert not missing, f"settings without a proof of their effect: {missing}"
    assert not set(PROOFS) - set(shown), "a proof names a key that is not a setting"
    assert all(callable(globals().get(test)) for test in PROOFS.values())


@pytest.mark.parametrize("where", ["env", "file", "flag"])
def test_a_setting_not_in_force_is_refused_saying_why(tmp_path: Path, where: str) -> None:
    """``proto.askTTL`` governs the question broker, which mcpx has not got: set anywhere, it is refused."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPX_")}
    env.update(HOME=str(tmp_path), MCPX_STATE=str(tmp_path / "state"))
    args = [sys.executable, "-m", "mcpx", "settings"]
    for key in NOT_YET:
        if where == "env":
            env[env_name(key)] = "5m"
        elif where == "file":
            group, name = key.split(".")
            (tmp_path / "config.toml").write_text(f'[{group}]\n{name} = "5m"\n')
            args += ["--config", str(tmp_path / "config.toml")]
        else:
            args += ["--set", f"{key}=5m"]
        done = subprocess.run(args, env=env, capture_output=True, timeout=WAIT, cwd=ROOT, check=False)
        said = done.stderr.decode()
        assert done.returncode == 2, said
        assert f"{key} (in " in said and "is not in force" in said and "broker" in said, said
        shown = subprocess.run(
            [sys.executable, "-m", "mcpx", "settings"],
            env={k: v for k, v in env.items() if not k.startswith("MCPX_PROTO")},
            capture_output=True,
            timeout=WAIT,
            cwd=ROOT,
            check=False,
        )
        assert key not in shown.stdout.decode()  # never displayed as in force


# -- spec ---------------------------------------------------------------------------------------


def _logs_before_set_level(daemon: Daemon) -> list[Any]:
    """A legacy host that never sets a level calls the demo's ``count``: the log messages it is sent."""
    with legacy_host(daemon, "2025-06-18") as host:
        host.send(mcpx_call(1, "demo", "count", to=2))
        seen = []
        while True:
            message = host.message()
            if message.get("id") == 1:
                assert "counted to 2" in text_of(message), message
                return seen
            if message.get("method") == "notifications/message":
                seen.append(message["params"])


@proves("spec.first")
def test_spec_first_a_legacy_revision_first_sends_logs_before_set_level(tmp_path: Path) -> None:
    """With 2026-07-28 first (the default) no level means no log messages; a legacy revision first, info and up."""
    with running(tmp_path, "default") as daemon:
        assert _logs_before_set_level(daemon) == []
    with running(tmp_path, "legacy-first", MCPX_MCP_SPEC="2025-06-18") as daemon:
        logged = _logs_before_set_level(daemon)
        assert [p["data"] for p in logged] == ["counted 1", "counted 2"], logged


@proves("spec.precedence")
def test_spec_precedence_orders_whose_rules_win(tmp_path: Path) -> None:
    """The same conflict, decided by the order: 2025-11-25 ahead of 2026-07-28 sends the logs."""
    with running(tmp_path, MCPX_SPEC_PRECEDENCE="2025-11-25,2026-07-28") as daemon:
        logged = _logs_before_set_level(daemon)
        assert [p["data"] for p in logged] == ["counted 1", "counted 2"], logged


def _progress_messages(daemon: Daemon) -> list[Any]:
    """A 2024-11-05 host asks for progress on ``count``: the progress notifications it gets."""
    with legacy_host(daemon, "2024-11-05") as host:
        call = mcpx_call(1, "demo", "count", to=2)
        call["params"]["_meta"] = {"progressToken": "p"}
        host.send(call)
        seen = []
        while (message := host.message()).get("id") != 1:
            if message.get("method") == "notifications/progress":
                seen.append(message["params"])
        return seen


@proves("spec.lenient")
def test_spec_lenient_keeps_fields_the_revision_lacks(tmp_path: Path) -> None:
    """2024-11-05's progress has no ``message``: dropped when strict (the default), kept when lenient."""
    with running(tmp_path, "strict") as daemon:
        strict = _progress_messages(daemon)
    with running(tmp_path, "lenient", MCPX_SPEC_LENIENT="2024-11-05") as daemon:
        lenient = _progress_messages(daemon)
    assert strict and all("message" not in p for p in strict), strict
    assert lenient and all(p.get("message", "").startswith("step ") for p in lenient), lenient


# -- proto ----------------------------------------------------------------------------------------


@proves("proto.askTimeout")
def test_proto_ask_timeout_withdraws_an_unanswered_question(tmp_path: Path) -> None:
    """A legacy host that never answers the upstream's question: withdrawn after 1 s, and the call ends."""
    with (
        running(tmp_path, config=ASKING, MCPX_PROTO_ASK_TIMEOUT="1s") as daemon,
        legacy_host(daemon, capabilities={"elicitation": {}}) as host,
    ):
        host.send(mcpx_call(1, "asking", "ask_twice"))
        question = host.message()
        assert question.get("method") == "elicitation/create", question
        asked = time.monotonic()
        while True:  # not answered: the question is withdrawn, then the call is given up
            message = host.message()
            if message.get("id") == 1:
                break
        waited = time.monotonic() - asked
        assert 0.9 <= waited < 10, waited  # the default is ten minutes
        assert "result" in message or "error" in message, message


MODERN_META = {PV: MODERN, CC: {"elicitation": {}}, CI: {"name": "walk", "version": "1"}}


def _modern_round(host: Host, request_id: str, params: dict[str, Any]) -> dict[str, Any]:
    host.send(request(request_id, "tools/call", params))
    (answer,) = host.replies(1)
    return answer


def _answer_round(result: dict[str, Any], word: str) -> dict[str, Any]:
    assert result.get("resultType") == "input_required", result
    return {
        "inputResponses": {
            key: {"action": "accept", "content": {"word": word}} for key in result["inputRequests"]
        },
        "requestState": result["requestState"],
    }


def _ask_twice_params(**extra: Any) -> dict[str, Any]:
    return {
        "name": "mcpx_call",
        "arguments": {"server": "asking", "tool": "ask_twice", "arguments": {}},
        "_meta": MODERN_META,
        **extra,
    }


@proves("proto.askRounds")
def test_proto_ask_rounds_stops_a_call_that_keeps_asking(tmp_path: Path) -> None:
    """A 2026-07-28 host, a tool that asks twice: two rounds by default; with askRounds 1 the second is refused."""
    with running(tmp_path, "default", config=ASKING) as daemon, Host(daemon, MODERN, "fds") as host:
        first = _modern_round(host, "a1", _ask_twice_params())
        second = _modern_round(host, "a2", _ask_twice_params(**_answer_round(first["result"], "one")))
        done = _modern_round(host, "a3", _ask_twice_params(**_answer_round(second["result"], "two")))
        assert text_of(done) == "one two", done
    with (
        running(tmp_path, "one", config=ASKING, MCPX_PROTO_ASK_ROUNDS="1") as daemon,
        Host(daemon, MODERN, "fds") as host,
    ):
        first = _modern_round(host, "b1", _ask_twice_params())
        stopped = _modern_round(host, "b2", _ask_twice_params(**_answer_round(first["result"], "one")))
        said = json.dumps(stopped)
        assert "proto.askRounds" in said and "more than 1 times" in said, stopped


@proves("proto.stateTTL")
def test_proto_state_ttl_refuses_a_stale_request_state(tmp_path: Path) -> None:
    """The retry carries a requestState older than stateTTL (1 s): refused, saying it expired."""
    with (
        running(tmp_path, config=ASKING, MCPX_PROTO_STATE_TTL="1s") as daemon,
        Host(daemon, MODERN, "fds") as host,
    ):
        first = _modern_round(host, "s1", _ask_twice_params())
        issued = time.monotonic()
        retry = _ask_twice_params(**_answer_round(first["result"], "one"))
        fresh = _modern_round(host, "s2", retry)  # in time: the next round
        assert fresh.get("result", {}).get("resultType") == "input_required", fresh
        late = _ask_twice_params(**_answer_round(fresh["result"], "two"))
        time.sleep(max(0.0, 1.2 - (time.monotonic() - issued)))  # the TTL itself is what is tested
        stale = _modern_round(host, "s3", late)
        assert "error" in stale and "expired" in json.dumps(stale), stale


# -- pool -----------------------------------------------------------------------------------------


@proves("pool.callTimeout")
def test_pool_call_timeout_ends_a_slow_call(tmp_path: Path) -> None:
    with running(tmp_path, MCPX_POOL_CALL_TIMEOUT="1s") as daemon, legacy_host(daemon) as host:
        started = time.monotonic()
        host.send(mcpx_call(1, "demo", "sleep", seconds=30))
        (answer,) = host.replies(1)
        took = time.monotonic() - started
        said = json.dumps(answer)
        assert took < 10 and "call-timeout" in said and "pool.callTimeout" in said, (took, answer)


@proves("pool.idleTimeout")
def test_pool_idle_timeout_stops_an_unused_instance(tmp_path: Path) -> None:
    """``0s``: the demo's instance stops once its call is done (by default it stays five minutes)."""
    with running(tmp_path, MCPX_POOL_IDLE_TIMEOUT="0s") as daemon:
        status, _, body = daemon.http(
            "POST", "/v1/call", {"server": "demo", "tool": "echo", "arguments": {"text": "x"}}
        )
        assert status == 200, body
        for upstream in children(daemon.process.pid):  # the instance's process, if it has not gone yet
            assert wait_for_exit(upstream, 10), "the idle instance was not stopped"
        pool = daemon.servers()["demo"]["pool"]
        assert pool["instances"] == [] and pool["spawnCount"] >= 1, pool


@proves("pool.drain")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_pool_drain_bounds_how_long_a_stopped_daemon_waits_for_its_calls(tmp_path: Path, signum: int) -> None:
    """``1s``: a call held by an unanswered question is cut a second after the signal (the default waits 10 s)."""
    with (
        running(tmp_path, config=ASKING, MCPX_POOL_DRAIN="1s") as daemon,
        legacy_host(daemon, capabilities={"elicitation": {}}) as host,
    ):
        host.send(mcpx_call(1, "asking", "ask_twice"))
        assert host.message().get("method") == "elicitation/create"
        upstreams = set(children(daemon.process.pid))
        daemon.process.send_signal(signum)
        told = time.monotonic()
        assert "1 call in flight get up to 1s" in daemon.said("stopping:")
        assert "still in flight after pool.drain are cut" in daemon.said("stopping:")
        assert daemon.process.wait(WAIT) == 0
        waited = time.monotonic() - told
        assert 0.9 <= waited < 8, waited
        assert all(wait_for_exit(pid, WAIT) for pid in upstreams), "an upstream outlived the daemon"


FAILING = f"""
[servers.broken]
command = {json.dumps(sys.executable)}
args = ["-c", "raise SystemExit(3)"]
scope = "shared"
"""


@proves("pool.backoff")
def test_pool_backoff_is_the_pause_before_a_failed_server_is_started_again(tmp_path: Path) -> None:
    """``200ms``: a server that fails to start is tried again after 0.2 s, then 0.4 s (by default 1 s, 2 s).

    The second call comes at once and waits for the retry (it falls within its wait): its answer
    comes when the pause has passed and the second start has failed.
    """
    with running(tmp_path, config=FAILING, MCPX_POOL_BACKOFF="200ms") as daemon:
        call = {"server": "broken", "tool": "anything", "arguments": {}}
        for spawns, pause in ((1, 0.2), (2, 0.4)):
            asked = time.monotonic()
            status, _, body = daemon.http("POST", "/v1/call", call)
            took = time.monotonic() - asked
            error = json.loads(body)["error"]
            assert status == 502 and error["code"] == "start-failed", (status, body)
            said = error["data"]["jsonrpc"]
            assert said["data"]["retryAfterSeconds"] == pytest.approx(pause, abs=0.05), error
            message = said["message"]  # the probe's advice, once, not the pool's as well
            assert "run its command by hand" in message and "Check its command" not in message, said
            assert daemon.servers()["broken"]["pool"]["spawnCount"] == spawns
            if spawns == 1:
                start = took  # one start, no pause
            else:  # the 0.2 s pause waited out (the call came at once), not the default 1 s
                assert took >= 0.15 and took - start < 0.9, (took, start)


def _slow(seconds: float, own: str | None = None) -> str:
    """A server that takes ``seconds`` to start; ``own``: its own ``startTimeout``."""
    config = f"""
[servers.slow]
command = {json.dumps(sys.executable)}
args = ["-m", "tests.interop._startup_server", "--sleep", "{seconds}"]
cwd = {json.dumps(str(ROOT))}
"""
    return config + (f'startTimeout = "{own}"\n' if own is not None else "")


@proves("pool.startTimeout")
def test_pool_start_timeout_bounds_a_slow_servers_start_and_names_itself(tmp_path: Path) -> None:
    """``1s``: a server that needs 3 s to start fails, naming the setting; its own ``startTimeout`` lets it start.

    The default (60 s) would wait for it. The failure is the pool's (the era probe waits as long for
    each answer), and says what to raise and its value, not a timeout that does not exist.
    """
    call = {"server": "slow", "tool": "echo", "arguments": {"text": "up"}}
    with running(tmp_path, "short", config=_slow(3), MCPX_POOL_START_TIMEOUT="1s") as daemon:
        asked = time.monotonic()
        status, _, body = daemon.http("POST", "/v1/call", call)
        took = time.monotonic() - asked
        error = json.loads(body)["error"]
        assert status == 502 and error["code"] == "start-failed", (status, body)
        assert "raise pool.startTimeout or the server's startTimeout (now 1s)" in error["message"], error
        assert "probe timeout" not in error["message"], error
        assert took < 2.9, took  # given up at 1 s, not when the server came up
    with running(tmp_path, "own", config=_slow(3, own="20s"), MCPX_POOL_START_TIMEOUT="1s") as daemon:
        status, _, body = daemon.http("POST", "/v1/call", call)
        assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == "up", (status, body)
        assert daemon.servers()["slow"]["startTimeout"] == "20s"


@proves("pool.maxSpawnsPerMinute")
def test_pool_max_spawns_per_minute_refuses_the_next_start(tmp_path: Path) -> None:
    """One start a minute: after a restart, the next call cannot start the server and says why."""
    with running(tmp_path, MCPX_POOL_MAX_SPAWNS_PER_MINUTE="1", MCPX_POOL_CALL_TIMEOUT="5s") as daemon:
        call = {"server": "demo", "tool": "echo", "arguments": {"text": "x"}}
        status, _, body = daemon.http("POST", "/v1/call", call)
        assert status == 200, body
        status, _, body = daemon.http("POST", "/v1/restart", {"server": "demo"})
        assert status == 200, body
        # A caller that waits 5 s at most (a start may be waited for a minute) is refused at once.
        started = time.monotonic()
        status, _, body = daemon.http("POST", "/v1/call", {**call, "timeout": 5})
        assert status != 200 and b"spawn-limit" in body, (status, body)
        assert time.monotonic() - started < 4


CONNECTION_SCOPED = f"""
[servers.demo]
command = {json.dumps(sys.executable)}
args = ["-m", "mcpx", "demo"]
scope = "connection"
"""


@proves("pool.spare")
def test_pool_spare_starts_a_connection_scoped_instance_ahead(tmp_path: Path) -> None:
    """A connection-scoped server in use: one more instance started ahead by default; none with it off."""
    call = {"server": "demo", "tool": "echo", "arguments": {"text": "x"}}  # a connection of its own
    with running(tmp_path, "spare", config=CONNECTION_SCOPED) as daemon:
        assert daemon.http("POST", "/v1/call", call)[0] == 200
        assert daemon.servers()["demo"]["pool"]["spawnCount"] == 2  # the call's, and the spare
    with running(tmp_path, "none", config=CONNECTION_SCOPED, MCPX_POOL_SPARE="false") as daemon:
        assert daemon.http("POST", "/v1/call", call)[0] == 200
        assert daemon.servers()["demo"]["pool"]["spawnCount"] == 1


# -- transport ------------------------------------------------------------------------------------


@proves("transport.address")
@pytest.mark.skipif(sys.platform != "linux", reason="127.0.0.2 is a loopback address on Linux only")
def test_transport_address_is_where_the_daemon_listens(tmp_path: Path) -> None:
    with running(tmp_path, MCPX_TRANSPORT_ADDRESS="127.0.0.2") as daemon:
        assert daemon.host == "127.0.0.2"
        assert daemon.http("GET", "/health")[0] == 200
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", daemon.port), timeout=WAIT).close()


@proves("transport.port")
def test_transport_port_is_the_port_it_listens_on(tmp_path: Path) -> None:
    port = free_port()
    with running(tmp_path, MCPX_TRANSPORT_PORT=str(port)) as daemon:
        assert daemon.port == port and daemon.http("GET", "/health")[0] == 200


def _origin_and_host(daemon: Running, headers: dict[str, str]) -> int:
    return daemon.http("POST", "/mcp", initialize(1), headers)[0]


@proves("transport.allowedOrigins")
def test_transport_allowed_origins_admits_the_origin_named(tmp_path: Path) -> None:
    with running(tmp_path, MCPX_TRANSPORT_ALLOWED_ORIGINS="https://app.example") as daemon:
        assert _origin_and_host(daemon, {"origin": "https://app.example"}) == 200
        assert _origin_and_host(daemon, {"origin": "https://other.example"}) == 403


@proves("transport.allowedHosts")
def test_transport_allowed_hosts_admits_the_host_named(tmp_path: Path) -> None:
    with running(tmp_path, MCPX_TRANSPORT_ALLOWED_HOSTS="mcpx.example") as daemon:
        assert _origin_and_host(daemon, {"host": "mcpx.example"}) == 200
        assert _origin_and_host(daemon, {"host": "other.example"}) == 403


def _slow_call(daemon: Running, session: str, seconds: float) -> tuple[int, dict[str, str], bytes, float]:
    started = time.monotonic()
    status, headers, body = daemon.http(
        "POST",
        "/mcp",
        mcpx_call(2, "demo", "sleep", seconds=seconds),
        {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"},
    )
    return status, headers, body, time.monotonic() - started


@proves("transport.sseKeepAlive")
def test_transport_sse_keep_alive_turns_a_slow_answer_into_a_stream(tmp_path: Path) -> None:
    """A 2.5 s call with keep-alive 1 s: an event stream with comments before the answer (default: JSON)."""
    with running(tmp_path, MCPX_TRANSPORT_SSE_KEEP_ALIVE="1s") as daemon:
        status, headers, body, _ = _slow_call(daemon, daemon.legacy_session(), 2.5)
        assert status == 200 and headers["content-type"].startswith("text/event-stream"), headers
        assert b"\n:" in b"\n" + body and b"slept 2.5s" in body, body


@proves("transport.ssePollAfter")
def test_transport_sse_poll_after_closes_a_long_call_s_stream(tmp_path: Path) -> None:
    """After 1 s the stream of a 3 s call closes with an event id to resume from, before the answer."""
    with running(tmp_path, MCPX_TRANSPORT_SSE_POLL_AFTER="1s") as daemon:
        status, headers, body, took = _slow_call(daemon, daemon.legacy_session(), 3)
        assert status == 200 and headers["content-type"].startswith("text/event-stream"), headers
        assert b"slept" not in body and b"id:" in body and b"retry:" in body, body
        assert took < 2.9, took


@proves("transport.stdioDrain")
def test_transport_stdio_drain_bounds_calls_after_the_end_of_input(tmp_path: Path) -> None:
    """``0s``: a call still running when the host closes stdin is not waited for (by default, 2 s are)."""
    with running(tmp_path, MCPX_TRANSPORT_STDIO_DRAIN="0s") as daemon:
        host = legacy_host(daemon)
        host.send(mcpx_call(1, "demo", "sleep", seconds=1.5))
        took, after = host.end(within=WAIT)
        assert took < 1.5 and after == [], (took, after)


@proves("transport.maxLine")
def test_transport_max_line_refuses_a_longer_line(tmp_path: Path) -> None:
    with running(tmp_path, MCPX_TRANSPORT_MAX_LINE="4096") as daemon, legacy_host(daemon) as host:
        host.send(mcpx_call(1, "demo", "echo", text="x" * 3000))
        assert text_of(host.replies(1)[0]) == "x" * 3000
        host.write(to_line(mcpx_call(2, "demo", "echo", text="x" * 5000)))
        (refused,) = host.replies(1)
        assert refused["error"]["code"] in (-32600, -32700) and refused["id"] is None, refused


@proves("transport.maxBody")
def test_transport_max_body_refuses_a_larger_body(tmp_path: Path) -> None:
    with running(tmp_path, MCPX_TRANSPORT_MAX_BODY="2048") as daemon:
        small = initialize(1)
        assert daemon.http("POST", "/mcp", small)[0] == 200
        big = json.dumps({**small, "params": {**small["params"], "pad": "x" * 2100}}).encode()
        assert daemon.http("POST", "/mcp", big)[0] == 413


@proves("transport.requestTimeout")
def test_transport_request_timeout_cuts_a_slow_client(tmp_path: Path) -> None:
    """Headers never finished: the client is answered 408 after 1 s (by default, after 10 s)."""
    with running(tmp_path, MCPX_TRANSPORT_REQUEST_TIMEOUT="1s") as daemon:
        with socket.create_connection((daemon.host, daemon.port), timeout=WAIT) as slow:
            started = time.monotonic()
            slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            answer = slow.recv(65536)
            took = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert 0.9 <= took < 5, took


# -- mcp, state, daemon ---------------------------------------------------------------------------


def _tool_names(daemon: Daemon) -> list[str]:
    with legacy_host(daemon) as host:
        host.send(request(1, "tools/list"))
        (listed,) = host.replies(1)
        return [tool["name"] for tool in listed["result"]["tools"]]


DEMO = f"""
[servers.demo]
command = {json.dumps(sys.executable)}
args = ["-m", "mcpx", "demo"]
"""


@proves("mcp.passthrough")
def test_mcp_passthrough_offers_the_server_s_own_tools(tmp_path: Path) -> None:
    """A configured server is behind ``mcpx_*`` unless passed through (the built-in default passes it)."""
    with running(tmp_path, "gateway", config=DEMO) as daemon:
        assert _tool_names(daemon) == ["mcpx_call", "mcpx_servers", "mcpx_search", "mcpx_describe"]
    with running(tmp_path, "pass", config=DEMO, MCPX_MCP_PASSTHROUGH="demo") as daemon:
        names = _tool_names(daemon)
        assert names[:2] == ["echo", "add"] and "count" in names, names


@proves("mcp.listWait")
def test_mcp_list_wait_bounds_how_long_a_listing_waits_for_a_server_still_starting(tmp_path: Path) -> None:
    """``0.3s``: a passed-through server that has not started is left out of the listing, shown as starting.

    The server starts only once a file exists, which the test creates at the
    end; the default (10 s) would hold the listing that long (demo, started
    beside it, may be in the listing or not: it is not what is shown here). What a host
    is told when the server comes is tests/interop/test_gateway_late_catalog.py's.
    """
    go = tmp_path / "slow-may-start"
    config = (
        DEMO
        + f"""
[servers.slow]
command = {json.dumps(sys.executable)}
args = ["-m", "tests.interop._startup_server", "--until", {json.dumps(str(go))}]
cwd = {json.dumps(str(ROOT))}
"""
    )
    env = {"MCPX_MCP_LIST_WAIT": "0.3s", "MCPX_MCP_PASSTHROUGH": "demo,slow"}
    try:
        with running(tmp_path, config=config, **env) as daemon:
            asked = time.monotonic()
            names = _tool_names(daemon)
            took = time.monotonic() - asked
            assert "say" not in names and took < 5, (took, names)  # answered without slow, not after 10 s
            assert daemon.servers()["slow"]["catalog"] == {"status": "starting"}
            go.touch()
    finally:
        go.touch()


@proves("state.dir")
def test_state_dir_is_where_the_daemon_is_found(tmp_path: Path) -> None:
    with running(tmp_path) as daemon:
        assert (daemon.state / "daemon.json").exists() and (daemon.state / "mcpx.sock").exists()
        assert daemon.mcpx("status").returncode == 0
        elsewhere = daemon.mcpx("status", MCPX_STATE=str(tmp_path / "elsewhere"))
        assert elsewhere.returncode == 1 and b"no daemon is running" in elsewhere.stderr


@proves("daemon.endpoint")
def test_daemon_endpoint_is_the_daemon_client_commands_talk_to(tmp_path: Path) -> None:
    with running(tmp_path) as daemon:
        there = daemon.mcpx("status", MCPX_STATE=str(tmp_path / "elsewhere"), MCPX_DAEMON=daemon.info["url"])
        assert there.returncode == 0, there.stderr
        assert json.loads(there.stdout)["health"]["status"] == "ok"
