"""A stdio MCP server whose start can be made slow, chatty or fatal, and which counts its starts.

Forces the faults a real server shows at start (spec/gateway.md §7, "A server
that fails to start is quoted", and §1, "A server still starting"), before it
reads a byte of its stdin:

* ``--starts FILE``: append this process's pid to ``FILE`` (one line a start);
* ``--stderr-bytes N``: write ``N`` bytes of log lines on stderr, blocking if
  nobody reads them (a pipe holds 64 KiB);
* ``--sleep S``: take ``S`` seconds to start (a cold ``npx -y``);
* ``--until FILE``: start only once ``FILE`` exists (a slow start that the
  test ends when it has seen what happens meanwhile);
* ``--fatal TEXT --exit N``: write ``TEXT`` on stderr and exit with ``N``;
* ``--revisions A,B``: speak only these MCP revisions (all five by default).

Once up it offers ``echo(text)`` and ``say(text)``, which writes ``text`` as a
line on stderr and answers ``said``.

Run it as ``python -m tests.interop._startup_server [OPTIONS]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from mcpx.core import Revision
from mcpx.drivers import serve_stdio
from mcpx.server import Server

server = Server("startup", "1.0.0")


@server.tool(description="Answer the text given")
def echo(text: str) -> str:
    return text


@server.tool(description="Write the text as a line on stderr")
def say(text: str) -> str:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
    return "said"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=Path)
    parser.add_argument("--stderr-bytes", type=int, default=0)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--until", type=Path)
    parser.add_argument("--fatal")
    parser.add_argument("--exit", type=int, default=1)
    parser.add_argument("--revisions")
    options = parser.parse_args()
    if options.starts is not None:
        with options.starts.open("a") as out:
            out.write(f"{os.getpid()}\n")
    written, n = 0, 0
    while written < options.stderr_bytes:
        line = f"startup log line {n}: {'x' * 60}\n"
        sys.stderr.write(line)
        written, n = written + len(line), n + 1
    sys.stderr.flush()
    if options.fatal is not None:
        sys.stderr.write(options.fatal + "\n")
        sys.stderr.flush()
        raise SystemExit(options.exit)
    time.sleep(options.sleep)  # slow to start: the fault under test, not a synchronisation
    while options.until is not None and not options.until.exists():
        time.sleep(0.02)  # starting until the test says: the fault under test, in the server
    if options.revisions is None:
        serve_stdio(server)
    else:
        revisions = [Revision(r) for r in options.revisions.split(",")]
        serve_stdio(server, config=server.session_config(revisions=revisions))


if __name__ == "__main__":
    main()
