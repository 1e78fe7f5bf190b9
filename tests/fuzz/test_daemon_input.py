"""Every entry point under mutated frames: whatever a client sends, a precise answer, and on.

A black box over a real ``mcpx daemon`` (HOME and state in a temporary
directory, port 0, its upstream the built-in default: mcpx's demo server as
``demo``), driven over loopback as clients drive it:

* ``/mcp`` as a 2026-07-28 client (no session; ``_meta`` on every request);
* ``/mcp`` in a legacy session of each Streamable HTTP revision (2025-03-26,
  the one with batches; 2025-06-18; 2025-11-25), opened once per module;
* ``/v1/call`` and ``/v1/complete``, the ops API's bodies;
* the 2024-11-05 HTTP+SSE endpoint: a GET stream held open, mutated frames
  posted to the endpoint it named;
* ``mcpx demo`` over stdio, one process per revision (2026-07-28 without a
  handshake), mutated lines in, answers out (``mcpx serve`` has its own suite,
  ``tests/fuzz/test_serve_input.py``).

Each example takes a valid frame of that entry point and mutates it: a
member set to any JSON value (ids of every type, huge numbers, deep
nesting), a member dropped, a case variant (``"Method"``), ``params`` that is
no object, a member named twice, invalid UTF-8, the text cut short, or a
batch of such frames.  Checked after each: no 5xx, and every JSON answer is
a JSON-RPC message with a code and a message (``/v1``: its error object);
then a valid request on the same entry point is answered with a result
naming ``demo``.  At the end of the module the daemon is still running and
its log holds no traceback.  ``tox -e fuzz`` runs 1,000 examples per entry
point and revision (of one to three frames each); the default run, a tenth.
"""

from __future__ import annotations

import http.client
import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ..interop._daemon_process import ROOT, DaemonProcess
from ._examples import outcome, tick
from ._mcp import CC, CI, DEEP, MODERN, PV, any_ids, initialize, json_values, junk_or_deep

