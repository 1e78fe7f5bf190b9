"""Questions a call asks its client (``mcpx.core.rounds`` and the session's asking), fuzzed.

Two properties:

* **No mutation of a genuine ``requestState`` is accepted.**  Characters
  replaced, inserted or deleted anywhere (inside and outside the base64url
  alphabet), truncation, appending, the dot swapped, dropped, doubled or moved,
  payload fields edited and re-encoded under the original MAC (call id,
  binding, expiry, round, version, extra fields, JSON type changes), another
  state's MAC or payload spliced in, another key, the genuine state replayed
  for a request with another method or parameters or after its expiry, bodies
  signed with the right key that still do not parse.  Each must raise
  ``StateError`` of the kind that fits; the genuine state must verify.
* **A state machine over a ``ServerSession`` with a ``RoundTable``** and a
  fake clock: legacy and 2026-07-28 calls side by side, the application
  asking 1–3 questions (some the client did not declare), the client answering
  server requests once, twice, late or with errors, 2026-07-28 retries with
  every answer, some, none, extra keys, answers sent ahead on the first
  request, the latest state, an older one, a tampered one, another call's, and
  with other parameters; cancellation (``notifications/cancelled`` for legacy,
  ``abandon(stream)`` for 2026-07-28); clock jumps past the question TTL,
  ``state_ttl`` and ``ask_timeout``; the application finishing, discarding or
  misusing calls.  After every step the session's output must be what the
  model predicts (see ``RoundsMachine``).
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from mcpx.core import (
    Answered,
    CancelRequest,
    EndStream,
    HandleRequest,
    LocalProtocolError,
    PeerReplied,
    Revision,
    Send,
    ServerSession,
    Trace,
)
from mcpx.core.rounds import (
    MRTR_METHODS,
    Question,
    RoundTable,
    StateError,
    binding_of,
    question_refusal,
    required_capability,
)

from ._examples import COUNTS, tick
from ._mcp import make_config
from ._rounds_support import (
    AHEAD,
    ANSWER_VALUES,
    CALL_METHODS,
    CC,
    CHARS,
    CLIENT_CAPS,
    EVERYTHING,
    KEYS,
    LEGACY_VERSIONS,
    MODERN,
    MUTATIONS,
    PV,
    QUESTIONS,
    Case,
    apply,
    call_params,
    cases,
    expected_question_params,
    final_result,
    question,
    shape_kind,
    signed_with,
    wire,
)

# What a peer can put in a JSON string that a server reads (orjson refuses a lone surrogate).
WIRE_CHARS = CHARS.filter(lambda c: c != "\ud800")
MUTATION_LABEL = "requestState mutations (none accepted)"
MUTATIONS_PER_EXAMPLE = 60

# ============================================================================
# 1. Mutations of a genuine requestState
# ============================================================================


@given(
    case=cases(),
    mutations=st.lists(MUTATIONS, min_size=MUTATIONS_PER_EXAMPLE, max_size=MUTATIONS_PER_EXAMPLE),
)
def test_no_mutation_of_a_request_state_is_accepted(case: Case, mutations: list[tuple[Any, ...]]) -> None:
    tick()
    signer, state = case.signer, case.state
    # The genuine state verifies (so every refusal below means something), its
    # MAC is what an independent HMAC computes, and it keeps verifying for a
    # retry whose _meta, inputResponses and requestState differ.
    assert signer.verify(state, binding=case.binding, now=case.now) == case.payload
    assert state == signed_with(case.key, state.split(".")[0])
    retry_params = {**case.params, "_meta": {PV: MODERN}, "inputResponses": {"a": {}}, "requestState": state}
    assert binding_of(case.method, retry_params) == case.binding
    for mutation in mutations:
        attempt = apply(case, mutation)
        if attempt is None:  # the mutation happened to change nothing
            continue
        with pytest.raises(StateError) as refused:
            signer.verify(attempt.state, binding=attempt.binding, now=attempt.now)
        if attempt.kind is not None:
            assert refused.value.kind == attempt.kind, (mutation, attempt.state, refused.value.message)
        COUNTS[MUTATION_LABEL] += 1


# ============================================================================
# 2. The state machine
# ============================================================================

QUESTION_TTL = 120.0
ASK_TIMEOUT = 600.0
KEY = b"fuzz-key-" * 4
R26 = Revision.V2026_07_28
NOT_BACK = "the client did not come back with its answers"
TIMEOUT_ERROR = {"code": -32001, "message": "the client did not answer in time"}
CLIENT_ERRORS = [
    {"code": -1, "message": "User rejected sampling request"},
    {"code": -32603, "message": "boom"},
    {"code": -32601, "message": "Method not found", "data": {"x": 1}},
]
APP_ERROR_CODES = [-32603, 1234, -1]
CLOCK_STEPS = st.sampled_from(
    [1.0, 30.0, QUESTION_TTL - 1, QUESTION_TTL, QUESTION_TTL + 1, 299.0, 300.0, ASK_TIMEOUT, ASK_TIMEOUT + 1]
) | st.integers(min_value=0, max_value=2000).map(float)
RETRY_KINDS = st.sampled_from(
    [
        "all",
        "all",
        "all",
        "some",
        "some",
        "none",
        "older",
        "tampered",
        "other-call",
        "other-params",
        "bad-shape",
    ]
)
# What the -32602 message says for each refusal of a state (its kind).
STATE_REFUSALS = {
    "tampered": "integrity check",
    "malformed": "not a state this server issued",
    "expired": "has expired",
    "foreign": "different request",
    "older": "earlier round",
    "unknown-call": "no longer held",
}


@dataclass
class Ask:
    ask_id: int
    keys: list[str]
    questions: dict[str, Question]
    status: str = "pending"  # pending | answered | dropped (its call ended first)
    answers: dict[str, Any] = field(default_factory=dict)  # answers in hand
    sids: dict[int, str] = field(default_factory=dict)  # legacy: pending server request id -> key
    deadline: float = 0.0  # legacy: the question TTL
    remaining: list[str] = field(default_factory=list)  # 2026-07-28: keys the client still owes


@dataclass
class Call:
    n: int
    era: str  # legacy | modern
    method: str
    params: dict[str, Any]  # without _meta, inputResponses, requestState
    caps: dict[str, Any]
    token: int
    holder: Any  # the request id its final response goes to; None while parked or ended
    stream: int | None  # that request's stream
    status: str = "running"  # running | parked | done | cancelled | gone
    held: dict[str, Any] = field(default_factory=dict)  # answers sent ahead on the first request
    asks: list[Ask] = field(default_factory=list)
    states: list[str] = field(default_factory=list)  # every requestState issued, oldest first
    parked_at: float = 0.0
    round: int = 0

    def pending(self) -> list[Ask]:
        return [a for a in self.asks if a.status == "pending"]


@dataclass
class Sid:
    """A server request the session sent for a question."""

    call: Call
    ask: Ask
    key: str
    status: str = "pending"  # pending | answered | withdrawn | orphaned (its call finished)


class Out:
    """One step's actions, sorted by kind; each expectation takes what it accounts for."""

    def __init__(self) -> None:
        self.replies: list[tuple[dict[str, Any], int | None]] = []
        self.requests: list[tuple[dict[str, Any], int | None]] = []
        self.notes: list[tuple[dict[str, Any], int | None]] = []
        self.answered: list[Answered] = []
        self.cancels: list[CancelRequest] = []
        self.ends: list[EndStream] = []
        self.handles: list[HandleRequest] = []

    def reply(self, rid: Any, stream: int | None) -> dict[str, Any]:
        """The one reply to ``rid``, which must be on ``stream``."""
        matching = [(obj, s) for obj, s in self.replies if obj.get("id") == rid]
        assert len(matching) == 1, f"expected one reply to {rid!r}, got {self.replies}"
        obj, s = matching[0]
        assert s == stream, f"the reply to {rid!r} went to stream {s}, not {stream}"
        self.replies.remove((obj, s))
        return obj

    def answer(self, token: int, ask_id: int) -> Answered:
        matching = [a for a in self.answered if a.ask_id == ask_id]
        assert len(matching) == 1, f"expected one Answered for ask {ask_id}, got {self.answered}"
        assert matching[0].token == token, matching[0]
        self.answered.remove(matching[0])
        return matching[0]

    def cancel(self, token: int, reason: str | None = None) -> None:
        matching = [c for c in self.cancels if c.token == token]
        assert len(matching) == 1, f"expected one CancelRequest for token {token}, got {self.cancels}"
        if reason is not None:
            assert matching[0].reason == reason, matching[0]
        self.cancels.remove(matching[0])

    def end(self, stream: int) -> None:
        assert EndStream(stream=stream) in self.ends, f"expected EndStream({stream}), got {self.ends}"
        self.ends.remove(EndStream(stream=stream))

    def withdrawal(self, sid: int) -> None:
        matching = [
            (obj, s)
            for obj, s in self.notes
            if obj.get("method") == "notifications/cancelled" and obj["params"].get("requestId") == sid
        ]
        assert len(matching) == 1, f"expected the question {sid} withdrawn once, got {self.notes}"
        assert matching[0][1] is None, matching
        self.notes.remove(matching[0])

    def assert_empty(self) -> None:
        left = {
            name: value
            for name, value in vars(self).items()
            if value  # every list must be accounted for
        }
        assert not left, f"unexpected output: {left}"


