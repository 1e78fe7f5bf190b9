"""``mcpx serve``: an MCP host's stdio handed to the daemon, which serves it directly.

A host that can only spawn a process spawns ``mcpx serve``.  The shim finds
the daemon (starting it when none runs), connects to its serve socket and
hands it the host's stdin and stdout with the in-flight mirror
(``_state``, ``_hosts``).  From then on the daemon reads and writes the
host's pipes itself, as one stdio connection (MCP basic/transports "stdio",
every revision): the shim relays nothing and stays alive only as the host's
child, until the daemon says the connection has ended.

**The daemon dies.**  Its socket closes at once.  The shim answers every
request the mirror (and the socket's overflow lines) say were in flight with
a JSON-RPC error saying so, starts a daemon again and hands the pipes over
anew, with the handshake a legacy host settled: the new daemon resumes that
session, so the host's next request is served without a new ``initialize``.
A daemon that dies three times within a minute is given up on: the shim
says so on stderr and exits 1.

**No descriptors to pass** (a platform without ``socket.send_fds``, or
``MCPX_SERVE_RELAY=1``): the shim relays newline-delimited JSON between the
host and the socket, and keeps the in-flight ids and the handshake itself
from what it relays.

**A daemon of another configuration.**  One daemon serves a state
directory.  Before a host is handed over, the shim compares its own
configuration (the file, and the settings it was given) with what the
daemon records it was started with (``_state.differences``); where they
differ, the host is not served: the shim says what differs and what to do,
and exits 2.  ``mcp.passthrough`` is the exception: each host chooses its
own (``--passthrough``, ``MCPX_MCP_PASSTHROUGH``, the file), carried in the
hello, over the servers the daemon has (spec/gateway.md §9).

This module needs the standard library only (and ``mcpx.config``, for the
settings), so that ``mcpx serve`` starts fast.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._state import MIRROR_SIZE, daemon_info, differences, read_mirror, refusal

if TYPE_CHECKING:
    from ..config import Config

__all__ = ["ensure_daemon", "run_shim"]

# mcpx.core's INTERNAL_ERROR, named here: the shim imports no mcpx.core, to start fast (spec/gateway.md §9).
INTERNAL_ERROR = -32603
_RESTARTS = 3  # a daemon lost this many times within _RESTART_WINDOW is given up on
_RESTART_WINDOW = 60.0
_WATCHED_LINE = 64 * 1024 * 1024  # longer unterminated input is not kept for watching (the cap is lower)


def ensure_daemon(
    state_dir: Path, *, config: str | None = None, loop: str | None = None, wait: float = 30.0
) -> dict[str, Any]:
    """The running daemon's ``daemon.json``; starts ``mcpx daemon`` (detached, on ``loop``) first if none runs.

    A daemon started here is announced on stderr (a host shows it in its
    server log) with its log file and how to end it.
    """
    info = daemon_info(state_dir)
    if info is not None:
        return info
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    argv = [sys.executable, "-m", "mcpx", "daemon", "--state", str(state_dir)]
    if config is not None:
        argv += ["--config", config]
    if loop is not None:
        argv += ["--loop", loop]
    log = os.open(state_dir / "daemon.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True
        )
    finally:
        os.close(log)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        info = daemon_info(state_dir)
        if info is not None:
            print(
                f"mcpx: started a daemon for {state_dir} (pid {info.get('pid')}, MCP at {info.get('mcp')}); "
                f"its log is {state_dir / 'daemon.log'}; it outlives this host: `mcpx stop` ends it",
                file=sys.stderr,
                flush=True,
            )
            return info
        if process.poll() is not None:
            break
        time.sleep(0.02)
    raise RuntimeError(
        f"mcpx daemon did not start; its log is {state_dir / 'daemon.log'} "
        "(a port in use? set transport.port or start `mcpx daemon` yourself)"
    )


def _mirror_fd(state_dir: Path) -> int:
    """Shared memory for the in-flight mirror: an anonymous file the daemon maps too."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("mcpx-inflight", getattr(os, "MFD_CLOEXEC", 0))
    else:  # macOS: a file unlinked at once
        import tempfile  # here only: a shim lives as long as its host

        fd, path = tempfile.mkstemp(prefix=".inflight-", dir=state_dir)
        os.unlink(path)
    os.ftruncate(fd, MIRROR_SIZE)
    return fd


