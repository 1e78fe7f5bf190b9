"""``GET /v1/events``: what the daemon's upstreams say, for anyone watching (spec/gateway.md §8).

A watcher opens the stream on a real daemon (the built-in default: mcpx's
demo server as ``demo``), then a call through ``/v1/call`` runs the demo's
``count`` tool, which reports progress and logs each step: both reach the
watcher as events naming the server, although the watcher made no call.  A
watcher that goes away is let go of.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from tests.interop._daemon_process import watch_events
from tests.interop.test_daemon import Daemon

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    root = tmp_path_factory.mktemp("events")
    running = Daemon(root / "state", root)
    yield running
    running.close()


def events(response: http.client.HTTPResponse, wanted: int, *kinds: str) -> list[tuple[str, Any]]:
    """The first ``wanted`` events (kind, data) of a stream, comments skipped; only ``kinds``, if given."""
    found: list[tuple[str, Any]] = []
    kind = ""
    while len(found) < wanted:
        line = response.readline().decode().rstrip("\n")
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: ") and (not kinds or kind in kinds):
            found.append((kind, orjson.loads(line[len("data: ") :])))
    return found


def test_progress_and_log_messages_of_any_call_reach_a_watcher(daemon: Daemon) -> None:
    url = urlsplit(daemon.base)
    watch = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    watch.request("GET", "/v1/events")
    stream = watch.getresponse()
    assert stream.status == 200 and stream.getheader("content-type") == "text/event-stream"
    assert stream.readline() == b": mcpx events\n"  # the stream is open: the watcher is registered
    status, answer = daemon.request(
        "POST", "/v1/call", {"server": "demo", "tool": "count", "arguments": {"to": 2}}
    )
    assert status == 200 and answer["result"]["content"][0]["text"] == "counted to 2"
    seen = events(stream, 4, "progress", "server.log")
    progress = [data for kind, data in seen if kind == "progress"]
    logs = [data for kind, data in seen if kind == "server.log"]
    assert progress == [
        {"server": "demo", "progress": 1, "total": 2, "message": "step 1 of 2"},
        {"server": "demo", "progress": 2, "total": 2, "message": "step 2 of 2"},
    ]
    assert logs == [
        {"server": "demo", "level": "info", "data": "counted 1", "logger": "demo.count"},
        {"server": "demo", "level": "info", "data": "counted 2", "logger": "demo.count"},
    ]
    watch.close()


def test_an_upstreams_processes_starting_and_stopping_reach_a_watcher(daemon: Daemon) -> None:
    """``/v1/restart`` stops the demo's instance, the next call starts another: both are told.

    In either order: the old process may still be winding down when the new one is up.
    """
    call = {"server": "demo", "tool": "echo", "arguments": {"text": "x"}}
    assert daemon.request("POST", "/v1/call", call)[0] == 200  # an instance runs
    _, servers = daemon.request("GET", "/v1/servers")
    (demo,) = [s for s in servers["servers"] if s["name"] == "demo"]
    running = {i["instance"] for i in demo["pool"]["instances"]}  # the one that served, and a spare
    told: dict[str, Any] = {}
    with watch_events(daemon.base) as stream:
        assert daemon.request("POST", "/v1/restart", {"server": "demo"})[0] == 200
        assert daemon.request("POST", "/v1/call", call)[0] == 200
        for kind, data in stream:
            if kind in ("instance.stopped", "instance.started"):
                told[kind] = data
                if len(told) == 2:
                    break
    stopped, started = told["instance.stopped"], told["instance.started"]
    assert stopped["server"] == "demo" and stopped["instance"] in running, stopped
    assert "restart" in stopped["reason"], stopped
    assert started["server"] == "demo" and started["instance"] not in running, started


def test_openapi_lists_the_event_stream(daemon: Daemon) -> None:
    status, spec = daemon.request("GET", "/openapi.json")
    assert status == 200
    assert "text/event-stream" in spec["paths"]["/v1/events"]["get"]["responses"]["200"]["content"]
