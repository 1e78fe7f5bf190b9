"""The layer ``Upstreams`` stands on: the pool's actions carried out, and each instance's connection.

``mcpx.gateway._upstreams`` has the overview.  Here: the pool's clock
(``run_timer``) and actions (``Spawn`` starts an instance, ``Stop`` ends
it, grants and refusals wake their callers); what the router's calls ask
of the pool (``acquire``, ``release``, ``question_pending``,
``instance_lost``); and each instance, from its era (the probe, cached per
configuration) through its connection to what it hears (list changes, log
messages, a legacy server's questions, put to the host whose call they
belong to when that can be told).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from .. import __version__
from ..client import Client, McpCallError, Resolver, RoundResolver, connect_http, connect_sse, connect_stdio
from ..config import Scope, UpstreamServer
from ..core import INTERNAL_ERROR, ProbeConfig, ProbeDone, Progress, Revision, ServerNotification
from ..core.framing import DEFAULT_MAX_LINE
from ..core.pool import CallFailed, CallId, CallTimedOut, Granted, Pool, PoolConfig, Refused, Spawn, Stop
from ..core.probe import EraCache
from ..core.revisions import LOG_LEVELS, TASKS_EXTENSION
from ..core.upstream_auth import AuthConfigError
from ..drivers import _batch
from ..drivers._eracache import era_cache_path, load_era_cache, update_era_cache
from ..drivers._probe_http import probe_http
from ..drivers._probe_stdio import StdioHandover, probe_stdio_handing_over
from ..drivers._stderr import StderrLog
from ..server import Context
from ._calls import answered_by_mcpx, ask_host, follow_task, unattributed
from ._events import EventBus
from ._routing import HOSTLESS_SCOPE_PREFIX, REQUEST_SCOPE_PREFIX, WARM_UP_SCOPE, Routes

CLIENT_INFO = {"name": "mcpx", "version": __version__}


UPSTREAM_CAPABILITIES: Mapping[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {},
    "roots": {},
    "extensions": {TASKS_EXTENSION: {}},
}
"""What mcpx declares to upstreams: it can put each kind of question to the host whose call asked,
and follow a 2026-07-28 upstream's task to its end (a legacy session drops the extension)."""


_LIST_CHANGED: Mapping[str, str] = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}


_ENDED_LOGS_KEPT = 3  # per server: the stderr of the instances that ended last (a failed start's included)


_WATCH_INTERVAL = 0.25  # how often a running instance is checked for having gone away


_CATALOG_LISTS = (  # (catalog key, list method, the capability that offers it)
    ("tools", "tools/list", "tools"),
    ("prompts", "prompts/list", "prompts"),
    ("resources", "resources/list", "resources"),
    ("resourceTemplates", "resources/templates/list", "resources"),
)


class StartAdvised(McpCallError):
    """A failed start whose message says what to do already (the era probe's advice, a pinned era's)."""


_NO_HOST = (REQUEST_SCOPE_PREFIX, HOSTLESS_SCOPE_PREFIX, WARM_UP_SCOPE)  # scope keys that name no host


@dataclass
class _Running:
    server: str
    lane: str | None = None  # the pool's lane: "legacy" for legacy hosts' calls to a dual-era server
    stop: anyio.Event = field(default_factory=anyio.Event)
    client: Client | None = None
    starting: anyio.CancelScope = field(
        default_factory=anyio.CancelScope
    )  # cancelled by a Stop while starting
    reason: str = "the server stopped"
    stopped_because: str | None = None  # the pool's reason, when the pool stopped it
    log: StderrLog = field(default_factory=StderrLog)  # its stderr (the probe's process's too): mcpx logs
    spawned_at: float = field(default_factory=time.time)
    ended: str | None = None  # why it ended, once it has


@dataclass
class _Waiter:
    granted: anyio.Event = field(default_factory=anyio.Event)
    instance: int | None = None
    error: Mapping[str, Any] | None = None  # Refused, CallFailed or CallTimedOut
    scope: anyio.CancelScope | None = None
    host: Context | None = None  # the host request this call serves: questions, progress and logs go to it


async def _subscribe_upstream(client: Client, uri: str) -> None:
    """``client``'s server told of an interest in ``uri``, if it declared ``resources.subscribe``."""
    with contextlib.suppress(McpCallError):  # the server refused, or went: hosts simply get no updates
        resources = (await client.server_capabilities()).get("resources")
        if isinstance(resources, Mapping) and resources.get("subscribe"):
            await client.subscribe(uri)


