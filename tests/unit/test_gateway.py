"""The gateway's surface (``mcpx.core.gateway``): both modes, routing, URIs, cursors, schemas.

The rules are spec/gateway.md §1 (the surface in gateway mode: "Resources and
templates" for percent-encoding, "URIs inside results" for results carried
verbatim with their URIs rewritten, "Cursors" for invalid ones) and §2
(pass-through).  The tool definitions and every list and answer the surface
builds are checked in strict mode against each revision's official schema,
after ``downgrade`` (and ``envelope`` for 2026-07-28), as a host on that
revision would receive them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest

from mcpx.core import INVALID_PARAMS, RESOURCE_NOT_FOUND, LocalProtocolError, Revision
from mcpx.core.downgrade import Ages, downgrade, envelope
from mcpx.core.gateway import (
    Answer,
    GatewayError,
    GatewaySurface,
    OwnResource,
    Page,
    Route,
    UpstreamCatalog,
)
from mcpx.core.gateway_tools import (
    GATEWAY_TOOL_NAMES,
    gateway_tools,
    narrowed_capabilities,
)
from mcpx.core.gateway_uris import (
    McpxUriError,
    mcpx_uri,
    mcpx_uri_template,
    parse_mcpx_uri,
    rewrite_result_uris,
    template_matches,
)
from mcpx.core.revisions import REVISIONS
from tests.conftest import schemas_dir
from tests.schema_sweep import SchemaSweep

KEY = b"k" * 32
SERVER_INFO = {"name": "mcpx", "version": "0.1.0"}


def _tool(name: str, description: str = "", **extra: Any) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": name, "inputSchema": {"type": "object"}, **extra}
    if description:
        tool["description"] = description
    return tool


DEMO = UpstreamCatalog(
    name="demo",
    revision=Revision.V2025_06_18,
    capabilities={"tools": {}, "prompts": {}, "resources": {"subscribe": True}},
    tools=[
        _tool("echo", "Echo the text back", title="Echo"),
        _tool("read_file", "Read a file from the workspace"),
        _tool("add", "Add two numbers", outputSchema={"type": "object"}),
    ],
    prompts=[{"name": "greet", "description": "Say hello", "arguments": [{"name": "who"}]}],
    resources=[
        {"uri": "file:///tmp/readme.md", "name": "readme", "mimeType": "text/markdown"},
        {"uri": "/abs/doc", "name": "abs"},
    ],
    resource_templates=[{"uriTemplate": "file:///logs/{day}", "name": "logs"}],
)
TASKS = UpstreamCatalog(
    name="tasks",
    revision=Revision.V2026_07_28,
    tools=[
        _tool("slow", "A slow job", execution={"taskSupport": "required"}),
        _tool("echo", "Echo, the other one"),
    ],
    prompts=[{"name": "greet"}, {"name": "plan"}],
    resources=[{"uri": "mem://a", "name": "a"}, {"uri": "file:///tmp/readme.md", "name": "dup"}],
    resource_templates=[{"uriTemplate": "mem://{key}", "name": "mem"}],
)
DOWN = UpstreamCatalog(name="down", status="failed", detail="exited with status 1")


def _surface(*catalogs: UpstreamCatalog, passthrough: tuple[str, ...] = (), **kw: Any) -> GatewaySurface:
    return GatewaySurface(catalogs or (DEMO, TASKS, DOWN), cursor_key=KEY, passthrough=passthrough, **kw)


def _page(value: object) -> Page:
    assert isinstance(value, Page), value
    return value


def _error(value: object) -> GatewayError:
    assert isinstance(value, GatewayError), value
    return value


def _answer(value: object) -> dict[str, Any]:
    assert isinstance(value, Answer), value
    return dict(value.result)


def _route(value: object) -> Route:
    assert isinstance(value, Route), value
    return value


def _names(page: object) -> list[str]:
    return [item["name"] for item in _page(page).items]


# ----------------------------------------------------------------------------
# Gateway mode
# ----------------------------------------------------------------------------


def test_gateway_mode_offers_the_fixed_tool_set() -> None:
    surface = _surface()
    assert _names(surface.list_tools()) == list(GATEWAY_TOOL_NAMES)
    assert _page(surface.list_tools()).next_cursor is None
    assert surface.tools_list_changed is False
    assert [t["name"] for t in gateway_tools()] == list(GATEWAY_TOOL_NAMES)


def test_prompts_are_namespaced_and_kept_verbatim() -> None:
    page = _page(_surface().list_prompts())
    assert [p["name"] for p in page.items] == ["demo_greet", "tasks_greet", "tasks_plan"]
    assert page.items[0] == {**DEMO.prompts[0], "name": "demo_greet"}


def test_resources_and_templates_are_offered_as_mcpx_uris() -> None:
    surface = _surface()
    resources = _page(surface.list_resources()).items
    assert [r["uri"] for r in resources] == [
        "mcpx://demo/file:%2F%2F%2Ftmp%2Freadme.md",
        "mcpx://demo/%2Fabs%2Fdoc",
        "mcpx://tasks/mem:%2F%2Fa",
        "mcpx://tasks/file:%2F%2F%2Ftmp%2Freadme.md",
    ]
    assert resources[0]["mimeType"] == "text/markdown"
    templates = _page(surface.list_resource_templates()).items
    assert [t["uriTemplate"] for t in templates] == [
        "mcpx://demo/file:%2f%2f%2flogs%2f{day}",
        "mcpx://tasks/mem:%2f%2f{key}",
    ]


def test_every_listed_resource_routes_back_to_its_upstream_and_uri() -> None:
    surface = _surface()
    expected = [("demo", r["uri"]) for r in DEMO.resources] + [("tasks", r["uri"]) for r in TASKS.resources]
    for item, (server, uri) in zip(_page(surface.list_resources()).items, expected, strict=True):
        route = _route(surface.route_resource({"uri": item["uri"]}))
        assert (route.server, route.uri, route.method, route.rewrite_uris) == (
            server,
            uri,
            "resources/read",
            True,
        )


def test_an_expanded_gateway_template_reaches_the_upstream() -> None:
    surface = _surface()
    template = _page(surface.list_resource_templates()).items[0]["uriTemplate"]
    expanded = template.replace("{day}", "2026-01-02")  # what a host's RFC 6570 expansion gives
    route = _route(surface.route_resource({"uri": expanded}))
    assert (route.server, route.uri) == ("demo", "file:///logs/2026-01-02")


def test_unknown_tool_is_invalid_params_saying_what_to_do() -> None:
    error = _error(_surface().call_tool({"name": "echo", "arguments": {}}))
    assert error.code == INVALID_PARAMS
    assert "mcpx_search" in error.message and "mcpx_call" in error.message
    assert error.data == {"name": "echo"}
    assert _error(_surface().call_tool({})).code == INVALID_PARAMS


def test_mcpx_call_routes_to_the_upstream_and_rewrites_uris() -> None:
    params = {
        "name": "mcpx_call",
        "arguments": {"server": "demo", "tool": "echo", "arguments": {"text": "hi"}},
        "_meta": {"progressToken": 7},
        "task": {"ttl": 1000},
    }
    route = _route(_surface().call_tool(params))
    assert route == Route(
        server="demo",
        method="tools/call",
        params={"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": 7}},
        rewrite_uris=True,
    )
    assert route.name == "echo" and route.uri is None
    result = {
        "content": [{"type": "resource_link", "uri": "file:///x", "name": "x"}],
        "structuredContent": {"uri": "file:///x"},
        "isError": False,
        "_meta": {"k": 1},
    }
    finished = route.finish(result)
    assert finished["content"][0]["uri"] == "mcpx://demo/file:%2F%2F%2Fx"
    assert finished["structuredContent"] is result["structuredContent"]
    assert finished["_meta"] is result["_meta"] and finished["isError"] is False


def test_mcpx_call_forwards_a_tool_the_catalog_does_not_list() -> None:
    route = _route(
        _surface().call_tool({"name": "mcpx_call", "arguments": {"server": "demo", "tool": "hidden"}})
    )
    assert (route.server, route.name, route.params["arguments"]) == ("demo", "hidden", {})
    # The server decides; if it says -32602, the host is told what to use on the gateway's surface.
    said = "Unknown tool: no tool named 'hidden'; tools/list shows the tools on offer"
    message = route.reword(-32602, said)
    assert "'demo' has no tool named 'hidden'" in message and "mcpx_search" in message, message
    assert "mcpx_describe" in message and message.endswith(f"(the server said: {said})"), message
    assert route.reword(-32603, "boom") == "boom"  # any other error is the server's, verbatim
    listed = _route(
        _surface().call_tool({"name": "mcpx_call", "arguments": {"server": "demo", "tool": "echo"}})
    )
    assert listed.unlisted is None and listed.reword(-32602, "bad text") == "bad text"  # its arguments


def test_mcpx_call_to_an_unknown_server_is_invalid_params_naming_the_servers() -> None:
    """As an unknown tool is: a call that can never work is -32602, in every revision."""
    arguments = {"server": "nope", "tool": "x"}
    for revision in REVISIONS:
        error = _error(_surface().call_tool({"name": "mcpx_call", "arguments": arguments}, revision=revision))
        assert error.code == -32602 and error.data == {"server": "nope", "kind": "unknown-server"}
        assert "'nope'" in error.message and "demo, tasks, down" in error.message
        assert "mcpx_servers" in error.message
        # mcpx_describe says it as it says an unknown tool: a result of its own
        described = _answer(
            _surface().call_tool({"name": "mcpx_describe", "arguments": arguments}, revision=revision)
        )
        assert described["isError"] is True and "'nope'" in described["content"][0]["text"]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"tool": "echo"}, "missing 'server'"),
        ({"server": "demo", "tool": 3}, "'tool' must be a string"),
        ({"server": "demo", "tool": "echo", "arguments": "{}"}, "'arguments' must be an object"),
        ({"server": "demo", "tool": "echo", "args": {}}, "unknown argument 'args'"),
        ("not an object", "arguments must be an object"),
    ],
)
def test_gateway_tool_argument_mistakes_follow_the_revision(arguments: Any, problem: str) -> None:
    params = {"name": "mcpx_call", "arguments": arguments}
    for revision in REVISIONS:
        outcome = _surface().call_tool(params, revision=revision)
        if revision >= Revision.V2025_11_25:
            result = _answer(outcome)
            assert result["isError"] is True and problem in result["content"][0]["text"]
        else:
            error = _error(outcome)
            assert error.code == INVALID_PARAMS and problem in error.message


def test_search_limit_is_bounded() -> None:
    result = _answer(_surface().call_tool({"name": "mcpx_search", "arguments": {"query": "", "limit": 0}}))
    assert result["isError"] is True and "between 1 and 100" in result["content"][0]["text"]
    result = _answer(_surface().call_tool({"name": "mcpx_search", "arguments": {"query": "", "limit": True}}))
    assert result["isError"] is True


def test_mcpx_servers_lists_status_era_revision_and_counts() -> None:
    result = _answer(_surface(passthrough=("tasks",)).call_tool({"name": "mcpx_servers"}))
    servers = result["structuredContent"]["servers"]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert servers[0] == {
        "name": "demo",
        "status": "ready",
        "era": "legacy",
        "revision": "2025-06-18",
        "passthrough": False,
        "tools": 3,
        "prompts": 1,
        "resources": 2,
        "resourceTemplates": 1,
        "capabilities": {"tools": {}, "prompts": {}, "resources": {"subscribe": True}},
    }
    assert (servers[1]["era"], servers[1]["revision"], servers[1]["passthrough"]) == (
        "modern",
        "2026-07-28",
        True,
    )
    assert servers[2]["status"] == "failed" and servers[2]["detail"] == "exited with status 1"
    assert servers[2]["era"] is None and servers[2]["tools"] == 0


def _search(arguments: dict[str, Any], surface: GatewaySurface | None = None) -> dict[str, Any]:
    result = _answer((surface or _surface()).call_tool({"name": "mcpx_search", "arguments": arguments}))
    assert "isError" not in result, result
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return dict(result["structuredContent"])


def test_search_matches_every_word_and_ranks_names_first() -> None:
    found = _search({"query": "echo"})
    assert [(t["server"], t["name"]) for t in found["tools"]] == [("demo", "echo"), ("tasks", "echo")]
    assert found["tools"][0] == {
        "server": "demo",
        "name": "echo",
        "title": "Echo",
        "description": "Echo the text back",
    }
    # "file" is in read_file's name; "read file" needs both words.
    assert [t["name"] for t in _search({"query": "Read FILE"})["tools"]] == ["read_file"]
    assert _search({"query": "read numbers"})["tools"] == []
    # Words in a name beat words in a description.
    ranked = _search(
        {"query": "text"}, _surface(UpstreamCatalog(name="s", tools=[_tool("a", "text"), _tool("text_b")]))
    )
    assert [t["name"] for t in ranked["tools"]] == ["text_b", "a"]


def test_search_filters_by_server_limits_and_lists_all_for_an_empty_query() -> None:
    everything = _search({"query": "  "})
    assert everything["total"] == 5 and len(everything["tools"]) == 5
    limited = _search({"query": "", "limit": 2})
    assert limited["total"] == 5 and [t["name"] for t in limited["tools"]] == ["echo", "read_file"]
    assert [t["server"] for t in _search({"query": "echo", "server": "tasks"})["tools"]] == ["tasks"]
    unknown = _answer(
        _surface().call_tool({"name": "mcpx_search", "arguments": {"query": "x", "server": "zz"}})
    )
    assert unknown["isError"] is True


def test_search_shortens_long_descriptions() -> None:
    surface = _surface(UpstreamCatalog(name="s", tools=[_tool("big", "word " * 200)]))
    description = _search({"query": "big"}, surface)["tools"][0]["description"]
    assert len(description) < 400 and description.endswith("(mcpx_describe shows all)")


def test_describe_returns_the_full_definition() -> None:
    result = _answer(
        _surface().call_tool({"name": "mcpx_describe", "arguments": {"server": "demo", "tool": "add"}})
    )
    assert result["structuredContent"] == {"server": "demo", "tool": DEMO.tools[2]}
    missing = _answer(
        _surface().call_tool({"name": "mcpx_describe", "arguments": {"server": "demo", "tool": "zz"}})
    )
    assert missing["isError"] is True
    assert "echo, read_file, add" in missing["content"][0]["text"]
    down = _answer(
        _surface().call_tool({"name": "mcpx_describe", "arguments": {"server": "down", "tool": "zz"}})
    )
    assert "status: failed" in down["content"][0]["text"]


def test_prompts_route_by_namespace() -> None:
    surface = _surface()
    route = _route(surface.get_prompt({"name": "demo_greet", "arguments": {"who": "x"}, "_meta": {"a": 1}}))
    assert route == Route(
        server="demo",
        method="prompts/get",
        params={"name": "greet", "arguments": {"who": "x"}, "_meta": {"a": 1}},
        rewrite_uris=True,
    )
    # A prompt whose own name has "_" splits at the first one (namespaces have none).
    assert _route(surface.get_prompt({"name": "tasks_do_it"})).name == "do_it"
    error = _error(surface.get_prompt({"name": "nowhere_greet"}))
    assert error.code == INVALID_PARAMS and "prompts/list" in error.message
    assert _error(surface.get_prompt({"name": "greet"})).code == INVALID_PARAMS
    assert _error(surface.get_prompt({})).code == INVALID_PARAMS


def test_resource_errors_are_precise() -> None:
    surface = _surface()
    unknown = _error(surface.route_resource({"uri": "mcpx://ghost/x"}))
    assert unknown.code == RESOURCE_NOT_FOUND and unknown.data == {"uri": "mcpx://ghost/x"}
    assert "'ghost'" in unknown.message and "demo, tasks, down" in unknown.message
    malformed = _error(surface.route_resource({"uri": "mcpx://demo/%zz"}))
    assert malformed.code == INVALID_PARAMS and "two hex digits" in malformed.message
    no_path = _error(surface.route_resource({"uri": "mcpx://demo"}))
    assert no_path.code == INVALID_PARAMS and "no resource" in no_path.message
    bare = _error(surface.route_resource({"uri": "file:///tmp/readme.md"}))
    assert bare.code == RESOURCE_NOT_FOUND and "mcpx://demo/file:%2F%2F%2Ftmp%2Freadme.md" in bare.message
    templated = _error(surface.route_resource({"uri": "mem://zzz"}))
    assert "mcpx://tasks/mem:%2F%2Fzzz" in templated.message
    nobody = _error(surface.route_resource({"uri": "x:y"}))
    assert "resources/list" in nobody.message
    assert _error(surface.route_resource({})).code == INVALID_PARAMS


def test_own_namespace_and_other_methods() -> None:
    surface = _surface()
    assert surface.route_resource({"uri": "mcpx://mcpx/artifacts%2F1"}) == OwnResource(
        uri="mcpx://mcpx/artifacts%2F1", path="artifacts/1"
    )
    route = _route(surface.route_resource({"uri": "MCPX://demo/mem:x"}, "resources/subscribe"))
    assert (route.method, route.server, route.uri) == ("resources/subscribe", "demo", "mem:x")


# ----------------------------------------------------------------------------
# Pass-through mode
# ----------------------------------------------------------------------------


def test_passthrough_lists_upstream_tools_first_under_their_own_names() -> None:
    surface = _surface(passthrough=("demo",))
    page = _page(surface.list_tools())
    assert [t["name"] for t in page.items] == ["echo", "read_file", "add", *GATEWAY_TOOL_NAMES]
    assert page.items[0] is DEMO.tools[0]  # verbatim
    assert surface.tools_list_changed is True
    route = _route(surface.call_tool({"name": "echo", "arguments": {"t": 1}, "task": {}, "_meta": {"m": 1}}))
    assert route == Route(
        server="demo",
        method="tools/call",
        params={"name": "echo", "arguments": {"t": 1}, "_meta": {"m": 1}},
        rewrite_uris=False,
    )
    result = {"content": [{"type": "resource_link", "uri": "file:///x", "name": "x"}]}
    assert route.finish(result) is result  # pass-through results are verbatim


def test_passthrough_carries_execution_task_support() -> None:
    tools = _page(_surface(passthrough=("tasks",)).list_tools()).items
    assert tools[0] == {**_tool("slow", "A slow job"), "execution": {"taskSupport": "required"}}


def test_a_tool_two_passthrough_upstreams_offer_costs_only_that_name() -> None:
    surface = _surface(passthrough=("demo", "tasks"))
    # Every other tool is listed; the colliding echo is offered once per server, as <server>_echo,
    # each in its server's place and otherwise verbatim.
    tools = _page(surface.list_tools()).items
    assert [t["name"] for t in tools] == [
        "demo_echo",
        "read_file",
        "add",
        "slow",
        "tasks_echo",
        *GATEWAY_TOOL_NAMES,
    ]
    assert tools[0] == {**DEMO.tools[0], "name": "demo_echo"}
    assert tools[4] == {**TASKS.tools[1], "name": "tasks_echo"}
    # Each alias reaches its own server under the server's own name, the host's params kept.
    demo = _route(
        surface.call_tool({"name": "demo_echo", "arguments": {"t": 1}, "task": {}, "_meta": {"m": 1}})
    )
    assert demo == Route(
        server="demo",
        method="tools/call",
        params={"name": "echo", "arguments": {"t": 1}, "_meta": {"m": 1}},
        rewrite_uris=False,
    )
    tasks = _route(surface.call_tool({"name": "tasks_echo", "arguments": {}}))
    assert (tasks.server, tasks.name, tasks.params["arguments"]) == ("tasks", "echo", {})
    assert _route(surface.call_tool({"name": "slow"})).server == "tasks"
    # The bare name is nobody's: a call of it says which aliases to call, and is sent nowhere.
    bare = _error(surface.call_tool({"name": "echo"}))
    assert bare.code == INVALID_PARAMS
    assert "'demo_echo' or 'tasks_echo'" in bare.message and "tools/list" in bare.message
    assert bare.data["collision"] == {
        "kind": "tool",
        "name": "echo",
        "servers": ["demo", "tasks"],
        "offered": [{"server": "demo", "as": "demo_echo"}, {"server": "tasks", "as": "tasks_echo"}],
    }
    # Reported: the surface's collisions, by list, and mcpx_servers.
    assert [(c.kind, c.name) for c in surface.collisions_in("tools")] == [("tool", "echo")]
    servers = _answer(surface.call_tool({"name": "mcpx_servers"}))["structuredContent"]
    (listing,) = [t for t in gateway_tools() if t["name"] == "mcpx_servers"]
    fastjsonschema.compile(listing["outputSchema"], use_default=False)(servers)  # what it declares
    assert [(c["kind"], c["name"]) for c in servers["collisions"]] == [
        ("tool", "echo"),
        ("prompt", "greet"),
        ("resource", "file:///tmp/readme.md"),
    ]
    # Each pass-through tool as the driver reads it before routing: under the name the host calls.
    assert [(shown, server) for shown, server, _ in surface.offered_tools] == [
        ("demo_echo", "demo"),
        ("read_file", "demo"),
        ("add", "demo"),
        ("slow", "tasks"),
        ("tasks_echo", "tasks"),
    ]


def test_a_prompt_two_passthrough_upstreams_offer_is_aliased_the_same_way() -> None:
    surface = _surface(passthrough=("demo", "tasks"))
    assert _names(surface.list_prompts()) == ["demo_greet", "tasks_greet", "plan"]
    route = _route(surface.get_prompt({"name": "tasks_greet", "arguments": {"who": "x"}}))
    assert route == Route(
        server="tasks",
        method="prompts/get",
        params={"name": "greet", "arguments": {"who": "x"}},
        rewrite_uris=False,
    )
    assert _route(surface.get_prompt({"name": "demo_greet"})).params["name"] == "greet"
    assert _route(surface.get_prompt({"name": "plan"})).server == "tasks"
    bare = _error(surface.get_prompt({"name": "greet"}))
    assert bare.code == INVALID_PARAMS and "'demo_greet' or 'tasks_greet'" in bare.message
    assert [c.name for c in surface.collisions_in("prompts")] == ["greet"]


def test_three_way_collisions_alias_every_server() -> None:
    catalogs = [UpstreamCatalog(name=n, tools=[_tool("same"), _tool(f"only-{n}")]) for n in ("a", "b", "c")]
    surface = _surface(*catalogs, passthrough=("a", "b", "c"))
    assert _names(surface.list_tools())[:6] == ["a_same", "only-a", "b_same", "only-b", "c_same", "only-c"]
    (collision,) = surface.collisions
    assert collision.servers == ("a", "b", "c")
    assert "'a', 'b' and 'c'" in collision.describe() and "c's as 'c_same'" in collision.describe()
    assert [_route(surface.call_tool({"name": f"{n}_same"})).server for n in "abc"] == ["a", "b", "c"]


def test_an_alias_never_shadows_a_real_name_it_takes_a_numeric_suffix() -> None:
    # b offers a real "a_echo": a's alias must not take it, whatever the order.
    a = UpstreamCatalog(name="a", tools=[_tool("echo", "a's echo")])
    b = UpstreamCatalog(name="b", tools=[_tool("echo", "b's echo"), _tool("a_echo", "b's real a_echo")])
    c = UpstreamCatalog(name="c", tools=[_tool("a_echo_2", "c's real a_echo_2")])
    for order in [("a", "b", "c"), ("c", "b", "a")]:
        surface = _surface(a, b, c, passthrough=order)
        listed = {t["name"]: t["description"] for t in _page(surface.list_tools()).items}
        assert listed["a_echo"] == "b's real a_echo"
        assert listed["a_echo_2"] == "c's real a_echo_2"
        assert listed["a_echo_3"] == "a's echo" and listed["b_echo"] == "b's echo"
        assert "echo" not in listed
        assert _route(surface.call_tool({"name": "a_echo"})).params["name"] == "a_echo"
        assert _route(surface.call_tool({"name": "a_echo"})).server == "b"
        alias = _route(surface.call_tool({"name": "a_echo_3"}))
        assert (alias.server, alias.name) == ("a", "echo")
        (collision,) = surface.collisions
        assert dict(collision.offered) == {"a": "a_echo_3", "b": "b_echo"}
    # The same catalogs always give the same aliases (built anew per catalog generation).
    assert (
        _surface(a, b, c, passthrough=("a", "b")).collisions
        == _surface(a, b, c, passthrough=("a", "b")).collisions
    )


def test_the_upstream_wins_a_collision_with_a_gateway_tool() -> None:
    shadow = UpstreamCatalog(name="shadow", tools=[_tool("mcpx_search", "the upstream's own search")])
    surface = _surface(shadow, DEMO, passthrough=("shadow",))
    names = _names(surface.list_tools())
    assert names == ["mcpx_search", "mcpx_call", "mcpx_servers", "mcpx_describe"]
    assert _page(surface.list_tools()).items[0]["description"] == "the upstream's own search"
    route = _route(surface.call_tool({"name": "mcpx_search", "arguments": {"query": "x"}}))
    assert (route.server, route.rewrite_uris) == ("shadow", False)
    # Other gateway tools still work and still reach every server.
    assert (
        _route(
            surface.call_tool({"name": "mcpx_call", "arguments": {"server": "demo", "tool": "add"}})
        ).server
        == "demo"
    )


def test_passthrough_forwards_names_it_does_not_list_to_the_first_upstream() -> None:
    surface = _surface(passthrough=("tasks", "demo"))
    only_demo = _surface(DEMO, passthrough=("demo",))
    assert _route(only_demo.call_tool({"name": "diagnostics"})).server == "demo"
    assert _route(only_demo.get_prompt({"name": "hidden"})).server == "demo"
    assert _route(surface.call_tool({"name": "diagnostics"})).server == "tasks"  # the first given
    assert _route(surface.get_prompt({"name": "hidden"})).server == "tasks"


def test_passthrough_prompts_then_namespaced_prompts_upstream_winning() -> None:
    clash = UpstreamCatalog(
        name="clash", prompts=[{"name": "demo_greet", "description": "mine"}, {"name": "solo"}]
    )
    surface = _surface(clash, DEMO, passthrough=("clash",))
    page = _page(surface.list_prompts())
    assert [p["name"] for p in page.items] == ["demo_greet", "solo"]
    assert page.items[0]["description"] == "mine"
    assert _route(surface.get_prompt({"name": "demo_greet"})).server == "clash"
    assert _route(surface.get_prompt({"name": "solo"})) == Route(
        server="clash", method="prompts/get", params={"name": "solo"}, rewrite_uris=False
    )


def test_passthrough_resources_use_their_own_uris_then_mcpx_ones() -> None:
    surface = _surface(passthrough=("tasks", "demo"))
    uris = [r["uri"] for r in _page(surface.list_resources()).items]
    # tasks first (the order given); readme, which both list, bare for tasks, where bare reads go,
    # and as mcpx:// for demo, which that form reaches.
    assert uris == [
        "mem://a",
        "file:///tmp/readme.md",
        "mcpx://demo/file:%2F%2F%2Ftmp%2Freadme.md",
        "/abs/doc",
    ]
    assert _page(surface.list_resources()).items[1]["name"] == "dup"
    assert _page(surface.list_resources()).items[2]["name"] == "readme"
    assert _route(surface.route_resource({"uri": "file:///tmp/readme.md"})).server == "tasks"
    demo = _route(surface.route_resource({"uri": "mcpx://demo/file:%2F%2F%2Ftmp%2Freadme.md"}))
    assert (demo.server, demo.uri) == ("demo", "file:///tmp/readme.md")
    (collision,) = surface.collisions_in("resources")
    assert collision.offered == (
        ("tasks", "file:///tmp/readme.md"),
        ("demo", "mcpx://demo/file:%2F%2F%2Ftmp%2Freadme.md"),
    )
    only_demo = _surface(passthrough=("demo",))
    assert [r["uri"] for r in _page(only_demo.list_resources()).items] == [
        "file:///tmp/readme.md",
        "/abs/doc",
        "mcpx://tasks/mem:%2F%2Fa",
        "mcpx://tasks/file:%2F%2F%2Ftmp%2Freadme.md",
    ]
    assert [t["uriTemplate"] for t in _page(only_demo.list_resource_templates()).items] == [
        "file:///logs/{day}",
        "mcpx://tasks/mem:%2f%2f{key}",
    ]


def test_a_template_two_passthrough_upstreams_list_is_bare_for_the_first_and_mcpx_for_the_other() -> None:
    other = UpstreamCatalog(name="other", resource_templates=[{"uriTemplate": "mem://{key}", "name": "mine"}])
    surface = _surface(TASKS, other, passthrough=("tasks", "other"))
    templates = _page(surface.list_resource_templates()).items
    assert [(t["uriTemplate"], t["name"]) for t in templates] == [
        ("mem://{key}", "mem"),
        ("mcpx://other/mem:%2f%2f{key}", "mine"),
    ]
    assert _route(surface.route_resource({"uri": "mem://x"})).server == "tasks"
    expanded = _route(surface.route_resource({"uri": "mcpx://other/mem:%2F%2Fx"}))
    assert (expanded.server, expanded.uri) == ("other", "mem://x")
    (collision,) = surface.collisions_in("resourceTemplates")
    assert (collision.kind, collision.name, collision.servers) == (
        "resourceTemplate",
        "mem://{key}",
        ("tasks", "other"),
    )


def test_bare_uris_go_to_the_first_upstream_that_lists_or_templates_them() -> None:
    surface = _surface(passthrough=("demo", "tasks"))
    for uri, server in [
        ("file:///tmp/readme.md", "demo"),  # both list it: the first in the order given
        ("mem://a", "tasks"),  # listed by the second only
        ("mem://anything", "tasks"),  # the second's template
        ("file:///logs/monday", "demo"),  # the first's template
        ("file:///logs/a/b", "demo"),  # nobody: the first
        ("zzz:nothing", "demo"),
    ]:
        route = _route(surface.route_resource({"uri": uri, "_meta": {"x": 1}}))
        assert (route.server, route.uri, route.rewrite_uris, route.params["_meta"]) == (
            server,
            uri,
            False,
            {"x": 1},
        )
    reversed_order = _surface(passthrough=("tasks", "demo"))
    assert _route(reversed_order.route_resource({"uri": "file:///tmp/readme.md"})).server == "tasks"
    assert _route(reversed_order.route_resource({"uri": "file:///logs/monday"})).server == "demo"


def test_mcpx_uris_still_reach_every_server_in_passthrough_mode() -> None:
    surface = _surface(passthrough=("demo",))
    route = _route(surface.route_resource({"uri": mcpx_uri("tasks", "mem://a")}))
    assert (route.server, route.uri, route.rewrite_uris) == ("tasks", "mem://a", True)
    route = _route(surface.route_resource({"uri": mcpx_uri("demo", "/abs/doc")}))
    assert (route.server, route.uri) == ("demo", "/abs/doc")
    assert _route(surface.get_prompt({"name": "tasks_plan"})) == Route(
        server="tasks", method="prompts/get", params={"name": "plan"}, rewrite_uris=True
    )


# ----------------------------------------------------------------------------
# Construction
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: UpstreamCatalog(name="Bad_Name"), "cannot be a namespace"),
        (lambda: UpstreamCatalog(name="mcpx"), "mcpx's own namespace"),
        (lambda: UpstreamCatalog(name="a", revision="2025-06-18"), "revision must be a Revision"),  # type: ignore[arg-type]
        (lambda: UpstreamCatalog(name="a", status=""), "status"),
        (lambda: UpstreamCatalog(name="a", tools={"name": "x"}), "sequence"),  # type: ignore[arg-type]
        (lambda: GatewaySurface([DEMO, DEMO], cursor_key=KEY), "two catalogs"),
        (lambda: GatewaySurface([DEMO], cursor_key=KEY, passthrough=("ghost",)), "not a configured server"),
        (lambda: GatewaySurface([DEMO], cursor_key=KEY, passthrough=("demo", "demo")), "twice"),
        (lambda: GatewaySurface([DEMO], cursor_key=KEY, passthrough="demo"), "not one string"),
        (lambda: GatewaySurface([DEMO], cursor_key=b"short"), "16 random bytes"),
        (lambda: GatewaySurface([DEMO], cursor_key=KEY, page_size=0), "positive integer"),
    ],
)
def test_misuse_is_a_local_protocol_error(build: Any, words: str) -> None:
    with pytest.raises(LocalProtocolError, match=words):
        build()


def test_malformed_upstream_entries_are_left_out() -> None:
    odd = UpstreamCatalog(
        name="odd",
        tools=[{"name": 3}, "x", _tool("ok"), _tool("ok", "second")],  # type: ignore[list-item]
        prompts=[{}, {"name": "p"}],
        resources=[{"name": "no uri"}, {"uri": "u:1"}, {"uri": "u:1"}],
        resource_templates=[{"uriTemplate": None}, {"uriTemplate": "u:{x}"}],
    )
    surface = _surface(odd, passthrough=("odd",))
    assert _names(surface.list_tools())[:1] == ["ok"] and len(_page(surface.list_tools()).items) == 5
    assert _page(surface.list_tools()).items[0] == _tool("ok")
    assert _names(surface.list_prompts()) == ["p"]
    assert [r["uri"] for r in _page(surface.list_resources()).items] == ["u:1"]
    assert [t["uriTemplate"] for t in _page(surface.list_resource_templates()).items] == ["u:{x}"]
    servers = _answer(surface.call_tool({"name": "mcpx_servers"}))["structuredContent"]["servers"]
    assert (servers[0]["tools"], servers[0]["resources"]) == (1, 1)


# ----------------------------------------------------------------------------
# mcpx:// URIs and templates
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "uri", "expected"),
    [
        ("demo", "file:///tmp/a b.txt", "mcpx://demo/file:%2F%2F%2Ftmp%2Fa%20b.txt"),
        ("demo", "/abs/doc", "mcpx://demo/%2Fabs%2Fdoc"),
        (
            "demo",
            "https://x.test/a?b=1&c=%20#frag",
            "mcpx://demo/https:%2F%2Fx.test%2Fa%3Fb=1&c=%2520%23frag",
        ),
        ("demo", "été:ü", "mcpx://demo/%C3%A9t%C3%A9:%C3%BC"),
        ("demo", "", "mcpx://demo/"),
        ("demo", "..", "mcpx://demo/.."),
        ("a b", "x", "mcpx://a%20b/x"),
        ("", "x", "mcpx:///x"),
    ],
)
def test_mcpx_uri_encoding(namespace: str, uri: str, expected: str) -> None:
    assert mcpx_uri(namespace, uri) == expected
    assert parse_mcpx_uri(expected) == (namespace, uri)


def test_parse_accepts_either_hex_case_and_refuses_what_it_cannot_read() -> None:
    assert parse_mcpx_uri("mcpx://demo/file:%2f%2F%c3%a9") == ("demo", "file://é")
    for bad, words in [
        ("http://demo/x", "not an mcpx:// URI"),
        ("mcpx://demo", "no resource"),
        ("mcpx://demo/%", "two hex digits"),
        ("mcpx://demo/%2", "two hex digits"),
        ("mcpx://demo/%FF", "not UTF-8"),
        ("mcpx://de%zzmo/x", "server name"),
    ]:
        with pytest.raises(McpxUriError, match=words):
            parse_mcpx_uri(bad)
    with pytest.raises(McpxUriError):
        parse_mcpx_uri(b"mcpx://demo/x")  # type: ignore[arg-type]


def test_templates_keep_expressions_and_encode_literals() -> None:
    assert mcpx_uri_template("demo", "file:///{+path}{?q,r}") == "mcpx://demo/file:%2f%2f%2f{+path}{?q,r}"
    assert mcpx_uri_template("demo", "it's") == "mcpx://demo/it%27s"  # RFC 6570 literals exclude "'"
    assert parse_mcpx_uri(mcpx_uri_template("demo", "plain:%20x'")) == ("demo", "plain:%20x'")
    assert mcpx_uri_template("demo", "a{b") == "mcpx://demo/a%7bb"  # not an expression: literal


@pytest.mark.parametrize(
    ("template", "uri", "matches"),
    [
        ("file:///{name}", "file:///a.txt", True),
        ("file:///{name}", "file:///", True),
        ("file:///{name}", "file:///dir/a.txt", False),  # level 1: {name} stops at "/"
        ("file:///{+path}", "file:///dir/a.txt", True),
        ("file:///{name}.md", "file:///a.md", True),
        ("file:///{name}.md", "file:///a.txt", False),
        ("x://{a}{b}/z", "x://ab/z", True),
        ("x://{/seg}", "x:///a/b", True),
        ("x://y{?q}", "x://y?q=1&r=2", True),
        ("x://y{?q}", "x://y#f", False),
        ("x://y{#f}", "x://y#f/g?h", True),
        ("no-vars", "no-vars", True),
        ("no-vars", "no-vars2", False),
        ("a{x}b{y}c", "a1b2c", True),
        ("a{x}b{y}c", "a1b2", False),
    ],
)
def test_template_matching(template: str, uri: str, matches: bool) -> None:
    assert template_matches(template, uri) is matches


def test_template_matching_is_bounded() -> None:
    assert template_matches("x:{a}", "x:" + "a" * 10_000) is False
    long = "{a}b" * 1000
    assert template_matches(long, "b" * 1000 + "c") is False  # linear, not exponential


# ----------------------------------------------------------------------------
# URIs inside results
# ----------------------------------------------------------------------------


def test_rewriting_reaches_every_resource_uri_in_nested_results() -> None:
    call_result: dict[str, Any] = {
        "content": [
            {"type": "text", "text": "see file:///a"},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///a", "name": "a", "_meta": {"uri": "keep"}},
            {
                "type": "resource",
                "resource": {"uri": "mem://b", "text": "hi"},
                "annotations": {"priority": 1},
            },
            {"type": "resource", "resource": {"uri": "mem://c", "blob": "AA=="}},
            {"type": "future", "uri": "untouched"},
        ],
        "structuredContent": {"type": "resource_link", "uri": "untouched"},
        "isError": False,
    }
    before = copy.deepcopy(call_result)
    out = rewrite_result_uris(call_result, "demo")
    assert call_result == before  # never edited in place
    assert [b["type"] for b in out["content"]] == [b["type"] for b in call_result["content"]]
    assert out["content"][0] is call_result["content"][0] and out["content"][1] is call_result["content"][1]
    assert out["content"][2] == {**call_result["content"][2], "uri": "mcpx://demo/file:%2F%2F%2Fa"}
    assert out["content"][3]["resource"] == {"uri": "mcpx://demo/mem:%2F%2Fb", "text": "hi"}
    assert out["content"][3]["annotations"] == {"priority": 1}
    assert out["content"][4]["resource"]["uri"] == "mcpx://demo/mem:%2F%2Fc"
    assert out["content"][5] is call_result["content"][5]
    assert out["structuredContent"] is call_result["structuredContent"]

    prompt_result: dict[str, Any] = {
        "description": "d",
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "x"}},
            {
                "role": "assistant",
                "content": {"type": "resource", "resource": {"uri": "file:///p", "text": ""}},
            },
            {"role": "user", "content": [{"type": "resource_link", "uri": "file:///q", "name": "q"}]},
        ],
    }
    out = rewrite_result_uris(prompt_result, "demo")
    assert out["messages"][0] is prompt_result["messages"][0]
    assert out["messages"][1]["content"]["resource"]["uri"] == "mcpx://demo/file:%2F%2F%2Fp"
    assert out["messages"][2]["content"][0]["uri"] == "mcpx://demo/file:%2F%2F%2Fq"

    read_result = {"contents": [{"uri": "file:///r", "text": "x"}, {"uri": "file:///s", "blob": "AA=="}]}
    out = rewrite_result_uris(read_result, "demo")
    assert [parse_mcpx_uri(c["uri"]) for c in out["contents"]] == [
        ("demo", "file:///r"),
        ("demo", "file:///s"),
    ]


def test_rewriting_returns_the_same_object_when_nothing_changes() -> None:
    result = {"content": [{"type": "text", "text": "x"}], "messages": [], "contents": []}
    assert rewrite_result_uris(result, "demo") is result
    task = {"task": {"taskId": "t"}}
    assert rewrite_result_uris(task, "demo") is task


def test_a_read_through_the_gateway_comes_back_under_the_uri_the_host_asked_for() -> None:
    surface = _surface()
    asked = _page(surface.list_resources()).items[1]["uri"]
    route = _route(surface.route_resource({"uri": asked}))
    answered = route.finish({"contents": [{"uri": route.uri, "text": "doc"}]})
    assert answered["contents"][0]["uri"] == asked


# ----------------------------------------------------------------------------
# Cursors
# ----------------------------------------------------------------------------


def _many(n: int) -> UpstreamCatalog:
    return UpstreamCatalog(
        name="many",
        tools=[_tool(f"t{i}") for i in range(n)],
        prompts=[{"name": f"p{i}"} for i in range(n)],
        resources=[{"uri": f"u:{i}", "name": str(i)} for i in range(n)],
        resource_templates=[{"uriTemplate": f"u:{i}/{{x}}", "name": str(i)} for i in range(n)],
    )


@pytest.mark.parametrize(
    "method", ["list_tools", "list_prompts", "list_resources", "list_resource_templates"]
)
def test_pages_cover_every_item_exactly_once(method: str) -> None:
    surface = _surface(_many(10), passthrough=("many",), page_size=3)
    whole = _page(getattr(_surface(_many(10), passthrough=("many",)), method)()).items
    seen: list[Any] = []
    cursor = None
    for _ in range(20):
        page = _page(getattr(surface, method)(cursor))
        assert len(page.items) <= 3
        seen.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == list(whole)


def test_an_invalid_cursor_is_invalid_params_never_page_one() -> None:
    surface = _surface(_many(10), passthrough=("many",), page_size=3)
    cursor = _page(surface.list_tools()).next_cursor
    assert cursor is not None
    cases: list[tuple[object, str]] = [
        ("garbage", "not a cursor this gateway issued"),
        (cursor[:-1] + ("A" if cursor[-1] != "A" else "B"), "altered"),
        (cursor + "x", "altered"),
        (3, "must be a string, not int"),
        ({"offset": 3}, "must be a string"),
        ("x" * 1000, "not a cursor"),
        ("é.é", "not a cursor"),
    ]
    for bad, words in cases:
        error = _error(surface.list_tools(bad))
        assert error.code == INVALID_PARAMS and words in error.message, (bad, error)
        assert "without a cursor" in error.message
    assert _error(surface.list_tools("garbage")).data == {"cursor": "garbage"}
    assert _error(surface.list_tools(3)).data is None


def test_a_cursor_for_another_list_key_or_catalog_is_refused() -> None:
    surface = _surface(_many(10), passthrough=("many",), page_size=3)
    tools_cursor = _page(surface.list_tools()).next_cursor
    error = _error(surface.list_prompts(tools_cursor))
    assert "issued by tools/list, not prompts/list" in error.message
    other_key = GatewaySurface([_many(10)], cursor_key=b"o" * 32, passthrough=("many",), page_size=3)
    assert "not issued by this gateway" in _error(other_key.list_tools(tools_cursor)).message
    changed = _surface(_many(11), passthrough=("many",), page_size=3)
    assert "the list changed" in _error(changed.list_tools(tools_cursor)).message
    # The same catalogs under the same key (a rebuilt surface) keep their cursors.
    rebuilt = _surface(_many(10), passthrough=("many",), page_size=3)
    assert _names(rebuilt.list_tools(tools_cursor)) == ["t3", "t4", "t5"]
    assert _page(surface.list_tools(None)).items[0]["name"] == "t0"


# ----------------------------------------------------------------------------
# Strict schema validation, every revision
# ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sweep() -> SchemaSweep:
    root = schemas_dir()
    if not (root / "2025-11-25" / "schema.json").exists():
        pytest.skip(f"official MCP schemas not found at {root}: set MCPX_SCHEMAS")
    return SchemaSweep(Path(root))


def _check(sweep: SchemaSweep, revision: Revision, name: str, value: Any) -> None:
    try:
        sweep._validator(str(revision), name)(copy.deepcopy(value))
    except fastjsonschema.JsonSchemaException as exc:
        raise AssertionError(f"MCP {revision} {name}: {exc}\n{json.dumps(value)[:2000]}") from None


def _as_sent(result: dict[str, Any], method: str, shape: str, revision: Revision) -> Any:
    if revision is Revision.V2026_07_28:
        result = envelope(result, method, SERVER_INFO, Ages())
    return downgrade(result, shape, revision)


@pytest.mark.parametrize("revision", REVISIONS, ids=str)
def test_gateway_tool_definitions_pass_each_revisions_tool_schema(
    sweep: SchemaSweep, revision: Revision
) -> None:
    for tool in gateway_tools():
        _check(sweep, revision, "Tool", downgrade(tool, "Tool", revision))
    if revision is Revision.V2025_11_25:
        assert downgrade(gateway_tools()[0], "Tool", revision)["execution"] == {"taskSupport": "optional"}
    else:
        assert "execution" not in downgrade(gateway_tools()[0], "Tool", revision)


def test_gateway_input_and_output_schemas_are_valid_json_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    for tool in gateway_tools():
        for key in ("inputSchema", "outputSchema"):
            if key in tool:
                jsonschema.Draft7Validator.check_schema(tool[key])
                jsonschema.Draft202012Validator.check_schema(tool[key])
                fastjsonschema.compile(dict(tool[key]), use_default=False)
        assert tool["inputSchema"]["type"] == "object"


@pytest.mark.parametrize("revision", REVISIONS, ids=str)
@pytest.mark.parametrize("passthrough", [(), ("demo",)], ids=["gateway", "passthrough"])
def test_every_list_passes_strict_validation(
    sweep: SchemaSweep, revision: Revision, passthrough: tuple[str, ...]
) -> None:
    """Pass-through entries are the upstream's own (a loose URI stays loose: not mcpx's to fix),
    so the passed-through server here lists valid ones; a server behind the gateway may list
    loose URIs (``/x y``), which its ``mcpx://`` form makes valid."""
    valid = UpstreamCatalog(
        name="demo",
        tools=DEMO.tools,
        prompts=DEMO.prompts,
        resources=[r for r in DEMO.resources if ":" in r["uri"]],
        resource_templates=DEMO.resource_templates,
    )
    loose = UpstreamCatalog(
        name="other",
        prompts=[{"name": "p", "arguments": [{"name": "a", "required": True}]}],
        resources=[{"uri": "/x y", "name": "x"}, {"uri": "it's", "name": "q"}],
        resource_templates=[{"uriTemplate": "/{a}/it's%2F{b}", "name": "t"}],
    )
    surface = _surface(valid, loose, passthrough=passthrough, page_size=2)
    for method, kind, shape in [
        ("tools/list", "list_tools", "ListToolsResult"),
        ("prompts/list", "list_prompts", "ListPromptsResult"),
        ("resources/list", "list_resources", "ListResourcesResult"),
        ("resources/templates/list", "list_resource_templates", "ListResourceTemplatesResult"),
    ]:
        cursor = None
        while True:
            page = _page(getattr(surface, kind)(cursor))
            _check(sweep, revision, shape, _as_sent(page.result(), method, shape, revision))
            cursor = page.next_cursor
            if cursor is None:
                break


