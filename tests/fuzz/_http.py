"""Strategies for the HTTP fuzz tests: request bytes from pure junk to well-formed MCP traffic.

``junk_streams`` is what a hostile or broken client writes on one connection:
random bytes, and requests built from a request line, headers, framing and a
body, each of which may be mangled — methods, targets (absolute-form, a broken
IPv6 authority), versions, line endings, header names and values with control
characters, duplicate or odd ``Content-Length`` and ``Transfer-Encoding``, bad
chunk sizes, huge header blocks, ``Origin``/``Host`` junk, and bodies that are
junk JSON, near-valid JSON-RPC, batches or 2026-07-28 requests with junk
``Mcp-*`` headers.

``well_formed_ops`` is a plan for one connection of a well-behaved client:
sessions it creates (``initialize``), requests and notifications in them and
outside them, ``GET``/``DELETE`` on those sessions, 2026-07-28 requests,
messages for a 2024-11-05 HTTP+SSE session, polite refusals (wrong path,
type, body or method), bursts of pipelined requests and header blocks that end
near ``max_header_bytes``.  ``render_op`` turns one step into request bytes
given the session ids the client holds.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import h11
from hypothesis import strategies as st

from ._mcp import (
    ALL_METHODS,
    CC,
    LEGACY_STRINGS,
    MODERN,
    PV,
    VERSION_STRINGS,
    good_ids,
    json_values,
    junk_or_deep,
    near_valid_or_batch,
    notification,
    request,
    request_params,
)

MAX_HEADER_BYTES = 16 * 1024  # HttpConfig's default, which the tests use
MODERN_META = {PV: MODERN, CC: {}}
SESSION_GUESSES = [b"s1", b"s2", b"s3"]  # the ids the junk tests mint, so junk can name real sessions


def dumps(obj: Any) -> bytes:
    """JSON as a peer writes it (Python's json: huge integers stay integers, lone surrogates escaped)."""
    return json.dumps(obj, separators=(",", ":")).encode("utf-8", "surrogatepass")


def b64(text: str) -> bytes:
    return b"=?base64?" + base64.b64encode(text.encode()) + b"?="


def http_request(
    method: bytes,
    target: bytes,
    headers: Sequence[tuple[bytes, bytes]],
    body: bytes = b"",
    *,
    host: bytes = b"127.0.0.1:8000",
) -> bytes:
    """A well-formed HTTP/1.1 request (written by h11, so it is what a correct client sends)."""
    client = h11.Connection(h11.CLIENT)
    all_headers = [(b"host", host), *headers, (b"content-length", b"%d" % len(body))]
    data = client.send(h11.Request(method=method, target=target, headers=all_headers)) or b""
    if body:
        data += client.send(h11.Data(data=body)) or b""
    return data + (client.send(h11.EndOfMessage()) or b"")


# ----------------------------------------------------------------------------
# Bodies
# ----------------------------------------------------------------------------


def initialize_body(request_id: Any, version: str) -> dict[str, Any]:
    return request(
        request_id,
        "initialize",
        {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}},
    )


