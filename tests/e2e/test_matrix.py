"""The end-to-end matrix: host → mcpx daemon → upstream, every combination that matters.

A cell is one host revision (2024-11-05 … 2026-07-28) × one upstream era
(mcpx's demo server speaking only the legacy revisions, or only 2026-07-28)
× one host transport (``mcpx serve``, the stdio shim, or the daemon's /mcp
over HTTP) × one upstream transport (stdio, or Streamable HTTP), on each of
the daemon's event loops (asyncio, uvloop, trio).

One daemon per loop runs in a thread of this process (``run_daemon``) with
four upstreams configured: ``stdio-legacy``, ``stdio-modern``, ``http-legacy``
and ``http-modern`` (the two HTTP demos are started once per module).  Each
cell is a short conversation, checked the way a user would: the gateway's
tools are listed; ``mcpx_call`` reaches the upstream's ``echo``, ``weather``
(structured output) and ``fail`` (an ``isError`` result), and what comes back
is what the same upstream answers when called directly; ``count`` reports
its progress to the host.  A pass-through daemon per loop offers
``stdio-modern``'s tools under their own names, ahead of the gateway's.

Both hops go through the strict schema sweep, both ways: every frame the
daemon sends the host is checked against the host's revision, and every
frame an upstream sends the daemon against the upstream's (``sweep_frames``
below); every frame the host and the daemon's upstream clients send — both
run in this process — is checked by the global client-frame sweep
(tests/conftest.py).  ``mcpx serve`` relays bytes, so what passes through
it is checked at the host.  Not swept: the era probe's own exchanges
(``EraProbe`` is not a ``ClientSession``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from mcpx.client import Client, connect_http, connect_stdio
from mcpx.config import load_config
from mcpx.core import Revision, Send
from mcpx.core.client_session import ClientSession, Progress
from mcpx.gateway import run_daemon
from tests.conformance.http_peer import start_http_server, stop_http_server
from tests.conformance.sweep import SWEEP, _Disabled

pytestmark = pytest.mark.timeout(120)

LOOPS = ("asyncio", "uvloop", "trio")
HOST_REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
ERAS = {"legacy": "2024-11-05,2025-03-26,2025-06-18,2025-11-25", "modern": "2026-07-28"}
HOST_TRANSPORTS = ("shim", "http")
UPSTREAM_TRANSPORTS = ("stdio", "http")
UPSTREAMS = tuple(f"{transport}-{era}" for transport in UPSTREAM_TRANSPORTS for era in ERAS)
GATEWAY_TOOLS = ["mcpx_call", "mcpx_servers", "mcpx_search", "mcpx_describe"]
SHOWN = ("content", "structuredContent", "isError")  # what the host sees of a tool result
STRUCTURED_SINCE = Revision("2025-06-18")  # CallToolResult.structuredContent
PROGRESS_MESSAGE_SINCE = Revision("2025-03-26")  # ProgressNotification.message
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
CALLS = {
    "echo": {"text": "through the gateway"},
    "weather": {"city": "Lisbon"},
    "fail": {},
}
COUNT_TO = 3
PASSED = ("stdio-modern",)  # the pass-through daemon offers this one under its own names
PASSTHROUGH_SERVERS = ("stdio-modern", "http-legacy")  # and reaches this one through mcpx_call


def demo_argv(era: str) -> list[str]:
    return [sys.executable, "-m", "mcpx", "demo", "--revisions", ERAS[era]]


# -- the strict sweep of what the client sessions receive ------------------------------------


@dataclass
class FrameSweep:
    """Frames received in this test, each validated against the revision of the session it came to."""

    frames: int = 0  # from the daemon to the host
    upstream_frames: int = 0  # from the upstreams to the daemon
    violations: list[str] = field(default_factory=list)

    def check(self) -> None:
        assert not self.violations, "\n".join(self.violations)
        if not isinstance(SWEEP, _Disabled):
            assert self.frames > 0, "the host received no frame the sweep saw"


@pytest.fixture(autouse=True)
def sweep_frames(monkeypatch: pytest.MonkeyPatch) -> Iterator[FrameSweep]:
    """Wrap ``ClientSession.receive_json`` so every frame a client session receives goes through ``SWEEP``.

    Sessions on this (the test's) thread are the host's: every frame the
    daemon sends them is checked against the host's revision.  Sessions on
    the daemon's thread are its upstream clients: what mcpx's demo sends
    them is checked against the upstream's revision, except answers to
    requests sent before this test began (whose method is not known here).
    The method a response answers is the one of the request with that id,
    remembered from ``next_actions`` as tests/conformance/sweep.py does.
    """
    host_thread = threading.get_ident()
    asked: weakref.WeakKeyDictionary[ClientSession, dict[Any, str]] = weakref.WeakKeyDictionary()
    lock = threading.Lock()
    sweep = FrameSweep()
    next_actions = ClientSession.next_actions
    receive_json = ClientSession.receive_json

    def tracked_next_actions(self: ClientSession) -> list[Any]:
        actions = next_actions(self)
        for action in actions:
            if isinstance(action, Send):
                frame = orjson.loads(action.payload)
                if isinstance(frame, dict) and "method" in frame and "id" in frame:
                    with lock:
                        asked.setdefault(self, {})[frame["id"]] = frame["method"]
        return actions

    def swept_receive_json(self: ClientSession, obj: Any) -> None:
        if isinstance(obj, list):
            receive_json(self, obj)  # a batch comes back here one item at a time
            return
        host = threading.get_ident() == host_thread
        method = None
        if isinstance(obj, dict) and "method" not in obj:
            with lock:
                method = asked.setdefault(self, {}).pop(obj.get("id"), None)
        receive_json(self, obj)  # first, so the answer to initialize has set the revision
        if not host and isinstance(obj, dict) and "method" not in obj and method is None:
            return  # an upstream's answer to a request an earlier test sent
        revision = str(self.revision or self._offer)
        hop = "daemon → host" if host else "upstream → daemon"
        try:
            if not isinstance(obj, dict):
                raise AssertionError(f"not a JSON object: {obj!r}")
            SWEEP.validate_sent(obj, revision, method)
        except AssertionError as exc:
            sweep.violations.append(f"{hop}: {exc}")
        else:
            if host:
                sweep.frames += 1
            else:
                sweep.upstream_frames += 1

    monkeypatch.setattr(ClientSession, "next_actions", tracked_next_actions)
    monkeypatch.setattr(ClientSession, "receive_json", swept_receive_json)
    yield sweep
    assert not sweep.violations, "\n".join(sweep.violations)


# -- upstreams, and what they answer when called directly -------------------------------------


@pytest.fixture(scope="module")
def http_upstreams() -> Iterator[dict[str, str]]:
    """The two Streamable HTTP demos, legacy-only and modern-only: their MCP URLs."""
    started = {era: start_http_server("asyncio", "--revisions", revisions) for era, revisions in ERAS.items()}
    yield {era: url for era, (_, url) in started.items()}
    for proc, _ in started.values():
        stop_http_server(proc)


@asynccontextmanager
async def direct_client(upstream: str, http_urls: Mapping[str, str]) -> AsyncIterator[Client]:
    transport, era = upstream.split("-")
    modern = era == "modern"
    if transport == "stdio":
        async with connect_stdio(demo_argv(era), modern=modern) as client:
            yield client
    else:
        async with connect_http(http_urls[era], modern=modern) as client:
            yield client


@pytest.fixture(scope="module")
def direct(http_upstreams: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Per upstream: its tool names and its answers to ``CALLS``, asked without the gateway."""

    async def ask(upstream: str) -> dict[str, Any]:
        async with direct_client(upstream, http_upstreams) as client:
            answers: dict[str, Any] = {"tools": [t["name"] for t in await client.list_tools()]}
            for tool, arguments in CALLS.items():
                answers[tool] = dict(await client.call_tool(tool, arguments))
            answers["count"] = dict(await client.call_tool("count", {"to": COUNT_TO}))
            return answers

    async def main() -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}

        async def one(upstream: str) -> None:
            found[upstream] = await ask(upstream)

        async with anyio.create_task_group() as tg:
            for upstream in UPSTREAMS:
                tg.start_soon(one, upstream)
        return found

    return anyio.run(main)