def _reap() -> None:
    """Collect a daemon this shim started and that has died, so that it no longer looks alive."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


_REFUSAL_LINE = 64 * 1024  # a first line longer than this is relayed as it comes: no refusal is so long


def _refusal(line: bytes) -> str | None:
    """The daemon's refusal, if ``line`` is one (``{"refused": <message>}``, never a JSON-RPC message)."""
    if not line.startswith(b'{"refused"'):
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    refused = message.get("refused") if isinstance(message, dict) and "jsonrpc" not in message else None
    return refused if isinstance(refused, str) else None


def _line(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


class _Host:
    """What the shim keeps of its host across daemons: the handshake, and ids in flight it must answer."""

    def __init__(self, stdout_fd: int) -> None:
        self.stdout_fd = stdout_fd
        self.handshake: dict[str, Any] | None = None
        self.overflow: dict[str, Any] = {}  # ids reported on the socket, by their JSON
        self.lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self.lock:
            os.set_blocking(self.stdout_fd, True)  # the daemon's event loop made the pipe non-blocking
            view = memoryview(data)
            while view:
                view = view[os.write(self.stdout_fd, view) :]

    def answer_lost(self, ids: list[Any], why: str) -> None:
        """Each request that was in flight gets an error saying the daemon went away, and to send it again."""
        out = b"".join(
            _line(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {
                        "code": INTERNAL_ERROR,
                        "message": f"the mcpx daemon stopped while this request was in flight ({why}); "
                        "it was not answered: send it again (mcpx serve starts the daemon again)",
                        "data": {"kind": "daemon-lost"},
                    },
                }
            )
            for request_id in ids
        )
        if out:
            with contextlib.suppress(OSError):
                self.write(out)


def _follow(sock: socket.socket, host: _Host) -> bool | str:
    """Read the daemon's lines until its socket closes: True if it said the connection ended, its refusal if it refused."""
    buffer = b""
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            return False
        if not data:
            return False
        buffer += data
        while b"\n" in buffer:
            line, _, buffer = buffer.partition(b"\n")
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if message.get("ended"):
                return True
            refused = message.get("refused")
            if isinstance(refused, str):
                return refused
            if isinstance(message.get("handshake"), dict):
                host.handshake = message["handshake"]
            if "add" in message:
                host.overflow[json.dumps(message["add"])] = message["add"]
            if "done" in message:
                host.overflow.pop(json.dumps(message["done"]), None)


