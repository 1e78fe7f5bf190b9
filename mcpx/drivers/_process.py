"""Stopping a spawned MCP server: close its input, wait, terminate, kill (seed §4, "shutdown")."""

from __future__ import annotations

import contextlib

import anyio
import anyio.abc

__all__ = ["stop_process"]


async def stop_process(process: anyio.abc.Process, grace: float = 2.0) -> None:
    """Close ``process``'s stdin and give it ``grace`` seconds, then SIGTERM, then SIGKILL; reap it."""
    if process.stdin is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    with anyio.move_on_after(grace):
        await process.wait()
    if process.returncode is None:
        process.terminate()
        with anyio.move_on_after(grace):
            await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()
