"""The layer ``Client`` stands on: its fields, the linked mode, and the loop that carries out its session's actions.

``flush`` drains the ``ClientSession``'s actions and performs them: bytes
to the transport, answers to the callers waiting on them, the server's
questions to the resolver (a legacy server request, or a 2026-07-28 input
round), progress and notifications to whoever listens.  ``read_from``
feeds the server's output to the session.  A linked client (``link``) is
driven from outside instead: the gateway's router feeds its session, and
what it writes goes through an outbox.  ``McpCallError`` and the
``UpstreamLink`` protocol are here too.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc
import orjson

from ..core import INTERNAL_ERROR, METHOD_NOT_FOUND, LocalProtocolError, Send, Trace
from ..core.client_lists import ListCache
from ..core.client_session import (
    AbandonStream,
    ClientSession,
    Completed,
    Failed,
    InputRequired,
    Progress,
    Ready,
    ServerNotification,
    ServerRequest,
    ServerRequestCancelled,
)
from ..core.framing import LineReader
from ..drivers import _batch
from ..drivers._stderr import StderrLog
from ..drivers._stdio_streams import transport_write_nowait

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


class _ClientDriver:
    """The fields of a ``Client``, its linked mode and its driver loop (see ``mcpx.client``)."""

    if TYPE_CHECKING:  # defined by a later layer

        def last_words(self) -> str: ...

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

    @property
    def linkable(self) -> bool:
        """Whether ``link`` may be used: one byte stream, and a session that will not be replaced.

        Streamable HTTP and HTTP+SSE write a request per stream and renew an
        expired session: those clients drive their own session.
        """
        return self._send is None and self._abandon is None and self.renew is None

    def attach_pipe(
        self,
        write_nowait: Callable[[bytes], bool] | None,
        pipe: asyncio.StreamReader | None,
        transport: asyncio.ReadTransport | None,
        lines: LineReader,
    ) -> None:
        """A spawned server's pipes, where anyio exposes asyncio's: written, and read, with no task between.

        ``lines`` is the reader ``read_from`` uses; a linked client (``link``)
        is pushed what it reads before that task runs.
        """
        self._write_nowait, self._pipe, self._pipe_transport, self._lines = (
            write_nowait,
            pipe,
            transport,
            lines,
        )

    def take_leftover(self, data: bytes) -> None:
        """Bytes of the server's output read before this client (by the era probe): read them first."""
        if data and self._lines is not None:  # (b"" would be the end of input)
            self._take_chunk(self._lines, data)

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

    async def flush(self) -> None:
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
            await self.flush()
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
        await self.flush()

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

    async def read_from(self, stream: anyio.abc.ByteReceiveStream, max_line: int) -> None:
        reader = self._lines = self._lines or LineReader(max_line)
        try:
            async for chunk in stream:
                with _batch.reading():  # what its answers cause is written once, at the end of the chunk
                    self._take_chunk(reader, chunk)
                if self._link is None:
                    await self.flush()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        with anyio.move_on_after(0.5):  # a dying server's stderr usually says why: wait for it
            await self.stderr_done.wait()
        if self._link is not None:
            self._link.lost(self.last_words())
            return
        self.session.receive_eof()
        await self.flush()

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