class _Relay:
    """``lines`` mode: the shim relays, keeping what it would otherwise be told (ids in flight, the handshake).

    One reader of the host's stdin for the shim's whole life; it writes to
    whichever daemon socket is current and waits while there is none.
    """

    def __init__(self, host: _Host, stdin_fd: int, choice: dict[str, Any]) -> None:
        self.host = host
        self.stdin_fd = stdin_fd
        self.choice = choice  # the hello's per-connection choices
        self.pending: dict[str, Any] = {}
        self.initialize: dict[str, Any] | None = None
        self.host_ended = False
        self.sock: socket.socket | None = None
        self.changed = threading.Condition()
        self.reader: threading.Thread | None = None

    def _watch_in(self, line: bytes) -> None:
        with contextlib.suppress(ValueError, RecursionError):  # the daemon answers what is malformed
            message = json.loads(line)
            if isinstance(message, dict) and isinstance(message.get("method"), str) and "id" in message:
                self.pending[json.dumps(message["id"])] = message["id"]
                if message["method"] == "initialize" and isinstance(message.get("params"), dict):
                    self.initialize = message["params"]

    def _watch_out(self, line: bytes) -> None:
        with contextlib.suppress(ValueError, RecursionError):
            message = json.loads(line)
            if not isinstance(message, dict) or "method" in message or "id" not in message:
                return
            self.pending.pop(json.dumps(message["id"]), None)
            result = message.get("result")
            if self.initialize is not None and isinstance(result, dict) and "protocolVersion" in result:
                self.host.handshake = {
                    "protocolVersion": result["protocolVersion"],
                    "capabilities": self.initialize.get("capabilities") or {},
                    "clientInfo": self.initialize.get("clientInfo") or {},
                }

    def _pump_in(self) -> None:
        buffer = b""
        while True:
            data = os.read(self.stdin_fd, 65536)
            with self.changed:
                while self.sock is None:
                    self.changed.wait()
                sock = self.sock
            if not data:
                self.host_ended = True
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_WR)
                return
            buffer = self._watch_lines(buffer, data, self._watch_in)
            with contextlib.suppress(OSError):  # a daemon going away: what was sent is answered as lost
                sock.sendall(data)

    def run(self, sock: socket.socket) -> bool | str:
        """Relay on ``sock`` until it closes: True if the host had ended its input first; the daemon's refusal.

        The daemon's first line is held until it is whole: a refusal
        (``{"refused": ...}``, mcpx/gateway/_hosts.py) is said there, and is
        the shim's to report, never the host's to read.
        """
        sock.sendall(_line({"v": 1, "mode": "lines", "resume": self.host.handshake, **self.choice}))
        with self.changed:
            self.sock = sock
            self.changed.notify_all()
        if self.reader is None:
            self.reader = threading.Thread(target=self._pump_in, daemon=True)
            self.reader.start()
        buffer = b""
        first: bytes | None = b""  # the daemon's first line while it is incomplete; None once relayed
        try:
            while True:
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if first is not None:
                    first += data
                    if data and b"\n" not in first and len(first) <= _REFUSAL_LINE:
                        continue
                    refused = _refusal(first.partition(b"\n")[0])
                    if refused is not None:
                        return refused
                    data, first = first, None
                if not data:
                    return self.host_ended
                buffer = self._watch_lines(buffer, data, self._watch_out)
                with contextlib.suppress(OSError):
                    self.host.write(data)
        finally:
            with self.changed:
                self.sock = None

    @staticmethod
    def _watch_lines(buffer: bytes, data: bytes, watch: Callable[[bytes], None]) -> bytes:
        """Each line ``data`` completes is watched; what is left is kept, unless no line may be that long.

        Linear in the bytes: only ``data`` is searched for line ends.
        """
        if b"\n" not in data:
            buffer += data
            return buffer if len(buffer) <= _WATCHED_LINE else b""  # the daemon refuses such a line itself
        first, *lines, rest = data.split(b"\n")
        watch(buffer + first)
        for line in lines:
            watch(line)
        return rest

    def take_pending(self) -> list[Any]:
        ids = list(self.pending.values())
        self.pending.clear()
        return ids


def _hand_over(
    sock: socket.socket, host: _Host, stdin_fd: int, stdout_fd: int, mirror_fd: int, choice: dict[str, Any]
) -> bool | str:
    hello = _line({"v": 1, "mode": "fds", "resume": host.handshake, **choice})
    socket.send_fds(sock, [hello], [stdin_fd, stdout_fd, mirror_fd])
    return _follow(sock, host)


