"""``mcpx demo`` over stdio against the official MCP Python SDK, as ratios.

For every mcpx driver (``--loop asyncio | uvloop | trio | blocking``) the
benchmark spawns two servers side by side:

* ``python -m mcpx demo --loop <driver>``;
* ``python benchmarks/sdk_echo_server.py`` — the SDK's ``MCPServer`` with an
  ``echo`` tool defined the same way as the demo's (``async def echo(text:
  str) -> str``), served with ``MCPServer.run("stdio")``.

One raw JSON-RPC client (this file: subprocess pipes, ``select`` and
``os.read``/``os.write`` on one thread, orjson) talks to both.  It performs the
legacy handshake at 2025-11-25 (``initialize`` + ``notifications/initialized``),
warms both servers up, and then measures ``tools/call`` ``echo`` in two modes:

``seq``   one request at a time: write it, wait for its response, repeat
          (round-trip latency; the figure is calls/s = 1 / latency);
``pipe``  ``--depth`` (16) requests in flight: every response that arrives is
          replaced by a new request at once, until ``--calls`` have been sent
          and answered (throughput under concurrency).

Each mode's ``--calls`` are split into ``--rounds`` blocks per server, and
the blocks alternate between the servers (mcpx, SDK, SDK, mcpx, …), so that
noise on the machine hits both sides alike.  The calls/s figure per server
is the median over its blocks; the ratio is mcpx/SDK of those medians
(> 1 means mcpx is faster).  Every response is checked: right id, a result,
the echoed text.  Server CPU time per call (user + system, all threads, from
``/proc/<pid>/stat``) is recorded as well where ``/proc`` exists, and so is
every call's latency (request written → its response read, as this client
sees it), reported as p50 and p99 over all of a server's blocks.

Results are printed as a table and written as JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, BinaryIO

import orjson
from _util import HERE, load_average, machine, now_iso, write_results

LOOPS = ("asyncio", "uvloop", "trio", "blocking")
MODES = ("seq", "pipe")
PROTOCOL = "2025-11-25"
TEXT = "hello, world"
TIMEOUT = 30.0
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class ServerError(RuntimeError):
    pass


def mcpx_command(loop: str) -> list[str]:
    return [sys.executable, "-m", "mcpx", "demo", "--loop", loop]


def sdk_command() -> list[str]:
    return [sys.executable, str(HERE / "sdk_echo_server.py")]


def call_line(request_id: int) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",'
        b'"params":{"name":"echo","arguments":{"text":"%s"}}}\n' % (request_id, TEXT.encode())
    )


class Peer:
    """One spawned stdio server and the raw JSON-RPC client that talks to it."""

    def __init__(self, name: str, command: list[str]) -> None:
        self.name = name
        self.command = command
        # stderr goes to a file, never a pipe: a full pipe would stall the server.
        self.stderr: BinaryIO = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, bufsize=0
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        self.buf = b""
        self.next_id = 1
        self.response_bytes = 0
        self.sample: Any = None
        self.latencies: list[float] = []  # seconds, one per timed call (see take_latencies)

    # -- the wire ------------------------------------------------------------

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.wfd, view) :]

    def read_lines(self) -> list[bytes]:
        """Block until at least one complete line has arrived; return every complete line."""
        while True:
            ready, _, _ = select.select([self.rfd], [], [], TIMEOUT)
            if not ready:
                raise ServerError(f"{self.name}: no answer within {TIMEOUT}s{self.stderr_tail()}")
            data = os.read(self.rfd, 65536)
            if not data:
                raise ServerError(f"{self.name}: closed its output{self.stderr_tail()}")
            buf = self.buf + data
            if b"\n" in data:
                *lines, self.buf = buf.split(b"\n")
                return lines
            self.buf = buf

    def responses(self) -> list[dict[str, Any]]:
        """The next responses (notifications and other server messages are skipped)."""
        out = []
        for line in self.read_lines():
            if not line.strip():
                continue
            msg = orjson.loads(line)
            if "id" in msg and "method" not in msg:
                out.append(msg)
        return out

    def check(self, msg: dict[str, Any], request_id: int) -> None:
        result = msg.get("result")
        if msg.get("id") != request_id or not isinstance(result, dict) or result.get("isError"):
            raise ServerError(f"{self.name}: unexpected answer to request {request_id}: {msg}")
        content = result.get("content")
        if not (isinstance(content, list) and content and content[0].get("text") == TEXT):
            raise ServerError(f"{self.name}: the echo did not come back: {msg}")

    # -- the protocol -------------------------------------------------------

    def handshake(self) -> dict[str, Any]:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "mcpx-bench", "version": "1"},
            },
        }
        self.write(orjson.dumps(init) + b"\n")
        reply = self.responses()
        if not reply or reply[0].get("id") != 0 or "result" not in reply[0]:
            raise ServerError(f"{self.name}: initialize failed: {reply}")
        result: dict[str, Any] = reply[0]["result"]
        if result.get("protocolVersion") != PROTOCOL:
            raise ServerError(f"{self.name}: negotiated {result.get('protocolVersion')}, not {PROTOCOL}")
        self.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        # One call to learn the response size and to be sure the tool exists.
        request_id = self.take_ids(1)
        self.write(call_line(request_id))
        (msg,) = self.responses()
        self.check(msg, request_id)
        self.sample = msg
        self.response_bytes = len(orjson.dumps(msg))
        return result

    def take_ids(self, count: int) -> int:
        first = self.next_id
        self.next_id += count
        return first

    def take_latencies(self) -> list[float]:
        taken, self.latencies = self.latencies, []
        return taken

    def run_seq(self, calls: int) -> None:
        first = self.take_ids(calls)
        clock = time.perf_counter
        latencies = self.latencies
        for request_id in range(first, first + calls):
            line = call_line(request_id)
            sent = clock()
            self.write(line)
            got = self.responses()
            while not got:
                got = self.responses()
            latencies.append(clock() - sent)
            if len(got) != 1:
                raise ServerError(f"{self.name}: {len(got)} responses to one request")
            self.check(got[0], request_id)

    def run_pipe(self, calls: int, depth: int) -> None:
        first = self.take_ids(calls)
        end = first + calls
        sent = min(depth, calls)
        clock = time.perf_counter
        latencies = self.latencies
        first_batch = b"".join(call_line(i) for i in range(first, first + sent))
        now = clock()
        outstanding = dict.fromkeys(range(first, first + sent), now)  # id -> when it was written
        self.write(first_batch)
        next_id = first + sent
        while outstanding:
            batch = []
            ids = []
            got = self.responses()
            now = clock()
            for msg in got:
                request_id = msg.get("id")
                if request_id not in outstanding:
                    raise ServerError(f"{self.name}: answer to an unknown request: {msg}")
                latencies.append(now - outstanding.pop(request_id))
                self.check(msg, request_id)
                if next_id < end:
                    batch.append(call_line(next_id))
                    ids.append(next_id)
                    next_id += 1
            if batch:
                data = b"".join(batch)
                now = clock()
                for request_id in ids:
                    outstanding[request_id] = now
                self.write(data)

    # -- bookkeeping --------------------------------------------------------

    def cpu_seconds(self) -> float | None:
        """User + system CPU time of the server process so far (all threads)."""
        try:
            with open(f"/proc/{self.proc.pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        tail = self.stderr.read()[-2000:].decode(errors="replace").strip()
        return f"\n--- {self.name} stderr ---\n{tail}" if tail else ""

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()  # type: ignore[union-attr]
        self.stderr.close()


def timed_block(peer: Peer, run: Callable[[], None], calls: int) -> dict[str, Any]:
    peer.take_latencies()  # only this block's calls
    cpu0 = peer.cpu_seconds()
    start = time.perf_counter()
    run()
    elapsed = time.perf_counter() - start
    cpu1 = peer.cpu_seconds()
    cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
    latencies = peer.take_latencies()
    return {
        "calls": calls,
        "seconds": elapsed,
        "calls_per_s": calls / elapsed,
        "server_cpu_s": cpu,
        "latency_us": percentiles(latencies),
        "_latencies": latencies,  # dropped by summarise, which pools them
    }


def percentiles(latencies: list[float]) -> dict[str, float]:
    """p50, p90 and p99 of ``latencies`` (seconds) in µs."""
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {"p50": 1e6 * cuts[49], "p90": 1e6 * cuts[89], "p99": 1e6 * cuts[98]}


def summarise(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [b["calls_per_s"] for b in blocks]
    calls = sum(b["calls"] for b in blocks)
    cpus = [b["server_cpu_s"] for b in blocks]
    cpu_us = None if any(c is None for c in cpus) else 1e6 * sum(cpus) / calls
    pooled = [x for b in blocks for x in b.pop("_latencies")]
    latency = percentiles(pooled)
    return {
        "median_calls_per_s": statistics.median(rates),
        "min_calls_per_s": min(rates),
        "max_calls_per_s": max(rates),
        "server_cpu_us_per_call": cpu_us,
        "latency_us": latency,  # over every timed call of every block
        "p99_over_p50": latency["p99"] / latency["p50"],
        "blocks": blocks,
    }


def bench_driver(loop: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    peers = {"mcpx": Peer(f"mcpx demo --loop {loop}", mcpx_command(loop)), "sdk": Peer("SDK", sdk_command())}
    try:
        info = {side: peer.handshake() for side, peer in peers.items()}
        for peer in peers.values():  # warm-up: imports, caches, the JIT-less interpreter's branch caches
            peer.run_seq(args.warmup)
            peer.run_pipe(args.warmup, args.depth)
        rows = []
        block = max(1, args.calls // args.rounds)
        for mode in MODES:
            blocks: dict[str, list[dict[str, Any]]] = {"mcpx": [], "sdk": []}
            for r in range(args.rounds):
                order = ("mcpx", "sdk") if r % 2 == 0 else ("sdk", "mcpx")
                for side in order:
                    peer = peers[side]
                    if mode == "seq":
                        work = functools.partial(peer.run_seq, block)
                    else:
                        work = functools.partial(peer.run_pipe, block, args.depth)
                    blocks[side].append(timed_block(peer, work, block))
            m, s = summarise(blocks["mcpx"]), summarise(blocks["sdk"])
            pairs = zip(blocks["mcpx"], blocks["sdk"], strict=True)
            paired = [a["calls_per_s"] / b["calls_per_s"] for a, b in pairs]
            rows.append(
                {
                    "driver": loop,
                    "mode": mode,
                    "depth": 1 if mode == "seq" else args.depth,
                    "mcpx": m,
                    "sdk": s,
                    "ratio": m["median_calls_per_s"] / s["median_calls_per_s"],
                    "paired_ratio_median": statistics.median(paired),
                    "response_bytes": {side: peer.response_bytes for side, peer in peers.items()},
                    "server_info": {side: info[side].get("serverInfo") for side in peers},
                }
            )
            print_row(rows[-1], flush=True)
        return rows
    finally:
        for peer in peers.values():
            peer.close()


HEADER = (
    f"{'driver':<9} {'mode':<8} {'mcpx calls/s':>12} {'SDK calls/s':>12} {'mcpx/SDK':>9}"
    f" {'mcpx µs CPU':>12} {'SDK µs CPU':>11} {'mcpx p50/p99 µs':>16} {'p99/p50':>8} {'SDK p50/p99 µs':>15}"
)


def print_row(row: dict[str, Any], *, flush: bool = False) -> None:
    mode = "seq" if row["mode"] == "seq" else f"{row['depth']} in fl."

    def cpu(side: str) -> str:
        value = row[side]["server_cpu_us_per_call"]
        return "n/a" if value is None else f"{value:.0f}"

    def latency(side: str) -> str:
        lat = row[side]["latency_us"]
        return f"{lat['p50']:,.0f}/{lat['p99']:,.0f}"

    print(
        f"{row['driver']:<9} {mode:<8} {row['mcpx']['median_calls_per_s']:>12,.0f}"
        f" {row['sdk']['median_calls_per_s']:>12,.0f} {row['ratio']:>9.2f}"
        f" {cpu('mcpx'):>12} {cpu('sdk'):>11} {latency('mcpx'):>16}"
        f" {row['mcpx']['p99_over_p50']:>8.2f} {latency('sdk'):>15}",
        flush=flush,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="mcpx demo vs the official MCP Python SDK over stdio: tools/call echo, as ratios.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--calls", type=int, default=3000, help="timed calls per server, per driver and mode")
    parser.add_argument("--rounds", type=int, default=6, help="alternating blocks the calls are split into")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls per server and mode first")
    parser.add_argument("--depth", type=int, default=16, help="requests in flight in the pipe mode")
    parser.add_argument("--loops", default=",".join(LOOPS), help="comma-separated mcpx drivers to measure")
    parser.add_argument("--no-json", action="store_true", help="do not write benchmarks/results/*.json")
    args = parser.parse_args(argv)
    loops = [x.strip() for x in args.loops.split(",") if x.strip()]
    for loop in loops:
        if loop not in LOOPS:
            parser.error(f"unknown driver {loop!r}; choose from {', '.join(LOOPS)}")
    if args.calls < args.rounds or args.depth < 1:
        parser.error("--calls must be at least --rounds, and --depth at least 1")

    facts = machine()
    print(
        f"stdio tools/call echo, handshake at {PROTOCOL}; {args.calls} calls per server and mode "
        f"in {args.rounds} alternating blocks; {args.warmup} warm-up calls; pipe depth {args.depth}"
    )
    print(HEADER)
    print("-" * len(HEADER))
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for loop in loops:
        rows.extend(bench_driver(loop, args))
    total = time.perf_counter() - started
    print("calls/s: median over the blocks; mcpx/SDK > 1 means mcpx is faster;")
    print("µs CPU: server process CPU time (user+system, all threads) per call.")
    print("p50/p99: latency of a call (written -> its response read) over every block, in µs.")
    sizes = rows[0]["response_bytes"]
    print(f"response size: mcpx {sizes['mcpx']} bytes, SDK {sizes['sdk']} bytes; took {total:.0f}s")
    if not args.no_json:
        path = write_results(
            "stdio",
            {
                "benchmark": "bench_stdio",
                "date": now_iso(),
                "machine": facts,
                "settings": {
                    "calls": args.calls,
                    "rounds": args.rounds,
                    "warmup": args.warmup,
                    "depth": args.depth,
                    "protocol": PROTOCOL,
                    "text": TEXT,
                    "mcpx_command": mcpx_command("<driver>"),
                    "sdk_command": sdk_command(),
                },
                "loadavg_at_end": load_average(),
                "seconds": total,
                "results": rows,
            },
        )
        print(f"wrote {path.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
