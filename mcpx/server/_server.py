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

Modules: ``Server`` and how it answers each method are here; beside it,
``_context`` holds what a request's handler and its driver hold
(``Context``, ``Call``, ``Outcome``, ``Pending``, ``Deferred``, and the
errors a handler raises), and ``_registry`` what a registration keeps (a
tool with its schema and validator, a prompt, a resource or template, a
completer).
"""

from __future__ import annotations

import base64
import binascii
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, overload

from ..core import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    RequestContext,
    Revision,
    ServerConfig,
    ToolHints,
)
from ..core.downgrade import Ages
from ..core.policy import SpecPolicy
from ..core.revisions import REVISIONS, TASKS_EXTENSION
from ._context import (
    _E,
    Call,
    Context,
    Deferred,
    F,
    Invocation,
    McpError,
    Outcome,
    Pending,
    QuestionFailed,
    QuestionRefused,
    RequestSink,
    TaskSupport,
    ToolError,
    _call,
    _describe_exception,
    _is_async,
)
from ._registry import _clean, _Completer, _Prompt, _Readable, _template_regex, _Tool
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

    def relay_lane(self) -> Any:
        """What the drivers offer each request before ``route``: a ``RequestRelay``, or ``None`` (the rule).

        A server that sends some requests on by itself (the gateway's relay
        lane, spec/gateway.md §11) gives one; see ``mcpx.drivers._async``.
        """
        return None

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