_MCP_BODIES: list[Any] = [
    request(1, "ping"),
    request("p", "ping", {}),
    *(initialize_body(0, v) for v in [*LEGACY_STRINGS, "2099-01-01"]),
    notification("notifications/initialized"),
    request(2, "tools/list"),
    request(3, "tools/call", {"name": "t", "arguments": {}}),
    request(4, "tools/call", {"name": "t", "_meta": {"progressToken": "tok"}}),
    request(5, "resources/read", {"uri": "file:///a"}),
    request(6, "resources/subscribe", {"uri": "file:///a"}),
    request(7, "logging/setLevel", {"level": "debug"}),
    notification("notifications/cancelled", {"requestId": 3}),
    {"jsonrpc": "2.0", "id": -1, "result": {}},
    [request(8, "ping"), request(9, "ping")],
    [request(10, "tools/list"), notification("notifications/initialized")],
    [],
    request(11, "tools/list", {"_meta": MODERN_META}),
    request(12, "tools/call", {"name": "weather", "_meta": MODERN_META}),
    request(13, "ping", {"_meta": MODERN_META}),
    request(14, "subscriptions/listen", {"_meta": MODERN_META, "notifications": {"toolsListChanged": True}}),
    notification("notifications/initialized", {"_meta": MODERN_META}),
    request(15, "tools/call", {"name": "t", "_meta": {**MODERN_META, "progressToken": 1}}),
    request(16, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}),
    request(17, "subscriptions/listen", {"notifications": {"resourceSubscriptions": ["file:///a"]}}),
    request(18, "subscriptions/listen", {}),
    request(1.5, "tools/list", {"_meta": MODERN_META}),
]
_RAW_BODIES = [
    b"",
    b"{",
    b"null",
    b"[]",
    b"{}",
    b"\xef\xbb\xbf{}",
    b'{"jsonrpc":"2.0","id":1,"method":"ping"',
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}garbage',
    b'{"jsonrpc":"2.0","id":1,"method":"\xff"}',
    b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
    b"[" * 2000,
    b'{"a":' * 300 + b"1" + b"}" * 300,
    b"\x00" * 8,
    b"1e99999",
]
bodies = st.one_of(
    st.sampled_from(_MCP_BODIES).map(dumps),
    st.sampled_from(_RAW_BODIES),
    near_valid_or_batch.map(dumps),
    (json_values | junk_or_deep).map(dumps),
    st.binary(max_size=40),
)

# ----------------------------------------------------------------------------
# Request line
# ----------------------------------------------------------------------------

_METHODS = [
    b"POST",
    b"POST",
    b"POST",
    b"GET",
    b"DELETE",
    b"HEAD",
    b"PUT",
    b"OPTIONS",
    b"CONNECT",
    b"TRACE",
    b"PATCH",
    b"post",
    b"P OST",
    b"",
    b"GET\x00",
    b"G\xc3\xa9T",
    b"X" * 300,
    b"PRI",
]
methods = st.sampled_from(_METHODS) | st.text(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ!#$%&'*+-.^_`|~", min_size=1, max_size=8
).map(str.encode)
_TARGETS = [
    b"/mcp",
    b"/mcp",
    b"/mcp",
    b"/mcp?x=1",
    b"/mcp#frag",
    b"/mcp/",
    b"/MCP",
    b"/%6dcp",
    b"//mcp",
    b"http://127.0.0.1/mcp",
    b"http://127.0.0.1:8000/mcp",
    b"http://[::1]:8000/mcp",
    b"http://[::1/mcp",
    b"http://[/mcp",
    b"http://]/mcp",
    b"https://evil.example/mcp",
    b"http://h:99999/mcp",
    b"http://[::1]:x/mcp",
    b"*",
    b"127.0.0.1:443",
    b"",
    b"mcp",
    b"/\x00",
    b"/\xc3\xbc",
    b"/sse",
    b"/sse?x",
    b"/messages",
    b"/messages?session_id=s1",
    b"/messages?sessionId=s2&session_id=",
    b"/messages?session_id=%ff",
    b"/" + b"a" * 5000,
]
targets = st.sampled_from(_TARGETS) | st.binary(max_size=12)
versions = st.sampled_from(
    [b"HTTP/1.1"] * 8
    + [
        b"HTTP/1.0",
        b"HTTP/2.0",
        b"HTTP/1.1 ",
        b"http/1.1",
        b"HTTP/1",
        b"HTTP/0.9",
        b"HTTP/1.12",
        b"",
        b"HTTP/1.1\x00",
    ]
)
separators = st.sampled_from([b" "] * 8 + [b"  ", b"\t", b""])
line_ends = st.sampled_from([b"\r\n"] * 10 + [b"\n", b"\r", b"\n\r", b"\r\r\n"])

# ----------------------------------------------------------------------------
# Headers
# ----------------------------------------------------------------------------

