"""Plumbing for driving ``mcpx demo`` with the official MCP Python SDK (``mcp``).

Three pieces, none of which changes what the SDK does on the wire:

* :func:`pin_handshake_version` makes the SDK's legacy mode offer an older
  revision in ``initialize``.
* :func:`recording_stdio` is the SDK's own ``stdio_client`` with a tap on both
  message streams, so a test can assert what really crossed the pipe (the SDK
  parses results leniently and fills in defaults, which would hide a field the
  server should not have sent).
* :class:`ProcessSpy` keeps a handle on the server process the SDK spawns, so a
  test can check how it ended.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import mcp.client.session
import mcp.client.stdio
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, is_version_at_least

ROOT = Path(__file__).resolve().parents[2]

LEGACY = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN = "2026-07-28"
LOOPS = ("asyncio", "uvloop", "trio", "blocking")


def at_least(revision: str, minimum: str) -> bool:
    return is_version_at_least(revision, minimum)


def demo_server(loop: str) -> StdioServerParameters:
    """``python -m mcpx demo --loop LOOP`` with this interpreter, so the venv's mcpx is the one run."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "mcpx", "demo", "--loop", loop], cwd=ROOT
    )


def pin_handshake_version(monkeypatch: pytest.MonkeyPatch, revision: str) -> None:
    """Make the SDK's legacy mode offer ``revision`` instead of its newest handshake revision.

    ``ClientSession.initialize`` builds its request from the module-level
    ``LATEST_HANDSHAKE_VERSION`` it imported from ``mcp_types.version``
    (2025-11-25 in mcp 2.3.0) and has no parameter for it, so the only way to
    have the SDK speak an older revision is to patch that name in
    ``mcp.client.session`` for the duration of the test.  Everything else the
    SDK does (validating the answer against ``HANDSHAKE_PROTOCOL_VERSIONS``,
    adopting the server's choice, picking result schemas by the negotiated
    revision) is left alone.  The tests check on the wire that the pin took.
    """
    assert revision in HANDSHAKE_PROTOCOL_VERSIONS, revision
    assert hasattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION"), "the SDK moved its handshake constant"
    monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", revision)


@dataclass
class WireLog:
    """Every JSON-RPC message exchanged, as the JSON objects that crossed stdio."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)

    def sent_requests(self) -> list[dict[str, Any]]:
        return [m for m in self.sent if "method" in m and "id" in m]

    def sent_notifications(self) -> list[dict[str, Any]]:
        return [m for m in self.sent if "method" in m and "id" not in m]

    def results(self) -> list[dict[str, Any]]:
        return [m["result"] for m in self.received if "result" in m]

    def received_notifications(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.received if m.get("method") == method and "id" not in m]


def _dump(item: SessionMessage | Exception) -> dict[str, Any] | None:
    if isinstance(item, SessionMessage):
        # The same dump stdio_client's writer puts on the pipe (exclude_unset).
        return item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return None


class _TapSend:
    def __init__(self, inner: Any, log: list[dict[str, Any]]) -> None:
        self._inner = inner
        self._log = log

    async def send(self, item: SessionMessage, /) -> None:
        if (dumped := _dump(item)) is not None:
            self._log.append(dumped)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TapSend:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)


class _TapReceive:
    def __init__(self, inner: Any, log: list[dict[str, Any]]) -> None:
        self._inner = inner
        self._log = log

    def _record(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        if (dumped := _dump(item)) is not None:
            self._log.append(dumped)
        return item

    async def receive(self) -> SessionMessage | Exception:
        return self._record(await self._inner.receive())

    def __aiter__(self) -> _TapReceive:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        return self._record(await self._inner.__anext__())

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TapReceive:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)


@asynccontextmanager
async def recording_stdio(
    params: StdioServerParameters, wire: WireLog, errlog: TextIO
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's ``stdio_client`` (a ``Transport`` for ``mcp.client.Client``), recording into ``wire``."""
    async with stdio_client(params, errlog=errlog) as (read_stream, write_stream):
        yield _TapReceive(read_stream, wire.received), _TapSend(write_stream, wire.sent)


class ProcessSpy:
    """Remembers the processes ``mcp.client.stdio`` spawns (it does not expose them)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.processes: list[Any] = []
        spawn = mcp.client.stdio._create_platform_compatible_process

        async def spying_spawn(*args: Any, **kwargs: Any) -> Any:
            process = await spawn(*args, **kwargs)
            self.processes.append(process)
            return process

        monkeypatch.setattr(mcp.client.stdio, "_create_platform_compatible_process", spying_spawn)