def _era_key(server: UpstreamServer) -> str:
    """The era cache's key for ``server``: the same one the probe drivers write."""
    if server.url is not None:
        return EraCache.key({"url": server.url})
    argv = server.argv()
    env = server.process_env()
    return EraCache.key({"command": argv[0], "args": list(argv[1:]), "env": env, "cwd": server.cwd})


class _Instances:
    """The pool's driver and the upstream instances (see ``Upstreams``)."""

    if TYPE_CHECKING:  # defined by a later layer

        @contextlib.contextmanager
        def _asking(self, call_ids: tuple[CallId, ...]) -> Iterator[None]: ...
        def _crashed(self, instance: int, running: _Running, reason: str) -> None: ...
        def _narrowed_for(self, host_capabilities: Mapping[str, Any]) -> dict[str, Any]: ...
        @property
        def _own_timeout(self) -> float: ...
        def _round_resolver(self, host: Context, call_id: str) -> RoundResolver: ...

    def __init__(
        self,
        servers: Mapping[str, UpstreamServer],
        *,
        state_dir: Path,
        pool: PoolConfig | None = None,
        resolver: Resolver | None = None,
        capabilities: Mapping[str, Any] | None = None,
        answer_modern_requests: bool = False,
        max_rounds: int = 8,
        events: EventBus | None = None,
        max_line: int = DEFAULT_MAX_LINE,
    ) -> None:
        """``answer_modern_requests``: answer a 2026-07-28 upstream's server requests as a legacy one's.

        That revision has no server-to-client requests and its stdio page says
        a client must not answer them; ``spec.lenient`` naming 2026-07-28
        turns this on (spec/gateway.md §4).  ``max_rounds``
        (``proto.askRounds``): the ``input_required`` rounds one call to a
        2026-07-28 upstream may have before it is failed.
        """
        self.servers = dict(servers)
        self._answer_modern_requests = answer_modern_requests
        self._max_rounds = max_rounds
        self._max_line = max_line  # transport.maxLine: the longest line read from, or sent to, a stdio server
        self.events = events if events is not None else EventBus()  # /v1/events
        self.pool = Pool(
            {name: str(s.scope) for name, s in self.servers.items()},
            config=pool,
            start_timeouts={
                n: s.start_timeout for n, s in self.servers.items() if s.start_timeout is not None
            },
        )
        self._tg: anyio.abc.TaskGroup | None = None
        self._cache_path = era_cache_path(state_dir)
        self._resolver = resolver
        self._capabilities = dict(UPSTREAM_CAPABILITIES if capabilities is None else capabilities)
        self._running: dict[int, _Running] = {}
        self._instance_logs: dict[
            str, dict[int, _Running]
        ] = {}  # server -> its instances, live and lately ended
        self._waiters: dict[str, _Waiter] = {}
        self._modern_only: set[str] = set()  # era keys of servers that refused a legacy session
        self._one_era: set[str] = set()  # names of servers found to speak one era only: one lane
        self._ids = itertools.count(1)
        self._drained: anyio.Event | None = None  # set when draining and the last call ends
        self._timer_changed: anyio.Event | None = None
        self._timer_at = math.inf  # when the timer loop wakes next
        self._rearm_due = False  # the timer is looked at again at the end of this chunk
        self.clients_started = 0
        self._watched: frozenset[str] = frozenset()
        self._on_list_changed: Callable[[str, str], None] | None = None
        self._on_resource_updated: Callable[[str, str], None] | None = None
        self._resources: dict[str, set[str]] = {}  # server -> URIs subscribed upstream, for good
        self._narrowed: dict[bytes, dict[str, Any]] = {}  # host capabilities (JSON) -> narrowed_capabilities
        # Host calls to stdio upstreams go through the router (mcpx/gateway/_routing.py); a
        # resolver of the embedder's own answers questions the router would refuse, so it keeps
        # every call on the awaited path.
        self.routes: Routes | None = Routes(self, self._capabilities) if resolver is None else None
        self.on_catalog_stale: Callable[[str, int, str | None], None] | None = None
        """Told ``(server, instance, kind)`` when an instance starts (``kind`` None) or announces that its
        tools, prompts or resources changed: what was read of the server's catalog may be out of date."""

    async def run_timer(self) -> None:
        """Feed the pool its deadlines (start, idle, backoff, call timeouts) until cancelled."""
        while True:
            self.pool.take_lowest_set()  # what is set from here on is compared with this deadline
            deadline = self.pool.get_timer()
            self._timer_at = math.inf if deadline is None else deadline
            self._timer_changed = anyio.Event()
            if deadline is None:
                await self._timer_changed.wait()
                continue
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                await self._timer_changed.wait()
            due = self.pool.get_timer()
            if due is not None and time.monotonic() >= due:
                self.pool.handle_timer(time.monotonic())
                self._perform()

    async def drain(self, within: float) -> int:
        """Wait, at most ``within`` seconds, for the calls in flight to end; how many are still running.

        What a daemon being stopped does before it ends its upstreams
        (``pool.drain``; spec/gateway.md §8).  Calls that arrive meanwhile are
        waited for too, within the same bound.
        """
        self._drained = anyio.Event()
        if self.pool.calls_in_flight:
            with anyio.move_on_after(within):
                await self._drained.wait()
        return self.pool.calls_in_flight

    def _perform(self) -> None:
        if self._drained is not None and not self.pool.calls_in_flight:
            self._drained.set()
        for action in self.pool.next_actions():
            if isinstance(action, Spawn):
                running = self._running[action.instance] = _Running(server=action.server, lane=action.lane)
                self._instance_logs.setdefault(action.server, {})[action.instance] = running
                assert self._tg is not None, "attach() the upstreams to a task group first"
                self._tg.start_soon(self._run_instance, action.instance, running)
            elif isinstance(action, Stop):
                stopped = self._running.pop(action.instance, None)
                if stopped is not None:
                    stopped.stopped_because = action.reason
                    stopped.stop.set()
                    if stopped.client is None:
                        stopped.starting.cancel()
            elif isinstance(action, Granted):
                if self.routes is not None and self.routes.owns(action.call_id):
                    self.routes.granted(str(action.call_id), action.instance)
                    continue
                waiter = self._waiters.get(str(action.call_id))
                if waiter is not None:
                    waiter.instance = action.instance
                    waiter.granted.set()
            elif isinstance(action, Refused | CallFailed | CallTimedOut):
                if self.routes is not None and self.routes.owns(action.call_id):
                    self.routes.failed(str(action.call_id), action.error)
                    continue
                waiter = self._waiters.get(str(action.call_id))
                if waiter is not None:
                    waiter.error = action.error
                    waiter.granted.set()
                    if waiter.scope is not None:
                        waiter.scope.cancel()
        # Woken only for an earlier deadline: a later one (every call moves its own) waits for
        # the loop to wake as planned and look again.  Looked at once per chunk of input (a chunk
        # of host requests acquires for each, a chunk of answers releases each), at its end, by
        # the earliest deadline the pool set meanwhile (no scan of its calls and instances).
        if self._timer_changed is not None and not self._rearm_due:
            self._rearm_due = True
            if not _batch.at_chunk_end(self._rearm):
                self._rearm()

    def _rearm(self) -> None:
        self._rearm_due = False
        changed = self._timer_changed
        if changed is not None and self.pool.take_lowest_set() < self._timer_at:
            changed.set()

    def _pool_scope(self, server: str, scope_key: str | None) -> str | None:
        """The scope key the pool is given: ``None`` for a host-scoped server's call that names no host.

        ``scope = "host"`` (a command server's default): one instance per
        host, and one shared by the requests with no identity — a 2026-07-28
        request without a session, ``/v1``, the start-up listing — never an
        instance spawned per request (spec/configuration.md, scopes).
        """
        if scope_key is None or not scope_key.startswith(_NO_HOST):
            return scope_key
        config = self.servers.get(server)
        return None if config is not None and config.scope is Scope.HOST else scope_key

    def lane(self, server: str, revision: Revision | None) -> str | None:
        """The pool's lane for a host's call to ``server``: ``"legacy"`` when the host and the era differ.

        An upstream that speaks both eras is spoken to in the host's
        (``era = "auto"``, the default): a legacy host's calls take instances
        of their own, connected over a legacy session; a 2026-07-28 host's,
        and calls without a host, the server's usual ones, in the era the
        probe found.  A server whose ``era`` is pinned has one lane, and so
        has one found to speak one era only (the probe found it legacy, or it
        refused ``initialize``): its instances are alike whoever calls.
        """
        if revision is None or revision == Revision.V2026_07_28 or server in self._one_era:
            return None
        config = self.servers.get(server)
        return "legacy" if config is not None and config.era == "auto" else None

    def routable(self, server: str) -> bool:
        """Whether a host's call to ``server`` goes through the router (a stdio upstream)."""
        config = self.servers.get(server)
        return self.routes is not None and config is not None and config.url is None

    def acquire(
        self,
        server: str,
        scope_key: str,
        call_id: str,
        timeout: float | None = None,
        revision: Revision | None = None,
    ) -> int | None:
        """An instance for the routed call ``call_id``: returned when the pool grants one at once.

        Otherwise ``None``, and the pool's ``Granted`` (or refusal) comes to
        ``Routes.granted`` (``Routes.failed``) later, or before this returns.
        ``timeout`` lowers ``pool.callTimeout`` for this call; ``revision`` is
        the host's (``lane``).
        """
        now = time.monotonic()
        lane = self.lane(server, revision)
        key = self._pool_scope(server, scope_key)
        instance = None if timeout is not None else self.pool.acquire_now(server, key, call_id, now, lane)
        if instance is None:
            self.pool.acquire(server, key, call_id, now, timeout=timeout, lane=lane)
        self._perform()
        return instance

    def acquire_now(self, server: str, scope_key: str, call_id: str, revision: Revision | None) -> int | None:
        """The instance that takes the routed call ``call_id`` at once, or ``None`` with nothing done.

        ``Pool.acquire_now``: a running instance with room in the call's slot
        (the relay lane's calls, which go the usual way otherwise).
        """
        instance = self.pool.acquire_now(
            server,
            self._pool_scope(server, scope_key),
            call_id,
            time.monotonic(),
            self.lane(server, revision),
        )
        if instance is not None:
            self._perform()  # a spare to keep, perhaps
        return instance

    def release(self, call_id: str, scope_key: str | None = None) -> None:
        """The call ended; ``scope_key``: a scope of its own (a 2026-07-28 request), ended with it."""
        now = time.monotonic()
        self.pool.release(call_id, now)
        if scope_key is not None:
            self.pool.connection_closed(scope_key, now)
        self._perform()

    def question_pending(self, call_id: str, pending: bool) -> None:
        self.pool.question_pending(call_id, pending, time.monotonic())
        self._perform()

    def instance_lost(self, instance: int, reason: str) -> None:
        running = self._running.get(instance)
        if running is not None:
            running.reason = reason
            self._crashed(instance, running, reason)

    def published_progress(self, server: str, params: Mapping[str, Any]) -> None:
        """A routed call's progress, on /v1/events as well (spec/gateway.md §8)."""
        event: dict[str, Any] = {"server": server, "progress": params.get("progress")}
        for key in ("total", "message"):
            if params.get(key) is not None:
                event[key] = params[key]
        self.events.publish("progress", event)

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        assert self._tg is not None, "attach() the upstreams to a task group first"
        self._tg.start_soon(fn, *args)

    async def follow_task(
        self, client: Client, created: Mapping[str, Any], host: Context, call_id: str
    ) -> Mapping[str, Any]:
        """A routed call the upstream made a task: followed as ``request`` follows one."""
        caps = self._narrowed_for(host.client_capabilities)
        return await follow_task(client, created, host, caps, self._round_resolver(host, call_id))

    async def _run_instance(self, instance: int, running: _Running) -> None:
        server = self.servers[running.server]
        advised = False
        try:
            # A secret is the daemon's: read from its environment when the server starts.
            server = server.resolved(os.environ)
            with running.starting:
                await self._serve_instance(instance, running, server)
        except McpCallError as exc:
            reason = exc.message.removeprefix(f"server {server.name!r}: ")  # the pool names the server
            advised = isinstance(exc, StartAdvised)
        except AuthConfigError as exc:  # its secret, read from the daemon's environment just now
            reason = str(exc)
            advised = True  # the reason says where to set it
        except (OSError, ValueError) as exc:
            reason = f"server {server.name!r} could not be started: {exc}"
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # one server's failure must not take the daemon down
            reason = f"server {server.name!r} failed: {type(exc).__name__}: {exc}"
        else:
            reason = running.reason
        if running.stop.is_set():  # the pool stopped it: nothing to report
            reason = running.stopped_because or reason
        elif running.client is not None:
            self.pool.crashed(instance, reason, time.monotonic())
            self._perform()
        else:
            self.pool.start_failed(instance, reason, time.monotonic(), advised=advised)
            self._perform()
        running.ended = reason
        self._forget_old_logs(server.name)
        # Its process has gone and the pool holds it no more (/v1/servers lists it no longer).
        self.events.publish(
            "instance.stopped", {"server": server.name, "instance": instance, "reason": reason}
        )

    def _forget_old_logs(self, server: str) -> None:
        kept = self._instance_logs.get(server, {})
        ended = [i for i, r in kept.items() if r.ended is not None]
        for instance in ended[: max(0, len(ended) - _ENDED_LOGS_KEPT)]:
            del kept[instance]

    def logs(self, server: str, last: int | None = None) -> list[dict[str, Any]]:
        """``server``'s instances, live and the last few ended, oldest first: each one's stderr lines.

        What ``GET /v1/servers/{name}/log`` answers (spec/gateway.md); ``last``
        keeps each instance's last lines only.
        """
        shown = []
        for instance, running in self._instance_logs.get(server, {}).items():
            shown.append(
                {
                    "instance": instance,
                    "running": running.ended is None,
                    "spawnedAt": running.spawned_at,
                    "ended": running.ended,
                    **running.log.to_json(last),
                }
            )
        return shown

    async def _serve_instance(self, instance: int, running: _Running, server: UpstreamServer) -> None:
        """Connect, tell the pool, and hold the connection until the pool stops it or the server goes."""
        async with self._connect(instance, server, running.log, running.lane) as client:
            client.on_notification = lambda note: self._heard(instance, server.name, note)
            if not client.session.modern and "logging" in client.session.server_capabilities:
                with contextlib.suppress(McpCallError):  # the hosts' own levels filter what they get
                    await client.request("logging/setLevel", {"level": "debug"}, timeout=self._own_timeout)
            running.client = client
            if self.routes is not None and client.linkable:
                self.routes.link(instance, server.name, client)
            self.clients_started += 1
            self.pool.started(instance, time.monotonic())
            self._perform()
            self.events.publish("instance.started", {"server": server.name, "instance": instance})
            # A new process may offer something else.  Not asked of a legacy host's instance of a
            # dual-era server, nor of one that starts as the spare, given to nobody yet: the catalog
            # is the server's, read where calls without a host go, and a spare's fresh state must
            # not hide what a running instance now offers (a spare given to a caller while it was
            # starting is that caller's instance by now, and is read).
            if (
                self.on_catalog_stale is not None
                and running.lane is None
                and not self.pool.is_spare(instance)
            ):
                self.on_catalog_stale(server.name, instance, None)
            with anyio.move_on_after(self._own_timeout):
                # Every instance hears its server's list changes, so that cached lists (the
                # catalogs the gateway builds on) are dropped when they change; a 2026-07-28
                # server sends them only on a listen stream.  Hosts hear of watched ones.
                with contextlib.suppress(McpCallError):  # a server that will not listen sends no changes
                    await client.start_listening()
                for uri in sorted(self._resources.get(server.name, ())):
                    await _subscribe_upstream(client, uri)
            while not running.stop.is_set():
                if client.session.closed:
                    running.reason = f"server {server.name!r} exited; {client.last_words()}"
                    return
                with anyio.move_on_after(_WATCH_INTERVAL):
                    await running.stop.wait()

    @contextlib.asynccontextmanager
    async def _connect(
        self, instance: int, server: UpstreamServer, log: StderrLog, lane: str | None = None
    ) -> AsyncIterator[Client]:
        """A client for ``server`` in the era the probe found; a cached era that fails is probed again.

        A server the probe found modern is spoken to over a legacy session
        when its ``era`` is ``legacy``, or for the ``legacy`` lane (a legacy
        host's calls): a dual-era server answers ``initialize``.  One that
        refuses it (it speaks 2026-07-28 only) is remembered and spoken to in
        its own era from then on.  ``era = "modern"`` asks for 2026-07-28
        whatever the probe found.  A spawned server's stderr goes to ``log``,
        the probe's process's as well.
        """
        legacy_wanted = server.era == "legacy" or (lane == "legacy" and server.era == "auto")
        for attempt in (1, 2):
            era, revision, handover = await self._era(server, log, fresh=attempt == 2)
            if era == "modern" and legacy_wanted and _era_key(server) not in self._modern_only:
                if handover is not None:  # settled in the other era: this connection starts afresh
                    await handover.discard()
                    handover = None
                era, revision = "legacy", None
                opened = False
                try:
                    async with self._open(instance, server, era, revision, log, None) as client:
                        opened = True
                        yield client
                        return
                except McpCallError as exc:
                    if opened:  # the session's own end (or the caller's), not a refused initialize
                        raise
                    if server.era == "legacy":
                        raise StartAdvised(
                            {
                                "code": INTERNAL_ERROR,
                                "message": f'server {server.name!r} is pinned to era "legacy" but did '
                                f'not open a legacy session ({exc.message}); set its era to "auto"',
                            }
                        ) from exc
                    self._modern_only.add(_era_key(server))  # a modern-only server: its own era from now on
                    self._one_era.add(server.name)
                    era, revision, handover = await self._era(server, log, fresh=False)
            elif era != "modern" and server.era == "modern":
                if handover is not None:
                    await handover.discard()
                raise StartAdvised(
                    {
                        "code": INTERNAL_ERROR,
                        "message": f'server {server.name!r} is pinned to era "modern" but does not speak '
                        f'2026-07-28 (the era probe found {era}); set its era to "auto"',
                    }
                )
            connected = False
            try:
                async with self._open(instance, server, era, revision, log, handover) as client:
                    connected = True
                    yield client
                    return
            except McpCallError:
                if connected or attempt == 2:
                    raise
                self._forget_era(server)  # the cached era did not work: probe again

    def _hosts_on(self, instance: int) -> list[Context]:
        """The host requests whose calls are in flight on ``instance``."""
        calls = self.pool.calls_on(instance)
        return [w.host for c in calls if (w := self._waiters.get(str(c))) is not None and w.host is not None]

    async def _resolve(self, instance: int, method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        """A legacy upstream's question (a server request), put to the host whose call it is for (spec/gateway.md §4)."""
        host = self._host_of(instance)
        calls = self.pool.calls_on(instance)
        with self._asking(calls if len(calls) == 1 else ()):  # the call it is for, when that can be told
            if host is None:
                if self._resolver is not None:
                    return await self._resolver(method, params)
                raise unattributed(method)
            own = answered_by_mcpx(host, method)
            if own is not None:
                return own
            question = host.question(method, params)
            answer: Mapping[str, Any] = (await ask_host(host, [question]))[question.key]
            return answer

    def _host_of(self, instance: int) -> Context | None:
        """The host whose call a legacy question on ``instance`` belongs to; ``None`` when that cannot be told.

        A server request belongs to a call only when that call is the only one
        in flight on the instance; otherwise the attribution is ambiguous and
        nobody is asked, since one host's question must never reach another.
        """
        hosts = self._hosts_on(instance)
        if len(self.pool.calls_on(instance)) != 1 or len(hosts) != 1:
            return None
        return hosts[0]

    def _heard(self, instance: int, server: str, note: ServerNotification) -> None:
        """An upstream notification: log messages to the hosts, list changes to whoever watches."""
        kind = _LIST_CHANGED.get(note.method)
        if kind is not None:
            self.events.publish("list.changed", {"server": server, "kind": kind})
            if self.on_catalog_stale is not None:  # watched or not: the gateway's catalog of it is stale
                self.on_catalog_stale(server, instance, kind)
            if server in self._watched and self._on_list_changed is not None:
                self._on_list_changed(server, kind)
            return
        if note.method == "notifications/resources/updated":
            uri = note.params.get("uri")
            if isinstance(uri, str):
                self.events.publish("resource.updated", {"server": server, "uri": uri})
            if isinstance(uri, str) and server in self._watched and self._on_resource_updated is not None:
                self._on_resource_updated(server, uri)
            return
        self._relay_log(instance, server, note)

    def _published_progress(
        self, server: str, relay: Callable[[Progress], None] | None
    ) -> Callable[[Progress], None]:
        """``relay`` (if any), and every report published on /v1/events as well (spec/gateway.md §8)."""

        def report(progress: Progress) -> None:
            event: dict[str, Any] = {"server": server, "progress": progress.progress}
            if progress.total is not None:
                event["total"] = progress.total
            if progress.message is not None:
                event["message"] = progress.message
            self.events.publish("progress", event)
            if relay is not None:
                relay(progress)

        return report

    def _relay_log(self, instance: int, server: str, note: ServerNotification) -> None:
        """An upstream log message goes to every host with a call in flight on the instance (spec/gateway.md §5)."""
        if note.method != "notifications/message":
            return
        level, data, logger = note.params.get("level"), note.params.get("data"), note.params.get("logger")
        if not isinstance(level, str) or level not in LOG_LEVELS:
            return
        event: dict[str, Any] = {"server": server, "level": level, "data": data}
        if isinstance(logger, str):
            event["logger"] = logger
        self.events.publish("server.log", event)
        for host in self._hosts_on(instance):
            host.log(level, data, logger if isinstance(logger, str) else None)

    def _open(
        self,
        instance: int,
        server: UpstreamServer,
        era: str,
        revision: Revision | None,
        log: StderrLog,
        handover: StdioHandover | None = None,
    ) -> contextlib.AbstractAsyncContextManager[Client]:
        """A client for ``server`` in ``era``; over ``handover`` (the probe's process) when given."""

        async def resolver(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
            return await self._resolve(instance, method, params)

        common: dict[str, Any] = {
            "capabilities": self._capabilities,
            "resolver": resolver,
            "client_info": CLIENT_INFO,
            # The pool times calls (``_guarded``), pausing while a question is out; the
            # client's own timer would not pause, so it is off.  Requests of mcpx's own
            # (listening, subscribing, the log level) are bounded where they are made.
            "call_timeout": math.inf,
            "answer_modern_requests": self._answer_modern_requests,
            "max_rounds": self._max_rounds,
            "start_timeout": self.pool.start_timeout(server.name),  # the handshake, after the probe
        }
        if server.url is None:
            offer = revision if era == "legacy" else None
            return connect_stdio(
                server.argv(),
                env=server.process_env(),
                cwd=server.cwd,
                max_line=self._max_line,
                modern=era == "modern",
                offer=offer,
                stderr_log=log,
                adopt=handover,
                **common,
            )
        headers = server.headers
        if era == "legacy-sse":
            return connect_sse(server.url, headers=headers, auth=server.auth, **common)
        return connect_http(
            server.url,
            modern=era == "modern",
            offer=revision if era == "legacy" else None,
            headers=headers,
            auth=server.auth,
            **common,
        )

    async def _era(
        self, server: UpstreamServer, log: StderrLog, *, fresh: bool
    ) -> tuple[str, Revision | None, StdioHandover | None]:
        """The era to connect in: cached, or probed; a stdio probe hands its process over, so a first
        start spawns the server once (the caller must use or stop it: ``connect_stdio(adopt=)``)."""
        if not fresh:
            entry = load_era_cache(self._cache_path).get(_era_key(server))
            if entry is not None:
                self._found_era(server, entry.era)
                return entry.era, entry.revision, None
        # Each wait of the probe may take the whole start timeout (a slow server's first answer
        # comes late); the pool bounds the start as a whole by the same time.
        config = ProbeConfig(
            client_info=CLIENT_INFO,
            capabilities=self._capabilities,
            timeout=self.pool.start_timeout(server.name),
            timeout_setting=self.pool.start_timeout_setting(server.name),
        )
        if server.url is None:
            outcome, handover = await probe_stdio_handing_over(
                server.argv(),
                config,
                env=server.process_env(),
                cwd=server.cwd,
                cache_path=self._cache_path,
                stderr_log=log,
            )
        else:
            headers = server.headers + (server.auth.headers if server.auth is not None else ())
            outcome = await probe_http(server.url, config, headers=headers, cache_path=self._cache_path)
            handover = None
        if not isinstance(outcome, ProbeDone):
            raise StartAdvised(
                {"code": INTERNAL_ERROR, "message": f"server {server.name!r}: {outcome.reason}"}
            )
        self._found_era(server, outcome.era)
        return outcome.era, outcome.revision, handover

    def _found_era(self, server: UpstreamServer, era: str) -> None:
        """What the probe (or the era cache) found: a server that does not speak 2026-07-28 has one lane."""
        if era != "modern":
            self._one_era.add(server.name)
        elif _era_key(server) not in self._modern_only:
            self._one_era.discard(server.name)  # perhaps dual-era: initialize will tell

    def _forget_era(self, server: UpstreamServer) -> None:
        update_era_cache(self._cache_path, lambda cache: cache.invalidate(_era_key(server)))