def shown(result: Mapping[str, Any]) -> dict[str, Any]:
    return {key: result[key] for key in SHOWN if key in result}


def expected(result: Mapping[str, Any], revision: Revision) -> dict[str, Any]:
    """What a host on ``revision`` should see of an upstream's ``result``: all of it its revision defines."""
    want = shown(result)
    if revision < STRUCTURED_SINCE:
        want.pop("structuredContent", None)
    return want


def assert_own_envelope(result: Mapping[str, Any], revision: Revision) -> None:
    """The envelope of a relayed result is mcpx's, in the host's revision: never the upstream's."""
    meta = result.get("_meta") or {}
    if revision.is_modern:
        assert result.get("resultType") == "complete"
        assert meta.get(SERVER_INFO, {}).get("name") == "mcpx"
    else:
        assert "resultType" not in result and SERVER_INFO not in meta


# -- the daemons ------------------------------------------------------------------------------


@dataclass
class Daemon:
    mcp: str
    shim_env: dict[str, str]
    state: Path
    stop: threading.Event
    thread: threading.Thread

    def joined(self) -> None:
        """After ``stop`` was set: the daemon ended and took its ``daemon.json`` with it."""
        self.thread.join(30)
        assert not self.thread.is_alive(), "the daemon did not stop"
        assert not (self.state / "daemon.json").exists()  # removed when it stops


