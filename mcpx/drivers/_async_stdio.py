"""The event-loop driver over one stdio connection: ``serve_connection``.

``mcpx.drivers._async`` has the loop's rules.  The read loop feeds the
bytes it reads to the connection's core (newline framing around one
``ServerSession``), a write task writes what the core sends, in order, and
a timer task wakes the core when it asked to be; at end of input the write
task ends the connection once the core has drained and said ``Close``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from ..core import Close, HandleRequest, Send, StdioServerConnection
from ..server import Server
from . import _batch
from ._async import ByteReader, ByteWriter, RequestWatch, _Runner
from ._common import change_listener

__all__ = ["serve_connection"]


class _StdioRunner(_Runner):
    def __init__(self, server: Server, conn: StdioServerConnection, tg: anyio.abc.TaskGroup, trace: bool):
        super().__init__(server, conn, conn.session, tg, trace)
        self.conn = conn
        # Payloads for the write loop, in the core's order; None: close once they are out.  A
        # list and an event rather than a memory stream: the write loop takes everything queued
        # at once, and waking it costs one event per batch instead of a checkpoint per item.
        self.queued: list[bytes | None] = []
        self.wake: anyio.Event | None = None  # set by perform while the write loop waits
        self.unwritten: list[str | int] = []  # ended requests whose answers are queued, not yet written
        self.nowait: Callable[[bytes], bool] | None = None  # the writer's write_nowait, if it has one
        self.kicking = False  # a _write_now is scheduled

    def clock_in(self) -> None:
        self.conn.session.advance(time.monotonic())

    def request_ended(self, watch: RequestWatch, request_id: str | int) -> None:
        self.unwritten.append(request_id)  # the write loop tells the watch once the answer is out

    def answer_relayed(self, action: HandleRequest, result: Mapping[str, Any]) -> None:
        """``_Runner.answer_relayed``, an ordinary answer's bytes queued as they are (``respond_now``)."""
        payload = self.conn.session.respond_now(action.token, result)
        if payload is None:  # something is queued before it, or it is no ordinary answer
            super().answer_relayed(action, result)
            return
        del self.relayed[action.token]
        self.queued.append(payload)
        self._kick()
        if self.watch is not None:
            self.request_ended(self.watch, action.context.request_id)

    def perform(self, action: object) -> None:
        if isinstance(action, Send):
            self.queued.append(action.payload)
        elif isinstance(action, Close):
            self.queued.append(None)

    def flush(self) -> None:
        super().flush()
        if self.queued:
            self._kick()

    def _kick(self) -> None:
        """Write what is queued now if the writer can take it at once; else wake the write loop.

        Only while the write loop waits (it writes in order; one writer at a
        time) and only bytes, never a Close: written here, an answer costs
        no wake-up of another task.
        """
        if self.wake is None or self.kicking:
            return  # the write loop is writing (it takes the rest when done), or a write is due
        if self.nowait is not None:
            # At the end of the chunk being read (or once the loop has run what is ready): one
            # write for everything queued by then, as the write loop would, without its wake-up.
            self.kicking = True
            _batch.due(self._write_now, stream=True)
            return
        self._wake_writer()

    def _write_now(self) -> None:
        self.kicking = False
        if not self.queued or self.wake is None:
            return
        nowait = self.nowait
        if nowait is not None and None not in self.queued and nowait(b"".join(self.queued)):  # type: ignore[arg-type]
            self.queued = []
            written, self.unwritten = self.unwritten, []
            if self.watch is not None:
                for request_id in written:
                    self.watch.ended(request_id)
            return
        self._wake_writer()

    def _wake_writer(self) -> None:
        wake = self.wake
        if wake is not None:
            self.wake = None
            wake.set()

    async def read_loop(self, reader: ByteReader) -> None:
        push = getattr(reader, "push", None)
        if push is not None:  # chunks come in the pipe's callback; receive waits for the end alone
            push(self.take)
        while True:
            data = await reader.receive()
            self.take(data)
            if not data:
                return

    def take(self, data: bytes) -> None:
        """One chunk of input (``b""``: the end of it)."""
        # What it makes (answers, upstream calls) is written once, at the end; a lone request (the
        # host makes one call at a time) goes upstream at once.
        with _batch.reading(alone=not self.deferred and data.count(b"\n") == 1):
            self.conn.receive_data(data, now=time.monotonic())
            self.flush()

    async def write_loop(self, writer: ByteWriter) -> None:
        self.nowait = getattr(writer, "write_nowait", None)  # only asyncio's writers have one
        while True:
            if not self.queued:
                wake = self.wake = anyio.Event()
                await wake.wait()
                continue
            chunks, self.queued = self.queued, []
            closing = None in chunks
            if closing:
                chunks = chunks[: chunks.index(None)]  # nothing queued after Close is written
            data = b"".join(chunks)  # type: ignore[arg-type]  # no None left
            # Every id here had its answer queued before it was listed, so the answer is in
            # ``data`` or was written before it.
            written, self.unwritten = self.unwritten, []
            try:
                if data:
                    await writer.send(data)
            except OSError:
                # The peer stopped reading: nothing more can reach it.
                self.tg.cancel_scope.cancel()
                return
            if self.watch is not None:
                for request_id in written:
                    self.watch.ended(request_id)
            if closing:
                await writer.aclose()
                self.tg.cancel_scope.cancel()
                return


async def serve_connection(
    server: Server,
    conn: StdioServerConnection,
    reader: ByteReader,
    writer: ByteWriter,
    *,
    trace: bool = False,
    watch: RequestWatch | None = None,
) -> None:
    """Serve one stdio connection until the peer closes it and the core says Close.

    ``watch`` is told of every request the application runs, when it starts
    and once it has been answered (the daemon mirrors them for its shim).
    """
    runner: _StdioRunner | None = None
    try:
        async with anyio.create_task_group() as tg:
            runner = _StdioRunner(server, conn, tg, trace)
            runner.watch = watch
            unsubscribe = server.add_listener(change_listener(runner.post, conn.session))
            try:
                tg.start_soon(runner.write_loop, writer)
                tg.start_soon(runner.timer_loop)
                await runner.read_loop(reader)
                # End of input: the write loop ends the task group once the core
                # has drained and said Close.
            finally:
                unsubscribe()
    finally:
        if runner is not None:  # the connection is over: nothing still deferred can be answered
            runner.abandon_deferred()