_HOSTS = [
    b"127.0.0.1",
    b"127.0.0.1",
    b"127.0.0.1:8000",
    b"localhost",
    b"LOCALHOST:1",
    b"[::1]",
    b"[::1]:8000",
    b"[::1",
    b"::1",
    b"[::1]x",
    b"evil.example",
    b"127.0.0.1.evil.example",
    b"",
    b" ",
    b"127.0.0.1:",
    b"127.0.0.1:abc",
    b"localhost:8000:9",
    b"127.0.0.1, evil.example",
    b"h\xc3\xbcst",
    b"\x00",
]
_ORIGINS = [
    b"http://localhost",
    b"http://127.0.0.1:3000",
    b"https://[::1]",
    b"http://[::1",
    b"http://[::1]:99999",
    b"http://[zz]",
    b"null",
    b"",
    b"https://evil.example",
    b"http://localhost.evil.example",
    b"file://",
    b"http://",
    b"javascript:alert(1)",
    b"http://127.0.0.1:abc",
    b"HTTP://LOCALHOST",
    b"http://user@127.0.0.1",
    b"http://\xff",
]
_CONTENT_TYPES = [
    b"application/json",
    b"application/json",
    b"application/json; charset=utf-8",
    b"APPLICATION/JSON",
    b"text/plain",
    b"",
    b"application/json-rpc",
    b";application/json",
    b"application/json;;;",
    b"multipart/form-data; boundary=x",
]
_ACCEPTS = [
    b"application/json, text/event-stream",
    b"text/event-stream",
    b"application/json",
    b"*/*",
    b"",
    b"text/*",
    b"text/event-stream;q=0",
]
_BAD_LENGTHS = [
    b"-1",
    b"1e3",
    b"+5",
    b" 5 ",
    b"0x10",
    b"99999999999999999999",
    b"",
    b"5, 5",
    b"5,6",
    b"\xb2",
    b"5\x00",
    b"4194305",
]
_TRANSFER_ENCODINGS = [
    b"chunked",
    b"gzip, chunked",
    b"chunked, gzip",
    b"identity",
    b"CHUNKED",
    b"chunked chunked",
    b"",
]
_SESSION_IDS = [b"s1", b"s1", *SESSION_GUESSES, b"", b"nope", b"s1, s2", b"\x01", b" s1"]
_EVENT_IDS = [
    b"1-0",
    b"2-1",
    b"3-2",
    b"x",
    b"-",
    b"1-",
    b"-1",
    b"99999999999999999999-1",
    b"\xff",
    b"1-0-0",
    b" 2-1 ",
    b"\xb2-1",  # digits outside ASCII: latin-1 superscripts, Arabic-Indic in UTF-8
    b"1-\xb3",
    b"\xb9-\xb9",
    b"\xd9\xa3-1",
]
_MODERN_METHODS = [
    b"tools/list",
    b"tools/call",
    b"ping",
    b"subscriptions/listen",
    b"",
    b"Tools/List",
    b" tools/list ",
    b"\x00",
]
_MODERN_NAMES = [
    b"t",
    b"weather",
    b64("weather"),
    b64("t"),
    b"=?base64?!!?=",
    b"=?base64?/w==?=",
    b"=?BASE64?d2VhdGhlcg==?=",
    b"wea\x7fther",
    b"\xc3\xbc",
    b"",
]
_VERSIONS = [v.encode("utf-8", "surrogatepass") for v in VERSION_STRINGS] + [
    b"2026-07-28",
    b"2026-07-28, 2025-06-18",
]
_JUNK_NAMES = [b"X\x00", b"X Y", b"", b":", b"x\x7f", b"\xff", b"Host ", b" Host", b"x" * 300, b"(", b"x\t"]
_JUNK_VALUES = [
    b"\x00",
    b"a\rb",
    b"a\nb",
    b"a\r\n b",
    b"\x7f",
    b"\xff\xfe",
    b"  padded  ",
    b"\t",
    b"=?base64?",
    b"x" * 2000,
]

