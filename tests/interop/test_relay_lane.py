"""The relay lane (spec/gateway.md §11): a host's call through ``mcpx serve`` to a warm instance, and everything after.

A host served on its own stdio whose ``tools/call`` goes to a running stdio
instance with room has it sent by the router at once, without the server's
``Deferred``; anything beyond the plain answer (a question, a log message,
an error, a cancel, a timeout, a duplicate id, the end of the host's input)
makes it a routed call like any other.  Each test warms the upstream with
one call first, so the call under test is one the lane takes: a real daemon,
mcpx's demo server upstream, a legacy host through ``mcpx serve``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from ..fuzz._mcp import CC, CI, MODERN, PV, notification, request
from .test_settings_walk import DEMO, Host, Running, legacy_host, mcpx_call, running, text_of

pytestmark = pytest.mark.timeout(120)


def _warm(host: Host) -> None:
    """One call, so the instance runs and the catalogs are read: the next call takes the lane."""
    host.send(mcpx_call("warm", "demo", "echo", text="warm"))
    (answer,) = host.replies(1)
    assert text_of(answer) == "warm", answer


def _in_flight(daemon: Running) -> int:
    shown = daemon.mcpx("status", "--json")
    count: int = orjson.loads(shown.stdout)["health"]["inFlight"]
    return count


def test_a_question_during_a_relayed_call_reaches_its_host_and_its_answer_the_upstream(
    tmp_path: Path,
) -> None:
    with (
        running(tmp_path, config=DEMO) as daemon,
        legacy_host(daemon, capabilities={"elicitation": {}}) as host,
    ):
        _warm(host)
        host.send(mcpx_call(1, "demo", "ask_name"))
        question = host.message()
        assert question.get("method") == "elicitation/create", question
        host.send(
            {
                "jsonrpc": "2.0",
                "id": question["id"],
                "result": {"action": "accept", "content": {"name": "Ada"}},
            }
        )
        (answer,) = host.replies(1)
        assert answer["id"] == 1 and text_of(answer) == "Hello, Ada!", answer


def test_a_relayed_calls_log_messages_reach_its_host(tmp_path: Path) -> None:
    with running(tmp_path, config=DEMO) as daemon, legacy_host(daemon) as host:
        host.send(request("level", "logging/setLevel", {"level": "debug"}))
        host.replies(1)
        _warm(host)
        host.send(mcpx_call(1, "demo", "count", to=3))
        logged = []
        while True:
            message = host.message()
            if message.get("id") == 1:
                break
            if message.get("method") == "notifications/message":
                logged.append(message["params"]["data"])
        assert text_of(message) == "counted to 3", message
        assert [json.dumps(data) for data in logged] == [json.dumps(f"counted {i}") for i in (1, 2, 3)], (
            logged
        )


def test_a_relayed_call_its_host_cancels_is_never_answered_and_leaves_nothing_in_flight(
    tmp_path: Path,
) -> None:
    with running(tmp_path, config=DEMO) as daemon, legacy_host(daemon) as host:
        _warm(host)
        host.send(mcpx_call(1, "demo", "sleep", seconds=60))
        deadline = time.monotonic() + 30
        while _in_flight(daemon) != 1:  # the call is upstream
            assert time.monotonic() < deadline, "the call never went upstream"
        host.send(notification("notifications/cancelled", {"requestId": 1, "reason": "changed my mind"}))
        host.send(mcpx_call(2, "demo", "echo", text="after"))
        (answer,) = host.replies(1)
        assert answer["id"] == 2 and text_of(answer) == "after", answer
        while _in_flight(daemon) != 0:  # cancelled upstream and released: the sleep does not hold it
            assert time.monotonic() < deadline, "the cancelled call is still in flight"


def test_a_relayed_call_past_the_call_timeout_ends_with_the_timeout_error(tmp_path: Path) -> None:
    with (
        running(tmp_path, config=DEMO, MCPX_POOL_CALL_TIMEOUT="1s") as daemon,
        legacy_host(daemon) as host,
    ):
        _warm(host)
        sent = time.monotonic()
        host.send(mcpx_call(1, "demo", "sleep", seconds=60))
        (answer,) = host.replies(1)
        waited = time.monotonic() - sent
        assert answer["id"] == 1 and answer["error"]["data"]["kind"] == "call-timeout", answer
        assert 0.9 <= waited < 20, waited


def test_a_duplicate_id_while_a_relayed_call_runs_is_refused_and_the_call_still_answered(
    tmp_path: Path,
) -> None:
    with running(tmp_path, config=DEMO) as daemon, legacy_host(daemon) as host:
        _warm(host)
        host.send(mcpx_call(7, "demo", "sleep", seconds=0.5))
        host.send(mcpx_call(7, "demo", "echo", text="twin"))
        refused, answered = host.replies(2)
        # Refused with a null id: an answer under 7 would read as the running call's.
        assert refused["id"] is None and "already in use" in refused["error"]["message"], refused
        assert answered["id"] == 7, answered
        assert text_of(answered) == "slept 0.5s", answered


def test_a_host_that_ends_its_input_still_gets_the_answer_to_its_relayed_call(tmp_path: Path) -> None:
    with running(tmp_path, config=DEMO) as daemon, legacy_host(daemon) as host:
        _warm(host)
        host.send(mcpx_call(1, "demo", "sleep", seconds=0.3))
        _took, after = host.end()  # exits 0, no traceback
        assert [a["id"] for a in after] == [1] and text_of(after[0]) == "slept 0.3s", after


def test_a_relayed_pass_through_call_answers_with_the_upstreams_result(tmp_path: Path) -> None:
    """In pass-through, the host's own tool name: the answer is the upstream's, structured content and all."""
    with (
        running(tmp_path, config=DEMO, MCPX_MCP_PASSTHROUGH="demo") as daemon,
        legacy_host(daemon) as host,
    ):
        host.send(request("warm", "tools/call", {"name": "echo", "arguments": {"text": "warm"}}))
        host.replies(1)
        answers: list[Any] = []
        for n in range(20):
            host.send(request(n, "tools/call", {"name": "weather", "arguments": {"city": f"c{n}"}}))
        answers = host.replies(20)
        assert sorted(a["id"] for a in answers) == list(range(20)), answers
        for answer in answers:
            assert answer["result"]["structuredContent"]["city"] == f"c{answer['id']}", answer


def test_a_relayed_mcpx_call_of_a_tool_the_server_lacks_is_its_minus_32602_in_mcpxs_words(
    tmp_path: Path,
) -> None:
    with running(tmp_path, config=DEMO) as daemon, legacy_host(daemon) as host:
        _warm(host)
        host.send(mcpx_call(1, "demo", "no_such_tool"))
        (answer,) = host.replies(1)
        error = answer["error"]
        assert error["code"] == -32602 and "mcpx_search" in error["message"], answer


def _modern_post(daemon: Running, request_id: str, params: dict[str, Any]) -> dict[str, Any]:
    meta = {PV: MODERN, CC: {"elicitation": {}}, CI: {"name": "lane", "version": "1"}}
    status, headers, body = daemon.http(
        "POST",
        "/mcp",
        request(request_id, "tools/call", {**params, "_meta": meta}),
        {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": params["name"]},
    )
    assert status == 200 and headers["content-type"].startswith("application/json"), (status, body)
    answer: dict[str, Any] = orjson.loads(body)
    return answer


def test_a_2026_host_over_http_takes_the_lane_and_its_question_comes_back_as_a_round(tmp_path: Path) -> None:
    """Over ``/mcp``, a 2026-07-28 request is a scope of its own: relayed too, and asked as over stdio."""
    with running(tmp_path, config=DEMO) as daemon:
        call = {
            "name": "mcpx_call",
            "arguments": {"server": "demo", "tool": "echo", "arguments": {"text": "warm"}},
        }
        assert text_of(_modern_post(daemon, "w", call)) == "warm"
        ask = {"name": "mcpx_call", "arguments": {"server": "demo", "tool": "ask_name", "arguments": {}}}
        first = _modern_post(daemon, "a1", ask)["result"]
        assert first["resultType"] == "input_required", first
        (key,) = first["inputRequests"]
        retry = {
            **ask,
            "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}},
            "requestState": first["requestState"],
        }
        done = _modern_post(daemon, "a2", retry)
        assert text_of(done) == "Hello, Ada!", done
