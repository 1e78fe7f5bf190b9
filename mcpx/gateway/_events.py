"""The daemon's event stream: what its upstreams say outside any one call, for ``GET /v1/events``.

spec/gateway.md §5, §8: log messages and progress reach the host whose call
caused them, and every one of them also goes to ``/v1/events``, where anyone
watching the daemon (a person with ``curl``, a dashboard, a plugin) can read
them.  List changes and resource updates are published there too, and so are
the upstreams' processes starting and stopping.  Each event is one Server-Sent
Event whose ``event:`` is its kind and whose ``data:`` is a JSON
object naming the server:

``server.log``        ``{server, level, logger?, data}``
``progress``          ``{server, progress, total?, message?}``
``list.changed``      ``{server, kind}`` (tools, prompts or resources)
``resource.updated``  ``{server, uri}``
``instance.started``  ``{server, instance}``: a process of the server is up and serves
``instance.stopped``  ``{server, instance, reason}``: it has gone (stopped, crashed or failed to
                      start), and the pool (``GET /v1/servers``) holds it no more

Watchers are never waited for: each has a bounded queue, and one that falls
behind loses its oldest events and is told how many (``events.dropped``).  A
comment line every ``keepalive`` seconds keeps idle connections open and
lets the daemon notice a watcher that went away.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import anyio
import orjson

__all__ = ["EventBus"]

_QUEUE = 256  # events one watcher may lag behind before the oldest are dropped


class EventBus:
    """Fan-out of the daemon's events to every ``/v1/events`` watcher."""

    def __init__(self, *, keepalive: float = 15.0) -> None:
        self.keepalive = keepalive
        self._watchers: set[_Watcher] = set()

    @property
    def watchers(self) -> int:
        return len(self._watchers)

    def publish(self, kind: str, data: dict[str, Any]) -> None:
        """Queue ``kind`` with ``data`` for every watcher; never blocks."""
        if not self._watchers:
            return
        frame = f"event: {kind}\ndata: ".encode() + orjson.dumps(data) + b"\n\n"
        for watcher in self._watchers:
            watcher.put(frame)

    def watch(self) -> _Watcher:
        """A new watcher: iterate it for SSE bytes; ``aclose`` (or the end of iteration) lets go of it."""
        watcher = _Watcher(self)
        self._watchers.add(watcher)
        return watcher

    def _forget(self, watcher: _Watcher) -> None:
        self._watchers.discard(watcher)


class _Watcher:
    def __init__(self, bus: EventBus) -> None:
        self._bus = bus
        self._frames: deque[bytes] = deque([b": mcpx events\n\n"])
        self._dropped = 0
        self._wake = anyio.Event()
        self._closed = False

    def put(self, frame: bytes) -> None:
        if len(self._frames) >= _QUEUE:
            self._frames.popleft()
            self._dropped += 1
        self._frames.append(frame)
        self._wake.set()

    def __aiter__(self) -> _Watcher:
        return self

    async def __anext__(self) -> bytes:
        if self._closed:
            raise StopAsyncIteration
        if self._dropped:
            dropped, self._dropped = self._dropped, 0
            return b"event: events.dropped\ndata: " + orjson.dumps({"dropped": dropped}) + b"\n\n"
        if not self._frames:
            with anyio.move_on_after(self._bus.keepalive):
                await self._wake.wait()
            self._wake = anyio.Event()
            if not self._frames:
                return b": keep-alive\n\n"
        return self._frames.popleft()

    async def aclose(self) -> None:
        self._closed = True
        self._bus._forget(self)
