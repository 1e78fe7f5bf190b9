"""What a handler and its driver hold for one request: ``Context``, ``Call``, ``Outcome``, ``Pending``, ``Deferred``.

``mcpx.server._server`` says how a request is answered.  ``Context`` is the
handler's view of its request (progress, log messages, questions to the
client); ``Call`` a call into user code the driver runs and finishes into an
``Outcome``; ``Deferred``/``Pending`` an answer that comes later as an event.
The errors a handler raises (``McpError``, ``ToolError``) and a question's
failures (``QuestionRefused``, ``QuestionFailed``) are here too.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from ..core import INVALID_REQUEST, MISSING_REQUIRED_CLIENT_CAPABILITY, Answered, RequestContext, Revision
from ..core.drafts import draft_of
from ..core.revisions import LOG_LEVELS
from ..core.rounds import Question

F = TypeVar("F", bound=Callable[..., Any])


TaskSupport = Literal["forbidden", "optional", "required"]


class McpError(Exception):
    """Raised by a handler to answer with a JSON-RPC error instead of a result."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class ToolError(Exception):
    """Raised by a tool to report a failure the model should see (``isError: true``)."""


class RequestSink(Protocol):
    """What a driver gives a ``Context`` so a running handler can report back.

    Implementations must be callable from any thread and never block on the
    peer: they hand the report to the driver's loop and return.
    """

    def progress(self, token: int, progress: float, total: float | None, message: str | None) -> None: ...

    def log(self, token: int, level: str, data: Any, logger: str | None) -> None: ...

    def close_stream(self, token: int) -> None: ...

    def promote(self, token: int) -> None: ...

    async def ask(self, token: int, questions: list[Question]) -> Answered | None:
        """Put questions to the client and wait (``None``: the request was cancelled)."""
        ...

    def ask_blocking(self, token: int, questions: list[Question]) -> Answered | None:
        """The same, for a sync handler running in a worker thread."""
        ...


class QuestionRefused(McpError):
    """The client may not be asked this (capability not declared, revision, transport).

    Unhandled, it answers the request with ``-32021`` and the capabilities
    that were missing (``-32602`` for a legacy client, which has no -32021).
    """

    def __init__(self, message: str, required: Mapping[str, Any] | None) -> None:
        data = {"requiredCapabilities": dict(required)} if required else None
        super().__init__(MISSING_REQUIRED_CLIENT_CAPABILITY if required else INVALID_REQUEST, message, data)
        self.required = required


class QuestionFailed(ToolError):
    """The client answered a question with an error, or not in time.

    Unhandled, it is the tool's error (``isError``), which the model reads.
    """

    def __init__(self, key: str, error: Mapping[str, Any]) -> None:
        super().__init__(f"the client could not answer {key!r}: {error.get('message', 'no answer')}")
        self.key = key
        self.error = dict(error)


