"""The embedding API: an MCP server's tools, resources, prompts and completions as functions.

A program builds a ``Server``, registers plain functions (sync or async) with
its decorators, and serves it on any driver (``mcpx.drivers``).  The
functions see only the newest spelling of MCP; the session the driver runs
(``mcpx.core.ServerSession``) judges each request's revision, refuses what the
revision forbids and cuts every result down to what the peer can parse.

The driver asks ``Server.route(method, params, context)`` how to answer a
request.  Lists and lookups answer at once (``Outcome``); a call into user
code comes back as a ``Call`` the driver runs — awaited on its event loop
when the function is async, in a worker thread when it is not — and turns
into an ``Outcome`` with ``Call.finish``/``Call.fail``.  A server that hears
its answers as events (the gateway routing a call upstream) returns a
``Deferred``: the driver hands it a ``Pending`` and the server settles it
when the answer comes, with no task or thread held meanwhile.

Errors, as every revision's server pages list them:

* an unknown tool or prompt, a missing required prompt argument, an invalid
  cursor: ``-32602``;
* a resource nobody serves: ``-32002`` with ``data.uri`` (the session sends
  ``-32602`` to a 2026-07-28 peer, which removed ``-32002``);
* a tool's arguments that fail its input schema: ``-32602`` before
  2025-11-25, an ``isError`` result from 2025-11-25 on (SEP-1303);
* anything a tool raises: an ``isError`` result carrying the message, so the
  model can read it; ``McpError`` when a handler wants a JSON-RPC error.
"""

from __future__ import annotations

import base64
import binascii
import inspect
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, overload

from ..core import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    RESOURCE_NOT_FOUND,
    Answered,
    RequestContext,
    Revision,
    ServerConfig,
    ToolHints,
)
from ..core.downgrade import Ages
from ..core.drafts import draft_of
from ..core.policy import SpecPolicy
from ..core.revisions import LOG_LEVELS, REVISIONS, TASKS_EXTENSION
from ..core.rounds import Question
from ._content import to_call_result
from ._schema import context_parameter, schema_for_signature

__all__ = [
    "Call",
    "Context",
    "Deferred",
    "Invocation",
    "McpError",
    "Outcome",
    "Pending",
    "QuestionFailed",
    "QuestionRefused",
    "RequestSink",
    "Server",
    "ToolError",
]

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


# --------------------------------------------------------------------------
# Registry entries
# --------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class _Tool:
    name: str
    fn: Callable[..., Any]
    definition: dict[str, Any]
    context_param: str | None
    is_async: bool
    structured: bool
    validate: bool
    validator: Callable[[Any], Any] | None = None
    validator_ready: bool = False
    # For a plain input schema (see _plain_arguments): the required names, and each typed
    # property with the exact Python types that satisfy it; arguments that pass are valid
    # without the validator.  None: every call goes to the validator.
    plain: tuple[tuple[str, ...], tuple[tuple[str, tuple[type, ...]], ...]] | None = None
    finish: Callable[[Any], Outcome] = field(init=False)
    """What every call of this tool turns its return value into (built once: it depends on the tool only)."""

    def __post_init__(self) -> None:
        structured = self.structured

        def finish(value: Any) -> Outcome:
            if (
                type(value) is str and not structured
            ):  # to_call_result's first case, in line: the usual return
                return _outcome({"content": [{"type": "text", "text": value}]})
            return _outcome(to_call_result(value, structured=structured))

        self.finish = finish

    def check(self, arguments: Mapping[str, Any]) -> str | None:
        """Why ``arguments`` fail the input schema, or ``None``."""
        if not self.validate:
            return None
        import fastjsonschema  # here: a server whose tools are never called (the daemon's) never loads it

        if not self.validator_ready:
            self.validator_ready = True
            schema = self.definition["inputSchema"]
            try:
                self.validator = fastjsonschema.compile(schema, use_default=False)
            except Exception:  # a dialect fastjsonschema cannot compile: the tool validates itself
                self.validator = None
            self.plain = _plain_arguments(schema) if self.validator is not None else None
        if self.validator is None:
            return None
        plain = self.plain
        if plain is not None and type(arguments) is dict:
            # The usual call of a tool registered as a function: every required argument there,
            # each typed one of exactly a type its schema accepts.  What the validator would say.
            required, typed = plain
            for name in required:
                if name not in arguments:
                    break
            else:
                for name, types_ in typed:
                    if name in arguments and type(arguments[name]) not in types_:
                        break
                else:
                    return None
        try:
            self.validator(arguments)
        except fastjsonschema.JsonSchemaException as exc:
            return str(getattr(exc, "message", exc))
        return None


