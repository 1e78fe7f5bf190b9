"""2026-07-28 input rounds through ``mcpx.client``, against a scripted stdio server.

The server answers ``tools/call`` with ``input_required`` and, before each
answer, logs in a ``notifications/message`` what that ``tools/call`` carried
(the keys of its ``inputResponses``), so a test sees exactly which retries
went out.  Whatever the resolver does — take longer than the caller waits,
get cancelled with its caller, raise, refuse one question of several — only
that call ends, with an ``McpCallError`` for its caller, and the connection
goes on.  ``max_rounds`` and ``answer_modern_requests`` reach the session
through ``connect_stdio`` and ``connect_http``.
"""

from __future__ import annotations

import inspect
import json
import queue
import sys
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import orjson
import pytest

from mcpx.client import Client, McpCallError, connect_http, connect_sse, connect_stdio

pytestmark = pytest.mark.timeout(60)

SERVER = r"""
import json, sys
mode = sys.argv[1]
NAME = {"type": "object", "properties": {"name": {"type": "string"}}}
QUESTIONS = {
    "one": {"q": {"method": "roots/list", "params": {}}},
    "two": {
        "a": {"method": "roots/list", "params": {}},
        "b": {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": NAME}},
    },
}
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
def text(id_, value):
    send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": json.dumps(value, sort_keys=True)}]}})
waiting = None
for line in sys.stdin:
    msg = json.loads(line)
    if "method" not in msg:  # the answer to the request this server sent
        if msg.get("id") == "s1" and waiting is not None:
            text(waiting, msg.get("result"))
        continue
    if "id" not in msg:
        continue
    if msg["method"] != "tools/call":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": []}})
        continue
    answers = (msg.get("params") or {}).get("inputResponses")
    carried = sorted(answers) if answers is not None else None
    send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "logger": "tools/call", "data": carried}})
    if mode == "request":  # 2026-07-28 has no server requests; this server sends one anyway
        waiting = msg["id"]
        send({"jsonrpc": "2.0", "id": "s1", "method": "roots/list"})
    elif answers is None or mode == "always":
        questions = QUESTIONS.get(mode, QUESTIONS["one"])
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"resultType": "input_required", "inputRequests": questions}})
    else:
        text(msg["id"], answers)
"""

CAPABILITIES = {"roots": {}, "elicitation": {}}
ROOTS = {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}


def server(mode: str) -> list[str]:
    return [sys.executable, "-c", SERVER, mode]


async def seen(client: Client) -> list[Any]:
    """What each ``tools/call`` the server received carried (the keys of its inputResponses, or None)."""
    # The server reads in order and logs each tools/call before it answers: its answer to a
    # tools/list sent now comes after the log of every tools/call sent before.
    await still_works(client)
    return [
        note.params["data"]
        for note in client.notifications
        if note.method == "notifications/message" and note.params.get("logger") == "tools/call"
    ]


async def still_works(client: Client) -> None:
    with anyio.fail_after(5):
        assert await client.request("tools/list") == {"tools": []}


