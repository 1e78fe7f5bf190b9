"""Run the era probe (``mcpx.core.probe``) against a server at an HTTP URL.

The driver half of ``EraProbe`` for HTTP (spec/era-probe.md, "The order",
HTTP steps).  Each ``HttpRequest`` or ``OpenSse`` the machine asks for is a
raw exchange of the client's own HTTP binding (``HttpClientConnection.exchange``:
the same connections, h11 framing and bounds as every other request mcpx
makes; one binding per origin the probe reaches), whose head and body are
reported back as ``HttpAnswered`` and ``HttpBody`` under the action's token,
or ``TransportClosed`` when the exchange fails first.  ``CloseResponse`` drops
that exchange (closing its connection).  The loop is the one every driver
runs: drain actions → perform them → wait for an event or the machine's
deadline → feed it.

This includes the fallback the machine asks for when Streamable HTTP is not
there: the GET for a 2024-11-05 HTTP+SSE stream (MCP 2024-11-05, Transports
→ "HTTP with SSE") and its ``endpoint`` event.

What this driver does after the outcome, since nothing adopts the probed
connection yet (``mcpx call`` connects afresh with what the probe found):

* ``notifications/initialized`` (queued by the machine with a legacy
  outcome) is sent and its answer awaited, bounded by the probe timeout;
* a legacy session the probe opened is ended with ``DELETE`` (Streamable
  HTTP: a client that no longer needs its session should say so);
* an HTTP+SSE stream the probe opened is closed (that ends its session).

``probe_http`` starts from the era cache at ``cache_path`` and records the
outcome there, under the same key rules as stdio (the URL, normalised).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.abc

from ..core.http_client import (
    ExchangeData,
    ExchangeFailed,
    ExchangeHead,
    HttpClientConfig,
    HttpClientConnection,
)
from ..core.probe import (
    CloseResponse,
    EraCache,
    EraProbe,
    HttpAnswered,
    HttpBody,
    HttpRequest,
    OpenSse,
    ProbeConfig,
    ProbeDone,
    ProbeEvent,
    ProbeFailed,
    TransportClosed,
)
from ..core.revisions import Revision
from ._eracache import load_era_cache, record_outcome
from ._http_transport import SocketTransport

__all__ = ["probe_http"]


class _Exchanges(SocketTransport):
    """The sockets of one origin's binding; what its raw exchanges bring goes to ``report`` as probe events."""

    def __init__(
        self, http: HttpClientConnection, tg: anyio.abc.TaskGroup, report: Callable[[ProbeEvent], None]
    ) -> None:
        super().__init__(http, tg)
        self.http = http
        self.report = report

    def act(self, action: Any) -> None:
        if isinstance(action, ExchangeHead):
            self.report(
                HttpAnswered(token=action.token, status=action.status, headers=action.headers, complete=False)
            )
        elif isinstance(action, ExchangeData):
            self.report(HttpBody(token=action.token, data=action.data))
        elif isinstance(action, ExchangeFailed):
            self.report(TransportClosed(reason=action.reason, token=action.token))

    async def exchange(
        self, token: int, method: str, target: str, headers: Sequence[tuple[str, str]], body: bytes
    ) -> None:
        async with self.lock:
            self.http.exchange(token, method, target, headers, body, now=self.clock())
            await self.flush()

    async def drop(self, token: int) -> None:
        async with self.lock:
            self.http.drop_exchange(token)
            await self.flush()


def _last(event: ProbeEvent) -> int | None:
    """The token of the exchange ``event`` ends (its body's end, or its failure), else ``None``."""
    if isinstance(event, TransportClosed) or (isinstance(event, HttpBody) and not event.data):
        return event.token
    return None


