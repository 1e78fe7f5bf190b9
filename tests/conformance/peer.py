"""A raw JSON-RPC peer for `mcpx demo` over real pipes, recording what it receives.

The conversation suite talks to a real subprocess, through the same stdin and
stdout an MCP host would use.  ``StdioPeer`` knows which revision it speaks
for each request it sends (the one it negotiated, 2024-11-05 before that,
2026-07-28 for a request carrying modern ``_meta``) and hands every frame it
receives to the strict schema sweep for that revision.
"""

from __future__ import annotations

import itertools
import os
import queue
import subprocess
import sys
import threading
import time
from typing import Any

import orjson

from tests.conformance.sweep import SWEEP

LOOPS = ("asyncio", "uvloop", "trio", "blocking")
LEGACY = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN = "2026-07-28"
REVISIONS = (*LEGACY, MODERN)

# Methods a revision did not have yet, answered anyway ("accept liberally"),
# in the shapes of the revision that introduced them.
INTRODUCED = {
    "subscriptions/listen": MODERN,
    "server/discover": MODERN,
    "tasks/list": "2025-11-25",
    "tasks/get": "2025-11-25",
    "tasks/result": "2025-11-25",
    "tasks/cancel": "2025-11-25",
}

CLIENT_INFO = {"name": "mcpx-conversation-suite", "version": "1.0"}


def at_least(revision: str, floor: str) -> bool:
    return REVISIONS.index(revision) >= REVISIONS.index(floor)


def modern_meta(**extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    }
    meta.update(extra)
    return meta


