"""``mcpx.client``: talk to one MCP server from async Python (asyncio or trio, through anyio).

A thin driver around the pure ``ClientSession`` (``mcpx.core.client_session``): it
spawns the server (stdio), moves bytes, and turns the session's actions into
awaited results.  Both eras, one API::

    async with connect_stdio(["python", "-m", "some_server"], resolver=answer) as client:
        tools = await client.list_tools()
        result = await client.call_tool("echo", {"text": "hi"})

``resolver(method, params)`` answers the server's questions —
``elicitation/create``, ``sampling/createMessage``, ``roots/list`` — whether a
legacy server sent them as requests or a 2026-07-28 server answered
``input_required``: the same function, the same arguments (spec/client.md §4).
The client declares only the capabilities it is given, so a server never asks
what nobody can answer.

The spawned server runs without a shell; its stderr is kept, bounded, for
error messages; closing the client closes the server's stdin, waits, then
terminates and finally kills it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import anyio
import anyio.abc
import orjson

from ..core import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, LocalProtocolError, Revision, Send, Trace
from ..core.client_lists import LIST_KEYS, ListCache, ListenBackoff, Paging, listen_filter
from ..core.client_session import (
    AbandonStream,
    ClientSession,
    Completed,
    Failed,
    InputRequired,
    MessageTooLarge,
    Progress,
    Ready,
    ServerNotification,
    ServerRequest,
    ServerRequestCancelled,
)
from ..core.framing import DEFAULT_MAX_LINE, LineReader
from ..core.http_client import (
    HttpClientConfig,
    HttpClientConnection,
    tool_header_params,
)
from ..core.sse_client import SseClientConfig, SseClientConnection
from ..core.upstream_auth import UpstreamAuth
from ..drivers import _batch
from ..drivers._http_transport import HttpTransport
from ..drivers._probe_stdio import StdioHandover
from ..drivers._process import open_server_process, signal_group, stop_process
from ..drivers._sse_transport import SseTransport
from ..drivers._stderr import StderrLog
from ..drivers._stdio_streams import transport_write_nowait

__all__ = [
    "Client",
    "McpCallError",
    "Resolver",
    "RoundResolver",
    "UpstreamLink",
    "connect_http",
    "connect_sse",
    "connect_stdio",
]

Resolver = Callable[[str, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]
"""Answers one server question, ``(method, params) -> result``; raising ``McpCallError`` refuses it."""
RoundResolver = Callable[[Mapping[str, Any]], Awaitable[Mapping[str, Any]]]
"""Answers a whole 2026-07-28 input round for one call: ``inputRequests`` by key -> responses by key.

