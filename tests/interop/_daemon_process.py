"""``mcpx daemon`` as a real process on loopback, and ``mcpx`` commands run against it.

Each daemon has its own HOME and state directory (so no user configuration
leaks in) and, when given one, its own configuration file; without one it
serves the built-in default, mcpx's demo server as ``demo``.  /v1 is driven
with the standard library's HTTP client, the CLI as a subprocess whose
stderr can be a terminal (a pty), as a person running it would have.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def watch_events(base_url: str) -> Iterator[Iterator[tuple[str, Any]]]:
    """``GET /v1/events`` of the daemon at ``base_url``, open (its watcher registered): (kind, data) as they come."""
    url = urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        conn.request("GET", "/v1/events")
        stream = conn.getresponse()
        assert stream.status == 200 and stream.readline() == b": mcpx events\n"  # registered

        def events() -> Iterator[tuple[str, Any]]:
            kind = ""
            while line := stream.readline():
                if line.startswith(b"event: "):
                    kind = line[len(b"event: ") :].decode().strip()
                elif line.startswith(b"data: "):
                    yield kind, orjson.loads(line[len(b"data: ") :])

        yield events()
    finally:
        conn.close()


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    content_type: str
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)

    def lines(self) -> list[Any]:
        return [orjson.loads(line) for line in self.body.splitlines() if line.strip()]


@dataclass(frozen=True, slots=True)
class Ran:
    returncode: int
    stdout: bytes
    stderr: bytes


def children(pid: int) -> dict[int, str]:
    """Each child of process ``pid`` (from ``/proc``): its state letter, ``Z`` for a zombie."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found[int(entry.name)] = fields[0]
    return found


def daemons_of(state: Path) -> list[int]:
    """The ``mcpx daemon`` processes serving ``state`` (from ``/proc``): those ``mcpx serve`` started too."""
    found = []
    wanted = str(state).encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"daemon" in argv and wanted in argv:
                found.append(int(entry.name))
    return found


class DaemonProcess:
    def __init__(self, root: Path, config: str | None = None, env: dict[str, str] | None = None) -> None:
        self.env = {**os.environ, "HOME": str(root), "MCPX_STATE": str(root / "state")}
        self.env.pop("MCPX_CONFIG", None)
        self.env.update(env or {})
        argv = [sys.executable, "-m", "mcpx", "daemon", "--port", "0"]
        if config is not None:
            (root / "config.toml").write_text(config)
            argv += ["--config", str(root / "config.toml")]
        info = root / "state" / "daemon.json"
        self.log = root / "daemon.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                argv, env=self.env, stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT
            )
        deadline = time.monotonic() + 30
        while not info.exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise AssertionError(f"the daemon did not start: {self.log.read_text()}")
            time.sleep(0.05)
        self.base = str(orjson.loads(info.read_bytes())["url"])

    def request(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> Answer:
        url = urlsplit(self.base)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        payload = raw if raw is not None else (orjson.dumps(body) if body is not None else None)
        headers = {"content-type": "application/json"} if payload is not None else {}
        try:
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            return Answer(response.status, response.getheader("content-type", ""), response.read())
        finally:
            conn.close()

    def mcpx(self, *args: str, stderr_terminal: bool = False) -> Ran:
        """``mcpx ARGS`` against this daemon: stdout a pipe; stderr a pty when ``stderr_terminal``."""
        argv = [sys.executable, "-m", "mcpx", *args]
        if not stderr_terminal:
            done = subprocess.run(argv, env=self.env, capture_output=True, timeout=60, cwd=ROOT, check=False)
            return Ran(done.returncode, done.stdout, done.stderr)
        master, slave = os.openpty()
        try:
            child = subprocess.Popen(argv, env=self.env, stdout=subprocess.PIPE, stderr=slave, cwd=ROOT)
        finally:
            os.close(slave)
        seen = bytearray()
        try:
            while True:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer has closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
        finally:
            os.close(master)
        assert child.stdout is not None
        out = child.stdout.read()
        child.wait(60)
        return Ran(child.returncode, out, bytes(seen))

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
