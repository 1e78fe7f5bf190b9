"""A stdio MCP server whose tool asks its client twice, one question after the other.

``ask_twice`` elicits a first answer, then a second, and returns both; a
question the client could not answer is the tool's error (``isError``), its
message the client's reason.  Over the legacy era each question is an
``elicitation/create`` request; over 2026-07-28 each is a round of its own.

Run it as ``python -m tests.interop._asking_server``.
"""

from __future__ import annotations

from mcpx.drivers import serve_stdio
from mcpx.server import Context, Server

FORM = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}


def build_asking_server() -> Server:
    server = Server("asking", "1.0.0")

    @server.tool(description="Ask for a word, then for another; answer both")
    async def ask_twice(ctx: Context) -> str:
        first = await ctx.elicit("A first word?", FORM, key="first")
        second = await ctx.elicit("A second word?", FORM, key="second")
        return f"{first.get('content', {}).get('word')} {second.get('content', {}).get('word')}"

    return server


if __name__ == "__main__":
    serve_stdio(build_asking_server())
