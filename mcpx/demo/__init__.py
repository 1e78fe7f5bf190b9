"""The built-in demo server: every kind of MCP content, on the embedding API.

``mcpx demo`` serves it over stdio.  It is the smallest complete example of
``mcpx.server`` and the fixture the conversation suite talks to:

tools      echo, add, tiny_image, tiny_audio, embedded_note, readme_link,
           weather (structured content with an output schema),
           count (progress and log messages), fail (an ``isError`` result),
           sleep and sleep_sync (cancellation and drain, async and threaded),
           ask_name, ask_model, show_roots, confirm_sync (questions to the client)
resources  demo://readme (text), demo://logo.png (binary),
           template demo://greeting/{name}
prompts    greet(name), review(code, language?)
completion greet.name, review.language, demo://greeting/{name}

The package's other fixture, ``mcpx.demo.conformance``, is the profile the
official conformance suite's server leg drives (``mcpx demo --profile
conformance``).
"""

from __future__ import annotations

import struct
import time
import zlib

import anyio

from ..server import Context, Server, ToolError, audio, embedded, image, resource_link

__all__ = ["build_demo_server"]

NAMES = ("Ada", "Alan", "Barbara", "Edsger", "Grace", "Ken", "Margaret")
LANGUAGES = ("python", "rust", "go", "typescript", "c")


def _png_1x1() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    pixel = zlib.compress(b"\x00\x2a\x7f\xff\xff")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixel) + chunk(b"IEND", b"")


def _wav_silence(samples: int = 8) -> bytes:
    data = b"\x00\x00" * samples
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", 36 + len(data))
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + (struct.pack("<I", len(data)) + data)
    )


PNG = _png_1x1()
WAV = _wav_silence()


