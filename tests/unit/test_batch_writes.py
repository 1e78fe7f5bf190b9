"""When the drivers' held writes are made (``mcpx/drivers/_batch.py``): once per chunk, or at once for a lone message."""

from __future__ import annotations

import asyncio

from mcpx.drivers import _batch


def test_writes_made_due_while_a_chunk_is_read_are_made_once_at_its_end_in_order() -> None:
    made: list[str] = []
    with _batch.reading():
        _batch.due(lambda: made.append("host"))
        _batch.due(lambda: made.append("upstream"), stream=True)  # a pipe writer: still held
        with _batch.reading():  # a nested read (the router writing from inside a chunk) changes nothing
            _batch.due(lambda: made.append("nested"))
        assert made == []
    assert made == ["host", "upstream", "nested"]


def test_in_a_lone_chunk_a_pipe_write_is_made_at_once_and_the_rest_still_waits() -> None:
    made: list[str] = []
    with _batch.reading(alone=True):
        _batch.due(lambda: made.append("pipe"), stream=True)
        assert made == ["pipe"]  # nothing could join it: written before the rest of the work
        _batch.due(lambda: made.append("http response"))  # written in parts: waits for the end
        with _batch.reading():  # nested inside a lone chunk: still that chunk
            _batch.due(lambda: made.append("pipe again"), stream=True)
        assert made == ["pipe", "pipe again"]
    assert made == ["pipe", "pipe again", "http response"]
    with _batch.reading():  # the next chunk is not alone unless it says so
        _batch.due(lambda: made.append("held"), stream=True)
        assert made[-1] == "http response"
    assert made[-1] == "held"


def test_outside_a_chunk_a_write_is_made_once_the_loop_has_run_what_is_ready() -> None:
    async def main() -> list[str]:
        made: list[str] = []
        written = asyncio.Event()

        def write() -> None:
            made.append("soon")
            written.set()

        _batch.due(write, stream=True)
        assert made == []  # not during the call: once the loop runs what is ready
        await asyncio.wait_for(written.wait(), timeout=5)
        return made

    assert asyncio.run(main()) == ["soon"]


def test_work_for_the_end_of_a_chunk_is_refused_outside_one() -> None:
    done: list[int] = []
    assert _batch.at_chunk_end(lambda: done.append(1)) is False
    assert done == []  # the caller does it itself
    with _batch.reading(alone=True):
        assert _batch.at_chunk_end(lambda: done.append(2)) is True
        assert done == []  # even in a lone chunk: at its end
    assert done == [2]


def test_work_for_the_end_of_a_chunk_runs_before_its_writes_and_what_it_writes_joins_them() -> None:
    """A host connection's answers, settled one by one from a chunk of upstream answers, drained once."""
    order: list[str] = []

    def drain() -> None:
        order.append("drained")
        _batch.due(lambda: order.append("answers written"))

    assert not _batch.many()
    with _batch.reading():
        assert _batch.many()
        _batch.due(lambda: order.append("upstream written"))
        assert _batch.at_chunk_end(drain) is True
        assert order == []
    assert order == ["drained", "upstream written", "answers written"]
    with _batch.reading(alone=True):
        assert not _batch.many()  # one message: answered at once, not at the end


def test_a_write_to_a_busy_peer_waits_for_the_loops_pass_and_gathers_what_other_reads_add() -> None:
    """Sixteen HTTP connections, each read in a callback of its own, send their calls upstream in one write."""

    async def main() -> list[str]:
        queued: list[str] = []
        writes: list[str] = []
        written = asyncio.Event()
        scheduled = False

        def write() -> None:
            nonlocal scheduled
            scheduled = False
            writes.append("+".join(queued))
            queued.clear()
            written.set()

        def read(request: str) -> None:  # one connection's chunk: its call goes upstream
            nonlocal scheduled
            with _batch.reading():
                queued.append(request)
                if not scheduled:
                    scheduled = True
                    _batch.due(write, stream=True, busy=True)
            assert writes == [], "held past the chunk's end: the peer has work in hand"

        loop = asyncio.get_running_loop()
        for request in ("a", "b", "c"):
            loop.call_soon(read, request)  # three sockets ready in one pass
        await asyncio.wait_for(written.wait(), timeout=5)
        return writes

    assert asyncio.run(main()) == ["a+b+c"]


def test_a_write_to_an_idle_peer_is_made_at_the_chunks_end_as_ever() -> None:
    made: list[str] = []
    with _batch.reading():
        _batch.due(lambda: made.append("idle peer"), stream=True, busy=False)
        assert made == []
    assert made == ["idle peer"]
