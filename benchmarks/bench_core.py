"""Messages per second through mcpx's pure core: a ``tools/call`` echo, per MCP revision.

No I/O, no event loop, no threads: this is the ceiling the core puts on any
driver.  For each revision the benchmark

1. builds a fresh ``StdioServerConnection`` for the demo server and, for the
   legacy revisions, plays ``initialize`` + ``notifications/initialized``
   (not timed);
2. pre-encodes ``--messages`` newline-terminated ``tools/call`` requests for
   the demo's ``echo`` tool (2026-07-28 requests carry ``params._meta`` with
   the protocol version and client capabilities, as that revision requires);
3. concatenates them and feeds the bytes to ``receive_data`` in ``--chunk``
   byte pieces (lines are split across chunks, as a pipe delivers them;
   ``--chunk 0`` feeds exactly one line per call);
4. after every chunk drains ``next_actions()``, answers each ``HandleRequest``
   the way the application would, drains again, and counts the ``Send``
   actions that end a request (``final=True``).

The timed section is steps 3–4: request bytes in → response bytes out, for
every message.  The figure is round trips per second; each revision is run
``--runs`` times and the median is reported.

Two ways of playing the application (both columns are printed):

``route``  the real path every driver takes: ``Server.route`` validates the
           arguments and returns a ``Call``; the benchmark runs the
           ``async def echo`` coroutine to completion by hand (it never
           suspends), then ``Call.finish`` builds the result and
           ``apply_outcome`` hands it to ``session.respond``.
``core``   the core alone: ``session.respond`` with the same result dict the
           route path produces (``{"content": [{"type": "text", "text": ...}]}``),
           built directly.

Results are printed as a table and written as JSON to ``benchmarks/results/``.
``--profile REVISION`` runs cProfile over one timed run instead.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
from _util import HERE, load_average, machine, now_iso, write_results

from mcpx.core import HandleRequest, Revision, Send, StdioServerConnection
from mcpx.core.revisions import REVISIONS
from mcpx.demo import build_demo_server
from mcpx.drivers._common import apply_outcome  # the helper every driver answers with
from mcpx.server import Call, Outcome, Server

TEXT = "hello, world"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def request_lines(rev: Revision, count: int, first_id: int, text: str) -> bytes:
    """``count`` newline-terminated ``tools/call`` echo requests for ``rev``."""
    lines = []
    for i in range(first_id, first_id + count):
        params: dict[str, Any] = {"name": "echo", "arguments": {"text": text}}
        if rev.is_modern:
            params["_meta"] = MODERN_META
        lines.append(
            orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}) + b"\n"
        )
    return b"".join(lines)


def chunks_of(data: bytes, size: int) -> list[bytes]:
    if size <= 0:  # one line per receive_data call
        return [line + b"\n" for line in data.split(b"\n") if line]
    return [data[i : i + size] for i in range(0, len(data), size)]


def open_connection(server: Server, rev: Revision) -> StdioServerConnection:
    """A connection past its handshake (legacy) or fresh (2026-07-28)."""
    conn = StdioServerConnection(server.session_config())
    if not rev.is_modern:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": str(rev),
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
        conn.receive_data(orjson.dumps(init) + b"\n", now=0.0)
        reply = orjson.loads(next(a for a in conn.next_actions() if isinstance(a, Send)).payload)
        assert reply["result"]["protocolVersion"] == str(rev), reply
        conn.receive_data(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n', now=0.0)
        assert not conn.next_actions()
    return conn


def route_answerer(server: Server, conn: StdioServerConnection) -> Callable[[HandleRequest], None]:
    """Answer like a driver: route → run the coroutine → finish → apply_outcome."""
    session = conn.session

    def answer(action: HandleRequest) -> None:
        invocation = server.route(action.method, action.params, action.context)
        if isinstance(invocation, Outcome):
            apply_outcome(session, action.token, invocation)
            return
        assert isinstance(invocation, Call) and invocation.context_param is None
        if invocation.is_async:
            coro = invocation.fn(**invocation.kwargs)
            try:
                coro.send(None)
            except StopIteration as stop:
                value = stop.value
            else:  # pragma: no cover - echo never suspends
                coro.close()
                raise RuntimeError("the echo tool suspended; the core benchmark cannot run it")
        else:
            value = invocation.fn(**invocation.kwargs)
        apply_outcome(session, action.token, invocation.finish(value))

    return answer


def core_answerer(server: Server, conn: StdioServerConnection) -> Callable[[HandleRequest], None]:
    """Answer with the result dict the route path would build, without the server layer."""
    respond = conn.session.respond

    def answer(action: HandleRequest) -> None:
        respond(action.token, {"content": [{"type": "text", "text": action.params["arguments"]["text"]}]})

    return answer


ANSWERERS = {"route": route_answerer, "core": core_answerer}


def one_run(server: Server, rev: Revision, count: int, chunk: int, app: str) -> tuple[float, bytes]:
    """Seconds for ``count`` round trips, and the last response (for a sanity check)."""
    conn = open_connection(server, rev)
    answer = ANSWERERS[app](server, conn)
    pieces = chunks_of(request_lines(rev, count, 1, TEXT), chunk)
    receive, next_actions = conn.receive_data, conn.next_actions
    done = 0
    last = b""
    gc.collect()
    start = time.perf_counter()
    for piece in pieces:
        receive(piece, now=0.0)
        pending = next_actions()
        while pending:
            for action in pending:
                if type(action) is HandleRequest:
                    answer(action)
                elif type(action) is Send and action.final:
                    done += 1
                    last = action.payload
            pending = next_actions()
    elapsed = time.perf_counter() - start
    if done != count:
        raise RuntimeError(f"{rev}: {done} responses for {count} requests")
    return elapsed, last


def check_reply(rev: Revision, payload: bytes, count: int) -> None:
    reply = orjson.loads(payload)
    assert reply.get("id") == count, reply
    content = reply.get("result", {}).get("content")
    assert content == [{"type": "text", "text": TEXT}], f"{rev}: unexpected reply {reply}"


def profile(server: Server, rev: Revision, count: int, chunk: int, app: str, top: int) -> None:
    one_run(server, rev, min(count, 2000), chunk, app)  # warm up
    prof = cProfile.Profile()
    prof.enable()
    one_run(server, rev, count, chunk, app)
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    print(out.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Round trips per second through mcpx's pure core (tools/call echo), per MCP revision.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--messages", type=int, default=20_000, help="requests per run")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per revision (median reported)")
    parser.add_argument(
        "--chunk", type=int, default=4096, help="bytes per receive_data call; 0 = exactly one line per call"
    )
    parser.add_argument(
        "--revisions", default=",".join(REVISIONS), help="comma-separated revisions to measure"
    )
    parser.add_argument(
        "--profile",
        metavar="REVISION",
        help="instead of the table, cProfile one run at REVISION (with --app) and print the top functions",
    )
    parser.add_argument("--app", choices=sorted(ANSWERERS), default="route", help="answerer for --profile")
    parser.add_argument("--top", type=int, default=25, help="functions to show with --profile")
    parser.add_argument("--no-json", action="store_true", help="do not write benchmarks/results/*.json")
    args = parser.parse_args(argv)

    server = build_demo_server()
    facts = machine()
    if args.profile:
        profile(server, Revision(args.profile), args.messages, args.chunk, args.app, args.top)
        return 0

    revisions = [Revision(r.strip()) for r in args.revisions.split(",") if r.strip()]
    apps = ("route", "core")
    print(
        f"mcpx core: tools/call echo, {args.messages} messages/run, "
        f"{'one line' if args.chunk <= 0 else f'{args.chunk}-byte'} chunks, median of {args.runs} runs"
    )
    # Warm up every code path once (imports, caches, the downgrade tables).
    for rev in revisions:
        for app in apps:
            one_run(server, rev, min(args.messages, 1000), args.chunk, app)
    # Round-robin: run k of every (revision, answerer) pair before run k+1 of
    # any, rotating the order, so a burst of machine noise is spread across
    # the rows instead of landing on one of them.
    cells = [(rev, app) for rev in revisions for app in apps]
    rates: dict[tuple[Revision, str], list[float]] = {cell: [] for cell in cells}
    sizes: dict[Revision, int] = {}
    for k in range(args.runs):
        shift = k % len(cells)
        for rev, app in cells[shift:] + cells[:shift]:
            elapsed, last = one_run(server, rev, args.messages, args.chunk, app)
            check_reply(rev, last, args.messages)
            rates[(rev, app)].append(args.messages / elapsed)
            sizes[rev] = len(last)
    rows: list[dict[str, Any]] = []
    for rev in revisions:
        row: dict[str, Any] = {"revision": str(rev), "response_bytes": sizes[rev]}
        for app in apps:
            runs = rates[(rev, app)]
            median = statistics.median(runs)
            row[app] = {
                "median_msgs_per_s": median,
                "best_msgs_per_s": max(runs),
                "us_per_msg": 1e6 / median,
                "runs_msgs_per_s": runs,
            }
        rows.append(row)

    header = (
        f"{'revision':<12} {'msgs/s (route)':>15} {'µs/msg':>7} {'best':>8}"
        f" {'msgs/s (core)':>14} {'µs/msg':>7} {'best':>8}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        r, c = row["route"], row["core"]
        print(
            f"{row['revision']:<12} {r['median_msgs_per_s']:>15,.0f} {r['us_per_msg']:>7.1f}"
            f" {r['best_msgs_per_s']:>8,.0f} {c['median_msgs_per_s']:>14,.0f} {c['us_per_msg']:>7.1f}"
            f" {c['best_msgs_per_s']:>8,.0f}"
        )
    print("route = Server.route + echo coroutine + Call.finish + session.respond (what a driver does);")
    print("core  = session.respond with the same result dict built directly (the core alone).")
    print("msgs/s and µs/msg are medians over the runs; best is the fastest run.")
    if not args.no_json:
        path = write_results(
            "core",
            {
                "benchmark": "bench_core",
                "date": now_iso(),
                "machine": facts,
                "settings": {
                    "messages": args.messages,
                    "runs": args.runs,
                    "chunk": args.chunk,
                    "text": TEXT,
                },
                "loadavg_at_end": load_average(),
                "results": rows,
            },
        )
        print(f"wrote {path.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
