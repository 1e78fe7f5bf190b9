#!/usr/bin/env bash
# The official MCP conformance suite's server leg, through the gateway.
#
# Starts `mcpx daemon` with one upstream, `mcpx demo --profile conformance`
# (the suite's fixtures under their own names), offered in pass-through mode,
# and runs ../shared/conformance/server-leg.sh against the daemon's /mcp: the
# suite's client talks to mcpx, mcpx talks to the fixture server, and both
# eras are spoken on each hop.  The fixture speaks both eras, so each host is
# served in its own (spec/gateway.md §7): the 2026-07-28 leg's calls share one
# instance over 2026-07-28, whose questions come back as input rounds on the
# call that asked, and the 2025-11-25 leg's share one over a legacy session,
# as a configured server is shared by default.  (Per
# host connection, a 2026-07-28 request is its own scope and would start a
# fresh upstream process for each one, slower than the suite's sub-second
# read windows in server-stateless.)
#
# usage: scripts/conformance.sh [extra server-leg.sh args...]
# env:   LOOP (asyncio|uvloop|trio, default asyncio), CONF_DIR (the suite), and
#        whatever server-leg.sh reads (CONF_LEGS, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
PY="$ROOT/.venv/bin/python"
LEG="$(cd .. && pwd)/shared/conformance/server-leg.sh"
LOOP="${LOOP:-asyncio}"
WORK="$(mktemp -d)"
trap 'kill "$DAEMON" 2>/dev/null || true; wait "$DAEMON" 2>/dev/null || true; rm -rf "$WORK"' EXIT

cat >"$WORK/config.toml" <<TOML
[servers.conformance]
command = "$PY"
args = ["-m", "mcpx", "demo", "--profile", "conformance", "--loop", "$LOOP"]
scope = "shared"

[mcp]
passthrough = ["conformance"]

[pool]
maxSpawnsPerMinute = 10000

[transport]
port = 0
ssePollAfter = "200ms"  # long calls of 2025-11-25 hosts are resumed, as server-sse-polling checks
TOML

HOME="$WORK" MCPX_STATE="$WORK/state" "$PY" -m mcpx daemon --config "$WORK/config.toml" --loop "$LOOP" \
  >"$WORK/daemon.log" 2>&1 &
DAEMON=$!
for _ in $(seq 1 200); do
  [ -f "$WORK/state/daemon.json" ] && break
  kill -0 "$DAEMON" 2>/dev/null || { cat "$WORK/daemon.log" >&2; exit 2; }
  sleep 0.1
done
URL="$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["mcp"])' "$WORK/state/daemon.json")"
echo "conformance: daemon ($LOOP) at $URL, upstream mcpx demo --profile conformance in pass-through"
bash "$LEG" "$URL" "$@"
