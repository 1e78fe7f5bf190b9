"""``Deferred``: a server that answers a request later, on every driver (the gateway's routed calls).

A ``Server`` whose ``route`` returns ``Deferred`` is handed a ``Pending`` and
answers whenever it likes, with no task or thread held meanwhile.  Each test
runs the same conversation over real pipes on asyncio, uvloop, trio and the
blocking driver: a deferred answer arrives after a later request's, a
cancelled one is never answered and its server is told, a ``start`` that
raises is ``-32603``, and the end of input tells the server of every
deferred request still open.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
import pytest

from mcpx.core import RequestContext
from mcpx.drivers import serve_stdio
from mcpx.server import Deferred, Invocation, Outcome, Pending, Server
from tests.conformance.peer import LOOPS

INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "deferred-test", "version": "1"},
}


class Later(Server):
    """Tool ``later`` is answered when the test settles it; ``broken`` fails to start."""

    def __init__(self) -> None:
        super().__init__("later", "1")
        self.started: queue.SimpleQueue[Pending] = queue.SimpleQueue()
        self.cancelled: queue.SimpleQueue[int] = queue.SimpleQueue()

        @self.tool
        def now() -> str:
            return "now"

    def route(self, method: str, params: Mapping[str, Any], context: RequestContext) -> Invocation:
        name = params.get("name")
        if method == "tools/call" and name == "later":
            return Deferred(self._start)
        if method == "tools/call" and name == "broken":
            return Deferred(self._broken)
        return super().route(method, params, context)

    def _start(self, pending: Pending) -> None:
        request_id = pending.context.request_id
        pending.on_cancel = lambda: self.cancelled.put(request_id)  # type: ignore[arg-type]
        self.started.put(pending)

    def _broken(self, pending: Pending) -> None:
        raise RuntimeError("no route today")


class Host:
    """The test's end of the pipes: JSON lines out, frames in (read by a thread)."""

    def __init__(self, loop: str) -> None:
        self.server = Later()
        to_server_r, self._to_server = os.pipe()
        self._from_server, from_server_w = os.pipe()
        self.frames: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(
            target=serve_stdio,
            args=(self.server,),
            kwargs={"loop": loop, "in_fd": to_server_r, "out_fd": from_server_w},
            daemon=True,
        )
        self.thread.start()
        self._fds = (to_server_r, from_server_w)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buffered = b""
        while chunk := os.read(self._from_server, 65536):
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                self.frames.put(orjson.loads(line))
        self.frames.put(None)

    def send(self, obj: dict[str, Any]) -> None:
        os.write(self._to_server, orjson.dumps(obj) + b"\n")

    def call(self, request_id: int, name: str) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name}})

    def frame(self) -> dict[str, Any]:
        got = self.frames.get(timeout=10)
        assert got is not None, "the server closed its output"
        return got

    def close(self) -> None:
        os.close(self._to_server)
        self.thread.join(timeout=10)
        for fd in self._fds:
            os.close(fd)

    def initialize(self) -> None:
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        assert "result" in self.frame()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


@pytest.fixture(params=LOOPS)
def host(request: pytest.FixtureRequest) -> Iterator[Host]:
    h = Host(request.param)
    h.initialize()
    yield h
    if h.thread.is_alive():
        h.close()


def text(frame: dict[str, Any]) -> str:
    return str(frame["result"]["content"][0]["text"])


def test_a_deferred_answer_comes_when_settled_after_a_later_request(host: Host) -> None:
    host.call(1, "later")
    pending = host.server.started.get(timeout=10)
    host.call(2, "now")
    assert host.frame()["id"] == 2  # nothing waits for the deferred one
    pending.settle(Outcome(result={"content": [{"type": "text", "text": "later"}]}))
    answer = host.frame()
    assert answer["id"] == 1 and text(answer) == "later"
    pending.settle(Outcome(result={"content": []}))  # once only: a second settle is ignored
    host.call(3, "now")
    assert host.frame()["id"] == 3


def test_a_cancelled_deferred_request_is_never_answered_and_its_server_is_told(host: Host) -> None:
    host.call(1, "later")
    pending = host.server.started.get(timeout=10)
    host.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    assert host.server.cancelled.get(timeout=10) == 1
    assert pending.context.cancelled
    pending.settle(Outcome(result={"content": []}))  # too late: dropped
    host.call(2, "now")
    assert host.frame()["id"] == 2  # the next frame is the next answer: nothing for id 1


def test_a_start_that_raises_is_an_internal_error_for_that_request_only(host: Host) -> None:
    host.call(1, "broken")
    frame = host.frame()
    assert frame["id"] == 1 and frame["error"]["code"] == -32603
    assert "no route today" in frame["error"]["message"]
    host.call(2, "now")
    assert host.frame()["id"] == 2


def test_the_end_of_input_tells_the_server_of_each_deferred_request_still_open(host: Host) -> None:
    host.call(1, "later")
    host.call(2, "later")
    host.server.started.get(timeout=10)
    host.server.started.get(timeout=10)
    host.close()
    told = {host.server.cancelled.get(timeout=10), host.server.cancelled.get(timeout=10)}
    assert told == {1, 2}
    assert not host.thread.is_alive()
