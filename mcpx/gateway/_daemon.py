"""``mcpx daemon``: one HTTP server for /mcp (the gateway's MCP endpoint) and /v1 (its ops API).

spec/gateway.md §8: one listener, one access-control decision.  The HTTP binding
(mcpx/core/http_server.py) serves /mcp and hands /v1, /health and /openapi.json to
``Ops`` (mcpx/gateway/_ops.py) as ``AppRequest``s, under the same Origin and
Host checks.

The daemon writes ``<state>/daemon.json`` (0600) once it listens — its URL,
unix socket and pid, and what it was started with (``_state.started_with``)
— so the CLI finds it and a shim can tell whether it serves the shim's
configuration; it removes the file when it stops.  While it is quiet it
gives the C heap's freed pages back (``heap_trimmer``, ``QuietWatch``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio.abc
import orjson

from .. import __version__
from ..config import Config, ensure_state_dir, format_duration, write_state_file
from ..core import AppRequest, HttpConfig, Revision
from ..core.pool import PoolConfig
from ..drivers import new_round_table, serve_http
from ..drivers._async_http import AppResponse
from ._hosts import HostListener
from ._ops import APP_PATHS, Ops
from ._server import GatewayServer
from ._state import DAEMON_FILE, SERVE_SOCKET, started_with
from ._upstreams import Upstreams

__all__ = ["DAEMON_FILE", "Ops", "run_daemon"]


def heap_trimmer() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, which gives the C heap's free pages back to the system; ``None`` elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        trim: Callable[[int], object] = ctypes.CDLL(None).malloc_trim
    except (ImportError, OSError, AttributeError):  # no ctypes, or a C library that is not glibc (musl)
        return None
    return functools.partial(trim, 0)


QUIET_CHECK = 2.0  # seconds between two looks at the daemon's CPU time


QUIET_SHARE = 0.02  # a daemon that used less of a CPU than this since the last look is quiet


WORKED = 0.1  # CPU seconds since the last trim that make another worth its while


class QuietWatch:
    """When to trim the heap again: at the first look that finds the daemon quiet after it worked.

    Fed the daemon's CPU time at each look, ``interval`` seconds apart: the
    daemon is quiet when it used less than ``QUIET_SHARE`` of a CPU since the
    previous look, and has worked when it used more than ``WORKED`` CPU
    seconds since the last trim.
    """

    def __init__(self, cpu: float, interval: float) -> None:
        self._quiet = interval * QUIET_SHARE
        self._last = self._trimmed = cpu

    def look(self, cpu: float) -> bool:
        """Whether to trim now; if so, the trim counts from ``cpu``."""
        due = cpu - self._last < self._quiet and cpu - self._trimmed > WORKED
        self._last = cpu
        if due:
            self._trimmed = cpu
        return due


async def give_back_freed_memory(trim: Callable[[], object], *, interval: float = QUIET_CHECK) -> None:
    """Trim the C heap once start-up is done, and again each time the daemon falls quiet after working.

    Importing and compiling (every dataclass compiles its methods) leaves the
    heap with megabytes freed but held in pages that keep a few live objects,
    and so does a burst of calls (sixteen HTTP connections' buffers, say);
    glibc gives back only the heap's top on its own.  A process that lives
    for hours would hold that for nothing.  It costs nothing on the calls'
    way: the daemon's own CPU time says when it worked and when it is quiet.
    """
    trim()
    watch = QuietWatch(time.process_time(), interval)
    while True:
        await anyio.sleep(interval)
        if watch.look(time.process_time()):
            trim()


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)  # the daemon's log


def _calls(count: int) -> str:
    return f"{count} call" + ("" if count == 1 else "s")


def run_daemon(
    config: Config,
    *,
    loop: str = "asyncio",
    ready: Callable[[list[str]], None] | None = None,
    stop: Any = None,
) -> None:
    """Serve the gateway until interrupted, on ``transport.address:transport.port`` and ``<state>/mcpx.sock``."""
    settings = config.settings
    state = ensure_state_dir(settings.value("state.dir"))
    servers = dict(config.servers)
    passthrough = settings.names("mcp.passthrough")
    backoff = settings.duration("pool.backoff")
    pool = PoolConfig(
        idle_timeout=settings.duration("pool.idleTimeout"),
        call_timeout=settings.duration("pool.callTimeout"),
        start_timeout=settings.duration("pool.startTimeout"),
        max_spawns_per_minute=settings.integer("pool.maxSpawnsPerMinute"),
        backoff_base=backoff,
        backoff_cap=max(PoolConfig().backoff_cap, backoff),
        spare=settings.value("pool.spare") is True,
    )
    address = str(settings.value("transport.address"))
    port = settings.integer("transport.port")
    unix_path = str(state / "mcpx.sock")
    ask_timeout = settings.duration("proto.askTimeout")
    ask_rounds = settings.integer("proto.askRounds")
    round_table = functools.partial(
        new_round_table,
        state_ttl=settings.duration("proto.stateTTL"),
        ask_timeout=ask_timeout,
        max_rounds=ask_rounds,
    )
    upstreams = Upstreams(
        servers,
        state_dir=state,
        pool=pool,
        answer_modern_requests=Revision.V2026_07_28 in settings.value("spec.lenient"),
        max_rounds=ask_rounds,
        max_line=settings.integer("transport.maxLine"),
    )
    gateway = GatewayServer(
        upstreams,
        cursor_key=secrets.token_bytes(32),
        passthrough=passthrough,
        version=__version__,
        sse_poll_after=settings.value("transport.ssePollAfter"),
        list_wait=settings.duration("mcp.listWait"),
    )

    session_config = gateway.session_config(
        policy=settings.policy(), drain=settings.duration("transport.stdioDrain"), question_ttl=ask_timeout
    )
    serve_path = str(state / SERVE_SOCKET)
    hosts = HostListener(
        gateway,
        session_config,
        serve_path,
        on_end=upstreams.scope_ended,
        max_line=settings.integer("transport.maxLine"),
        rounds=round_table,
        choose=gateway.for_passthrough,  # each mcpx serve's own pass-through list (spec/gateway.md §9)
    )
    hosts.bind()

    def setup(tg: anyio.abc.TaskGroup) -> Callable[[AppRequest], Awaitable[AppResponse]]:
        upstreams.attach(tg)
        trim = heap_trimmer()
        if trim is not None:
            tg.start_soon(give_back_freed_memory, trim)
        tg.start_soon(gateway.warm)
        tg.start_soon(hosts.serve, tg)  # mcpx serve hands its host's stdio over here
        return Ops(config, servers, upstreams, tg, gateway).handle

    http = HttpConfig(
        bound_host=address,
        app_paths=APP_PATHS,
        max_body=settings.integer("transport.maxBody"),
        request_timeout=settings.duration("transport.requestTimeout"),
        sse_keepalive=settings.duration("transport.sseKeepAlive"),
        allowed_origins=frozenset(settings.names("transport.allowedOrigins")),
        allowed_hosts=frozenset(settings.names("transport.allowedHosts")),
    )

    recorded = started_with(config)  # what a shim compares its own configuration with (spec/gateway.md §9)

    def started(urls: list[str]) -> None:
        url = next((u for u in urls if u.startswith("http")), None)
        base = url.rsplit("/", 1)[0] if url else None
        info = {
            "pid": os.getpid(),
            "url": base,
            "mcp": url,
            "unix": unix_path,
            "serve": serve_path,
            "version": __version__,
            "loop": loop,
            "started_with": recorded,
        }
        write_state_file(state, DAEMON_FILE, orjson.dumps(info))
        if ready is not None:
            ready(urls)

    drain_within = settings.duration("pool.drain")

    async def drain() -> None:
        """Stopped: the calls in flight get ``pool.drain`` to finish before the upstreams are ended."""
        calls = upstreams.pool.calls_in_flight
        if calls:
            _say(
                f"mcpx: stopping: {_calls(calls)} in flight get up to {format_duration(drain_within)} to finish "
                "(pool.drain); a second Ctrl-C or SIGTERM stops at once"
            )
        left = await upstreams.drain(drain_within)
        if left:
            _say(f"mcpx: stopping: {_calls(left)} still in flight after pool.drain are cut")
        _say("mcpx: stopping: ending the upstreams")

    try:
        serve_http(
            gateway,
            loop=loop,
            host=address,
            port=port,
            unix_path=unix_path,
            config=session_config,
            http=http,
            ready=started,
            stop=stop,
            rounds=round_table(),
            app_setup=setup,
            drain=drain,
        )
    finally:
        with contextlib.suppress(OSError):
            info_path = Path(state) / DAEMON_FILE
            if info_path.exists() and orjson.loads(info_path.read_bytes()).get("pid") == os.getpid():
                info_path.unlink()
