"""Run the era probe (``mcpx.core.probe``) against a server spawned over stdio.

The driver half of ``EraProbe`` for stdio: spawn the command (no shell), feed
its stdout lines to the machine, write what it sends, restart the process when
it asks (``Reconnect``), honour its timer, and stop the process at the end.
``probe_stdio`` starts from the era cache at ``cache_path`` and records the
outcome there (spec/era-probe.md "The cache").
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

from ..core.framing import DEFAULT_MAX_LINE, Line, LineReader
from ..core.probe import (
    EraCache,
    EraProbe,
    LineReceived,
    ProbeConfig,
    ProbeDone,
    ProbeFailed,
    Reconnect,
    SendMessage,
    TransportClosed,
)
from ._eracache import load_era_cache, record_outcome
from ._process import open_server_process, stop_process
from ._stderr import StderrLog

__all__ = ["StdioHandover", "describe", "probe_stdio", "probe_stdio_handing_over"]


@dataclass(slots=True, kw_only=True)
class StdioHandover:
    """A probed server's process, its era settled, handed over to a client session to go on with.

    ``outcome`` is the probe's (``ProbeDone``: legacy, ``initialize`` answered
    and ``notifications/initialized`` sent; or modern, ``server/discover``
    answered); ``leftover`` the stdout bytes read past the probe's last
    answer, to be read before the pipe.  The process's stderr is not being
    read any more: the new owner reads it at once, and stops the process.
    """

    process: anyio.abc.Process
    outcome: ProbeDone
    leftover: bytes = b""

    async def discard(self) -> None:
        """Not going on with it after all: the process is stopped and reaped."""
        with anyio.CancelScope(shield=True):
            await stop_process(self.process)
            await self.process.aclose()


async def probe_stdio(
    argv: Sequence[str],
    config: ProbeConfig,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    cache_path: str | os.PathLike[str] | None = None,
    stderr_log: StderrLog | None = None,
) -> ProbeDone | ProbeFailed:
    """Probe the server ``argv`` starts; the outcome (also written to the cache, if given).

    The server's stderr is read to its end, always (a chatty server would
    block on a full pipe), into ``stderr_log`` when given (the pool's ring for
    the instance being started) and a ring of the probe's own; a failure ends
    with the process's exit code, when it exited by itself, and the last
    lines it wrote there.  The process is stopped at the end.
    """
    outcome, handover = await probe_stdio_handing_over(
        argv, config, env=env, cwd=cwd, cache_path=cache_path, stderr_log=stderr_log, hand_over=False
    )
    assert handover is None
    return outcome


async def probe_stdio_handing_over(
    argv: Sequence[str],
    config: ProbeConfig,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    cache_path: str | os.PathLike[str] | None = None,
    stderr_log: StderrLog | None = None,
    hand_over: bool = True,
) -> tuple[ProbeDone | ProbeFailed, StdioHandover | None]:
    """``probe_stdio``, and on success the probed process, still running, when ``hand_over``.

    The caller owns a returned ``StdioHandover``: it must read the process's
    stdout and stderr and stop it (``connect_stdio(adopt=...)`` does).
    """
    key = EraCache.key({"command": argv[0], "args": list(argv[1:]), "env": dict(env or {}), "cwd": cwd})
    cache = load_era_cache(cache_path) if cache_path is not None else EraCache()
    probe = EraProbe(config, transport="stdio", cached=cache.get(key))
    full_env = {**os.environ, **env} if env is not None else None
    outcome: ProbeDone | ProbeFailed | None = None
    own = StderrLog(max_lines=20)  # the last process's stderr, for a failure's reason
    exit_code: int | None = None  # the last process's, when it exited by itself
    leftover = bytearray()  # stdout read past the settling answer (kept for a handover)

    async def run_once(process: anyio.abc.Process, stderr: StderrLog) -> bool:
        """Drive the probe on ``process``; ``True`` when it asked for a fresh process."""
        nonlocal exit_code
        assert process.stdin is not None and process.stdout is not None
        stdout = process.stdout

        async def keep_stderr() -> None:  # drained, or a chatty server blocks on a full pipe
            if process.stderr is None:
                return
            # Each line keeps the Unix time it was read (what /v1/servers/{name}/log shows), as the
            # client's own reader records it once the probe hands the process over: display data,
            # not a machine's clock.
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for chunk in process.stderr:
                    read_at = time.time()
                    stderr.feed(chunk, read_at)
                    if stderr_log is not None:
                        stderr_log.feed(chunk, read_at)
            stderr.close(time.time())
            if stderr_log is not None:
                stderr_log.close(time.time())

        reader = LineReader(DEFAULT_MAX_LINE)
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_stderr)
            try:
                while True:
                    for action in probe.next_actions():
                        if isinstance(action, SendMessage):
                            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                                await process.stdin.send(action.payload + b"\n")
                        elif isinstance(action, Reconnect):
                            return True
                    if probe.outcome is not None:
                        leftover.extend(reader.take_buffered())
                        return False
                    deadline = probe.get_timer()
                    chunk: bytes | None = b""
                    # Read here, not in a task: a receive cut short by the deadline takes no
                    # bytes from the pipe (anyio), so what follows the probe stays for the client.
                    with anyio.move_on_after(
                        max(0.0, (deadline or time.monotonic() + 60) - time.monotonic())
                    ):
                        try:
                            chunk = await stdout.receive()
                        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                            chunk = None
                    now = time.monotonic()
                    if chunk is None:
                        with anyio.move_on_after(1.0):  # its stdout ended: it is exiting, usually
                            exit_code = await process.wait()
                        probe.receive(TransportClosed(reason="the server's stdout ended"), time.monotonic())
                    elif chunk:
                        for event in reader.feed(chunk):
                            if probe.outcome is not None:  # settled mid-chunk: the rest is the client's
                                if isinstance(event, Line):
                                    leftover.extend(bytes(event.data) + b"\n")
                            elif isinstance(event, Line):
                                probe.receive(LineReceived(line=bytes(event.data)), now)
                    elif deadline is not None and now >= deadline:
                        probe.handle_timer(now)
            finally:
                tg.cancel_scope.cancel()
        return False  # not reached: the loop returns

    probe.start(time.monotonic())
    handover: StdioHandover | None = None
    while outcome is None:
        process = await open_server_process(argv, env=full_env, cwd=cwd)
        own, exit_code = StderrLog(max_lines=20), None  # a failure quotes the last process's words
        leftover.clear()
        kept = False
        try:
            again = await run_once(process, own)
            done = probe.outcome
            if hand_over and isinstance(done, ProbeDone) and process.returncode is None:
                handover = StdioHandover(process=process, outcome=done, leftover=bytes(leftover))
                kept = True
        finally:
            if not kept:
                with anyio.CancelScope(shield=True):
                    await stop_process(process)
                    await process.aclose()
        outcome = probe.outcome
        if outcome is None and not again:
            break
    assert outcome is not None
    if isinstance(outcome, ProbeFailed):
        said = [f"It exited with code {exit_code}."] if exit_code is not None else []
        if own.tail():
            said.append(f"Its stderr ended with: {own.tail()!r}")
        if stderr_log is not None and exit_code is not None:
            stderr_log.exit_code = exit_code
        if said:
            outcome = dataclasses.replace(outcome, reason=" ".join([outcome.reason, *said]))
    if cache_path is not None:  # into the file as it is now: what other probes saved meanwhile stays
        record_outcome(cache_path, key, outcome, time.time())  # the cache file outlives us: wall clock
    return outcome, handover


def describe(outcome: ProbeDone | ProbeFailed) -> dict[str, Any]:
    """The outcome as the JSON ``mcpx probe`` prints."""
    if isinstance(outcome, ProbeFailed):
        return {"era": None, "error": outcome.reason, "cache": outcome.cache, "trace": list(outcome.trace)}
    return {
        "era": outcome.era,
        "revision": str(outcome.revision) if outcome.revision is not None else None,
        "server": dict(outcome.server_info or {}),
        "cache": outcome.cache,
        "trace": list(outcome.trace),
    }