async def probe_http(
    url: str,
    config: ProbeConfig,
    *,
    sse_url: str | None = None,
    headers: Sequence[tuple[str, str]] = (),
    cache_path: str | os.PathLike[str] | None = None,
    user_agent: str = "mcpx",
) -> ProbeDone | ProbeFailed:
    """Probe the MCP server at ``url``; the outcome (also written to the cache, if given).

    ``sse_url`` is where to look for a 2024-11-05 HTTP+SSE stream (``url``
    itself by default, as the probe's rules say); ``headers`` (auth) go on
    every request.  ``ValueError`` when ``url`` is not an http(s) URL.
    """
    HttpClientConfig(url=url)  # the same URL rules as connect_http: raises ValueError
    key = EraCache.key({"url": url})
    cache = load_era_cache(cache_path) if cache_path is not None else EraCache()
    probe = EraProbe(config, transport="http", path=url, sse_path=sse_url, cached=cache.get(key))
    events: list[ProbeEvent] = []
    arrived = anyio.Event()
    finished: set[int] = set()  # exchanges whose answer ended, or failed
    extra = tuple(headers)

    def report(event: ProbeEvent) -> None:
        events.append(event)
        token = _last(event)
        if token is not None:
            finished.add(token)
        arrived.set()

    async with anyio.create_task_group() as tg:
        origins: dict[tuple[bool, str, int], _Exchanges] = {}  # one binding per origin
        where: dict[int, _Exchanges] = {}  # exchange token -> its origin's binding

        async def start(
            token: int, method: str, target_url: str, request_headers: Sequence[tuple[str, str]], body: bytes
        ) -> None:
            try:
                target = HttpClientConfig(url=target_url, headers=extra, user_agent=user_agent)
            except ValueError as exc:
                report(TransportClosed(reason=str(exc), token=token))
                return
            origin = (target.tls, target.host, target.port)
            transport = origins.get(origin)
            if transport is None:
                transport = origins[origin] = _Exchanges(HttpClientConnection(target), tg, report)
            where[token] = transport
            await transport.exchange(token, method, target.target, request_headers, body)

        def take() -> list[ProbeEvent]:
            taken = events[:]
            events.clear()
            return taken

        outcome: ProbeDone | ProbeFailed | None = None
        after: list[int] = []  # requests the machine sent with its outcome (notifications/initialized)
        probe.start(time.monotonic())
        while True:
            for action in probe.next_actions():
                if isinstance(action, HttpRequest):
                    await start(action.token, action.method, action.path, action.headers, action.body)
                    after.append(action.token)
                elif isinstance(action, OpenSse):
                    await start(action.token, "GET", action.path, action.headers, b"")
                elif isinstance(action, CloseResponse) and action.token in where:
                    await where[action.token].drop(action.token)
                elif isinstance(action, ProbeDone | ProbeFailed):
                    outcome = action
            if outcome is not None:
                break
            after.clear()
            deadline = probe.get_timer()
            if not events:
                with anyio.move_on_after(max(0.0, (deadline or time.monotonic() + 60) - time.monotonic())):
                    await arrived.wait()
            arrived = anyio.Event()  # report() sets the new one: it reads the name when called
            now = time.monotonic()
            taken = take()
            for event in taken:
                probe.receive(event, now)
            if not taken and deadline is not None and now >= deadline:
                probe.handle_timer(now)
        # After the outcome: let notifications/initialized arrive, then end what nobody adopts.
        with anyio.move_on_after(config.timeout):
            while not all(token in finished for token in after):
                await arrived.wait()
                arrived = anyio.Event()
        if isinstance(outcome, ProbeDone) and outcome.era == "legacy" and outcome.session_id is not None:
            await _end_session(
                url, outcome.session_id, outcome.revision, extra, user_agent, config.timeout, tg
            )
        for transport in origins.values():
            await transport.close_all()
        tg.cancel_scope.cancel()
    assert outcome is not None  # the loop ends only with one
    if cache_path is not None:  # into the file as it is now: what other probes saved meanwhile stays
        record_outcome(cache_path, key, outcome, time.time())
    return outcome


async def _end_session(
    url: str,
    session_id: str,
    revision: Revision | None,
    extra: tuple[tuple[str, str], ...],
    user_agent: str,
    timeout: float,
    tg: anyio.abc.TaskGroup,
) -> None:
    """``DELETE`` the legacy session the probe opened; a refusal (405: the server keeps it) is fine."""
    headers = [("Mcp-Session-Id", session_id)]
    if revision is not None and revision >= Revision.V2025_06_18:
        headers.append(("MCP-Protocol-Version", str(revision)))
    config = HttpClientConfig(url=url, headers=extra, user_agent=user_agent)
    ended = anyio.Event()

    def report(event: ProbeEvent) -> None:
        if _last(event) is not None:  # the answer ended, or the exchange failed
            ended.set()

    transport = _Exchanges(HttpClientConnection(config), tg, report)
    with anyio.move_on_after(timeout):
        await transport.exchange(0, "DELETE", config.target, headers, b"")
        await ended.wait()
    await transport.close_all()
