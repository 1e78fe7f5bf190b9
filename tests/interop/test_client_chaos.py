"""Upstreams that misbehave: the caller gets an error within its timeout, nothing hangs or leaks.

Three servers written to fail (they answer ``initialize`` like any legacy
server, then): one that dies in the middle of a call, one that stalls, and one
that floods stdout with a line that never ends.  Each time the call must fail
with a message that says what happened, within the call timeout, and the
server process must be gone afterwards; the client's own open file
descriptors must be back where they started.
"""

from __future__ import annotations

import os
import sys
import time

import anyio
import pytest

from mcpx.client import McpCallError, connect_stdio

pytestmark = pytest.mark.timeout(60)

PRELUDE = r"""
import json, sys, time
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
init = json.loads(sys.stdin.readline())
send({"jsonrpc": "2.0", "id": init["id"], "result": {
    "protocolVersion": init["params"]["protocolVersion"], "capabilities": {"tools": {}},
    "serverInfo": {"name": "chaos", "version": "1"}}})
sys.stdin.readline()  # notifications/initialized
call = json.loads(sys.stdin.readline())
"""

BEHAVIOURS = {
    "dies": PRELUDE + "sys.stderr.write('chaos: giving up now\\n'); sys.stderr.flush(); sys.exit(7)\n",
    "stalls": PRELUDE + "time.sleep(3600)\n",
    "floods": PRELUDE + "chunk = 'x' * 65536\nwhile True:\n    sys.stdout.write(chunk); sys.stdout.flush()\n",
}


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else -1


@pytest.mark.parametrize("behaviour", sorted(BEHAVIOURS))
def test_a_misbehaving_upstream_fails_the_call_in_time_and_leaves_nothing_behind(behaviour: str) -> None:
    script = BEHAVIOURS[behaviour]
    before = open_fds()
    seen: dict[str, object] = {}

    async def main() -> None:
        async with connect_stdio(
            [sys.executable, "-c", script], call_timeout=2.0, max_line=1 << 20, shutdown_grace=1.0
        ) as client:
            started = time.monotonic()
            with pytest.raises(McpCallError) as failed:
                await client.call_tool("anything")
            seen["elapsed"] = time.monotonic() - started
            seen["message"] = failed.value.message

    anyio.run(main)
    assert seen["elapsed"] < 2.0 + 1.0, seen  # the call timeout, plus a little
    message = str(seen["message"])
    if behaviour == "dies":
        assert "closed the connection" in message and "chaos: giving up now" in message
    else:
        assert "no answer from the server within 2s" in message
    assert open_fds() == before  # pipes closed, the process reaped