@pytest.mark.parametrize("revision", REVISIONS, ids=str)
def test_gateway_answers_pass_strict_validation_and_their_output_schemas(
    sweep: SchemaSweep, revision: Revision
) -> None:
    surface = _surface()
    calls = [
        ("mcpx_servers", {}),
        ("mcpx_search", {"query": "echo"}),
        ("mcpx_describe", {"server": "demo", "tool": "add"}),
        ("mcpx_describe", {"server": "demo", "tool": "missing"}),
        ("mcpx_search", {"query": "x", "server": "missing"}),
    ]
    for name, arguments in calls:
        result = _answer(surface.call_tool({"name": name, "arguments": arguments}, revision=revision))
        _check(sweep, revision, "CallToolResult", _as_sent(result, "tools/call", "CallToolResult", revision))
        if "structuredContent" in result:
            schema = next(t for t in gateway_tools() if t["name"] == name)["outputSchema"]
            fastjsonschema.compile(dict(schema), use_default=False)(
                copy.deepcopy(result["structuredContent"])
            )


def test_narrowed_capabilities_never_declare_what_the_host_did_not() -> None:
    own = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}  # what mcpx declares
    assert narrowed_capabilities(own, {}) == {"roots": {}}
    assert narrowed_capabilities(own, {"sampling": {"tools": {}}, "experimental": {"x": {}}}) == {
        "sampling": {"tools": {}},
        "roots": {},
    }
    assert narrowed_capabilities(own, {"elicitation": {}}) == {"elicitation": {"form": {}}, "roots": {}}
    assert narrowed_capabilities(own, {"elicitation": {"url": {}}, "roots": {"listChanged": True}}) == {
        "elicitation": {"url": {}},
        "roots": {},
    }
    tasks = {"io.modelcontextprotocol/tasks": {}}
    with_tasks = {**own, "extensions": tasks}
    assert narrowed_capabilities(with_tasks, {"extensions": {**tasks, "x.example/other": {}}}) == {
        "extensions": tasks,
        "roots": {},
    }
    assert narrowed_capabilities(with_tasks, {"extensions": {"x.example/other": {}}}) == {"roots": {}}
    assert narrowed_capabilities({"sampling": {}}, {"elicitation": {"form": {}}, "sampling": {}}) == {
        "sampling": {}
    }


