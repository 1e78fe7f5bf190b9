"""``mcpx``'s entry point (the console script and ``python -m mcpx``): fast paths first, then the typer app.

Most of a short command's time used to go on imports: typer, and through the
commands' modules every protocol machine in ``mcpx.core``.  A command listed
in ``FAST_PATHS`` is offered to a function that imports only what it uses;
it returns the exit code once it has done the command, or ``None`` — having
printed and sent nothing — when argv or the situation is one it does not
handle exactly as the typer command would.  The typer app then runs the
command as before, so what a user sees never depends on which path ran.

A fast path is ``"module:function"`` taking argv after the command name; a
new one is one line here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final

__all__ = ["FAST_PATHS", "main"]

FAST_PATHS: Final[Mapping[str, str]] = {
    "call": "mcpx.cli._fast:call",
    "daemon": "mcpx.cli._daemon_command:daemon",
    "serve": "mcpx.gateway._shim:main",
}


def main() -> None:
    """Run ``mcpx`` with ``sys.argv``; exits with the command's code."""
    args = sys.argv[1:]
    where = FAST_PATHS.get(args[0]) if args else None
    if where is not None:
        module, _, name = where.partition(":")
        # __import__ rather than importlib.import_module, whose imports -X importtime does not show
        run: Callable[[Sequence[str]], int | None] = getattr(__import__(module, fromlist=[name]), name)
        code = run(args[1:])
        if code is not None:
            sys.exit(code)
    from ._main import app

    app()
