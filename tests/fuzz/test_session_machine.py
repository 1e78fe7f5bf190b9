"""A model-based state machine over ``ServerSession``: every input, in every state.

The machine plays both the peer (legacy ``initialize`` with any
``protocolVersion``, ``notifications/initialized``, legacy requests,
2026-07-28 requests with good, bad or missing ``_meta``, cancellations for live
and dead ids, replies to server requests, batches, invalid messages, end of
input) and the application (``respond``/``respond_error``/``discard``/
``progress``/``log`` for live and dead tokens, list-changed and
resource-updated notifications, server requests), with a fake clock for the
drain timer.  Beside the session runs a model of what the module docstring of
``mcpx.core.server_session`` promises; after every step the session's output must be
exactly what the model predicts.  In particular:

* every (state, input) pair is either legal or raises ``LocalProtocolError``
  with the state unchanged and nothing queued;
* every request gets exactly one final response, unless it was cancelled (then
  none); a reply never carries the id of a request that is still running;
* results for 2026-07-28 requests carry ``resultType``; legacy ones do not
  (except the final result of ``subscriptions/listen``, a 2026-07-28 method
  answered "in the shape of the revision that defines it");
* ``initialize``, ``ping``, ``logging/setLevel``, ``resources/subscribe`` and
  ``resources/unsubscribe`` sent as 2026-07-28 are ``-32601``, and never for a
  legacy peer;
* ``initialize`` with any ``protocolVersion`` string is answered with a legacy
  revision, never an error;
* server-initiated request ids are negative;
* after end of input and the drain timer a ``Close`` appears, and nothing is
  sent after it.

Messages go through the same decoding the stdio transport uses
(``json.dumps`` then ``orjson.loads``) before ``receive_json``, so the session
sees only what a peer could really deliver.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from mcpx.core import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    CancelRequest,
    Close,
    EndStream,
    HandleRequest,
    LocalProtocolError,
    PeerReplied,
    Revision,
    Send,
    ServerSession,
    Subscribed,
    Trace,
)
from mcpx.core.revisions import LOG_LEVELS, METHODS, Sender, method_rule
from mcpx.core.server_session import ConnectionState

from ._examples import tick
from ._mcp import (
    ALL_METHODS,
    APP_ERROR_CODES,
    CC,
    DISPATCHED_METHODS,
    JSONRPC_CODES,
    LEGACY_STRINGS,
    LL,
    MCP_CODES,
    MODERN,
    PV,
    SERVER_METHODS,
    SUB,
    TASKS_EXT,
    check_envelope,
    client_capabilities,
    decode_payload,
    id_key,
    is_response,
    junk,
    make_config,
    request_params,
    version_strings,
)

NEW, INIT, READY, CLOSING, CLOSED = (
    ConnectionState.NEW,
    ConnectionState.INITIALIZING,
    ConnectionState.READY,
    ConnectionState.CLOSING,
    ConnectionState.CLOSED,
)
OPEN = (NEW, INIT, READY)
R24 = Revision.V2024_11_05
R26 = Revision.V2026_07_28
DRAIN = 2.0
SERVER_INFO = {"name": "t", "version": "1"}
CAPABILITIES = {
    "tools": {"listChanged": True},
    "prompts": {},
    "resources": {"subscribe": True},
    "logging": {},
    "completions": {},
}
REMOVED_IN_MODERN = {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
EXT_METHODS = {"tasks/get", "tasks/update", "tasks/cancel", "notifications/tasks"}
# MCP-specific codes: (first revision, removing revision), spec/revisions.md "Error codes".
MCP_CODE_SPANS = {
    -32002: (R24, R26),
    -32042: (Revision.V2025_11_25, R26),
    -32020: (R26, None),
    -32021: (R26, None),
    -32022: (R26, None),
}
LEVEL_RANK = {level: i for i, level in enumerate(LOG_LEVELS)}
URIS = ["file:///a", "file:///b"]
ALL_CODES = JSONRPC_CODES | MCP_CODES | set(APP_ERROR_CODES)  # the application may use its own codes

# Strategies drawn inside rules, built once.
LEGACY_VERSIONS = st.sampled_from(LEGACY_STRINGS)
INIT_ID_KINDS = st.sampled_from(["fresh", "fresh", "live", "dead", "edge"])
BATCH_ID_KINDS = st.sampled_from(["fresh", "fresh", "live", "dead"])
FRESH_OR_LIVE = st.sampled_from(["fresh", "live"])
SOME_METHOD = st.sampled_from(DISPATCHED_METHODS) | st.sampled_from(ALL_METHODS)
BATCH_META = st.sampled_from(["legacy", "none", "good"])
STRANGER_IDS = st.integers(min_value=-50, max_value=50) | st.just("-1")
NEVER_TOKENS = st.integers(min_value=10_000, max_value=10_003)
INVALID = (
    "jsonrpc",
    "params",
    "case",
    "float-id",
    "no-method",
    "not-object",
    "huge-id",
)
INVALID_KINDS = st.sampled_from(INVALID)

APP_RESULTS = [
    {},
    {"resultType": "complete"},
    {"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "resultType": "complete", "ttlMs": 5},
    {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"a": 1}, "resultType": "complete"},
    {"contents": [], "cacheScope": "private", "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}},
]


_LONE_SURROGATE = re.compile(
    r"\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f][0-9a-f]{2})|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2}"
)


def wire(obj: Any) -> Any:
    """``obj`` as the stdio transport would hand it over: written by a peer, read by orjson."""
    text = json.dumps(obj, separators=(",", ":"))
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # a lone surrogate: orjson refuses the whole line
        # Only lone ones: a pair (any character beyond the BMP, escaped) is valid JSON.
        return orjson.loads(_LONE_SURROGATE.sub("?", text))


def downgraded_code(code: int, rev: Revision) -> int:
    span = MCP_CODE_SPANS.get(code)
    if span is None:
        return code
    since, removed_in = span
    return code if since <= rev and (removed_in is None or rev < removed_in) else INVALID_PARAMS


def is_level(value: Any) -> bool:
    return isinstance(value, str) and value in LEVEL_RANK


# ----------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------


@dataclass
class Expect:
    """What one request (or invalid batch item) should earn."""

    kind: str  # "error", "result", "dispatch", "listen"
    reply_id: Any = None  # the id the reply carries (None: JSON null)
    codes: frozenset[int] = frozenset()
    detail: str = ""  # "initialize", "ping", "empty", "discover" for results the session builds
    rev: Revision = R24  # the revision the request is judged under
    modern: bool = False
    honoured: dict[str, Any] | None = None  # for a listen: what the acknowledgement says
    effect: tuple[str, Any] | None = None  # a model update once the reply is seen


@dataclass
class Req:
    """One message of the peer that earns a reply: a request or a refused batch item."""

    rid: Any
    method: str
    expect: Expect
    status: str  # "pending", "listen", "done", "answered", "cancelled"
    token: int | None = None
    stream: int | None = None  # the stream its replies go on (known once dispatched or acknowledged)
    batch: Batch | None = None
    progress_token: Any = None
    log_level: str | None = None
    last_progress: float | None = None
    listen: dict[str, Any] | None = None
    final: Expect | None = None  # once answered by the application (or the listen closes)
    responses: int = 0


@dataclass
class Batch:
    members: list[Req] = field(default_factory=list)
    flushed: bool = False

    def complete(self) -> bool:
        return not self.flushed and all(m.status not in ("pending", "listen") for m in self.members)


class SessionMachine(RuleBasedStateMachine):
    """The peer, the application and the clock around one ``ServerSession``, beside a model of it."""

    # -- set-up ------------------------------------------------------------

    @initialize(
        trace=st.booleans(),
        handshake=st.sampled_from([None, None, *LEGACY_STRINGS, "2025-03-26", "2099-01-01"]),
        initialized=st.booleans(),
    )
    def start(self, trace: bool, handshake: str | None, initialized: bool) -> None:
        """A fresh session; most runs start from a finished (or half-finished) initialize."""
        tick()
        self.session = ServerSession(make_config(trace=trace, drain=DRAIN), newline=True, can_push=True)
        self.state = NEW
        self.negotiated: str | None = None
        self.client_caps: dict[str, Any] = {}
        self.log_level: str | None = None
        self.subscriptions: set[str] = set()
        self.reqs: list[Req] = []
        self.batches: list[Batch] = []
        self.by_token: dict[int, Req] = {}
        self.cancelled_tokens: set[int] = set()
        self.dead_tokens: set[int] = set()
        self.server_ids: dict[int, str] = {}
        self.dead_server_ids: set[int] = set()
        self.next_server_id = -1
        self.closed = False
        self.finals: set[int] = set()  # streams that ended
        self.now = 0.0
        self.deadline: float | None = None
        self.counter = 0
        if handshake is not None:
            params = {
                "protocolVersion": handshake,
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            }
            self.send_request({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params})
            if initialized:
                self.peer_initialized()

    # -- helpers: ids --------------------------------------------------------

    def live(self) -> dict[tuple[str, Any], Req]:
        """Requests the session holds by id: dispatched and unanswered, or open listens."""
        return {id_key(r.rid): r for r in self.reqs if r.status in ("pending", "listen")}  # type: ignore[misc]

    def dead_ids(self) -> list[Any]:
        live = self.live()
        return [r.rid for r in self.reqs if id_key(r.rid) is not None and id_key(r.rid) not in live]

    def choose_id(self, data: st.DataObject, kind: str) -> Any:
        live = self.live()
        if kind == "live" and live:
            return data.draw(st.sampled_from(sorted((r.rid for r in live.values()), key=repr)))
        if kind == "dead":
            dead = self.dead_ids()
            if dead:
                return data.draw(st.sampled_from(dead))
        if kind == "edge":
            for value in (2**64 - 1, -(2**63), 0, -1, ""):
                if id_key(value) not in live:
                    return value
        self.counter += 1
        return self.counter if self.counter % 2 else f"r{self.counter}"

    # -- helpers: running a step -----------------------------------------------

    def snapshot(self) -> tuple[Any, ...]:
        s = self.session
        return (s.state, s.negotiated_revision, s.in_flight, s.get_timer())

    def refused(self, call: Any, *args: Any, **kw: Any) -> None:
        """``call`` must raise LocalProtocolError and change nothing."""
        before = self.snapshot()
        with pytest.raises(LocalProtocolError):
            call(*args, **kw)
        assert self.snapshot() == before
        assert self.session.next_actions() == []

    def actions(self) -> list[Any]:
        """Drain the session, checking what holds for every action whatever the step."""
        out: list[Any] = []
        for action in self.session.next_actions():
            if isinstance(action, Trace):
                continue
            assert not self.closed, f"{action!r} after Close"
            if isinstance(action, Close):
                self.closed = True
            if isinstance(action, EndStream):
                assert action.stream not in self.finals, f"{action!r} for a stream that already ended"
                self.finals.add(action.stream)
            if not isinstance(action, Send):
                out.append(action)
                continue
            obj = decode_payload(action.payload)
            if action.stream is not None:
                assert action.stream not in self.finals, f"sent on stream {action.stream} after its end"
                if action.final:
                    self.finals.add(action.stream)
            for item in obj if isinstance(obj, list) else [obj]:
                check_envelope(item, allowed_codes=ALL_CODES)
                assert not isinstance(obj, list) or is_response(item), f"non-reply in a batch: {obj}"
            if isinstance(obj, list) or is_response(obj):
                assert action.final, f"a response not marked final: {obj}"
            out.append((action, obj))
        return out

    def split(self, acts: list[Any]) -> dict[str, list[Any]]:
        kinds: dict[str, list[Any]] = {
            "handle": [],
            "cancel": [],
            "peer": [],
            "close": [],
            "reply": [],
            "batch": [],
            "note": [],
            "request": [],
            "end": [],
            "subscribed": [],
        }
        for action in acts:
            if isinstance(action, Subscribed):  # the application is told, before the answer
                kinds["subscribed"].append(action.uri)
            elif isinstance(action, EndStream):
                kinds["end"].append(action.stream)
            elif isinstance(action, HandleRequest):
                kinds["handle"].append(action)
            elif isinstance(action, CancelRequest):
                kinds["cancel"].append(action)
            elif isinstance(action, PeerReplied):
                kinds["peer"].append(action)
            elif isinstance(action, Close):
                kinds["close"].append(action)
            else:
                send, obj = action
                if isinstance(obj, list):
                    kinds["batch"].append(obj)
                elif is_response(obj):
                    kinds["reply"].append(obj)
                elif "id" in obj:
                    kinds["request"].append(obj)
                else:
                    kinds["note"].append((send, obj))
        return kinds

    # -- the oracle ------------------------------------------------------------

    def predict(self, obj: dict[str, Any], *, in_batch: bool, live: dict[Any, Req]) -> Expect:
        """What the request ``obj`` earns, from the rules in the module docstring."""
        method, rid = obj["method"], obj["id"]
        params = obj.get("params") or {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        running = id_key(rid) in live
        reply_id = None if running else rid
        modern_shaped = PV in meta or CC in meta
        legacy_rev = Revision(self.negotiated) if self.negotiated else R24

        def error(*codes: int, rev: Revision = legacy_rev, modern: bool = False) -> Expect:
            return Expect("error", reply_id, frozenset(codes), rev=rev, modern=modern)

        if method == "initialize" and in_batch:
            return error(INVALID_REQUEST)
        if method == "initialize" and not modern_shaped:
            if running or self.state is not NEW:
                return error(INVALID_REQUEST)
            version = params.get("protocolVersion")
            if not isinstance(version, str):
                return error(INVALID_PARAMS)
            chosen = version if version in LEGACY_STRINGS else LEGACY_STRINGS[-1]
            return Expect("result", rid, detail="initialize", effect=("initialize", (chosen, params)))
        if running:
            return error(INVALID_REQUEST)

        if modern_shaped or method == "server/discover":
            version, caps, level = meta.get(PV), meta.get(CC), meta.get(LL)
            if not isinstance(version, str) or not isinstance(caps, dict):
                return error(INVALID_PARAMS, rev=R26, modern=True)
            if version != MODERN:
                return error(-32022, rev=R26, modern=True)
            if level is not None and not is_level(level):
                return error(INVALID_PARAMS, rev=R26, modern=True)
            extensions = caps.get("extensions")
            ext_ok = isinstance(extensions, dict) and TASKS_EXT in extensions
            rule = method_rule(method, sender=Sender.CLIENT)
            if method in EXT_METHODS:
                if method == "notifications/tasks":
                    # The extension's notification, sent as a request: no such method.
                    return error(METHOD_NOT_FOUND, rev=R26, modern=True)
                if not ext_ok:
                    return error(-32021, rev=R26, modern=True)
                return error(METHOD_NOT_FOUND, rev=R26, modern=True)  # this server keeps no tasks
            if rule is None or rule.removed_for(R26):
                return error(METHOD_NOT_FOUND, rev=R26, modern=True)
            if method == "server/discover":
                return Expect("result", rid, detail="discover", rev=R26, modern=True)
            if method == "subscriptions/listen":
                return self.predict_listen(rid, params, caps, R26, modern=True)
            return Expect("dispatch", rid, rev=R26, modern=True)

        rule = method_rule(method, sender=Sender.CLIENT)
        if rule is None:
            return error(METHOD_NOT_FOUND)
        assert not rule.removed_for(legacy_rev)
        if method == "ping":
            return Expect("result", rid, detail="empty", rev=legacy_rev)
        if method == "logging/setLevel":
            level = params.get("level")
            if not is_level(level):
                return error(INVALID_PARAMS)
            return Expect("result", rid, detail="empty", rev=legacy_rev, effect=("level", level))
        if method in ("resources/subscribe", "resources/unsubscribe"):
            uri = params.get("uri")
            if not isinstance(uri, str):
                return error(INVALID_PARAMS)
            return Expect("result", rid, detail="empty", rev=legacy_rev, effect=(method, uri))
        if method == "subscriptions/listen":
            return self.predict_listen(rid, params, self.client_caps, legacy_rev, modern=False)
        if method.startswith("tasks/"):
            return error(METHOD_NOT_FOUND)  # this server keeps no tasks (no TaskStore)
        return Expect("dispatch", rid, rev=legacy_rev)

    def predict_listen(
        self, rid: Any, params: dict[str, Any], caps: Any, rev: Revision, *, modern: bool
    ) -> Expect:
        wanted = params.get("notifications", {})
        code = -32021 if modern else INVALID_PARAMS  # a legacy peer cannot receive -32021
        if not isinstance(wanted, dict):
            return Expect("error", rid, frozenset({INVALID_PARAMS}), rev=rev, modern=modern)
        extensions = caps.get("extensions") if isinstance(caps, dict) else None
        if "taskIds" in wanted and not (isinstance(extensions, dict) and TASKS_EXT in extensions):
            return Expect("error", rid, frozenset({code}), rev=rev, modern=modern)
        honoured: dict[str, Any] = {}
        if wanted.get("toolsListChanged") is True:  # the only list this server says changes
            honoured["toolsListChanged"] = True
        uris = wanted.get("resourceSubscriptions")
        if isinstance(uris, list):
            honoured["resourceSubscriptions"] = [u for u in uris if isinstance(u, str)]
        if "taskIds" in wanted:
            honoured["taskIds"] = []
        return Expect("listen", rid, rev=rev, modern=modern, honoured=honoured)

    # -- checking replies ----------------------------------------------------------

    def check_reply(self, req: Req, reply: dict[str, Any], expect: Expect) -> None:
        """``reply`` is the one final answer to ``req``; check it against ``expect``."""
        req.responses += 1
        assert req.responses == 1, f"request {req.rid!r} answered twice: {reply}"
        assert reply["id"] == expect.reply_id and type(reply["id"]) is type(expect.reply_id), (
            f"reply id {reply['id']!r}, expected {expect.reply_id!r} ({req.method}): {reply}"
        )
        if expect.kind == "error":
            assert "error" in reply, f"expected an error {sorted(expect.codes)} for {req.method}: {reply}"
            code = reply["error"]["code"]
            assert code in expect.codes, (
                f"code {code}, expected {sorted(expect.codes)} for {req.method}: {reply}"
            )
            if code == METHOD_NOT_FOUND and req.method in REMOVED_IN_MODERN:
                assert expect.modern, f"-32601 for {req.method} from a legacy peer: {reply}"
            if code == -32022 and expect is req.expect:  # refused by the session, not the application
                assert reply["error"]["data"]["supported"] == [MODERN], reply
            return
        assert "result" in reply, f"expected a result for {req.method}: {reply}"
        result = reply["result"]
        if expect.modern:
            assert "resultType" in result, f"a 2026-07-28 result without resultType: {reply}"
        elif req.method != "subscriptions/listen":
            assert "resultType" not in result, f"resultType in a result for a legacy peer: {reply}"
        if expect.detail == "initialize":
            chosen = expect.effect[1][0]  # type: ignore[index]
            assert result["protocolVersion"] == chosen, reply
            assert result["protocolVersion"] in LEGACY_STRINGS
            assert result["capabilities"] == self.session.capabilities_for(Revision(chosen))
            assert result["serverInfo"] == SERVER_INFO
        elif expect.detail == "empty":
            assert result == {}, reply
        elif expect.detail == "discover":
            assert result["supportedVersions"] == [MODERN], reply
        elif expect.detail == "listen":
            assert result["_meta"][SUB] == req.rid, reply

    def apply_effect(self, expect: Expect) -> None:
        if expect.effect is None:
            return
        what, value = expect.effect
        if what == "initialize":
            chosen, params = value
            self.negotiated = chosen
            caps = params.get("capabilities")
            self.client_caps = caps if isinstance(caps, dict) else {}
            self.state = INIT
        elif what == "level":
            self.log_level = value
        elif what == "resources/subscribe":
            self.subscriptions.add(value)
        elif what == "resources/unsubscribe":
            self.subscriptions.discard(value)

    def check_dispatch(self, action: HandleRequest, obj: dict[str, Any], expect: Expect) -> None:
        params = obj.get("params") or {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        ctx = action.context
        assert action.method == obj["method"] and ctx.method == obj["method"]
        assert dict(action.params) == params
        assert ctx.token == action.token
        assert ctx.request_id == obj["id"] and type(ctx.request_id) is type(obj["id"])
        assert ctx.revision == expect.rev, (ctx.revision, expect.rev)
        pt = meta.get("progressToken")
        assert ctx.progress_token == (pt if id_key(pt) is not None else None)
        if expect.modern:
            assert dict(ctx.client_capabilities) == meta[CC]
            assert ctx.log_level == meta.get(LL)
        else:
            assert dict(ctx.client_capabilities) == self.client_caps
            assert ctx.log_level == self.log_level
        assert action.token not in self.by_token and action.token not in self.dead_tokens

    def new_req(self, obj: dict[str, Any], expect: Expect, batch: Batch | None) -> Req:
        params = obj.get("params") or {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        pt = meta.get("progressToken")
        req = Req(
            rid=obj.get("id"),
            method=str(obj.get("method")),
            expect=expect,
            status="done",
            batch=batch,
            progress_token=pt if id_key(pt) is not None else None,
            log_level=meta.get(LL) if expect.modern else None,
        )
        self.reqs.append(req)
        if batch is not None:
            batch.members.append(req)
        return req

    def settle_batches(self, kinds: dict[str, list[Any]]) -> None:
        """Every batch that is complete now must have been sent, in one array, exactly once."""
        payloads = list(kinds["batch"])
        for batch in self.batches:
            if not batch.complete():
                continue
            batch.flushed = True
            owed = [m for m in batch.members if m.status == "done"]
            if not owed:
                continue
            keys = sorted(repr(m.final.reply_id if m.final else m.expect.reply_id) for m in owed)
            match = [p for p in payloads if sorted(repr(r["id"]) for r in p) == keys]
            assert match, f"batch complete: expected one reply array with ids {keys}, got {payloads}"
            payload = match[0]
            payloads.remove(payload)
            pool = list(owed)
            for reply in payload:
                candidates = [m for m in pool if repr((m.final or m.expect).reply_id) == repr(reply["id"])]
                member = candidates[0]
                pool.remove(member)
                self.check_reply(member, reply, member.final or member.expect)
                member.status = "answered"
        assert not payloads, f"a batch reply nobody was owed: {payloads}"

    # ------------------------------------------------------------------------
    # Peer input
    # ------------------------------------------------------------------------

    def peer_input(self, obj: Any) -> bool:
        """Feed ``obj``; returns False when the input was (rightly) refused after end of input."""
        if self.state not in OPEN:
            self.refused(self.session.receive_json, obj, now=self.now)
            return False
        self.session.receive_json(obj, now=self.now)
        return True

    def send_request(self, obj: dict[str, Any]) -> None:
        obj = wire(obj)
        if self.state not in OPEN:
            self.refused(self.session.receive_json, obj, now=self.now)
            return
        expect = self.predict(obj, in_batch=False, live=self.live())
        self.session.receive_json(obj, now=self.now)
        kinds = self.split(self.actions())
        assert not kinds["cancel"] and not kinds["peer"] and not kinds["close"] and not kinds["batch"]
        if kinds["subscribed"]:  # only a subscription, for the URI it names, and only when it succeeds
            assert obj["method"] in ("resources/subscribe", "subscriptions/listen"), kinds["subscribed"]
            assert expect.kind != "error", (obj, kinds["subscribed"])
            if obj["method"] == "resources/subscribe":
                assert kinds["subscribed"] == [obj["params"]["uri"]], (obj, kinds["subscribed"])
        req = self.new_req(obj, expect, None)
        if expect.kind in ("error", "result"):
            assert not kinds["handle"], kinds
            assert len(kinds["reply"]) == 1, f"expected one reply to {obj}: {kinds}"
            self.check_reply(req, kinds["reply"][0], expect)
            req.status = "answered"
            self.apply_effect(expect)
            assert not kinds["note"], kinds
        elif expect.kind == "dispatch":
            assert not kinds["reply"], f"{obj} should go to the application: {kinds}"
            assert len(kinds["handle"]) == 1, kinds
            self.dispatched(req, kinds["handle"][0], obj, expect)
        else:
            assert not kinds["reply"] and not kinds["handle"], kinds
            self.listening(req, kinds["note"], expect)

    def dispatched(self, req: Req, action: HandleRequest, obj: dict[str, Any], expect: Expect) -> None:
        self.check_dispatch(action, obj, expect)
        req.status = "pending"
        req.token = action.token
        req.stream = action.token if req.batch is None else None
        self.by_token[action.token] = req

    def listening(self, req: Req, notes: list[Any], expect: Expect) -> None:
        acks = [n for _, n in notes if n["method"] == "notifications/subscriptions/acknowledged"]
        assert len(acks) == 1 and len(notes) == 1, f"one acknowledgement for listen {req.rid!r}: {notes}"
        assert acks[0]["params"] == {"notifications": expect.honoured, "_meta": {SUB: req.rid}}, acks
        req.stream = notes[0][0].stream if req.batch is None else None
        req.status = "listen"
        req.listen = expect.honoured

    @rule(data=st.data(), version=version_strings | junk, caps=client_capabilities | junk)
    def peer_initialize(self, data: st.DataObject, version: Any, caps: Any) -> None:
        version = data.draw(LEGACY_VERSIONS | st.just(version), label="version")
        rid = self.choose_id(data, data.draw(INIT_ID_KINDS))
        params = {
            "protocolVersion": version,
            "capabilities": caps,
            "clientInfo": {"name": "c", "version": "1"},
        }
        self.send_request({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params})

    @rule(
        data=st.data(),
        method=SOME_METHOD,
        meta=st.sampled_from(["good", "good", "bad", "legacy", "none", "junk"]),
        id_kind=st.sampled_from(["fresh", "fresh", "fresh", "live", "dead", "edge"]),
        then=st.sampled_from(["hold", "hold", "answer", "error"]),
    )
    def peer_request(self, data: st.DataObject, method: str, meta: str, id_kind: str, then: str) -> None:
        """Any request; if the application gets it, it may answer at once or hold it."""
        params = data.draw(request_params(method, meta), label="params")
        rid = self.choose_id(data, id_kind)
        obj: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            obj["params"] = params
        self.send_request(obj)
        req = self.reqs[-1] if self.reqs else None
        if then != "hold" and req is not None and req.status == "pending" and req.rid == rid:
            self.answer(
                req, APP_RESULTS[2] if then == "answer" else None, None if then == "answer" else -32603
            )

    @rule(
        data=st.data(),
        method=st.sampled_from(sorted(REMOVED_IN_MODERN)),
        caps=client_capabilities,
    )
    def peer_removed_method_as_modern(self, data: st.DataObject, method: str, caps: dict[str, Any]) -> None:
        """The methods 2026-07-28 removed, sent with a good ``_meta``: always -32601."""
        rid = self.choose_id(data, "fresh")
        params = {
            "_meta": {PV: MODERN, CC: caps},
            "level": "info",
            "uri": "file:///a",
            "protocolVersion": MODERN,
        }
        self.send_request({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})

    @rule()
    def peer_initialized(self) -> None:
        if not self.peer_input(wire({"jsonrpc": "2.0", "method": "notifications/initialized"})):
            return
        assert self.split(self.actions()) == self.split([])
        if self.state is INIT:
            self.state = READY

    @rule(
        data=st.data(),
        aim=st.sampled_from(["live", "live", "dead", "junk"]),
        reason=st.none() | st.just("stop") | junk,
    )
    def peer_cancel(self, data: st.DataObject, aim: str, reason: Any) -> None:
        live = self.live()
        if aim == "live" and live:
            request_id = data.draw(st.sampled_from(sorted(live, key=repr)))[1]
        elif aim == "dead" and self.dead_ids():
            request_id = data.draw(st.sampled_from(self.dead_ids()))
        else:
            request_id = data.draw(junk)
        params = {"requestId": request_id, "reason": reason}
        obj = wire({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
        if not self.peer_input(obj):
            return
        kinds = self.split(self.actions())
        self.cancel_in_model(obj["params"]["requestId"], obj["params"]["reason"], kinds)
        assert not kinds["cancel"], f"cancelled something for an id not running: {kinds['cancel']}"
        assert not kinds["end"], f"ended a stream for an id not running: {kinds['end']}"
        self.settle_batches(kinds)
        assert not kinds["reply"] and not kinds["handle"] and not kinds["note"] and not kinds["close"]

    def cancel_in_model(self, request_id: Any, reason: Any, kinds: dict[str, list[Any]]) -> None:
        key = id_key(request_id)
        req = self.live().get(key) if key is not None else None
        if req is None:
            return  # late or unknown: ignored (the caller checks that no CancelRequest is left over)
        self.cancel_req(req, reason if isinstance(reason, str) else None, kinds)

    def cancel_req(self, req: Req, reason: str | bool | None, kinds: dict[str, list[Any]]) -> None:
        """``req`` is cancelled: its handler is told (``reason`` False: any reason), its stream ends."""
        if req.status == "pending":
            cancels = [c for c in kinds["cancel"] if c.token == req.token]
            assert len(cancels) == 1, (req, kinds["cancel"])
            kinds["cancel"].remove(cancels[0])
            assert reason is False or cancels[0].reason == reason, cancels
            self.cancelled_tokens.add(req.token)  # type: ignore[arg-type]
            del self.by_token[req.token]  # type: ignore[arg-type]
        if req.batch is None:
            assert req.stream in kinds["end"], f"no EndStream for cancelled {req.rid!r}: {kinds['end']}"
            kinds["end"].remove(req.stream)
        req.status = "cancelled"

    @rule(note=st.sampled_from(["notifications/progress", "notifications/roots/list_changed", "x/y"]), p=junk)
    def peer_other_notification(self, note: str, p: Any) -> None:
        obj = wire({"jsonrpc": "2.0", "method": note, "params": {"progressToken": p, "progress": 1}})
        if self.peer_input(obj):
            assert self.split(self.actions()) == self.split([])

    def invalid_message(self, how: str, rid: Any) -> tuple[Any, int, bool]:
        """An invalid message, the code it earns and whether its id is readable."""
        if how == "jsonrpc":
            return {"jsonrpc": "1.0", "id": rid, "method": "ping"}, INVALID_REQUEST, True
        if how == "params":
            return {"jsonrpc": "2.0", "id": rid, "method": "tools/list", "params": [1]}, INVALID_PARAMS, True
        if how == "case":
            return {"jsonrpc": "2.0", "id": rid, "Method": "ping", "method": "ping"}, INVALID_REQUEST, True
        if how == "float-id":
            return {"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, INVALID_REQUEST, False
        if how == "no-method":
            return {"jsonrpc": "2.0", "id": rid}, INVALID_REQUEST, True
        if how == "huge-id":
            return {"jsonrpc": "2.0", "id": 2**64, "method": "ping"}, INVALID_REQUEST, False
        return "ping", INVALID_REQUEST, False  # not an object at all

    @rule(data=st.data(), how=INVALID_KINDS, id_kind=st.sampled_from(["fresh", "live", "dead"]))
    def peer_invalid(self, data: st.DataObject, how: str, id_kind: str) -> None:
        obj, code, readable = self.invalid_message(how, self.choose_id(data, id_kind))
        obj = wire(obj)
        live = self.live()
        if not self.peer_input(obj):
            return
        kinds = self.split(self.actions())
        assert len(kinds["reply"]) == 1 and not kinds["handle"], kinds
        reply = kinds["reply"][0]
        assert reply["error"]["code"] == code, reply
        rid = obj["id"] if readable else None
        expected_id = None if id_key(rid) in live else rid
        assert reply["id"] == expected_id, f"reply to an invalid message carries {reply['id']!r}: {reply}"

    @rule(data=st.data(), kind=st.sampled_from(["live", "dead", "stranger"]), error=st.booleans())
    def peer_replies(self, data: st.DataObject, kind: str, error: bool) -> None:
        if kind == "live" and self.server_ids:
            rid = data.draw(st.sampled_from(sorted(self.server_ids)))
        elif kind == "dead" and self.dead_server_ids:
            rid = data.draw(st.sampled_from(sorted(self.dead_server_ids)))
        else:
            rid = data.draw(STRANGER_IDS)
        obj: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
        if error:
            obj["error"] = {"code": -1, "message": "no"}
        else:
            obj["result"] = {"ok": True}
        if not self.peer_input(wire(obj)):
            return
        kinds = self.split(self.actions())
        if rid in self.server_ids:
            assert len(kinds["peer"]) == 1 and kinds["peer"][0].token == rid, kinds
            assert (kinds["peer"][0].error is not None) == error
            del self.server_ids[rid]
            self.dead_server_ids.add(rid)
        else:
            assert not kinds["peer"], f"PeerReplied for an id the server never sent: {kinds['peer']}"
        assert not kinds["reply"] and not kinds["note"] and not kinds["handle"]

    @rule(
        data=st.data(),
        items=st.lists(
            st.sampled_from(
                ["request", "request", "request", "cancel", "initialized", "invalid", "initialize"]
            ),
            max_size=5,
        ),
    )
    def peer_batch(self, data: st.DataObject, items: list[str]) -> None:
        """A JSON-RPC batch: read on 2025-03-26 connections only."""
        objs: list[Any] = []
        for item in items:
            if item == "request":
                method = data.draw(SOME_METHOD)
                params = data.draw(request_params(method, data.draw(BATCH_META)))
                rid = self.choose_id(data, data.draw(BATCH_ID_KINDS))
                # Ids already used in this batch count as live for the choice above only via the model.
                obj: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
                if params is not None:
                    obj["params"] = params
                objs.append(obj)
            elif item == "cancel":
                candidates = [o["id"] for o in objs if isinstance(o, dict) and "id" in o] + [
                    r.rid for r in self.live().values()
                ]
                target = data.draw(st.sampled_from(candidates)) if candidates else 0
                objs.append(
                    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": target}}
                )
            elif item == "initialized":
                objs.append({"jsonrpc": "2.0", "method": "notifications/initialized"})
            elif item == "invalid":
                how = data.draw(INVALID_KINDS)
                objs.append(self.invalid_message(how, self.choose_id(data, data.draw(FRESH_OR_LIVE)))[0])
            else:
                objs.append(
                    {
                        "jsonrpc": "2.0",
                        "id": self.choose_id(data, data.draw(FRESH_OR_LIVE)),
                        "method": "initialize",
                    }
                )
        objs = wire(objs)
        live = self.live()
        if not self.peer_input(objs):
            return
        kinds = self.split(self.actions())
        if self.negotiated != "2025-03-26" or not objs:
            assert len(kinds["reply"]) == 1 and not kinds["batch"] and not kinds["handle"], kinds
            assert kinds["reply"][0]["id"] is None and kinds["reply"][0]["error"]["code"] == INVALID_REQUEST
            return
        batch = Batch()
        self.batches.append(batch)
        # First pass, as the session reads a batch: items that are not messages, and initialize.
        members: list[tuple[dict[str, Any], Req]] = []
        messages: list[Any] = []
        for item in objs:
            if (
                not isinstance(item, dict)
                or "method" not in item
                or "Method" in item
                or item.get("jsonrpc") != "2.0"
            ):
                how_code = INVALID_REQUEST
                rid = item.get("id") if isinstance(item, dict) else None
                rid = rid if id_key(rid) is not None and id_key(rid) not in live else None
                self.new_req(
                    {"id": rid, "method": "(invalid)"}, Expect("error", rid, frozenset({how_code})), batch
                )
            elif isinstance(item.get("params", {}), list):
                rid = item.get("id") if id_key(item.get("id")) not in live else None
                self.new_req(
                    {"id": rid, "method": "(invalid)"},
                    Expect("error", rid, frozenset({INVALID_PARAMS})),
                    batch,
                )
            elif "id" in item and id_key(item["id"]) is None:
                self.new_req(
                    {"id": None, "method": "(invalid)"},
                    Expect("error", None, frozenset({INVALID_REQUEST})),
                    batch,
                )
            elif "id" in item and item["method"] == "initialize":
                rid = None if id_key(item["id"]) in live else item["id"]
                self.new_req(item, Expect("error", rid, frozenset({INVALID_REQUEST})), batch)
            else:
                messages.append(item)
        # Second pass: the messages, in order.
        for item in messages:
            if "id" not in item:
                if item["method"] == "notifications/initialized":
                    if self.state is INIT:
                        self.state = READY
                else:
                    self.cancel_in_model(item["params"]["requestId"], None, kinds)
                continue
            expect = self.predict(item, in_batch=True, live=self.live())
            req = self.new_req(item, expect, batch)
            members.append((item, req))
            if expect.kind == "dispatch":
                # In order: an id cancelled and reused within the batch is dispatched twice.
                handles = [h for h in kinds["handle"] if h.context.request_id == item["id"]]
                assert handles, f"{item} should go to the application: {kinds}"
                kinds["handle"].remove(handles[0])
                self.dispatched(req, handles[0], item, expect)
            elif expect.kind == "listen":
                notes = [
                    n for n in kinds["note"] if n[1].get("params", {}).get("_meta", {}).get(SUB) == item["id"]
                ]
                assert notes, f"{item} should be acknowledged: {kinds}"
                kinds["note"].remove(notes[0])
                self.listening(req, notes[:1], expect)
            else:
                self.apply_effect(expect)
        assert not kinds["handle"] and not kinds["note"] and not kinds["reply"], kinds
        assert not kinds["cancel"] and not kinds["end"], kinds
        self.settle_batches(kinds)

    @rule()
    def end_of_input(self) -> None:
        if self.state not in OPEN:
            self.refused(self.session.receive_eof, self.now)
            return
        self.session.receive_eof(self.now)
        self.state = CLOSING
        self.deadline = self.now + DRAIN
        kinds = self.split(self.actions())
        for req in [r for r in self.reqs if r.status == "listen"]:
            req.final = Expect(
                "result", req.rid, detail="listen", rev=req.expect.rev, modern=req.expect.modern
            )
            req.status = "done"
            if req.batch is None:
                replies = [r for r in kinds["reply"] if r["id"] == req.rid]
                assert len(replies) == 1, (req.rid, kinds["reply"])
                kinds["reply"].remove(replies[0])
                self.check_reply(req, replies[0], req.final)
                req.status = "answered"
        assert not kinds["reply"], kinds["reply"]
        self.settle_batches(kinds)
        self.maybe_closed(kinds)

    def maybe_closed(self, kinds: dict[str, list[Any]]) -> None:
        if self.state is CLOSING and not any(r.status == "pending" for r in self.reqs):
            assert len(kinds["close"]) == 1, f"drained, so Close is due: {kinds}"
            self.state = CLOSED
            self.deadline = None
        else:
            assert not kinds["close"], kinds

    @rule(dt=st.sampled_from([0.0, 0.5, 1.0, 1.999, 2.0, 3.0, 100.0]))
    def clock(self, dt: float) -> None:
        self.now += dt
        self.session.handle_timer(self.now)
        kinds = self.split(self.actions())
        if self.state is CLOSING and self.deadline is not None and self.now >= self.deadline:
            for req in self.pending():
                self.cancel_req(req, False, kinds)
            assert not kinds["cancel"] and not kinds["end"], kinds
            self.settle_batches(kinds)
            assert len(kinds["close"]) == 1, kinds
            self.state = CLOSED
            self.deadline = None
        else:
            assert not any(kinds.values()), kinds

    @rule()
    def transport_terminates(self) -> None:
        """``terminate()`` (HTTP DELETE, a lost SSE stream): everything cancelled, then Close."""
        if self.state is CLOSED:
            self.refused(self.session.terminate)
            return
        self.session.terminate()
        kinds = self.split(self.actions())
        for req in [r for r in self.reqs if r.status in ("pending", "listen")]:
            self.cancel_req(req, False, kinds)
        assert not kinds["cancel"] and not kinds["end"] and not kinds["reply"] and not kinds["note"], kinds
        self.settle_batches(kinds)
        assert len(kinds["close"]) == 1, kinds
        self.state = CLOSED
        self.deadline = None

    @rule(data=st.data(), which=st.sampled_from(["live", "live", "stranger"]))
    def transport_abandons_a_stream(self, data: st.DataObject, which: str) -> None:
        """``abandon(stream)``: the request whose replies go on that stream is cancelled."""
        known = [r for r in self.reqs if r.status in ("pending", "listen") and r.stream is not None]
        req = data.draw(st.sampled_from(known)) if known and which == "live" else None
        stream = req.stream if req is not None else 100_000
        assert stream is not None
        self.session.abandon(stream)
        kinds = self.split(self.actions())
        if req is not None:
            self.cancel_req(req, False, kinds)
        assert not kinds["cancel"] and not kinds["end"] and not kinds["reply"] and not kinds["note"], kinds
        self.settle_batches(kinds)
        self.maybe_closed(kinds)

    # ------------------------------------------------------------------------
    # The application
    # ------------------------------------------------------------------------

    def pending(self) -> list[Req]:
        return [r for r in self.reqs if r.status == "pending"]

    def answer(self, req: Req, result: dict[str, Any] | None, code: int | None) -> None:
        """The application answers ``req`` with ``result`` or, given ``code``, an error."""
        token = req.token
        assert token is not None
        if code is None:
            self.session.respond(token, result or {})
            req.final = Expect("result", req.rid, rev=req.expect.rev, modern=req.expect.modern)
        else:
            self.session.respond_error(token, code, "no", {"why": 1})
            codes = frozenset({downgraded_code(code, req.expect.rev)})
            req.final = Expect("error", req.rid, codes, rev=req.expect.rev, modern=req.expect.modern)
        req.status = "done"
        del self.by_token[token]
        self.dead_tokens.add(token)
        kinds = self.split(self.actions())
        if req.batch is None:
            assert len(kinds["reply"]) == 1, kinds
            self.check_reply(req, kinds["reply"][0], req.final)
            req.status = "answered"
        else:
            assert not kinds["reply"], kinds
        self.settle_batches(kinds)
        self.maybe_closed(kinds)

    @precondition(lambda self: any(r.status == "pending" for r in self.reqs))
    @rule(data=st.data(), result=st.sampled_from(APP_RESULTS))
    def app_answers(self, data: st.DataObject, result: dict[str, Any]) -> None:
        self.answer(data.draw(st.sampled_from(self.pending())), result, None)

    @precondition(lambda self: any(r.status == "pending" for r in self.reqs))
    @rule(data=st.data(), code=st.sampled_from(APP_ERROR_CODES))
    def app_answers_with_an_error(self, data: st.DataObject, code: int) -> None:
        self.answer(data.draw(st.sampled_from(self.pending())), None, code)

    @rule(
        data=st.data(),
        which=st.sampled_from(["cancelled", "dead", "never"]),
        call=st.sampled_from(["respond", "respond_error"]),
    )
    def app_answers_the_wrong_token(self, data: st.DataObject, which: str, call: str) -> None:
        if which == "cancelled" and self.cancelled_tokens:
            token = data.draw(st.sampled_from(sorted(self.cancelled_tokens)))
        elif which == "dead" and self.dead_tokens:
            token = data.draw(st.sampled_from(sorted(self.dead_tokens)))
        else:
            token = data.draw(NEVER_TOKENS)
            which = "never"
        fn = (
            (lambda: self.session.respond(token, {}))
            if call == "respond"
            else (lambda: self.session.respond_error(token, -32603, "x"))
        )
        if which == "cancelled":
            fn()  # what a cancelled handler reports is dropped
            self.cancelled_tokens.discard(token)
            self.dead_tokens.add(token)
            assert self.actions() == []
        else:
            self.refused(fn)

    @rule(data=st.data(), which=st.sampled_from(["cancelled", "pending", "dead"]))
    def app_discards(self, data: st.DataObject, which: str) -> None:
        if which == "cancelled" and self.cancelled_tokens:
            token = data.draw(st.sampled_from(sorted(self.cancelled_tokens)))
            self.session.discard(token)
            self.cancelled_tokens.discard(token)
            self.dead_tokens.add(token)
            assert self.actions() == []
            return
        pool = [r.token for r in self.pending()] if which == "pending" else sorted(self.dead_tokens)
        token = data.draw(st.sampled_from(pool)) if pool else 10_000
        self.refused(self.session.discard, token)

    @rule(
        data=st.data(),
        which=st.sampled_from(["pending", "pending", "dead"]),
        value=st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0, -1.0]),
        total=st.none() | st.just(2.0),
    )
    def app_progress(self, data: st.DataObject, which: str, value: float, total: float | None) -> None:
        pool = self.pending() if which == "pending" else []
        req = data.draw(st.sampled_from(pool)) if pool else None
        token = req.token if req is not None else 10_000 + len(self.dead_tokens)
        if req is None and self.dead_tokens:
            token = data.draw(st.sampled_from(sorted(self.dead_tokens)))
        sent = self.session.progress(token, value, total=total, message="m")  # type: ignore[arg-type]
        expected = (
            req is not None
            and req.progress_token is not None
            and (req.last_progress is None or value > req.last_progress)
        )
        assert sent == expected
        kinds = self.split(self.actions())
        if expected:
            assert req is not None
            req.last_progress = value
            assert len(kinds["note"]) == 1, kinds
            note = kinds["note"][0][1]
            assert note["method"] == "notifications/progress"
            assert note["params"]["progressToken"] == req.progress_token
            assert note["params"]["progress"] == value
        else:
            assert not any(kinds.values()), kinds

    @rule(
        data=st.data(),
        level=st.sampled_from(LOG_LEVELS),
        which=st.sampled_from(["pending", "none", "none", "dead"]),
    )
    def app_logs(self, data: st.DataObject, level: str, which: str) -> None:
        req = None
        token: int | None = None
        if which == "pending" and self.pending():
            req = data.draw(st.sampled_from(self.pending()))
            token = req.token
        elif which == "dead":
            token = data.draw(st.sampled_from(sorted(self.dead_tokens))) if self.dead_tokens else 10_000
        sent = self.session.log(level, {"n": 1}, logger="fuzz", token=token)
        if req is not None and req.expect.modern:
            threshold = req.log_level
        elif req is not None or (token is None and self.negotiated is not None and self.state is not CLOSED):
            threshold = self.log_level
        else:
            threshold = None
        expected = threshold is not None and LEVEL_RANK[level] >= LEVEL_RANK[threshold]
        kinds = self.split(self.actions())
        assert sent == expected, (sent, expected, which, threshold, self.state)
        if expected:
            assert len(kinds["note"]) == 1, kinds
            note = kinds["note"][0][1]
            assert note["method"] == "notifications/message"
            assert note["params"] == {"level": level, "data": {"n": 1}, "logger": "fuzz"}
        else:
            assert not any(kinds.values()), kinds

    @rule()
    def app_log_misuse(self) -> None:
        self.refused(self.session.log, "loud", "x")

    @rule(kind=st.sampled_from(["tools", "prompts", "resources", "tool", ""]))
    def app_list_changed(self, kind: str) -> None:
        if kind not in ("tools", "prompts", "resources"):
            self.refused(self.session.notify_list_changed, kind)
            return
        self.session.notify_list_changed(kind)
        notes = [n for _, n in self.split(self.actions())["note"]]
        expected = []
        if self.state is READY and kind == "tools":  # only tools declares listChanged
            expected.append({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        for req in self.reqs:
            if req.status == "listen" and req.listen and req.listen.get(f"{kind}ListChanged"):
                expected.append(
                    {
                        "jsonrpc": "2.0",
                        "method": f"notifications/{kind}/list_changed",
                        "params": {"_meta": {SUB: req.rid}},
                    }
                )
        assert notes == expected

    @rule(uri=st.sampled_from(URIS))
    def app_resource_updated(self, uri: str) -> None:
        self.session.notify_resource_updated(uri)
        notes = [n for _, n in self.split(self.actions())["note"]]
        expected = []
        if self.state is READY and uri in self.subscriptions:
            expected.append(
                {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
            )
        for req in self.reqs:
            if req.status == "listen" and req.listen and uri in req.listen.get("resourceSubscriptions", []):
                params = {"uri": uri, "_meta": {SUB: req.rid}}
                expected.append(
                    {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": params}
                )
        assert notes == expected

    @rule(method=st.sampled_from([*SERVER_METHODS, "tools/list", "initialize"]))
    def app_sends_request(self, method: str) -> None:
        rules = [
            m for m in METHODS if m.sender is Sender.SERVER and not m.notification and m.method == method
        ]
        legal = (
            self.state is READY
            and self.negotiated is not None
            and any(m.defined_in(Revision(self.negotiated)) for m in rules)
        )
        if not legal:
            self.refused(self.session.send_request, method, {"x": 1})
            return
        rid = self.session.send_request(method, {"x": 1})
        assert type(rid) is int and rid < 0, f"server request id {rid} is not negative"
        assert rid == self.next_server_id
        self.next_server_id -= 1
        kinds = self.split(self.actions())
        assert kinds["request"] == [{"jsonrpc": "2.0", "id": rid, "method": method, "params": {"x": 1}}]
        self.server_ids[rid] = method

    # ------------------------------------------------------------------------
    # Invariants and the ending
    # ------------------------------------------------------------------------

    @invariant()
    def session_agrees_with_the_model(self) -> None:
        s = self.session
        assert s.state is self.state, (s.state, self.state)
        assert (s.negotiated_revision and str(s.negotiated_revision)) == self.negotiated
        assert s.in_flight == sum(r.status in ("pending", "listen") for r in self.reqs), s.in_flight
        assert s.get_timer() == (self.deadline if self.state is CLOSING else None)
        assert self.closed == (self.state is CLOSED)

    def teardown(self) -> None:
        if not hasattr(self, "session") or sys.exc_info()[1] is not None:
            return  # a step already failed: report that, not its consequences
        if self.state in OPEN:
            self.end_of_input()
        if self.state is CLOSING:
            self.clock(DRAIN + 1.0)
        assert self.state is CLOSED and self.closed
        for req in self.reqs:
            if req.status == "cancelled":
                assert req.responses == 0, req
            else:
                assert req.status == "answered" and req.responses == 1, f"never answered: {req}"
        # Nothing more, whatever the application still does.
        for token in sorted(self.cancelled_tokens):
            self.session.respond(token, {})
        assert self.session.log("emergency", "x") is False, "log() after Close says it sent a message"
        self.session.notify_list_changed("tools")
        assert self.session.next_actions() == [], "output after Close"


SessionMachine.TestCase.settings = settings(stateful_step_count=20)
test_session_machine = SessionMachine.TestCase


def test_the_wire_helper_replaces_lone_surrogates_only() -> None:
    """Found by the machine: a character beyond the BMP beside a lone surrogate broke the harness."""
    params = {"requestId": "\U00010000", "reason": ["\ud800", "\udc00x", "\U0001f600\ud83d"]}
    assert wire({"params": params}) == {
        "params": {"requestId": "\U00010000", "reason": ["?", "?x", "\U0001f600?"]}
    }
