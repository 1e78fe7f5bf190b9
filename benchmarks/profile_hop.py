"""Where a routed call's time goes in the daemon: instructions per call, and a CPU profile.

    python benchmarks/profile_hop.py callgrind [--depth 16] [--seconds 6] [--mode pass|gateway]
    python benchmarks/profile_hop.py sample    [--depth 16] [--seconds 6] [--mode pass|gateway] [--top 40]
    python benchmarks/profile_hop.py calls     [--depth 16] [--seconds 6] [--mode pass|gateway] [--top 40]

Both start a daemon with one raw echo upstream as ``bench_hop.py`` does
(pass-through, or gateway mode calling ``mcpx_call``), drive it through
``mcpx serve`` with ``--depth`` calls in flight (1: one at a time), and look
only at the timed load, not at start-up:

``callgrind``  runs the daemon under valgrind's callgrind with instrumentation
               off, turns it on for the load (``callgrind_control -i on``) and
               prints the daemon's user-space instructions per call: a count
               that does not move with the machine's load (only with how the
               calls are cut into reads, which ``--depth`` fixes).
``sample``     samples the daemon's Python stack on CPU time (``ITIMER_PROF``,
               every 0.5 ms of CPU, started and dumped by signals) and prints
               the functions by self and by inclusive share.  py-spy in its
               default mode stops the process to read it, and counts time
               spent descheduled in a write as samples: this counts CPU only.
``calls``      counts the daemon's Python function calls under cProfile and
               prints them per routed call, by function: how many calls a
               hop makes, and which, independent of the machine's speed.

The figures to hold against the issue's targets are ``bench_hop.py``'s; this
shows what stands in the way of one.  Needs valgrind for ``callgrind``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_hop as bh

# Loaded by the daemon's interpreter (PYTHONPATH) when MCPX_PROFILE_SAMPLES names a file:
# SIGUSR2 starts sampling, SIGUSR1 writes the collapsed stacks there.
_SITECUSTOMIZE = """
import os, sys
_out = os.environ.get("MCPX_PROFILE_SAMPLES")
if _out and "daemon" in sys.argv:
    import collections, signal
    _counts = collections.Counter()

    def _sample(signum, frame):
        stack = []
        while frame is not None:
            code = frame.f_code
            stack.append(f"{code.co_name} ({code.co_filename.rsplit('/', 1)[-1]})")
            frame = frame.f_back
        _counts[";".join(reversed(stack))] += 1

    def _start(signum, frame):
        signal.signal(signal.SIGPROF, _sample)
        signal.setitimer(signal.ITIMER_PROF, 0.0005, 0.0005)

    def _dump(signum, frame):
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        with open(_out, "w") as out:
            out.writelines(f"{stack} {count}\\n" for stack, count in _counts.items())

    signal.signal(signal.SIGUSR2, _start)
    signal.signal(signal.SIGUSR1, _dump)
_stats = os.environ.get("MCPX_PROFILE_CALLS")
if _stats and "daemon" in sys.argv:
    import cProfile, signal
    _profile = cProfile.Profile()
    signal.signal(signal.SIGUSR2, lambda signum, frame: _profile.enable())

    def _dump_calls(signum, frame):
        _profile.disable()
        _profile.dump_stats(_stats)

    signal.signal(signal.SIGUSR1, _dump_calls)
