"""A call without a host (``/v1/call``, ``mcpx call``) on the router: what its ``Context`` does (spec/gateway.md §11)."""

from __future__ import annotations

import anyio
import pytest

from mcpx.client import McpCallError
from mcpx.core.actions import build_request_context
from mcpx.core.client_session import Progress
from mcpx.core.revisions import NEWEST
from mcpx.gateway._calls import ask_round
from mcpx.gateway._routing import _NoHost
from mcpx.server import Context


def _context(reports: list[Progress] | None) -> Context:
    request = build_request_context(1, "v1-1", "tools/call", NEWEST, {}, None, None, "v1", {}, None)
    return Context(request, _NoHost(reports.append if reports is not None else None))


def test_an_upstreams_question_is_refused_naming_it_and_saying_there_is_no_host() -> None:
    async def main() -> None:
        round_ = {
            "name": {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {}}},
            "model": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}},
        }
        with pytest.raises(McpCallError) as refused:
            await ask_round(_context([]), round_)
        assert refused.value.code == -32603
        assert "has no host to ask" in refused.value.message
        assert "elicitation/create, sampling/createMessage" in refused.value.message

    anyio.run(main)


def test_roots_are_mcpxs_own_and_nobody_is_asked_for_them() -> None:
    async def main() -> None:
        answers = await ask_round(_context([]), {"roots": {"method": "roots/list", "params": {}}})
        assert answers == {"roots": {"roots": []}}

    anyio.run(main)


def test_progress_reaches_the_caller_and_logs_reach_nobody() -> None:
    reports: list[Progress] = []
    ctx = _context(reports)
    ctx.report_progress(1, 4, "a quarter")
    ctx.report_progress(2)
    ctx.log("info", "nobody hears this")
    assert [(r.progress, r.total, r.message) for r in reports] == [(1, 4, "a quarter"), (2, None, None)]
    _context(None).report_progress(1)  # a caller that did not ask for progress: dropped