class Context:
    """What a handler may know and do about the request it is serving.

    A handler receives one by declaring a parameter annotated ``Context``
    (or named ``ctx``).  ``report_progress`` and ``log`` never block and are
    safe from a worker thread; the session drops what the request did not ask
    for (no progress token, no log level).
    """

    __slots__ = ("_cancelled", "_keys", "_sink", "request")

    def __init__(self, request: RequestContext, sink: RequestSink) -> None:
        self.request = request
        self._sink = sink
        self._cancelled = False
        self._keys: Iterator[int] | None = None  # numbers for generated question keys, once one is asked

    @property
    def revision(self) -> Revision:
        return self.request.revision

    @property
    def request_id(self) -> str | int:
        return self.request.request_id

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        return self.request.client_capabilities

    @property
    def cancelled(self) -> bool:
        """True once the peer cancelled this request (poll it in long sync work)."""
        return self._cancelled

    def _cancel(self) -> None:
        self._cancelled = True

    def _next_key(self) -> int:
        if self._keys is None:
            self._keys = itertools.count(1)
        return next(self._keys)

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        self._sink.progress(self.request.token, progress, total, message)

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        if level not in LOG_LEVELS:
            raise ValueError(f"level must be one of {', '.join(LOG_LEVELS)}")
        self._sink.log(self.request.token, level, data, logger)

    # -- questions to the client (both eras: server requests, or input_required) --

    def question(
        self, method: str, params: Mapping[str, Any] | None = None, *, key: str | None = None
    ) -> Question:
        """A question for ``ask``; ``key`` names its answer (given or generated)."""
        return Question(
            key=key or f"{method.split('/', maxsplit=1)[0]}-{self._next_key()}",
            method=method,
            params=params or {},
        )

    def _answers(self, answered: Answered | None, questions: list[Question]) -> dict[str, Any]:
        if answered is None:
            raise anyio_cancelled()
        if answered.refused is not None:
            raise QuestionRefused(answered.refused, answered.required)
        results: dict[str, Any] = {}
        for question in questions:
            answer = (answered.answers or {}).get(question.key, {})
            if "result" not in answer:
                raise QuestionFailed(question.key, answer.get("error") or {})
            results[question.key] = answer["result"]
        return results

    async def ask(self, *questions: Question) -> dict[str, Any]:
        """Ask the client several things at once; the answers by key.

        A legacy client gets server requests; a 2026-07-28 client gets one
        ``input_required`` round with every question, and this call resumes
        when it comes back.  Raises ``QuestionRefused`` when the client may not
        be asked, ``QuestionFailed`` when it answered with an error.
        """
        qs = list(questions)
        return self._answers(await self._sink.ask(self.request.token, qs), qs)

    def ask_blocking(self, *questions: Question) -> dict[str, Any]:
        """``ask`` for a sync handler (it runs in a worker thread and may block)."""
        qs = list(questions)
        return self._answers(self._sink.ask_blocking(self.request.token, qs), qs)

    async def elicit(
        self, message: str, schema: Mapping[str, Any], *, key: str | None = None
    ) -> dict[str, Any]:
        """Ask the user to fill in a form; the ``ElicitResult`` (``action``, ``content``)."""
        q = self.question(
            "elicitation/create",
            {"mode": "form", "message": message, "requestedSchema": dict(schema)},
            key=key,
        )
        return dict((await self.ask(q))[q.key])

    async def elicit_url(
        self, message: str, url: str, *, elicitation_id: str | None = None, key: str | None = None
    ) -> dict[str, Any]:
        """Send the user to ``url`` (2025-11-25 and later); the ``ElicitResult``."""
        q = self.question(
            "elicitation/create",
            {
                "mode": "url",
                "message": message,
                "url": url,
                "elicitationId": elicitation_id or f"e-{self._next_key()}",
            },
            key=key,
        )
        return dict((await self.ask(q))[q.key])

    async def sample(
        self,
        messages: list[Mapping[str, Any]] | str,
        *,
        max_tokens: int,
        key: str | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """Ask the client's model; the ``CreateMessageResult``.  A string is one user message."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        q = self.question(
            "sampling/createMessage", {"messages": list(messages), "maxTokens": max_tokens, **params}, key=key
        )
        return dict((await self.ask(q))[q.key])

    async def list_roots(self, *, key: str | None = None) -> list[dict[str, Any]]:
        """The client's roots."""
        q = self.question("roots/list", key=key)
        return list((await self.ask(q))[q.key].get("roots", []))

    def promote_to_task(self) -> None:
        """Run this call as a task from now on, if its client can take one (2026-07-28 extension).

        Questions asked afterwards wait on ``tasks/get``/``tasks/update``
        instead of answering the request ``input_required``.  Nothing happens
        for a client that did not declare the tasks extension, or for a tool
        without ``task_support``.
        """
        self._sink.promote(self.request.token)

    def close_stream(self) -> None:
        """Close this request's event stream now and go on working (SSE polling).

        A Streamable HTTP client of 2025-11-25 resumes the stream with
        ``Last-Event-ID`` and still receives the result; on stdio, or where
        the stream cannot be resumed, nothing happens.
        """
        self._sink.close_stream(self.request.token)

    def debug(self, data: Any, logger: str | None = None) -> None:
        self.log("debug", data, logger)

    def info(self, data: Any, logger: str | None = None) -> None:
        self.log("info", data, logger)

    def warning(self, data: Any, logger: str | None = None) -> None:
        self.log("warning", data, logger)

    def error(self, data: Any, logger: str | None = None) -> None:
        self.log("error", data, logger)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """The answer to a request: a result, or a JSON-RPC error."""

    result: Mapping[str, Any] | None = None
    error: tuple[int, str, Any] | None = None

    @classmethod
    def failure(cls, code: int, message: str, data: Any = None) -> Outcome:
        return cls(error=(code, message, data))

    @staticmethod
    def success(result: Mapping[str, Any]) -> Outcome:
        """``Outcome(result=result)``, built as the fast paths build theirs (``mcpx.core.drafts``)."""
        return _outcome(result)


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """A call into user code; the driver runs ``fn(**kwargs)`` and reports back."""

    fn: Callable[..., Any]
    kwargs: dict[str, Any]
    is_async: bool
    context_param: str | None
    finish: Callable[[Any], Outcome]
    fail: Callable[[BaseException], Outcome]


class Pending:
    """A request the server answers later: the handle a ``Deferred`` is started with.

    ``context`` reports progress and logs and puts questions, as a handler's
    does.  ``settle(outcome)`` answers the request, once; later calls, and a
    settle after the peer cancelled, are ignored.  ``on_cancel``, when set,
    is called once if the peer cancels the request (or its connection ends)
    before it was settled; the driver has dropped the request by then, so
    nothing is answered.  ``connection`` names the driver's connection (one
    stdio connection; an HTTP binding, whose requests carry their own
    identity): requests on different connections may share a token.  Call
    ``settle`` on the driver's loop (the asyncio and trio drivers) or from
    any thread (the blocking driver posts it under its lock).
    """

    __slots__ = ("_context", "_sink", "connection", "on_cancel", "request", "settle", "token")

    def __init__(self, context: Context, connection: int, settle: Callable[[Outcome], None]) -> None:
        self._context: Context | None = context
        self._sink: RequestSink | None = None
        self.request: RequestContext = context.request  # what the request is, without a Context
        self.connection = connection
        self.token: int = context.request.token  # the request's token on its connection
        self.settle: Callable[[Outcome], None] = settle  # called as it is: no method in between
        self.on_cancel: Callable[[], None] | None = None

    @classmethod
    def of(
        cls, request: RequestContext, sink: RequestSink, connection: int, settle: Callable[[Outcome], None]
    ) -> Pending:
        """A driver's: ``context`` is made from ``request`` and ``sink`` when first asked for.

        A routed call usually needs none (no progress, no log, no question):
        its answer costs no ``Context``.
        """
        pending = cls.__new__(cls)
        pending._context = None
        pending._sink = sink
        pending.request = request
        pending.connection = connection
        pending.token = request.token
        pending.settle = settle
        pending.on_cancel = None
        return pending

    @property
    def context(self) -> Context:
        context = self._context
        if context is None:
            assert self._sink is not None  # made by ``of``
            context = self._context = Context(self.request, self._sink)
        return context

    def _cancel(self) -> None:
        """The driver's: the peer gave up, or its connection ended; the server is told once."""
        if self._context is not None:
            self._context._cancel()
        on_cancel, self.on_cancel = self.on_cancel, None
        if on_cancel is not None:
            on_cancel()


@dataclass(frozen=True, slots=True)
class Deferred:
    """Answer the request later, without a task: the driver calls ``start(pending)`` and returns.

    For a server that routes a request elsewhere and hears the answer as an
    event (a gateway): ``start`` runs on the driver's loop while the request
    is being dispatched, must not block, and answers through the ``Pending``
    it is given, at once or whenever the answer comes.  An exception from
    ``start`` answers ``-32603``.
    """

    start: Callable[[Pending], None]

    @staticmethod
    def of(start: Callable[[Pending], None]) -> Deferred:
        """``Deferred(start)``, built as the fast paths build theirs (``mcpx.core.drafts``)."""
        deferred: Any = _new(_DEFERRED_DRAFT)
        deferred.start = start
        deferred.__class__ = Deferred
        return deferred  # type: ignore[no-any-return]


Invocation = Outcome | Call | Deferred


# Per-call objects built the way the core builds its per-message actions
# (mcpx.core.actions: a draft with the same slots, then its class): the same
# frozen dataclasses, without a Python-level object.__setattr__ per field.
_new = object.__new__


_CALL_DRAFT = draft_of(Call)


_OUTCOME_DRAFT = draft_of(Outcome)


_DEFERRED_DRAFT = draft_of(Deferred)


def _outcome(result: Mapping[str, Any]) -> Outcome:
    """``Outcome(result=result)``."""
    outcome: Any = _new(_OUTCOME_DRAFT)
    outcome.result = result
    outcome.error = None
    outcome.__class__ = Outcome
    return outcome  # type: ignore[no-any-return]


def _call(
    fn: Callable[..., Any],
    kwargs: dict[str, Any],
    is_async: bool,
    context_param: str | None,
    finish: Callable[[Any], Outcome],
    fail: Callable[[BaseException], Outcome],
) -> Call:
    """``Call(fn=..., kwargs=..., ...)`` with every field given."""
    call: Any = _new(_CALL_DRAFT)
    call.fn = fn
    call.kwargs = kwargs
    call.is_async = is_async
    call.context_param = context_param
    call.finish = finish
    call.fail = fail
    call.__class__ = Call
    return call  # type: ignore[no-any-return]


class RequestCancelled(Exception):
    """The request this handler serves was cancelled while it waited for an answer."""


def anyio_cancelled() -> BaseException:
    return RequestCancelled("the request was cancelled while waiting for the client's answer")


def _is_async(fn: Callable[..., Any]) -> bool:
    call = type(fn).__call__ if not inspect.isfunction(fn) and not inspect.ismethod(fn) else None
    return inspect.iscoroutinefunction(fn) or (call is not None and inspect.iscoroutinefunction(call))


def _describe_exception(exc: BaseException) -> str:
    message = str(exc)
    return message if message else type(exc).__name__


_E = TypeVar("_E")
