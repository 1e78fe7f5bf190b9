"""POST /v1/complete end to end: a real daemon process over three real upstream processes.

* ``demo`` — mcpx's demo server, which declares ``completions``: it is asked.
* ``old`` — the same server speaking only 2024-11-05, a revision with no
  completions capability to declare: not asked, though it could answer
  (so an empty list from the cache, not the names it would give, shows it
  was not asked).
* ``notes`` — a server that declares no completions (tests/interop/_notes_server.py):
  not asked (it would answer method-not-found); the values are those of
  its listed resources that match the template.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ._daemon_process import DaemonProcess

pytestmark = pytest.mark.timeout(60)

PYTHON = sys.executable
CONFIG = f"""
[servers.demo]
command = "{PYTHON}"
args = ["-m", "mcpx", "demo"]

[servers.old]
command = "{PYTHON}"
args = ["-m", "mcpx", "demo", "--revisions", "2024-11-05"]

[servers.notes]
command = "{PYTHON}"
args = ["-m", "tests.interop._notes_server"]
"""
NOTES_TEMPLATE = {"type": "ref/resource", "uri": "notes://{folder}/{name}"}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    running = DaemonProcess(tmp_path_factory.mktemp("complete"), CONFIG)
    yield running
    running.close()


def complete(daemon: DaemonProcess, **body: Any) -> tuple[int, Any]:
    answer = daemon.request("POST", "/v1/complete", body)
    assert answer.content_type == "application/json"
    return answer.status, answer.json()


def test_a_server_that_declared_completions_is_asked(daemon: DaemonProcess) -> None:
    status, answer = complete(
        daemon,
        server="demo",
        ref={"type": "ref/prompt", "name": "greet"},
        argument={"name": "name", "value": "a"},
    )
    assert status == 200 and answer["source"] == "upstream" and "reason" not in answer
    assert answer["server"] == "demo" and answer["completion"]["values"] == ["Ada", "Alan"]
    status, answer = complete(
        daemon,
        server="demo",
        ref={"type": "ref/resource", "uri": "demo://greeting/{name}"},
        argument={"name": "name", "value": "g"},
        context={"arguments": {}},
    )
    assert status == 200 and answer["source"] == "upstream" and answer["completion"]["values"] == ["Grace"]


def test_a_server_without_the_capability_is_answered_from_the_catalog_with_the_reason(
    daemon: DaemonProcess,
) -> None:
    status, answer = complete(
        daemon, server="notes", ref=NOTES_TEMPLATE, argument={"name": "name", "value": "b"}
    )
    assert status == 200 and answer["source"] == "cache"
    assert "'notes' did not declare the completions capability" in answer["reason"]
    assert answer["completion"] == {"values": ["backlog", "bread", "budget"], "total": 3, "hasMore": False}
    # the other variable, already chosen, narrows the listed notes
    status, answer = complete(
        daemon,
        server="notes",
        ref=NOTES_TEMPLATE,
        argument={"name": "name", "value": ""},
        context={"arguments": {"folder": "work"}},
    )
    assert status == 200 and answer["completion"]["values"] == ["backlog", "budget"]
    status, answer = complete(
        daemon, server="notes", ref=NOTES_TEMPLATE, argument={"name": "folder", "value": ""}
    )
    assert answer["completion"]["values"] == ["home", "work"]
    # a prompt's arguments have names but no values in any revision: nothing to offer, and said why
    status, answer = complete(
        daemon,
        server="notes",
        ref={"type": "ref/prompt", "name": "summarize"},
        argument={"name": "folder", "value": "w"},
    )
    assert status == 200 and answer["source"] == "cache" and answer["completion"]["values"] == []


def test_a_2024_11_05_server_is_not_asked_and_the_reason_names_the_revision(daemon: DaemonProcess) -> None:
    status, answer = complete(
        daemon,
        server="old",
        ref={"type": "ref/prompt", "name": "greet"},
        argument={"name": "name", "value": "a"},
    )
    assert status == 200 and answer["source"] == "cache" and answer["completion"]["values"] == []
    assert "speaks MCP 2024-11-05" in answer["reason"] and "not asked" in answer["reason"]


def test_errors_are_json_with_a_stable_code_and_what_to_do(daemon: DaemonProcess) -> None:
    prompt = {"type": "ref/prompt", "name": "greet"}
    argument = {"name": "name", "value": ""}
    status, answer = complete(daemon, server="nope", ref=prompt, argument=argument)
    assert status == 404 and answer["error"]["code"] == "unknown-server"
    assert "configured: demo, old, notes" in answer["error"]["message"]
    status, answer = complete(daemon, server="demo", ref={"type": "ref/tool", "name": "x"}, argument=argument)
    assert status == 400 and answer["error"]["code"] == "bad-request"
    assert '"ref" is {"type": "ref/prompt"' in answer["error"]["message"]
    status, answer = complete(daemon, server="demo", ref=prompt, argument={"name": "name"})
    assert status == 400 and '"value" may be ""' in answer["error"]["message"]
    status, answer = complete(
        daemon, server="demo", ref=prompt, argument=argument, context={"arguments": {"n": 1}}
    )
    assert status == 400 and "as strings" in answer["error"]["message"]
    bad = daemon.request("POST", "/v1/complete", raw=b"{not json")
    assert bad.status == 400 and bad.json()["error"]["code"] == "bad-json"
    # not asked, so the catalog says what is there
    status, answer = complete(
        daemon, server="notes", ref={"type": "ref/prompt", "name": "x"}, argument=argument
    )
    assert status == 404 and answer["error"]["code"] == "unknown-ref"
    assert "(prompts: summarize)" in answer["error"]["message"]
    status, answer = complete(daemon, server="notes", ref=NOTES_TEMPLATE, argument={"name": "x", "value": ""})
    assert status == 404 and answer["error"]["code"] == "unknown-argument"
    assert "(variables: folder, name)" in answer["error"]["message"]
    # asked, so the upstream's own error is carried
    status, answer = complete(
        daemon, server="demo", ref={"type": "ref/prompt", "name": "x"}, argument=argument
    )
    assert status == 502 and answer["error"]["data"]["server"] == "demo"
    assert answer["error"]["data"]["jsonrpc"]["code"] == -32602


def test_openapi_describes_v1_complete(daemon: DaemonProcess) -> None:
    api = daemon.request("GET", "/openapi.json").json()
    operation = api["paths"]["/v1/complete"]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    assert operation["operationId"] == "complete" and schema["required"] == ["server", "ref", "argument"]
