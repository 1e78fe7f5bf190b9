"""The embedding API: functions in, MCP answers out (no process, no loop)."""

from __future__ import annotations

import base64
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpx.core import RequestContext, Revision
from mcpx.server import Call, Context, McpError, Outcome, Server, ToolError, ToolResult


def ctx(revision: str = "2025-11-25", method: str = "tools/call") -> RequestContext:
    return RequestContext(
        token=1, request_id=1, method=method, revision=Revision(revision), client_capabilities={}
    )


def run(invocation: Outcome | Call, context: Context | None = None) -> Outcome:
    """Play the driver for a sync function."""
    if isinstance(invocation, Outcome):
        return invocation
    kwargs = dict(invocation.kwargs)
    if invocation.context_param:
        kwargs[invocation.context_param] = context
    try:
        return invocation.finish(invocation.fn(**kwargs))
    except Exception as exc:
        return invocation.fail(exc)


def test_input_schema_comes_from_the_signature() -> None:
    server = Server("s")

    @server.tool
    def search(
        query: str, limit: int = 10, kind: Literal["a", "b"] | None = None, ctx: Context | None = None
    ) -> str:
        """Search things."""
        return query

    (tool,) = run(server.route("tools/list", {}, ctx())).result["tools"]  # type: ignore[index]
    assert tool == {
        "name": "search",
        "description": "Search things.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "default": 10},
                "kind": {"enum": ["a", "b"]},
            },
            "required": ["query"],
        },
    }


def test_return_values_become_call_results() -> None:
    server = Server("s")

    @server.tool
    def plain() -> str:
        return "hi"

    @server.tool(output_schema={"type": "object"})
    def structured() -> dict[str, Any]:
        return {"a": 1}

    @server.tool
    def explicit() -> ToolResult:
        return ToolResult(content=["x"], structured=[1], is_error=True)

    @server.tool
    def broken() -> str:
        raise ToolError("it broke")

    @server.tool
    def refusing() -> str:
        raise McpError(-32602, "bad idea", {"why": "because"})

    def call(name: str) -> Outcome:
        return run(server.route("tools/call", {"name": name}, ctx()))

    assert call("plain").result == {"content": [{"type": "text", "text": "hi"}]}
    assert call("structured").result == {
        "content": [{"type": "text", "text": '{"a":1}'}],
        "structuredContent": {"a": 1},
    }
    assert call("explicit").result == {
        "content": [{"type": "text", "text": "x"}],
        "structuredContent": [1],
        "isError": True,
    }
    assert call("broken").result == {"content": [{"type": "text", "text": "it broke"}], "isError": True}
    assert call("refusing").error == (-32602, "bad idea", {"why": "because"})
    assert call("missing").error[0] == -32602  # type: ignore[index]


