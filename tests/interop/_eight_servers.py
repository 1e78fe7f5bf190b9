"""Eight real upstreams passed through by one daemon, as a user's ``mcpServers`` file would have them.

``EightServers`` runs ``run_daemon`` in a thread on loopback over eight
processes of tests/interop/_named_server.py; two of them (``alpha`` and
``bravo``) both offer ``echo``.  ``listed()`` counts the ``tools/list`` each
upstream was sent.  ``host_frames_swept`` (import it into a test module to
use it) checks every frame a host on the test's thread receives from the
daemon against the official schema of the host's revision.
"""

from __future__ import annotations

import http.client
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from mcpx.config import parse_config
from mcpx.core.actions import Send
from mcpx.core.client_session import ClientSession
from tests.conformance.sweep import SWEEP
from tests.interop._daemon_thread import DaemonThread

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ("alpha", "bravo", "charlie", "delta", "echo-srv", "foxtrot", "golf", "hotel")
COLLIDING = ("alpha", "bravo")  # both offer "echo"


class EightServers(DaemonThread):
    """A daemon passing the eight named servers through; ``listed()`` counts the ``tools/list`` each was sent."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "tools-list.log"
        self.log.touch()
        command = orjson.dumps(sys.executable).decode()
        log = orjson.dumps(str(self.log)).decode()
        blocks = []
        for name in SERVERS:
            echo = ', "--echo"' if name in COLLIDING else ""
            blocks.append(
                f'[servers.{name}]\ncommand = {command}\nargs = ["-m", "tests.interop._named_server", '
                f'"{name}", {log}{echo}]\n'
            )
        text = "\n".join(blocks) + f"\n[mcp]\npassthrough = {orjson.dumps(list(SERVERS)).decode()}\n\n"
        text += "[transport]\nport = 0\n"
        self.environ = {"MCPX_STATE": str(root / "state"), "HOME": str(root)}
        super().__init__(parse_config(text, environ=self.environ, home=str(root)))

    def listed(self) -> dict[str, int]:
        counts = dict.fromkeys(SERVERS, 0)
        for line in self.log.read_text().split():
            counts[line] += 1
        return counts

    def get(self, path: str) -> Any:
        url = urlsplit(self.mcp)
        conn = http.client.HTTPConnection(str(url.hostname), url.port, timeout=30)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            assert response.status == 200
            return orjson.loads(response.read())
        finally:
            conn.close()


@pytest.fixture(autouse=True)
def host_frames_swept(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every frame a host session on the test's thread receives from the daemon goes through ``SWEEP``.

    The method a response answers is the one of the request with that id,
    remembered from ``next_actions`` (as tests/e2e/test_matrix.py does).
    Sessions on the daemon's thread (its upstream clients) are left alone.
    """
    host_thread = threading.get_ident()
    asked: dict[int, dict[Any, str]] = {}
    violations: list[str] = []
    next_actions = ClientSession.next_actions
    receive_json = ClientSession.receive_json

    def tracked(self: ClientSession) -> list[Any]:
        actions = next_actions(self)
        if threading.get_ident() == host_thread:
            for action in actions:
                if isinstance(action, Send):
                    frame = orjson.loads(action.payload)
                    if isinstance(frame, dict) and "method" in frame and "id" in frame:
                        asked.setdefault(id(self), {})[frame["id"]] = frame["method"]
        return actions

    def swept(self: ClientSession, obj: Any) -> None:
        if threading.get_ident() != host_thread or isinstance(obj, list):
            receive_json(self, obj)
            return
        method = None
        if isinstance(obj, dict) and "method" not in obj:
            method = asked.setdefault(id(self), {}).pop(obj.get("id"), None)
        receive_json(self, obj)  # first, so the answer to initialize has set the revision
        try:
            SWEEP.validate_sent(obj, str(self.revision or self._offer), method)
        except AssertionError as exc:
            violations.append(str(exc))

    monkeypatch.setattr(ClientSession, "next_actions", tracked)
    monkeypatch.setattr(ClientSession, "receive_json", swept)
    yield violations
    assert not violations, "\n".join(violations)


def settled(daemon: EightServers, *, quiet: float = 0.5, limit: float = 20.0) -> dict[str, int]:
    """``daemon.listed()`` once every server was listed and no ``tools/list`` came for ``quiet`` seconds.

    ``quiet`` is time passing, not an event: a read the daemon has still to
    make (the start-up listing, the re-read when an instance starts) shows
    only by its line, so "no more reads" is "no line within ``quiet``".
    """
    deadline = time.monotonic() + limit
    last = daemon.listed()
    while True:
        time.sleep(quiet)
        now = daemon.listed()
        if now == last and all(now.values()):
            return now
        assert time.monotonic() < deadline, f"the listings never settled: {now}"
        last = now
