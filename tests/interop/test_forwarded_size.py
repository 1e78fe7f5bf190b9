"""Forwarding never turns a legal request into an illegal one: what mcpx adds counts against the limit.

A host's line at ``transport.maxLine`` is accepted, but the request mcpx
writes upstream for it is longer (a 2026-07-28 upstream's ``_meta``, mcpx's
own id).  mcpx's stdio servers take lines up to the same limit, so that
request is refused before it is sent: the host is answered at once with
``-32602``, ``kind: too-large``, the size it would have had, the limit and
by how much, and the next call works.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ..fuzz._mcp import to_line
from .test_settings_walk import DEMO, legacy_host, mcpx_call, running, text_of

pytestmark = pytest.mark.timeout(90)

LIMIT = 8192
MODERN_DEMO = DEMO + 'era = "modern"\n'  # a legacy host's call would go over a legacy session, unlengthened


def _padded_to(limit: int, request_id: int) -> bytes:
    """An ``mcpx_call`` of the demo's ``echo`` exactly ``limit`` bytes long, its newline not counted."""
    bare = len(to_line(mcpx_call(request_id, "demo", "echo", text=""))) - 1
    line = to_line(mcpx_call(request_id, "demo", "echo", text="x" * (limit - bare)))
    assert len(line) - 1 == limit, len(line)
    return line


def test_a_request_at_the_cap_that_mcpx_would_lengthen_is_refused_at_once(tmp_path: Path) -> None:
    with (
        running(tmp_path, config=MODERN_DEMO, MCPX_TRANSPORT_MAX_LINE=str(LIMIT)) as daemon,
        legacy_host(daemon) as host,
    ):
        host.send(mcpx_call(1, "demo", "echo", text="warm"))
        assert text_of(host.replies(1)[0]) == "warm"
        sent = time.monotonic()
        host.write(_padded_to(LIMIT, 2))
        (answer,) = host.replies(1)
        took = time.monotonic() - sent
        error = answer["error"]
        assert answer["id"] == 2 and error["code"] == -32602, answer
        data = error["data"]
        assert data["kind"] == "too-large" and data["server"] == "demo" and data["limit"] == LIMIT, data
        assert data["size"] > LIMIT and f"by {data['size'] - LIMIT} bytes" in error["message"], error
        assert took < 5, took  # at once, not after pool.callTimeout
        host.send(mcpx_call(3, "demo", "echo", text="after"))
        assert text_of(host.replies(1)[0]) == "after"


def test_the_padded_line_is_what_it_says() -> None:
    line = _padded_to(LIMIT, 9)
    assert json.loads(line)["params"]["arguments"]["server"] == "demo"
