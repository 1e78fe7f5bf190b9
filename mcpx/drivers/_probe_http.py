"""Run the era probe (``mcpx.core.probe``) against a server at an HTTP URL.

The driver half of ``EraProbe`` for HTTP (spec/era-probe.md, "The order",
HTTP steps): each ``HttpRequest`` or ``OpenSse`` the machine asks for is one
HTTP/1.1 exchange on a connection of its own (h11 frames it; anyio moves the
bytes), whose head and body are reported back as ``HttpAnswered`` and
``HttpBody`` under the action's token, or ``TransportClosed`` when the
connection fails first.  ``CloseResponse`` cancels that exchange (closing its
socket).  The loop is the one every driver runs: drain actions → perform
them → wait for an event or the machine's deadline → feed it.

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

import contextlib
import os
import time
from collections.abc import Sequence

import anyio
import anyio.abc
import h11

from ..core.http_client import HttpClientConfig
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

__all__ = ["probe_http"]

_MAX_HEAD = 64 * 1024  # bytes of an answer's head; more is a broken answer
_READ = 65536


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
    send, receive = anyio.create_memory_object_stream[ProbeEvent](256)
    scopes: dict[int, anyio.CancelScope] = {}
    finished: set[int] = set()
    extra = tuple(headers)

    async def exchange(
        token: int, method: str, target_url: str, request_headers: Sequence[tuple[str, str]], body: bytes
    ) -> None:
        with scopes.setdefault(token, anyio.CancelScope()):
            event = await _exchange(
                token, method, target_url, (*request_headers, *extra), body, user_agent, send
            )
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                if event is not None:
                    await send.send(event)
        finished.add(token)

    outcome: ProbeDone | ProbeFailed | None = None
    after: list[int] = []  # requests the machine sent with its outcome (notifications/initialized)
    async with anyio.create_task_group() as tg:
        probe.start(time.monotonic())
        while True:
            for action in probe.next_actions():
                if isinstance(action, HttpRequest):
                    tg.start_soon(
                        exchange, action.token, action.method, action.path, action.headers, action.body
                    )
                    after.append(action.token)
                elif isinstance(action, OpenSse):
                    tg.start_soon(exchange, action.token, "GET", action.path, action.headers, b"")
                elif isinstance(action, CloseResponse):
                    scopes.setdefault(action.token, anyio.CancelScope()).cancel()
                elif isinstance(action, ProbeDone | ProbeFailed):
                    outcome = action
            if outcome is not None:
                break
            after.clear()
            deadline = probe.get_timer()
            event: ProbeEvent | None = None
            with anyio.move_on_after(max(0.0, (deadline or time.monotonic() + 60) - time.monotonic())):
                event = await receive.receive()
            now = time.monotonic()
            if event is not None:
                probe.receive(event, now)
            elif deadline is not None and now >= deadline:
                probe.handle_timer(now)
        # After the outcome: let notifications/initialized arrive, then end what nobody adopts.
        with anyio.move_on_after(config.timeout):
            while not all(token in finished for token in after):
                with anyio.move_on_after(0.05):
                    await receive.receive()
        if isinstance(outcome, ProbeDone) and outcome.era == "legacy" and outcome.session_id is not None:
            await _end_session(url, outcome.session_id, outcome.revision, extra, user_agent, config.timeout)
        tg.cancel_scope.cancel()
    send.close()
    receive.close()
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
) -> None:
    """``DELETE`` the legacy session the probe opened; a refusal (405: the server keeps it) is fine."""
    headers = [("Mcp-Session-Id", session_id)]
    if revision is not None and revision >= Revision.V2025_06_18:
        headers.append(("MCP-Protocol-Version", str(revision)))
    sink, drain = anyio.create_memory_object_stream[ProbeEvent](64)
    with anyio.move_on_after(timeout), sink, drain:

        async def read() -> None:
            async for _ in drain:
                pass

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            last = await _exchange(0, "DELETE", url, (*headers, *extra), b"", user_agent, sink)
            del last
            tg.cancel_scope.cancel()


async def _exchange(
    token: int,
    method: str,
    url: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
    user_agent: str,
    send: anyio.abc.ObjectSendStream[ProbeEvent],
) -> ProbeEvent | None:
    """One HTTP/1.1 request on a connection of its own; reports head and body, returns the last event.

    The last event (the end of the body, or ``TransportClosed``) is returned
    rather than sent, so the caller can mark the exchange finished first.
    """
    try:
        where = HttpClientConfig(url=url)
    except ValueError as exc:
        return TransportClosed(reason=str(exc), token=token)
    try:
        stream: anyio.abc.ByteStream
        if where.tls:
            stream = await anyio.connect_tcp(where.host, where.port, tls=True)
        else:
            stream = await anyio.connect_tcp(where.host, where.port)
    except OSError as exc:
        return TransportClosed(
            reason=f"could not connect to {where.authority}: {exc.strerror or exc}", token=token
        )
    async with stream:
        conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
        request_headers = [
            ("Host", where.authority),
            ("User-Agent", user_agent),
            *headers,
            ("Connection", "close"),
        ]
        if body or method in ("POST", "PUT"):
            request_headers.append(("Content-Length", str(len(body))))
        try:
            data = conn.send(h11.Request(method=method, target=where.target, headers=request_headers)) or b""
            if body:
                data += conn.send(h11.Data(data=body)) or b""
            data += conn.send(h11.EndOfMessage()) or b""
            await stream.send(data)
        except h11.LocalProtocolError as exc:
            return TransportClosed(reason=f"mcpx could not write the request: {exc}", token=token)
        except (OSError, anyio.BrokenResourceError) as exc:
            return TransportClosed(reason=f"the connection failed: {exc}", token=token)
        headed = False
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                return TransportClosed(reason=f"a malformed HTTP answer ({exc})", token=token)
            if event is h11.NEED_DATA:
                try:
                    chunk = await stream.receive(_READ)
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    chunk = b""
                conn.receive_data(chunk)
                continue
            if isinstance(event, h11.Response):
                answer_headers = tuple(
                    (name.decode("latin-1"), value.decode("latin-1")) for name, value in event.headers
                )
                await send.send(
                    HttpAnswered(
                        token=token, status=event.status_code, headers=answer_headers, complete=False
                    )
                )
                headed = True
            elif isinstance(event, h11.Data):
                await send.send(HttpBody(token=token, data=bytes(event.data)))
            elif isinstance(event, h11.EndOfMessage):
                return HttpBody(token=token, data=b"")
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                why = "the server closed the connection" + ("" if headed else " without answering")
                return TransportClosed(reason=why, token=token)
