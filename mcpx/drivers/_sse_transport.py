"""Sockets for the 2024-11-05 HTTP+SSE client transport (``mcpx.core.sse_client``), on anyio.

MCP 2024-11-05, Transports → "HTTP with SSE".  ``SseClientConnection``
decides everything (which connection, which bytes, what the server's events
mean); ``SseTransport`` carries it out for ``mcpx.client.connect_sse``: it
opens the TCP (or TLS) connections the machine asks for, writes its bytes,
feeds what it reads back with the time, re-arms its timer, and hands the
JSON values to the ``ClientSession``: read → feed → drain → act → re-arm, the
order every driver keeps.

One lock orders everything that touches the machine and the session: the
caller's ``Client`` uses the same lock, so a ``Send`` it performs and a
message read from the stream never interleave.  Call ``open`` once, run
``run_timer`` in the task group, and ``aclose`` at the end (it closes every
socket, also those still connecting).
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import anyio.abc

from ..core.actions import Send
from ..core.client_session import ClientSession
from ..core.http_client import Closed, JsonReceived, RequestRefused, StreamEnded
from ..core.sse_client import EndpointReady, SseClientConnection, SseState
from ._http_transport import SocketTransport

__all__ = ["SseTransport"]


class SseTransport(SocketTransport):
    """The sockets of one ``SseClientConnection``; see the module docstring."""

    def __init__(self, sse: SseClientConnection, session: ClientSession, tg: anyio.abc.TaskGroup) -> None:
        super().__init__(sse, tg, clock=time.monotonic)
        self.sse = sse
        self.session = session
        self.endpoint = anyio.Event()  # the stream named its endpoint
        self.ended = anyio.Event()  # the stream is over (StreamEnded or Closed)
        self.refusals: list[RequestRefused] = []  # refused POSTs of notifications, newest last (bounded)

    async def open(self) -> None:
        """GET the event stream."""
        async with self.lock:
            self.sse.open(time.monotonic())
            await self.flush()

    async def send(self, action: Send) -> None:
        """One ``Send`` of the session (called with the lock held, from the Client's flush)."""
        if self.sse.state is SseState.CLOSED:
            return  # closing: the session's receive_eof answers what is still open
        self.sse.send(action.payload, handle=action.stream, now=time.monotonic())
        await self.pump()

    async def aclose(self) -> None:
        """Close the transport and every socket; the session gets ``receive_eof``."""
        async with self.lock:
            if self.sse.state is not SseState.CLOSED:
                self.sse.close(time.monotonic())
            await self.flush()
        await self.close_all()

    def act(self, action: Any) -> None:
        if isinstance(action, JsonReceived):
            self.session.receive_json(action.message)
        elif isinstance(action, EndpointReady):
            self.endpoint.set()
        elif isinstance(action, RequestRefused):
            self.refusals = [*self.refusals[-15:], action]
        elif isinstance(action, StreamEnded | Closed):
            self.session.receive_eof()
            self.ended.set()