def complete_rounds(
    peer: Any, method: str, params: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    """``peer.call``, and while the answer is 2026-07-28 ``input_required``, answer and retry.

    The answers come from ``peer.answer``; every question asked is recorded in
    ``peer.questions``; ``requestState`` goes back exactly as it came (or not at all).
    """
    params = dict(params or {})
    frame: dict[str, Any] = peer.call(method, params, **kw)
    rounds = 0
    while isinstance(frame.get("result"), dict) and frame["result"].get("resultType") == "input_required":
        rounds += 1
        assert rounds <= 10, "the server kept asking"
        result = frame["result"]
        peer.questions.extend(result.get("inputRequests", {}).values())
        responses = {
            k: peer.answer(q["method"], q.get("params") or {}) for k, q in result["inputRequests"].items()
        }
        params = {**params, "inputResponses": responses}
        if "requestState" in result:
            params["requestState"] = result["requestState"]
        else:
            params.pop("requestState", None)
        frame = peer.call(method, params, **kw)
    return frame


class StdioPeer:
    """One `mcpx demo` process and the client side of its stdio connection."""

    def __init__(self, loop: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.loop = loop
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpx", "demo", "--loop", loop, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self.revision = "2024-11-05"  # what a peer that declared nothing is judged as
        self.modern = False
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.notifications: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []
        self._sent: dict[Any, tuple[str, str]] = {}  # id -> (method, revision)
        self._progress_revision: dict[Any, str] = {}
        self._ids = itertools.count(1)
        self._stderr: list[bytes] = []
        self.answer: Any = None  # callable(method, params) -> result, for the server's questions
        self.questions: list[dict[str, Any]] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # -- plumbing ------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.frames.put(orjson.loads(line))
        self.frames.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj: Any) -> None:
        self.send_raw(orjson.dumps(obj) + b"\n")

    def recv(self, timeout: float = 10.0) -> dict[str, Any]:
        """The next frame from mcpx, checked by the strict sweep."""
        try:
            frame = self.frames.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no frame from mcpx within {timeout}s; stderr:\n{self.stderr}") from None
        if frame is None:
            self.frames.put(None)
            raise AssertionError(f"mcpx closed stdout; stderr:\n{self.stderr}")
        self.received.append(frame)
        self._sweep(frame)
        return frame

    def _sweep(self, frame: dict[str, Any]) -> None:
        method = None
        if "method" in frame:
            params = frame.get("params") or {}
            meta = params.get("_meta") or {}
            if "io.modelcontextprotocol/subscriptionId" in meta or frame["method"].startswith(
                "notifications/subscriptions/"
            ):
                revision = MODERN
            elif frame["method"] == "notifications/progress":
                revision = self._progress_revision.get(params.get("progressToken"), self.revision)
            else:
                revision = self.revision
        else:
            method, revision = self._sent.get(frame.get("id"), (None, self.revision))
        SWEEP.validate_sent(frame, revision, method)

    # -- requests ------------------------------------------------------------

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        id: Any = None,
        modern: bool | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Any:
        """Send a request; returns its id.  ``modern`` adds 2026-07-28 ``_meta``."""
        request_id = next(self._ids) if id is None else id
        use_modern = self.modern if modern is None else modern
        params = dict(params or {})
        if use_modern:
            params["_meta"] = {**modern_meta(), **(meta or {})}
            revision = MODERN
        else:
            if meta:
                params["_meta"] = meta
            revision = self.revision
            if method in INTRODUCED and not at_least(revision, INTRODUCED[method]):
                revision = INTRODUCED[method]
        token = (params.get("_meta") or {}).get("progressToken")
        if token is not None:
            self._progress_revision[token] = MODERN if use_modern else self.revision
        self._sent[request_id] = (method, revision)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params:
            message["params"] = params
        self.send(message)
        return request_id

    def response(self, request_id: Any, timeout: float = 10.0) -> dict[str, Any]:
        """Frames until the response to ``request_id``; notifications are kept, questions answered."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self.recv(max(0.01, deadline - time.monotonic()))
            if "method" in frame and "id" in frame:
                self.questions.append(frame)
                self.reply_to_question(frame)
                continue
            if "method" in frame:
                self.notifications.append(frame)
                continue
            if frame.get("id") == request_id:
                return frame
            raise AssertionError(f"expected the response to {request_id!r}, got {frame}")

    def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        """Request and wait for its response frame."""
        return self.response(self.request(method, params, **kw))

    def result(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        """Request and return the result, failing on an error response."""
        frame = self.call(method, params, **kw)
        assert "result" in frame, f"{method} failed: {frame}"
        return frame["result"]  # type: ignore[no-any-return]

    def error(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        """Request and return the error object, failing on a result."""
        frame = self.call(method, params, **kw)
        assert "error" in frame, f"{method} should have failed: {frame}"
        return frame["error"]  # type: ignore[no-any-return]

    def reply_to_question(self, frame: dict[str, Any]) -> None:
        """Answer a server request with ``self.answer`` (a JSON-RPC error when there is none)."""
        if self.answer is None:
            self.send(
                {"jsonrpc": "2.0", "id": frame["id"], "error": {"code": -32601, "message": "no handler"}}
            )
        else:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": frame["id"],
                    "result": self.answer(frame["method"], frame.get("params") or {}),
                }
            )

    def complete(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        """Call and, while the answer is 2026-07-28 ``input_required``, answer and retry."""
        return complete_rounds(self, method, params, **kw)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def cancel(self, request_id: Any, reason: str | None = None) -> None:
        """Cancel a request: on stdio, ``notifications/cancelled`` in every revision."""
        params: dict[str, Any] = {"requestId": request_id}
        if reason is not None:
            params["reason"] = reason
        self.notify("notifications/cancelled", params)

    def initialize(self, revision: str, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        """The legacy handshake; afterwards this peer speaks what was negotiated."""
        request_id = next(self._ids)
        self._sent[request_id] = ("initialize", revision if revision in LEGACY else LEGACY[-1])
        self.send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "initialize",
                "params": {
                    "protocolVersion": revision,
                    "capabilities": capabilities or {},
                    "clientInfo": CLIENT_INFO,
                },
            }
        )
        frame = self.response(request_id)
        result = frame["result"]
        self.revision = result["protocolVersion"]
        self._sent[request_id] = ("initialize", self.revision)
        self.notify("notifications/initialized")
        return result  # type: ignore[no-any-return]

    def speak(self, revision: str, capabilities: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Start speaking ``revision``: ``initialize`` for legacy, nothing for 2026-07-28."""
        if revision == MODERN:
            self.revision = MODERN
            self.modern = True
            return None
        return self.initialize(revision, capabilities)

    # -- ending ----------------------------------------------------------------

    def close(self, timeout: float = 10.0) -> int:
        """Close stdin, collect the remaining frames, and return the exit status."""
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        deadline = time.monotonic() + timeout
        while True:
            try:
                frame = self.frames.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                self.proc.kill()
                raise AssertionError(
                    f"mcpx did not close stdout within {timeout}s; stderr:\n{self.stderr}"
                ) from None
            if frame is None:
                break
            self.received.append(frame)
            self._sweep(frame)
            if "method" in frame:
                self.notifications.append(frame)
        return self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
