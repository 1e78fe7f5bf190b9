"""What one gateway hop costs: ``mcpx serve`` and the daemon against relay floors and peers.

Every figure is measured side by side in one run, in rounds that rotate the
order of the paths, with per-round paired ratios and medians, by one lean
load generator (this file: raw pipes, ``select``, ``os.read``/``os.write``
and orjson on one thread; raw keep-alive sockets and ``epoll`` for HTTP).
The host side speaks 2025-11-25 with the ``initialize`` handshake, or
2026-07-28 with ``params._meta`` on every request (``--modern``).  Every
answer is checked: its id, a result that is not ``isError``, the echoed
text.

Phases (each path spawned over stdio unless said otherwise):

A. In front of ``raw_echo_server.py`` (orjson, no framework):
   ``direct``           the echo itself;
   ``relay asyncio``,   ``raw_relay.py`` (parse, remap the id, write; and
   ``relay uvloop``     back) on each loop — the floor of a stdio hop;
   ``mcpx pass``        ``mcpx serve`` → a warm daemon with the echo passed
                        through (``mcp.passthrough``): ``tools/call echo``;
   ``mcpx gateway``     ``mcpx serve`` → a warm daemon in gateway mode:
                        ``tools/call mcpx_call {server, tool: echo, arguments}``;
   ``FastMCP proxy``    ``fastmcp_proxy_server.py`` (``create_proxy``).
   *Added p50* of a path = its p50 − the direct p50 (per round, paired).
B. In front of ``fastmcp_echo_server.py`` (FastMCP's own stdio server, from
   ``/tmp/fastmcp-venv``): direct, mcpx pass-through (a third daemon),
   FastMCP's proxy and the asyncio relay; proxied/direct p50.
C. HTTP: the pass-through daemon's ``/mcp`` (legacy sessions, one per
   connection, keep-alive) against ``raw_h11_gateway.py`` (h11 → stdio) in
   front of the echo, on 1 and on ``--depth`` connections.
D. ``mcpx demo`` against the official SDK's stdio server
   (``sdk_echo_server.py``), sequential and ``--depth`` pipelined.
E. Start-up and size: launch → first answer of ``mcpx serve`` with a warm
   daemon, ``mcpx call echo echo --arg text=hi`` with a warm daemon (wall
   time), each with baselines; the daemons' RSS from ``/proc``; and
   ``bench_core.py`` run as a subprocess with a short setting.

Modes: ``seq`` (one call at a time: latency) and ``N in flight`` (``--depth``
requests outstanding, each answer replaced by a new request; on HTTP, N
connections with one request each).  A block runs for ``--block-seconds``;
p50/p99 are over every call of a path's blocks, calls/s the median of its
blocks.  CPU per call per process (user + system, children reaped included,
from ``/proc/<pid>/stat``) is recorded for every path, and so is the load
generator's own CPU share.

The daemons run with a private state directory (``MCPX_STATE``), a config
file (``MCPX_CONFIG``) naming one upstream (``scope = "shared"``: the echoes
keep no state), ``MCPX_TRANSPORT_PORT=0`` and ``HOME`` a temporary directory; each is started explicitly (``mcpx daemon``)
and warmed before anything is timed, and stopped at the end by the pid in
``<state>/daemon.json``.  ``--committed`` runs the committed mcpx (``git
archive HEAD mcpx``) rather than the working tree.  Every process the
benchmark starts is stopped at the end.  The figures, the issue's targets
and MET / NOT MET are printed; the full results go to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import types
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import orjson
from _util import HERE, load_average, machine, now_iso, write_results
from bench_http import LEGACY as HTTP_LEGACY
from bench_http import MODERN as HTTP_MODERN
from bench_http import BenchError as HttpBenchError
from bench_http import Conn, _Poller, check_echo, parse_response
from bench_http import send as http_send

ROOT = HERE.parent
PY = sys.executable
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
TEXT = "hello, world"
TIMEOUT = 30.0
START_TIMEOUT = 60.0
FASTMCP_VENV = Path("/tmp/fastmcp-venv")
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
CLIENT_INFO = {"name": "mcpx-bench-hop", "version": "1"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
}
RAW_ECHO = [PY, str(HERE / "raw_echo_server.py")]


class BenchError(RuntimeError):
    pass


ERRORS = (BenchError, HttpBenchError, OSError, ValueError, subprocess.TimeoutExpired)


# ---------------------------------------------------------------------------
# /proc bookkeeping
# ---------------------------------------------------------------------------


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def proc_cpu(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` (all threads) plus those of its reaped children."""
    fields = _stat(pid)
    if fields is None or fields[0] == b"Z":
        return None
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLK_TCK  # utime stime cutime cstime


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def descendants(pid: int) -> set[int]:
    table: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                fields = _stat(int(entry))
                if fields is not None:
                    table[int(entry)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in table.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != b"Z"


def wait_gone(pids: set[int], seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    left = {pid for pid in pids if alive(pid)}
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = {pid for pid in left if alive(pid)}
    return left


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "?"


def kill_all(pids: set[int], notes: list[str], why: str) -> None:
    for pid in sorted(pids):
        if alive(pid):
            notes.append(f"pid {pid} ({cmdline(pid)[:120]}) {why}; killed")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    wait_gone(pids, 5.0)


class CpuMeter:
    """CPU seconds per role of a set of processes; a process that has gone keeps its last reading."""

    def __init__(self, roles: dict[int, str]) -> None:
        self.roles = roles
        self.last: dict[int, float] = {}

    def read(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for pid, role in self.roles.items():
            value = proc_cpu(pid)
            if value is None:
                value = self.last.get(pid, 0.0)
            self.last[pid] = value
            totals[role] = totals.get(role, 0.0) + value
        return totals


# ---------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of sorted ``values``, interpolated; None if empty."""
    if not values:
        return None
    k = (len(values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def med(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def block_result(
    latencies_ns: list[int], seconds: float, cpu: dict[str, float], client: float
) -> dict[str, Any]:
    lat = sorted(x / 1000.0 for x in latencies_ns)
    return {
        "calls": len(lat),
        "seconds": seconds,
        "calls_per_s": len(lat) / seconds if seconds > 0 else 0.0,
        "p50_us": pct(lat, 0.5),
        "p99_us": pct(lat, 0.99),
        "cpu_s_by_role": cpu,
        "client_cpu_s": client,
        "_latencies_us": lat,
    }


def summarise(blocks: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """A path's blocks of one mode (by round): pooled percentiles, median rate, CPU per call per role."""
    if not blocks:
        return None
    pooled = sorted(x for b in blocks.values() for x in b["_latencies_us"])
    calls = sum(b["calls"] for b in blocks.values())
    seconds = sum(b["seconds"] for b in blocks.values())
    roles: dict[str, float] = {}
    for b in blocks.values():
        for role, s in b["cpu_s_by_role"].items():
            roles[role] = roles.get(role, 0.0) + s
    client = sum(b["client_cpu_s"] for b in blocks.values())
    return {
        "calls": calls,
        "median_calls_per_s": med([b["calls_per_s"] for b in blocks.values()]),
        "p50_us": pct(pooled, 0.5),
        "p90_us": pct(pooled, 0.9),
        "p99_us": pct(pooled, 0.99),
        "max_us": pooled[-1] if pooled else None,
        "cpu_us_per_call_by_role": {role: 1e6 * s / calls for role, s in roles.items()} if calls else {},
        "server_cpu_us_per_call": 1e6 * sum(roles.values()) / calls if calls else None,
        "client_cpu_us_per_call": 1e6 * client / calls if calls else None,
        "client_cpu_share": client / seconds if seconds else None,
        "blocks": {r: {k: v for k, v in b.items() if not k.startswith("_")} for r, b in blocks.items()},
    }


# ---------------------------------------------------------------------------
# Stdio paths: one spawned process and the raw client that drives it
# ---------------------------------------------------------------------------


def call_template(tool: str, arguments: dict[str, Any], modern: bool) -> bytes:
    """A ``tools/call`` line with a ``%d`` hole for the id."""
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if modern:
        params["_meta"] = MODERN_META
    body = orjson.dumps({"jsonrpc": "2.0", "id": 999999999, "method": "tools/call", "params": params})
    return body.replace(b"%", b"%%").replace(b"999999999", b"%d", 1) + b"\n"


def check_answer(name: str, msg: Any, request_id: int) -> None:
    result = msg.get("result") if isinstance(msg, dict) else None
    if not isinstance(result, dict) or msg.get("id") != request_id or result.get("isError"):
        raise BenchError(f"{name}: unexpected answer to request {request_id}: {str(msg)[:500]}")
    content = result.get("content")
    if not (isinstance(content, list) and content and isinstance(content[0], dict)):
        raise BenchError(f"{name}: no content in the answer to {request_id}: {str(msg)[:500]}")
    if content[0].get("text") != TEXT:
        raise BenchError(f"{name}: the echo did not come back: {str(msg)[:500]}")


class StdioPath:
    """A stdio MCP server (or relay) spawned with pipes, and the raw JSON-RPC client that drives it."""

    def __init__(
        self,
        key: str,
        label: str,
        command: list[str],
        *,
        env: dict[str, str],
        cwd: str,
        modern: bool,
        roles: Callable[[int], dict[int, str]],
        tool: str = "echo",
        arguments: dict[str, Any] | None = None,
    ) -> None:
        self.key = key
        self.label = label
        self.command = command
        self.env = env
        self.cwd = cwd
        self.modern = modern
        self.roles_of = roles
        self.tool = tool
        self.arguments = arguments if arguments is not None else {"text": TEXT}
        self.template = call_template(tool, self.arguments, modern)
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr: BinaryIO | None = None
        self.buf = b""
        self.next_id = 1
        self.meter = CpuMeter({})
        self.failed: str | None = None
        self.sample: Any = None
        self.server_info: Any = None

    # -- the wire ------------------------------------------------------------

    def spawn(self) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close(); never a pipe (it could fill)
        self.proc = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            bufsize=0,
            env=self.env,
            cwd=self.cwd,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.wfd, view) :]

    def read_lines(self, timeout: float = TIMEOUT) -> list[bytes]:
        """Block until at least one complete line has arrived; every complete line."""
        while True:
            ready, _, _ = select.select([self.rfd], [], [], timeout)
            if not ready:
                raise BenchError(f"{self.label}: no answer within {timeout:g}s{self.stderr_tail()}")
            data = os.read(self.rfd, 262144)
            if not data:
                raise BenchError(f"{self.label}: closed its output{self.stderr_tail()}")
            buf = self.buf + data
            if b"\n" in data:
                *lines, self.buf = buf.split(b"\n")
                return lines
            self.buf = buf

    def responses(self, timeout: float = TIMEOUT) -> list[dict[str, Any]]:
        """The next responses (notifications and requests from the server are skipped)."""
        out = []
        for line in self.read_lines(timeout):
            if line.strip():
                msg = orjson.loads(line)
                if isinstance(msg, dict) and "id" in msg and "method" not in msg:
                    out.append(msg)
        return out

    def one(self, request_id: int, timeout: float = TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for msg in self.responses(max(0.01, deadline - time.monotonic())):
                if msg.get("id") == request_id:
                    return msg
                raise BenchError(
                    f"{self.label}: an answer to {msg.get('id')!r} while waiting for {request_id}"
                )

    # -- the protocol -------------------------------------------------------

    def initialize(self) -> dict[str, Any]:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO},
        }
        self.write(orjson.dumps(init) + b"\n")
        reply = self.one(0, START_TIMEOUT)
        result = reply.get("result")
        if not isinstance(result, dict):
            raise BenchError(f"{self.label}: initialize failed: {reply}{self.stderr_tail()}")
        if result.get("protocolVersion") != LEGACY:
            raise BenchError(f"{self.label}: negotiated {result.get('protocolVersion')}, not {LEGACY}")
        self.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        return result

    def start(self) -> None:
        """Spawn, hand-shake (legacy) and make one checked call; then learn the processes on the path."""
        self.spawn()
        assert self.proc is not None
        if not self.modern:
            self.server_info = self.initialize().get("serverInfo")
        request_id = self.take(1)
        self.write(self.template % request_id)
        msg = self.one(request_id, START_TIMEOUT)
        check_answer(self.label, msg, request_id)
        self.sample = msg
        self.meter = CpuMeter(self.roles_of(self.proc.pid))

    def take(self, count: int) -> int:
        first = self.next_id
        self.next_id += count
        return first

    def block(self, depth: int, seconds: float) -> dict[str, Any]:
        cpu0 = self.meter.read()
        client0 = time.process_time()
        start = time.perf_counter()
        lat = self.run_seq(seconds) if depth == 1 else self.run_pipe(depth, seconds)
        elapsed = time.perf_counter() - start
        client = time.process_time() - client0
        cpu1 = self.meter.read()
        return block_result(lat, elapsed, {r: cpu1[r] - cpu0.get(r, 0.0) for r in cpu1}, client)

    def run_seq(self, seconds: float) -> list[int]:
        clock = time.perf_counter_ns
        end = clock() + int(seconds * 1e9)
        lat: list[int] = []
        template, write, responses, label = self.template, self.write, self.responses, self.label
        request_id = self.take(0)
        while True:
            t0 = clock()
            if t0 >= end:
                break
            write(template % request_id)
            got = responses()
            while not got:
                got = responses()
            t1 = clock()
            if len(got) != 1:
                raise BenchError(f"{label}: {len(got)} responses to one request")
            check_answer(label, got[0], request_id)
            lat.append(t1 - t0)
            request_id += 1
        self.next_id = request_id
        return lat

    def run_pipe(self, depth: int, seconds: float) -> list[int]:
        clock = time.perf_counter_ns
        end = clock() + int(seconds * 1e9)
        lat: list[int] = []
        template, label = self.template, self.label
        first = self.take(depth)
        sent: dict[int, int] = {}
        now = clock()
        for i in range(first, first + depth):
            sent[i] = now
        self.write(b"".join(template % i for i in range(first, first + depth)))
        next_id = self.next_id
        while sent:
            got = self.responses()
            now = clock()
            batch = []
            for msg in got:
                request_id = msg.get("id")
                t0 = sent.pop(request_id, None)  # type: ignore[arg-type]
                if t0 is None:
                    raise BenchError(f"{label}: an answer to an unknown request: {str(msg)[:300]}")
                check_answer(label, msg, request_id)  # type: ignore[arg-type]
                lat.append(now - t0)
                if now < end:
                    sent[next_id] = now
                    batch.append(template % next_id)
                    next_id += 1
            if batch:
                self.write(b"".join(batch))
        self.next_id = next_id
        return lat

    # -- bookkeeping --------------------------------------------------------

    def stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        self.stderr.seek(0)
        tail = self.stderr.read()[-2000:].decode(errors="replace").strip()
        return f"\n--- {self.label} stderr ---\n{tail}" if tail else ""

    def close(self, notes: list[str]) -> None:
        if self.proc is None:
            return
        family = descendants(self.proc.pid)
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            notes.append(f"{self.label} did not exit 15 s after its stdin closed; killed")
            self.proc.kill()
            self.proc.wait()
        kill_all(wait_gone(family, 5.0), notes, f"outlived {self.label}")
        with contextlib.suppress(OSError):
            self.proc.stdout.close()  # type: ignore[union-attr]
        if self.stderr is not None:
            self.stderr.close()
        self.proc = None


# ---------------------------------------------------------------------------
# HTTP paths: keep-alive connections to an MCP endpoint
# ---------------------------------------------------------------------------


class HttpPath:
    """An MCP endpoint over keep-alive HTTP/1.1 (legacy sessions, or 2026-07-28), one request per connection."""

    def __init__(self, key: str, label: str, url: str, roles: dict[int, str], modern: bool) -> None:
        self.key = key
        self.label = label
        parts = urllib.parse.urlsplit(url)
        self.server = types.SimpleNamespace(
            name=label, host=parts.hostname or "127.0.0.1", port=parts.port or 80, path=parts.path or "/"
        )
        self.era = HTTP_MODERN if modern else HTTP_LEGACY
        self.meter = CpuMeter(roles)
        self.conns: list[Conn] = []
        self.failed: str | None = None
        self.sample: Any = None

    def start(self) -> None:
        self.ensure(1)
        self.sample = self.conns[0].sample

    def ensure(self, count: int) -> None:
        while len(self.conns) < count:
            conn = Conn(self.server, self.era)  # type: ignore[arg-type]
            self.conns.append(conn)
            conn.handshake()  # the legacy handshake (a session per connection), then one checked call

    def block(self, depth: int, seconds: float) -> dict[str, Any]:
        self.ensure(depth)
        conns = self.conns[:depth]
        for c in conns:
            c.revive()  # outside the timing: a connection idle for 2 s, or closed by the server, is replaced
        cpu0 = self.meter.read()
        client0 = time.process_time()
        start = time.perf_counter()
        lat = self.run_seq(conns[0], seconds) if depth == 1 else self.run_conc(conns, seconds)
        elapsed = time.perf_counter() - start
        client = time.process_time() - client0
        cpu1 = self.meter.read()
        return block_result(lat, elapsed, {r: cpu1[r] - cpu0.get(r, 0.0) for r in cpu1}, client)

    def run_seq(self, conn: Conn, seconds: float) -> list[int]:
        sock, name = conn.sock, self.label
        sock.settimeout(TIMEOUT)
        clock = time.perf_counter_ns
        end = clock() + int(seconds * 1e9)
        lat: list[int] = []
        while True:
            t0 = clock()
            if t0 >= end:
                break
            request_id = conn.take()
            sock.sendall(conn.call(request_id))
            buf = conn.buf
            while True:
                got = parse_response(buf, 0)
                if got is not None:
                    break
                chunk = sock.recv(65536)
                if not chunk:
                    raise BenchError(f"{name}: connection closed")
                buf += chunk
            t1 = clock()
            status, head, body, stop = got
            conn.buf = buf[stop:]
            check_echo(name, status, head, body, request_id)
            lat.append(t1 - t0)
        conn.last_used = time.monotonic()
        return lat

    def run_conc(self, conns: list[Conn], seconds: float) -> list[int]:
        by_fd = {c.fd: c for c in conns}
        clock = time.perf_counter_ns
        end = clock() + int(seconds * 1e9)
        sent: dict[int, int] = {}
        lat: list[int] = []
        poller = _Poller()
        try:
            now = clock()
            for c in conns:
                c.sock.setblocking(False)
                poller.register(c.fd)
                c.expect = c.take()
                sent[c.fd] = now
                http_send(c, c.call(c.expect))
            while sent:
                events = poller.poll(TIMEOUT)
                if not events:
                    raise BenchError(f"{self.label}: no answer within {TIMEOUT}s ({len(sent)} pending)")
                for fd, _ in events:
                    c = by_fd[fd]
                    chunk = c.sock.recv(65536)
                    if not chunk:
                        raise BenchError(f"{self.label}: connection closed")
                    buf = c.buf + chunk
                    got = parse_response(buf, 0)
                    if got is None:
                        c.buf = buf
                        continue
                    now = clock()
                    status, head, body, stop = got
                    c.buf = buf[stop:]
                    check_echo(self.label, status, head, body, c.expect)
                    lat.append(now - sent.pop(fd))
                    if now < end:
                        c.expect = c.take()
                        sent[fd] = now
                        http_send(c, c.call(c.expect))
        finally:
            poller.close()
            stamp = time.monotonic()
            for c in conns:
                c.sock.settimeout(TIMEOUT)
                c.last_used = stamp
        return lat

    def close(self, notes: list[str]) -> None:
        for c in self.conns:
            c.close()
        self.conns = []


# ---------------------------------------------------------------------------
# The bench: environment, daemons, helper servers
# ---------------------------------------------------------------------------


class Bench:
    def __init__(
        self, tmp: Path, args: argparse.Namespace, fastmcp_python: str | None, src: str | None
    ) -> None:
        self.tmp = tmp
        self.args = args
        self.modern: bool = args.modern
        self.fastmcp_python = fastmcp_python
        self.src = src
        self.home = tmp / "home"
        self.home.mkdir()
        self.cwd = str(tmp)  # never the repository: ``python -m mcpx`` would import the working tree from it
        self.notes: list[str] = []
        self.daemons: dict[str, Daemon] = {}
        self.helpers: list[tuple[str, subprocess.Popen[bytes], BinaryIO]] = []

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPX_")}
        env["HOME"] = str(self.home)
        if not self.args.env_bytecode:
            # As an installed mcpx has: compiled bytecode.  A private cache, so nothing is written
            # into the repository (or anywhere else) and PYTHONDONTWRITEBYTECODE cannot make every
            # start compile mcpx from source.  The untimed starts before each figure fill it.
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(self.tmp / "pycache")
        if self.src is not None:
            env["PYTHONPATH"] = self.src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.update(extra or {})
        return env

    def stdio(
        self, key: str, label: str, command: list[str], roles: Callable[[int], dict[int, str]], **kw: Any
    ) -> StdioPath:
        env = kw.pop("env", None) or self.env()
        return StdioPath(key, label, command, env=env, cwd=self.cwd, modern=self.modern, roles=roles, **kw)

    def start_helper(
        self, label: str, command: list[str], ready: str
    ) -> tuple[subprocess.Popen[bytes], re.Match[str]]:
        """A long-running helper (stdin a pipe: closing it stops the helper); waits for ``ready`` on stderr."""
        err: BinaryIO = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop_helpers()
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=self.env(),
            cwd=self.cwd,
        )
        self.helpers.append((label, proc, err))
        deadline = time.monotonic() + START_TIMEOUT
        pattern = re.compile(ready)
        while time.monotonic() < deadline:
            err.seek(0)
            match = pattern.search(err.read().decode(errors="replace"))
            if match:
                return proc, match
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        err.seek(0)
        raise BenchError(f"{label} did not start: {err.read()[-2000:].decode(errors='replace')}")

    def stop_helpers(self) -> None:
        for label, proc, err in self.helpers:
            family = descendants(proc.pid)
            with contextlib.suppress(OSError):
                proc.stdin.close()  # type: ignore[union-attr]
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.notes.append(f"{label} did not stop when its stdin closed; killed")
                proc.kill()
                proc.wait()
            kill_all(wait_gone(family, 5.0), self.notes, f"outlived {label}")
            err.close()
        self.helpers = []


def toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


class Daemon:
    """``mcpx daemon`` with a private state directory and a config naming one upstream."""

    def __init__(self, bench: Bench, name: str, server: str, command: list[str], passthrough: bool) -> None:
        self.bench = bench
        self.name = name
        self.server = server
        self.state = bench.tmp / f"state-{name}"
        self.config = bench.tmp / f"config-{name}.toml"
        lines = []
        if passthrough:
            lines += ["[mcp]", f"passthrough = [{toml_str(server)}]", ""]
        # The echo servers keep no state, so they are configured as a user would configure such a
        # server: one instance for every host (``scope = "shared"``), as the floors have one
        # upstream.  A command server's default, one instance per host, would give each of the
        # sixteen HTTP sessions of phase C a process of its own.
        lines += [
            f"[servers.{server}]",
            f"command = {toml_str(command[0])}",
            "args = [" + ", ".join(toml_str(a) for a in command[1:]) + "]",
            'scope = "shared"',
        ]
        self.config.write_text("\n".join(lines) + "\n")
        self.env = bench.env(
            {"MCPX_STATE": str(self.state), "MCPX_CONFIG": str(self.config), "MCPX_TRANSPORT_PORT": "0"}
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}
        self.started_pid: int | None = None

    def read_info(self) -> dict[str, Any] | None:
        try:
            info = orjson.loads((self.state / "daemon.json").read_bytes())
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            return None
        return info if alive(pid) else None

    @property
    def pid(self) -> int:
        return int(self.info["pid"])

    def start(self) -> None:
        self.state.mkdir(mode=0o700)
        log = os.open(self.state / "daemon.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self.proc = subprocess.Popen(
                [PY, "-m", "mcpx", "daemon"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self.env,
                cwd=self.bench.cwd,
                start_new_session=True,
            )
        finally:
            os.close(log)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            info = self.read_info()
            if info is not None:
                self.info = info
                self.started_pid = self.pid
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise BenchError(f"mcpx daemon ({self.name}) did not start{self.log_tail()}")

    def serve_roles(self, shim: int) -> dict[int, str]:
        """The processes behind ``mcpx serve`` (pid ``shim``): the shim, the daemon, the pooled upstream."""
        info = self.read_info()
        if info is None:
            raise BenchError(f"mcpx serve answered but no daemon runs for {self.state}{self.log_tail()}")
        if int(info["pid"]) != self.started_pid:
            self.bench.notes.append(
                f"the {self.name} daemon is pid {info['pid']}, not the one started ({self.started_pid})"
            )
        self.info = info
        roles = dict.fromkeys(descendants(shim) | {shim}, "shim")
        roles[self.pid] = "daemon"
        for pid in descendants(self.pid):
            roles[pid] = "upstream"
        return roles

    def daemon_roles(self) -> dict[int, str]:
        roles = {self.pid: "daemon"}
        for pid in descendants(self.pid):
            roles[pid] = "upstream"
        return roles

    def serve_path(
        self, key: str, label: str, tool: str = "echo", arguments: dict[str, Any] | None = None
    ) -> StdioPath:
        return self.bench.stdio(
            key,
            label,
            [PY, "-m", "mcpx", "serve"],
            self.serve_roles,
            env=self.env,
            tool=tool,
            arguments=arguments,
        )

    def rss(self) -> dict[str, int | None]:
        upstream = sorted(descendants(self.pid))
        return {
            "daemon_kib": rss_kib(self.pid),
            "upstream_kib": sum(rss_kib(p) or 0 for p in upstream) or None,
        }

    def log_tail(self) -> str:
        try:
            tail = (self.state / "daemon.log").read_text(errors="replace")[-2000:].strip()
        except OSError:
            return ""
        return f"\n--- {self.name} daemon.log ---\n{tail}" if tail else ""

    def stop(self) -> None:
        notes = self.bench.notes
        info = self.read_info()
        pids = set()
        if info is not None:
            pid = int(info["pid"])
            if pid != self.started_pid:
                notes.append(
                    f"daemon.json of {self.name} names pid {pid}, not the one started ({self.started_pid})"
                )
            pids.add(pid)
        if self.proc is not None and self.proc.poll() is None:
            pids.add(self.proc.pid)
        family = set().union(*(descendants(p) for p in pids)) if pids else set()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                notes.append(f"the {self.name} daemon ignored SIGTERM for 15 s; killed")
                self.proc.kill()
                self.proc.wait()
        kill_all(wait_gone(pids | family, 10.0), notes, f"outlived the {self.name} daemon")
        self.proc = None


# ---------------------------------------------------------------------------
# Phases
# ---------------------------------------------------------------------------


def stdio_roles(first: str) -> Callable[[int], dict[int, str]]:
    def roles(pid: int) -> dict[int, str]:
        found = {pid: first}
        for child in descendants(pid):
            found[child] = "upstream"
        return found

    return roles


def run_rounds(
    title: str, paths: list[Any], modes: list[int], args: argparse.Namespace, notes: list[str]
) -> dict[str, dict[int, dict[int, dict[str, Any]]]]:
    """Warm up, then ``--rounds`` rotating blocks per path and mode: blocks[path][depth][round]."""
    blocks: dict[str, dict[int, dict[int, dict[str, Any]]]] = {p.key: {d: {} for d in modes} for p in paths}
    for depth in modes:
        live = [p for p in paths if p.failed is None]
        for p in live:
            run_block(p, depth, args.warmup_seconds, notes)
        for r in range(args.rounds):
            live = [p for p in paths if p.failed is None]
            shift = r % len(live) if live else 0
            for p in live[shift:] + live[:shift]:
                block = run_block(p, depth, args.block_seconds, notes)
                if block is not None:
                    blocks[p.key][depth][r] = block
        mode = "seq" if depth == 1 else f"{depth} in flight"
        print(f"  {title}: {mode} done (load average {fmt_load(load_average())})", flush=True)
    return blocks


def run_block(path: Any, depth: int, seconds: float, notes: list[str]) -> dict[str, Any] | None:
    if path.failed is not None:
        return None
    try:
        return path.block(depth, seconds)  # type: ignore[no-any-return]
    except ERRORS as exc:
        path.failed = f"{type(exc).__name__}: {exc}"
        notes.append(f"{path.label} failed during a block and was dropped: {path.failed[:1500]}")
        return None


def start_paths(paths: list[Any], notes: list[str]) -> list[Any]:
    for p in paths:
        try:
            p.start()
        except ERRORS as exc:
            p.failed = f"{type(exc).__name__}: {exc}"
            notes.append(f"{p.label} could not be started and is left out: {p.failed[:1500]}")
    return paths


def close_paths(paths: list[Any], notes: list[str]) -> None:
    for p in paths:
        with contextlib.suppress(Exception):
            p.close(notes)


def phase_result(paths: list[Any], blocks: dict[str, dict[int, dict[int, dict[str, Any]]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in paths:
        out[p.key] = {
            "label": p.label,
            "failed": p.failed,
            "command": getattr(p, "command", None),
            "sample_answer": p.sample,
            "modes": {str(d): summarise(b) for d, b in blocks[p.key].items()},
        }
    return out


def fig(phase: dict[str, Any], key: str, depth: int) -> dict[str, Any] | None:
    entry = phase.get(key)
    if entry is None:
        return None
    return entry["modes"].get(str(depth))  # type: ignore[no-any-return]


def paired(
    phase: dict[str, Any], depth: int, fn: Callable[..., float | None], *keys: str, field: str = "p50_us"
) -> float | None:
    """The median over rounds (where every path has a block) of ``fn(each key's block[field], ...)``."""
    figs = [fig(phase, k, depth) for k in keys]
    if any(f is None for f in figs):
        return None
    per_round = [{r: b[field] for r, b in f["blocks"].items()} for f in figs]  # type: ignore[index]
    rounds = set(per_round[0]).intersection(*per_round[1:])
    values = []
    for r in sorted(rounds):
        value = fn(*(p[r] for p in per_round))
        if value is not None:
            values.append(value)
    return med(values)


def ratio_of(x: float, y: float) -> float | None:
    return x / y if y else None


def added_ratio(x: float, direct: float, relay: float) -> float | None:
    floor = relay - direct
    return (x - direct) / floor if floor > 0 else None


def phase_a_paths(bench: Bench) -> list[Any]:
    pt, gw = bench.daemons["pass"], bench.daemons["gateway"]
    paths: list[Any] = [
        bench.stdio("direct", "direct (raw echo)", RAW_ECHO, stdio_roles("server")),
        bench.stdio(
            "relay-asyncio",
            "relay asyncio",
            [PY, str(HERE / "raw_relay.py"), "--loop", "asyncio", "--", *RAW_ECHO],
            stdio_roles("relay"),
        ),
        bench.stdio(
            "relay-uvloop",
            "relay uvloop",
            [PY, str(HERE / "raw_relay.py"), "--loop", "uvloop", "--", *RAW_ECHO],
            stdio_roles("relay"),
        ),
        pt.serve_path("mcpx-pass", "mcpx serve pass-through"),
        gw.serve_path(
            "mcpx-gateway",
            "mcpx serve gateway (mcpx_call)",
            "mcpx_call",
            {"server": "echo", "tool": "echo", "arguments": {"text": TEXT}},
        ),
    ]
    if bench.fastmcp_python:
        paths.append(
            bench.stdio(
                "fastmcp-proxy",
                "FastMCP proxy",
                [bench.fastmcp_python, str(HERE / "fastmcp_proxy_server.py"), *RAW_ECHO],
                stdio_roles("proxy"),
            )
        )
    return paths


def phase_b_paths(bench: Bench) -> list[Any]:
    assert bench.fastmcp_python is not None
    server = [bench.fastmcp_python, str(HERE / "fastmcp_echo_server.py")]
    return [
        bench.stdio("direct", "FastMCP server direct", server, stdio_roles("server")),
        bench.daemons["fastmcp"].serve_path("mcpx-pass", "mcpx serve pass-through"),
        bench.stdio(
            "fastmcp-proxy",
            "FastMCP proxy",
            [bench.fastmcp_python, str(HERE / "fastmcp_proxy_server.py"), *server],
            stdio_roles("proxy"),
        ),
        bench.stdio(
            "relay-asyncio",
            "relay asyncio",
            [PY, str(HERE / "raw_relay.py"), "--loop", "asyncio", "--", *server],
            stdio_roles("relay"),
        ),
    ]


def phase_c_paths(bench: Bench) -> list[Any]:
    pt = bench.daemons["pass"]
    proc, match = bench.start_helper(
        "raw h11 gateway",
        [PY, str(HERE / "raw_h11_gateway.py"), "--", *RAW_ECHO],
        r"serving at (http://\S+/mcp)",
    )
    h11_roles = {proc.pid: "h11 gateway"}
    for pid in descendants(proc.pid):
        h11_roles[pid] = "upstream"
    return [
        HttpPath("mcpx-http", "daemon /mcp (pass-through)", pt.info["mcp"], pt.daemon_roles(), bench.modern),
        HttpPath("h11-floor", "raw h11 gateway", match.group(1), h11_roles, bench.modern),
    ]


def phase_d_paths(bench: Bench) -> list[Any]:
    return [
        bench.stdio("mcpx-demo", "mcpx demo", [PY, "-m", "mcpx", "demo"], stdio_roles("server")),
        bench.stdio("sdk", "SDK (mcp 2.3.0)", [PY, str(HERE / "sdk_echo_server.py")], stdio_roles("server")),
    ]


def run_phase(title: str, bench: Bench, paths: list[Any], modes: list[int]) -> dict[str, Any]:
    print(f"{title} ...", flush=True)
    try:
        start_paths(paths, bench.notes)
        blocks = run_rounds(title, paths, modes, bench.args, bench.notes)
    finally:
        close_paths(paths, bench.notes)
    return phase_result(paths, blocks)


# ---------------------------------------------------------------------------
# Start-up, size, core
# ---------------------------------------------------------------------------


def time_first_answer(
    bench: Bench, command: list[str], env: dict[str, str], roles_key: str
) -> tuple[float, float]:
    """Seconds from launching ``command`` to its first answer (initialize, or the first call at 2026-07-28),
    and to its first answered echo."""
    path = bench.stdio(roles_key, roles_key, command, lambda pid: {}, env=env)
    start = time.perf_counter()
    path.spawn()
    try:
        if not bench.modern:
            path.initialize()
            first = time.perf_counter() - start
        request_id = path.take(1)
        path.write(path.template % request_id)
        check_answer(roles_key, path.one(request_id, START_TIMEOUT), request_id)
        called = time.perf_counter() - start
        if bench.modern:
            first = called
    finally:
        path.close(bench.notes)
    return first, called


def wall(command: list[str], env: dict[str, str], cwd: str, expect: str | None) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, check=False, timeout=START_TIMEOUT)
    took = time.perf_counter() - start
    if done.returncode != 0 or (expect is not None and expect not in done.stdout.decode(errors="replace")):
        raise BenchError(
            f"{' '.join(command)} exited {done.returncode}: {done.stdout[-500:]!r} {done.stderr[-1500:]!r}"
        )
    return took


def startup(bench: Bench, runs: int) -> dict[str, Any]:
    print("start-up ...", flush=True)
    pt = bench.daemons["pass"]
    cases: dict[str, Callable[[], tuple[float, float]]] = {
        "serve_warm": lambda: time_first_answer(
            bench, [PY, "-m", "mcpx", "serve"], pt.env, "mcpx serve (warm daemon)"
        ),
        "raw_echo": lambda: time_first_answer(bench, RAW_ECHO, bench.env(), "raw echo"),
        "mcpx_call_warm": lambda: (
            (wall([PY, "-m", "mcpx", "call", "echo", "echo", "--arg", "text=hi"], pt.env, bench.cwd, '"hi"'),)
            * 2
        ),
        "mcpx_version": lambda: (wall([PY, "-m", "mcpx", "version"], bench.env(), bench.cwd, None),) * 2,
        "python_bare": lambda: (wall([PY, "-c", "pass"], bench.env(), bench.cwd, None),) * 2,
        "python_import_mcpx_cli": lambda: (
            (wall([PY, "-c", "import mcpx.cli"], bench.env(), bench.cwd, None),) * 2
        ),
    }
    times: dict[str, list[tuple[float, float]]] = {case: [] for case in cases}
    for case, once in cases.items():  # untimed: the bytecode cache and the page cache are warm after it
        try:
            once()
        except ERRORS as exc:
            bench.notes.append(f"start-up case {case} failed: {str(exc)[:1500]}")
    for r in range(runs):
        order = list(cases)
        shift = r % len(order)
        for case in order[shift:] + order[:shift]:
            try:
                times[case].append(cases[case]())
            except ERRORS as exc:
                bench.notes.append(f"start-up case {case} failed: {str(exc)[:1500]}")
    return {
        case: {
            "median_first_s": med([t[0] for t in ts]),
            "median_first_call_s": med([t[1] for t in ts]),
            "runs": ts,
        }
        for case, ts in times.items()
    }


CORE_ROW = re.compile(
    r"^(\d{4}-\d\d-\d\d)\s+([\d,]+)\s+([\d.]+)\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)\s+([\d,]+)\s*$"
)


def core(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    print("bench_core.py ...", flush=True)
    command = [
        PY, str(HERE / "bench_core.py"), "--messages", str(args.core_messages), "--runs", str(args.core_runs),
        "--revisions", f"{LEGACY},{MODERN}", "--no-json",
    ]  # fmt: skip
    done = subprocess.run(
        command, env=bench.env(), cwd=bench.cwd, capture_output=True, text=True, check=False, timeout=600
    )
    rows: dict[str, Any] = {}
    for line in done.stdout.splitlines():
        m = CORE_ROW.match(line.strip())
        if m:
            num = [float(g.replace(",", "")) for g in m.groups()[1:]]
            rows[m.group(1)] = {
                "route_msgs_per_s": num[0], "route_best": num[2], "core_msgs_per_s": num[3], "core_best": num[5],
            }  # fmt: skip
    if done.returncode != 0 or not rows:
        bench.notes.append(f"bench_core.py failed ({done.returncode}): {done.stderr[-1500:]}")
    return {"command": command[1:], "rows": rows, "stdout": done.stdout}


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------


def fmt_load(load: list[float] | None) -> str:
    return "n/a" if load is None else " ".join(f"{x:.2f}" for x in load)


def f0(x: float | None, unit: str = "") -> str:
    return "n/a" if x is None else f"{x:,.0f}{unit}"


def f1(x: float | None, scale: float = 1.0) -> str:
    return "n/a" if x is None else f"{x / scale:.1f}"


def f2(x: float | None, unit: str = "") -> str:
    return "n/a" if x is None else f"{x:.2f}{unit}"


def mode_name(depth: int) -> str:
    return "seq" if depth == 1 else f"{depth} in fl."


def print_phase(title: str, phase: dict[str, Any], modes: list[int], base: str | None) -> None:
    print()
    print(title)
    head = f"{'path':<32} {'mode':<9} {'calls/s':>8} {'p50 µs':>8} {'p99 µs':>8} {'p99/p50':>7}"
    if base:
        head += f" {'added p50':>9} {'p50/base':>8} {'paired':>7}"
    head += f" {'µs CPU/call':>11} {'client':>6}"
    print(head)
    print("-" * len(head))
    for depth in modes:
        b = fig(phase, base, depth) if base else None
        for key, entry in phase.items():
            s = entry["modes"].get(str(depth))
            if s is None:
                print(
                    f"{entry['label']:<32} {mode_name(depth):<9} {'failed' if entry['failed'] else 'n/a':>8}"
                )
                continue
            line = (
                f"{entry['label']:<32} {mode_name(depth):<9} {f0(s['median_calls_per_s']):>8} {f0(s['p50_us']):>8}"
                f" {f0(s['p99_us']):>8} {f2(s['p99_us'] / s['p50_us'] if s['p50_us'] else None):>7}"
            )
            if base:
                if b is not None and key != base:
                    ratio = paired(phase, depth, ratio_of, key, base)
                    line += f" {f0(s['p50_us'] - b['p50_us']):>9} {f2(s['p50_us'] / b['p50_us']):>8} {f2(ratio):>7}"
                else:
                    line += f" {'':>9} {'':>8} {'':>7}"
            share = s["client_cpu_share"]
            line += (
                f" {f0(s['server_cpu_us_per_call']):>11} {f0(None if share is None else 100 * share, '%'):>6}"
            )
            print(line)


def print_cpu(phases: dict[str, dict[str, Any]], modes: list[int]) -> None:
    print()
    print("CPU per call, per process (µs; user+system, reaped children included, from /proc/<pid>/stat):")
    for name, phase in phases.items():
        for entry in phase.values():
            parts = []
            for depth in modes:
                s = entry["modes"].get(str(depth))
                if s is None:
                    continue
                roles = ", ".join(f"{r} {us:,.0f}" for r, us in s["cpu_us_per_call_by_role"].items())
                parts.append(f"{mode_name(depth)}: {roles}, client {f0(s['client_cpu_us_per_call'])}")
            if parts:
                print(f"  {name} / {entry['label']}: " + "; ".join(parts))


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("MET" if ok else "NOT MET")


_OTHER_FLOOR = {"relay-asyncio": "relay-uvloop", "relay-uvloop": "relay-asyncio"}  # shown beside it


def targets(results: dict[str, Any], depth: int) -> list[dict[str, Any]]:
    """The issue's targets, each with the figure measured and MET / NOT MET."""
    a, b, c, d = (
        results.get(k, {}) for k in ("stdio_raw_echo", "stdio_fastmcp_server", "http", "demo_vs_sdk")
    )
    rows: list[dict[str, Any]] = []

    def row(name: str, figure: str, target: str, ok: bool | None, value: float | None = None) -> None:
        rows.append(
            {"figure": name, "measured": figure, "target": target, "verdict": verdict(ok), "value": value}
        )

    def p50(phase: dict[str, Any], key: str, dep: int = 1) -> float | None:
        s = fig(phase, key, dep)
        return None if s is None else s["p50_us"]

    def rate(phase: dict[str, Any], key: str, dep: int) -> float | None:
        s = fig(phase, key, dep)
        return None if s is None else s["median_calls_per_s"]

    loop = results.get("daemon_loop", "asyncio")
    floor_key = f"relay-{loop}" if loop in ("asyncio", "uvloop") else "relay-asyncio"
    floor_loop = floor_key.removeprefix("relay-")
    direct, relay = p50(a, "direct"), p50(a, floor_key)
    relay_added = None if direct is None or relay is None else relay - direct
    for key, name, limit in (
        ("mcpx-pass", "added p50, mcpx serve pass-through over direct", 1.5),
        ("mcpx-gateway", "added p50, gateway mode (mcpx_call)", 2.0),
    ):
        x = p50(a, key)
        ratio = paired(a, 1, added_ratio, key, "direct", floor_key)
        figure = "n/a"
        if x is not None and direct is not None and relay_added is not None:
            figure = f"{x - direct:,.0f} µs vs floor {relay_added:,.0f} µs"
            if ratio is not None:
                figure += f": {ratio:.1f}× (paired)"
            other = paired(a, 1, added_ratio, key, "direct", _OTHER_FLOOR[floor_key])
            if other is not None:
                figure += f"; {other:.1f}× {_OTHER_FLOOR[floor_key].removeprefix('relay-')}'s"
        row(
            name,
            figure,
            f"≤ {limit:g}× relay floor's ({floor_loop}, as the daemon)",
            None if ratio is None else ratio <= limit,
            ratio,
        )
    m, r = rate(a, "mcpx-pass", depth), rate(a, floor_key, depth)
    ratio = paired(a, depth, ratio_of, "mcpx-pass", floor_key, field="calls_per_s")
    other = paired(a, depth, ratio_of, "mcpx-pass", _OTHER_FLOOR[floor_key], field="calls_per_s")
    figure = "n/a" if ratio is None else f"{m:,.0f} vs floor {r:,.0f} calls/s: {ratio:.2f}× (paired)"
    if ratio is not None and other is not None:
        figure += f"; {other:.2f}× {_OTHER_FLOOR[floor_key].removeprefix('relay-')}'s"
    row(
        f"{depth} in flight through mcpx serve",
        figure,
        f"≥ 0.4× relay floor's calls/s ({floor_loop})",
        None if ratio is None else ratio >= 0.4,
        ratio,
    )
    ratio = paired(b, 1, ratio_of, "mcpx-pass", "direct")
    extra = []
    for key, label in (("fastmcp-proxy", "FastMCP proxy"), ("relay-asyncio", "relay")):
        other = paired(b, 1, ratio_of, key, "direct")
        if other is not None:
            extra.append(f"{label} {other:.2f}×")
    row(
        "in front of FastMCP's server, pass-through",
        "n/a" if ratio is None else f"proxied/direct p50 {ratio:.2f}× ({', '.join(extra)})",
        "proxied/direct p50 ≤ 1.4×",
        None if ratio is None else ratio <= 1.4,
        ratio,
    )
    x, floor = p50(c, "mcpx-http"), p50(c, "h11-floor")
    row(
        "/mcp → stdio p50, 1 connection",
        "n/a" if x is None else f"{x:,.0f} µs (h11 floor {f0(floor)} µs)",
        "≤ 500 µs",
        None if x is None else x <= 500,
        x,
    )
    x, floor = rate(c, "mcpx-http", depth), rate(c, "h11-floor", depth)
    row(
        f"/mcp → stdio, {depth} connections",
        "n/a" if x is None else f"{x:,.0f} calls/s (h11 floor {f0(floor)})",
        "≥ 5,000 calls/s",
        None if x is None else x >= 5000,
        x,
    )
    for dep, limit in ((1, 4.0), (depth, 30.0)):
        mx, sx = rate(d, "mcpx-demo", dep), rate(d, "sdk", dep)
        ratio = paired(d, dep, ratio_of, "mcpx-demo", "sdk", field="calls_per_s")
        row(
            f"mcpx demo stdio vs SDK, {mode_name(dep)}",
            "n/a" if ratio is None else f"{mx:,.0f} vs {sx:,.0f} calls/s: {ratio:.1f}× (paired)",
            f"≥ {limit:g}× the SDK",
            None if ratio is None else ratio >= limit,
            ratio,
        )
    for dep in (1, depth):
        s = fig(d, "mcpx-demo", dep)
        ratio = None if s is None or not s["p50_us"] else s["p99_us"] / s["p50_us"]
        row(
            f"mcpx demo stdio p99/p50, {mode_name(dep)}",
            "n/a" if s is None else f"{s['p99_us']:,.0f} / {s['p50_us']:,.0f} µs: {ratio:.2f}",
            "≤ 2",
            None if ratio is None else ratio <= 2,
            ratio,
        )
    st = results.get("startup", {})
    for key, name in (
        ("serve_warm", "mcpx serve warm start (launch → first answer)"),
        ("mcpx_call_warm", "mcpx call warm (wall)"),
    ):
        x = (st.get(key) or {}).get("median_first_s")
        row(
            name,
            "n/a" if x is None else f"{1000 * x:,.0f} ms",
            "≤ 150 ms",
            None if x is None else x <= 0.150,
            x,
        )
    rss = results.get("rss", {})
    warm, after = ((rss.get(f"pass_{when}") or {}).get("daemon_kib") for when in ("warm", "after"))
    known = [k for k in (warm, after) if k]
    # The larger of the two readings, judged in MB as the target is written (10^6 bytes: the
    # stricter reading of "MB"), and shown in MiB as /proc and top report it too.
    x = max(known) * 1024 / 1e6 if known else None
    row(
        "daemon RSS, one upstream (pass-through)",
        "n/a"
        if x is None
        else f"{x:.1f} MB = {x * 1e6 / 2**20:.1f} MiB (warm {f1(warm, 1024)}, after the load {f1(after, 1024)} MiB)",
        "≤ 35 MB",
        None if x is None else x <= 35,
        x,
    )
    crow = (results.get("core") or {}).get("rows", {}).get(LEGACY)
    x = None if crow is None else crow["core_msgs_per_s"]
    row(
        f"core (bench_core.py), {LEGACY}",
        "n/a"
        if crow is None
        else f"core {crow['core_msgs_per_s']:,.0f}, route {crow['route_msgs_per_s']:,.0f} msgs/s",
        "≥ 100k tools/call msgs/s",
        None if x is None else x >= 100_000,
        x,
    )
    return rows


def print_targets(rows: list[dict[str, Any]]) -> None:
    print()
    w1 = max(len(r["figure"]) for r in rows)
    w2 = max(len(r["measured"]) for r in rows)
    w3 = max(len(r["target"]) for r in rows)
    head = f"{'figure':<{w1}}  {'measured':<{w2}}  {'target':<{w3}}  verdict"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['figure']:<{w1}}  {r['measured']:<{w2}}  {r['target']:<{w3}}  {r['verdict']}")


# ---------------------------------------------------------------------------
# Setup: FastMCP's venv, the committed mcpx
# ---------------------------------------------------------------------------


def fastmcp_version(python: str) -> str | None:
    probe = subprocess.run(
        [python, "-c", "import fastmcp; print(fastmcp.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def ensure_fastmcp(python: str | None) -> tuple[str, str]:
    """A Python with ``fastmcp`` (the given one, else /tmp/fastmcp-venv, created if missing); its version."""
    if python is None:
        python = str(FASTMCP_VENV / "bin" / "python")
        if not Path(python).exists():
            print(f"creating {FASTMCP_VENV} with fastmcp (once) ...", flush=True)
            subprocess.run(["python3", "-m", "venv", str(FASTMCP_VENV)], check=True)
        if fastmcp_version(python) is None:
            subprocess.run([str(FASTMCP_VENV / "bin" / "pip"), "install", "-q", "fastmcp"], check=True)
    version = fastmcp_version(python)
    if version is None:
        raise BenchError(f"{python} cannot import fastmcp; pass --fastmcp-python or --no-fastmcp")
    return python, version


def export_committed(tmp: Path) -> tuple[str, str]:
    """``git archive HEAD mcpx`` into ``tmp/src``; the directory and the commit."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    tar = subprocess.run(
        ["git", "archive", "--format=tar", "HEAD", "mcpx"], cwd=ROOT, capture_output=True, check=True
    )
    src = tmp / "src"
    src.mkdir()
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as archive:
        archive.extractall(src, filter="data")
    return str(src), commit


# ---------------------------------------------------------------------------


PHASES = "ABCDE"
LEGEND = (
    "calls/s: median of the blocks; p50/p99: over every call of the blocks; added p50: p50 - the base's p50;\n"
    "p50/base: of the pooled p50s; paired: median over the rounds of the per-round p50 ratio;\n"
    "µs CPU/call: every process on the path but the load generator; client: the load generator's CPU share"
)


def run(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    depth = args.depth
    modes = [1, depth]
    phases = args.phases
    if not args.env_bytecode:
        # A throwaway daemon first, so that the measured ones start from a warm bytecode cache
        # (compiling at start would inflate their RSS by the compiler's arenas).
        print("filling the bytecode cache (a throwaway daemon) ...", flush=True)
        warm = bench.daemons["warm-up"] = Daemon(bench, "warm-up", "echo", RAW_ECHO, passthrough=True)
        warm.start()
        wall([PY, "-m", "mcpx", "call", "echo", "echo", "--arg", f"text={TEXT}"], warm.env, bench.cwd, TEXT)
        warm.stop()
        del bench.daemons["warm-up"]
    print("starting the daemons (warm-up) ...", flush=True)
    bench.daemons["pass"] = Daemon(bench, "pass", "echo", RAW_ECHO, passthrough=True)
    if "A" in phases:
        bench.daemons["gateway"] = Daemon(bench, "gateway", "echo", RAW_ECHO, passthrough=False)
    if "B" in phases and bench.fastmcp_python:
        server = [bench.fastmcp_python, str(HERE / "fastmcp_echo_server.py")]
        bench.daemons["fastmcp"] = Daemon(bench, "fastmcp", "fastmcp", server, passthrough=True)
    for daemon in bench.daemons.values():
        daemon.start()
    # Warm: one call through each daemon (``mcpx call``, its /v1 path) starts its pooled upstream.
    for daemon in bench.daemons.values():
        command = [PY, "-m", "mcpx", "call", daemon.server, "echo", "--arg", f"text={TEXT}"]
        wall(command, daemon.env, bench.cwd, TEXT)
    results["rss"] = {f"{name}_warm": d.rss() for name, d in bench.daemons.items()}
    # The floor a daemon's hop is held to is the relay on the same loop (the daemon's default,
    # as daemon.json names it: uvloop where installed).
    results["daemon_loop"] = bench.daemons["pass"].info.get("loop", "asyncio")
    tables: list[tuple[str, str, str | None]] = []
    if "A" in phases:
        results["stdio_raw_echo"] = run_phase("A. stdio, raw echo", bench, phase_a_paths(bench), modes)
        title = "A. tools/call echo over stdio in front of raw_echo_server.py (base: direct)"
        tables.append((title, "stdio_raw_echo", "direct"))
    if "fastmcp" in bench.daemons:
        results["stdio_fastmcp_server"] = run_phase(
            "B. stdio, FastMCP server", bench, phase_b_paths(bench), modes
        )
        title = "B. in front of fastmcp_echo_server.py (base: FastMCP server direct)"
        tables.append((title, "stdio_fastmcp_server", "direct"))
    if "C" in phases:
        try:
            results["http"] = run_phase("C. HTTP", bench, phase_c_paths(bench), modes)
        finally:
            bench.stop_helpers()
        era = "2026-07-28" if bench.modern else "legacy sessions"
        title = f"C. HTTP keep-alive ({era}), one request per connection; seq = 1 connection, else {depth}"
        tables.append((title, "http", None))
    if "D" in phases:
        results["demo_vs_sdk"] = run_phase("D. demo vs SDK", bench, phase_d_paths(bench), modes)
        title = "D. mcpx demo (asyncio) vs the SDK's stdio server"
        tables.append((title, "demo_vs_sdk", None))
    results["rss"].update({f"{name}_after": d.rss() for name, d in bench.daemons.items()})
    if "E" in phases:
        results["startup"] = startup(bench, args.cold_runs)
        results["core"] = core(bench, args)
    print()
    print("=" * 100)
    print(f"results (load average now {fmt_load(load_average())})")
    for title, key, base in tables:
        print_phase(title, results[key], modes, base)
    print(LEGEND)
    print_cpu({key: results[key] for _, key, _ in tables}, modes)
    if "E" in phases:
        print_startup(results, args.cold_runs)
    results["targets"] = targets(results, depth)
    return results


def print_startup(results: dict[str, Any], runs: int) -> None:
    print()
    print(
        f"start-up, median of {runs}: launch → first answer (→ first answered echo); wall time for commands"
    )
    labels = {
        "serve_warm": "mcpx serve, daemon warm",
        "raw_echo": "baseline: raw echo server",
        "mcpx_call_warm": "mcpx call echo echo --arg text=hi, daemon warm",
        "mcpx_version": "baseline: python -m mcpx version",
        "python_bare": "baseline: python -c pass",
        "python_import_mcpx_cli": "baseline: python -c 'import mcpx.cli'",
    }
    for case, figures in results["startup"].items():
        first, called = figures["median_first_s"], figures["median_first_call_s"]
        extra = "" if called == first or called is None else f" (→ {1000 * called:,.0f} ms)"
        print(f"  {labels[case]:<48} {f0(None if first is None else 1000 * first, ' ms'):>8}{extra}")
    print("daemon RSS (KiB):")
    for name, value in results["rss"].items():
        print(f"  {name:<16} daemon {f0(value['daemon_kib'])}, its upstream {f0(value['upstream_kib'])}")
    rows = results["core"]["rows"]
    for rev, row in rows.items():
        print(
            f"bench_core.py {rev}: route {row['route_msgs_per_s']:,.0f} msgs/s (best {row['route_best']:,.0f}),"
            f" core {row['core_msgs_per_s']:,.0f} (best {row['core_best']:,.0f})"
        )


def strip_private(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): strip_private(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, list | tuple):
        return [strip_private(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="What one gateway hop costs: mcpx serve / the daemon against relay floors, FastMCP and the SDK."
    )
    parser.add_argument("--quick", action="store_true", help="a short run (under ~90 s)")
    parser.add_argument("--rounds", type=int, help="rotating blocks per path and mode [5; --quick 3]")
    parser.add_argument("--block-seconds", type=float, help="length of one timed block [1.0; --quick 0.3]")
    parser.add_argument(
        "--warmup-seconds", type=float, help="untimed calls per path and mode [0.5; --quick 0.2]"
    )
    parser.add_argument("--depth", type=int, default=16, help="requests in flight (or HTTP connections) [16]")
    parser.add_argument("--cold-runs", type=int, help="launches per start-up case [9; --quick 5]")
    parser.add_argument("--core-messages", type=int, help="bench_core.py --messages [20000; --quick 5000]")
    parser.add_argument("--core-runs", type=int, help="bench_core.py --runs [5; --quick 3]")
    parser.add_argument(
        "--modern", action="store_true", help="the host speaks 2026-07-28 (no handshake) everywhere"
    )
    parser.add_argument(
        "--committed",
        action="store_true",
        help="run the committed mcpx (git archive HEAD), not the working tree",
    )
    parser.add_argument("--mcpx-src", help="run mcpx from this directory (it holds the mcpx package)")
    parser.add_argument(
        "--no-fastmcp", action="store_true", help="leave FastMCP out (its proxy and its server)"
    )
    parser.add_argument(
        "--phases",
        default=PHASES,
        help="which phases to run: A stdio/raw echo, B FastMCP's server, C HTTP, D demo vs SDK, E start-up+core",
    )
    parser.add_argument(
        "--fastmcp-python", help=f"a Python with fastmcp (default: {FASTMCP_VENV}, created if missing)"
    )
    parser.add_argument(
        "--env-bytecode",
        action="store_true",
        help="keep this environment's bytecode settings (default: a private PYTHONPYCACHEPREFIX, written)",
    )
    parser.add_argument("--no-json", action="store_true", help="do not write benchmarks/results/*.json")
    args = parser.parse_args(argv)
    for name, full, quick in (
        ("rounds", 5, 3),
        ("block_seconds", 1.0, 0.3),
        ("warmup_seconds", 0.5, 0.2),
        ("cold_runs", 9, 5),
        ("core_messages", 20_000, 5000),
        ("core_runs", 5, 3),
    ):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    if args.rounds < 1 or args.depth < 2 or args.cold_runs < 1 or args.block_seconds <= 0:
        parser.error(
            "--rounds and --cold-runs must be at least 1, --depth at least 2, --block-seconds positive"
        )
    args.phases = args.phases.upper()
    if not set(args.phases) <= set(PHASES):
        parser.error(f"--phases takes letters from {PHASES}")
    if args.committed and args.mcpx_src:
        parser.error("--committed and --mcpx-src exclude each other")
    if not Path("/proc/self/stat").exists():
        parser.error("this benchmark reads /proc (Linux)")

    fastmcp_python, version = (None, None) if args.no_fastmcp else ensure_fastmcp(args.fastmcp_python)
    facts = machine()
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="mcpx-bench-hop-"))
    src, source = args.mcpx_src, "working tree"
    if args.committed:
        src, commit = export_committed(tmp)
        source = f"committed HEAD {commit} (git archive)"
    elif src:
        source = src
    bench = Bench(tmp, args, fastmcp_python, src)
    print(
        f"one gateway hop, tools/call echo; host at {'2026-07-28 (_meta)' if args.modern else LEGACY + ' (initialize)'};"
        f" {args.rounds} rotating blocks of {args.block_seconds:g} s per path and mode after"
        f" {args.warmup_seconds:g} s of warm-up; {args.depth} in flight; mcpx from the {source}"
        f" ({'bytecode as the environment says' if args.env_bytecode else 'bytecode cached privately'});"
        f" load average {fmt_load(load_average())} on {os.cpu_count()} CPUs",
        flush=True,
    )
    try:
        results = run(bench, args)
    except BaseException:
        for daemon in bench.daemons.values():
            sys.stderr.write(daemon.log_tail() + "\n")
        raise
    finally:
        bench.stop_helpers()
        for daemon in bench.daemons.values():
            daemon.stop()
        kill_all(descendants(os.getpid()), bench.notes, "was left running at the end")
        shutil.rmtree(tmp, ignore_errors=True)
    total = time.perf_counter() - started
    print_targets(results["targets"])
    for note in bench.notes:
        print(f"note: {note}")
    end_load = load_average()
    print(
        f"load average: {fmt_load(facts['loadavg_at_start'])} at the start, {fmt_load(end_load)} at the end"
        f" (1/5/15 min, {os.cpu_count()} CPUs); mcpx from the {source}"
        + (f"; fastmcp {version}" if version else "")
        + f"; took {total:.0f}s"
    )
    if not args.no_json:
        path = write_results(
            "hop",
            {
                "benchmark": "bench_hop",
                "when": now_iso(),
                "machine": facts,
                "mcpx_source": source,
                "settings": {
                    k: getattr(args, k)
                    for k in (
                        "env_bytecode",
                        "rounds",
                        "block_seconds",
                        "warmup_seconds",
                        "depth",
                        "cold_runs",
                        "core_messages",
                        "core_runs",
                        "modern",
                    )
                }
                | {"text": TEXT, "fastmcp_version": version},
                "loadavg_at_end": end_load,
                "seconds": total,
                "notes": bench.notes,
                **strip_private(results),
            },
        )
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