"""


class _ProfiledDaemon(bh.Daemon):
    """``bench_hop.Daemon`` whose ``mcpx daemon`` command is wrapped (valgrind), with extra environment."""

    def __init__(self, bench: bh.Bench, mode: str, wrap: list[str], env: dict[str, str]) -> None:
        super().__init__(bench, mode, "echo", bh.RAW_ECHO, passthrough=mode == "pass")
        self.wrap = wrap
        self.env.update(env)

    def start(self) -> None:
        real = subprocess.Popen

        def popen(command: Any, *args: Any, **kwargs: Any) -> Any:
            if list(command[1:4]) == ["-m", "mcpx", "daemon"]:
                command = [*self.wrap, *command]
            return real(command, *args, **kwargs)

        subprocess.Popen = popen  # type: ignore[misc]  # only for the start of this daemon
        try:
            super().start()
        finally:
            subprocess.Popen = real  # type: ignore[misc]


def _path(daemon: bh.Daemon, mode: str) -> bh.StdioPath:
    if mode == "gateway":
        arguments = {"server": "echo", "tool": "echo", "arguments": {"text": bh.TEXT}}
        return daemon.serve_path("gateway", "gateway", "mcpx_call", arguments)
    return daemon.serve_path("pass", "pass")


def _run(args: argparse.Namespace, tmp: Path, wrap: list[str], env: dict[str, str], during: Any) -> int:
    bench = bh.Bench(
        tmp, argparse.Namespace(modern=False, env_bytecode=False, quick=True), None, args.mcpx_src
    )
    daemon = _ProfiledDaemon(bench, args.mode, wrap, env)
    daemon.start()
    try:
        path = _path(daemon, args.mode)
        path.start()
        path.block(args.depth, 2.0)  # warm: the instance started, the catalogs read
        with during(daemon.pid):
            block = path.block(args.depth, args.seconds)
        path.close(bench.notes)
    finally:
        daemon.stop()
    calls: int = block["calls"]
    print(f"{args.mode}, {args.depth} in flight: {calls} calls in {args.seconds:g} s")
    return calls


def callgrind(args: argparse.Namespace, tmp: Path) -> None:
    out = tmp / "callgrind"
    out.mkdir()
    wrap = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}/cg.%p"]

    @contextlib.contextmanager
    def instrumented(pid: int) -> Any:
        subprocess.run(["callgrind_control", "-i", "on", str(pid)], capture_output=True, check=True)
        yield
        subprocess.run(["callgrind_control", "-i", "off", str(pid)], capture_output=True, check=True)
        subprocess.run(["callgrind_control", "-d", str(pid)], capture_output=True, check=True)

    bh.START_TIMEOUT = 120  # a daemon under valgrind starts slowly
    calls = _run(args, tmp, wrap, {}, instrumented)
    total = 0
    for dump in out.iterdir():
        for line in dump.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                total = max(total, int(line.split()[1]))
    print(f"daemon: {total / calls / 1000:.1f}k instructions per call (user space, callgrind)")


def _signalled(args: argparse.Namespace, tmp: Path, variable: str, out: Path) -> int:
    """Run the load with ``sitecustomize`` hooked in: SIGUSR2 starts it, SIGUSR1 writes ``out``."""
    site = tmp / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    args.mcpx_src = str(site) + (os.pathsep + args.mcpx_src if args.mcpx_src else "")

    @contextlib.contextmanager
    def signalled(pid: int) -> Any:
        os.kill(pid, signal.SIGUSR2)
        yield
        os.kill(pid, signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # the daemon writes the file in its signal handler: wait for it
        time.sleep(0.2)  # and let it finish writing

    return _run(args, tmp, [], {variable: str(out)}, signalled)


def calls(args: argparse.Namespace, tmp: Path) -> None:
    import pstats

    out = tmp / "calls.prof"
    routed = _signalled(args, tmp, "MCPX_PROFILE_CALLS", out)
    stats = pstats.Stats(str(out))
    rows = []
    total_calls = 0
    for (filename, _line, name), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        total_calls += ncalls
        rows.append((ncalls, tottime, cumtime, f"{name} ({filename.rsplit('/', 1)[-1]})"))
    total_time = sum(row[1] for row in rows) or 1.0
    print(f"{total_calls / routed:.1f} Python-level calls per routed call")
    print("calls/call  self%  function  (by calls, then by own time; the waits in poll are not work)")
    for ncalls, tottime, _cum, where in sorted(rows, reverse=True)[: args.top]:
        print(f"{ncalls / routed:9.2f}  {100 * tottime / total_time:5.1f}  {where}")
    print("--- by own time")
    for ncalls, tottime, _cum, where in sorted(rows, key=lambda row: -row[1])[: args.top]:
        print(f"{ncalls / routed:9.2f}  {100 * tottime / total_time:5.1f}  {where}")


def sample(args: argparse.Namespace, tmp: Path) -> None:
    samples = tmp / "samples.txt"
    _signalled(args, tmp, "MCPX_PROFILE_SAMPLES", samples)
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in samples.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        total += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)
    print(f"{total} samples of 0.5 ms of the daemon's CPU")
    for title, counter in (("self", own), ("inclusive", inclusive)):
        print(f"--- {title}")
        for frame, count in counter.most_common(args.top):
            print(f"{100 * count / total:5.1f}%  {frame}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Where a routed call's time goes in the daemon.")
    parser.add_argument("what", choices=("callgrind", "sample", "calls"))
    parser.add_argument("--depth", type=int, default=16, help="calls in flight; 1: one at a time [16]")
    parser.add_argument("--seconds", type=float, default=6.0, help="length of the profiled load [6]")
    parser.add_argument("--mode", choices=("pass", "gateway"), default="pass")
    parser.add_argument("--top", type=int, default=40, help="functions shown (sample) [40]")
    parser.add_argument("--mcpx-src", help="run mcpx from this directory (it holds the mcpx package)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mcpx-profile-") as tmp:
        {"callgrind": callgrind, "sample": sample, "calls": calls}[args.what](args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
