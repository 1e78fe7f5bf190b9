"""``mcpx conformance-client URL``: mcpx's client, driven per scenario for the official suite's client leg.

The suite (``../shared/conformance/client-leg.sh``) starts a mock server per
scenario and runs this command with the scenario's name in
``MCP_CONFORMANCE_SCENARIO``, the revision in
``MCP_CONFORMANCE_PROTOCOL_VERSION`` and, where needed, JSON in
``MCP_CONFORMANCE_CONTEXT``.  Each scenario is a few lines over
``mcpx.client.connect_http``: what the suite checks is how mcpx's client
behaves on the wire.  The authorization scenarios (``auth/*``) are not
handled: mcpx has no OAuth client yet, and says so.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import orjson

from ..core import METHOD_NOT_FOUND, Revision
from ..core.revisions import parse_revision
from . import Client, McpCallError, connect_http
from .skills import SkillError, list_skills, load_skill

__all__ = ["main"]

Scenario = Callable[[Client, Mapping[str, Any]], Awaitable[None]]


async def _defaults(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
    """Answer a question the way a user who accepts every default would."""
    if method == "elicitation/create":
        schema = params.get("requestedSchema")
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        content = {
            name: prop["default"]
            for name, prop in (props or {}).items()
            if isinstance(prop, Mapping) and "default" in prop
        }
        return {"action": "accept", "content": content}
    if method == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "mcpx-conformance"}
    if method == "roots/list":
        return {"roots": []}
    raise McpCallError(
        {"code": METHOD_NOT_FOUND, "message": f"mcpx's conformance client cannot answer {method}"}
    )


async def _list_and_call_each(client: Client, context: Mapping[str, Any]) -> None:
    tools = await client.list_tools()
    for tool in tools:
        if tool.get("name") == "add_numbers":
            await client.call_tool("add_numbers", {"a": 5, "b": 3})


async def _initialize_only(client: Client, context: Mapping[str, Any]) -> None:
    await client.list_tools()


def _calling(name: str, arguments: Mapping[str, Any] | None = None) -> Scenario:
    async def run(client: Client, context: Mapping[str, Any]) -> None:
        await client.list_tools()
        await client.call_tool(name, arguments or {})

    return run


async def _mrtr(client: Client, context: Mapping[str, Any]) -> None:
    tools = {t["name"] for t in await client.list_tools()}
    for name in (
        "test_mrtr_echo_state",
        "test_mrtr_unrelated",
        "test_mrtr_no_state",
        "test_mrtr_no_result_type",
    ):
        if name in tools:
            with contextlib.suppress(McpCallError):  # the suite judges the wire, not our reaction
                await client.call_tool(name, {})


async def _custom_headers(client: Client, context: Mapping[str, Any]) -> None:
    await client.list_tools()
    for call in context.get("toolCalls") or []:
        if isinstance(call, Mapping) and isinstance(call.get("name"), str):
            with contextlib.suppress(McpCallError):
                await client.call_tool(call["name"], call.get("arguments") or {})


async def _invalid_tool_headers(client: Client, context: Mapping[str, Any]) -> None:
    tools = {t["name"] for t in await client.list_tools()}
    if "valid_tool" in tools:
        await client.call_tool("valid_tool", {})


async def _schema_echo(client: Client, context: Mapping[str, Any]) -> None:
    tools = {t["name"]: t for t in await client.list_tools()}
    source = tools.get("json_schema_2020_12_tool")
    if source is not None and "json_schema_echo" in tools:
        await client.call_tool("json_schema_echo", {"schema": source.get("inputSchema")})


async def _skills_no_prefetch(client: Client, context: Mapping[str, Any]) -> None:
    """List the skills and stop: listing reads no skill file (SEP-2640 "Lazy Retrieval")."""
    entries = await list_skills(client, on_invalid=_report_invalid_skill)
    print(f"mcpx conformance-client: {len(entries)} skill(s) listed, none loaded", file=sys.stderr)


async def _skills_load_first(client: Client, context: Mapping[str, Any]) -> None:
    """Load the first listed skill; the suite serves a tampered SKILL.md, so verification must refuse it."""
    entries = await list_skills(client, on_invalid=_report_invalid_skill)
    if not entries:
        return
    try:
        skill = await load_skill(client, entries[0])
    except SkillError as exc:  # expected here: the refused skill's other files are never read
        print(f"mcpx conformance-client: skill not loaded: {exc}", file=sys.stderr)
        return
    # Loaded: its other files are read only when needed, and nothing here needs them.
    print(f"mcpx conformance-client: skill {skill.entry.name} loaded and verified", file=sys.stderr)


def _report_invalid_skill(exc: SkillError) -> None:
    print(f"mcpx conformance-client: skill entry ignored: {exc}", file=sys.stderr)


SCENARIOS: dict[str, Scenario] = {
    "initialize": _initialize_only,
    "tools_call": _list_and_call_each,
    "elicitation-sep1034-client-defaults": _calling("test_client_elicitation_defaults"),
    "sse-retry": _calling("test_reconnection"),
    "request-metadata": _list_and_call_each,
    "sep-2322-client-request-state": _mrtr,
    "http-standard-headers": _list_and_call_each,
    "http-custom-headers": _custom_headers,
    "http-invalid-tool-headers": _invalid_tool_headers,
    "json-schema-ref-no-deref": _initialize_only,
    "json-schema-2020-12-preservation": _schema_echo,
    "sep-2640-client-no-prefetch": _skills_no_prefetch,
    "sep-2640-client-verify-digest": _skills_load_first,
    "sep-2640-client-verify-size": _skills_load_first,
    "sep-2640-client-verify-frontmatter": _skills_load_first,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: mcpx conformance-client URL (scenario in MCP_CONFORMANCE_SCENARIO)", file=sys.stderr)
        return 2
    url = args[0]
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25")
    context: Mapping[str, Any] = orjson.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    scenario = SCENARIOS.get(name)
    if scenario is None:
        print(
            f"mcpx conformance-client: scenario {name!r} is not supported (auth/* needs an OAuth client)",
            file=sys.stderr,
        )
        return 1
    try:
        revision = parse_revision(version)
    except ValueError:
        revision = Revision.V2025_11_25
    modern = revision.is_modern

    async def run() -> None:
        async with connect_http(
            url,
            modern=modern,
            offer=None if modern else revision,
            capabilities={"elicitation": {"form": {}}, "sampling": {}, "roots": {}},
            resolver=_defaults,
            client_info={"name": "mcpx-conformance-client", "version": "0.1.0"},
        ) as client:
            await scenario(client, context)

    try:
        anyio.run(run)
    except McpCallError as exc:
        print(f"mcpx conformance-client: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