header_pairs = st.one_of(
    st.tuples(st.just(b"host"), st.sampled_from(_HOSTS)),
    st.tuples(st.sampled_from([b"origin", b"Origin", b"ORIGIN"]), st.sampled_from(_ORIGINS)),
    st.tuples(st.just(b"content-type"), st.sampled_from(_CONTENT_TYPES)),
    st.tuples(st.just(b"accept"), st.sampled_from(_ACCEPTS)),
    st.tuples(st.just(b"mcp-session-id"), st.sampled_from(_SESSION_IDS)),
    st.tuples(st.just(b"mcp-protocol-version"), st.sampled_from(_VERSIONS)),
    st.tuples(st.just(b"mcp-method"), st.sampled_from(_MODERN_METHODS)),
    st.tuples(st.just(b"mcp-name"), st.sampled_from(_MODERN_NAMES)),
    st.tuples(
        st.sampled_from([b"mcp-param-city", b"Mcp-Param-", b"mcp-param-\xff"]), st.sampled_from(_MODERN_NAMES)
    ),
    st.tuples(st.just(b"last-event-id"), st.sampled_from(_EVENT_IDS)),
    st.tuples(
        st.sampled_from([b"connection", b"expect", b"upgrade", b"te", b"trailer"]),
        st.sampled_from(
            [b"close", b"keep-alive", b"upgrade", b"100-continue", b"h2c", b"websocket", b"trailers"]
        ),
    ),
    st.tuples(st.sampled_from(_JUNK_NAMES), st.sampled_from([b"v", *_JUNK_VALUES])),
    st.tuples(
        st.sampled_from([b"x-junk", b"host", b"content-type", b"accept"]), st.sampled_from(_JUNK_VALUES)
    ),
)

# Header blocks that cross the limit: many small headers, or one big one, sized around it.
big_headers = st.one_of(
    st.integers(min_value=1, max_value=600).map(lambda n: [(b"x-%d" % i, b"v") for i in range(n)]),
    st.sampled_from([MAX_HEADER_BYTES - 200, MAX_HEADER_BYTES - 30, MAX_HEADER_BYTES, MAX_HEADER_BYTES + 40])
    .flatmap(lambda n: st.integers(min_value=n - 40, max_value=n + 40))
    .map(lambda n: [(b"x-pad", b"a" * n)]),
    st.integers(min_value=MAX_HEADER_BYTES, max_value=3 * MAX_HEADER_BYTES).map(
        lambda n: [(b"x-pad", b"b" * n)]
    ),
)

# ----------------------------------------------------------------------------
# Framing
# ----------------------------------------------------------------------------

_BAD_CHUNK_SIZES = [
    b"zz",
    b"-1",
    b"ffffffffffffffffffff",
    b"5;",
    b" 5",
    b"5 ",
    b"0x5",
    b"",
    b"5;a=\x00",
    b"\xff",
]


@st.composite
def chunked(draw: st.DrawFn, body: bytes) -> bytes:
    """``body`` in chunked coding: good (with extensions and trailers) or with one thing broken."""
    points = sorted(draw(st.lists(st.integers(min_value=1, max_value=max(len(body) - 1, 1)), max_size=4)))
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True) if b > a]
    out = b"".join(
        b"%x%s\r\n%s\r\n" % (len(p), draw(st.sampled_from([b"", b"", b";ext=1"])), p) for p in pieces
    )
    ending = b"0\r\n" + draw(st.sampled_from([b"", b"", b"x-trailer: 1\r\n", b"bad trailer\r\n"])) + b"\r\n"
    breakage = draw(st.sampled_from(["none", "none", "size", "short", "long", "crlf", "no-end"]))
    if breakage == "size":
        out = draw(st.sampled_from(_BAD_CHUNK_SIZES)) + b"\r\n" + body + b"\r\n"
    elif breakage == "short":  # the size says more than follows
        out = b"%x\r\n%s\r\n" % (len(body) + 3, body)
    elif breakage == "long":  # the size says less than follows
        out = b"%x\r\n%s\r\n" % (max(len(body) - 1, 0), body)
    elif breakage == "crlf":
        out = b"%x\r\n%sXX" % (len(body), body)
    elif breakage == "no-end":
        ending = b""
    return out + ending


