"""``Client``: what callers of ``mcpx.client`` use — requests, lists, subscriptions, listening.

``mcpx.client`` has the overview and the ``connect_*`` functions that build
a ``Client``; the layer it stands on is ``_driver``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.abc

from ..core import INTERNAL_ERROR, INVALID_PARAMS, LocalProtocolError, Revision
from ..core.client_lists import LIST_KEYS, ListenBackoff, Paging, listen_filter
from ..core.client_session import Completed, Failed, MessageTooLarge, Progress
from ._driver import McpCallError, RoundResolver, _ClientDriver, _describe, _Pending, _refused_for_expiry


class Client(_ClientDriver):
    """One connection to one server; create it with ``connect_stdio``, ``connect_http`` or ``connect_sse``."""

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
            await self.flush()
            with anyio.move_on_after(limit):
                await pending.event.wait()
            if pending.outcome is None:
                self.session.cancel(handle, f"no answer within {limit:g}s")
                await self.flush()
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
                    await self.flush()
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

    async def handshake(self, timeout: float, who: str, *, stderr: bool = False) -> McpCallError | None:
        """Legacy: send ``initialize`` and wait for ``Ready``; the error to raise when it did not come."""
        self.session.start()
        await self.flush()
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

    def forget_lists(self) -> None:
        """Drop every kept list (a renewed session lists afresh)."""
        self._lists.clear()

    async def server_capabilities(self) -> Mapping[str, Any]:
        """What the server declared: from ``initialize``, or (2026-07-28) ``server/discover``, asked once.

        The session keeps what the answer says (``ClientSession.capabilities_known``).
        """
        if self.session.modern and not self.session.capabilities_known:
            await self.request("server/discover")
        return self.session.server_capabilities

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
                await self.flush()
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
                await self.flush()
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
