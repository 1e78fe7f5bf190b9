"""mcpx as a client (``mcpx.client``) against real servers over stdio.

Against ``mcpx demo`` in all five revisions on every server driver, and
against the official Python SDK's server, with the client itself on asyncio
and on trio.  The same resolver answers a legacy server's elicitation request
and a 2026-07-28 ``input_required`` round.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from mcpx.client import McpCallError, connect_stdio
from mcpx.core import Revision

ROOT = Path(__file__).resolve().parents[2]
LEGACY = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN = "2026-07-28"
SERVER_LOOPS = ("asyncio", "uvloop", "trio", "blocking")

pytestmark = pytest.mark.timeout(60)


async def answer(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
    assert method == "elicitation/create", method
    return {"action": "accept", "content": {"name": "Ada"}}


def run(backend: str, main: Any) -> None:
    anyio.run(main, backend=backend)


# The client on asyncio against every server driver, and on trio against two.
PAIRS = [*(("asyncio", loop) for loop in SERVER_LOOPS), ("trio", "asyncio"), ("trio", "trio")]


@pytest.mark.parametrize(("backend", "server_loop"), PAIRS)
@pytest.mark.parametrize("revision", [*LEGACY, MODERN])
def test_mcpx_client_talks_to_mcpx_demo(backend: str, server_loop: str, revision: str) -> None:
    modern = revision == MODERN
    argv = [sys.executable, "-m", "mcpx", "demo", "--loop", server_loop]

    async def main() -> None:
        offer = None if modern else Revision(revision)
        async with connect_stdio(
            argv, cwd=str(ROOT), modern=modern, offer=offer, capabilities={"elicitation": {}}, resolver=answer
        ) as client:
            assert client.revision == Revision(revision)
            tools = {t["name"] for t in await client.list_tools()}
            assert {"echo", "ask_name"} <= tools
            echoed = await client.call_tool("echo", {"text": "hi"})
            assert echoed["content"][0]["text"] == "hi"
            if modern or revision >= "2025-06-18":
                asked = await client.call_tool("ask_name")
                assert asked["content"][0]["text"] == "Hello, Ada!"
            else:  # no elicitation in this revision: the tool is refused the question
                with pytest.raises(McpCallError, match="elicitation"):
                    await client.call_tool("ask_name")
            with pytest.raises(McpCallError) as unknown:
                await client.call_tool("no_such_tool")
            assert unknown.value.code == -32602

    run(backend, main)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_cancelling_a_call_cancels_it_upstream(backend: str) -> None:
    argv = [sys.executable, "-m", "mcpx", "demo", "--loop", "asyncio"]

    async def main() -> None:
        async with connect_stdio(argv, cwd=str(ROOT)) as client:
            with anyio.move_on_after(0.5):
                await client.call_tool("sleep", {"seconds": 30})
            # The server was told: the next call is answered at once, not after 30 s.
            with anyio.fail_after(10):
                echoed = await client.call_tool("echo", {"text": "still here"})
            assert echoed["content"][0]["text"] == "still here"

    run(backend, main)


@pytest.mark.parametrize("modern", [False, True])
def test_mcpx_client_talks_to_the_official_sdk_server(modern: bool) -> None:
    argv = [sys.executable, str(ROOT / "benchmarks" / "sdk_echo_server.py")]

    async def main() -> None:
        async with connect_stdio(argv, cwd=str(ROOT), modern=modern) as client:
            assert [t["name"] for t in await client.list_tools()] == ["echo"]
            echoed = await client.call_tool("echo", {"text": "from mcpx"})
            assert echoed["content"][0]["text"] == "from mcpx"

    run("asyncio", main)


def test_a_server_that_dies_fails_the_call_instead_of_hanging() -> None:
    script = "import sys\nsys.stdin.readline()\nsys.exit(3)\n"

    async def main() -> None:
        with pytest.raises(McpCallError, match=r"initialize failed|closed"):
            with anyio.fail_after(20):
                async with connect_stdio([sys.executable, "-c", script]):
                    pass

    run("asyncio", main)


@pytest.mark.parametrize("spec", ["2025-06-18", MODERN])
def test_mcpx_call_prints_the_result_and_exits_by_it(spec: str) -> None:
    demo = [sys.executable, "-m", "mcpx", "demo"]
    mcpx = [sys.executable, "-m", "mcpx", "call"]
    ok = subprocess.run(
        [*mcpx, "add", "--arg", "a=2", "--arg", "b=3.5", "--mcp-spec", spec, "--", *demo],
        check=False,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    assert ok.returncode == 0, ok.stderr
    assert orjson.loads(ok.stdout)["result"]["content"][0]["text"] == "5.5"
    failing = subprocess.run(
        [*mcpx, "fail", "--mcp-spec", spec, "--", *demo],
        check=False,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    assert failing.returncode == 1 and orjson.loads(failing.stdout)["result"]["isError"] is True
    # The direct form types --arg by the tool's schema too: echo's text is a string, "42" stays one.
    typed = subprocess.run(
        [*mcpx, "echo", "--arg", "text=42", "--mcp-spec", spec, "--", *demo],
        check=False,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    assert typed.returncode == 0, typed.stderr
    assert orjson.loads(typed.stdout)["result"]["content"] == [{"type": "text", "text": "42"}]
    unknown = subprocess.run(
        [*mcpx, "nope", "--", *demo], check=False, capture_output=True, timeout=60, cwd=ROOT
    )
    assert unknown.returncode == 1 and orjson.loads(unknown.stdout)["error"]["code"] == -32602
    missing = subprocess.run(
        [*mcpx, "echo", "--", "/nonexistent/server"], check=False, capture_output=True, timeout=60
    )
    assert missing.returncode == 2 and b"could not start" in missing.stderr