# JSON Schema types, and the Python types of decoded JSON that certainly satisfy each
# (bool is not an integer or a number in JSON Schema; a float may or may not be an integer).
_PLAIN_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "null": (type(None),),
}
_PLAIN_SCHEMA_KEYS = frozenset({"type", "properties", "required"})
_PLAIN_PROPERTY_KEYS = frozenset({"type", "default", "title", "description"})  # annotations but "type"


def _plain_arguments(
    schema: Any,
) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[type, ...]], ...]] | None:
    """``_Tool.plain`` for ``schema``, or ``None`` when it is not that plain.

    Plain: ``{"type": "object", "properties": ..., "required": [...]}`` and
    nothing else, each property ``{}`` or one primitive ``type`` (with
    ``default``, ``title``, ``description`` at most, which validate nothing):
    what ``schema_for_signature`` writes for ``str``/``int``/``float``/``bool``
    parameters.  Arguments that are a dict with every required name, and whose
    typed values have one of the listed exact types, are valid under it; for
    anything else the validator decides (and words the error).
    """
    if (
        not isinstance(schema, dict)
        or schema.get("type") != "object"
        or not _PLAIN_SCHEMA_KEYS.issuperset(schema)
    ):
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    if not all(isinstance(name, str) for name in required):
        return None
    typed: list[tuple[str, tuple[type, ...]]] = []
    for name, prop in properties.items():
        if not isinstance(prop, dict) or not _PLAIN_PROPERTY_KEYS.issuperset(prop):
            return None
        if "type" in prop:
            kind = prop["type"]
            if not isinstance(kind, str) or kind not in _PLAIN_TYPES:
                return None
            typed.append((name, _PLAIN_TYPES[kind]))  # without a type, a property takes anything
    return tuple(required), tuple(typed)


@dataclass(slots=True, kw_only=True)
class _Prompt:
    name: str
    fn: Callable[..., Any]
    definition: dict[str, Any]
    context_param: str | None
    is_async: bool
    required: tuple[str, ...]


@dataclass(slots=True, kw_only=True)
class _Readable:
    """A resource (``pattern`` is None) or a resource template."""

    key: str  # the URI, or the URI template
    pattern: re.Pattern[str] | None
    fn: Callable[..., Any]
    definition: dict[str, Any]
    context_param: str | None
    is_async: bool
    mime_type: str | None


@dataclass(slots=True, kw_only=True)
class _Completer:
    fn: Callable[..., Any]
    is_async: bool


_TEMPLATE_VAR = re.compile(r"\{([+#]?)([A-Za-z0-9_]+)\}")


def _template_regex(uri_template: str) -> re.Pattern[str]:
    """RFC 6570 level 1 and 2: ``{var}`` matches one segment, ``{+var}`` the rest."""
    out = []
    pos = 0
    for match in _TEMPLATE_VAR.finditer(uri_template):
        out.append(re.escape(uri_template[pos : match.start()]))
        operator, name = match.groups()
        out.append(f"(?P<{name}>.+)" if operator else f"(?P<{name}>[^/?#]+)")
        pos = match.end()
    out.append(re.escape(uri_template[pos:]))
    return re.compile("".join(out) + r"\Z")


def _clean(definition: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in definition.items() if v is not None}


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