Raising ``McpCallError`` ends the call with that error as it is (a
gateway relays its host's refusal this way).
"""
CLIENT_INFO = {"name": "mcpx", "version": "0.1.0"}
STDERR_KEPT = 64 * 1024
HTTP_CLOSE_TIMEOUT = 2.0  # closing waits this long for the answer to DELETE: the server may be gone


def _refused_for_expiry(error: Mapping[str, Any]) -> bool:
    """The HTTP binding's error for a request refused because its session was gone (never processed)."""
    data = error.get("data")
    return isinstance(data, Mapping) and data.get("sessionExpired") is True


def _describe(error: Mapping[str, Any]) -> str:
    """A JSON-RPC error as one line: code, message, and the versions a ``-32022`` lists."""
    text = f"error {error.get('code')} ({error.get('message')})"
    data = error.get("data")
    if isinstance(data, Mapping) and isinstance(data.get("supported"), list):
        listed = ", ".join(str(v) for v in data["supported"])
        text += f"; the server speaks {listed}"
    return text


def _unanswered(key: str, method: object, refusal: McpCallError) -> dict[str, Any]:
    """The error of a 2026-07-28 call whose input round the client could not complete."""
    asked = f" ({method})" if isinstance(method, str) else ""
    data: dict[str, Any] = {"inputKey": key}
    if isinstance(method, str):
        data["method"] = method
    if refusal.data is not None:
        data["reason"] = refusal.data
    return {
        "code": refusal.code,
        "message": (
            f"the client did not answer the server's question {key!r}{asked}: {refusal.message}; "
            "the call was not retried (2026-07-28 asks for every requested input before a retry)"
        ),
        "data": data,
    }


class McpCallError(Exception):
    """The server answered a call with a JSON-RPC error (or the connection failed it)."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        self.code = int(error.get("code", INTERNAL_ERROR))
        self.message = str(error.get("message", "error"))
        self.data = error.get("data")
        super().__init__(f"{self.message} ({self.code})")


class UpstreamLink(Protocol):
    """Who drives a linked client's session instead of the client (the gateway's router, ``Client.link``).

    The client still moves the bytes: what it reads goes to ``received``
    (one decoded JSON value at a time) and the end of its input to ``lost``;
    after using its session itself (a request of its own, a cancel, an
    answer) it calls ``drain``.  Whatever the link decides to write comes
    back through ``Client.send_soon``, and the outcomes of the client's own
    requests through ``Client.take``.
    """

    def received(self, obj: Any) -> None: ...

    def drain(self) -> None: ...

    def lost(self, reason: str) -> None: ...


class _Pending:
    __slots__ = ("event", "outcome")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.outcome: Completed | Failed | None = None


class Client:
    """One connection to one server; create it with ``connect_stdio``."""

    def __init__(
        self,
        session: ClientSession,
        write: Callable[[bytes], Awaitable[None]],
        tg: anyio.abc.TaskGroup,
        resolver: Resolver | None,
        *,
        send: Callable[[Send], Awaitable[None]] | None = None,
        abandon: Callable[[int], Awaitable[None]] | None = None,
        lock: anyio.Lock | None = None,
        on_tools: Callable[[list[Any]], list[Any]] | None = None,
    ) -> None:
        """A client over ``session``, its bytes written by ``write``; the ``connect_*`` functions build one.

        ``send``/``abandon``: a transport with a stream per request (HTTP)
        takes whole ``Send`` actions, and closes a stream to cancel.
        ``lock``: the one lock the session shares with such a transport's
        binding.  ``on_tools``: what a listed tool list becomes (HTTP learns
        each tool's ``x-mcp-header`` parameters there, and drops tools whose
        annotations are invalid).
        """
        self.session = session
        self._write = write
        self._send = send
        self._abandon = abandon
        self._on_tools = on_tools
        self._tg = tg
        self._resolver = resolver
        self._pending: dict[int, _Pending] = {}
        self._answering: dict[Any, anyio.CancelScope] = {}  # legacy server requests being answered
        self._rounds: dict[int, anyio.CancelScope] = {}  # 2026-07-28 input rounds being answered, by handle
        self._round_resolvers: dict[int, RoundResolver] = {}  # a call's own, by handle (request(on_round=))
        self._progress: dict[int, Callable[[Progress], None]] = {}
        self.notifications: deque[ServerNotification] = deque(maxlen=1000)
        self.on_notification: Callable[[ServerNotification], None] | None = None  # each one, as it arrives
        self.ready = anyio.Event()
        self.ready_info: Ready | None = None
        self.init_error: Mapping[str, Any] | None = None  # the server's answer when initialize failed
        self.stderr = bytearray()  # the server's stderr, the last STDERR_KEPT bytes
        self.stderr_log: StderrLog | None = None  # a spawned server's stderr as lines, and its exit code
        self.call_timeout = 120.0
        self.stderr_done = anyio.Event()  # the server's stderr ended (its last words are in)
        self._lock = lock if lock is not None else anyio.Lock()
        self._lists = ListCache()  # cached_list's (mcpx/core/client_lists.py)
        self._discovered: Mapping[str, Any] | None = None  # 2026-07-28 capabilities (server/discover)
        # Subscribed resource URIs: 2026-07-28 puts them in the listen filter; legacy re-sends
        # them to a renewed HTTP session.
        self._subscribed: set[str] = set()
        self._listening = False
        self._listen_open = False  # a subscriptions/listen request is in flight (it lasts: not a call)
        self._listen_wake = anyio.Event()
        # Streamable HTTP, legacy: the server forgot the session (404); ``renew`` opens a new one.
        self.expired = False
        self.renew: Callable[[], Awaitable[None]] | None = None
        self._renewing = anyio.Lock()
        # Linked (``link``): the session is driven by the link; writes go through an outbox.
        self._link: UpstreamLink | None = None
        self._outbox: list[bytes] = []
        self._outbox_wake: anyio.Event | None = None
        self._write_nowait: Callable[[bytes], bool] | None = None  # the pipe's, where anyio exposes one
        self._kicking = False  # a _write_now is scheduled
        self._pipe: asyncio.StreamReader | None = None  # the server's stdout, where anyio exposes it
        self._pipe_transport: asyncio.ReadTransport | None = None  # the transport that reads it, likewise
        self._lines: LineReader | None = None  # the reader task's, shared with _take_pushed

    # -- what callers use ------------------------------------------------------------

    @property
    def revision(self) -> Revision | None:
        return self.session.revision

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        on_progress: Callable[[Progress], None] | None = None,
        timeout: float | None = None,
        retry: bool = True,
        log_level: str | None = None,
        capabilities: Mapping[str, Any] | None = None,
        on_round: RoundResolver | None = None,
    ) -> Mapping[str, Any]:
        """Any request; its result, or ``McpCallError``.

        ``log_level`` is the 2026-07-28 per-request level (ignored by legacy
        sessions, whose level is set once with ``logging/setLevel``).
        ``capabilities`` and ``on_round`` fit one 2026-07-28 request to
        whoever it is made for (both ignored by legacy sessions, which
        declared capabilities once and ask through the connection's
        ``resolver``): the client capabilities this request declares instead
        of the connection's, and the resolver of this call's input rounds,
        answered whole under the server's keys instead of question by
        question through the connection's ``resolver``.

        Cancelling the caller cancels upstream.  ``timeout`` (default: the
        client's ``call_timeout``; a caller may lower it, never raise it)
        bounds the wait: past it the request is cancelled upstream and
        ``McpCallError`` says so.  A legacy HTTP session the server forgot
        (404) is replaced by a new one, and a request it refused for that is
        sent again once (``retry``).
        """
        limit = self.call_timeout if timeout is None else min(timeout, self.call_timeout)
        if self.expired and self.renew is not None:
            async with self._renewing:
                if self.expired:  # not renewed by a request that waited on the same lock
                    await self.renew()
        try:
            level = log_level if self.session.modern else None
            handle = self.session.request(
                method, params, progress=on_progress is not None, log_level=level, capabilities=capabilities
            )
        except LocalProtocolError as exc:
            raise McpCallError({"code": INTERNAL_ERROR, "message": f"{exc}; {self.last_words()}"}) from None
        except MessageTooLarge as exc:  # longer as sent than the server takes: the caller's to fix
            data = {"kind": "too-large", "size": exc.size, "limit": exc.limit}
            raise McpCallError(
                {"code": INVALID_PARAMS, "message": f"Invalid params: {exc}", "data": data}
            ) from None
        except ValueError as exc:  # params no JSON text can carry: the caller's to fix
            raise McpCallError({"code": INVALID_PARAMS, "message": f"Invalid params: {exc}"}) from None
        pending = self._pending[handle] = _Pending()
        if on_progress is not None:
            self._progress[handle] = on_progress
        if on_round is not None:
            self._round_resolvers[handle] = on_round
        try:
            await self._flush()
            with anyio.move_on_after(limit):
                await pending.event.wait()
            if pending.outcome is None:
                self.session.cancel(handle, f"no answer within {limit:g}s")
                await self._flush()
                raise McpCallError(
                    {
                        "code": INTERNAL_ERROR,
                        "message": f"{method}: no answer from the server within {limit:g}s; cancelled",
                    }
                )
        except BaseException:
            if pending.outcome is None:
                # The connection may be closing under us (the caller was cancelled by the
                # same shutdown): then there is nothing left to cancel on the wire.
                with anyio.CancelScope(shield=True), contextlib.suppress(LocalProtocolError):
                    self.session.cancel(handle, "the caller gave up")
                    await self._flush()
            raise
        finally:
            self._pending.pop(handle, None)
            self._progress.pop(handle, None)
            self._round_resolvers.pop(handle, None)
            answering = self._rounds.pop(handle, None)
            if answering is not None:  # the caller gave up during an input round: stop asking
                answering.cancel()
        outcome = pending.outcome
        if (
            isinstance(outcome, Failed)
            and _refused_for_expiry(outcome.error)
            and self.renew is not None
            and retry
        ):
            # The server forgot the session and did not process this request:
            # a new session, and the same request once more.
            return await self.request(
                method,
                params,
                on_progress=on_progress,
                timeout=timeout,
                retry=False,
                log_level=log_level,
                capabilities=capabilities,
                on_round=on_round,
            )
        if isinstance(outcome, Failed):
            if self.session.closed:
                error = dict(outcome.error)
                error["message"] = f"{error.get('message')}; {self.last_words()}"
                raise McpCallError(error)
            raise McpCallError(outcome.error)
        assert isinstance(outcome, Completed)
        return outcome.result

    async def _handshake(self, timeout: float, who: str, *, stderr: bool = False) -> McpCallError | None:
        """Legacy: send ``initialize`` and wait for ``Ready``; the error to raise when it did not come."""
        self.session.start()
        await self._flush()
        with anyio.move_on_after(timeout):
            await self.ready.wait()
        if self.ready_info is not None:
            return None
        if self.init_error is not None:
            why = f"refused initialize: {_describe(self.init_error)}"
        elif self.ready.is_set():
            why = "refused initialize"
        else:
            why = f"did not answer initialize within {timeout:g}s"
        message = f"initialize failed: {who} {why}"
        if stderr:  # a spawned server's last words usually say why
            message += f"; {self.last_words()}"
        return McpCallError({"code": INTERNAL_ERROR, "message": message})

    def last_words(self) -> str:
        """Why a spawned server is gone, in its words: its exit code, and the end of its stderr."""
        tail = self.stderr.decode(errors="replace")[-1000:].strip()
        said = f"the server's last words: {tail}" if tail else "the server said nothing on stderr"
        code = self.stderr_log.exit_code if self.stderr_log is not None else None
        return f"it exited with code {code}; {said}" if code is not None else said

    async def list_all(self, method: str, key: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Every page of a ``*/list`` method (``nextCursor`` followed to the end)."""
        items, _ = await self._pages(method, key, params)
        return items

    async def _pages(
        self, method: str, key: str, params: Mapping[str, Any] | None = None
    ) -> tuple[list[Any], float]:
        """Every page's items, and how long they may be kept (``Paging``: the shortest ``ttlMs``)."""
        paging = Paging(method, key, modern=self.session.modern, params=params)
        try:
            while (page_params := paging.next_params()) is not None:
                paging.take(await self.request(method, page_params))
        except LocalProtocolError as exc:
            raise McpCallError({"code": INTERNAL_ERROR, "message": str(exc)}) from None
        return paging.items, paging.keep

    async def list_tools(self) -> list[Mapping[str, Any]]:
        tools, _ = await self._listed_tools()
        return tools

    async def _listed_tools(self) -> tuple[list[Any], float]:
        tools, keep = await self._pages("tools/list", "tools")
        return (self._on_tools(tools) if self._on_tools is not None else tools), keep

    # -- cached lists, and what drops them (spec/client.md §5) --------------------------

    async def cached_list(self, method: str) -> list[Any]:
        """A ``*/list`` result kept until the server says the list changed (``list_changed``).

        A 2026-07-28 list is kept no longer than its ``ttlMs`` says (not at
        all for 0).  A change announced while the list was being fetched
        wins: that answer is returned but not kept.
        """
        items, _ = await self.kept_list(method)
        return items

    async def kept_list(self, method: str) -> tuple[list[Any], float]:
        """``cached_list``, and until when (``time.monotonic()``) the answer may be used without asking again.

        ``inf`` for a list kept until the server says it changed (a legacy
        server's); the moment it arrived for ``ttlMs: 0``, which 2026-07-28
        defines as "immediately stale" (``CacheableResult.ttlMs``: the client
        MAY re-fetch every time the result is needed); ``-inf`` when a change
        was announced while it was being fetched.
        """
        key = LIST_KEYS.get(method)
        if key is None:
            raise ValueError(f"{method} is not a list mcpx keeps; one of {', '.join(LIST_KEYS)}")
        kept = self._lists.kept(method, time.monotonic())
        if kept is not None:
            return kept
        generation = self._lists.generation
        if method == "tools/list":
            items, keep = await self._listed_tools()
        else:
            items, keep = await self._pages(method, key)
        return self._lists.store(method, items, keep, generation, time.monotonic())

    def kept_now(self, method: str) -> list[Any] | None:
        """What ``cached_list`` would answer without asking the server, or ``None`` when it would ask."""
        kept = self._lists.kept(method, time.monotonic())
        return kept[0] if kept is not None else None

    # -- subscriptions -------------------------------------------------------------------

    async def server_capabilities(self) -> Mapping[str, Any]:
        """What the server declared: from ``initialize``, or (2026-07-28) ``server/discover``, asked once."""
        if not self.session.modern:
            return self.session.server_capabilities
        if self._discovered is None:
            result = await self.request("server/discover")
            caps = result.get("capabilities")
            self._discovered = caps if isinstance(caps, Mapping) else {}
        return self._discovered

    async def subscribe(self, uri: str) -> None:
        """Updates of resource ``uri``: ``resources/subscribe`` (legacy), or the listen filter (2026-07-28).

        Legacy subscriptions are remembered and sent again to a session that
        replaces an expired one (``resubscribe``).
        """
        if not self.session.modern:
            await self.request("resources/subscribe", {"uri": uri})
            self._subscribed.add(uri)
            return
        self._subscribed.add(uri)
        self._listen_wake.set()

    async def unsubscribe(self, uri: str) -> None:
        if not self.session.modern:
            self._subscribed.discard(uri)
            await self.request("resources/unsubscribe", {"uri": uri})
            return
        self._subscribed.discard(uri)
        self._listen_wake.set()

    async def resubscribe(self) -> None:
        """Legacy: send ``resources/subscribe`` again for every URI subscribed (a renewed session knows none).

        A URI the new session refuses is forgotten; a session that expires
        again meanwhile keeps the rest for its own renewal.
        """
        for uri in sorted(self._subscribed):
            if self.expired:
                return
            try:
                await self.request("resources/subscribe", {"uri": uri}, retry=False)
            except McpCallError:
                if not self.expired:
                    self._subscribed.discard(uri)

    async def start_listening(self) -> None:
        """2026-07-28: keep one ``subscriptions/listen`` open, reopened when it ends or its filter changes.

        Its filter asks for what the server declared (list changes) and the
        resources subscribed here; notifications it carries land in
        ``notifications`` and drop cached lists.  A legacy server sends the
        same notifications unsolicited, so there is nothing to open.
        """
        if not self.session.modern or self._listening:
            return
        self._listening = True
        caps = await self.server_capabilities()
        self._tg.start_soon(self._listen_loop, caps)

    # A listen the server ends sooner than this counts as a failure for the back-off
    # (ListenBackoff): a server that answers every listen at once is not asked again at once.
    listen_quick = 5.0
    listen_delays = (1.0, 30.0)  # the first wait after a failure, and the longest

    async def _listen_loop(self, caps: Mapping[str, Any]) -> None:
        first, longest = self.listen_delays
        backoff = ListenBackoff(first=first, longest=longest, quick=self.listen_quick)
        while not self.session.closed:
            wake = self._listen_wake = anyio.Event()
            wanted = listen_filter(caps, self._subscribed)
            if not wanted:
                await wake.wait()
                continue
            try:
                handle = self.session.request("subscriptions/listen", {"notifications": wanted})
            except LocalProtocolError:
                return  # the connection ended
            pending = self._pending[handle] = _Pending()
            opened = anyio.current_time()
            self._listen_open = True
            try:
                await self._flush()
                async with anyio.create_task_group() as tg:

                    async def until(event: anyio.Event) -> None:
                        await event.wait()
                        tg.cancel_scope.cancel()

                    tg.start_soon(until, pending.event)
                    tg.start_soon(until, wake)
            finally:
                self._listen_open = False
            self._pending.pop(handle, None)
            if pending.outcome is None:  # the filter changed: this stream goes, a new one opens
                self.session.cancel(handle, "the subscription filter changed")
                await self._flush()
            elif not self.session.closed:
                # Ended: at once after a stream that lasted; refused, dropped, or ended at
                # once, again less often each time (sooner if the filter changes meanwhile).
                wait = backoff.ended(
                    completed=isinstance(pending.outcome, Completed), lasted=anyio.current_time() - opened
                )
                if wait > 0:
                    with anyio.move_on_after(wait):
                        await wake.wait()

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
        return await self.request("tools/call", {"name": name, "arguments": dict(arguments or {})})

    # -- linked: the session driven from outside ---------------------------------------

    @property
    def linkable(self) -> bool:
        """Whether ``link`` may be used: one byte stream, and a session that will not be replaced.

        Streamable HTTP and HTTP+SSE write a request per stream and renew an
        expired session: those clients drive their own session.
        """
        return self._send is None and self._abandon is None and self.renew is None

    def link(self, link: UpstreamLink) -> None:
        """Hand the session to ``link`` from now on (the handshake is done); see ``UpstreamLink``.

        The client keeps reading and writing, and its own requests keep
        working: their outcomes come back through ``take``.
        """
        if not self.linkable:
            raise LocalProtocolError("only a client over one byte stream (stdio) can be linked")
        if self._link is not None:
            raise LocalProtocolError("this client is linked already")
        self._link = link
        self._tg.start_soon(self._write_outbox)
        if self._pipe is not None and self._lines is not None:
            self._take_pushed(self._pipe, self._lines)
        link.drain()

    def _take_pushed(self, pipe: asyncio.StreamReader, lines: LineReader) -> None:
        """Linked, on asyncio: each chunk the server writes is taken in the pipe's callback, as it arrives.

        The reader task then waits for the end of the server's output alone
        (what it was woken for already it still reads first, in order): no
        task wakes up per chunk.
        """

        def feed_data(data: bytes) -> None:
            if data:
                # What its answers cause is written once, at the end of the chunk; the answer to the
                # only call on it goes to its host at once.
                with _batch.reading(alone=self._calls_in_flight() <= 1 and data.count(b"\n") == 1):
                    self._take_chunk(lines, data)

        pipe.feed_data = feed_data  # type: ignore[method-assign,assignment]  # the protocol feeds it
        transport = self._pipe_transport
        if transport is not None and not transport.is_closing():
            # asyncio hands a subprocess's output to its protocol in a callback of its own (one
            # more pass of the loop per chunk); read straight from the pipe's transport instead.
            transport.set_protocol(_DirectPipe(feed_data, transport.get_protocol()))

    def _calls_in_flight(self) -> int:
        """The requests in flight on the session but an open listen (which lasts as long as the stream)."""
        return self.session.in_flight - self._listen_open

    def send_soon(self, payload: bytes) -> None:
        """Queue ``payload`` for the server (linked clients); ``kick`` writes what is queued."""
        self._outbox.append(payload)

    def kick(self) -> None:
        """Write what ``send_soon`` queued: now, if the pipe takes it at once, else from the writer task."""
        if not self._outbox or self._outbox_wake is None or self._kicking:
            return  # nothing queued, the writer task is writing (it takes the rest), or a write is due
        if self._write_nowait is not None:
            # At the end of the chunk being read (or once the loop has run what is ready): one
            # write for everything queued by then.  A server with other calls of ours in hand
            # waits for the loop's pass, which gathers what every connection read in it sends.
            self._kicking = True
            _batch.due(self._write_now, stream=True, busy=self._calls_in_flight() > 1)
            return
        self._wake_writer()

    def _write_now(self) -> None:
        self._kicking = False
        if not self._outbox or self._outbox_wake is None:
            return
        if self._write_nowait is not None and self._write_nowait(b"".join(self._outbox)):
            self._outbox.clear()
            return
        self._wake_writer()

    def _wake_writer(self) -> None:
        wake = self._outbox_wake
        if wake is not None:
            self._outbox_wake = None
            wake.set()

    def take(self, action: object) -> None:
        """An outcome of one of the client's own requests, or a notification, from its link."""
        self._event(action)

    async def _write_outbox(self) -> None:
        while True:
            if not self._outbox:
                wake = self._outbox_wake = anyio.Event()
                await wake.wait()
                continue
            chunks, self._outbox = self._outbox, []
            await self._write(b"".join(chunks))

    # -- the driver ---------------------------------------------------------------------

    async def _flush(self) -> None:
        """Carry out what the session queued (in order; one writer at a time)."""
        if self._link is not None:
            self._link.drain()
            return
        async with self._lock:
            await self.flush_held()

    async def flush_held(self) -> None:
        while True:
            actions = self.session.next_actions()
            if not actions:
                return
            for action in actions:
                await self._perform(action)

    async def _perform(self, action: object) -> None:
        if isinstance(action, Send):
            if self._send is not None:
                await self._send(action)
            else:
                await self._write(action.payload)
        elif isinstance(action, AbandonStream):
            if self._abandon is not None:
                await self._abandon(action.handle)
        else:
            self._event(action)

    def _event(self, action: object) -> None:
        """Everything the session says but its writes: outcomes, questions, notifications, readiness."""
        if isinstance(action, Completed | Failed):
            pending = self._pending.get(action.handle)
            if pending is not None:
                pending.outcome = action
                pending.event.set()
        elif isinstance(action, InputRequired):
            scope = anyio.CancelScope()
            self._rounds[action.handle] = scope
            self._tg.start_soon(self._resolve_round, action, scope)
        elif isinstance(action, ServerRequest):
            scope = anyio.CancelScope()
            self._answering[action.request_id] = scope
            self._tg.start_soon(self._resolve_request, action, scope)
        elif isinstance(action, ServerRequestCancelled):
            withdrawn = self._answering.get(action.request_id)
            if withdrawn is not None:
                withdrawn.cancel()
        elif isinstance(action, Progress):
            callback = self._progress.get(action.handle)
            if callback is not None:
                callback(action)
        elif isinstance(action, ServerNotification):
            self._lists.changed(action.method)
            self.notifications.append(action)
            if self.on_notification is not None:
                self.on_notification(action)
        elif isinstance(action, Ready):
            self.ready_info = action
            self.ready.set()
        elif isinstance(action, Trace):
            pass  # traces are for the CLI's --trace
        if isinstance(action, Failed) and action.handle not in self._pending and not self.ready.is_set():
            self.init_error = action.error
            self.ready.set()  # initialize failed: wake whoever waits for Ready

    async def _answer(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """The resolver's answer to one question, whichever era asked it; else ``McpCallError``.

        The one place both eras' questions are answered: no resolver is
        ``-32601``; a resolver that raises ``McpCallError`` refuses with that
        error; any other exception (a bug in the resolver), or an answer that
        is not an object, is ``-32603`` naming it.  Cancellation passes through.
        """
        if self._resolver is None:
            raise McpCallError({"code": METHOD_NOT_FOUND, "message": f"this client cannot answer {method}"})
        try:
            result = await self._resolver(method, params)
        except McpCallError:
            raise
        except Exception as exc:  # the resolver broke: an error for whoever asked, not a dead connection
            raise McpCallError(
                {
                    "code": INTERNAL_ERROR,
                    "message": f"the client's resolver raised {type(exc).__name__}: {exc}",
                }
            ) from exc
        if not isinstance(result, Mapping):
            raise McpCallError(
                {"code": INTERNAL_ERROR, "message": f"the client's answer to {method} is not an object"}
            )
        return dict(result)

    async def _resolve_request(self, request: ServerRequest, scope: anyio.CancelScope) -> None:
        """Legacy: answer a server request; withdrawn (``scope`` cancelled) means nothing is sent."""
        with scope:
            try:
                result = await self._answer(request.method, request.params)
            except McpCallError as exc:
                self.session.answer_error(request.request_id, exc.code, exc.message, exc.data)
            else:
                self.session.answer(request.request_id, result)
            await self._flush()
        if request.request_id in self._answering:
            del self._answering[request.request_id]

    async def _resolve_round(self, round_: InputRequired, scope: anyio.CancelScope) -> None:
        """2026-07-28: answer every question of an input round, then send the retry.

        The call's own round resolver answers the round whole; otherwise the
        connection's resolver answers question by question.  The spec asks
        for every requested input before a retry, so an unanswered question
        ends the call (the rest are not asked) with an error naming why.
        When the caller gave up meanwhile (timeout, cancellation, the
        connection ended), ``scope`` is cancelled and nothing is sent.
        """
        handle = round_.handle
        responses: Mapping[str, Any] = {}
        refused: dict[str, Any] | None = None
        own = self._round_resolvers.get(handle)
        with scope:
            try:
                if own is not None:
                    responses = await self._answer_whole(own, round_.input_requests)
                else:
                    responses = await self._answer_each(round_.input_requests)
            except McpCallError as exc:
                refused = {"code": exc.code, "message": exc.message}
                if exc.data is not None:
                    refused["data"] = exc.data
        if self._rounds.get(handle) is scope:
            del self._rounds[handle]
        if scope.cancel_called or not self.session.awaiting_answers(handle):
            return  # the caller gave up, or the call ended: nobody waits for a retry
        if refused is not None:
            self.session.refuse_round(handle, refused)
        else:
            self.session.resume(handle, responses, request_state=round_.request_state)
        await self._flush()

    async def _answer_each(self, requests: Mapping[str, Any]) -> dict[str, Any]:
        """A round answered question by question by the connection's resolver; the first refusal ends it."""
        responses: dict[str, Any] = {}
        for key, item in requests.items():
            method = item.get("method") if isinstance(item, Mapping) else None
            params = item.get("params") if isinstance(item, Mapping) else None
            try:
                if not isinstance(method, str):
                    raise McpCallError({"code": INTERNAL_ERROR, "message": "the question names no method"})
                responses[key] = await self._answer(method, params if isinstance(params, Mapping) else {})
            except McpCallError as exc:
                raise McpCallError(_unanswered(key, method, exc)) from None
        return responses

    @staticmethod
    async def _answer_whole(resolve: RoundResolver, requests: Mapping[str, Any]) -> Mapping[str, Any]:
        """A round answered by the call's own resolver: its refusal as it is, anything else as -32603."""
        try:
            responses = await resolve(requests)
        except McpCallError:
            raise
        except Exception as exc:  # the resolver broke: an error for this call, not a dead connection
            raise McpCallError(
                {"code": INTERNAL_ERROR, "message": f"the round resolver raised {type(exc).__name__}: {exc}"}
            ) from exc
        missing = (
            sorted(set(requests) - set(responses)) if isinstance(responses, Mapping) else sorted(requests)
        )
        if missing:
            raise McpCallError(
                {
                    "code": INTERNAL_ERROR,
                    "message": f"the round resolver did not answer {', '.join(map(repr, missing))}; "
                    "the call was not retried (2026-07-28 asks for every requested input before a retry)",
                }
            )
        return responses

    async def _read(self, stream: anyio.abc.ByteReceiveStream, max_line: int) -> None:
        reader = self._lines = self._lines or LineReader(max_line)
        try:
            async for chunk in stream:
                with _batch.reading():  # what its answers cause is written once, at the end of the chunk
                    self._take_chunk(reader, chunk)
                if self._link is None:
                    await self._flush()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        with anyio.move_on_after(0.5):  # a dying server's stderr usually says why: wait for it
            await self.stderr_done.wait()
        if self._link is not None:
            self._link.lost(self.last_words())
            return
        self.session.receive_eof()
        await self._flush()

    def _take_chunk(self, reader: LineReader, chunk: bytes) -> None:
        """Each line of ``chunk`` to the session, or to the link."""
        link = self._link
        for event in reader.feed_raw(chunk):  # a line comes as its bytes: no Line object per answer
            if type(event) is bytes:
                try:
                    obj = orjson.loads(event)
                except orjson.JSONDecodeError:
                    continue  # a server's junk line: nothing to answer it with
                if link is not None:
                    link.received(obj)
                else:
                    self.session.receive_json(obj)
            # A LineTooLong is dropped; the call it belonged to times out or fails at EOF.


@contextlib.asynccontextmanager
async def connect_stdio(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    modern: bool = False,
    offer: Revision | None = None,
    capabilities: Mapping[str, Any] | None = None,
    resolver: Resolver | None = None,
    client_info: Mapping[str, Any] | None = None,
    max_line: int = DEFAULT_MAX_LINE,
    start_timeout: float = 30.0,
    call_timeout: float = 120.0,
    shutdown_grace: float = 2.0,
    answer_modern_requests: bool = False,
    max_rounds: int = 8,
    stderr_log: StderrLog | None = None,
    adopt: StdioHandover | None = None,
) -> AsyncIterator[Client]:
    """Spawn ``argv`` (no shell) and talk MCP to it over its stdin and stdout.

    ``adopt``: go on with the process the era probe started and settled
    (``probe_stdio_handing_over``) instead of spawning one: no second
    process, no second handshake; ``modern`` and ``offer`` must be what the
    probe found.  It is stopped at the end like a spawned one.

    Its stderr is read to the end, always, into ``client.stderr_log``
    (``stderr_log`` when given: the pool keeps one per instance), which also
    gets the exit code; a failed handshake says both.

    ``modern`` speaks 2026-07-28 (no handshake); otherwise ``initialize``
    offers ``offer`` (the newest legacy revision by default).
    ``answer_modern_requests`` answers requests a 2026-07-28 server sends
    anyway (that revision has none; by default they are dropped), under the
    legacy rules; ``max_rounds`` bounds the ``input_required`` rounds of one call.
    """
    session = ClientSession(
        client_info=client_info or CLIENT_INFO,
        capabilities=capabilities,
        modern=modern,
        offer=offer,
        newline=True,
        answer_modern_requests=answer_modern_requests,
        max_rounds=max_rounds,
        max_message=max_line,  # what mcpx takes from a peer, it sends no peer more than
    )
    full_env = {**os.environ, **env} if env is not None else None
    if adopt is not None:
        settled = adopt.outcome
        if (settled.era == "modern") != modern or settled.era == "legacy-sse":
            with anyio.CancelScope(shield=True):  # it is ours now, used or not
                await stop_process(adopt.process, shutdown_grace)
                await adopt.process.aclose()
            raise ValueError(f"connect_stdio(modern={modern}) cannot adopt a {settled.era} connection")
        process = adopt.process
    else:
        process = await open_server_process(argv, env=full_env, cwd=cwd)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr

    log = stderr_log if stderr_log is not None else StderrLog()

    async def keep_stderr(client: Client) -> None:  # drained, or a chatty server blocks on a full pipe
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in stderr:
                client.stderr.extend(chunk)
                del client.stderr[: max(0, len(client.stderr) - STDERR_KEPT)]
                log.feed(chunk, time.time())
        log.close(time.time())
        client.stderr_done.set()

    async def keep_exit_code() -> None:
        log.exit_code = await process.wait()

    async def write(data: bytes) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await stdin.send(data)

    write_nowait = _pipe_write_nowait(stdin)

    failure: McpCallError | None = None
    try:
        async with anyio.create_task_group() as tg:
            client = Client(session, write, tg, resolver)
            client._write_nowait = write_nowait
            client._pipe = _pipe_reader(stdout)
            client._pipe_transport = _stdout_transport(process)
            client._lines = LineReader(max_line)  # linked before its reader task runs, it is pushed to
            client.call_timeout = call_timeout
            client.stderr_log = log
            tg.start_soon(keep_stderr, client)
            tg.start_soon(keep_exit_code)
            if adopt is not None:  # what the probe settled, and what it read past its last answer
                settled = adopt.outcome
                if not modern and settled.revision is not None:
                    session.adopt_handshake(
                        revision=settled.revision,
                        capabilities=settled.capabilities or {},
                        server_info=settled.server_info or {},
                        instructions=settled.instructions,
                    )
                elif settled.capabilities is not None:
                    client._discovered = settled.capabilities
                if adopt.leftover:  # (b"" would be the end of input)
                    client._take_chunk(client._lines, adopt.leftover)
                await client._flush()
            tg.start_soon(client._read, stdout, max_line)
            if not modern and adopt is None:
                failure = await client._handshake(start_timeout, "the server", stderr=True)
            if failure is None:
                try:
                    yield client
                finally:
                    with anyio.CancelScope(shield=True):
                        await stop_process(process, shutdown_grace)
            tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                signal_group(process, signal.SIGKILL)
                await process.wait()
            await process.aclose()


def _pipe_write_nowait(stdin: anyio.abc.ByteSendStream) -> Callable[[bytes], bool] | None:
    """A write that does not wait, for a spawned server's stdin on asyncio (anyio's ``_stream``); else ``None``."""
    writer = getattr(stdin, "_stream", None)
    if not isinstance(writer, asyncio.StreamWriter):
        return None  # trio, or an anyio that wraps differently: the writer task writes
    return functools.partial(transport_write_nowait, writer.transport)


def _pipe_reader(stdout: anyio.abc.ByteReceiveStream) -> asyncio.StreamReader | None:
    """A spawned server's stdout as asyncio's ``StreamReader`` (anyio's ``_stream``); ``None`` elsewhere."""
    reader = getattr(stdout, "_stream", None)
    return reader if isinstance(reader, asyncio.StreamReader) else None


def _stdout_transport(process: anyio.abc.Process) -> asyncio.ReadTransport | None:
    """The read transport of a spawned server's stdout on asyncio (under anyio's ``_process``); else ``None``."""
    inner = getattr(process, "_process", None)
    transport = getattr(inner, "_transport", None)
    if not isinstance(transport, asyncio.SubprocessTransport):
        return None
    pipe = transport.get_pipe_transport(1)
    return pipe if isinstance(pipe, asyncio.ReadTransport) else None


class _DirectPipe(asyncio.Protocol):
    """A subprocess's stdout read straight into ``feed``; its end still reaches the subprocess protocol.

    What asyncio's own protocol had already scheduled when this one took
    over runs first (it was queued before any later read), so the order of
    the chunks holds.
    """

    def __init__(self, feed: Callable[[bytes], None], inner: asyncio.BaseProtocol) -> None:
        self.feed = feed
        self.inner = inner

    def data_received(self, data: bytes) -> None:
        self.feed(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if isinstance(self.inner, asyncio.Protocol) else None

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)


class _SessionReceiver:
    """What the HTTP binding decodes, fed to a ``Client``'s session (see ``HttpTransport``)."""

    def __init__(self) -> None:
        self.client: Client | None = None

    def json(self, message: Any, handle: int | None) -> None:
        assert self.client is not None
        self.client.session.receive_json(message)

    def closed(self) -> None:
        assert self.client is not None
        self.client.session.receive_eof()

    def expired(self, session_id: str) -> None:
        # The session is gone: its calls fail; the next request opens a new one.
        assert self.client is not None
        self.client.expired = True
        self.client.session.receive_eof(
            f"the server ended session {session_id} (HTTP 404) before answering; "
            "mcpx opens a new session for the next request, so the call can be retried"
        )


def _http_transport(
    http: HttpClientConnection, tg: anyio.abc.TaskGroup
) -> tuple[HttpTransport, _SessionReceiver]:
    receiver = _SessionReceiver()
    return HttpTransport(http, tg, receiver), receiver


@contextlib.asynccontextmanager
async def connect_http(
    url: str,
    *,
    modern: bool = False,
    offer: Revision | None = None,
    capabilities: Mapping[str, Any] | None = None,
    resolver: Resolver | None = None,
    client_info: Mapping[str, Any] | None = None,
    headers: Sequence[tuple[str, str]] = (),
    auth: UpstreamAuth | None = None,
    start_timeout: float = 30.0,
    call_timeout: float = 120.0,
    answer_modern_requests: bool = False,
    max_rounds: int = 8,
) -> AsyncIterator[Client]:
    """Talk MCP to the Streamable HTTP endpoint ``url`` (``headers`` for auth, on every request).

    ``modern`` speaks 2026-07-28 (one POST per request, no session);
    otherwise ``initialize`` offers ``offer`` and the session id it gets is
    sent on every later request, and ``DELETE`` ends it on close.
    ``auth`` (``mcpx.config.parse_auth``) adds its headers and query
    parameters to every request of the connection — POST, GET stream, DELETE;
    a ``type: env`` auth is for spawned servers and refused here.
    ``answer_modern_requests`` and ``max_rounds`` are as for ``connect_stdio``.
    """
    if auth is not None and auth.transport != "http":
        raise ValueError(f"auth type {auth.type} is for spawned (command) servers, not for {url}")
    target = auth.apply_to_url(url) if auth is not None else url  # may hold a secret: never in messages
    extra = (*headers, *(auth.headers if auth is not None else ()))

    def session_for(expired: ClientSession | None = None) -> ClientSession:
        return ClientSession(
            continues=expired,
            client_info=client_info or CLIENT_INFO,
            capabilities=capabilities,
            modern=modern,
            offer=offer,
            stream_per_request=True,
            answer_modern_requests=answer_modern_requests,
            max_rounds=max_rounds,
        )

    session = session_for()
    http = HttpClientConnection(HttpClientConfig(url=target, modern=modern, headers=extra))
    failure: McpCallError | None = None
    async with anyio.create_task_group() as tg:
        transport, receiver = _http_transport(http, tg)

        async def never(_: bytes) -> None:
            raise AssertionError("an HTTP client sends whole Send actions")

        async def send(action: Send) -> None:
            await transport.send(action.payload, action.stream)

        def on_tools(tools: list[Any]) -> list[Any]:
            kept = []
            for tool in tools:
                params = tool_header_params(tool) if isinstance(tool, Mapping) else None
                if params is None or not isinstance(tool.get("name"), str):
                    continue  # an invalid x-mcp-header annotation: the tool cannot be called correctly
                http.set_tool_headers(tool["name"], params)
                kept.append(tool)
            return kept

        client = Client(
            session,
            never,
            tg,
            resolver,
            send=send,
            abandon=transport.abandon,
            lock=transport.lock,  # one lock for the session and the binding
            on_tools=on_tools,
        )
        client.call_timeout = call_timeout
        transport.after = client.flush_held
        receiver.client = client
        tg.start_soon(transport.run_timer)

        async def start_session() -> McpCallError | None:
            failure = await client._handshake(start_timeout, f"the server at {url}")
            if failure is None:
                # What the server sends outside any request (questions included) comes on
                # the session's GET stream; a server without one answers 405, which is fine.
                async with transport.lock:
                    http.open_get_stream(time.monotonic())
                    await transport.flush()
            return failure

        async def renew() -> None:
            """The server forgot the session (404): a fresh ClientSession and a new ``initialize``."""
            client.session = session_for(client.session)
            client.ready, client.ready_info, client.init_error = anyio.Event(), None, None
            client._lists.clear()  # the new session lists afresh
            client.expired = False
            failure = await start_session()
            if failure is not None:
                client.expired = True  # try again on the next request
                raise failure
            await client.resubscribe()  # the new session knows none of the old one's subscriptions

        if not modern:
            client.renew = renew
            failure = await start_session()
        if failure is None:
            try:
                yield client
            finally:
                with anyio.CancelScope(shield=True):
                    await transport.aclose(HTTP_CLOSE_TIMEOUT)
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


@contextlib.asynccontextmanager
async def connect_sse(
    url: str,
    *,
    offer: Revision = Revision.V2024_11_05,
    capabilities: Mapping[str, Any] | None = None,
    resolver: Resolver | None = None,
    client_info: Mapping[str, Any] | None = None,
    headers: Sequence[tuple[str, str]] = (),
    auth: UpstreamAuth | None = None,
    start_timeout: float = 30.0,
    call_timeout: float = 120.0,
    answer_modern_requests: bool = False,
    max_rounds: int = 8,
) -> AsyncIterator[Client]:
    """Talk MCP to a 2024-11-05 server over its HTTP+SSE transport; ``url`` is its SSE endpoint (often /sse).

    MCP 2024-11-05, Transports → "HTTP with SSE": a GET opens the event
    stream, its ``endpoint`` event names where every message is POSTed (on
    the same origin, or the connection fails), and the server's messages
    arrive on the stream.  ``initialize`` offers ``offer`` (2024-11-05: the
    revision of this transport; a newer server that kept it may counter-offer
    one mcpx speaks).  ``headers`` (auth) go on the GET and every POST.
    Closing the client closes the stream, which ends the session on the server.
    ``auth`` adds its headers to the GET and every POST; query-string auth
    is refused here, since the POST URL is the server's to name.
    ``answer_modern_requests`` and ``max_rounds`` are taken for a signature
    like ``connect_stdio``'s; a session over this transport is never
    2026-07-28, so neither changes anything here.
    """
    if auth is not None and (auth.transport != "http" or auth.query):
        raise ValueError(
            f"auth type {auth.type} cannot be used over the 2024-11-05 HTTP+SSE transport of {url}; "
            "use bearer, basic or header auth"
        )
    extra = (*headers, *(auth.headers if auth is not None else ()))
    session = ClientSession(
        client_info=client_info or CLIENT_INFO,
        capabilities=capabilities,
        offer=offer,
        answer_modern_requests=answer_modern_requests,
        max_rounds=max_rounds,
    )
    config = SseClientConfig(url=url, headers=extra, endpoint_timeout=start_timeout)
    sse = SseClientConnection(config)
    failure: McpCallError | None = None
    async with anyio.create_task_group() as tg:
        transport = SseTransport(sse, session, tg)

        async def never(_: bytes) -> None:
            raise AssertionError("an HTTP+SSE client sends whole Send actions")

        client = Client(session, never, tg, resolver, send=transport.send, lock=transport.lock)
        client.call_timeout = call_timeout
        transport.after = client.flush_held
        tg.start_soon(transport.run_timer)
        try:
            await transport.open()
            failure = await client._handshake(start_timeout, f"the server at {url}")
            if failure is not None and sse.endpoint is None and sse.ended is not None:
                why = f"mcpx could not open the HTTP+SSE stream at {url}: {sse.ended}"
                failure = McpCallError({"code": INTERNAL_ERROR, "message": why})
            if failure is None:
                yield client
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await transport.aclose()
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
