"""The pool's driver: upstream servers started, kept and stopped as ``mcpx.core`` Pool says.

The pure ``Pool`` (mcpx/core/pool.py) decides which instance serves a call,
when one starts, idles out, backs off or times out; this module carries that
out on an anyio task group.  An instance is a ``mcpx.client.Client`` over the
transport its configuration names: a spawned stdio process, Streamable HTTP,
or 2024-11-05 HTTP+SSE, in the era the era probe found (cached per
configuration in ``<state>/upstream-eras.json``, so the probe is paid once;
a cached era that stops working is probed again).  Every call ends in the
upstream's result, the upstream's own JSON-RPC error, or an error that names
the server and says what to do: never an empty answer, never a hang.

Modules: ``Upstreams`` — calls, catalogs, subscriptions and status, what
the gateway asks of its upstreams — is here; the layer it stands on,
``_instances._Instances``, carries out the pool's actions (the clock,
spawns and stops, each instance's connection and what it hears) and serves
what the router's calls ask of the pool (mcpx/gateway/_routing.py).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any

import anyio
import anyio.abc
import orjson

from ..client import Client, McpCallError, RoundResolver
from ..core import INTERNAL_ERROR, Progress
from ..core.gateway_tools import narrowed_capabilities
from ..core.pool import CallId, ServerStatus
from ..core.revisions import TASKS_EXTENSION
from ..server import Context
from ._calls import ask_round, follow_task, needs_core_task, run_core_task
from ._instances import _CATALOG_LISTS, _Instances, _Running, _subscribe_upstream, _Waiter

__all__ = ["Upstreams"]


_NARROWED_KEPT = 64  # distinct host capability sets whose narrowing is kept (hosts declare few)


def _progress_to(host: Context) -> Callable[[Progress], None]:
    """Relay an upstream's progress for a call to the host request it serves (the host's token restored there)."""

    def relay(report: Progress) -> None:
        host.report_progress(report.progress, report.total, report.message)

    return relay


async def _read_catalog(client: Client) -> dict[str, Any]:
    """What ``client``'s server offers (``Upstreams.catalog``), with ``listedAt`` and ``freshUntil``."""
    listed_at = time.monotonic()
    caps = await client.server_capabilities()
    found: dict[str, Any] = {"capabilities": dict(caps), "revision": client.revision}
    fresh_until = math.inf
    for key, method, capability in _CATALOG_LISTS:
        found[key] = []
        if capability in caps:
            found[key], until = await client.kept_list(method)
            fresh_until = min(fresh_until, until)
    found["listedAt"], found["freshUntil"] = listed_at, fresh_until
    return found