class Server:
    """An MCP server assembled from functions; serve it with ``mcpx.drivers``."""

    def __init__(
        self,
        name: str,
        version: str = "0.0.0",
        *,
        title: str | None = None,
        description: str | None = None,
        instructions: str | None = None,
        page_size: int | None = None,
        list_changed: bool = False,
        subscribe: bool = False,
        validate_arguments: bool = True,
    ) -> None:
        self.info: dict[str, Any] = _clean(
            {"name": name, "version": version, "title": title, "description": description}
        )
        self.instructions = instructions
        self.page_size = page_size
        self.list_changed = list_changed
        self.subscribe = subscribe
        self.validate_arguments = validate_arguments
        self._tools: dict[str, _Tool] = {}
        # What the session and the HTTP binding judge a call by before routing it, kept as each tool
        # is added or removed (task_support and header_params below read it).
        self.tool_hints = ToolHints()
        self._prompts: dict[str, _Prompt] = {}
        self._resources: dict[str, _Readable] = {}
        self._templates: list[_Readable] = []
        self._completers: dict[tuple[str, str, str], _Completer] = {}
        self._listeners: list[Callable[[str, str | None], None]] = []

    # ------------------------------------------------------------------
    # Registration
    # ------------------------------------------------------------------

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
        task_support: TaskSupport | None = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        fn: F | None = None,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
        task_support: TaskSupport | None = None,
    ) -> F | Callable[[F], F]:
        """Register a tool.  Usable bare (``@server.tool``) or with options.

        ``task_support`` (``"forbidden"``, ``"optional"``, ``"required"``) lets
        calls run as tasks: a 2025-11-25 client asks for one with
        ``params.task``; for a 2026-07-28 client that declared the tasks
        extension, the server makes a call a task once it has run
        ``task_after`` (``required``: always), or when the tool calls
        ``ctx.promote_to_task()``.
        """
        if task_support not in (None, "forbidden", "optional", "required"):
            raise ValueError(
                f"task_support must be 'forbidden', 'optional' or 'required', not {task_support!r}"
            )

        def register(func: F) -> F:
            ctx_param = context_parameter(func, Context)
            schema = (
                dict(input_schema) if input_schema is not None else schema_for_signature(func, skip=ctx_param)
            )
            tool_name = name or func.__name__
            definition = _clean(
                {
                    "name": tool_name,
                    "title": title,
                    "description": description if description is not None else inspect.getdoc(func),
                    "inputSchema": schema,
                    "outputSchema": dict(output_schema) if output_schema is not None else None,
                    "annotations": dict(annotations) if annotations else None,
                    "icons": [dict(i) for i in icons] if icons else None,
                    "_meta": dict(meta) if meta else None,
                    "execution": {"taskSupport": task_support} if task_support else None,
                }
            )
            self._tools[tool_name] = _Tool(
                name=tool_name,
                fn=func,
                definition=definition,
                context_param=ctx_param,
                is_async=_is_async(func),
                structured=output_schema is not None,
                validate=self.validate_arguments,
            )
            self.tool_hints.task_support[tool_name] = task_support or "forbidden"
            self.tool_hints.header_params[tool_name] = _header_params(schema)
            self._changed("tools")
            return func

        return register(fn) if fn is not None else register

    def remove_tool(self, name: str) -> None:
        del self._tools[name]
        self.tool_hints.task_support.pop(name, None)
        self.tool_hints.header_params.pop(name, None)
        self._changed("tools")

    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        arguments: Sequence[Mapping[str, Any]] | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
    ) -> Callable[[F], F]:
        """Register a prompt; its arguments come from the signature unless given."""

        def register(func: F) -> F:
            ctx_param = context_parameter(func, Context)
            args: list[dict[str, Any]]
            if arguments is None:
                args = []
                for pname, param in inspect.signature(func).parameters.items():
                    if pname == ctx_param or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                        continue
                    args.append({"name": pname, "required": param.default is param.empty})
            else:
                args = [dict(a) for a in arguments]
            prompt_name = name or func.__name__
            definition = _clean(
                {
                    "name": prompt_name,
                    "title": title,
                    "description": description if description is not None else inspect.getdoc(func),
                    "arguments": args,
                    "icons": [dict(i) for i in icons] if icons else None,
                }
            )
            self._prompts[prompt_name] = _Prompt(
                name=prompt_name,
                fn=func,
                definition=definition,
                context_param=ctx_param,
                is_async=_is_async(func),
                required=tuple(str(a["name"]) for a in args if a.get("required")),
            )
            self._changed("prompts")
            return func

        return register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: Mapping[str, Any] | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
    ) -> Callable[[F], F]:
        """Register a resource read by calling the function (returns str, bytes or contents)."""
        extra = {"uri": uri, "size": size}
        return self._readable(uri, None, extra, name, title, description, mime_type, annotations, icons)

    def resource_template(
        self,
        uri_template: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
    ) -> Callable[[F], F]:
        """Register a URI template; the function receives the template's variables."""
        extra = {"uriTemplate": uri_template}
        pattern = _template_regex(uri_template)
        return self._readable(
            uri_template, pattern, extra, name, title, description, mime_type, annotations, icons
        )

    def _readable(
        self,
        key: str,
        pattern: re.Pattern[str] | None,
        extra: dict[str, Any],
        name: str | None,
        title: str | None,
        description: str | None,
        mime_type: str | None,
        annotations: Mapping[str, Any] | None,
        icons: Sequence[Mapping[str, Any]] | None,
    ) -> Callable[[F], F]:
        def register(func: F) -> F:
            definition = _clean(
                {
                    **extra,
                    "name": name or func.__name__,
                    "title": title,
                    "description": description if description is not None else inspect.getdoc(func),
                    "mimeType": mime_type,
                    "annotations": dict(annotations) if annotations else None,
                    "icons": [dict(i) for i in icons] if icons else None,
                }
            )
            entry = _Readable(
                key=key,
                pattern=pattern,
                fn=func,
                definition=definition,
                context_param=context_parameter(func, Context),
                is_async=_is_async(func),
                mime_type=mime_type,
            )
            if pattern is None:
                self._resources[key] = entry
            else:
                self._templates.append(entry)
            self._changed("resources")
            return func

        return register

    def completion(
        self, *, argument: str, prompt: str | None = None, resource_template: str | None = None
    ) -> Callable[[F], F]:
        """Register completions for one argument of a prompt or a resource template.

        The function receives ``(value, arguments)`` — the partial value and the
        other arguments already filled in — and returns a list of strings.
        """
        if (prompt is None) == (resource_template is None):
            raise ValueError("name exactly one of prompt= and resource_template=")
        ref = ("ref/prompt", prompt) if prompt is not None else ("ref/resource", resource_template)

        def register(func: F) -> F:
            assert ref[1] is not None
            self._completers[(ref[0], ref[1], argument)] = _Completer(fn=func, is_async=_is_async(func))
            return func

        return register

    # ------------------------------------------------------------------
    # Change notification
    # ------------------------------------------------------------------

    def add_listener(self, listener: Callable[[str, str | None], None]) -> Callable[[], None]:
        """Call ``listener(kind, uri)`` on list changes and resource updates; returns an unsubscriber."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _changed(self, kind: str) -> None:
        for listener in list(self._listeners):
            listener(kind, None)

    def notify_resource_updated(self, uri: str) -> None:
        for listener in list(self._listeners):
            listener("resource", uri)

    # ------------------------------------------------------------------
    # What the session needs
    # ------------------------------------------------------------------

    def capabilities(self) -> dict[str, Any]:
        """The server's capabilities in the newest spelling (the session cuts them per revision)."""
        caps: dict[str, Any] = {"logging": {}}
        if self._tools or self.list_changed:
            caps["tools"] = {"listChanged": self.list_changed}
        if self._prompts or self.list_changed:
            caps["prompts"] = {"listChanged": self.list_changed}
        if self._resources or self._templates or self.list_changed:
            caps["resources"] = {"subscribe": self.subscribe, "listChanged": self.list_changed}
        if self._completers:
            caps["completions"] = {}
        if any(self.task_support(name) in ("optional", "required") for name in self._tools):
            # 2025-11-25 spells it as a capability, 2026-07-28 as an extension;
            # the session keeps each for its own revision.
            caps["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
            caps["extensions"] = {TASKS_EXTENSION: {}}
        return caps

    def task_support(self, tool: str) -> str | None:
        """``execution.taskSupport`` of ``tool`` (``"forbidden"`` when unset), ``None`` if unknown."""
        return self.tool_hints.support(tool)

    def subscribed(self, uri: str) -> None:
        """A client subscribed to ``uri`` (the session's ``Subscribed``); a server that owns its resources has nothing to do.

        Updates reach subscribers through ``notify_resource_updated``.  A
        gateway overrides this to subscribe upstream.  The driver calls it
        as it carries out the session's actions: it must not block.
        """

    def session_ended(self, identity: str) -> None:
        """A legacy HTTP session ended (the binding's ``SessionEnded``): let go of what was kept for ``identity``.

        ``identity`` is the one that session's requests carried
        (``RequestContext.identity``, ``session:<id>``).  A server that keeps
        nothing per session has nothing to do; a gateway ends the upstream
        instances it started for it.  It must not block.
        """

    def header_params(self, tool: str) -> Mapping[str, str]:
        """Arguments of ``tool`` that 2026-07-28 HTTP mirrors as ``Mcp-Param-*`` headers.

        An input-schema property annotated ``"x-mcp-header": "Name"`` travels
        as the header ``Mcp-Param-Name`` as well; the HTTP binding checks that
        the two agree.
        """
        return self.tool_hints.header_params.get(tool, {})

    def session_config(
        self,
        *,
        policy: SpecPolicy | None = None,
        revisions: Iterable[Revision] = REVISIONS,
        ages: Ages | None = None,
        drain: float = 2.0,
        question_ttl: float = 120.0,
        trace: bool = False,
    ) -> ServerConfig:
        """The session configuration serving this server; ``question_ttl``: how long a question may wait."""
        return ServerConfig(
            server_info=self.info,
            capabilities=self.capabilities(),
            instructions=self.instructions,
            policy=policy or SpecPolicy.default(),
            revisions=tuple(revisions),
            ages=ages or Ages(),
            drain=drain,
            question_ttl=question_ttl,
            trace=trace,
            tools=self.tool_hints,
        )

    # ------------------------------------------------------------------
    # Routing
    # ------------------------------------------------------------------

    def route(self, method: str, params: Mapping[str, Any], context: RequestContext) -> Invocation:
        """How to answer ``method``: an ``Outcome`` now, a ``Call`` to run, or a ``Deferred`` answer."""
        handler = _ROUTES.get(method)
        if handler is None:
            return Outcome.failure(METHOD_NOT_FOUND, f"Method not found: {method}")
        try:
            return handler(self, params, context)
        except McpError as exc:
            return Outcome.failure(exc.code, exc.message, exc.data)

    def _page(self, items: list[dict[str, Any]], params: Mapping[str, Any], key: str) -> Outcome:
        cursor = params.get("cursor")
        start = 0
        if cursor is not None:
            start = _decode_cursor(cursor, len(items))
        if self.page_size is None:
            return Outcome(result={key: items[start:]})
        page = items[start : start + self.page_size]
        result: dict[str, Any] = {key: page}
        if start + self.page_size < len(items):
            result["nextCursor"] = _encode_cursor(start + self.page_size)
        return Outcome(result=result)

    def _list_tools(self, params: Mapping[str, Any], context: RequestContext) -> Invocation:
        return self._page([t.definition for t in self._tools.values()], params, "tools")

    def _call_tool(self, params: Mapping[str, Any], context: RequestContext) -> Invocation:
        name = params.get("name")
        tool = self._tools.get(name) if type(name) is str else None
        if tool is None:  # _named's look-up, in line for the usual call; it words the errors
            tool = _named(params, self._tools, "tool", "tools/call")
        name = tool.name
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise McpError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        problem = tool.check(arguments)
        if problem is not None:
            message = f"Invalid arguments for tool {name!r}: {problem}"
            if context.revision >= Revision.V2025_11_25:
                return Outcome(result={"content": [{"type": "text", "text": message}], "isError": True})
            raise McpError(INVALID_PARAMS, message)
        return _call(tool.fn, dict(arguments), tool.is_async, tool.context_param, tool.finish, _tool_failure)

    def _list_prompts(self, params: Mapping[str, Any], context: RequestContext) -> Invocation:
        return self._page([p.definition for p in self._prompts.values()], params, "prompts")

    def _get_prompt(self, params: Mapping[str, Any], context: RequestContext) -> Invocation:
        prompt = _named(params, self._prompts, "prompt", "prompts/get")
        name = prompt.name
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise McpError(INVALID_PARAMS, "Invalid params: prompt arguments must be an object of strings")
        missing = [a for a in prompt.required if a not in arguments]
        if missing:
            raise McpError(
                INVALID_PARAMS, f"Missing required argument(s) for prompt {name!r}: {', '.join(missing)}"
            )
        known = {a["name"] for a in prompt.definition.get("arguments", [])}
        kwargs = {k: v for k, v in arguments.items() if k in known}
        description = prompt.definition.get("description")

        def finish(value: Any) -> Outcome:
            return Outcome(result=_prompt_result(value, description))

        return Call(
            fn=prompt.fn,
            kwargs=kwargs,
            is_async=prompt.is_async,
            context_param=prompt.context_param,
            finish=finish,
            fail=_internal_failure,
        )

    def _list_resources(self, params: Mapping[str, Any], context: RequestContext) -> Invocation:
        return self._page([r.definition for r in self._resources.values()], params, "resources")

    def _list_templates(self, params: Mapping[str, Any], context: RequestContext) -> Invocation:
        return self._page([t.definition for t in self._templates], params, "resourceTemplates")

    def _read_resource(self, params: Mapping[str, Any], context: RequestContext) -> Invocation:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise McpError(INVALID_PARAMS, "Invalid params: resources/read needs params.uri, a string")
        entry = self._resources.get(uri)
        kwargs: dict[str, Any] = {}
        if entry is None:
            for template in self._templates:
                assert template.pattern is not None
                match = template.pattern.match(uri)
                if match:
                    entry, kwargs = template, match.groupdict()
                    break
            else:
                raise McpError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})
        mime = entry.mime_type

        def finish(value: Any) -> Outcome:
            return Outcome(result={"contents": _contents(value, uri, mime)})

        return Call(
            fn=entry.fn,
            kwargs=kwargs,
            is_async=entry.is_async,
            context_param=entry.context_param,
            finish=finish,
            fail=_internal_failure,
        )

    def _complete(self, params: Mapping[str, Any], context: RequestContext) -> Invocation:
        ref = params.get("ref")
        argument = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise McpError(
                INVALID_PARAMS, "Invalid params: completion/complete needs ref and argument objects"
            )
        kind = ref.get("type")
        target = (
            ref.get("name") if kind == "ref/prompt" else ref.get("uri") if kind == "ref/resource" else None
        )
        arg_name, value = argument.get("name"), argument.get("value")
        if not isinstance(target, str) or not isinstance(arg_name, str) or not isinstance(value, str):
            raise McpError(
                INVALID_PARAMS,
                "Invalid params: ref must be {type: ref/prompt, name} or {type: ref/resource, uri}, "
                "and argument {name, value} strings",
            )
        if kind == "ref/prompt" and target not in self._prompts:
            raise McpError(INVALID_PARAMS, f"Unknown prompt: no prompt named {target!r}")
        assert isinstance(kind, str)
        completer = self._completers.get((kind, target, arg_name))
        if completer is None:
            return Outcome(result={"completion": {"values": [], "total": 0, "hasMore": False}})
        ctx_args = (
            params.get("context", {}).get("arguments", {}) if isinstance(params.get("context"), dict) else {}
        )

        def finish(found: Any) -> Outcome:
            values = [str(v) for v in found]
            return Outcome(
                result={
                    "completion": {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}
                }
            )

        return Call(
            fn=completer.fn,
            kwargs={"value": value, "arguments": dict(ctx_args) if isinstance(ctx_args, dict) else {}},
            is_async=completer.is_async,
            context_param=None,
            finish=finish,
            fail=_internal_failure,
        )


