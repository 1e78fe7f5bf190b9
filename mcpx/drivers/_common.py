"""What every driver does the same way, kept out of the loops themselves."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..core import Answered, Trace
from ..core.rounds import Question
from ..server import Call, Context, Outcome, Pending

__all__ = [
    "Asker",
    "Core",
    "PostingSink",
    "Waiters",
    "abandon_deferred",
    "apply_outcome",
    "call_kwargs",
    "change_listener",
    "trace_to_stderr",
]


class Core(Protocol):
    """What a driver calls on the core for the application: a Core or an HttpServer."""

    def respond(self, token: int, result: Mapping[str, Any]) -> None: ...

    def respond_error(self, token: int, code: int, message: str, data: Any = None) -> None: ...

    def discard(self, token: int) -> None: ...

    def progress(
        self, token: int, progress: float, total: float | None = None, message: str | None = None
    ) -> bool: ...

    def log(self, level: str, data: Any, *, logger: str | None = None, token: int | None = None) -> bool: ...

    def suspend_stream(self, token: int) -> None: ...

    def promote(self, token: int) -> bool: ...

    def ask(self, token: int, questions: list[Question]) -> int: ...

    def notify_list_changed(self, kind: str) -> None: ...

    def notify_resource_updated(self, uri: str) -> None: ...


Post = Callable[[Callable[[], Any]], None]
"""A driver's way to run a change to the core on its loop, from any thread, then flush."""


class Asker(Protocol):
    """How a driver puts questions to the core and waits for the ``Answered`` action."""

    async def ask(self, token: int, questions: list[Question]) -> Answered | None: ...

    def ask_blocking(self, token: int, questions: list[Question]) -> Answered | None: ...


class Waiters:
    """Handlers waiting for answers, by (request token, ask id); resolved from the driver's drain of actions.

    An ask id is unique only within one server session, and one HTTP binding
    holds many (every 2026-07-28 request has its own): the token, unique
    across the binding, is what keeps two clients' answers apart.
    """

    def __init__(self) -> None:
        self._by_ask: dict[tuple[int, int], Callable[[Answered | None], None]] = {}

    def add(self, token: int, ask_id: int, resolve: Callable[[Answered | None], None]) -> None:
        self._by_ask[(token, ask_id)] = resolve

    def answered(self, action: Answered) -> None:
        resolve = self._by_ask.pop((action.token, action.ask_id), None)
        if resolve is not None:
            resolve(action)

    def cancelled(self, token: int) -> None:
        """Request ``token`` was cancelled: whoever waits for its answers stops waiting."""
        for key, resolve in list(self._by_ask.items()):
            if key[0] == token:
                del self._by_ask[key]
                resolve(None)


class PostingSink:
    """The ``RequestSink`` every driver gives a handler's ``Context``."""

    __slots__ = ("asker", "post", "session")

    def __init__(self, post: Post, session: Core, asker: Asker) -> None:
        self.post = post
        self.session = session
        self.asker = asker

    async def ask(self, token: int, questions: list[Question]) -> Answered | None:
        return await self.asker.ask(token, questions)

    def ask_blocking(self, token: int, questions: list[Question]) -> Answered | None:
        return self.asker.ask_blocking(token, questions)

    def progress(self, token: int, progress: float, total: float | None, message: str | None) -> None:
        session = self.session
        self.post(lambda: session.progress(token, progress, total, message))

    def log(self, token: int, level: str, data: Any, logger: str | None) -> None:
        session = self.session
        self.post(lambda: session.log(level, data, logger=logger, token=token))

    def close_stream(self, token: int) -> None:
        session = self.session
        self.post(lambda: session.suspend_stream(token))

    def promote(self, token: int) -> None:
        session = self.session
        self.post(lambda: session.promote(token))


def change_listener(post: Post, session: Core) -> Callable[[str, str | None], None]:
    """A ``Server`` listener that tells ``session`` about list changes and resource updates."""

    def on_change(kind: str, uri: str | None) -> None:
        if kind == "resource" and uri is not None:
            post(lambda: session.notify_resource_updated(uri))
        else:
            post(lambda: session.notify_list_changed(kind))

    return on_change


def apply_outcome(session: Core, token: int, outcome: Outcome) -> None:
    """Answer request ``token`` with ``outcome``."""
    if outcome.error is not None:
        code, message, data = outcome.error
        session.respond_error(token, code, message, data)
    else:
        assert outcome.result is not None
        session.respond(token, outcome.result)


def abandon_deferred(deferred: dict[int, Pending], contexts: dict[int, Context]) -> None:
    """A connection is gone: every deferred request still open is cancelled for its server."""
    while deferred:
        token, pending = deferred.popitem()
        contexts.pop(token, None)
        pending._cancel()


def call_kwargs(call: Call, context: Context) -> dict[str, Any]:
    """The keyword arguments for ``call.fn``, with the context where it asked for one."""
    if call.context_param is None:
        return call.kwargs
    kwargs = dict(call.kwargs)
    kwargs[call.context_param] = context
    return kwargs


def trace_to_stderr(action: Trace) -> None:
    """Write a trace event to stderr (stdout belongs to the protocol)."""
    detail = " ".join(f"{k}={v}" for k, v in action.detail.items())
    print(f"mcpx trace: {action.event} {detail}", file=sys.stderr, flush=True)
