"""The `conformance` profile of the demo server: the official suite's fixtures, by their names.

``mcpx demo --profile conformance`` serves this server so the official MCP
conformance suite's server leg (``../shared/conformance/server-leg.sh``) can
drive mcpx.  The suite expects fixtures under exact names with exact payloads
(its scenario descriptions); they live here, apart from the friendly default
demo.  Every scenario of the three default legs passes against it, the
tasks-extension ones included (``.ci/run`` runs the leg on each event loop).
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson

from ..core import INTERNAL_ERROR
from ..server import Context, McpError, Server, ToolError, audio, embedded, image, text
from . import PNG, WAV

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

    # -- questions to the client (server requests, or input_required rounds) -----

    @server.tool(description="Asks the client's model (sampling/createMessage)")
    async def test_sampling(prompt: str, ctx: Context) -> str:
        answer = await ctx.sample(prompt, max_tokens=100)
        text = answer.get("content", {}).get("text") if isinstance(answer.get("content"), dict) else answer
        return f"LLM response: {text}"

    @server.tool(description="Asks the user for a username and an email (elicitation/create)")
    async def test_elicitation(message: str, ctx: Context) -> str:
        answer = await ctx.elicit(message, USER_SCHEMA)
        return f"User response: action={answer.get('action')}, content={_json(answer.get('content'))}"

    @server.tool(description="Asks with defaults for every primitive type (SEP-1034)")
    async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
        answer = await ctx.elicit("Please review and update the form fields with defaults", DEFAULTS_SCHEMA)
        return f"Elicitation completed: action={answer.get('action')}, content={_json(answer.get('content'))}"

    @server.tool(description="Asks with the five enum schema shapes (SEP-1330)")
    async def test_elicitation_sep1330_enums(ctx: Context) -> str:
        answer = await ctx.elicit("Please select options from the enum fields", ENUMS_SCHEMA)
        return f"Elicitation completed: action={answer.get('action')}, content={_json(answer.get('content'))}"

    @server.tool(description="Needs the client's sampling capability; refused (-32021) without it")
    async def test_missing_capability(ctx: Context) -> str:
        answer = await ctx.sample("Say hello", max_tokens=20)
        return f"sampled: {_json(answer.get('content'))}"

    @server.tool(
        description="Asks the user while its response streams (never a request on the stream for 2026-07-28)"
    )
    async def test_streaming_elicitation(ctx: Context) -> str:
        ctx.report_progress(0, 1)
        answer = await ctx.elicit(
            "Streaming question", {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        )
        return f"answered: {answer.get('action')}"

    @server.tool(description="One elicitation round (SEP-2322)")
    async def test_input_required_result_elicitation(ctx: Context) -> str:
        answers = await ctx.ask(ctx.question("elicitation/create", NAME_QUESTION, key="user_name"))
        return f"Hello, {_content(answers['user_name']).get('name', 'there')}!"

    @server.tool(description="One sampling round (SEP-2322)")
    async def test_input_required_result_sampling(ctx: Context) -> str:
        answers = await ctx.ask(
            ctx.question("sampling/createMessage", CAPITAL_QUESTION, key="capital_question")
        )
        return f"The model said: {_sampled_text(answers['capital_question'])}"

    @server.tool(description="One roots/list round (SEP-2322)")
    async def test_input_required_result_list_roots(ctx: Context) -> str:
        answers = await ctx.ask(ctx.question("roots/list", {}, key="client_roots"))
        roots = answers["client_roots"].get("roots", []) if isinstance(answers["client_roots"], dict) else []
        return "Roots: " + ", ".join(str(r.get("uri")) for r in roots if isinstance(r, dict))

    @server.tool(description="A round whose requestState must come back (SEP-2322)")
    async def test_input_required_result_request_state(ctx: Context) -> str:
        await ctx.ask(ctx.question("elicitation/create", CONFIRM_QUESTION, key="confirm"))
        return "state-ok: the requestState came back and verified"

    @server.tool(description="Three questions in one round (SEP-2322)")
    async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
        answers = await ctx.ask(
            ctx.question("elicitation/create", NAME_QUESTION, key="user_name"),
            ctx.question("sampling/createMessage", GREETING_QUESTION, key="greeting"),
            ctx.question("roots/list", {}, key="client_roots"),
        )
        return f"Got {', '.join(sorted(answers))}"

    @server.tool(description="Two rounds, one after the other (SEP-2322)")
    async def test_input_required_result_multi_round(ctx: Context) -> str:
        first = await ctx.ask(ctx.question("elicitation/create", STEP1_QUESTION, key="step1"))
        second = await ctx.ask(ctx.question("elicitation/create", STEP2_QUESTION, key="step2"))
        name = _content(first["step1"]).get("name")
        color = _content(second["step2"]).get("color")
        return f"{name} likes {color}"

    @server.tool(description="A round whose requestState is signed (a tampered one is refused)")
    async def test_input_required_result_tampered_state(ctx: Context) -> str:
        await ctx.ask(ctx.question("elicitation/create", CONFIRM_QUESTION, key="confirm"))
        return "the requestState verified"

    @server.tool(description="Asks only what the client declared it can answer (SEP-2322)")
    async def test_input_required_result_capabilities(ctx: Context) -> str:
        caps = ctx.client_capabilities
        questions = []
        if "elicitation" in caps:
            questions.append(ctx.question("elicitation/create", NAME_QUESTION, key="user_name"))
        if "sampling" in caps:
            questions.append(ctx.question("sampling/createMessage", GREETING_QUESTION, key="greeting"))
        if "roots" in caps:
            questions.append(ctx.question("roots/list", {}, key="client_roots"))
        if not questions:
            return "the client declared nothing to ask"
        answers = await ctx.ask(*questions)
        return f"Got {', '.join(sorted(answers))}"

    @server.prompt(description="A prompt that asks for context first (SEP-2322)")
    async def test_input_required_result_prompt(ctx: Context) -> str:
        answers = await ctx.ask(ctx.question("elicitation/create", CONTEXT_QUESTION, key="user_context"))
        return f"Use this context: {_content(answers['user_context']).get('context', '')}"

    # -- tasks (the io.modelcontextprotocol/tasks extension; 2025-11-25 core tasks) --

    @server.tool(description="Greets by name; never a task")
    def greet(name: str) -> str:
        return f"Hello, {name}!"

    @server.tool(
        description="Sleeps `seconds`, then answers; a task once it has run a moment", task_support="optional"
    )
    async def slow_compute(seconds: float = 1.0, label: str = "job") -> str:
        await anyio.sleep(max(0.0, float(seconds)))
        return f"{label}: computed after {seconds} s"

    @server.tool(description="Always a task; fails as a tool after about a second", task_support="required")
    async def failing_job() -> str:
        await anyio.sleep(1.0)
        raise ToolError("failing_job failed, as it always does")

    @server.tool(description="Always a task; ends in a protocol error", task_support="required")
    async def protocol_error_job() -> str:
        await anyio.sleep(0.1)
        raise McpError(INTERNAL_ERROR, "protocol_error_job broke down, as it always does")

    @server.tool(description="A task that asks before deleting a file", task_support="optional")
    async def confirm_delete(ctx: Context, filename: str) -> str:
        ctx.promote_to_task()  # the question waits on tasks/get, not inline
        answers = await ctx.ask(ctx.question("elicitation/create", _delete_question(filename), key="confirm"))
        confirmed = (
            _content(answers["confirm"]).get("confirm") and answers["confirm"].get("action") == "accept"
        )
        return f"{'Deleted' if confirmed else 'Kept'} {filename}"

    @server.tool(description="A task that asks two things at once", task_support="optional")
    async def multi_input(ctx: Context) -> str:
        ctx.promote_to_task()
        answers = await ctx.ask(
            ctx.question("elicitation/create", NAME_QUESTION, key="name"),
            ctx.question("elicitation/create", _form("Proceed?", "confirm", "boolean"), key="confirm"),
        )
        return "Got " + ", ".join(f"{k}={_json(_content(v))}" for k, v in sorted(answers.items()))

    @server.tool(description="Asks a name inline, then runs as a task that uses it", task_support="required")
    async def test_tool_with_task(ctx: Context) -> str:
        answers = await ctx.ask(ctx.question("elicitation/create", NAME_QUESTION, key="user_name"))
        return f"Hello, {_content(answers['user_name']).get('name', 'there')}! (from a task)"

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


USER_SCHEMA = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}
DEFAULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    },
}
ENUMS_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


def _form(message: str, prop: str, kind: str = "string") -> dict[str, Any]:
    return {
        "message": message,
        "requestedSchema": {"type": "object", "properties": {prop: {"type": kind}}, "required": [prop]},
    }


NAME_QUESTION = _form("What is your name?", "name")
CONFIRM_QUESTION = _form("Please confirm", "ok", "boolean")
STEP1_QUESTION = _form("Step 1: What is your name?", "name")
STEP2_QUESTION = _form("Step 2: What is your favorite color?", "color")
CONTEXT_QUESTION = _form("What context should the prompt use?", "context")
CAPITAL_QUESTION = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
    "maxTokens": 100,
}
GREETING_QUESTION = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}],
    "maxTokens": 50,
}


def _delete_question(filename: str) -> dict[str, Any]:
    return _form(f"Delete {filename}?", "confirm", "boolean")


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _content(answer: Any) -> dict[str, Any]:
    content = answer.get("content") if isinstance(answer, dict) else None
    return content if isinstance(content, dict) else {}


def _sampled_text(answer: Any) -> str:
    content = answer.get("content") if isinstance(answer, dict) else None
    if isinstance(content, dict):
        return str(content.get("text", ""))
    if isinstance(content, list):
        return " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return ""


async def _dynamic() -> str:
    return "dynamic"


def _dynamic_prompt() -> str:
    return "A prompt added at run time."
