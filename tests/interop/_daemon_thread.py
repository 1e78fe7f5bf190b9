"""``run_daemon`` in a thread of the test process, for tests that drive its /mcp and /v1 over loopback."""

from __future__ import annotations

import threading

from mcpx.config import Config
from mcpx.gateway import run_daemon


class DaemonThread:
    """A daemon on ``config``, started at once; ``urls`` are where it listens, ``close`` stops it."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.stop = threading.Event()
        self.urls: list[str] = []
        bound = threading.Event()

        def ready(urls: list[str]) -> None:
            self.urls.extend(urls)
            bound.set()

        self.thread = threading.Thread(
            target=run_daemon, args=(config,), kwargs={"ready": ready, "stop": self.stop}, daemon=True
        )
        self.thread.start()
        assert bound.wait(30), "the daemon did not start"
        self.mcp = next(u for u in self.urls if u.startswith("http"))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(20)