def test_argument_validation_depends_on_the_revision() -> None:
    server = Server("s")

    @server.tool
    def add(a: int, b: int) -> int:
        return a + b

    bad = {"name": "add", "arguments": {"a": "x"}}
    assert run(server.route("tools/call", bad, ctx("2025-06-18"))).error[0] == -32602  # type: ignore[index]
    assert run(server.route("tools/call", bad, ctx("2025-11-25"))).result["isError"] is True  # type: ignore[index]
    assert run(server.route("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, ctx())).result == {
        "content": [{"type": "text", "text": "3"}]
    }


def test_pagination_and_invalid_cursors() -> None:
    server = Server("s", page_size=2)
    for i in range(5):
        server.tool(name=f"t{i}")(lambda: "x")
    names: list[str] = []
    params: dict[str, Any] = {}
    while True:
        result = run(server.route("tools/list", params, ctx())).result
        assert result is not None
        names += [t["name"] for t in result["tools"]]
        if "nextCursor" not in result:
            break
        params = {"cursor": result["nextCursor"]}
    assert names == ["t0", "t1", "t2", "t3", "t4"]
    for cursor in ("garbage", "bWN4Ojk5", 7, ""):
        error = run(server.route("tools/list", {"cursor": cursor}, ctx())).error
        assert error is not None and error[0] == -32602, cursor


def test_resources_templates_and_not_found() -> None:
    server = Server("s")

    @server.resource("a://static", mime_type="text/plain")
    def static() -> str:
        return "text"

    @server.resource_template("a://items/{id}/data{+rest}")
    def item(id: str, rest: str) -> bytes:
        return f"{id}:{rest}".encode()

    read = lambda uri: run(server.route("resources/read", {"uri": uri}, ctx()))  # noqa: E731
    assert read("a://static").result == {
        "contents": [{"uri": "a://static", "text": "text", "mimeType": "text/plain"}]
    }
    blob = read("a://items/7/data/x/y").result["contents"][0]  # type: ignore[index]
    assert blob["uri"] == "a://items/7/data/x/y" and base64.b64decode(blob["blob"]) == b"7:/x/y"
    assert read("a://nothing").error == (-32002, "Resource not found: a://nothing", {"uri": "a://nothing"})


def test_prompts_check_required_arguments() -> None:
    server = Server("s")

    @server.prompt()
    def hello(name: str, tone: str = "warm") -> str:
        return f"Say hello to {name}, {tone}."

    listed = run(server.route("prompts/list", {}, ctx())).result
    assert listed == {
        "prompts": [
            {
                "name": "hello",
                "arguments": [{"name": "name", "required": True}, {"name": "tone", "required": False}],
            }
        ]
    }
    assert run(server.route("prompts/get", {"name": "hello"}, ctx())).error[0] == -32602  # type: ignore[index]
    got = run(server.route("prompts/get", {"name": "hello", "arguments": {"name": "Ada"}}, ctx())).result
    assert got == {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Say hello to Ada, warm."}}]
    }


def test_completions() -> None:
    server = Server("s")

    @server.prompt()
    def hello(name: str) -> str:
        return name

    @server.completion(prompt="hello", argument="name")
    def names(value: str, arguments: dict[str, str]) -> list[str]:
        return [n for n in ("Ada", "Alan", "Bob") if n.startswith(value)]

    assert server.capabilities()["completions"] == {}
    params = {"ref": {"type": "ref/prompt", "name": "hello"}, "argument": {"name": "name", "value": "A"}}
    assert run(server.route("completion/complete", params, ctx())).result == {
        "completion": {"values": ["Ada", "Alan"], "total": 2, "hasMore": False}
    }
    other = {"ref": {"type": "ref/prompt", "name": "hello"}, "argument": {"name": "tone", "value": ""}}
    assert run(server.route("completion/complete", other, ctx())).result == {
        "completion": {"values": [], "total": 0, "hasMore": False}
    }
    unknown = {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "x", "value": ""}}
    assert run(server.route("completion/complete", unknown, ctx())).error[0] == -32602  # type: ignore[index]


def test_listeners_hear_list_changes() -> None:
    server = Server("s", list_changed=True)
    heard: list[tuple[str, str | None]] = []
    stop = server.add_listener(lambda kind, uri: heard.append((kind, uri)))
    server.tool(name="late")(lambda: "x")
    server.notify_resource_updated("a://1")
    stop()
    server.remove_tool("late")
    assert heard == [("tools", None), ("resource", "a://1")]


def test_capabilities_say_what_was_registered() -> None:
    server = Server("s")
    assert server.capabilities() == {"logging": {}}

    @server.tool
    def t() -> str:
        return ""

    assert server.capabilities() == {"logging": {}, "tools": {"listChanged": False}}


@pytest.mark.parametrize("bad", [{"name": 3}, {}, {"name": "t", "arguments": [1]}])
def test_malformed_tool_calls_are_invalid_params(bad: dict[str, Any]) -> None:
    server = Server("s")
    server.tool(name="t")(lambda: "x")
    assert run(server.route("tools/call", bad, ctx())).error[0] == -32602  # type: ignore[index]


# A tool's plain input schema (what schema_for_signature writes for primitive parameters) is
# checked without the validator when the arguments plainly fit; the verdict must be the
# validator's, whatever the arguments.
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2),
    max_leaves=4,
)
_PLAIN_PROPERTIES = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["string", "integer", "number", "boolean", "null", None]).map(
        lambda kind: {} if kind is None else {"type": kind}
    ),
    max_size=3,
)


@settings(max_examples=300, deadline=None)
@given(
    properties=_PLAIN_PROPERTIES,
    required=st.lists(st.sampled_from(["a", "b", "c"]), max_size=3, unique=True),
    arguments=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), _JSON_VALUES, max_size=4),
)
def test_plain_argument_check_agrees_with_the_validator(
    properties: dict[str, Any], required: list[str], arguments: dict[str, Any]
) -> None:
    import fastjsonschema

    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    server = Server("t", "1")

    @server.tool(input_schema=schema)
    def tool(**kwargs: Any) -> str:
        return "ok"

    entry = server._tools["tool"]
    assert entry.check(arguments) == entry.check(dict(arguments))  # the first call builds the plain check
    assert entry.plain is not None
    try:
        fastjsonschema.compile(schema, use_default=False)(arguments)
    except fastjsonschema.JsonSchemaException as exc:
        assert entry.check(arguments) == str(getattr(exc, "message", exc))
    else:
        assert entry.check(arguments) is None
