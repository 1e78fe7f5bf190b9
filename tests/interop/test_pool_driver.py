"""The pool's driver with real upstream processes: crash and restart, call timeouts, idle reaping.

``Upstreams`` (mcpx/gateway/_upstreams.py) runs the pure pool over spawned
stdio servers.  The upstream here is a few lines of ``mcpx.server`` with a
tool that kills its own process mid-call and one that sleeps, so each rule is
exercised by a process really dying or really being slow.  The clock is the
real one, with short settings.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio
import pytest

from mcpx.cli._gateway import wait_for_exit
from mcpx.client import McpCallError
from mcpx.config import UpstreamServer
from mcpx.core import PoolConfig
from mcpx.gateway import Upstreams

pytestmark = pytest.mark.timeout(60)

SERVER = """
import os, anyio
from mcpx.server import Context, Server
from mcpx.drivers import serve_stdio
server = Server("fragile")

@server.tool()
async def roots(ctx: Context) -> str:
    return str(len(await ctx.list_roots()))

@server.tool()
async def pid() -> str:
    return str(os.getpid())

@server.tool()
async def die() -> str:
    os._exit(3)

@server.tool()
async def nap(seconds: float) -> str:
    await anyio.sleep(seconds)
    return "rested"

serve_stdio(server)
"""


def fragile() -> dict[str, UpstreamServer]:
    return {"fragile": UpstreamServer(name="fragile", command=sys.executable, args=("-c", SERVER))}


def text(result: object) -> str:
    assert isinstance(result, dict)
    return str(result["content"][0]["text"])


async def call(
    upstreams: Upstreams, tool: str, arguments: dict[str, object] | None = None, **kw: object
) -> str:
    return text(
        await upstreams.request("fragile", "tools/call", {"name": tool, "arguments": arguments or {}}, **kw)
    )  # type: ignore[arg-type]


def run(pool: PoolConfig, tmp_path: Path, body: object) -> None:
    async def main() -> None:
        upstreams = Upstreams(fragile(), state_dir=tmp_path, pool=pool)
        async with anyio.create_task_group() as tg:
            upstreams.attach(tg)
            await body(upstreams)  # type: ignore[operator]
            tg.cancel_scope.cancel()

    anyio.run(main)


def test_a_crash_fails_the_call_naming_the_server_and_the_next_call_gets_a_new_process(
    tmp_path: Path,
) -> None:
    async def body(upstreams: Upstreams) -> None:
        first = await call(upstreams, "pid")
        with pytest.raises(McpCallError) as crashed:
            await call(upstreams, "die")
        assert "fragile" in crashed.value.message
        with anyio.fail_after(10):  # the first retry comes after backoff_base
            second = await call(upstreams, "pid")
        assert second != first  # a new process
        (status,) = upstreams.status()
        assert status.spawn_count == 2 and status.last_error is not None

    run(PoolConfig(backoff_base=0.2, backoff_cap=1.0), tmp_path, body)


def test_the_call_timeout_is_the_pools_and_a_caller_may_only_lower_it(tmp_path: Path) -> None:
    async def body(upstreams: Upstreams) -> None:
        await call(upstreams, "pid")  # started and warm: what follows times the call alone
        # Which bound cut the call shows in whether it waited that long and was cut long before
        # the tool would have finished (a loaded machine only makes the cut late, never early).
        for asked, bound in ((0.3, 0.3), (30.0, 1.0), (None, 1.0)):
            started = time.monotonic()
            with pytest.raises(McpCallError) as slow:
                await call(upstreams, "nap", {"seconds": 60}, timeout=asked)
            took = time.monotonic() - started
            assert bound <= took < 20, (asked, took)
            assert "fragile" in slow.value.message
        assert await call(upstreams, "nap", {"seconds": 0.1}) == "rested"  # the instance stays usable

    run(PoolConfig(call_timeout=1.0), tmp_path, body)


def test_an_idle_instance_is_reaped_and_started_again_on_use(tmp_path: Path) -> None:
    async def body(upstreams: Upstreams) -> None:
        first = await call(upstreams, "pid")
        # Its process ends once the pool has reaped it (the pool lets go of it, then it is stopped).
        assert await anyio.to_thread.run_sync(wait_for_exit, int(first), 10.0)
        assert not upstreams.status()[0].instances
        second = await call(upstreams, "pid")
        assert second != first and upstreams.status()[0].spawn_count == 2

    run(PoolConfig(idle_timeout=0.3), tmp_path, body)


ASKING = r"""
import json, select, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
def result(id_, value):
    send({"jsonrpc": "2.0", "id": id_, "result": {"resultType": "complete", **value}})
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "server/discover":
        result(msg["id"], {
            "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "asks-anyway", "version": "1"},
        })
    elif msg.get("method") == "tools/call":
        # 2026-07-28 has no server requests; this server sends one anyway and waits a second.
        send({"jsonrpc": "2.0", "id": "s1", "method": "roots/list"})
        ready, _, _ = select.select([sys.stdin], [], [], 1.0)
        answer = json.loads(sys.stdin.readline()) if ready else None
        said = json.dumps(answer["result"]["roots"]) if answer and "result" in answer else "no answer"
        result(msg["id"], {"content": [{"type": "text", "text": said}]})
    elif "id" in msg and "method" in msg:
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}})
"""


@pytest.mark.parametrize("lenient", [False, True])
def test_a_modern_upstreams_server_request_is_answered_only_when_spec_lenient_names_2026(
    tmp_path: Path, lenient: bool
) -> None:
    """``answer_modern_requests`` (the daemon sets it from ``spec.lenient``) reaches the upstream client."""
    roots = [{"uri": "file:///work", "name": "work"}]

    async def resolver(method: str, params: object) -> dict[str, object]:
        assert method == "roots/list"
        return {"roots": roots}

    async def main() -> None:
        servers = {"asks": UpstreamServer(name="asks", command=sys.executable, args=("-c", ASKING))}
        upstreams = Upstreams(servers, state_dir=tmp_path, resolver=resolver, answer_modern_requests=lenient)
        async with anyio.create_task_group() as tg:
            upstreams.attach(tg)
            with anyio.fail_after(20):
                answer = await upstreams.request("asks", "tools/call", {"name": "t", "arguments": {}})
            assert text(answer) == (json.dumps(roots) if lenient else "no answer")
            tg.cancel_scope.cancel()

    anyio.run(main)


def test_a_spare_process_serves_the_next_connection_without_a_start(tmp_path: Path) -> None:
    """``pool.spare``: beside the first connection's process a second starts; the next connection gets it.

    The spare's start does not read the server's catalog again: a fresh
    process must not stand in for what a running instance offers now.
    """

    async def main() -> None:
        servers = {
            "fragile": UpstreamServer(
                name="fragile", command=sys.executable, args=("-c", SERVER), scope="connection"
            )
        }
        upstreams = Upstreams(servers, state_dir=tmp_path, pool=PoolConfig(spare=True))
        reread: list[int] = []
        upstreams.on_catalog_stale = lambda server, instance, kind: reread.append(instance)
        events = upstreams.events.watch()
        async with anyio.create_task_group() as tg:
            upstreams.attach(tg)
            first = await call(upstreams, "pid", scope_key="k1")
            (spare,) = [i.instance for i in upstreams.status()[0].instances if i.scope_key is None]
            with anyio.fail_after(20):  # the spare starts beside it, for nobody yet
                async for frame in events:
                    if frame.startswith(b"event: instance.started\n"):
                        started = json.loads(frame.split(b"data: ", 1)[1])
                        if started["instance"] == spare:
                            break
            assert spare not in reread, reread  # started, it read nothing: the catalog is read elsewhere
            second = await call(upstreams, "pid", scope_key="k2")
            assert second != first
            mine = {i.scope_key: i.instance for i in upstreams.status()[0].instances}
            assert mine["k2"] == spare  # the next connection was given the spare, already running
            assert upstreams.status()[0].spawn_count == 3  # k1's, the spare, and the spare's replacement
            tg.cancel_scope.cancel()

    anyio.run(main)


def test_the_call_timeout_pauses_while_the_upstream_waits_for_an_answer(tmp_path: Path) -> None:
    """spec/gateway.md §4: a person taking longer than pool.callTimeout to answer does not cut the call."""
    answered: list[str] = []

    async def slow(method: str, params: object) -> dict[str, object]:
        await anyio.sleep(1.5)  # a person slower than the 1 s call timeout: the time is what is tested
        answered.append(method)
        return {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]}

    async def main() -> None:
        upstreams = Upstreams(fragile(), state_dir=tmp_path, pool=PoolConfig(call_timeout=1.0), resolver=slow)
        async with anyio.create_task_group() as tg:
            upstreams.attach(tg)
            assert await call(upstreams, "roots") == "2"
            assert answered == ["roots/list"]
            with pytest.raises(McpCallError, match="fragile"):  # and the bound still holds without a question
                await call(upstreams, "nap", {"seconds": 60})
            tg.cancel_scope.cancel()

    anyio.run(main)
