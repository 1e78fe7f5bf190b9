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

One case is written at once instead: a chunk that is one message on a
connection with nothing else in flight (a host making one call at a time,
an upstream answering the only call on it).  Nothing could join its write,
and what the daemon still has to do for the message (the pool's release,
the mirror, the timers) then runs while the peer works on it instead of
before: ``reading(alone=True)`` around such a chunk, and
``due(write, stream=True)`` from a writer that takes one joined buffer (the
stdio pipes; an HTTP response, written in parts, waits for the chunk's end
as ever).

The other way round, a write to a peer that is busy with earlier calls of
ours waits for the loop to run what is ready (``due(write, busy=True)``):
a delay that costs that peer nothing, and gathers what the other
connections read in the same pass send it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

__all__ = ["at_chunk_end", "due", "many", "reading"]


class _State(threading.local):
    def __init__(self) -> None:
        self.depth = 0
        self.alone = False  # the outermost chunk is one message, nothing else in flight: see above
        self.ends: list[Callable[[], None]] = []  # at_chunk_end's: run first, still inside the chunk
        self.due: list[Callable[[], None]] = []


_state = _State()


class _Reading:
    """``with reading():`` — a plain context manager: it is entered for every chunk read."""

    __slots__ = ("alone",)

    def __init__(self, alone: bool) -> None:
        self.alone = alone

    def __enter__(self) -> None:
        state = _state
        if state.depth == 0:
            state.alone = self.alone
        state.depth += 1

    def __exit__(self, *exc: object) -> None:
        state = _state
        if state.depth == 1:
            while state.ends:  # what is done once per chunk: its writes join the chunk's own
                ends, state.ends = state.ends, []
                for end in ends:
                    end()
        state.depth -= 1
        if state.depth == 0:
            state.alone = False
            while state.due:
                writes, state.due = state.due, []
                for write in writes:
                    write()


_READING = _Reading(alone=False)
_READING_ALONE = _Reading(alone=True)


def reading(*, alone: bool = False) -> _Reading:
    """Hold writes made due inside until the outermost ``reading`` ends, then make each once.

    ``alone``: the chunk is one message and its connection has nothing else
    in flight; a stream's write made due inside is made at once (see above).
    """
    return _READING_ALONE if alone else _READING


def at_chunk_end(fn: Callable[[], None]) -> bool:
    """Run ``fn`` at the end of the chunk being read, on any loop; ``False`` (and nothing done) outside one.

    For work that only needs doing once per chunk however many inputs ask
    for it (the pool's timer looked at again, a host connection's answers
    drained): the caller does it at once when this says ``False``, and asks
    once until it has run.  ``fn`` runs before the chunk's writes are made,
    so what it makes due joins them.
    """
    state = _state
    if not state.depth:
        return False
    state.ends.append(fn)
    return True


def many() -> bool:
    """Whether a chunk is being read that may hold more than one message (not ``alone``)."""
    state = _state
    return state.depth > 0 and not state.alone


def due(write: Callable[[], None], *, stream: bool = False, busy: bool = False) -> None:
    """Make ``write`` at the end of the chunk being read, or soon on this thread's asyncio loop.

    ``stream``: ``write`` writes everything queued in one buffer (a pipe), so
    inside a chunk read ``alone`` it is made now.  ``busy``: the peer has
    work of ours in hand already, so the write waits for the loop to run
    what is ready (every connection read in this pass adds its part) even
    inside a chunk: sixteen HTTP connections, each read in a callback of its
    own, send their calls upstream in one write, not sixteen.  The caller
    makes it due once until it has run (a flag of its own).
    """
    state = _state
    if stream and state.alone:
        write()
    elif state.depth and not busy:
        state.due.append(write)
    else:
        asyncio.get_running_loop().call_soon(write)
