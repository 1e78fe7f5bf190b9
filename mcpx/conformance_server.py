"""The `conformance` profile of the demo server: the official suite's fixtures, by their names.

``mcpx demo --profile conformance`` serves this server so the official MCP
conformance suite's server leg (``../shared/conformance/server-leg.sh``) can
drive mcpx.  The suite expects fixtures under exact names with exact payloads
(its scenario descriptions); they live here, apart from the friendly default
demo.  Fixtures that ask the client questions (sampling, elicitation, roots,
``input_required``) or run as tasks arrive with those features and are not
published before then — see ``tests/conformance/expected-failures.*.yml``.
"""

from __future__ import annotations

from typing import Any

import anyio

from .demo import PNG, WAV
from .server import Context, Server, ToolError, audio, embedded, image, text

__all__ = ["build_conformance_server"]

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def build_conformance_server() -> Server:
    server = Server(
        "mcpx-conformance",
        "0.1.0",
        title="mcpx conformance fixtures",
        list_changed=True,
        subscribe=True,
        # The suite probes schemas this fixture publishes as data; the tools
        # that take arguments check them themselves.
        validate_arguments=False,
    )

    # -- content ---------------------------------------------------------------

    @server.tool(description="Returns simple text")
    async def test_simple_text() -> str:
        return "This is a simple text response for testing."

    @server.tool(description="Returns an image")
    async def test_image_content() -> dict[str, Any]:
        return image(PNG, "image/png")

    @server.tool(description="Returns audio")
    async def test_audio_content() -> dict[str, Any]:
        return audio(WAV, "audio/wav")

    @server.tool(description="Returns an embedded resource")
    async def test_embedded_resource() -> dict[str, Any]:
        return embedded(
            "test://embedded-resource", text="This is an embedded resource content.", mime_type="text/plain"
        )

    @server.tool(description="Returns text, an image and an embedded resource")
    async def test_multiple_content_types() -> list[Any]:
        return [
            text("Multiple content types test:"),
            image(PNG, "image/png"),
            embedded(
                "test://mixed-content-resource",
                text='{"test":"data","value":123}',
                mime_type="application/json",
            ),
        ]

    @server.tool(description="Always fails with an error result")
    async def test_error_handling() -> str:
        raise ToolError("This tool intentionally returns an error for testing")

    # -- notifications -----------------------------------------------------------

    @server.tool(description="Sends three log messages while it runs")
    async def test_tool_with_logging(ctx: Context) -> str:
        ctx.info("Tool execution started")
        await anyio.sleep(0.05)
        ctx.info("Tool processing data")
        await anyio.sleep(0.05)
        ctx.info("Tool execution completed")
        return "Tool with logging executed successfully"

    @server.tool(description="Logs when it runs (only to a request that set a log level)")
    async def test_logging_tool(ctx: Context) -> str:
        ctx.info("test_logging_tool ran")
        return "logged"

    @server.tool(description="Reports progress 0, 50 and 100 of 100")
    async def test_tool_with_progress(ctx: Context) -> str:
        for step in (0, 50, 100):
            ctx.report_progress(step, 100)
            if step < 100:
                await anyio.sleep(0.05)
        return "Tool with progress executed successfully"

    @server.tool(description="Closes its SSE stream mid-call; the client resumes it to get the result")
    async def test_reconnection(ctx: Context) -> str:
        await anyio.sleep(0.05)
        ctx.close_stream()
        await anyio.sleep(0.4)
        return "Reconnection test completed"

    # -- schemas and headers -----------------------------------------------------

    @server.tool(
        name="json_schema_2020_12_tool",
        description="Tool with JSON Schema 2020-12 features",
        input_schema=JSON_SCHEMA_2020_12,
    )
    async def json_schema_tool(**arguments: Any) -> str:
        return "ok"

    @server.tool(
        description="Echoes its region, which 2026-07-28 HTTP clients mirror in Mcp-Param-Region",
        input_schema={
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"],
        },
    )
    async def test_x_mcp_header(region: str) -> str:
        return f"region: {region}"

    # -- list changes ------------------------------------------------------------

    @server.tool(description="Adds test_dynamic_tool to the tool list")
    async def test_trigger_tool_change() -> str:
        server.tool(name="test_dynamic_tool", description="Added by test_trigger_tool_change")(_dynamic)
        return "tool list changed"

    @server.tool(description="Adds test_dynamic_prompt to the prompt list")
    async def test_trigger_prompt_change() -> str:
        server.prompt("test_dynamic_prompt", description="Added by test_trigger_prompt_change")(
            _dynamic_prompt
        )
        return "prompt list changed"

    # -- resources ---------------------------------------------------------------

    @server.resource(
        "test://static-text", name="static-text", description="A static text resource", mime_type="text/plain"
    )
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource(
        "test://static-binary",
        name="static-binary",
        description="A static binary resource",
        mime_type="image/png",
    )
    def static_binary() -> bytes:
        return PNG

    @server.resource(
        "test://watched-resource",
        name="watched-resource",
        description="A resource to subscribe to",
        mime_type="text/plain",
    )
    def watched() -> str:
        return "Watched resource content."

    @server.resource_template(
        "test://template/{id}/data",
        name="template",
        description="A templated resource",
        mime_type="application/json",
    )
    def template(id: str) -> str:
        return f'{{"id":"{id}","templateTest":true,"data":"Data for ID: {id}"}}'

    # -- prompts -----------------------------------------------------------------

    @server.prompt(description="A simple prompt without arguments")
    def test_simple_prompt() -> str:
        return "This is a simple prompt for testing."

    @server.prompt(
        description="A prompt with two required arguments",
        arguments=[
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
    )
    def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @server.prompt(
        description="A prompt with an embedded resource",
        arguments=[{"name": "resourceUri", "description": "URI of the resource to embed", "required": True}],
    )
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[tuple[str, Any]]:
        return [
            (
                "user",
                embedded(resourceUri, text="Embedded resource content for testing.", mime_type="text/plain"),
            ),
            ("user", "Please process the embedded resource above."),
        ]

    @server.prompt(description="A prompt with an image")
    def test_prompt_with_image() -> list[tuple[str, Any]]:
        return [("user", image(PNG, "image/png")), ("user", "Please analyze the image above.")]

    @server.completion(prompt="test_prompt_with_arguments", argument="arg1")
    def complete_arg1(value: str, arguments: dict[str, str]) -> list[str]:
        return [v for v in ("paris", "park", "party") if v.startswith(value)]

    return server


async def _dynamic() -> str:
    return "dynamic"


def _dynamic_prompt() -> str:
    return "A prompt added at run time."
