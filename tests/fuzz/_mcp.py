"""Shared pieces of the fuzz tests: the server config, JSON-RPC strategies, output checks.

The strategies build messages a peer could plausibly send and then break them
in the ways real peers do: wrong types for ``jsonrpc``/``id``/``method``/
``params``, envelope members in another case, batches, huge integers, nested
junk, 2026-07-28 ``_meta`` that is good, bad or missing.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Mapping
from typing import Any

import orjson
from hypothesis import strategies as st

from mcpx.core import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ServerConfig,
)
from mcpx.core.revisions import LOG_LEVELS, METHODS, REVISIONS, Sender

PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
CI = "io.modelcontextprotocol/clientInfo"
LL = "io.modelcontextprotocol/logLevel"
SUB = "io.modelcontextprotocol/subscriptionId"
TASKS_EXT = "io.modelcontextprotocol/tasks"
MODERN = "2026-07-28"
REVISION_STRINGS = [str(r) for r in REVISIONS]
LEGACY_STRINGS = [r for r in REVISION_STRINGS if r != MODERN]

CAPABILITIES = {
    "tools": {"listChanged": True},
    "prompts": {},
    "resources": {"subscribe": True},
    "logging": {},
    "completions": {},
}


def make_config(**kw: Any) -> ServerConfig:
    return ServerConfig(server_info={"name": "t", "version": "1"}, capabilities=CAPABILITIES, **kw)


CONFIG = make_config()

# Every code the core may put on the wire: JSON-RPC's own and MCP's.
JSONRPC_CODES = {PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR}
MCP_CODES = {-32002, -32042, -32020, -32021, -32022}
APP_ERROR_CODES = [INTERNAL_ERROR, INVALID_PARAMS, -32002, -32042, -32020, -32021, -32022, -1, 1234]

CLIENT_METHODS = sorted({m.method for m in METHODS if m.sender is Sender.CLIENT and not m.notification})
EXTRA_METHODS = ["tasks/update", "notifications/tasks", "notifications/initialized", "tools/List", "foo/bar"]
ALL_METHODS = CLIENT_METHODS + EXTRA_METHODS
# Requests the session hands to the application (given a declared capability).
DISPATCHED_METHODS = [
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
]
SERVER_METHODS = sorted({m.method for m in METHODS if m.sender is Sender.SERVER and not m.notification})

# ----------------------------------------------------------------------------
# JSON values
# ----------------------------------------------------------------------------

# Integers a peer can put on the wire: orjson reads up to 2**64 - 1 as int and
# anything beyond (either way) as a float.
HUGE_INTS = st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**70, -(2**63), -(2**63) - 1, -(10**30)])
json_ints = st.integers(min_value=-(2**63), max_value=2**64 - 1) | HUGE_INTS
# Strings that tend to matter: empty, non-ASCII, a line separator, a lone
# surrogate (Python's json writes it as an escape orjson refuses), JSON-ish text.
short_text = st.sampled_from(
    ["", "a", "2.0", "ü", "\u2028", "\ud800", "null", "\n", "{", "Method"]
) | st.text(max_size=4)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-5, max_value=300)
    | json_ints
    | st.floats(allow_nan=False, allow_infinity=False)
    | short_text
)


def _nest(depth: int, kind: str) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


# Deep structures: orjson reads 1024 levels but writes only 254, so nothing the
# peer nests deeply may ever be echoed.
DEEP = st.sampled_from([_nest(d, k) for d in (30, 255, 300, 1000) for k in ("list", "dict")])
# Cheap junk: one level of containers around scalars.
junk = (
    json_scalars
    | st.lists(json_scalars, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "id", "method", "_meta", "Params", ""]), json_scalars, max_size=3)
)
junk_or_deep = junk | DEEP
# Arbitrary JSON, for the property that feeds JSON values of every shape.
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(short_text, inner, max_size=4),
    max_leaves=6,
)

# Ids as a peer sends them: good ones, and everything JSON-RPC says an id is not.
good_ids = st.integers(min_value=-5, max_value=40) | st.sampled_from(["a", "b", "", "1", "-1", "ü"])
bad_ids = (
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([2**64, 2**70, -(2**63) - 1, -(10**30)])  # orjson reads these as floats
    | st.lists(good_ids, max_size=2)
    | st.dictionaries(short_text, good_ids, max_size=2)
)
any_ids = good_ids | bad_ids

VERSION_STRINGS = [
    *REVISION_STRINGS,
    "2026-07-29",
    "2024-10-07",
    "",
    "2025-3-26",
    "latest",
    " 2025-06-18",
    "2025-06-18 ",
    "2025-06-18\u0000",
]
version_strings = st.sampled_from(VERSION_STRINGS) | short_text
# Not levels: wrong case, unknown names, other types, and unhashable values.
BAD_LOG_LEVELS = ["DEBUG", "warn", "", "fatal", 3, True, 1.5, ["debug"], {"debug": 1}]

# ----------------------------------------------------------------------------
# params._meta and params, from tables: a handful of draws per message keeps
# the examples cheap enough for thousands per property.
# ----------------------------------------------------------------------------

CLIENT_CAPS: list[Any] = [
    {},
    {"roots": {"listChanged": True}, "sampling": {}},
    {"extensions": {TASKS_EXT: {}}},
    {"extensions": {TASKS_EXT: {}}, "elicitation": {}},
    {"extensions": [TASKS_EXT]},
    {"extensions": {"other/ext": {}}},
]
client_capabilities = st.sampled_from(CLIENT_CAPS)
_GOOD_EXTRAS: list[dict[str, Any]] = [
    {},
    {LL: "debug"},
    {LL: "warning"},
    {LL: "emergency"},
    {LL: None},
    {"progressToken": 7},
    {"progressToken": "p"},
    {"progressToken": True},
    {"progressToken": 1.5},
    {CI: {"name": "c", "version": "1"}},
    {CI: 5, LL: "info", "progressToken": 0},
]
GOOD_META = [{PV: MODERN, CC: caps, **extra} for caps in CLIENT_CAPS for extra in _GOOD_EXTRAS]
BAD_META: list[Any] = [
    *({PV: version, CC: {}} for version in [*VERSION_STRINGS, 20260728, None, [MODERN], {"v": MODERN}]),
    *({PV: MODERN, CC: caps} for caps in [None, [], "x", 1, True]),
    {PV: MODERN},
    {CC: {}},
    {CC: {"extensions": {TASKS_EXT: {}}}},
    {PV: MODERN, "clientcapabilities": {}},
    *({PV: MODERN, CC: {}, LL: level} for level in BAD_LOG_LEVELS),
]
LEGACY_META: list[Any] = [
    {},
    {"progressToken": 1},
    {"progressToken": "tok"},
    {"progressToken": -3},
    {"progressToken": 1.5},
    {"progressToken": None},
    {"progressToken": False},
    {"other": {"a": 1}},
    {"io.modelcontextprotocol/logLevel": "debug"},  # only a 2026-07-28 request may say this
]
JUNK_META: list[Any] = [1, "x", [], None, True, [{PV: MODERN, CC: {}}]]
META = {"good": GOOD_META, "bad": BAD_META, "legacy": LEGACY_META, "junk": JUNK_META}
META_STRATEGIES = {kind: st.sampled_from(values) for kind, values in META.items()}

_URIS: list[Any] = ["file:///a", "file:///b", 1, None, ["file:///a"], {}]
_TASK_PARAMS: list[Any] = [{}, {"taskId": "t"}, {"taskId": 1}, {"taskId": None}]
_LISTEN_WANTED: list[Any] = [
    {},
    {"toolsListChanged": True},
    {"toolsListChanged": "yes", "promptsListChanged": True, "resourcesListChanged": True},
    {"toolsListChanged": True, "resourceSubscriptions": ["file:///a", 3, "file:///b"]},
    {"resourceSubscriptions": "file:///a"},
    {"resourceSubscriptions": []},
    {"taskIds": []},
    {"taskIds": ["t"], "toolsListChanged": True},
    None,
    [1],
    "all",
]
PARAMS: dict[str, list[Any]] = {
    "initialize": [
        *(
            {"protocolVersion": v, "capabilities": c, "clientInfo": {"name": "c"}}
            for v in VERSION_STRINGS
            for c in CLIENT_CAPS[:3]
        ),
        {"protocolVersion": "2025-06-18"},
        {"protocolVersion": 20250618},
        {"protocolVersion": None, "capabilities": {}},
        {"capabilities": {}},
        {"protocolVersion": ["2025-06-18"]},
        {"protocolVersion": "2025-03-26", "capabilities": "all", "clientInfo": 7},
    ],
    "logging/setLevel": [{"level": level} for level in [*LOG_LEVELS, *BAD_LOG_LEVELS, None]] + [{}],
    "resources/subscribe": [{"uri": u} for u in _URIS] + [{}],
    "resources/unsubscribe": [{"uri": u} for u in _URIS] + [{}],
    "resources/read": [{"uri": u} for u in _URIS],
    "subscriptions/listen": [{"notifications": w} for w in _LISTEN_WANTED] + [{}],
    "tools/call": [{"name": "t"}, {"name": "t", "arguments": {"a": [1, None]}}, {"name": 1}, {}],
}
_DEFAULT_PARAMS: list[Any] = [{}, {"cursor": "c"}, {"cursor": 1}, {"extra": [1, {"a": None}]}]


@functools.cache
def method_params(method: str) -> st.SearchStrategy[dict[str, Any]]:
    """Plausible params for ``method``, some with a wrong type in a member."""
    if method.startswith("tasks/"):
        return st.sampled_from(_TASK_PARAMS)
    return st.sampled_from(PARAMS.get(method, _DEFAULT_PARAMS))


META_KINDS = st.sampled_from(["good", "good", "bad", "legacy", "none", "junk"])
_BOOLEANS = st.booleans()


@st.composite
def request_params(draw: st.DrawFn, method: str, meta: str | None = None) -> dict[str, Any] | None:
    """``params`` for a request: method params plus a ``_meta`` of kind ``meta``."""
    kind = meta or draw(META_KINDS)
    params = dict(draw(method_params(method)))
    if kind != "none":
        params["_meta"] = draw(META_STRATEGIES[kind])
    if not params and draw(_BOOLEANS):
        return None
    return params


def request(
    request_id: Any, method: str, params: Mapping[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    obj: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        obj["params"] = params
    obj.update(extra)
    return obj


def notification(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        obj["params"] = params
    return obj


def initialize(request_id: Any, version: str = "2025-06-18", capabilities: Any = None) -> dict[str, Any]:
    return request(
        request_id,
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {} if capabilities is None else capabilities,
            "clientInfo": {"name": "fuzz", "version": "1"},
        },
    )


# ----------------------------------------------------------------------------
# Near-valid JSON-RPC objects
# ----------------------------------------------------------------------------


# Strategies are built once, here: building them inside a composite costs more
# than drawing from them.
_MESSAGE_KINDS = st.sampled_from(["request", "request", "request", "notification", "response", "error"])
_METHODS = st.sampled_from(ALL_METHODS)
_NOTIFICATIONS = st.sampled_from(
    [
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/roots/list_changed",
        "notifications/unknown",
    ]
)
_NOTIFICATION_PARAMS = (
    st.fixed_dictionaries({}, optional={"requestId": good_ids | junk, "reason": short_text | junk})
    | st.none()
)
_RESPONSE_IDS = good_ids | st.integers(min_value=-5, max_value=-1)
_RESULTS = st.dictionaries(short_text, junk, max_size=3)
_ERRORS = (
    st.fixed_dictionaries({"code": st.integers(), "message": short_text}, optional={"data": junk}) | junk
)


@st.composite
def valid_messages(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(_MESSAGE_KINDS)
    if kind == "request":
        method = draw(_METHODS)
        return request(draw(good_ids), method, draw(request_params(method)))
    if kind == "notification":
        return notification(draw(_NOTIFICATIONS), draw(_NOTIFICATION_PARAMS))
    response_id = draw(_RESPONSE_IDS)
    if kind == "response":
        return {"jsonrpc": "2.0", "id": response_id, "result": draw(_RESULTS)}
    return {"jsonrpc": "2.0", "id": response_id, "error": draw(_ERRORS)}


# Names that differ from an envelope member only in case (and one that folds to it).
CASE_VARIANTS = {
    "jsonrpc": ["JSONRPC", "jsonRPC", "Jsonrpc"],
    "id": ["ID", "Id", "iD"],
    "method": ["Method", "METHOD", "metHod"],
    "params": ["Params", "PARAMS", "paramſ"],
    "result": ["Result", "RESULT"],
    "error": ["Error", "ERROR"],
}


def _mutate(obj: dict[str, Any], how: str, key: str, value: Any, variant: int) -> dict[str, Any]:
    obj = dict(obj)
    if how == "drop":
        obj.pop(key, None)
    elif how == "set":
        obj[key] = value
    elif how == "rename":
        names = CASE_VARIANTS[key]
        if key in obj:
            obj[names[variant % len(names)]] = obj.pop(key)
    elif how == "shadow":
        names = CASE_VARIANTS[key]
        obj[names[variant % len(names)]] = value
    elif how == "extra":
        obj[f"x-{variant}"] = value
    return obj


_MUTATIONS = st.integers(min_value=0, max_value=2)
_HOW = st.sampled_from(["drop", "set", "rename", "shadow", "extra"])
_KEYS = st.sampled_from(list(CASE_VARIANTS))
_VARIANTS = st.integers(min_value=0, max_value=5)
_VALUES = {
    "id": any_ids,
    "jsonrpc": st.sampled_from(["2.0", "1.0", "2", 2.0, 2, None, "2.0 "]) | junk,
    "method": st.sampled_from([*ALL_METHODS, ""]) | junk,
}


@st.composite
def near_valid_messages(draw: st.DrawFn) -> Any:
    """A valid message with up to two things wrong with it (sometimes none)."""
    obj = draw(valid_messages())
    for _ in range(draw(_MUTATIONS)):
        how, key = draw(_HOW), draw(_KEYS)
        value = draw(_VALUES.get(key, junk_or_deep))
        obj = _mutate(obj, how, key, value, draw(_VARIANTS))
    return obj


near_valid_or_batch = near_valid_messages() | st.lists(near_valid_messages(), max_size=4)


def cut(data: bytes, points: list[int]) -> list[bytes]:
    """``data`` split at ``points``, without empty chunks (``b""`` would mean end of input)."""
    bounds = [0, *sorted(p for p in points if 0 < p < len(data)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def to_line(obj: Any, *, ascii_only: bool = True) -> bytes:
    """Serialise as a peer would, with Python's json (so huge integers stay integers)."""
    text = json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":"))
    return text.encode("utf-8", "surrogatepass") + b"\n"