_E = TypeVar("_E")


def _named(params: Mapping[str, Any], registry: Mapping[str, _E], kind: str, method: str) -> _E:
    """The registry entry ``params.name`` names; ``-32602`` when there is none."""
    name = params.get("name")
    if not isinstance(name, str):
        raise McpError(INVALID_PARAMS, f"Invalid params: {method} needs params.name, a string")
    entry = registry.get(name)
    if entry is None:
        raise McpError(
            INVALID_PARAMS,
            f"Unknown {kind}: no {kind} named {name!r}; {kind}s/list shows the {kind}s on offer",
        )
    return entry


def _tool_failure(exc: BaseException) -> Outcome:
    """What a tool's exception answers: ``McpError`` its JSON-RPC error, anything else an ``isError`` result."""
    if isinstance(exc, McpError):
        return Outcome.failure(exc.code, exc.message, exc.data)
    # ToolError or anything else the tool raised: the model reads it.
    return Outcome(result={"content": [{"type": "text", "text": _describe_exception(exc)}], "isError": True})


def _internal_failure(exc: BaseException) -> Outcome:
    if isinstance(exc, McpError):
        return Outcome.failure(exc.code, exc.message, exc.data)
    return Outcome.failure(INTERNAL_ERROR, f"Internal error: {_describe_exception(exc)}")


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"mcpx:{offset}".encode()).decode("ascii")


