"""The daemon's ops API (``/v1``) from the client's side: the requests, their failures and what is printed.

``mcpx call``'s fast path (mcpx/cli/_fast.py) and the typer commands
(mcpx/cli/_gateway.py) both use this module, so that whichever runs, the
daemon sees the same request and the user the same output and the same
messages.  It needs the standard library and orjson only: nothing here may
import typer, anyio or mcpx.core (``tests/interop/test_call_fast_path.py``
checks what a fast ``mcpx call`` imports).

While a call runs with stderr on a terminal, the upstream's progress is
drawn there (``/v1/call`` with ``"progress": true``, read line by line as
application/x-ndjson; mcpx/gateway/_daemon.py describes the answer).
"""

from __future__ import annotations

import http.client
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

__all__ = [
    "Daemon",
    "DaemonError",
    "ProgressLine",
    "call_body",
    "one_line",
    "post_with_progress",
    "refusal",
    "result_lines",
]


class DaemonError(Exception):
    """The daemon could not be reached, or answered with an error; ``str()`` says what to do."""


@dataclass(frozen=True, slots=True)
class Daemon:
    """A daemon's ``/v1`` at ``base`` (``http://host:port``).

    ``remote`` when an endpoint (``--daemon``, ``daemon.endpoint``) named
    it rather than ``<state>/daemon.json``: it changes what a failure advises.
    """

    base: str
    remote: bool = False

    @property
    def hint(self) -> str:
        """What to do when the daemon does not answer."""
        if self.remote:
            return f"check that a daemon listens at {self.base} (`mcpx daemon --port N` there)"
        return "restart it with `mcpx daemon`"

    def request(self, method: str, path: str, body: Any = None, *, timeout: float = 600.0) -> tuple[int, Any]:
        """One request: (HTTP status, JSON body); ``DaemonError`` when there is no JSON answer to read."""
        url = urlsplit(self.base)
        connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=timeout)
        payload = orjson.dumps(body) if body is not None else None
        headers = {"content-type": "application/json"} if payload is not None else {}
        try:
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except OSError as exc:
            raise DaemonError(f"the mcpx daemon at {self.base} did not answer: {exc}; {self.hint}") from None
        finally:
            connection.close()
        try:
            return response.status, orjson.loads(data) if data else None
        except orjson.JSONDecodeError:
            raise DaemonError(
                f"{self.base} answered {response.status} with something that is not JSON; is it an mcpx daemon?"
            ) from None

    def call_showing_progress(self, body: Mapping[str, Any], label: str) -> tuple[int, Any]:
        """``POST /v1/call``, the upstream's progress drawn on stderr as ``label: …`` meanwhile, erased after.

        (HTTP status, JSON answer); ``DaemonError`` when the answer cannot be
        read.  Never retried: the tool may have run.
        """
        line = ProgressLine(label)
        try:
            status, answer = post_with_progress(self.base, body, line.report)
        except (OSError, ValueError, http.client.HTTPException) as exc:
            line.erase()
            raise DaemonError(
                f"the mcpx daemon at {self.base} did not answer the call: {exc}; see its log"
            ) from None
        line.draw()
        line.erase()
        return status, answer


def one_line(message: str) -> str:
    """``message`` as the CLI says it on stderr: ``mcpx: `` and one line."""
    return f"mcpx: {' '.join(message.split())}"


def refusal(status: int, answer: Any) -> tuple[str, int] | None:
    """An error answer's message and the exit code it means (1 for an upstream's 502, else 2); ``None`` below 400."""
    if status < 400:
        return None
    error = (answer or {}).get("error", {}) if isinstance(answer, dict) else {}
    return error.get("message") or f"the daemon answered HTTP {status}", 1 if status == 502 else 2


def call_body(
    server: str,
    tool: str,
    arguments: dict[str, Any],
    timeout: float | None,
    texts: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``POST /v1/call``'s body for ``mcpx call SERVER TOOL``; ``texts`` (``--arg k=v``) go as ``args``."""
    body: dict[str, Any] = {"server": server, "tool": tool, "arguments": arguments}
    if texts:
        body["args"] = texts
    if timeout is not None:
        body["timeout"] = timeout
    return body


def result_lines(result: Mapping[str, Any]) -> list[str]:
    """A tool result for a person (``mcpx call`` on a terminal, without ``--json``): one item per line.

    Text blocks as they are, other blocks named, ``structuredContent`` as
    JSON when there is no content.  Each item is what ``click.echo`` would
    print for the value (``None`` prints nothing).
    """
    lines: list[str] = []
    for block in result.get("content", []):
        if block.get("type") == "text":
            text = block.get("text", "")
            lines.append("" if text is None else text if isinstance(text, str) else str(text))
        else:
            lines.append(f"[{block.get('type')} content; --json shows it]")
    if "structuredContent" in result and not result.get("content"):
        lines.append(orjson.dumps(result["structuredContent"], option=orjson.OPT_INDENT_2).decode())
    return lines


_PROGRESS_REDRAW = 0.05  # seconds between two redraws of the progress line (the last report is always drawn)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


class ProgressLine:
    """One line on stderr (a terminal), redrawn in place with the newest progress report, erased at the end."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.shown = False
        self.drawn_at = 0.0
        self.pending: str | None = None

    def report(self, progress: Any) -> None:
        if not isinstance(progress, dict):
            return
        done, total, message = progress.get("progress"), progress.get("total"), progress.get("message")
        text = f"{self.label}: {_number(done)}"
        if isinstance(total, int | float) and total > 0 and isinstance(done, int | float):
            text += f"/{_number(total)} ({min(100, int(100 * done / total))}%)"
        if isinstance(message, str) and message:
            text += f" {message}"
        self.pending = text
        if time.monotonic() - self.drawn_at >= _PROGRESS_REDRAW:
            self.draw()

    def draw(self) -> None:
        if self.pending is None:
            return
        try:
            width = os.get_terminal_size(sys.stderr.fileno()).columns or 80
        except (OSError, ValueError):
            width = 80
        sys.stderr.write("\r\x1b[K" + self.pending[: max(1, width - 1)])  # a wrapped line would not redraw
        sys.stderr.flush()
        self.shown, self.pending, self.drawn_at = True, None, time.monotonic()

    def erase(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


def post_with_progress(
    base: str, body: Mapping[str, Any], on_progress: Callable[[Any], None]
) -> tuple[int, Any]:
    """POST /v1/call with ``"progress": true`` to the daemon at ``base``: (HTTP status, JSON answer).

    An application/x-ndjson answer is read line by line: each
    ``{"progress": ...}`` line goes to ``on_progress`` and the last line is
    the answer (an error line carries the ``status`` it would have had).
    ``OSError``, ``ValueError`` or ``http.client.HTTPException`` when the
    daemon cannot be reached or its answer cannot be read.
    """
    url = urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=600.0)
    payload = orjson.dumps({**body, "progress": True})
    try:
        connection.request("POST", "/v1/call", body=payload, headers={"content-type": "application/json"})
        response = connection.getresponse()
        if response.getheader("content-type", "").split(";")[0].strip() != "application/x-ndjson":
            data = response.read()
            return response.status, orjson.loads(data) if data else None
        last: Any = None
        for line in response:
            if line.strip():
                last = orjson.loads(line)
                if isinstance(last, dict) and set(last) == {"progress"}:
                    on_progress(last["progress"])
                    last = None
    finally:
        connection.close()
    if last is None:
        raise ValueError("the answer ended before the call's result")
    if isinstance(last, dict) and "error" in last:
        return int(last.get("status", 502)), last
    return response.status, last