# ----------------------------------------------------------------------------
# Output checks shared by the stdio and session tests
# ----------------------------------------------------------------------------


def id_key(value: Any) -> tuple[str, Any] | None:
    """A request id as a dict key that keeps 1, "1" and True apart; None if not an id."""
    if type(value) is int or type(value) is str:
        return (type(value).__name__, value)
    return None


def decode_payload(payload: bytes) -> Any:
    """A ``Send`` payload must be exactly one line of JSON (stdio framing)."""
    assert payload.endswith(b"\n"), payload
    assert payload.count(b"\n") == 1, payload
    return orjson.loads(payload)


def is_response(obj: Any) -> bool:
    return isinstance(obj, dict) and ("result" in obj or "error" in obj) and "method" not in obj


def check_envelope(obj: Any, *, allowed_codes: set[int] | None = None) -> None:
    """Every message the server writes is a well-formed JSON-RPC 2.0 message."""
    assert isinstance(obj, dict), obj
    assert obj.get("jsonrpc") == "2.0", obj
    if "method" in obj:
        assert isinstance(obj["method"], str) and obj["method"], obj
        assert "result" not in obj and "error" not in obj, obj
        if "id" in obj:  # a server-to-client request
            assert type(obj["id"]) is int and obj["id"] < 0, f"server request ids are negative: {obj}"
        return
    assert ("result" in obj) != ("error" in obj), obj
    assert "id" in obj, obj
    if "result" in obj:
        assert isinstance(obj["result"], dict), obj
        assert id_key(obj["id"]) is not None, obj
        return
    error = obj["error"]
    assert isinstance(error, dict), obj
    assert type(error.get("code")) is int, obj
    assert isinstance(error.get("message"), str), obj
    codes = (JSONRPC_CODES | MCP_CODES) if allowed_codes is None else allowed_codes
    assert error["code"] in codes, f"not a JSON-RPC/MCP error code: {obj}"
    if obj["id"] is None:
        # Only a message whose id could not be read (or must not be used) is answered with null.
        assert error["code"] in (PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS), obj
    else:
        assert id_key(obj["id"]) is not None, obj