def start_daemon(
    root: Path,
    loop: str,
    http_urls: Mapping[str, str],
    *,
    servers: tuple[str, ...] = UPSTREAMS,
    passthrough: tuple[str, ...] = (),
) -> Daemon:
    home, state = root / "home", root / "state"
    home.mkdir()
    lines = ["[transport]", "port = 0", ""]
    if passthrough:
        lines += ["[mcp]", f"passthrough = {json.dumps(list(passthrough))}", ""]
    for name in servers:
        transport, era = name.split("-")
        lines.append(f"[servers.{name}]")
        if transport == "stdio":
            argv = demo_argv(era)
            lines += [f"command = {json.dumps(argv[0])}", f"args = {json.dumps(argv[1:])}", ""]
        else:
            lines += [f"url = {json.dumps(http_urls[era])}", ""]
    config_path = root / "config.toml"
    config_path.write_text("\n".join(lines))
    environ = {"HOME": str(home), "MCPX_STATE": str(state)}
    config = load_config(str(config_path), environ=environ)
    stop = threading.Event()
    urls: list[str] = []
    bound = threading.Event()

    def ready(found: list[str]) -> None:
        urls.extend(found)
        bound.set()

    thread = threading.Thread(
        target=run_daemon,
        args=(config,),
        kwargs={"loop": loop, "ready": ready, "stop": stop},
        name=f"mcpx daemon ({loop})",
        daemon=True,
    )
    thread.start()
    assert bound.wait(30), f"the daemon on {loop} did not start"
    shim_env = {
        **environ,
        "MCPX_TRANSPORT_PORT": "0",
        "MCPX_CONFIG": str(config_path),  # the same configuration, were the shim to start a daemon
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }
    mcp = next(u for u in urls if u.startswith("http"))
    return Daemon(mcp=mcp, shim_env=shim_env, state=state, stop=stop, thread=thread)