def _decode_cursor(cursor: Any, length: int) -> int:
    """The offset an opaque cursor stands for; ``-32602`` for one this server did not issue."""
    try:
        if not isinstance(cursor, str):
            raise ValueError
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii")
        prefix, _, number = text.partition(":")
        offset = int(number)
        if prefix != "mcpx" or not 0 <= offset <= length:
            raise ValueError
        return offset
    except (ValueError, UnicodeError, binascii.Error):
        raise McpError(
            INVALID_PARAMS, "Invalid params: invalid cursor; pass a nextCursor this server returned"
        ) from None


def _prompt_result(value: Any, description: str | None) -> dict[str, Any]:
    if isinstance(value, dict) and "messages" in value:
        return dict(value)
    items = value if isinstance(value, list) else [value]
    messages = []
    for item in items:
        if isinstance(item, str):
            messages.append({"role": "user", "content": {"type": "text", "text": item}})
        elif isinstance(item, tuple) and len(item) == 2:
            role, content = item
            if isinstance(content, str):
                content = {"type": "text", "text": content}
            messages.append({"role": role, "content": content})
        elif isinstance(item, dict) and "role" in item:
            messages.append(dict(item))
        else:
            raise TypeError(f"a prompt returns strings, (role, content) pairs or messages, not {item!r}")
    result: dict[str, Any] = {"messages": messages}
    if description:
        result["description"] = description
    return result


