"""The official Python SDK's dual-era stdio server with a tool that asks its client a question.

``confirm`` elicits a word with ``ctx.elicit`` (mcp 2.3.0, the version
pyproject pins) and answers with it.  The SDK can ask only over a legacy
session: on 2026-07-28 its request context has no back-channel, so the
tool fails there.  mcpx must therefore reach it over a legacy session for a
legacy host (spec/gateway.md, the era of an upstream).

Run it as ``python tests/interop/_sdk_eliciting_server.py``.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

app = MCPServer("sdk-eliciting", version="0.1.0")


class Word(BaseModel):
    word: str


@app.tool()
async def confirm(ctx: Context) -> str:
    """Ask the client for a word and answer with it."""
    answer = await ctx.elicit("Which word?", schema=Word)
    if answer.action != "accept" or answer.data is None:
        return f"not answered: {answer.action}"
    return f"the word is {answer.data.word}"


if __name__ == "__main__":
    app.run("stdio")
