"""Writes held while a chunk of input is processed: one write per connection per chunk, with no wake-up.

A driver that reads a chunk (a host's requests, an upstream's answers)
produces writes on several connections while it processes it: answers to
the host, calls to upstreams.  Written one by one they cost a system call
each, and the peer a wake-up each; handed to a writer task they cost a task
switch each.  Instead a writer with something to write says so (``due``):
while a chunk is being processed (``reading``) its write waits for the end
of the chunk, and is made then, once, with everything queued by then;
outside one (a timer, a question answered in a task of its own) it is made
once the event loop has run what is ready (``call_soon``).  Per thread: one
event loop runs on each.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

__all__ = ["at_chunk_end", "due", "reading"]


class _State(threading.local):
    def __init__(self) -> None:
        self.depth = 0
        self.due: list[Callable[[], None]] = []


_state = _State()


class _Reading:
    """``with reading():`` — a plain context manager: it is entered for every chunk read."""

    __slots__ = ()

    def __enter__(self) -> None:
        _state.depth += 1

    def __exit__(self, *exc: object) -> None:
        state = _state
        state.depth -= 1
        if state.depth == 0:
            while state.due:
                writes, state.due = state.due, []
                for write in writes:
                    write()


_READING = _Reading()


def reading() -> _Reading:
    """Hold writes made due inside until the outermost ``reading`` ends, then make each once."""
    return _READING


def at_chunk_end(fn: Callable[[], None]) -> bool:
    """Run ``fn`` at the end of the chunk being read, on any loop; ``False`` (and nothing done) outside one.

    For work that only needs doing once per chunk however many inputs ask
    for it (the pool's timer looked at again): the caller does it at once
    when this says ``False``, and asks once until it has run.
    """
    state = _state
    if not state.depth:
        return False
    state.due.append(fn)
    return True


def due(write: Callable[[], None]) -> None:
    """Make ``write`` at the end of the chunk being read, or soon on this thread's asyncio loop.

    The caller makes it due once until it has run (a flag of its own).
    """
    state = _state
    if state.depth:
        state.due.append(write)
    else:
        asyncio.get_running_loop().call_soon(write)