@st.composite
def framed(draw: st.DrawFn, body: bytes) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """Framing headers and the body bytes as sent."""
    how = draw(
        st.sampled_from(
            ["length"] * 6 + ["chunked", "bad-length", "wrong-length", "dup-length", "both", "none", "te"]
        )
    )
    if how == "length":
        return [(b"content-length", b"%d" % len(body))], body
    if how == "chunked":
        return [(b"transfer-encoding", b"chunked")], draw(chunked(body))
    if how == "bad-length":
        return [(b"content-length", draw(st.sampled_from(_BAD_LENGTHS)))], body
    if how == "wrong-length":
        delta = draw(st.integers(min_value=-3, max_value=3))
        return [(b"content-length", b"%d" % max(len(body) + delta, 0))], body
    if how == "dup-length":
        other = draw(st.sampled_from([len(body), len(body) + 1, 0]))
        return [(b"content-length", b"%d" % len(body)), (b"Content-Length", b"%d" % other)], body
    if how == "both":
        return [(b"content-length", b"%d" % len(body)), (b"transfer-encoding", b"chunked")], draw(
            chunked(body)
        )
    if how == "te":
        te = draw(st.sampled_from(_TRANSFER_ENCODINGS))
        return [(b"transfer-encoding", te)], draw(chunked(body)) if b"chunked" in te.lower() else body
    return [], body


# ----------------------------------------------------------------------------
# Whole requests and streams
# ----------------------------------------------------------------------------


_MUTATIONS = [
    "method",
    "target",
    "version",
    "separator",
    "line-end",
    "host",
    "origin",
    "content-type",
    "junk-header",
    "framing",
    "big-headers",
    "fold",
    "order",
    "colon",
]
_PLAIN_METHODS = st.sampled_from([b"POST"] * 5 + [b"GET", b"GET", b"DELETE"])
_PLAIN_TARGETS = st.sampled_from(
    [b"/mcp"] * 8 + [b"/sse", b"/messages?session_id=s1", b"/mcp?x=1", b"http://127.0.0.1:8000/mcp"]
)
# Requests in the 2026-07-28 shape, for any method a client may send.
modern_requests = st.builds(
    request,
    good_ids,
    st.sampled_from(ALL_METHODS).flatmap(
        lambda method: st.tuples(st.just(method), request_params(method, "good"))
    ),
).map(lambda r: {**r, "method": r["method"][0], "params": r["method"][1]})
_MESSAGES = st.one_of(
    st.sampled_from(_MCP_BODIES), st.sampled_from(_MCP_BODIES), near_valid_or_batch, modern_requests
)
_NAME_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "tasks/get": "taskId"}


def _header_text(value: Any) -> bytes | None:
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else None


@st.composite
def modern_headers(draw: st.DrawFn, message: Any) -> list[tuple[bytes, bytes]]:
    """``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name``: agreeing with ``message`` or not."""
    method = message.get("method") if isinstance(message, dict) else None
    params = message.get("params") if isinstance(message, dict) else None
    name = (
        params.get(_NAME_PARAMS.get(method, ""), None)
        if isinstance(params, dict) and isinstance(method, str)
        else None
    )
    agree = draw(st.booleans())
    headers = [(b"mcp-protocol-version", b"2026-07-28")]
    header_method = _header_text(method) if agree else None
    headers.append(
        (
            b"mcp-method",
            header_method if header_method is not None else draw(st.sampled_from(_MODERN_METHODS)),
        )
    )
    header_name = _header_text(name) if agree else None
    if header_name is not None:
        headers.append((b"mcp-name", header_name if draw(st.booleans()) else b64(name)))
    elif draw(st.booleans()):
        headers.append((b"mcp-name", draw(st.sampled_from(_MODERN_NAMES))))
    return headers


_COLONS = st.sampled_from([b":", b" : ", b":\t", b":   ", b"\t:"])