def run_shim(
    state_dir: Path,
    *,
    config: str | None = None,
    loop: str | None = None,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
    relay: bool | None = None,
    configured: Config | None = None,
) -> int:
    """Serve the host on ``stdin_fd``/``stdout_fd`` through the daemon until its connection ends; the exit code.

    ``relay`` forces (True) or forbids (False) the ``lines`` fallback; by
    default it is used only where descriptors cannot be passed.
    ``configured`` is the shim's own configuration: a daemon started with
    another is refused (``_state.differences``), and its ``mcp.passthrough``
    is this host's choice.  ``None`` takes whatever daemon runs, as it is.
    """
    if relay is None:
        relay = not hasattr(socket, "send_fds") or os.environ.get("MCPX_SERVE_RELAY") == "1"
    choice: dict[str, Any] = {}
    if configured is not None:
        choice["passthrough"] = list(configured.settings.value("mcp.passthrough"))
    host = _Host(stdout_fd)
    mirror_fd = -1 if relay else _mirror_fd(state_dir)
    shuttle = _Relay(host, stdin_fd, choice) if relay else None
    lost: collections.deque[float] = collections.deque()
    while True:
        try:
            info = ensure_daemon(state_dir, config=config, loop=loop)
        except RuntimeError as exc:
            print(f"mcpx: {exc}", file=sys.stderr)
            return 2
        path = info.get("serve")
        if not isinstance(path, str):
            print(
                f"mcpx: the daemon running for {state_dir} (pid {info.get('pid')}, version "
                f"{info.get('version')}) cannot take a host's stdio; stop it and run `mcpx serve` again",
                file=sys.stderr,
            )
            return 2
        if configured is not None:
            found = differences(info, configured)
            if found:  # checked on every daemon, a restarted one too: another shim may have started it
                print(refusal(info, found, state_dir, configured), file=sys.stderr)
                return 2
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
            _reap()  # a daemon that died unseen (killed, or still a zombie of ours)
            with contextlib.suppress(OSError):
                (state_dir / "daemon.json").unlink()
            continue
        ended: bool | str
        with sock:
            if shuttle is not None:
                ended = shuttle.run(sock)
                in_flight = shuttle.take_pending()
            else:
                ended = _hand_over(sock, host, stdin_fd, stdout_fd, mirror_fd, choice)
                in_flight = [] if ended else read_mirror(mirror_fd)
        if isinstance(ended, str):
            print(f"mcpx: not served: {ended}", file=sys.stderr)
            return 2
        if ended:
            return 0
        _reap()
        in_flight += list(host.overflow.values())
        host.overflow.clear()
        host.answer_lost(in_flight, f"pid {info.get('pid')}")
        now = time.monotonic()
        lost.append(now)
        while lost and now - lost[0] > _RESTART_WINDOW:
            lost.popleft()
        if len(lost) >= _RESTARTS:
            print(
                f"mcpx: the daemon for {state_dir} stopped {len(lost)} times within a minute; "
                f"giving up (its log is {state_dir / 'daemon.log'})",
                file=sys.stderr,
            )
            return 1
        with contextlib.suppress(OSError):  # the dead daemon cannot remove it; a new one writes its own
            info_path = state_dir / "daemon.json"
            if info_path.exists() and json.loads(info_path.read_bytes()).get("pid") == info.get("pid"):
                info_path.unlink()


_OPTIONS = ("--transport", "--config", "--loop", "--state", "--passthrough")


def main(argv: Sequence[str]) -> int | None:
    """``mcpx serve`` without the command-line framework: its exit code, or ``None`` to leave it to typer.

    Only the options ``mcpx serve`` has are read here (``--transport``,
    ``--config``, ``--loop``, ``--state``, ``--passthrough`` (repeatable), as
    ``--name value`` or ``--name=value``); anything else (``--help``, a
    mistake) is left to the typer command, which says what is wrong exactly
    as before.  The settings come from the same layers as every command's.
    """
    given: dict[str, str] = {}
    passed: list[str] = []
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if name not in _OPTIONS or name[2:] in given:
            return None
        if not eq:
            value = next(args, "")
            if not value or value.startswith("--"):
                return None
        if name == "--passthrough":
            passed.append(value)
        else:
            given[name[2:]] = value
    loop = given.get("loop") or os.environ.get("MCPX_LOOP")  # None: the daemon's own default
    if given.get("transport", "stdio") != "stdio" or loop not in (None, "asyncio", "uvloop", "trio"):
        return None  # the typer command refuses these with its own message
    from ..config import ConfigError, load_config

    flags: dict[str, object] = {"state.dir": given["state"]} if "state" in given else {}
    if passed:
        flags["mcp.passthrough"] = ",".join(passed)
    try:
        loaded = load_config(
            given.get("config"),
            flags=flags,
            flag_origins={"state.dir": "--state", "mcp.passthrough": "--passthrough"},
        )
    except (ConfigError, ValueError) as exc:
        print(f"mcpx: {exc}", file=sys.stderr)
        return 2
    return run_shim(
        Path(str(loaded.settings.value("state.dir"))),
        config=given.get("config"),
        loop=loop,
        configured=loaded,
    )
