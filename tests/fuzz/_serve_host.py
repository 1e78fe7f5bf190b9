"""``mcpx serve`` as an MCP host runs it, for tests: a private daemon, and one host's pipes.

``Daemon`` is a private state directory and HOME (no user configuration is
read; port 0; upstream the built-in default, mcpx's demo server as
``demo``, unless the settings say otherwise); its daemon starts with the
first ``mcpx serve``.  ``Host`` is one ``python -m mcpx serve`` with pipes,
in one era (a legacy handshake, or 2026-07-28 ``_meta`` on every request)
and one mode (the host's pipes handed to the daemon, ``fds``, or relayed by
the shim, ``lines``): bytes in, JSON-RPC lines out, read by threads so a
test never blocks; a traceback on stderr fails at once.  Waits are for a
line or for the exit, bounded by ``WAIT``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ._mcp import CC, CI, MODERN, PV, check_envelope, initialize, notification, request, to_line

ROOT = Path(__file__).resolve().parents[2]
WAIT = 60.0  # seconds: the longest wait for one line or for the exit
META = {PV: MODERN, CC: {}, CI: {"name": "fuzz-host", "version": "1"}}


class Daemon:
    """A private state directory and HOME; the daemon in it starts with the first ``mcpx serve``."""

    def __init__(self, root: Path, **settings_env: str) -> None:
        self.state = root / "state"
        self.env = {key: value for key, value in os.environ.items() if not key.startswith("MCPX_")}
        self.env.update(HOME=str(root), MCPX_STATE=str(self.state), MCPX_TRANSPORT_PORT="0", **settings_env)

    @property
    def log(self) -> Path:
        return self.state / "daemon.log"  # where ``mcpx serve`` sends the output of a daemon it starts

    def log_text(self, start: int = 0) -> str:
        try:
            with self.log.open("rb") as log:
                log.seek(start)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def settings_shown(self) -> dict[str, Any]:
        """Each effective setting, as ``mcpx settings --json`` shows it to a user of this environment."""
        done = subprocess.run(
            [sys.executable, "-m", "mcpx", "settings", "--json"],
            env=self.env,
            capture_output=True,
            timeout=WAIT,
            cwd=ROOT,
            check=True,
        )
        shown: dict[str, Any] = json.loads(done.stdout)["settings"]
        return shown

    def stop(self) -> None:
        try:
            info = json.loads((self.state / "daemon.json").read_bytes())
        except FileNotFoundError:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(info["pid"]), signal.SIGTERM)


_TRACEBACK = b"<a traceback on stderr>"
_EXIT = b"<stdout closed>"


class Host:
    """One ``mcpx serve`` in one era and mode: bytes in, JSON-RPC lines out (read by a thread, never blocking us)."""

    def __init__(self, daemon: Daemon, era: str, mode: str, *, handshake: bool = True) -> None:
        self.daemon, self.era, self.mode = daemon, era, mode
        self.modern = era == MODERN
        env = dict(daemon.env)
        if mode == "lines":
            env["MCPX_SERVE_RELAY"] = "1"
        self.log_start = daemon.log.stat().st_size if daemon.log.exists() else 0
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mcpx", "serve", "--state", str(daemon.state)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stderr = bytearray()
        self.sentinels = itertools.count(1)
        self.readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self.readers:
            reader.start()
        if handshake and not self.modern:
            try:
                self.handshake(era)
            except BaseException:
                self.kill()
                raise

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(_EXIT)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        told = False
        while chunk := self.process.stderr.read1(65536):
            self.stderr += chunk
            if not told and b"Traceback" in self.stderr:
                told = True
                self.lines.put(_TRACEBACK)  # fail now rather than after WAIT

    def describe(self) -> str:
        code = self.process.poll()
        state = "still running" if code is None else f"exited {code}"
        return (
            f"mcpx serve ({self.era}, {self.mode}) {state}; stderr: {self.stderr.decode(errors='replace')!r}"
        )

    # -- what the host writes ----------------------------------------------------------------

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except BrokenPipeError:
            raise AssertionError(f"mcpx serve stopped reading its stdin: {self.describe()}") from None

    def send(self, *messages: Any) -> None:
        self.write(b"".join(to_line(message) for message in messages))

    def request(self, request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A request of this host's era: a 2026-07-28 one states its ``_meta``."""
        if self.modern:
            params = {**(params or {}), "_meta": META}
        return request(request_id, method, params)

    def call(self, request_id: Any, tool: str, **arguments: Any) -> dict[str, Any]:
        """``mcpx_call`` of the demo server's ``tool``."""
        return self.request(
            request_id,
            "tools/call",
            {"name": "mcpx_call", "arguments": {"server": "demo", "tool": tool, "arguments": arguments}},
        )

    def handshake(self, version: str) -> None:
        self.send(initialize("mcpx-fuzz-initialize", version))
        (answer,) = self.replies(1)
        assert answer["id"] == "mcpx-fuzz-initialize", answer
        assert answer["result"]["protocolVersion"] == version, answer
        self.send(notification("notifications/initialized"))

    # -- what the host reads -----------------------------------------------------------------

    def message(self, timeout: float = WAIT) -> Any:
        """The next line on stdout, parsed (Python's json: integers of any size stay exact)."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"nothing arrived within {timeout} s: {self.describe()}") from None
        if line is _TRACEBACK:
            raise AssertionError(f"a traceback on stderr: {self.describe()}")
        if line is _EXIT:
            self.lines.put(_EXIT)
            raise AssertionError(f"mcpx serve closed its stdout: {self.describe()}")
        assert line.endswith(b"\n"), line[-200:]
        try:
            message = json.loads(line)
        except ValueError:
            raise AssertionError(f"not JSON on stdout: {line[:300]!r}") from None
        for item in message if isinstance(message, list) else [message]:
            check_envelope(item)
        return message

    def replies(self, count: int) -> list[Any]:
        """The next ``count`` replies (a response, or a 2025-03-26 reply array); notifications are skipped."""
        got: list[Any] = []
        while len(got) < count:
            try:
                message = self.message()
            except AssertionError as exc:
                raise AssertionError(f"{len(got)} of {count} replies arrived ({got[-3:]}): {exc}") from None
            if isinstance(message, dict) and "method" in message:
                continue  # the daemon may push notifications to a legacy host
            got.append(message)
        return got

    def exchange(self, data: bytes, count: int) -> list[Any]:
        """Write ``data`` and then a valid request; ``count`` replies to ``data`` and the valid one's result.

        The valid request (``tools/call`` of ``mcpx_servers``) must be answered
        with a result naming the demo server, whatever ``data`` did.
        """
        alive = f"mcpx-fuzz-alive-{next(self.sentinels)}"
        self.write(
            data + to_line(self.request(alive, "tools/call", {"name": "mcpx_servers", "arguments": {}}))
        )
        got = self.replies(count + 1)
        mine = [r for r in got if isinstance(r, dict) and r.get("id") == alive]
        assert len(mine) == 1, (
            f"the valid request after the bad input was answered {len(mine)} times: {got[-3:]}"
        )
        result = mine[0].get("result")
        assert result is not None and result.get("isError") is not True, mine[0]
        assert "demo" in json.dumps(result), result
        return [r for r in got if r is not mine[0]]

    # -- the end -----------------------------------------------------------------------------

    def end(self, within: float = WAIT) -> tuple[float, list[Any]]:
        """Close stdin: the exit (code 0) within ``within`` s, no traceback; the time taken and what came after."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        started = time.monotonic()
        try:
            code = self.process.wait(timeout=within)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"no exit within {within} s of the end of input: {self.describe()}"
            ) from None
        took = time.monotonic() - started
        for reader in self.readers:
            reader.join(WAIT)
        after: list[Any] = []
        while (line := self.lines.get_nowait()) is not _EXIT:
            if line is not _TRACEBACK and not (
                isinstance(message := json.loads(line), dict) and "method" in message
            ):
                after.append(message)
        assert code == 0, self.describe()
        assert b"Traceback" not in self.stderr, self.describe()
        log = self.daemon.log_text(self.log_start)
        assert "Traceback" not in log, log
        return took, after

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(WAIT)
