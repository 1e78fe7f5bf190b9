"""An upstream's progress during a call, through a real daemon process to /v1 and to ``mcpx call``.

The upstream is the daemon's built-in default, mcpx's demo server, whose
``count`` tool reports ``step i of n`` for each step.  /v1/call relays it
only when asked (``"progress": true``) and only once some arrives; ``mcpx
call`` asks when its stderr is a terminal (a pty here), draws it there, and
prints only the result on stdout.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from ._daemon_process import DaemonProcess

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    running = DaemonProcess(tmp_path_factory.mktemp("progress"))
    yield running
    running.close()


def call(daemon: DaemonProcess, tool: str, arguments: dict[str, Any], **more: Any) -> Any:
    return daemon.request(
        "POST", "/v1/call", {"server": "demo", "tool": tool, "arguments": arguments, **more}
    )


def test_v1_call_relays_progress_as_ndjson_lines_then_the_result(daemon: DaemonProcess) -> None:
    streamed = call(daemon, "count", {"to": 5}, progress=True)
    assert streamed.status == 200 and streamed.content_type == "application/x-ndjson"
    *reports, last = streamed.lines()
    steps = [line["progress"] for line in reports]
    assert all(set(line) == {"progress"} for line in reports) and steps
    assert [s["progress"] for s in steps] == sorted({s["progress"] for s in steps})  # never backwards
    assert steps[-1] == {"progress": 5, "total": 5, "message": "step 5 of 5"}
    plain = call(daemon, "count", {"to": 5})  # the last line is what the plain answer's body is
    assert plain.content_type == "application/json" and last == plain.json()
    assert last["result"]["content"] == [{"type": "text", "text": "counted to 5"}]


def test_a_call_that_reports_nothing_is_answered_exactly_as_without_progress(daemon: DaemonProcess) -> None:
    asked = call(daemon, "echo", {"text": "hi"}, progress=True)
    plain = call(daemon, "echo", {"text": "hi"})
    assert (asked.status, asked.content_type, asked.body) == (plain.status, plain.content_type, plain.body)
    refused = call(daemon, "no_such_tool", {}, progress=True)  # an upstream error before any progress
    assert refused.status == 502 and refused.json()["error"]["data"]["jsonrpc"]["code"] == -32602
    bad = call(daemon, "count", {}, progress="yes")
    assert bad.status == 400 and '"progress" is true' in bad.json()["error"]["message"]


def test_an_error_after_progress_is_the_last_line_with_the_status_it_would_have_had(
    daemon: DaemonProcess,
) -> None:
    streamed = call(daemon, "count", {"to": 10_000_000}, progress=True, timeout=0.5)
    assert streamed.status == 200 and streamed.content_type == "application/x-ndjson"
    *reports, last = streamed.lines()
    assert reports and all("progress" in line for line in reports)
    assert last["status"] == 502 and last["error"]["code"] == "call-timeout"
    assert "did not answer within 0.5s" in last["error"]["message"]
    assert call(daemon, "echo", {"text": "after"}).json()["result"]["content"][0]["text"] == "after"


def test_mcpx_call_draws_progress_on_a_terminal_and_prints_only_the_result(daemon: DaemonProcess) -> None:
    ran = daemon.mcpx("call", "demo", "count", "--arg", "to=5", stderr_terminal=True)
    assert ran.returncode == 0, ran.stderr
    assert b"demo/count: 5/5 (100%) step 5 of 5" in ran.stderr  # the last report is always drawn
    assert ran.stderr.endswith(b"\r\x1b[K")  # and erased once the result is in
    result = orjson.loads(ran.stdout)  # stdout is a pipe: JSON, the result alone
    assert result["content"] == [{"type": "text", "text": "counted to 5"}] and b"step" not in ran.stdout
    failed = daemon.mcpx(
        "call", "demo", "count", "--arg", "to=10000000", "--timeout", "0.5", stderr_terminal=True
    )
    assert failed.returncode == 1 and failed.stdout == b""
    assert b"\r\x1b[Kmcpx: server 'demo' did not answer within 0.5s" in failed.stderr


def test_mcpx_call_without_a_terminal_prints_the_result_and_no_progress(daemon: DaemonProcess) -> None:
    ran = daemon.mcpx("call", "demo", "count", "--arg", "to=5", "--json")
    assert ran.returncode == 0 and ran.stderr == b""
    assert orjson.loads(ran.stdout)["content"] == [{"type": "text", "text": "counted to 5"}]
