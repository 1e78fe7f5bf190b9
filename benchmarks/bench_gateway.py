"""The gateway's cost: ``tools/call`` through ``mcpx serve`` → daemon, against direct stdio and FastMCP's proxy.

Three paths to the same upstream, ``python -m mcpx demo`` over stdio, each
spawned over stdio and driven by the same client (``mcpx.client.connect_stdio``
in this process, anyio on asyncio):

``direct``   the upstream itself: ``tools/call`` ``echo``;
``mcpx``     ``python -m mcpx serve`` — the stdio shim, which relays every line
             over Streamable HTTP to the daemon's /mcp (starting the daemon on
             demand), which calls the pooled stdio upstream: ``tools/call``
             ``mcpx_call`` with ``{server: "demo", tool: "echo", arguments}``;
``fastmcp``  ``benchmarks/fastmcp_proxy_server.py`` under a separate venv with
             ``fastmcp`` (``/tmp/fastmcp-venv``, created if missing): FastMCP's
             ``create_proxy`` over a stdio transport to the upstream; a proxy
             of one server keeps the names, so ``tools/call`` ``echo``.

The daemon runs with a private state directory (``MCPX_STATE``), an
ephemeral port (``MCPX_TRANSPORT_PORT=0``) and ``HOME`` set to a temporary
directory, so no user configuration is read and the daemon's upstream is the
built-in ``demo``.

**Round trips.**  After a warm-up, each mode is measured in ``--rounds``
blocks of ``--block-seconds`` per path; the order of the paths rotates from
round to round so that noise on the machine hits them alike.  ``seq`` is one
call at a time (calls/s = 1 / round-trip latency); ``N in flight`` runs
``--depth`` tasks that each call in a loop, so ``--depth`` calls are always
outstanding.  The figure per path is the median of its blocks' calls/s (a
call is one answered ``tools/call``: a request and its response).  Two ratios:

* overhead = direct / mcpx: how many times slower a call is through mcpx;
* mcpx / FastMCP: > 1 means mcpx relays more calls per second than FastMCP.

Every answer is checked (a result, not an error, with the echoed text).
Server-side CPU time per call — user + system of every process on the path
(shim, daemon and upstream for mcpx; proxy and upstream for FastMCP), from
``/proc`` — is recorded as well where ``/proc`` exists.

**Cold start.**  The time from launching ``mcpx serve`` to the first
answered ``tools/list`` (and, in a second column, to the first answered
``echo`` call, which needs the upstream): (i) with a daemon already
running, (ii) with none, so the shim starts one (it is stopped again
afterwards, by the pid in ``<state>/daemon.json``).  Launching the upstream
directly and launching the FastMCP proxy are timed the same way, as
baselines.  Medians over ``--cold-runs`` runs.

Every process the benchmark starts is stopped at the end (the daemon via
its pid; anything it leaves behind is killed and reported).  Results are
printed and written as JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson
from _util import HERE, load_average, machine, now_iso, write_results

from mcpx.client import Client, connect_stdio

ROOT = HERE.parent
SIDES = ("direct", "mcpx", "fastmcp")
LABEL = {"direct": "direct", "mcpx": "mcpx", "fastmcp": "FastMCP"}
MODES = ("seq", "pipe")
TEXT = "hello, world"
FASTMCP_VENV = Path("/tmp/fastmcp-venv")
START_TIMEOUT = 60.0
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class BenchError(RuntimeError):
    pass


# ---------------------------------------------------------------------------
# Processes: /proc bookkeeping and the daemon
# ---------------------------------------------------------------------------


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def parents() -> dict[int, int]:
    """pid → parent pid of every process (empty without /proc)."""
    table: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                fields = _stat(int(entry))
                if fields is not None:
                    table[int(entry)] = int(fields[1])
    return table


def children(pid: int) -> set[int]:
    return {child for child, parent in parents().items() if parent == pid}


def descendants(pid: int) -> set[int]:
    table = parents()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in table.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not count)."""
    fields = _stat(pid)
    if fields is not None:
        return fields[0] != b"Z"
    if Path("/proc/self/stat").exists():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cpu_by_role(roles: Mapping[int, str]) -> dict[str, float] | None:
    """User + system CPU seconds so far (all threads) of the processes in ``roles``, summed per role.

    None without /proc, or when one of the processes is gone.
    """
    if not roles:
        return None
    totals: dict[str, float] = {}
    for pid, role in roles.items():
        fields = _stat(pid)
        if fields is None:
            return None
        totals[role] = totals.get(role, 0.0) + (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
    return totals


def daemon_pid(state: Path) -> int | None:
    """The pid in ``<state>/daemon.json`` if that process still runs."""
    try:
        pid = int(orjson.loads((state / "daemon.json").read_bytes())["pid"])
    except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        return None
    return pid if alive(pid) else None


def wait_gone(pids: set[int], seconds: float) -> set[int]:
    """Wait up to ``seconds`` for ``pids`` to end; the ones still running."""
    deadline = time.monotonic() + seconds
    left = {pid for pid in pids if alive(pid)}
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = {pid for pid in left if alive(pid)}
    return left


def stop_daemon(state: Path, notes: list[str]) -> None:
    """SIGTERM the daemon named by ``daemon.json``; kill it, and whatever it leaves, if they linger."""
    pid = daemon_pid(state)
    if pid is None:
        return
    family = descendants(pid) | {pid}
    os.kill(pid, signal.SIGTERM)
    if wait_gone({pid}, 15.0):
        notes.append(f"the daemon (pid {pid}) ignored SIGTERM for 15 s and was killed")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        wait_gone({pid}, 5.0)
    left = wait_gone(family - {pid}, 5.0)
    for other in sorted(left):
        notes.append(f"the stopped daemon left pid {other} running ({cmdline(other)}); killed")
        with contextlib.suppress(ProcessLookupError):
            os.kill(other, signal.SIGKILL)


def reap(pids: set[int], notes: list[str]) -> None:
    """Make sure ``pids`` (a closed path's processes) have ended; kill and report any that linger."""
    for pid in sorted(wait_gone(pids, 5.0)):
        notes.append(f"pid {pid} ({cmdline(pid)}) outlived its path and was killed")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def ours(state: Path) -> set[int]:
    """This benchmark's processes below this one, except the daemon (detached) and what it runs."""
    found = descendants(os.getpid())
    daemon = daemon_pid(state)
    if daemon is not None:
        found -= {daemon} | descendants(daemon)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "?"


def daemon_log_tail(state: Path) -> str:
    try:
        tail = (state / "daemon.log").read_text(errors="replace")[-2000:].strip()
    except OSError:
        return ""
    return f"\n--- daemon.log ---\n{tail}" if tail else ""


# ---------------------------------------------------------------------------
# The paths
# ---------------------------------------------------------------------------


@dataclass
class Env:
    """The temporary HOME and state directory every mcpx process here runs with."""

    home: Path
    state: Path
    fastmcp_python: str | None
    modern: bool
    notes: list[str] = field(default_factory=list)

    @property
    def vars(self) -> dict[str, str]:
        return {"HOME": str(self.home), "MCPX_STATE": str(self.state), "MCPX_TRANSPORT_PORT": "0"}


def upstream_command() -> list[str]:
    return [sys.executable, "-m", "mcpx", "demo"]


def command(side: str, env: Env) -> list[str]:
    if side == "direct":
        return upstream_command()
    if side == "mcpx":
        return [sys.executable, "-m", "mcpx", "serve"]
    assert env.fastmcp_python is not None
    return [env.fastmcp_python, str(HERE / "fastmcp_proxy_server.py"), *upstream_command()]


def call_of(side: str) -> tuple[str, dict[str, Any]]:
    """The tool and arguments that make ``side`` echo ``TEXT``."""
    if side == "mcpx":
        return "mcpx_call", {"server": "demo", "tool": "echo", "arguments": {"text": TEXT}}
    return "echo", {"text": TEXT}


def check(side: str, result: Mapping[str, Any]) -> None:
    content = result.get("content")
    if result.get("isError") or not (
        isinstance(content, list)
        and content
        and isinstance(content[0], dict)
        and content[0].get("text") == TEXT
    ):
        raise BenchError(f"{side}: the echo did not come back: {result}")


@contextlib.asynccontextmanager
async def spawn(side: str, env: Env) -> AsyncIterator[Client]:
    """``side`` spawned over stdio with the benchmark's environment, handshake done."""
    async with connect_stdio(
        command(side, env),
        env=env.vars,
        cwd=str(ROOT),
        modern=env.modern,
        start_timeout=START_TIMEOUT,
        call_timeout=60.0,
        shutdown_grace=5.0,
    ) as client:
        yield client


@dataclass
class Route:
    name: str
    client: Client
    tool: str
    arguments: dict[str, Any]
    roles: dict[int, str]  # pid -> its part on the path (shim, daemon, upstream, ...)

    async def call(self) -> None:
        try:
            result = await self.client.call_tool(self.tool, self.arguments)
        except Exception as exc:
            raise BenchError(f"{self.name}: tools/call {self.tool} failed: {exc!r}") from exc
        check(self.name, result)


def roles_of(side: str, spawned: set[int], state: Path) -> dict[int, str]:
    """The processes on ``side``'s path, by role (empty without /proc)."""
    roles: dict[int, str] = {}
    first = {"direct": "server", "mcpx": "shim", "fastmcp": "proxy"}[side]
    for child in spawned:
        roles[child] = first
        for pid in descendants(child):
            roles[pid] = "upstream"
    if side == "mcpx":
        # The shim started the daemon (or another shim did, and it was reparented): not a shim's child.
        daemon = daemon_pid(state)
        if daemon is None:
            raise BenchError(f"mcpx serve answered but no daemon runs{daemon_log_tail(state)}")
        roles[daemon] = "daemon"
        for pid in descendants(daemon):
            roles[pid] = "upstream"
    return roles


async def timed_block(path: Route, depth: int, seconds: float) -> dict[str, Any]:
    """``depth`` tasks calling in a loop for ``seconds``: the answered calls per second."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await path.call()
            done += 1

    cpu0 = cpu_by_role(path.roles)
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(depth):
            tg.start_soon(worker)
    elapsed = time.perf_counter() - start
    cpu1 = cpu_by_role(path.roles)
    by_role = None if cpu0 is None or cpu1 is None else {role: cpu1[role] - cpu0[role] for role in cpu1}
    return {
        "calls": done,
        "seconds": elapsed,
        "calls_per_s": done / elapsed,
        "server_cpu_s": None if by_role is None else sum(by_role.values()),
        "server_cpu_s_by_role": by_role,
    }


def summarise(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [b["calls_per_s"] for b in blocks]
    calls = sum(b["calls"] for b in blocks)
    cpus = [b["server_cpu_s"] for b in blocks]
    known = all(c is not None for c in cpus) and calls > 0
    cpu_us = 1e6 * sum(cpus) / calls if known else None
    by_role: dict[str, float] | None = None
    if known:
        by_role = {}
        for block in blocks:
            for role, seconds in block["server_cpu_s_by_role"].items():
                by_role[role] = by_role.get(role, 0.0) + 1e6 * seconds / calls
    return {
        "median_calls_per_s": statistics.median(rates),
        "min_calls_per_s": min(rates),
        "max_calls_per_s": max(rates),
        "server_cpu_us_per_call": cpu_us,
        "server_cpu_us_per_call_by_role": by_role,
        "blocks": blocks,
    }


async def bench_round_trips(env: Env, sides: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    me = os.getpid()
    async with contextlib.AsyncExitStack() as stack:
        paths: dict[str, Route] = {}
        for side in sides:
            before = children(me)
            client = await stack.enter_async_context(spawn(side, env))
            tool, arguments = call_of(side)
            route = Route(side, client, tool, arguments, {})
            await route.call()  # a proxy may start its upstream only now
            route.roles = roles_of(side, children(me) - before, env.state)
            paths[side] = route
        spawned = ours(env.state)
        for mode in MODES:
            depth = 1 if mode == "seq" else args.depth
            for side in sides:
                await timed_block(paths[side], depth, args.warmup_seconds)
            blocks: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
            for r in range(args.rounds):
                order = sides[r % len(sides) :] + sides[: r % len(sides)]
                for side in order:
                    blocks[side].append(await timed_block(paths[side], depth, args.block_seconds))
            row: dict[str, Any] = {"mode": mode, "depth": depth}
            for side in sides:
                row[side] = summarise(blocks[side])
            rate = {side: row[side]["median_calls_per_s"] for side in sides}
            if "direct" in sides and "mcpx" in sides:
                row["overhead_direct_over_mcpx"] = rate["direct"] / rate["mcpx"]
            if "fastmcp" in sides and "mcpx" in sides:
                row["mcpx_over_fastmcp"] = rate["mcpx"] / rate["fastmcp"]
                pairs = zip(blocks["mcpx"], blocks["fastmcp"], strict=True)
                row["mcpx_over_fastmcp_paired_median"] = statistics.median(
                    a["calls_per_s"] / b["calls_per_s"] for a, b in pairs
                )
            if "fastmcp" in sides and "direct" in sides:
                row["overhead_direct_over_fastmcp"] = rate["direct"] / rate["fastmcp"]
            rows.append(row)
            print_row(row, sides, flush=True)
    reap(spawned, env.notes)
    stop_daemon(env.state, env.notes)
    return rows


# ---------------------------------------------------------------------------
# Cold start
# ---------------------------------------------------------------------------


async def launch_to_answers(side: str, env: Env) -> tuple[float, float]:
    """Seconds from launching ``side`` to its first answered tools/list, and to its first echo."""
    start = time.perf_counter()
    async with spawn(side, env) as client:
        await client.request("tools/list", {})
        listed = time.perf_counter() - start
        tool, arguments = call_of(side)
        check(side, await client.call_tool(tool, arguments))
        called = time.perf_counter() - start
        spawned = ours(env.state)
    reap(spawned, env.notes)
    return listed, called


COLD_CASES = {
    "warm": "mcpx serve, daemon running",
    "cold": "mcpx serve, no daemon (shim starts one)",
    "direct": "baseline: python -m mcpx demo",
    "fastmcp": "baseline: FastMCP proxy",
}


async def bench_cold_start(env: Env, sides: list[str], runs: int) -> dict[str, Any]:
    cases = ["cold", "warm", *[side for side in ("direct", "fastmcp") if side in sides]]
    times: dict[str, list[tuple[float, float]]] = {case: [] for case in cases}
    for r in range(runs):
        # The cold run must follow a stopped daemon; the warm run uses the daemon it left.
        order = cases if r % 2 == 0 else cases[::-1]
        for case in order:
            if case == "cold":
                stop_daemon(env.state, env.notes)
                times[case].append(await launch_to_answers("mcpx", env))
            elif case == "warm":
                if daemon_pid(env.state) is None:
                    await launch_to_answers("mcpx", env)  # not timed: it leaves a daemon running
                times[case].append(await launch_to_answers("mcpx", env))
            else:
                times[case].append(await launch_to_answers(case, env))
    stop_daemon(env.state, env.notes)
    return {
        case: {
            "median_to_tools_list_s": statistics.median(t[0] for t in times[case]),
            "median_to_first_call_s": statistics.median(t[1] for t in times[case]),
            "runs": [{"to_tools_list_s": a, "to_first_call_s": b} for a, b in times[case]],
        }
        for case in cases
    }


# ---------------------------------------------------------------------------
# FastMCP's venv
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


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------


def print_header(sides: list[str]) -> str:
    head = f"{'mode':<9}" + "".join(f" {LABEL[s] + ' calls/s':>16}" for s in sides)
    if "mcpx" in sides and "direct" in sides:
        head += f" {'direct/mcpx':>12}"
    if "mcpx" in sides and "fastmcp" in sides:
        head += f" {'mcpx/FastMCP':>13}"
    head += "   server µs CPU/call: " + " / ".join(LABEL[s] for s in sides)
    print(head)
    print("-" * len(head))
    return head


def print_row(row: dict[str, Any], sides: list[str], *, flush: bool = False) -> None:
    mode = "seq" if row["mode"] == "seq" else f"{row['depth']} in fl."
    line = f"{mode:<9}" + "".join(f" {row[s]['median_calls_per_s']:>16,.0f}" for s in sides)
    if "overhead_direct_over_mcpx" in row:
        line += f" {row['overhead_direct_over_mcpx']:>11.2f}x"
    if "mcpx_over_fastmcp" in row:
        line += f" {row['mcpx_over_fastmcp']:>13.2f}"

    def cpu(side: str) -> str:
        value = row[side]["server_cpu_us_per_call"]
        return "n/a" if value is None else f"{value:,.0f}"

    line += "   " + " / ".join(cpu(s) for s in sides)
    print(line, flush=flush)


def print_roles(rows: list[dict[str, Any]], sides: list[str]) -> None:
    """The server-side CPU per call of each relaying path, split by process."""
    for side in sides:
        if side == "direct":
            continue
        parts = []
        for row in rows:
            by_role = row[side]["server_cpu_us_per_call_by_role"]
            if by_role is None:
                return
            mode = "seq" if row["mode"] == "seq" else f"{row['depth']} in fl."
            parts.append(f"{mode}: " + ", ".join(f"{role} {us:,.0f}" for role, us in by_role.items()))
        print(f"  {LABEL[side]} µs CPU/call by process — " + "; ".join(parts))


def print_cold(cold: dict[str, Any], runs: int) -> None:
    print()
    print(f"cold start: launch → first answered tools/list (→ first answered echo), median of {runs} runs")
    head = f"{'':<42} {'tools/list':>10} {'first call':>10}"
    print(head)
    print("-" * len(head))
    for case, figures in cold.items():
        print(
            f"{COLD_CASES[case]:<42} {figures['median_to_tools_list_s'] * 1000:>7.0f} ms"
            f" {figures['median_to_first_call_s'] * 1000:>7.0f} ms"
        )
    if "warm" in cold and "cold" in cold:
        extra = cold["cold"]["median_to_tools_list_s"] - cold["warm"]["median_to_tools_list_s"]
        print(f"starting the daemon adds {extra * 1000:.0f} ms to the first tools/list")


# ---------------------------------------------------------------------------


async def run(args: argparse.Namespace, env: Env, sides: list[str]) -> dict[str, Any]:
    era = "2026-07-28 (no handshake)" if env.modern else "newest legacy revision (initialize handshake)"
    print(
        f"tools/call echo over stdio, {era}; {args.rounds} rotating blocks of {args.block_seconds:g} s"
        f" per path and mode after {args.warmup_seconds:g} s of warm-up; {args.depth} in flight in the"
        " concurrent mode"
    )
    print("paths: direct = python -m mcpx demo; mcpx = mcpx serve → daemon → pooled demo (mcpx_call);")
    print("       FastMCP = fastmcp create_proxy over stdio → demo (echo)")
    print_header(sides)
    rows = await bench_round_trips(env, sides, args)
    print("calls/s: answered tools/call round trips per second, median over the blocks;")
    print("direct/mcpx: how many times slower a call is through mcpx; mcpx/FastMCP > 1: mcpx is faster;")
    print("server µs CPU/call: user+system CPU of every process on the path (shim+daemon+upstream for mcpx):")
    print_roles(rows, sides)
    cold = await bench_cold_start(env, sides, args.cold_runs)
    print_cold(cold, args.cold_runs)
    return {"round_trips": rows, "cold_start": cold}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="tools/call through mcpx serve → daemon vs direct stdio vs FastMCP's proxy; cold start.",
    )
    parser.add_argument("--rounds", type=int, help="rotating blocks per path and mode [5; --quick 2]")
    parser.add_argument("--block-seconds", type=float, help="length of one timed block [2.5; --quick 1]")
    parser.add_argument(
        "--warmup-seconds", type=float, help="untimed calls per path and mode [1; --quick 0.5]"
    )
    parser.add_argument("--depth", type=int, default=16, help="calls in flight in the concurrent mode [16]")
    parser.add_argument("--cold-runs", type=int, help="launches per cold-start case [5; --quick 3]")
    parser.add_argument("--quick", action="store_true", help="shorter: the --quick figures above")
    parser.add_argument("--modern", action="store_true", help="speak 2026-07-28 (no handshake) on every path")
    parser.add_argument("--no-fastmcp", action="store_true", help="leave FastMCP's proxy out")
    parser.add_argument(
        "--fastmcp-python",
        help=f"a Python with fastmcp installed (default: {FASTMCP_VENV}, created if missing)",
    )
    parser.add_argument("--no-json", action="store_true", help="do not write benchmarks/results/*.json")
    args = parser.parse_args(argv)
    for name, full, quick in (
        ("rounds", 5, 2),
        ("block_seconds", 2.5, 1.0),
        ("warmup_seconds", 1.0, 0.5),
        ("cold_runs", 5, 3),
    ):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    if args.rounds < 1 or args.depth < 1 or args.cold_runs < 1 or args.block_seconds <= 0:
        parser.error("--rounds, --depth and --cold-runs must be at least 1, --block-seconds positive")

    # No user configuration or state may leak in: the paths run with their own HOME and MCPX_STATE.
    for name in [n for n in os.environ if n.startswith("MCPX_")]:
        del os.environ[name]
    sides = [side for side in SIDES if not (side == "fastmcp" and args.no_fastmcp)]
    fastmcp_python, version = (None, None) if args.no_fastmcp else ensure_fastmcp(args.fastmcp_python)
    facts = machine()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mcpx-bench-gateway-") as tmp:
        env = Env(Path(tmp) / "home", Path(tmp) / "state", fastmcp_python, args.modern)
        env.home.mkdir()
        try:
            results = anyio.run(run, args, env, sides)
        except BaseException:
            sys.stderr.write(daemon_log_tail(env.state) + "\n")
            raise
        finally:
            stop_daemon(env.state, env.notes)
    total = time.perf_counter() - started
    for note in env.notes:
        print(f"note: {note}")
    print(f"fastmcp {version}; took {total:.0f}s" if version else f"took {total:.0f}s")
    if not args.no_json:
        path = write_results(
            "gateway",
            {
                "benchmark": "bench_gateway",
                "when": now_iso(),
                "machine": facts,
                "settings": {
                    "rounds": args.rounds,
                    "block_seconds": args.block_seconds,
                    "warmup_seconds": args.warmup_seconds,
                    "depth": args.depth,
                    "cold_runs": args.cold_runs,
                    "modern": args.modern,
                    "text": TEXT,
                    "commands": {side: command(side, env) for side in sides},
                    "fastmcp_version": version,
                },
                "loadavg_at_end": load_average(),
                "seconds": total,
                "notes": env.notes,
                **results,
            },
        )
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
