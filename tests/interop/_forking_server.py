"""A stdio MCP server that starts a process of its own first, as ``npx`` starts ``node``: mcpx's demo server.

The child (a Python that sleeps for ten minutes, its pid written to the file
named on the command line) is what a stopped upstream must not leave behind.

Run it as ``python -m tests.interop._forking_server PIDFILE``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mcpx.demo import build_demo_server
from mcpx.drivers import serve_stdio

if __name__ == "__main__":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.DEVNULL)
    Path(sys.argv[1]).write_text(str(child.pid))
    serve_stdio(build_demo_server())