EXAMPLES = settings(max_examples=max(20, settings.default.max_examples // 3), deadline=None)
WAIT = 30.0
LEGACY_HTTP = ["2025-03-26", "2025-06-18", "2025-11-25"]
MODERN_META = {PV: MODERN, CC: {}, CI: {"name": "fuzz", "version": "1"}}

# -- the daemon ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    running = DaemonProcess(tmp_path_factory.mktemp("daemon-input"))
    try:
        yield running
        assert running.process.poll() is None, "the daemon exited"
        log = running.log.read_text(errors="replace")
        assert "Traceback" not in log, log[-4000:]
    finally:
        running.close()


def _post(
    daemon: DaemonProcess, path: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, str, bytes]:
    url = urlsplit(daemon.base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=WAIT)
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    sent.update(headers or {})
    try:
        conn.request("POST", path, body=body, headers=sent)
        response = conn.getresponse()
        return response.status, response.getheader("content-type", ""), response.read()
    finally:
        conn.close()


# -- mutations -------------------------------------------------------------------------------------

_KEYS = st.sampled_from(
    ["jsonrpc", "id", "method", "params", "Method", "ID", "JSONRPC", "Params", "_meta", ""]
)


_OPS = {
    "set": "a member set to any JSON",
    "drop": "a member dropped",
    "case": "a case variant of a member",
    "params": "params that is no object",
    "deep": "arguments nested deep",
    "inner": "a params member set to any JSON",
}
_MANGLES = {"twice": "a member named twice", "utf8": "invalid UTF-8", "cut": "the text cut short"}


@st.composite
def _mutated_object(draw: st.DrawFn, base: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A mutation of ``base``, and its class (the first of its one to three changes)."""
    frame = json.loads(json.dumps(base))
    kinds: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["set", "set", "drop", "case", "params", "deep", "inner"]))
        if op == "set":
            frame[draw(_KEYS)] = draw(any_ids | json_values | junk_or_deep)
        elif op == "drop" and frame:
            frame.pop(draw(st.sampled_from(sorted(frame))))
        elif op == "case" and frame:
            key = draw(st.sampled_from(sorted(frame)))
            frame[key.capitalize() if key != key.capitalize() else key.upper()] = frame.pop(key)
        elif op == "params":
            frame["params"] = draw(
                st.none()
                | st.booleans()
                | st.integers()
                | st.text(max_size=5)
                | st.lists(junk_or_deep, max_size=2)
            )
        elif op == "deep":
            frame["params"] = {"name": "mcpx_servers", "arguments": draw(DEEP)}
        elif op == "inner" and isinstance(frame.get("params"), dict):
            params = frame["params"]
            params[draw(st.sampled_from(["name", "arguments", "_meta", "cursor", "ref", "uri"]))] = draw(
                json_values
            )
        else:
            continue
        kinds.append(_OPS[op])
    return frame, kinds[0] if kinds else "unchanged"


@st.composite
def _mutated(draw: st.DrawFn, base: dict[str, Any], *, batches: bool = True) -> tuple[bytes, str]:
    """One mutated frame (or a batch of them) as the bytes of a body, and its class of bad input."""
    if batches and draw(st.integers(0, 5)) == 0:
        value: Any = [frame for frame, _ in draw(st.lists(_mutated_object(base), max_size=3))]
        kind = "a batch (array)"
    else:
        value, kind = draw(_mutated_object(base))
    data = json.dumps(value).encode()  # Python's writer: big integers and lone surrogates go out as they are
    mangle = draw(st.sampled_from(["none", "none", "none", "twice", "utf8", "cut"]))
    if mangle == "twice" and data.startswith(b"{") and len(data) > 2:
        data = b'{"id":' + json.dumps(draw(any_ids)).encode() + b"," + data[1:]
    elif mangle == "utf8":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\x00"])) + data[at:]
    elif mangle == "cut" and len(data) > 1:
        data = data[: draw(st.integers(0, len(data) - 1))]
    else:
        return data, kind
    return data, _MANGLES[mangle]


# -- what an answer must be ------------------------------------------------------------------------


def _jsonrpc_messages(content_type: str, body: bytes) -> list[Any]:
    """The JSON-RPC messages of an answer: a JSON body (one, or a batch's array), or SSE ``data`` lines."""
    if not body:
        return []
    if content_type.startswith("text/event-stream"):
        events = [line[5:].strip() for line in body.decode().splitlines() if line.startswith("data:")]
        return [json.loads(event) for event in events if event]
    assert content_type.startswith("application/json"), (content_type, body[:200])
    value = json.loads(body)
    return value if isinstance(value, list) else [value]


def _a_bug(message: str) -> bool:
    """Whether an error message is mcpx reporting an exception of its own, not judging the input."""
    return message.startswith("Internal error:") or "internal error in mcpx" in message


def _check_jsonrpc(status: int, content_type: str, body: bytes) -> None:
    assert status < 500, (status, body[:500])
    for message in _jsonrpc_messages(content_type, body):
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", message
        if "method" in message:
            continue  # a notification the request caused (progress, a log message)
        assert "id" in message and ("result" in message) != ("error" in message), message
        if "error" in message:
            error = message["error"]
            assert type(error["code"]) is int and isinstance(error["message"], str) and error["message"], (
                message
            )
            assert not _a_bug(error["message"]), message


def _answered(status: int, content_type: str, body: bytes) -> str:
    """What came back, for the summary: the status and the JSON-RPC error codes (or ``result``)."""
    try:
        messages = [m for m in _jsonrpc_messages(content_type, body) if "id" in m]
    except ValueError:
        return f"{status} (not JSON)"
    codes = sorted({str(m["error"]["code"]) if "error" in m else "result" for m in messages})
    return " ".join([str(status), *codes]) if codes else str(status)


def _names_demo(status: int, content_type: str, body: bytes) -> None:
    (answer,) = [m for m in _jsonrpc_messages(content_type, body) if "id" in m]
    assert status == 200 and "result" in answer, (status, answer)
    assert "demo" in json.dumps(answer["result"]), answer


def _servers_call(request_id: Any, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "mcpx_servers", "arguments": {}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


# -- /mcp as a 2026-07-28 client -------------------------------------------------------------------

MODERN_HEADERS = {"mcp-protocol-version": MODERN}
MODERN_BASES = [
    _servers_call(1, MODERN_META),
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": MODERN_META}},
    {"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": MODERN_META}},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
]


@EXAMPLES
@given(data=st.data())
def test_mcp_modern_takes_mutated_frames(daemon: DaemonProcess, data: st.DataObject) -> None:
    tick()
    body, kind = data.draw(_mutated(data.draw(st.sampled_from(MODERN_BASES))))
    answer = _post(daemon, "/mcp", body, MODERN_HEADERS)
    _check_jsonrpc(*answer)
    outcome("/mcp 2026-07-28", kind, _answered(*answer))
    valid = json.dumps(_servers_call("alive", MODERN_META)).encode()
    _names_demo(
        *_post(
            daemon, "/mcp", valid, {**MODERN_HEADERS, "mcp-method": "tools/call", "mcp-name": "mcpx_servers"}
        )
    )


# -- /mcp in a legacy session ----------------------------------------------------------------------

_sessions: dict[str, dict[str, str]] = {}


def _session(daemon: DaemonProcess, version: str) -> dict[str, str]:
    """The headers of this module's session at ``version`` (opened on first use)."""
    if version not in _sessions:
        init = initialize(0, version)
        url = urlsplit(daemon.base)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=WAIT)
        try:
            conn.request(
                "POST",
                "/mcp",
                body=json.dumps(init),
                headers={"content-type": "application/json", "accept": "application/json, text/event-stream"},
            )
            response = conn.getresponse()
            response.read()
            session_id = response.getheader("mcp-session-id")
        finally:
            conn.close()
        assert response.status == 200 and session_id, response.status
        headers = {"mcp-session-id": session_id, "mcp-protocol-version": version}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert _post(daemon, "/mcp", json.dumps(initialized).encode(), headers)[0] == 202
        _sessions[version] = headers
    return _sessions[version]


LEGACY_BASES = [
    _servers_call(1),
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    {"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": "demo_greet", "arguments": {}}},
    {"jsonrpc": "2.0", "id": 4, "method": "ping"},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
    {"jsonrpc": "2.0", "id": 5, "result": {}},
]


@pytest.mark.parametrize("version", LEGACY_HTTP)
@EXAMPLES
@given(data=st.data())
def test_mcp_legacy_session_takes_mutated_frames(
    daemon: DaemonProcess, version: str, data: st.DataObject
) -> None:
    tick()
    headers = _session(daemon, version)
    body, kind = data.draw(_mutated(data.draw(st.sampled_from(LEGACY_BASES))))
    answer = _post(daemon, "/mcp", body, headers)
    _check_jsonrpc(*answer)
    outcome(f"/mcp {version} session", kind, _answered(*answer))
    _names_demo(*_post(daemon, "/mcp", json.dumps(_servers_call("alive")).encode(), headers))


# -- /v1 -------------------------------------------------------------------------------------------

V1_BASES = {
    "/v1/call": {"server": "demo", "tool": "echo", "arguments": {"text": "x"}},
    "/v1/complete": {
        "server": "demo",
        "ref": {"type": "ref/prompt", "name": "greet"},
        "argument": {"name": "name", "value": "a"},
    },
}


@st.composite
def _mutated_v1(draw: st.DrawFn, base: dict[str, Any]) -> tuple[bytes, str]:
    """A mutated ``/v1`` body, and its class of bad input."""
    body = json.loads(json.dumps(base))
    kind = ""
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from([*sorted(body), "Server", "timeout", "progress", ""]))
        if draw(st.booleans()) and key in body:
            body.pop(key)
            kind = kind or "a member dropped"
        else:
            body[key] = draw(any_ids | json_values | junk_or_deep)
            kind = kind or "a member set to any JSON"
    value: Any = body
    if not draw(st.integers(0, 6)):  # now and then, no object at all
        value, kind = draw(json_values), "a body that is no object"
    data = json.dumps(value).encode()
    if draw(st.integers(0, 6)) == 0:
        data, kind = data[: draw(st.integers(0, len(data)))] + b"\xff", "cut short, invalid UTF-8"
    return data, kind


@pytest.mark.parametrize("path", sorted(V1_BASES))
@EXAMPLES
@given(data=st.data())
def test_v1_takes_mutated_bodies(daemon: DaemonProcess, path: str, data: st.DataObject) -> None:
    tick()
    sent, kind = data.draw(_mutated_v1(V1_BASES[path]))
    status, content_type, body = _post(daemon, path, sent)
    # 502 is the upstream's own JSON-RPC error (an unknown tool, bad arguments), carried as /v1 does
    assert status < 500 or status == 502, (status, body[:500])
    if status >= 400:
        error = json.loads(body)["error"]
        outcome(path, kind, f"{status} {error['code']}")
        assert status != 502 or error["code"] == "upstream-error", error
        assert isinstance(error["code"], str) and isinstance(error["message"], str) and error["message"], (
            error
        )
    elif content_type.startswith("application/x-ndjson"):
        assert all(json.loads(line) for line in body.splitlines() if line.strip())
    else:
        assert isinstance(json.loads(body), dict), body[:200]
    if status < 400:
        outcome(path, kind, str(status))
    status, _, body = _post(daemon, "/v1/call", json.dumps(V1_BASES["/v1/call"]).encode())
    assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == "x", body[:500]


# -- the 2024-11-05 HTTP+SSE endpoint --------------------------------------------------------------


class _SseStream:
    """``GET /sse`` held open; the endpoint it names, and its JSON-RPC messages as they come."""

    def __init__(self, daemon: DaemonProcess) -> None:
        url = urlsplit(daemon.base)
        self.conn = http.client.HTTPConnection(url.hostname, url.port, timeout=WAIT)
        self.conn.request("GET", "/sse", headers={"accept": "text/event-stream"})
        self.response = self.conn.getresponse()
        assert self.response.status == 200, self.response.status
        self.closed = False
        self.messages: queue.Queue[Any] = queue.Queue()
        self.endpoint: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.path = self.endpoint.get(timeout=WAIT)

    def _read(self) -> None:
        event = "message"
        try:
            for raw in self.response:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data = line[5:].strip()
                    if event == "endpoint":
                        self.endpoint.put(data)
                    else:
                        self.messages.put(json.loads(data))
                    event = "message"
        except Exception as exc:  # the stream broke, or was closed under the reader (close())
            if not self.closed:
                self.messages.put(exc)

    def answer_to(self, request_id: Any) -> Any:
        """The stream's answer to ``request_id``, checking every message before it."""
        while True:
            message = self.messages.get(timeout=WAIT)
            assert not isinstance(message, BaseException), message
            assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", message
            if "error" in message:
                error = message["error"]
                assert type(error["code"]) is int and isinstance(error["message"], str), message
                assert not _a_bug(error["message"]), message
            if message.get("id") == request_id and "method" not in message:
                return message

    def close(self) -> None:
        self.closed = True
        self.conn.close()


@pytest.fixture(scope="module")
def sse(daemon: DaemonProcess) -> Iterator[_SseStream]:
    stream = _SseStream(daemon)
    init = initialize("init", "2024-11-05")
    assert _post(daemon, stream.path, json.dumps(init).encode())[0] == 202
    assert "result" in stream.answer_to("init")
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert _post(daemon, stream.path, json.dumps(initialized).encode())[0] == 202
    yield stream
    stream.close()


_alive = iter(range(10**9))


@EXAMPLES
@given(data=st.data())
def test_http_sse_endpoint_takes_mutated_frames(
    daemon: DaemonProcess, sse: _SseStream, data: st.DataObject
) -> None:
    tick()
    body, kind = data.draw(_mutated(data.draw(st.sampled_from(LEGACY_BASES)), batches=False))
    status, _, answer = _post(daemon, sse.path, body)
    assert status < 500 and status in (202, 400, 413, 415), (status, answer[:300])
    outcome("HTTP+SSE /messages", kind, str(status))
    alive = f"alive-{next(_alive)}"
    assert _post(daemon, sse.path, json.dumps(_servers_call(alive)).encode())[0] == 202
    reply = sse.answer_to(alive)  # every message before it checked on the way
    assert "demo" in json.dumps(reply["result"]), reply


# -- mcpx demo over stdio --------------------------------------------------------------------------


class _StdioServer:
    """``python -m mcpx demo``: lines in on stdin, each line out read by a thread."""

    def __init__(self, revision: str) -> None:
        self.revision = revision
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mcpx", "demo"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stderr = bytearray()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        if revision != MODERN:
            init = initialize("init", revision)
            self.write(json.dumps(init).encode() + b"\n")
            assert self.answer_to("init")["result"]["protocolVersion"] == revision
            self.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for chunk in self.process.stderr:
            self.stderr.extend(chunk)

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def answer_to(self, request_id: Any) -> Any:
        """The answer to ``request_id``, every line before it checked: one JSON-RPC message (or a batch's array).

        ``seen`` holds, for the summary, what the lines before it were: error codes, or ``result``.
        """
        self.seen: set[str] = set()
        while True:
            line = self.lines.get(timeout=WAIT)
            assert line, f"stdout closed; stderr: {bytes(self.stderr)[-2000:]!r}"
            value = json.loads(line)
            messages = value if isinstance(value, list) and self.revision == "2025-03-26" else [value]
            for message in messages:
                assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", line[:300]
                if "error" in message:
                    error = message["error"]
                    assert type(error["code"]) is int and isinstance(error["message"], str), message
                    assert not _a_bug(error["message"]), message
                if message.get("id") == request_id and "method" not in message:
                    return message
                if "method" not in message:
                    self.seen.add(str(message["error"]["code"]) if "error" in message else "result")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(WAIT) == 0
        assert b"Traceback" not in self.stderr, bytes(self.stderr)[-4000:]


_demos: dict[str, _StdioServer] = {}


@pytest.fixture(scope="module")
def demos() -> Iterator[dict[str, _StdioServer]]:
    yield _demos
    for server in _demos.values():
        server.close()


STDIO_REVISIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", MODERN]


@pytest.mark.parametrize("revision", STDIO_REVISIONS)
@EXAMPLES
@given(data=st.data())
def test_demo_over_stdio_takes_mutated_lines(
    demos: dict[str, _StdioServer], revision: str, data: st.DataObject
) -> None:
    tick()
    server = demos.get(revision) or demos.setdefault(revision, _StdioServer(revision))
    modern = revision == MODERN
    base = data.draw(st.sampled_from(MODERN_BASES if modern else LEGACY_BASES))
    drawn = [data.draw(_mutated(base)) for _ in range(data.draw(st.integers(1, 3)))]
    server.write(b"".join(line.replace(b"\n", b" ") + b"\n" for line, _ in drawn))

    alive = f"alive-{next(_alive)}"
    valid = {
        "jsonrpc": "2.0",
        "id": alive,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": alive}},
    }
    if modern:
        valid["params"]["_meta"] = MODERN_META
    server.write(json.dumps(valid).encode() + b"\n")
    reply = server.answer_to(alive)
    assert reply["result"]["content"][0]["text"] == alive, reply
    answered = " ".join(sorted(server.seen)) or "no answer (notifications)"
    outcome(f"mcpx demo stdio {revision}", drawn[0][1], answered)
