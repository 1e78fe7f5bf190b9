"""Spawning and stopping an MCP server's process: close its input, wait, terminate, kill.

That order is the stdio shutdown of basic/lifecycle (Shutdown, up to
2025-11-25) and of 2026-07-28 basic/transports/stdio.  A server is spawned
as the leader of a process group of its own (POSIX ``setsid``), so that
stopping it reaches what it started: ``npx`` and the ``node`` under it, a
wrapper script and its interpreter.  A terminal's Ctrl-C, sent to the
daemon's foreground group, no longer reaches the servers behind it either;
the daemon stops them itself, input first.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Mapping, Sequence

import anyio
import anyio.abc

__all__ = ["open_server_process", "stop_process"]

_GROUPS = os.name == "posix"


async def open_server_process(
    argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: str | None
) -> anyio.abc.Process:
    """``argv`` with pipes for stdin, stdout and stderr, as the leader of a process group of its own."""
    if _GROUPS:
        return await anyio.open_process(list(argv), env=env, cwd=cwd, start_new_session=True)
    return await anyio.open_process(list(argv), env=env, cwd=cwd)


def signal_group(process: anyio.abc.Process, signum: signal.Signals) -> None:
    """``signum`` to ``process`` and everything in its process group (those still there)."""
    if _GROUPS:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)
    elif process.returncode is None:
        process.send_signal(signum)


async def stop_process(process: anyio.abc.Process, grace: float = 2.0) -> None:
    """Close ``process``'s stdin and give it ``grace`` seconds, then SIGTERM, then SIGKILL; reap it.

    The signals go to its whole process group, and what is left of the group
    once the server has exited is ended too: nothing it started outlives it.
    """
    if process.stdin is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    with anyio.move_on_after(grace):
        await process.wait()
    if process.returncode is None:
        signal_group(process, signal.SIGTERM)
        with anyio.move_on_after(grace):
            await process.wait()
    if process.returncode is None:
        signal_group(process, signal.SIGKILL)
        await process.wait()
    else:
        signal_group(process, signal.SIGTERM)  # what it started and left behind