def legacy_question_count(call: Call) -> int:
    return sum(len(a.sids) for a in call.pending())


class RoundsMachine(RuleBasedStateMachine):
    """A peer (legacy and 2026-07-28), an application and a clock around one session and its RoundTable.

    The model predicts every step's output exactly (``Out`` must be empty after
    the step's expectations took their share).  Beyond that, ``drain`` checks
    what holds whatever the step: server request ids are negative and never
    reused, nothing is sent on a stream after its final message or its end,
    no ``PeerReplied`` appears (the machine never sends requests of its own),
    and ``Answered`` only for an ask that is still pending.
    """

    @initialize(
        handshake=st.sampled_from([None, *LEGACY_VERSIONS, "2025-11-25", "2025-11-25"]),
        caps=CLIENT_CAPS,
        max_rounds=st.sampled_from([2, 3, 8]),
        state_ttl=st.sampled_from([300.0, 1800.0]),
        trace=st.booleans(),
        first=st.lists(
            st.tuples(st.sampled_from(["legacy", "modern"]), st.sampled_from(CALL_METHODS[:3]), AHEAD),
            min_size=1,
            max_size=3,
        ),
    )
    def start(
        self,
        handshake: str | None,
        caps: dict[str, Any],
        max_rounds: int,
        state_ttl: float,
        trace: bool,
        first: list[tuple[str, str, Any]],
    ) -> None:
        tick()
        self.now = 1000.0
        self.max_rounds = max_rounds
        self.state_ttl = state_ttl
        self.table = RoundTable(
            key=KEY, instance="fz", state_ttl=state_ttl, ask_timeout=ASK_TIMEOUT, max_rounds=max_rounds
        )
        self.session = ServerSession(make_config(question_ttl=QUESTION_TTL, trace=trace), rounds=self.table)
        self.session.advance(self.now)
        self.calls: list[Call] = []
        self.sids: dict[int, Sid] = {}
        self.ask_ids: set[int] = set()
        self.state_owner: dict[str, tuple[Call, float]] = {}  # requestState -> (call, issued at)
        self.ended: set[int] = set()
        self.counter = itertools.count(1)
        self.streams = itertools.count(1_000_000)
        self.revision: str | None = None
        self.session_caps: dict[str, Any] = {}
        if handshake is not None:
            params = {
                "protocolVersion": handshake,
                "capabilities": caps,
                "clientInfo": {"name": "c", "version": "1"},
            }
            self.session.receive_json(
                wire({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params}),
                now=self.now,
            )
            out = self.drain()
            assert (
                out.reply("init", out.replies[0][1] if out.replies else None)["result"]["protocolVersion"]
                == handshake
            )
            out.assert_empty()
            self.session.receive_json(
                wire({"jsonrpc": "2.0", "method": "notifications/initialized"}), now=self.now
            )
            self.drain().assert_empty()
            self.revision, self.session_caps = handshake, caps
        for era, method, ahead in first:  # every run starts with a call or three
            self.start_call(era, method, EVERYTHING, ahead)

    # -- helpers ---------------------------------------------------------------

    def drain(self) -> Out:
        """The session's output since the last step, checked for what holds whatever the step."""
        out = Out()
        for action in self.session.next_actions():
            if isinstance(action, Trace):
                continue
            if isinstance(action, Send):
                obj = orjson.loads(action.payload)
                assert isinstance(obj, dict), obj
                if action.stream is not None:
                    assert action.stream not in self.ended, (
                        f"{obj} sent on stream {action.stream} after its end"
                    )
                    if action.final:
                        self.ended.add(action.stream)
                if "method" in obj and "id" in obj:
                    sid = obj["id"]
                    assert isinstance(sid, int) and sid < 0, f"a server request id must be negative: {obj}"
                    assert sid not in self.sids, f"server request id {sid} used twice"
                    assert not action.final, obj
                    out.requests.append((obj, action.stream))
                elif "method" in obj:
                    out.notes.append((obj, action.stream))
                else:
                    assert action.final, f"a response not marked final: {obj}"
                    out.replies.append((obj, action.stream))
            elif isinstance(action, Answered):
                out.answered.append(action)
            elif isinstance(action, CancelRequest):
                out.cancels.append(action)
            elif isinstance(action, EndStream):
                assert action.stream not in self.ended, f"{action} for a stream that already ended"
                self.ended.add(action.stream)
                out.ends.append(action)
            elif isinstance(action, HandleRequest):
                out.handles.append(action)
            elif isinstance(action, PeerReplied):
                raise AssertionError(
                    f"{action}: a PeerReplied for server request {action.token}, which the session sent "
                    "for a question (the application never sent a request of its own)"
                )
            else:
                raise AssertionError(f"unexpected action {action!r}")
        return out

    def pick(self, data: st.DataObject, calls: list[Call]) -> Call:
        return data.draw(st.sampled_from(calls), label="call")

    def calls_in(self, *statuses: str, era: str | None = None) -> list[Call]:
        return [c for c in self.calls if c.status in statuses and (era is None or c.era == era)]

    def refusal(self, call: Call, questions: list[Question]) -> tuple[bool, Any]:
        """Whether an ask is refused, and the ``required`` it carries."""
        if call.era == "modern":
            if call.method not in MRTR_METHODS:
                return True, None
            rev, caps = R26, call.caps
        else:
            if self.revision is None:
                return True, None  # the client never finished initialize
            rev, caps = Revision(self.revision), self.session_caps
        for q in questions:
            if question_refusal(q, rev, caps) is not None:
                return True, required_capability(q)
        return False, None

    def expect_park(
        self, call: Call, ask: Ask, missing: list[str], out: Out, rid: Any, stream: int | None
    ) -> None:
        """The call answers ``rid`` with input_required for ``missing`` and is parked; or, past
        ``max_rounds``, gets -32603 and is cancelled."""
        if call.round + 1 > self.max_rounds:
            error = out.reply(rid, stream)["error"]
            assert error["code"] == -32603 and f"more than {self.max_rounds} times" in error["message"], error
            out.cancel(call.token)
            call.status, call.holder = "cancelled", None
            ask.status = "dropped"
            return
        result = out.reply(rid, stream)["result"]
        assert result.get("resultType") == "input_required", result
        listed = set(result["inputRequests"])
        had = listed & (set(call.held) | set(ask.answers))
        assert not had, (
            f"input_required lists {sorted(had)}, whose answers the server already had "
            f"(sent ahead on the first request: {sorted(call.held)}; answered: {sorted(ask.answers)})"
        )
        assert result["inputRequests"] == {k: ask.questions[k].as_input_request() for k in missing}, result
        state = result["requestState"]
        assert isinstance(state, str) and state not in self.state_owner, state
        call.round += 1
        call.states.append(state)
        self.state_owner[state] = (call, self.now)
        call.status, call.holder, call.parked_at = "parked", None, self.now
        ask.remaining = list(missing)

    def drop_asks(self, call: Call, *, withdrawn: bool, out: Out | None = None) -> None:
        for ask in call.pending():
            ask.status = "dropped"
            for sid in ask.sids:
                self.sids[sid].status = "withdrawn" if withdrawn else "orphaned"
                if withdrawn and out is not None:
                    out.withdrawal(sid)
            ask.sids = {}

    def send(self, obj: dict[str, Any], stream: int | None = None) -> Out:
        self.session.receive_json(wire(obj), stream=stream, now=self.now)
        return self.drain()

    def expected_timer(self) -> float | None:
        times = [a.deadline for c in self.calls for a in c.pending() if c.era == "legacy" and a.sids]
        times += [c.parked_at + ASK_TIMEOUT for c in self.calls if c.status == "parked"]
        return min(times, default=None)

    # -- the peer: calls ---------------------------------------------------------

    @rule(
        era=st.sampled_from(["legacy", "modern", "modern"]),
        method=st.sampled_from(CALL_METHODS),
        caps=CLIENT_CAPS,
        ahead=AHEAD | st.sampled_from([None, None, "bad-shape"]),
    )
    def start_call(self, era: str, method: str, caps: dict[str, Any], ahead: Any) -> None:
        n = next(self.counter)
        params = call_params(method, n)
        if era == "legacy":
            rid: Any = n
            out = self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            caps, ahead, stream = self.session_caps, None, None
        else:
            rid, stream = f"m{n}", next(self.streams)
            sent = {**params, "_meta": {PV: MODERN, CC: caps}}
            if ahead == "bad-shape":
                sent["inputResponses"] = {"a": "not an object"}
            elif ahead is not None:
                sent["inputResponses"] = ahead
            out = self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": sent}, stream)
            if ahead == "bad-shape" and method in MRTR_METHODS:
                error = out.reply(rid, stream)["error"]
                assert error["code"] == -32602 and "inputResponses" in error["message"], error
                out.assert_empty()
                return
        assert len(out.handles) == 1, out.handles
        handle = out.handles.pop()
        assert handle.method == method and handle.context.request_id == rid
        out.assert_empty()
        event(f"start {era} ahead={ahead is not None}")
        held = dict(ahead) if isinstance(ahead, dict) and method in MRTR_METHODS else {}
        self.calls.append(
            Call(
                n=n,
                era=era,
                method=method,
                params=params,
                caps=caps,
                token=handle.token,
                holder=rid,
                stream=stream if stream is not None else handle.token,
                held=held,
            )
        )

    # -- the application: asking ------------------------------------------------

    def askable(self) -> list[Call]:
        return [c for c in self.calls_in("running") if c.era == "modern" or len(c.pending()) < 2]

    @precondition(lambda self: self.askable())
    @rule(data=st.data(), picked=QUESTIONS)
    def app_asks(self, data: st.DataObject, picked: list[tuple[str, str]]) -> None:
        call = self.pick(data, self.askable())
        questions = [question(key, template) for key, template in picked]
        refused, required = self.refusal(call, questions)
        ask_id = self.session.ask(call.token, questions)
        out = self.drain()
        assert ask_id not in self.ask_ids, f"ask id {ask_id} reused"
        self.ask_ids.add(ask_id)
        ask = Ask(ask_id=ask_id, keys=[q.key for q in questions], questions={q.key: q for q in questions})
        call.asks.append(ask)
        event(f"ask: {call.era} {'refused' if refused else 'asked'}")
        if refused:
            answered = out.answer(call.token, ask_id)
            assert answered.answers is None and answered.refused, answered
            assert answered.required == required, (answered, required)
            ask.status = "answered"
        elif call.era == "modern":
            ask.answers = {k: {"result": call.held.pop(k)} for k in ask.keys if k in call.held}
            missing = [k for k in ask.keys if k not in ask.answers]
            if missing:
                self.expect_park(call, ask, missing, out, call.holder, call.stream)
            else:  # every answer was sent ahead
                assert out.answer(call.token, ask_id).answers == ask.answers
                ask.status = "answered"
        else:
            assert self.revision is not None
            assert len(out.requests) == len(questions), out.requests
            for q, (obj, stream) in zip(questions, out.requests, strict=True):
                assert obj["method"] == q.method and stream == call.stream, (obj, stream, call)
                assert obj.get("params", {}) == expected_question_params(q, self.revision), obj
                self.sids[obj["id"]] = Sid(call=call, ask=ask, key=q.key)
                ask.sids[obj["id"]] = q.key
            out.requests.clear()
            ask.deadline = self.now + QUESTION_TTL
        out.assert_empty()

    @precondition(lambda self: self.calls_in("parked", "done", "cancelled", "gone"))
    @rule(data=st.data(), template=st.sampled_from(["form", "roots"]))
    def app_asks_for_a_call_that_is_not_running(self, data: st.DataObject, template: str) -> None:
        """A local error, and nothing changes (a parked call waits for its retry, not for more questions)."""
        call = self.pick(data, self.calls_in("parked", "done", "cancelled", "gone"))
        timer = self.session.get_timer()
        with pytest.raises(LocalProtocolError):
            self.session.ask(call.token, [question("a", template)])
        self.drain().assert_empty()
        assert self.session.get_timer() == timer

    # -- the peer: answering legacy questions ---------------------------------------

    @precondition(lambda self: self.sids)
    @rule(data=st.data(), kind=st.sampled_from(["result", "result", "error"]), value=ANSWER_VALUES)
    def client_answers(self, data: st.DataObject, kind: str, value: dict[str, Any]) -> None:
        """An answer to a question: pending, already answered, withdrawn, or of a call that ended."""
        sid = data.draw(st.sampled_from(sorted(self.sids)), label="server request id")
        error = data.draw(st.sampled_from(CLIENT_ERRORS), label="error") if kind == "error" else None
        message = {"jsonrpc": "2.0", "id": sid, **({"error": error} if error else {"result": value})}
        out = self.send(message)
        record = self.sids[sid]
        event(f"legacy answer to a {record.status} question")
        if record.status == "pending":
            record.status = "answered"
            ask = record.ask
            ask.answers[record.key] = {"error": error} if error else {"result": value}
            del ask.sids[sid]
            if not ask.sids:
                assert out.answer(record.call.token, ask.ask_id).answers == ask.answers
                ask.status = "answered"
        out.assert_empty()  # late, twice, withdrawn, orphaned: nothing at all

    @rule(sid=st.sampled_from([-999_999, 0, 5, "x"]), kind=st.sampled_from(["result", "error"]))
    def client_answers_something_never_asked(self, sid: Any, kind: str) -> None:
        body = {"error": CLIENT_ERRORS[0]} if kind == "error" else {"result": {}}
        self.send({"jsonrpc": "2.0", "id": sid, **body}).assert_empty()

    # -- the peer: 2026-07-28 retries ---------------------------------------------------

    @precondition(lambda self: any(c.states for c in self.calls))
    @rule(data=st.data(), kind=RETRY_KINDS, same_caps=st.booleans(), caps=CLIENT_CAPS)
    def client_retries(self, data: st.DataObject, kind: str, same_caps: bool, caps: dict[str, Any]) -> None:
        parked = [c for c in self.calls if c.states and c.status == "parked"]
        call = self.pick(
            data,
            parked
            if parked and data.draw(st.integers(0, 3), label="prefer parked")
            else [c for c in self.calls if c.states],
        )
        ask = next((a for a in call.asks if a.status == "pending"), None)
        remaining = ask.remaining if ask is not None else []
        state: Any = call.states[-1]
        method, params = call.method, dict(call.params)
        responses: Any = {}
        if kind == "all":
            responses = {k: data.draw(ANSWER_VALUES, label=f"answer {k}") for k in remaining}
        elif kind == "some":
            given_keys = (
                data.draw(st.lists(st.sampled_from(remaining), unique=True), label="answered")
                if remaining
                else []
            )
            responses = {k: data.draw(ANSWER_VALUES, label=f"answer {k}") for k in given_keys}
        elif kind == "older":
            state = data.draw(st.sampled_from(call.states), label="older state")
        elif kind == "tampered":
            i = data.draw(st.integers(0, len(state) - 1), label="position")
            ch = data.draw(WIRE_CHARS.filter(lambda c, i=i: c != state[i]), label="character")
            state = state[:i] + ch + state[i + 1 :]
        elif kind == "other-call":
            others = [c for c in self.calls if c.states and c is not call]
            if others:
                state = self.pick(data, others).states[-1]
        elif kind == "other-params":
            how = data.draw(st.sampled_from(["method", "argument"]), label="how")
            if how == "method":
                method = next(m for m in sorted(MRTR_METHODS) if m != call.method)
            else:
                params = call_params(call.method, call.n + 10_000)
        if kind in ("all", "some") and data.draw(st.booleans(), label="extra keys"):
            extra = data.draw(st.sampled_from([*KEYS, "zz"]), label="extra key")
            if extra not in remaining:
                responses[extra] = {"action": "accept"}
        retry_caps = call.caps if same_caps else caps
        sent: dict[str, Any] = {**params, "_meta": {PV: MODERN, CC: retry_caps}, "requestState": state}
        if kind == "bad-shape":
            sent["inputResponses"] = data.draw(st.sampled_from([{"a": 1}, [], "x", {"a": []}]), label="bad")
        elif kind != "none" or data.draw(st.booleans(), label="empty inputResponses"):
            sent["inputResponses"] = responses
        rid, stream = f"r{next(self.counter)}", next(self.streams)
        out = self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": sent}, stream)

        refusal = self.state_refusal(call, kind, state, method, params)
        event(f"retry {kind}: {refusal or 'resumed'}")
        if refusal is not None:  # -32602, and nothing changes
            error = out.reply(rid, stream)["error"]
            assert error["code"] == -32602, error
            assert refusal in error["message"], (refusal, error)
            out.assert_empty()
            return
        # The latest state of a parked call: the call is resumed, exactly once.
        assert ask is not None and call.status == "parked"
        call.status, call.holder, call.stream, call.caps = "running", rid, stream, retry_caps
        for k in ask.remaining:
            if k in responses:
                ask.answers[k] = {"result": responses[k]}
        missing = [k for k in ask.remaining if k not in responses]
        if missing:
            self.expect_park(call, ask, missing, out, rid, stream)
        else:
            assert out.answer(call.token, ask.ask_id).answers == ask.answers
            ask.status, ask.remaining = "answered", []
        out.assert_empty()

    def state_refusal(
        self, call: Call, kind: str, state: Any, method: str, params: dict[str, Any]
    ) -> str | None:
        """The fragment of the -32602 message a retry earns, or ``None`` when it resumes the call."""
        if kind == "bad-shape":
            return "inputResponses"
        if state not in self.state_owner:
            return STATE_REFUSALS[shape_kind(state)]
        owner, issued = self.state_owner[state]
        if self.now >= issued + self.state_ttl:
            return STATE_REFUSALS["expired"]
        if owner is not call or method != call.method or params != call.params:
            return STATE_REFUSALS["foreign"]
        if call.status != "parked":
            return STATE_REFUSALS["unknown-call"]
        if state != call.states[-1]:
            return STATE_REFUSALS["older"]
        return None

    # -- the peer: cancellation ----------------------------------------------------------

    @precondition(lambda self: self.calls_in("running"))
    @rule(data=st.data())
    def client_cancels(self, data: st.DataObject) -> None:
        call = self.pick(data, self.calls_in("running"))
        if call.era == "legacy":
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": call.holder},
            }
            out = self.send(note)
        else:
            self.session.abandon(call.stream)  # type: ignore[arg-type]
            out = self.drain()
        out.cancel(call.token)
        assert call.stream is not None
        out.end(call.stream)
        self.drop_asks(call, withdrawn=True, out=out)
        call.status, call.holder = "cancelled", None
        out.assert_empty()

    @precondition(lambda self: self.calls_in("parked", "done", "cancelled", "gone"))
    @rule(data=st.data())
    def client_cancels_what_is_not_running(self, data: st.DataObject) -> None:
        """Cancelling a request that was answered (a parked call's last one, a finished call): nothing."""
        call = self.pick(data, self.calls_in("parked", "done", "cancelled", "gone"))
        if call.era == "legacy":
            note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call.n}}
            self.send(note).assert_empty()
        else:
            assert call.stream is not None
            self.session.abandon(call.stream)
            self.drain().assert_empty()

    # -- the clock -------------------------------------------------------------------------

    @rule(step=CLOCK_STEPS)
    def clock(self, step: float) -> None:
        self.advance(step)

    def advance(self, step: float) -> None:
        self.now += step
        self.session.advance(self.now)
        self.drain().assert_empty()
        timer = self.session.get_timer()
        if timer is None or timer > self.now:
            return
        self.session.handle_timer(self.now)
        out = self.drain()
        for call in self.calls:
            for ask in call.pending():
                if call.era == "legacy" and ask.sids and self.now >= ask.deadline:
                    for sid, key in ask.sids.items():
                        out.withdrawal(sid)
                        self.sids[sid].status = "withdrawn"
                        timed_out = (
                            {"result": {"action": "cancel"}}
                            if ask.questions[key].method == "elicitation/create"
                            else {"error": TIMEOUT_ERROR}
                        )
                        ask.answers[key] = timed_out
                    ask.sids = {}
                    assert out.answer(call.token, ask.ask_id).answers == ask.answers
                    ask.status = "answered"
            if call.status == "parked" and self.now >= call.parked_at + ASK_TIMEOUT:
                out.cancel(call.token, NOT_BACK)
                self.drop_asks(call, withdrawn=False)
                call.status = "cancelled"
        out.assert_empty()

    # -- the application: finishing ------------------------------------------------------------

    @precondition(lambda self: self.calls_in("running", "parked"))
    @rule(
        data=st.data(),
        how=st.sampled_from(["result", "result", "error"]),
        code=st.sampled_from(APP_ERROR_CODES),
    )
    def app_finishes(self, data: st.DataObject, how: str, code: int) -> None:
        """The final response goes to the request that holds the call; a parked call has none."""
        call = self.pick(data, self.calls_in("running", "parked"))
        if how == "result":
            self.session.respond(call.token, final_result(call.method))
        else:
            self.session.respond_error(call.token, code, "it failed")
        out = self.drain()
        if call.status == "running":
            reply = out.reply(call.holder, call.stream)
            if how == "error":
                assert reply["error"]["code"] == code, reply
            elif call.era == "modern":
                assert reply["result"]["resultType"] == "complete", reply
            else:
                assert "resultType" not in reply["result"], reply
        self.drop_asks(call, withdrawn=False)
        call.status, call.holder = "done", None
        out.assert_empty()

    @precondition(lambda self: self.calls_in("cancelled"))
    @rule(data=st.data(), how=st.sampled_from(["discard", "discard", "respond", "respond_error"]))
    def app_stops_a_cancelled_call(self, data: st.DataObject, how: str) -> None:
        call = self.pick(data, self.calls_in("cancelled"))
        if how == "discard":
            self.session.discard(call.token)
        elif how == "respond":
            self.session.respond(call.token, final_result(call.method))
        else:
            self.session.respond_error(call.token, -32603, "stopped")
        self.drain().assert_empty()  # nothing is sent for a cancelled call
        call.status = "gone"

    @precondition(lambda self: self.calls_in("running", "parked", "done", "gone"))
    @rule(data=st.data(), how=st.sampled_from(["discard", "respond"]))
    def app_misuses_a_token(self, data: st.DataObject, how: str) -> None:
        """``discard`` needs a cancelled call; ``respond`` a live one.  Otherwise: a local error, no change."""
        eligible = self.calls_in("running", "parked") if how == "discard" else self.calls_in("done", "gone")
        if not eligible:
            return
        call = self.pick(data, eligible)
        in_flight, timer, parked = self.session.in_flight, self.session.get_timer(), len(self.table)
        with pytest.raises(LocalProtocolError):
            if how == "discard":
                self.session.discard(call.token)
            else:
                self.session.respond(call.token, {})
        self.drain().assert_empty()
        assert (self.session.in_flight, self.session.get_timer(), len(self.table)) == (
            in_flight,
            timer,
            parked,
        )

    # -- invariants and the ending -----------------------------------------------------------------

    @invariant()
    def session_agrees_with_the_model(self) -> None:
        if not hasattr(self, "session"):
            return
        assert self.session.in_flight == len(self.calls_in("running")), (self.session.in_flight, self.calls)
        assert len(self.table) == len(self.calls_in("parked")), (len(self.table), self.calls)
        assert self.session.get_timer() == self.expected_timer(), (
            self.session.get_timer(),
            self.expected_timer(),
        )
        for call in self.calls:
            if call.status not in ("running", "parked"):
                assert not call.pending(), f"an ask of an ended call is still pending: {call}"
            if call.status == "parked":
                assert len(call.pending()) == 1, call

    def teardown(self) -> None:
        if hasattr(self, "calls"):
            event(f"calls per run: {min(len(self.calls), 10)}")
        if not hasattr(self, "session") or sys.exc_info()[1] is not None:
            return  # a step already failed: report that, not its consequences
        # Every deadline passes: each ask still pending is answered (legacy) or
        # its call given up (2026-07-28); nothing is left waiting.
        self.advance(ASK_TIMEOUT + QUESTION_TTL + 1)
        assert self.session.get_timer() is None
        for call in self.calls:
            for ask in call.asks:
                assert ask.status in ("answered", "dropped"), (call, ask)
                if ask.status == "dropped":
                    assert call.status in ("done", "cancelled", "gone"), (call, ask)
        for call in self.calls_in("cancelled"):
            self.session.discard(call.token)
        assert self.session.next_actions() == []


RoundsMachine.TestCase.settings = settings(stateful_step_count=30)
test_rounds_machine = RoundsMachine.TestCase
