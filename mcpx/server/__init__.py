"""The embedding API: serve your own tools, resources and prompts over every MCP revision.

from mcpx.server import Server, Context
from mcpx.drivers import serve_stdio

server = Server("weather", "1.0")

@server.tool
async def forecast(city: str, ctx: Context) -> str:
    ctx.info(f"looking up {city}")
    return f"Sunny in {city}"

serve_stdio(server)            # or loop="trio", "uvloop", "blocking"
"""

from ._content import ToolResult, audio, embedded, image, resource_link, text, to_call_result
from ._context import (
    Call,
    Context,
    Deferred,
    Invocation,
    McpError,
    Outcome,
    Pending,
    QuestionFailed,
    QuestionRefused,
    RequestCancelled,
    RequestSink,
    ToolError,
)
from ._server import Server

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
    "RequestCancelled",
    "RequestSink",
    "Server",
    "ToolError",
    "ToolResult",
    "audio",
    "embedded",
    "image",
    "resource_link",
    "text",
    "to_call_result",
]
