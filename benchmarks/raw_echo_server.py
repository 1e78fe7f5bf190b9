"""A raw MCP echo server over stdio for ``bench_hop.py``: orjson, no framework, newline-delimited JSON.

It answers both eras: ``initialize`` (a legacy handshake, at the revision the
client offers when it is one of the four legacy ones, else 2025-11-25) and
``server/discover`` (2026-07-28, whose requests carry the revision in
``params._meta``); then ``tools/list`` and ``tools/call`` for one tool,
``echo``, which returns the ``text`` argument as one text block.  A request
whose ``_meta`` names 2026-07-28 is answered in that revision's shape
(``resultType: "complete"``, and ``ttlMs``/``cacheScope`` on lists).  It declares ``tools`` without ``listChanged``,
so a 2026-07-28 client has nothing to listen for.  Notifications are read
and dropped.

One thread, blocking ``os.read``/``os.write``: every complete line of one
read is answered, and the answers go out in one write — the least a stdio
server can do per call, which is what the benchmark measures every relay
against.

    python benchmarks/raw_echo_server.py
"""

from __future__ import annotations

import os
import sys
from typing import Any

import orjson

MODERN = "2026-07-28"
LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO = {"name": "raw-echo", "version": "1.0.0"}
CACHE_HINTS = {"ttlMs": 60000, "cacheScope": "public"}  # 2026-07-28 list and discover results carry them
ECHO_TOOL = {
    "name": "echo",
    "description": "Return the text you sent.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


def _error(request_id: Any, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})


def answer(msg: Any) -> bytes | None:
    """The answer line (without its newline) for one message, or None for a notification."""
    if not isinstance(msg, dict) or "method" not in msg:
        return None if isinstance(msg, dict) and "id" in msg else _error(None, -32600, "not a request")
    if "id" not in msg:
        return None  # notifications/initialized, cancelled, ...: nothing to answer
    request_id = msg["id"]
    method = msg["method"]
    params = msg.get("params") or {}
    meta = params.get("_meta") if isinstance(params, dict) else None
    requested = meta.get(VERSION_KEY) if isinstance(meta, dict) else None
    if requested is not None and requested != MODERN:
        return _error(
            request_id,
            -32022,
            f"unsupported protocol version {requested!r}",
            {"supported": [MODERN], "requested": requested},
        )
    modern = requested == MODERN
    if method == "tools/call":
        if params.get("name") != "echo":
            return _error(request_id, -32602, f"unknown tool {params.get('name')!r}")
        arguments = params.get("arguments") or {}
        text = arguments.get("text") if isinstance(arguments, dict) else None
        if not isinstance(text, str):
            return _error(request_id, -32602, "echo needs a string argument 'text'")
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    elif method == "tools/list":
        result = {"tools": [ECHO_TOOL]}
        if modern:
            result.update(CACHE_HINTS)
    elif method == "initialize" and not modern:
        offered = params.get("protocolVersion")
        result = {
            "protocolVersion": offered if offered in LEGACY else LEGACY[0],
            "capabilities": {"tools": {}},
            "serverInfo": SERVER_INFO,
        }
    elif method == "server/discover":
        result = {
            "supportedVersions": [MODERN, *LEGACY],
            "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
            **CACHE_HINTS,
        }
        modern = True
    elif method == "ping" and not modern:
        result = {}
    else:
        return _error(request_id, -32601, f"method not found: {method}")
    if modern:
        result["resultType"] = "complete"
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def main() -> int:
    rfd, wfd = sys.stdin.fileno(), sys.stdout.fileno()
    buf = b""
    while True:
        data = os.read(rfd, 65536)
        if not data:
            return 0
        buf += data
        if b"\n" not in data:
            continue
        *lines, buf = buf.split(b"\n")
        out = []
        for line in lines:
            if not line.strip():
                continue
            try:
                msg = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                reply: bytes | None = _error(None, -32700, f"parse error: {exc}")
            else:
                reply = answer(msg)
            if reply is not None:
                out.append(reply)
        if out:
            view = memoryview(b"\n".join(out) + b"\n")
            while view:
                view = view[os.write(wfd, view) :]


if __name__ == "__main__":
    sys.exit(main())