class Upstreams(_Instances):
    """Every configured upstream behind one pool; ``request`` is the only way in."""

    def attach(self, tg: anyio.abc.TaskGroup) -> None:
        """Run in ``tg`` (the daemon's task group): instances start there, and the pool's timer with them."""
        self._tg = tg
        tg.start_soon(self.run_timer)

    @contextlib.asynccontextmanager
    async def _instance(
        self, server: str, scope_key: str | None, *, timeout: float | None = None, host: Context | None = None
    ) -> AsyncIterator[tuple[Client, int, str]]:
        """An instance of ``server`` granted by the pool for one call: ``(client, instance, call id)``.

        Waits for the grant (starting an instance if needed) and releases it
        on the way out, however the call ends.  A refusal, or an instance
        that went away before the call could start, is ``McpCallError``
        naming the server.  The caller runs the call inside
        ``self._guarded(call_id)``, which the pool cancels on a timeout.  A
        call with no scope key (``/v1``, the CLI) to a connection-scoped
        server is a connection of its own, ended with the call.
        """
        call_id = f"c{next(self._ids)}"
        waiter = self._waiters[call_id] = _Waiter(host=host)
        config = self.servers.get(server)
        scope_key = self._pool_scope(server, scope_key)
        once = scope_key is None and config is not None and str(config.scope) == "connection"
        if once:  # nobody's connection (a /v1 request, the CLI): this call is a connection of its own
            scope_key = f"once:{call_id}"
        try:
            lane = self.lane(server, None if host is None else host.request.revision)
            self.pool.acquire(server, scope_key, call_id, time.monotonic(), timeout=timeout, lane=lane)
            self._perform()
            await waiter.granted.wait()
            if waiter.error is not None:
                raise McpCallError(waiter.error)
            assert waiter.instance is not None
            running = self._running.get(waiter.instance)
            if running is None or running.client is None or running.client.session.closed:
                if running is not None:
                    self._crashed(waiter.instance, running, f"server {server!r} exited")
                raise McpCallError(
                    {
                        "code": INTERNAL_ERROR,
                        "message": f"server {server!r}: its process went away; call again to restart it",
                    }
                )
            yield running.client, waiter.instance, call_id
        finally:
            self._waiters.pop(call_id, None)
            with anyio.CancelScope(shield=True):
                self.pool.release(call_id, time.monotonic())
                if once:
                    assert scope_key is not None
                    self.pool.connection_closed(scope_key, time.monotonic())
                self._perform()

    @contextlib.contextmanager
    def _asking(self, call_ids: tuple[CallId, ...]) -> Iterator[None]:
        """A question is out to the host for ``call_ids``: their call timeouts pause meanwhile (spec/gateway.md §4)."""
        for call_id in call_ids:
            self.pool.question_pending(call_id, True, time.monotonic())
        self._perform()
        try:
            yield
        finally:
            for call_id in call_ids:
                self.pool.question_pending(call_id, False, time.monotonic())
            self._perform()

    def _round_resolver(self, host: Context, call_id: str) -> RoundResolver:
        """The host's answers to a 2026-07-28 upstream's round for ``call_id``, its timeout paused meanwhile."""

        async def resolve(requests: Mapping[str, Any]) -> Mapping[str, Any]:
            with self._asking((call_id,)):
                return await ask_round(host, requests)

        return resolve

    @contextlib.contextmanager
    def _guarded(self, call_id: str) -> Iterator[None]:
        """The call's own cancel scope: the pool cancels it when the call times out (``CallTimedOut``)."""
        waiter = self._waiters[call_id]
        with anyio.CancelScope() as scope:
            waiter.scope = scope
            yield
        if scope.cancelled_caught:
            assert waiter.error is not None  # only the pool cancels this scope
            raise McpCallError(waiter.error)

    async def request(
        self,
        server: str,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        scope_key: str | None = None,
        timeout: float | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        host: Context | None = None,
        as_task: bool = False,
    ) -> Mapping[str, Any]:
        """Send ``method`` to an instance of ``server``; its result, or ``McpCallError``.

        ``timeout`` may lower ``pool.callTimeout`` for this call, never raise
        it.  The upstream's own JSON-RPC errors come back as they were sent.
        ``host`` is the host request being served: the upstream's progress for
        this call and its log messages while the call runs go to that host
        (spec/gateway.md §4, §5).  So do its questions: a 2026-07-28
        upstream's input round, which belongs to this call whatever else runs
        on the instance, and a legacy upstream's server requests when this
        call is the only one on the instance.  A 2026-07-28 upstream is told
        the host's capabilities narrowed onto mcpx's
        (``narrowed_capabilities``), and may answer with a task when the host
        declared the tasks extension or (``as_task``) the host's 2025-11-25
        call runs as a task of mcpx's; mcpx follows that task to its end.
        """
        on_progress = self._published_progress(
            server, _progress_to(host) if host is not None and on_progress is None else on_progress
        )
        async with self._instance(server, scope_key, timeout=timeout, host=host) as (
            client,
            instance,
            call_id,
        ):
            fitted: dict[str, Any] = {}
            if host is not None:
                caps = self._narrowed_for(host.client_capabilities)
                if as_task:
                    caps["extensions"] = {**caps.get("extensions", {}), TASKS_EXTENSION: {}}
                fitted["capabilities"] = caps
                fitted["on_round"] = self._round_resolver(host, call_id)
            with self._guarded(call_id):  # the pool's call timeout, paused while the host is asked
                try:
                    if await needs_core_task(client, method, params):
                        return await run_core_task(client, params or {}, on_progress)
                    result = await client.request(
                        method, params, on_progress=on_progress, log_level="debug", **fitted
                    )
                    if result.get("resultType") != "task":
                        return result
                    return await follow_task(
                        client, result, host, fitted.get("capabilities"), fitted.get("on_round")
                    )
                except McpCallError as exc:
                    if client.session.closed:  # not the upstream's answer: the upstream went away
                        running = self._running.get(instance)
                        if running is not None:
                            self._crashed(instance, running, f"server {server!r} exited during a call")
                        raise McpCallError(
                            {
                                "code": exc.code,
                                "message": f"server {server!r}: {exc.message}",
                                "data": {"server": server},
                            }
                        ) from None
                    raise
        raise AssertionError("unreachable: _guarded raises when the call did not return")

    def _narrowed_for(self, host_capabilities: Mapping[str, Any]) -> dict[str, Any]:
        """``narrowed_capabilities`` for this host, computed once per distinct capability set.

        A fresh top-level dict each time: the caller may add the tasks extension to it.
        """
        try:
            key = orjson.dumps(host_capabilities, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # not JSON (it always is, coming from a host): narrow it every time
            return narrowed_capabilities(self._capabilities, host_capabilities)
        kept = self._narrowed.get(key)
        if kept is None:
            kept = narrowed_capabilities(self._capabilities, host_capabilities)
            if len(self._narrowed) >= _NARROWED_KEPT:
                del self._narrowed[next(iter(self._narrowed))]  # the oldest goes
            self._narrowed[key] = kept
        return dict(kept)

    async def catalog(self, server: str, *, scope_key: str | None = None) -> dict[str, Any]:
        """What ``server`` offers: tools, prompts, resources and templates, and what it declared.

        Lists the server did not declare are empty; each list comes from the
        instance's cache (dropped when the server announces a change, kept no
        longer than its ``ttlMs``).  ``listedAt`` is when it was read
        (``time.monotonic()``), ``freshUntil`` until when it may be used
        without asking again (``Client.kept_list``, the soonest of the lists).
        """
        async with self._instance(server, scope_key) as (client, _, call_id):
            with self._guarded(call_id):
                return await _read_catalog(client)
        raise AssertionError("unreachable: _guarded raises when the call did not return")

    async def running_catalog(self, server: str, instance: int | None = None) -> dict[str, Any] | None:
        """``catalog``, read from a running instance of ``server`` (``instance``, when given), not through the pool.

        For the refreshes mcpx makes of its own accord (a list change, an
        instance start, an expired ``ttlMs``): it starts nothing, waits for no
        grant and is not a call, so an instance nobody uses still idles out.
        ``None`` when no such instance is up, or it failed or went away
        meanwhile: a background refresh has nobody to report to.
        """
        if instance is not None:
            found = self._running.get(instance)
            candidates = [found] if found is not None and found.server == server else []
        else:
            candidates = [r for r in self._running.values() if r.server == server]
        client = next(
            (r.client for r in candidates if r.client is not None and not r.client.session.closed), None
        )
        if client is None:
            return None
        with anyio.move_on_after(self._own_timeout):
            try:
                return await _read_catalog(client)
            except Exception:  # the instance went, or broke: the catalog read before stays
                return None
        return None

    @property
    def _own_timeout(self) -> float:
        """The bound of requests mcpx makes of its own accord (the clients' timers are off: ``_open``)."""
        return self.pool.config.call_timeout

    async def _subscribe_within_bounds(self, client: Client, uri: str) -> None:
        with anyio.move_on_after(self._own_timeout):
            await _subscribe_upstream(client, uri)

    def watch(
        self,
        servers: Iterable[str],
        on_list_changed: Callable[[str, str], None],
        on_resource_updated: Callable[[str, str], None] | None = None,
    ) -> None:
        """Hear ``servers``' changes: ``on_list_changed(server, kind)`` and ``on_resource_updated(server, uri)``.

        ``kind`` is tools, prompts or resources.  A legacy upstream sends
        these unsolicited; a 2026-07-28 one only on a ``subscriptions/listen``
        stream, which every instance keeps open (spec/gateway.md §5; unwatched
        servers' changes only drop the instance's cached lists).  Resource
        updates come only for URIs subscribed upstream (``subscribe``).
        """
        self._watched = frozenset(servers)
        self._on_list_changed = on_list_changed
        self._on_resource_updated = on_resource_updated

    def subscribe(self, server: str, uri: str) -> None:
        """Subscribe upstream to ``uri`` of ``server`` (a shared one), now and on every instance it starts.

        A subscription is kept for the daemon's life, not counted: hosts come
        and go, and each host session delivers only the updates it subscribed
        to, so an upstream subscription nobody needs any more costs a few
        notifications, while one dropped too early would lose updates another
        host is waiting for.  Servers scoped per connection or call are not
        subscribed: their instances are not everybody's, and neither are
        their resources' updates.  Nothing is sent to a server that did not
        declare ``resources.subscribe``.
        """
        config = self.servers.get(server)
        if config is None or str(config.scope) != "shared" or self._tg is None:
            return
        uris = self._resources.setdefault(server, set())
        if uri in uris:
            return
        uris.add(uri)
        for running in self._running.values():
            if running.server == server and running.client is not None:
                self._tg.start_soon(self._subscribe_within_bounds, running.client, uri)

    def status(self) -> tuple[ServerStatus, ...]:
        return self.pool.status(time.monotonic())

    def _crashed(self, instance: int, running: _Running, reason: str) -> None:
        """Tell the pool at once (the watcher would only notice within a quarter second)."""
        if not running.stop.is_set() and instance in self._running:
            self.pool.crashed(instance, reason, time.monotonic())
            self._perform()

    def scope_ended(self, scope_key: str) -> None:
        """The host connection (or 2026-07-28 request) ``scope_key`` ended: its connection-scoped instances stop."""
        self.pool.connection_closed(scope_key, time.monotonic())
        self._perform()

    def restart(self, server: str | None) -> None:
        self.pool.restart(server, time.monotonic())
        self._perform()
