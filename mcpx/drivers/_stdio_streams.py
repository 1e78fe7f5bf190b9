"""Byte streams over the process's stdin and stdout, per event loop.

Pipes, sockets and terminals are read and written without threads (asyncio's
pipe transports, trio's ``FdStream``); what the event loop cannot poll — a
regular file (``mcpx demo < in.jsonl > out.jsonl``), ``/dev/null`` — is read
and written from a worker thread instead.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING

import anyio.to_thread

from ._async import ByteReader, ByteWriter

if TYPE_CHECKING:
    import trio

__all__ = ["open_stdio", "transport_write_nowait"]

CHUNK = 64 * 1024


def _pollable(fd: int, events: int = selectors.EVENT_READ) -> bool:
    """Whether the event loop can poll ``fd`` (epoll refuses regular files and /dev/null)."""
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return False
    probe = selectors.DefaultSelector()
    try:
        probe.register(fd, events)
    except (OSError, ValueError):
        return False
    finally:
        probe.close()
    return True


class _ThreadReader:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def receive(self) -> bytes:
        return await anyio.to_thread.run_sync(os.read, self.fd, CHUNK)


class _ThreadWriter:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    async def send(self, data: bytes) -> None:
        await anyio.to_thread.run_sync(self._write_all, data)

    async def aclose(self) -> None:
        return None


class _AsyncioReader:
    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    async def receive(self) -> bytes:
        return await self.reader.read(CHUNK)

    def push(self, consumer: Callable[[bytes], None]) -> None:
        """From now on hand each chunk to ``consumer`` as it arrives, in the pipe's own callback.

        What arrived before is still read with ``receive``, which then waits
        for the end of input alone: no task wakes up per chunk.
        """
        self.reader.feed_data = consumer  # type: ignore[method-assign,assignment]  # the protocol feeds it


class _AsyncioWriter:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def send(self, data: bytes) -> None:
        if self.writer.transport.is_closing():
            raise BrokenPipeError("stdout is closed")
        self.writer.write(data)
        await self.writer.drain()

    def write_nowait(self, data: bytes) -> bool:
        return transport_write_nowait(self.writer.transport, data)

    async def aclose(self) -> None:
        with suppress(ConnectionError):
            await self.writer.drain()


def transport_write_nowait(transport: asyncio.WriteTransport, data: bytes) -> bool:
    """Write ``data`` on ``transport`` now if nothing is buffered there (no flow control owed); else ``False``.

    asyncio's transports write at once what the pipe takes and keep the
    rest; with nothing buffered, no ``drain`` is owed.  The stdio loop and a
    linked client write from the task that produced the bytes this way.
    """
    if transport.is_closing() or transport.get_write_buffer_size():
        return False
    transport.write(data)
    return True


async def _asyncio_streams(
    in_fd: int, out_fd: int
) -> tuple[ByteReader, ByteWriter, list[asyncio.BaseTransport]]:
    """The streams, and the pipe transports to close when done (each holds a duplicate of its fd)."""
    loop = asyncio.get_running_loop()
    reader: ByteReader
    writer: ByteWriter
    transports: list[asyncio.BaseTransport] = []
    if _pollable(in_fd):
        stream_reader = asyncio.StreamReader(limit=CHUNK)
        protocol = asyncio.StreamReaderProtocol(stream_reader)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: protocol, os.fdopen(os.dup(in_fd), "rb", buffering=0)
        )
        transports.append(read_transport)
        reader = _AsyncioReader(stream_reader)
    else:
        reader = _ThreadReader(in_fd)
    if _pollable(out_fd, selectors.EVENT_WRITE):
        transport, write_protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(os.dup(out_fd), "wb", buffering=0)
        )
        transports.append(transport)
        writer = _AsyncioWriter(asyncio.StreamWriter(transport, write_protocol, None, loop))
    else:
        writer = _ThreadWriter(out_fd)
    return reader, writer, transports


class _TrioReader:
    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self.stream = stream

    async def receive(self) -> bytes:
        return await self.stream.receive_some(CHUNK)


class _TrioWriter:
    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self.stream = stream

    async def send(self, data: bytes) -> None:
        import trio

        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise BrokenPipeError(str(exc)) from exc

    async def aclose(self) -> None:
        return None


@asynccontextmanager
async def open_stdio(
    backend: str, in_fd: int = 0, out_fd: int = 1
) -> AsyncIterator[tuple[ByteReader, ByteWriter]]:
    """The reader and writer for this process's stdin/stdout under ``backend``."""
    if backend == "asyncio":
        reader, writer, transports = await _asyncio_streams(in_fd, out_fd)
        try:
            yield reader, writer
        finally:
            for transport in transports:  # a served host's pipes must close here, or it never sees EOF
                transport.close()
        return
    import trio

    streams: list[trio.lowlevel.FdStream] = []
    trio_reader: ByteReader
    trio_writer: ByteWriter
    if _pollable(in_fd):
        streams.append(trio.lowlevel.FdStream(os.dup(in_fd)))
        trio_reader = _TrioReader(streams[-1])
    else:
        trio_reader = _ThreadReader(in_fd)
    if _pollable(out_fd, selectors.EVENT_WRITE):
        streams.append(trio.lowlevel.FdStream(os.dup(out_fd)))
        trio_writer = _TrioWriter(streams[-1])
    else:
        trio_writer = _ThreadWriter(out_fd)
    try:
        yield trio_reader, trio_writer
    finally:
        for stream in streams:
            await stream.aclose()