@st.composite
def near_valid_requests(draw: st.DrawFn) -> bytes:
    """One HTTP request that is plausible but for up to three things (often none)."""
    broken = set(draw(st.lists(st.sampled_from(_MUTATIONS), max_size=3)))
    method = draw(methods if "method" in broken else _PLAIN_METHODS)
    target = draw(targets if "target" in broken else _PLAIN_TARGETS)
    sp = draw(separators) if "separator" in broken else b" "
    eol = draw(line_ends) if "line-end" in broken else b"\r\n"
    line = method + sp + target
    if "version" not in broken or draw(st.booleans()):
        line += sp + (draw(versions) if "version" in broken else b"HTTP/1.1")
    message: Any = None
    body = b""
    if method == b"POST" or draw(st.integers(0, 5)) == 0:
        message = draw(st.none() | _MESSAGES)
        body = dumps(message) if message is not None else draw(bodies)

    headers: list[tuple[bytes, bytes]] = []
    if "host" in broken:
        headers += draw(st.lists(st.tuples(st.just(b"host"), st.sampled_from(_HOSTS)), max_size=2))
    else:
        headers.append((b"host", draw(st.sampled_from([b"127.0.0.1", b"localhost:8000", b"[::1]:8000"]))))
    if "content-type" in broken:
        headers.append((b"content-type", draw(st.sampled_from(_CONTENT_TYPES))))
    elif body:
        headers.append((b"content-type", b"application/json"))
    if "origin" in broken:
        headers.append((b"origin", draw(st.sampled_from(_ORIGINS))))
    elif draw(st.integers(0, 4)) == 0:
        headers.append((b"origin", b"http://localhost:3000"))
    if method == b"GET" and draw(st.integers(0, 3)):
        headers.append((b"accept", b"text/event-stream"))
    elif draw(st.booleans()):
        headers.append((b"accept", draw(st.sampled_from(_ACCEPTS))))
    if draw(st.integers(0, 1 if method in (b"GET", b"DELETE") else 2)) == 0:
        headers.append((b"mcp-session-id", draw(st.sampled_from(_SESSION_IDS))))
    if method == b"GET" and draw(st.booleans()):
        headers.append((b"last-event-id", draw(st.sampled_from(_EVENT_IDS))))
    looks_modern = (
        isinstance(message, dict) and isinstance(message.get("params"), dict) and "_meta" in message["params"]
    )
    if draw(st.integers(0, 1 if looks_modern else 4)) == 0:  # a 2026-07-28 request's headers, right or wrong
        headers += draw(modern_headers(message))
    elif draw(st.integers(0, 3)) == 0:
        headers.append((b"mcp-protocol-version", draw(st.sampled_from(_VERSIONS))))
    if "junk-header" in broken:
        headers += draw(st.lists(header_pairs, min_size=1, max_size=4))
    if "big-headers" in broken:
        headers += draw(big_headers)
    if "framing" in broken:
        framing, sent = draw(framed(body))
    else:
        framing, sent = [(b"content-length", b"%d" % len(body))], body
    headers += framing
    if "order" in broken:
        headers = draw(st.permutations(headers))
    colon = draw(_COLONS) if "colon" in broken else b": "
    head = line + eol + b"".join(name + colon + value + eol for name, value in headers)
    if "fold" in broken:
        head += b" folded continuation" + eol  # obs-fold
    return head + eol + sent


def _post_whole(message: Any, session: bytes | None = None) -> bytes:
    headers = [(b"content-type", b"application/json"), (b"accept", b"application/json, text/event-stream")]
    if session is not None:
        headers.append((b"mcp-session-id", session))
    return http_request(b"POST", b"/mcp", headers, dumps(message), host=b"127.0.0.1")


_FRAGMENTS = [
    b"\r\n",
    b"\r\n\r\n",
    b"\n",
    b"\x00",
    b"\xff",
    b"GET /mcp HTTP/1.1\r\n",
    b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n",
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    b"0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n\r\n",
]
junk_pieces = st.one_of(
    st.binary(max_size=48),
    st.sampled_from(_FRAGMENTS),
    *[near_valid_requests()] * 6,
)
# A prelude that leaves session s1 open, so the junk after it can hit a real session.
_PRELUDES = [
    b"",
    b"",
    _post_whole(initialize_body(0, "2025-11-25"))
    + _post_whole(notification("notifications/initialized"), b"s1"),
    _post_whole(initialize_body(0, "2025-03-26")),
]
junk_streams = st.builds(
    lambda prelude, rest: prelude + b"".join(rest),
    st.sampled_from(_PRELUDES),
    st.lists(junk_pieces, min_size=1, max_size=4),
)