def build_demo_server() -> Server:
    server = Server(
        "mcpx-demo",
        "0.1.0",
        title="mcpx demo server",
        instructions="A demonstration server: every content type, progress, logging and completions.",
        subscribe=True,
    )

    @server.tool(annotations={"readOnlyHint": True, "title": "Echo"})
    async def echo(text: str) -> str:
        """Return the text you sent."""
        return text

    @server.tool(annotations={"readOnlyHint": True})
    async def add(a: float, b: float) -> str:
        """Add two numbers."""
        total = a + b
        return str(int(total)) if total == int(total) else str(total)

    @server.tool
    async def tiny_image() -> dict[str, object]:
        """A 1x1 PNG image."""
        return image(PNG, "image/png")

    @server.tool
    async def tiny_audio() -> dict[str, object]:
        """A short WAV of silence (an embedded resource for 2024-11-05 clients)."""
        return audio(WAV, "audio/wav")

    @server.tool
    async def embedded_note() -> dict[str, object]:
        """A note as an embedded text resource."""
        return embedded("demo://readme", text=README, mime_type="text/plain")

    @server.tool
    async def readme_link() -> list[object]:
        """A link to the readme resource (a text block for clients before 2025-06-18)."""
        return ["The readme:", resource_link("demo://readme", "readme", mime_type="text/plain")]

    @server.tool(
        title="Weather",
        output_schema={
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "temperature": {"type": "number"},
                "conditions": {"type": "string"},
            },
            "required": ["city", "temperature", "conditions"],
        },
    )
    async def weather(city: str) -> dict[str, object]:
        """Today's (invented) weather, as structured content."""
        return {"city": city, "temperature": 21.5, "conditions": "sunny"}

    @server.tool
    async def count(ctx: Context, to: int = 3) -> str:
        """Count to ``to``, reporting progress and logging each step."""
        for i in range(1, to + 1):
            ctx.report_progress(i, to, f"step {i} of {to}")
            ctx.info(f"counted {i}", logger="demo.count")
            await anyio.sleep(0)
        return f"counted to {to}"

    @server.tool
    async def fail(message: str = "this tool always fails") -> str:
        """Fail with an error result the model can read."""
        raise ToolError(message)

    @server.tool
    async def sleep(seconds: float) -> str:
        """Sleep, then say so (cancel it to see cancellation)."""
        await anyio.sleep(seconds)
        return f"slept {seconds}s"

    @server.tool
    def sleep_sync(seconds: float, ctx: Context) -> str:
        """Sleep in a worker thread, waking early if cancelled (a sync tool)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not ctx.cancelled:
            time.sleep(0.01)
        return f"slept {seconds}s" if not ctx.cancelled else "cancelled"

    @server.tool
    async def ask_name(ctx: Context) -> str:
        """Ask the user their name (elicitation), then greet them."""
        answer = await ctx.elicit("What is your name?", NAME_FORM, key="name")
        if answer.get("action") != "accept":
            return f"No name given ({answer.get('action')})."
        return f"Hello, {answer.get('content', {}).get('name', 'stranger')}!"

    @server.tool
    async def ask_model(question: str, ctx: Context) -> str:
        """Ask the client's model a question (sampling)."""
        answer = await ctx.sample(question, max_tokens=100, key="model")
        content = answer.get("content", {})
        return f"The model says: {content.get('text', '') if isinstance(content, dict) else content}"

    @server.tool
    async def show_roots(ctx: Context) -> str:
        """List the client's roots."""
        roots = await ctx.list_roots(key="roots")
        return "Roots: " + (", ".join(str(r.get("uri")) for r in roots) or "none")

    @server.tool(task_support="optional")
    async def report(seconds: float = 1.0, topic: str = "usage") -> str:
        """Write a slow report; a client that can take tasks gets a task to poll."""
        await anyio.sleep(max(0.0, seconds))
        return f"{topic} report, ready after {seconds}s"

    @server.tool(task_support="optional")
    async def approve(action: str, ctx: Context) -> str:
        """Ask the user to approve ``action`` as a task: the question waits on the task."""
        ctx.promote_to_task()
        question = ctx.question(
            "elicitation/create", {"message": f"Approve {action}?", "requestedSchema": YES_NO}, key="approval"
        )
        answer = (await ctx.ask(question))["approval"]
        approved = answer.get("action") == "accept" and answer.get("content", {}).get("yes") is True
        return f"{action}: {'approved' if approved else 'not approved'}"

    @server.tool
    def confirm_sync(action: str, ctx: Context) -> str:
        """Ask the user to confirm, from a sync tool running in a worker thread."""
        question = ctx.question(
            "elicitation/create", {"message": f"Really {action}?", "requestedSchema": YES_NO}, key="confirm"
        )
        answer = ctx.ask_blocking(question)["confirm"]
        confirmed = answer.get("action") == "accept" and answer.get("content", {}).get("yes") is True
        return f"{action}: {'confirmed' if confirmed else 'not confirmed'}"

    @server.resource("demo://readme", name="readme", title="Read me", mime_type="text/plain")
    def readme() -> str:
        return README

    @server.resource("demo://logo.png", name="logo", mime_type="image/png")
    def logo() -> bytes:
        return PNG

    @server.resource_template("demo://greeting/{name}", name="greeting", mime_type="text/plain")
    def greeting(name: str) -> str:
        return f"Hello, {name}!"

    @server.prompt(title="Greet", description="Greet someone by name")
    def greet(name: str) -> str:
        return f"Please greet {name} warmly."

    @server.prompt(description="Review a piece of code")
    def review(code: str, language: str = "python") -> list[tuple[str, object]]:
        return [
            ("user", f"Review this {language} code:"),
            ("user", {"type": "text", "text": code}),
        ]

    @server.completion(prompt="greet", argument="name")
    def complete_name(value: str, arguments: dict[str, str]) -> list[str]:
        return [n for n in NAMES if n.lower().startswith(value.lower())]

    @server.completion(prompt="review", argument="language")
    def complete_language(value: str, arguments: dict[str, str]) -> list[str]:
        return [lang for lang in LANGUAGES if lang.startswith(value.lower())]

    @server.completion(resource_template="demo://greeting/{name}", argument="name")
    def complete_greeting(value: str, arguments: dict[str, str]) -> list[str]:
        return [n for n in NAMES if n.lower().startswith(value.lower())]

    return server


README = "mcpx demo server: try the tools echo, add, weather and count."
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
YES_NO = {"type": "object", "properties": {"yes": {"type": "boolean"}}, "required": ["yes"]}
