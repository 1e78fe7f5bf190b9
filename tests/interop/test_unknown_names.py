"""An unknown tool or server, said in the words of the surface it was asked on.

Through the gateway (``mcpx_call``), a tool the server's catalog does not
list is still forwarded, and the server's ``-32602`` comes back with what a
gateway host can use (``mcpx_search``, ``mcpx_describe``), quoting the
server; a server mcpx does not have is ``-32602`` too, with
``kind: unknown-server``.  On the CLI, the same tool is pointed at
``mcpx tools SERVER``.  Both ways through the middle: the router (the
default) and the awaited path (taken while ``transport.ssePollAfter`` is set).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_settings_walk import legacy_host, mcpx_call, running

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize("path", ["routed", "awaited"])
def test_mcpx_call_reports_an_unknown_tool_and_an_unknown_server_alike(tmp_path: Path, path: str) -> None:
    settings = {"MCPX_TRANSPORT_SSE_POLL_AFTER": "60s"} if path == "awaited" else {}
    with running(tmp_path, **settings) as daemon, legacy_host(daemon) as host:
        host.send(mcpx_call(1, "demo", "no_such_tool"))
        (tool,) = host.replies(1)
        error = tool["error"]
        assert error["code"] == -32602, tool
        message = error["message"]
        assert "'demo' has no tool named 'no_such_tool'" in message, message
        assert "mcpx_search" in message and "mcpx_describe" in message, message
        assert "(the server said: " in message and "no_such_tool" in message.split("(the server said: ")[1]

        host.send(mcpx_call(2, "nope", "echo", text="x"))
        (server,) = host.replies(1)
        assert server["error"]["code"] == -32602, server
        assert server["error"]["data"] == {"server": "nope", "kind": "unknown-server"}, server
        assert "demo" in server["error"]["message"] and "mcpx_servers" in server["error"]["message"]

        host.send(mcpx_call(3, "demo", "echo", text="still here"))
        (fine,) = host.replies(1)
        assert "still here" in str(fine.get("result")), fine


def test_the_cli_points_an_unknown_tool_at_mcpx_tools(tmp_path: Path) -> None:
    with running(tmp_path) as daemon:
        done = daemon.mcpx("call", "demo", "no_such_tool")
        said = done.stderr.decode()
        assert done.returncode == 1, (done.stdout, said)
        assert "`mcpx tools demo` lists its tools and their arguments" in said, said
        assert "no_such_tool" in said, said