@pytest.mark.parametrize("how", ["times-out", "is-cancelled"])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_caller_that_gives_up_during_a_round_ends_only_its_call(backend: str, how: str) -> None:
    """The resolver is stopped, no retry goes out, and the connection lives on."""
    finished: list[str] = []

    async def slow(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        try:
            await anyio.sleep(0.6)  # slower than its caller waits (0.3 s)
        except BaseException:
            finished.append("cancelled")
            raise
        finished.append("answered")
        return ROOTS

    async def main() -> None:
        async with connect_stdio(
            server("one"), modern=True, capabilities=CAPABILITIES, resolver=slow
        ) as client:
            if how == "times-out":
                with pytest.raises(McpCallError, match=r"no answer from the server within 0\.3s"):
                    await client.request("tools/call", {"name": "x"}, timeout=0.3)
            else:
                with anyio.move_on_after(0.3):
                    await client.call_tool("x")
            # Time is what is tested: past the resolver's own 0.6 s, nothing may go out, nothing may break.
            await anyio.sleep(1.0)
            assert finished == ["cancelled"]
            assert await seen(client) == [None]
            await still_works(client)

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_resolver_that_breaks_fails_only_its_call(backend: str) -> None:
    async def broken(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        raise ValueError("resolver bug")

    async def main() -> None:
        async with connect_stdio(
            server("one"), modern=True, capabilities=CAPABILITIES, resolver=broken
        ) as client:
            with pytest.raises(McpCallError) as failed:
                await client.call_tool("x")
            assert failed.value.code == -32603
            assert "'q' (roots/list)" in failed.value.message
            assert "ValueError: resolver bug" in failed.value.message
            assert failed.value.data == {"inputKey": "q", "method": "roots/list"}
            assert await seen(client) == [None]  # no retry
            await still_works(client)

    anyio.run(main, backend=backend)


def test_every_question_answered_goes_out_in_one_retry() -> None:
    asked: list[str] = []

    async def both(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        asked.append(method)
        return ROOTS if method == "roots/list" else {"action": "accept", "content": {"name": "Ada"}}

    async def main() -> None:
        async with connect_stdio(
            server("two"), modern=True, capabilities=CAPABILITIES, resolver=both
        ) as client:
            result = await client.call_tool("x")
            assert orjson.loads(result["content"][0]["text"]) == {
                "a": ROOTS,
                "b": {"action": "accept", "content": {"name": "Ada"}},
            }
            assert await seen(client) == [None, ["a", "b"]]

    anyio.run(main)
    assert asked == ["roots/list", "elicitation/create"]


def test_a_refused_question_fails_the_call_naming_its_key_and_sends_no_retry() -> None:
    """2026-07-28: a client constructs every requested input before it retries; it cannot, so it does not."""
    asked: list[str] = []

    async def roots_only(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        asked.append(method)
        if method != "roots/list":
            raise McpCallError({"code": -32601, "message": "nobody here to ask", "data": {"why": "headless"}})
        return ROOTS

    async def main() -> None:
        async with connect_stdio(
            server("two"), modern=True, capabilities=CAPABILITIES, resolver=roots_only
        ) as client:
            with pytest.raises(McpCallError) as failed:
                await client.call_tool("x")
            assert failed.value.code == -32601
            assert "question 'b' (elicitation/create): nobody here to ask" in failed.value.message
            assert failed.value.data == {
                "inputKey": "b",
                "method": "elicitation/create",
                "reason": {"why": "headless"},
            }
            assert await seen(client) == [None]  # the retry without 'b' never went out
            await still_works(client)

    anyio.run(main)
    assert asked == ["roots/list", "elicitation/create"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_calls_own_round_resolver_answers_the_round_whole_and_its_refusal_is_the_calls_error(
    backend: str,
) -> None:
    """``request(on_round=)``: the round under the server's keys in one go; the connection's resolver unused."""
    rounds: list[Mapping[str, Any]] = []

    async def connection_wide(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        raise AssertionError("the call's own round resolver answers its rounds")

    async def whole(requests: Mapping[str, Any]) -> Mapping[str, Any]:
        rounds.append(requests)
        return {"a": ROOTS, "b": {"action": "decline"}}

    async def refuses(requests: Mapping[str, Any]) -> Mapping[str, Any]:
        raise McpCallError({"code": -32021, "message": "the host declared no elicitation", "data": {"x": 1}})

    async def forgets(requests: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"a": ROOTS}

    async def main() -> None:
        async with connect_stdio(
            server("two"), modern=True, capabilities=CAPABILITIES, resolver=connection_wide
        ) as client:
            result = await client.request("tools/call", {"name": "x"}, on_round=whole)
            assert orjson.loads(result["content"][0]["text"]) == {"a": ROOTS, "b": {"action": "decline"}}
            assert [sorted(r) for r in rounds] == [["a", "b"]]
            with pytest.raises(McpCallError) as refused:
                await client.request("tools/call", {"name": "x"}, on_round=refuses)
            assert (refused.value.code, refused.value.message) == (-32021, "the host declared no elicitation")
            assert refused.value.data == {"x": 1}
            with pytest.raises(McpCallError, match="did not answer 'b'") as partial:
                await client.request("tools/call", {"name": "x"}, on_round=forgets)
            assert partial.value.code == -32603
            # One retry, for the answered round; the refused and the partial ones sent none.
            assert await seen(client) == [None, ["a", "b"], None, None]
            await still_works(client)

    anyio.run(main, backend=backend)


def test_max_rounds_reaches_the_session_through_connect_stdio() -> None:
    async def answer(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        return ROOTS

    async def main() -> None:
        async with connect_stdio(
            server("always"), modern=True, capabilities=CAPABILITIES, resolver=answer, max_rounds=2
        ) as client:
            with pytest.raises(McpCallError, match="more than 2 times in one call"):
                await client.call_tool("x")
            assert await seen(client) == [None, ["q"], ["q"]]

    anyio.run(main)


@pytest.mark.parametrize("answer_modern_requests", [True, False])
def test_answer_modern_requests_reaches_the_session_through_connect_stdio(
    answer_modern_requests: bool,
) -> None:
    async def answer(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        assert method == "roots/list"
        return ROOTS

    async def main() -> None:
        async with connect_stdio(
            server("request"),
            modern=True,
            capabilities=CAPABILITIES,
            resolver=answer,
            answer_modern_requests=answer_modern_requests,
        ) as client:
            if answer_modern_requests:
                result = await client.request("tools/call", {"name": "x"}, timeout=5)
                # The legacy answer, with the resultType 2026-07-28 requires of every result.
                assert orjson.loads(result["content"][0]["text"]) == {**ROOTS, "resultType": "complete"}
            else:  # dropped, as 2026-07-28 has no server requests: the server waits in vain
                with pytest.raises(McpCallError, match="no answer"):
                    await client.request("tools/call", {"name": "x"}, timeout=1)

    anyio.run(main)


# -- over Streamable HTTP: a scripted 2026-07-28 server that asks by request -----------------


@pytest.fixture
def asking_url() -> Iterator[str]:
    """Answers a ``tools/call`` POST with an event stream: a ``roots/list`` request, then the result.

    The result carries the client's answer, which arrives in a POST of its
    own; without one within 3 s the result is ``null``.
    """
    answers: queue.Queue[Any] = queue.Queue()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if "method" not in body:  # the answer to the question
                answers.put(body.get("result"))
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            question = {"jsonrpc": "2.0", "id": "s1", "method": "roots/list"}
            self.wfile.write(b"event: message\ndata: " + json.dumps(question).encode() + b"\n\n")
            self.wfile.flush()
            try:
                got = answers.get(timeout=3)
            except queue.Empty:
                got = None
            content = [{"type": "text", "text": json.dumps(got, sort_keys=True)}]
            result = {"jsonrpc": "2.0", "id": body["id"], "result": {"content": content}}
            self.wfile.write(b"event: message\ndata: " + json.dumps(result).encode() + b"\n\n")
            self.wfile.flush()
            self.close_connection = True

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    httpd.shutdown()
    httpd.server_close()
    thread.join(10)


@pytest.mark.parametrize("answer_modern_requests", [True, False])
def test_answer_modern_requests_reaches_the_session_through_connect_http(
    asking_url: str, answer_modern_requests: bool
) -> None:
    async def answer(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        return ROOTS

    async def main() -> None:
        async with connect_http(
            asking_url,
            modern=True,
            capabilities=CAPABILITIES,
            resolver=answer,
            answer_modern_requests=answer_modern_requests,
        ) as client:
            result = await client.request("tools/call", {"name": "x"}, timeout=10)
            got = orjson.loads(result["content"][0]["text"])
            assert got == ({**ROOTS, "resultType": "complete"} if answer_modern_requests else None)

    anyio.run(main)


def test_every_connect_takes_the_same_session_knobs() -> None:
    """``connect_sse`` is legacy-only, where neither knob changes anything; it takes them for one signature."""
    for connect in (connect_stdio, connect_http, connect_sse):
        parameters = inspect.signature(connect).parameters
        assert parameters["answer_modern_requests"].default is False, connect.__name__
        assert parameters["max_rounds"].default == 8, connect.__name__