def _contents(value: Any, uri: str, mime: str | None) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, str):
            entry: dict[str, Any] = {"uri": uri, "text": item}
        elif isinstance(item, bytes | bytearray):
            entry = {"uri": uri, "blob": base64.b64encode(bytes(item)).decode("ascii")}
        elif isinstance(item, dict):
            entry = {"uri": uri, **item}
        else:
            raise TypeError(f"a resource returns str, bytes or contents objects, not {type(item).__name__}")
        if mime and "mimeType" not in entry:
            entry["mimeType"] = mime
        out.append(entry)
    return out


_Route = Callable[[Server, Mapping[str, Any], RequestContext], Invocation]
_ROUTES: dict[str, _Route] = {
    "tools/list": Server._list_tools,
    "tools/call": Server._call_tool,
    "prompts/list": Server._list_prompts,
    "prompts/get": Server._get_prompt,
    "resources/list": Server._list_resources,
    "resources/templates/list": Server._list_templates,
    "resources/read": Server._read_resource,
    "completion/complete": Server._complete,
}


def _header_params(input_schema: Mapping[str, Any]) -> dict[str, str]:
    """``{argument: header name}`` of the properties of ``input_schema`` annotated ``x-mcp-header``."""
    properties = input_schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    return {
        name: prop["x-mcp-header"]
        for name, prop in properties.items()
        if isinstance(prop, dict) and isinstance(prop.get("x-mcp-header"), str)
    }