@pytest.fixture(scope="module", params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def stopped_daemons(http_upstreams: dict[str, str]) -> Iterator[list[Daemon]]:
    """Daemons told to stop; each is joined at the end of the module (before the HTTP upstreams stop).

    A daemon whose legacy Streamable HTTP upstream session is open ends it
    with ``DELETE`` as it stops (at most 2 s when the upstream is silent), so
    the stops overlap the next loop's tests instead of adding up.
    """
    stopping: list[Daemon] = []
    yield stopping
    for running in stopping:
        running.joined()


@pytest.fixture(scope="module")
def daemon(
    loop: str,
    http_upstreams: dict[str, str],
    stopped_daemons: list[Daemon],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Daemon]:
    running = start_daemon(tmp_path_factory.mktemp(f"daemon-{loop}"), loop, http_upstreams)
    yield running
    running.stop.set()
    stopped_daemons.append(running)


@pytest.fixture(scope="module")
def passthrough_daemon(
    loop: str,
    http_upstreams: dict[str, str],
    stopped_daemons: list[Daemon],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Daemon]:
    root = tmp_path_factory.mktemp(f"passthrough-{loop}")
    running = start_daemon(root, loop, http_upstreams, servers=PASSTHROUGH_SERVERS, passthrough=PASSED)
    yield running
    running.stop.set()
    stopped_daemons.append(running)


@asynccontextmanager
async def host(daemon: Daemon, transport: str, revision: Revision) -> AsyncIterator[Client]:
    """A host on ``revision`` connected to the daemon through ``mcpx serve`` or straight to /mcp."""
    modern = revision.is_modern
    offer = None if modern else revision
    if transport == "shim":
        argv = [sys.executable, "-m", "mcpx", "serve"]
        async with connect_stdio(argv, env=daemon.shim_env, modern=modern, offer=offer) as client:
            yield client
    else:
        async with connect_http(daemon.mcp, modern=modern, offer=offer) as client:
            yield client
    info = orjson.loads((daemon.state / "daemon.json").read_bytes())
    assert info["pid"] == os.getpid()  # the shim used the daemon under test and started none


# -- the matrix -------------------------------------------------------------------------------

CELLS = [
    pytest.param(rev, era, host_transport, up_transport, id=f"{rev}-{host_transport}-to-{up_transport}-{era}")
    for rev in HOST_REVISIONS
    for host_transport in HOST_TRANSPORTS
    for up_transport in UPSTREAM_TRANSPORTS
    for era in ERAS
]


@pytest.mark.parametrize(("revision", "era", "host_transport", "upstream_transport"), CELLS)
def test_matrix(
    daemon: Daemon,
    direct: dict[str, dict[str, Any]],
    sweep_frames: FrameSweep,
    revision: str,
    era: str,
    host_transport: str,
    upstream_transport: str,
) -> None:
    rev = Revision(revision)
    upstream = f"{upstream_transport}-{era}"
    answers = direct[upstream]

    async def main() -> None:
        async with host(daemon, host_transport, rev) as client:
            assert client.revision == rev
            assert [t["name"] for t in await client.list_tools()] == GATEWAY_TOOLS

            for tool, arguments in CALLS.items():
                called = await client.call_tool(
                    "mcpx_call", {"server": upstream, "tool": tool, "arguments": arguments}
                )
                assert shown(called) == expected(answers[tool], rev), tool
                assert_own_envelope(called, rev)
            assert shown(called).get("isError") is True  # fail, the last one

            reports: list[Progress] = []
            counted = await client.request(
                "tools/call",
                {
                    "name": "mcpx_call",
                    "arguments": {"server": upstream, "tool": "count", "arguments": {"to": COUNT_TO}},
                },
                on_progress=reports.append,
            )
            assert shown(counted) == expected(answers["count"], rev)
            assert_own_envelope(counted, rev)
            steps = range(1, COUNT_TO + 1)
            assert [(p.progress, p.total) for p in reports] == [(i, COUNT_TO) for i in steps]
            if rev >= PROGRESS_MESSAGE_SINCE:
                assert [p.message for p in reports] == [f"step {i} of {COUNT_TO}" for i in steps]
            else:
                assert all(p.message is None for p in reports)  # 2024-11-05 has no progress message

            listed = await client.call_tool("mcpx_servers", {})
            servers = {s["name"]: s for s in orjson.loads(listed["content"][0]["text"])["servers"]}
            assert set(servers) == set(UPSTREAMS)
            assert (servers[upstream]["status"], servers[upstream]["era"]) == ("ready", era)

    anyio.run(main)
    sweep_frames.check()


@pytest.mark.parametrize(
    ("revision", "host_transport"),
    [
        pytest.param("2025-11-25", "http", id="2025-11-25-http"),
        pytest.param("2026-07-28", "shim", id="2026-07-28-shim"),
    ],
)
def test_passthrough(
    passthrough_daemon: Daemon,
    direct: dict[str, dict[str, Any]],
    sweep_frames: FrameSweep,
    revision: str,
    host_transport: str,
) -> None:
    rev = Revision(revision)
    answers = direct[PASSED[0]]

    async def main() -> None:
        async with host(passthrough_daemon, host_transport, rev) as client:
            names = [t["name"] for t in await client.list_tools()]
            if names != answers["tools"] + GATEWAY_TOOLS:  # the upstream's own names, ahead of mcpx's
                servers = await client.call_tool("mcpx_servers", {})
                assert names == answers["tools"] + GATEWAY_TOOLS, servers["content"][0]["text"]
            echoed = await client.call_tool("echo", CALLS["echo"])
            assert shown(echoed) == expected(answers["echo"], rev)
            assert_own_envelope(echoed, rev)
            other = PASSTHROUGH_SERVERS[1]
            through = await client.call_tool(
                "mcpx_call", {"server": other, "tool": "echo", "arguments": CALLS["echo"]}
            )
            assert shown(through) == expected(direct[other]["echo"], rev)
            assert_own_envelope(through, rev)

    anyio.run(main)
    sweep_frames.check()