def test_a_completion_for_an_alias_or_an_mcpx_form_asks_the_upstream_in_its_own_words() -> None:
    from mcpx.gateway._server import _completion_route

    surface = _surface(passthrough=("demo", "tasks"))
    argument = {"name": "who", "value": "a"}
    prompt = _route(
        _completion_route(
            surface, {"ref": {"type": "ref/prompt", "name": "tasks_greet"}, "argument": argument}
        )
    )
    assert (prompt.server, prompt.params) == (
        "tasks",
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": argument},
    )
    own = _route(_completion_route(surface, {"ref": {"type": "ref/prompt", "name": "plan"}}))
    assert (own.server, own.params["ref"]["name"]) == ("tasks", "plan")
    other = UpstreamCatalog(name="other", resource_templates=[{"uriTemplate": "mem://{key}", "name": "mine"}])
    templated = _surface(TASKS, other, passthrough=("tasks", "other"))
    ref = {"type": "ref/resource", "uri": "mcpx://other/mem:%2f%2f{key}"}
    resource = _route(_completion_route(templated, {"ref": ref, "argument": argument}))
    assert (resource.server, resource.params["ref"]) == (
        "other",
        {"type": "ref/resource", "uri": "mem://{key}"},
    )
    bare = _error(_completion_route(surface, {"ref": {"type": "ref/prompt", "name": "greet"}}))
    assert "'demo_greet' or 'tasks_greet'" in bare.message


def test_what_is_read_of_a_tool_before_routing_is_keyed_by_the_alias_the_host_calls() -> None:
    """``x-mcp-header`` arguments and ``taskSupport`` (read before the call is routed) follow each alias."""
    from mcpx.gateway._catalogs import _tool_hints

    header = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
    a = UpstreamCatalog(
        name="a",
        revision=Revision.V2025_11_25,
        tools=[{"name": "run", "inputSchema": header, "execution": {"taskSupport": "required"}}],
    )
    b = UpstreamCatalog(name="b", revision=Revision.V2026_07_28, tools=[_tool("run")])
    surface = _surface(a, b, passthrough=("a", "b"))
    headers, support = _tool_hints(surface, {"a": a, "b": b})
    assert headers == {"a_run": {"region": "Region"}, "b_run": {}}
    assert support == {"a_run": "required", "b_run": "optional"}
