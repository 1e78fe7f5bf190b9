"""The daemon's event bus (``mcpx/gateway/_events.py``): fan-out that never waits for a watcher."""

from __future__ import annotations

import anyio

from mcpx.gateway._events import EventBus


def test_a_watcher_gets_events_keep_alives_and_is_let_go_of_when_closed() -> None:
    async def main() -> None:
        bus = EventBus(keepalive=0.05)
        watcher = bus.watch()
        assert await watcher.__anext__() == b": mcpx events\n\n"
        bus.publish("list.changed", {"server": "a", "kind": "tools"})
        assert await watcher.__anext__() == b'event: list.changed\ndata: {"server":"a","kind":"tools"}\n\n'
        assert await watcher.__anext__() == b": keep-alive\n\n"  # silence is kept alive
        await watcher.aclose()
        assert bus.watchers == 0

    anyio.run(main)


def test_a_watcher_that_falls_behind_loses_the_oldest_and_is_told_how_many() -> None:
    async def main() -> None:
        bus = EventBus()
        slow = bus.watch()
        for n in range(300):
            bus.publish("progress", {"server": "a", "progress": n})
        assert await slow.__anext__() == b'event: events.dropped\ndata: {"dropped":45}\n\n'
        first = await slow.__anext__()
        assert first == b'event: progress\ndata: {"server":"a","progress":44}\n\n'  # the newest 256 remain

    anyio.run(main)