# ----------------------------------------------------------------------------
# Well-formed traffic
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One step of a well-behaved client.  ``session`` indexes the sessions it minted so far."""

    kind: str
    session: int | None = None
    version: str = "2025-11-25"
    method: str = "ping"
    request_id: Any = 1
    accept: bytes = b"application/json, text/event-stream"
    count: int = 1
    size: int = 0
    extra: tuple[tuple[bytes, bytes], ...] = ()


_OP_KINDS = [
    "init",
    "init",
    "initialized",
    "request",
    "request",
    "request",
    "notify",
    "response",
    "batch",
    "modern",
    "refused",
    "get",
    "delete",
    "burst",
    "pad",
    "legacy",
    "legacy",
]
_REQUEST_METHODS = [
    "ping",
    "tools/list",
    "tools/call",
    "tools/call-progress",
    "resources/read",
    "logging/setLevel",
]
_DEEP_BURSTS = st.integers(min_value=120, max_value=160)  # deeper than a recursion per request allows
_EVENT_ID_GUESSES = st.builds(lambda k, n: b"%d-%d" % (k, n), st.integers(1, 8), st.integers(0, 2))
_LEGACY_MESSAGES: list[Any] = [
    initialize_body(0, "2024-11-05"),
    notification("notifications/initialized"),
    request(1, "tools/list"),
    request(2, "ping"),
    request(3, "tools/call", {"name": "t", "_meta": {"progressToken": "lp"}}),
    request(4, "resources/read", {"uri": "file:///a"}),
    {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": "junk"},
]
# The _LEGACY_MESSAGES requests handed to the application (the rest the core answers itself).
_LEGACY_APP_METHODS = {"tools/list", "tools/call", "resources/read"}
_ACCEPT_CHOICES = [b"application/json, text/event-stream", b"application/json", b"text/event-stream"]


@st.composite
def well_formed_ops(draw: st.DrawFn) -> Op:
    kind = draw(st.sampled_from(_OP_KINDS))
    session = draw(st.none() | st.integers(min_value=0, max_value=2))
    return Op(
        kind=kind,
        session=session,
        version=draw(st.sampled_from([*LEGACY_STRINGS, "2025-11-25"])),
        method=draw(st.sampled_from(_REQUEST_METHODS)),
        request_id=draw(st.integers(min_value=0, max_value=9) | st.sampled_from(["a", "b"])),
        accept=draw(st.sampled_from(_ACCEPT_CHOICES)),
        count=draw(
            st.integers(min_value=1, max_value=8) | st.integers(min_value=1, max_value=8) | _DEEP_BURSTS
        )
        if kind == "burst"
        else draw(st.integers(min_value=0, max_value=20)),
        size=draw(st.integers(min_value=-70, max_value=40)) if kind == "pad" else 0,
        extra=((b"last-event-id", draw(_EVENT_ID_GUESSES)),) if kind == "get" and draw(st.booleans()) else (),
    )


def _post(body: bytes, headers: Sequence[tuple[bytes, bytes]], target: bytes = b"/mcp") -> bytes:
    return http_request(b"POST", target, [(b"content-type", b"application/json"), *headers], body)


def _call(method: str, request_id: Any, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if method == "tools/call":
        params = {"name": "t", "arguments": {"city": "x"}}
    elif method == "tools/call-progress":
        params = {"name": "t", "_meta": {"progressToken": f"pt-{request_id}"}}
        method = "tools/call"
    elif method == "resources/read":
        params = {"uri": "file:///a"}
    elif method == "logging/setLevel":
        params = {"level": "debug"}
    if meta is not None:
        params["_meta"] = {**params.get("_meta", {}), **meta}
    return request(request_id, method, params or None)


def render_op(
    op: Op,
    session_id: Callable[[int], bytes | None],
    *,
    max_header_bytes: int = MAX_HEADER_BYTES,
    serial: int | None = None,
) -> bytes:
    """The bytes of ``op``, naming session ``op.session`` by the id ``session_id`` gives.

    ``serial`` (the op's place in its plan) makes the ids of calls posted to
    the HTTP+SSE session unique within the plan.
    """
    sid = session_id(op.session) if op.session is not None else None
    base: list[tuple[bytes, bytes]] = [(b"accept", op.accept)]
    if sid is not None:
        base.append((b"mcp-session-id", sid))
    if op.kind == "init":
        return _post(dumps(initialize_body(op.request_id, op.version)), [(b"accept", op.accept)])
    if op.kind == "initialized":
        return _post(dumps(notification("notifications/initialized")), base)
    if op.kind == "request":
        return _post(dumps(_call(op.method, op.request_id)), base)
    if op.kind == "notify":
        params = {"progressToken": "x", "progress": 1}
        return _post(dumps(notification("notifications/progress", params)), base)
    if op.kind == "response":
        return _post(dumps({"jsonrpc": "2.0", "id": -1, "result": {}}), base)
    if op.kind == "batch":
        batch = [
            _call(op.method, op.request_id),
            request("batch-ping", "ping"),
            notification("notifications/x"),
        ]
        return _post(dumps(batch), base)
    if op.kind == "modern":
        method = "tools/call" if op.method.startswith("tools/call") else op.method
        headers = [
            (b"accept", op.accept),
            (b"mcp-protocol-version", MODERN.encode()),
            (b"mcp-method", method.encode()),
        ]
        if method == "tools/call":
            headers.append((b"mcp-name", b"t"))
        elif method == "resources/read":
            headers.append((b"mcp-name", b"file:///a"))
        return _post(dumps(_call(op.method, op.request_id, MODERN_META)), headers)
    if op.kind == "refused":  # refusals that keep the connection: wrong path, type, body, method
        choice = op.request_id if isinstance(op.request_id, int) else 0
        if choice % 4 == 0:
            return _post(dumps(request(1, "ping")), base, target=b"/elsewhere")
        if choice % 4 == 1:
            return http_request(b"POST", b"/mcp", [*base, (b"content-type", b"text/plain")], b"{}")
        if choice % 4 == 2:
            return _post(b'{"jsonrpc":', base)
        return http_request(b"PUT", b"/mcp", base)
    if op.kind == "get":
        return http_request(b"GET", b"/mcp", [(b"accept", b"text/event-stream"), *base[1:], *op.extra])
    if op.kind == "delete":
        return http_request(b"DELETE", b"/mcp", base[1:])
    if op.kind == "burst":  # pipelined requests the server answers without the application
        message = request("burst", "ping") if op.count % 3 else notification("notifications/initialized")
        return _post(dumps(message), base) * op.count
    if op.kind == "legacy":  # a message for the 2024-11-05 HTTP+SSE session s1
        message = dict(_LEGACY_MESSAGES[op.count % len(_LEGACY_MESSAGES)])
        if serial is not None and message.get("method") in _LEGACY_APP_METHODS:
            # The 202 comes at once and the answer later on the stream, so the
            # next pipelined POST is read while this request may still be in
            # flight.  Whether a repeated id is then refused as "already in use"
            # depends on whether the application answered between two reads -
            # timing, not the server's reading of the bytes.  So each request
            # the application answers gets an id of its own within the plan.
            # (initialize and ping stay as they are: the core answers them in
            # the same read, so their repeats are never in flight.)
            message["id"] = f"{message['id']}-{serial}"
            if message["method"] == "tools/call":
                message["params"] = {"name": "t", "_meta": {"progressToken": f"lp-{serial}"}}
        return _post(
            dumps(message),
            base[:1],
            target=b"/messages?session_id=s1",
        )
    if op.kind == "pad":  # a header block that ends op.size bytes from max_header_bytes
        body = dumps(request("pad", "ping"))
        probe = _post(body, [*base, (b"x-pad", b"")])
        block = probe.index(b"\r\n\r\n") + 4
        return _post(body, [*base, (b"x-pad", b"a" * max(max_header_bytes - block + op.size, 0))])
    raise AssertionError(op.kind)
