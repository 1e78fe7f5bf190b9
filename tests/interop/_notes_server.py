"""A small stdio MCP server that offers a prompt, resources and a template, and declares no completions.

The upstream /v1/complete must not ask (tests/interop/test_daemon_complete.py):
its notes are listed as resources ``notes://<folder>/<name>`` under the
template ``notes://{folder}/{name}``, so what mcpx's catalog knows of the
template's variables is exactly the listed notes.

Run it as ``python -m tests.interop._notes_server``.
"""

from __future__ import annotations

from collections.abc import Callable

from mcpx.drivers import serve_stdio
from mcpx.server import Server

NOTES = {("work", "budget"): "numbers", ("work", "backlog"): "tasks", ("home", "bread"): "flour"}


def _reader(text: str) -> Callable[[], str]:
    def read() -> str:
        return text

    return read


def build_notes_server() -> Server:
    server = Server("notes", "1.0.0")
    for (folder, name), text in NOTES.items():
        server.resource(f"notes://{folder}/{name}", name=name, mime_type="text/plain")(_reader(text))

    @server.resource_template("notes://{folder}/{name}", name="note", mime_type="text/plain")
    def note(folder: str, name: str) -> str:
        return NOTES.get((folder, name), "")

    @server.prompt(description="Summarize one note")
    def summarize(folder: str, name: str) -> str:
        return f"Summarize the note {folder}/{name}."

    return server


if __name__ == "__main__":
    serve_stdio(build_notes_server())
