"""A model-based state machine over ``Router``: hosts with colliding ids, fake upstreams, questions and time.

The machine plays every side the router talks to, all of them pure:

* **hosts** (up to eight connections over a run, each declaring roots and
  sampling, only elicitation, or the tasks extension) sending ``tools/call``
  (routed mostly to one legacy and one 2026-07-28 upstream, so that
  connections are shared and questions ambiguous) with request
  ids drawn from ``1, 2, "a"`` — so ids collide across hosts, and a host
  reuses an id once its call ended — with or without a progress token and a
  timeout; cancelling calls, answering, refusing and mis-answering
  questions, and closing;
* **fake upstream servers** (two legacy, 2025-06-18 and 2025-11-25; two
  2026-07-28, one on stdio and one with a stream per request) that read the
  router's ``SendUpstream`` payloads with orjson and answer with JSON fed
  back through ``upstream_data``: results, errors and task results in any
  order, ``input_required`` rounds (well-formed, answerable by mcpx alone, or
  malformed), answers to requests already cancelled or answered, progress
  for any token they were given, log messages, list changes, legacy server
  requests (and their withdrawal); and crashing (``upstream_lost``), then
  coming back as a new connection under the same key;
* **the clock**, on time (every deadline handled when it falls due) or late
  (the driver wakes after a deadline passed, and an answer, a round or a
  legacy question for that call arrives first).

Every host request carries its host, request id and a serial number in its
arguments; the fake upstreams echo them, so an answer, a progress report or
an error that reached the wrong call shows.  After every step:

* every host call is answered **exactly once**, and only while its host is
  open and has not cancelled it; nothing at all reaches a host once it closed;
* every answer, progress report, log message and question is one the model
  expected, for the host whose call it belongs to: results without their
  envelope, progress under the host's own token and only when it gave one,
  logs to exactly the hosts with a call on that upstream, a legacy question
  put to a host only when its call is alone on the connection (otherwise the
  upstream is told so), ``roots/list`` answered by mcpx for a host without
  roots, a round asked whole under the upstream's keys;
* every request the fake upstreams have pending belongs to a call in flight,
  and every call in flight (but one whose round is out to its host) has
  exactly one pending request — so cancellations, timeouts and closed hosts
  reach the upstream; every server request is answered, refused or withdrawn
  exactly once, and the ones pending are exactly the questions out to hosts;
* retries carry exactly the host's answers (and mcpx's own roots) and the
  ``requestState`` as sent;
* the call timeout fires exactly when a call has used its time, never while
  a question of it is out; ``get_timer()`` is the model's earliest deadline;
  the router's counts agree with the model's.

At teardown the hosts answer every question, the upstreams answer every
request, the clock runs far ahead: every call must have ended, the router
must be ``idle`` and its timer quiet.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mcpx.core import LocalProtocolError, Revision
from mcpx.core.client_session import ClientSession, ServerRequest
from mcpx.core.revisions import TASKS_EXTENSION
from mcpx.core.router import (
    AbandonUpstream,
    AnswerHost,
    AskHost,
    NotifyHost,
    Router,
    SendUpstream,
    UpstreamNotification,
    UpstreamOutcome,
    WithdrawAsk,
)
from mcpx.gateway._instances import UPSTREAM_CAPABILITIES

from ._examples import tick

INFO = {"name": "mcpx", "version": "fuzz"}
OWN = UPSTREAM_CAPABILITIES  # what the daemon's router declares to its upstreams
CAPS: dict[str, dict[str, Any]] = {
    "full": {"roots": {}, "elicitation": {}, "sampling": {}},
    "bare": {"elicitation": {}},
    "tasks": {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}},
}
IDS = (1, 2, "a")
TIMEOUTS = (None, 1.0, 2.0, 3.5, 8.0)
CALL_TIMEOUT = 8.0  # what every plain call gets, as pool.callTimeout applies to every call in the gateway
STEPS = (0.5, 1.0, 2.0, 5.0)
UPSTREAMS: dict[str, tuple[str, Any]] = {
    "L1": ("legacy", Revision.V2025_06_18),
    "L2": ("legacy", Revision.V2025_11_25),
    "M1": ("modern", False),  # stdio: a cancel is notifications/cancelled
    "M2": ("modern", True),  # a stream per request: a cancel is closing it
}
ROUTES = (
    "L1",
    "L1",
    "L2",
    "M1",
    "M1",
    "M2",
)  # where calls go: crowded connections make the interesting cases
MAX_HOSTS = 8  # host connections over a run (closed ones are never reopened)
MAX_QUESTIONS = 2
MAX_ROUNDS = 2
QUESTION_METHODS = ("elicitation/create", "sampling/createMessage", "roots/list")
REFUSAL = {"code": -32001, "message": "the person said no"}
Check = Callable[[Any], bool]


def question_params(method: str, tag: str) -> dict[str, Any]:
    if method == "elicitation/create":
        return {
            "message": tag,
            "requestedSchema": {"type": "object", "properties": {"who": {"type": "string"}}},
        }
    if method == "sampling/createMessage":
        return {"messages": [{"role": "user", "content": {"type": "text", "text": tag}}], "maxTokens": 5}
    return {}


def host_answer(method: str, host: int) -> dict[str, Any]:
    """What host ``host`` answers: tagged with the host, so an answer that went astray shows upstream."""
    if method == "elicitation/create":
        return {"action": "accept", "content": {"who": f"host-{host}"}}
    if method == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": f"host-{host}"}, "model": "m"}
    return {"roots": [{"uri": f"file:///host-{host}", "name": f"host-{host}"}]}


def timed_out(timeout: float) -> Check:
    def check(answer: AnswerHost) -> bool:
        error = answer.error or {}
        data = error.get("data") or {}
        return error.get("code") == -32603 and data == {"kind": "call-timeout", "timeoutSeconds": timeout}

    return check


def error_like(code: int, words: str) -> Check:
    return lambda answer: (
        answer.error is not None and answer.error["code"] == code and words in answer.error["message"]
    )


def response_error(words: str) -> Check:
    return lambda frame: (
        "error" in frame and frame["error"]["code"] == -32603 and words in frame["error"]["message"]
    )


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------


@dataclass(eq=False)
class Call:
    host: int
    rid: Any
    serial: int
    upstream: str
    token: Any
    timeout: float | None
    caps: str
    state: str = "open"  # open | answered | cancelled | dropped (its host closed)
    used: float = 0.0  # running time before ``since``
    since: float | None = 0.0  # when its clock last started; None while a question is out
    asks: set[int] = field(default_factory=set)
    rounds: int = 0

    @property
    def roots(self) -> bool:
        return "roots" in CAPS[self.caps]

    def deadline(self) -> float | None:
        if self.timeout is None or self.since is None:
            return None
        return self.since + self.timeout - self.used

    def overdue(self, now: float) -> bool:
        deadline = self.deadline()
        return deadline is not None and deadline <= now


@dataclass(eq=False)
class Ask:
    ask_id: int
    call: Call
    methods: dict[str, str]  # key → method
    question: str | None  # a legacy question: the upstream's request id; None for a round
    own: dict[str, Any] = field(default_factory=dict)  # a round: what mcpx answers itself
    request_state: str | None = None
    state: str = "open"  # open | answered | refused | withdrawn | dropped


@dataclass(eq=False)
class Wire:
    """One request as a fake upstream saw it."""

    wire_id: int
    serial: int
    stream: int | None
    token: Any
    state: str = "pending"  # pending | answered | input_required | cancelled


@dataclass(eq=False)
class Question:
    """One server request a legacy fake upstream sent."""

    qid: str
    method: str
    params: dict[str, Any]
    state: str = "pending"  # pending | answered | errored | cancelled | caller (the caller's to answer)


class FakeUpstream:
    """A pure MCP server: the machine reads what the router sends it and writes what it answers."""

    def __init__(self, key: str) -> None:
        kind, detail = UPSTREAMS[key]
        self.key = key
        self.modern = kind == "modern"
        if self.modern:
            self.session = ClientSession(
                client_info=INFO,
                capabilities=OWN,
                modern=True,
                stream_per_request=detail,
                max_rounds=MAX_ROUNDS,
            )
        else:
            self.session = ClientSession(client_info=INFO, capabilities=OWN, offer=detail)
            self.session.start()
            (init,) = [orjson.loads(a.payload) for a in self.session.next_actions() if hasattr(a, "payload")]
            self.session.receive_json(
                {
                    "jsonrpc": "2.0",
                    "id": init["id"],
                    "result": {
                        "protocolVersion": str(detail),
                        "capabilities": {"tools": {}, "logging": {}},
                        "serverInfo": {"name": key, "version": "1"},
                    },
                }
            )
            self.session.next_actions()
        self.wires: dict[int, Wire] = {}
        self.questions: dict[str, Question] = {}
        self.qids = itertools.count(1)
        self.progress: dict[Any, int] = {}

    def pending(self) -> list[Wire]:
        return [w for w in self.wires.values() if w.state == "pending"]


def result_for(fake: FakeUpstream, call: Call) -> tuple[dict[str, Any], dict[str, Any]]:
    """A result for ``call`` as the upstream sends it, and as its host must get it."""
    content = {
        "content": [{"type": "text", "text": f"serial {call.serial}"}],
        "structuredContent": {"host": call.host, "rid": call.rid, "serial": call.serial},
    }
    sent = {
        **content,
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": fake.key}, "trace": call.serial},
    }
    if fake.modern:
        sent.update(resultType="complete", ttlMs=1000, cacheScope="private")
    return sent, {**content, "_meta": {"trace": call.serial}}


# --------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------


class RouterMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        tick()
        self.router = Router(capabilities=OWN, max_questions=MAX_QUESTIONS, capability_cache=2)
        self.now = 0.0
        self.hosts: dict[int, str] = {1: "full", 2: "bare", 3: "tasks"}
        self.closed: set[int] = set()
        self.fakes: dict[str, FakeUpstream] = {}
        for key in UPSTREAMS:
            self.fakes[key] = FakeUpstream(key)
            self.router.add_upstream(key, self.fakes[key].session)
        self.serials = itertools.count(1)
        self.calls: dict[int, Call] = {}  # serial → call
        self.open: dict[tuple[int, Any], Call] = {}  # (host, request id) → the call in flight
        self.asks: dict[int, Ask] = {}
        self.ask_of_question: dict[tuple[str, str], Ask] = {}
        # What the current step must produce, consumed as it arrives.
        self.expect_answer: dict[int, Check] = {}  # serial → check of its AnswerHost
        self.expect_ask: list[tuple[int, Any, dict[str, Any], str | None, dict[str, Any], str | None]] = []
        self.expect_note: list[NotifyHost] = []
        self.expect_heard: list[UpstreamNotification] = []
        self.expect_caller: list[tuple[str, str]] = []  # questions with no router call on their connection
        # (upstream, question id) → check of the frame the upstream gets
        self.expect_response: dict[tuple[str, str], Check] = {}
        # serial → (inputResponses, requestState) its retry must carry
        self.expect_retry: dict[int, tuple[dict[str, Any], str | None]] = {}
        self.may_withdraw: set[int] = set()
        self.take_answers = False  # upstream answers through take_answer rather than upstream_data
        self.step()

    # -- performing the router's actions ---------------------------------------------------------

    def drain(self) -> list[Any]:
        actions = self.router.next_actions()
        withdrawn: list[Ask] = []
        for action in actions:
            host = getattr(action, "host", None)
            if isinstance(action, AnswerHost | NotifyHost | AskHost | WithdrawAsk):
                assert host not in self.closed, f"{action} reached host {host}, which had closed"
            if isinstance(action, SendUpstream):
                assert action.upstream in self.fakes, f"{action} for a lost upstream"
                self.upstream_receives(self.fakes[action.upstream], action.payload, action.stream)
            elif isinstance(action, AbandonUpstream):
                assert UPSTREAMS.get(action.upstream) == ("modern", True) and action.upstream in self.fakes
                for wire in self.fakes[action.upstream].pending():
                    if wire.stream == action.handle:
                        wire.state = "cancelled"
            elif isinstance(action, AnswerHost):
                self.host_gets_answer(action)
            elif isinstance(action, NotifyHost):
                assert action in self.expect_note, f"unexpected {action}; expected {self.expect_note}"
                self.expect_note.remove(action)
            elif isinstance(action, AskHost):
                self.host_gets_question(action)
            elif isinstance(action, WithdrawAsk):
                ask = self.asks.get(action.ask_id)
                assert ask is not None and ask.state == "open", f"{action}: not a question out"
                assert ask.call.host == action.host, f"{action} went to another host than {ask.call.host}"
                ask.state = "withdrawn"
                self.settle(ask)
                withdrawn.append(ask)
            elif isinstance(action, UpstreamNotification):
                assert action in self.expect_heard, f"unexpected {action}"
                self.expect_heard.remove(action)
            elif isinstance(action, UpstreamOutcome):
                event = action.event
                assert isinstance(event, ServerRequest), f"unexpected {action}"
                assert (action.upstream, event.request_id) in self.expect_caller, f"unexpected {action}"
                self.expect_caller.remove((action.upstream, event.request_id))
            else:
                raise AssertionError(f"unexpected action {action!r}")
        for ask in withdrawn:
            assert ask.call.state != "open" or ask.ask_id in self.may_withdraw, (
                f"question {ask.ask_id} withdrawn while its call runs and its upstream still wants it"
            )
        self.may_withdraw.clear()
        return actions

    def step(self) -> list[Any]:
        """Drain, and check that everything the step had to produce came."""
        actions = self.drain()
        assert not self.expect_answer, f"answers that never came: {sorted(self.expect_answer)}"
        assert not self.expect_ask, f"questions never asked: {self.expect_ask}"
        assert not self.expect_note, f"notifications never sent: {self.expect_note}"
        assert not self.expect_heard, f"upstream notifications never passed on: {self.expect_heard}"
        assert not self.expect_response, f"upstream questions never answered: {self.expect_response}"
        assert not self.expect_caller, f"questions never handed to the caller: {self.expect_caller}"
        assert not self.expect_retry, f"retries never sent: {self.expect_retry}"
        return actions

    def host_gets_answer(self, answer: AnswerHost) -> None:
        call = self.open.pop((answer.host, answer.request_id), None)
        assert call is not None, f"{answer}: not a call in flight (answered twice, cancelled, or never sent)"
        check = self.expect_answer.pop(call.serial, None)
        assert check is not None, f"unexpected {answer} for serial {call.serial}"
        assert check(answer), f"{answer} is not what serial {call.serial} should get"
        assert all(self.asks[i].state != "open" for i in call.asks), (
            "answered before its questions were withdrawn"
        )
        call.state = "answered"

    def host_gets_question(self, ask: AskHost) -> None:
        call = self.open.get((ask.host, ask.request_id))
        assert call is not None, f"{ask}: no such call in flight"
        wanted = [e for e in self.expect_ask if e[:3] == (ask.host, ask.request_id, dict(ask.requests))]
        assert wanted, f"unexpected {ask}; expected {self.expect_ask}"
        self.expect_ask.remove(wanted[0])
        _, _, requests, question, own, state = wanted[0]
        assert ask.ask_id not in self.asks, "ask ids are unique"
        methods = {key: item["method"] for key, item in requests.items()}
        record = Ask(
            ask_id=ask.ask_id, call=call, methods=methods, question=question, own=own, request_state=state
        )
        self.asks[ask.ask_id] = record
        if question is not None:
            self.ask_of_question[(call.upstream, question)] = record
        if not call.asks and call.since is not None:  # its clock stops
            call.used += self.now - call.since
            call.since = None
        call.asks.add(ask.ask_id)

    def settle(self, ask: Ask) -> None:
        call = ask.call
        call.asks.discard(ask.ask_id)
        if call.state == "open" and not call.asks:
            call.since = self.now

    def upstream_receives(self, fake: FakeUpstream, payload: bytes, stream: int | None) -> None:
        frame = orjson.loads(payload)
        if "method" in frame and "id" in frame:
            self.upstream_gets_request(fake, frame, stream)
        elif "method" in frame:
            assert frame["method"] == "notifications/cancelled", frame
            wire = fake.wires.get(frame["params"]["requestId"])
            assert wire is not None and wire.state == "pending", (
                f"a cancel for a request not pending: {frame}"
            )
            wire.state = "cancelled"
        else:
            question = fake.questions.get(frame["id"])
            assert question is not None and question.state == "pending", f"a stray answer {frame}"
            question.state = "answered" if "result" in frame else "errored"
            check = self.expect_response.pop((fake.key, question.qid), None)
            if check is None:  # its call ended (or its host went): refused, saying so
                ask = self.ask_of_question.get((fake.key, question.qid))
                assert ask is not None and ask.state in ("withdrawn", "dropped"), f"unexpected answer {frame}"
                assert "error" in frame and frame["error"]["code"] == -32603, frame
            else:
                assert check(frame), f"{frame} is not the answer question {question.qid} should get"

    def upstream_gets_request(self, fake: FakeUpstream, frame: dict[str, Any], stream: int | None) -> None:
        assert frame["method"] == "tools/call", frame
        params = frame["params"]
        args = params["arguments"]
        call = self.calls[args["serial"]]
        assert call.state == "open" and call.upstream == fake.key, f"{frame} for {call}"
        assert (args["host"], args["rid"]) == (call.host, call.rid)
        assert "task" not in params, "the host's task param is mcpx's business"
        meta = params["_meta"]
        assert meta["traceparent"] == f"00-{call.serial}", "the host's own _meta travels"
        assert not any(key.startswith("dev.mcpx/") for key in meta), meta
        assert ("progressToken" in meta) == (call.token is not None)
        if call.token is not None:
            assert meta["progressToken"] != call.token and str(meta["progressToken"]).startswith("mcpx-")
        if fake.modern:
            declared = meta["io.modelcontextprotocol/clientCapabilities"]
            assert ("sampling" in declared) == ("sampling" in CAPS[call.caps]), declared
            assert ("extensions" in declared) == ("extensions" in CAPS[call.caps]), declared
        assert frame["id"] not in fake.wires, "a fresh id for every attempt"
        assert not any(w.serial == call.serial for w in fake.pending()), "one attempt of a call at a time"
        if "inputResponses" in params:
            expected = self.expect_retry.pop(call.serial, None)
            assert expected is not None, f"an unexpected retry {frame}"
            assert params["inputResponses"] == expected[0]
            assert params.get("requestState") == expected[1]
        else:
            assert not any(w.serial == call.serial for w in fake.wires.values()), "a call is sent once"
        fake.wires[frame["id"]] = Wire(
            wire_id=frame["id"], serial=call.serial, stream=stream, token=meta.get("progressToken")
        )

    def feed(self, fake: FakeUpstream, obj: Any) -> None:
        if not self.take_answers:
            self.router.upstream_data(fake.key, obj, now=self.now)
            return
        taken = self.router.take_answer(fake.key, obj, now=self.now)
        if taken is not None:  # what AnswerHost would have said, handed back
            assert not self.router.has_actions, "take_answer handed an answer back with actions queued"
            host, request_id, result = taken
            self.host_gets_answer(AnswerHost(host=host, request_id=request_id, result=result, error=None))

    # -- views of the model -------------------------------------------------------------------------

    def live_hosts(self) -> list[int]:
        return [h for h in self.hosts if h not in self.closed]

    def calls_on(self, upstream: str) -> list[Call]:
        return [c for c in self.open.values() if c.upstream == upstream]

    def open_asks(self) -> list[Ask]:
        return [a for a in self.asks.values() if a.state == "open"]

    def wires(self, *states: str) -> list[tuple[FakeUpstream, Wire]]:
        return [(f, w) for f in self.fakes.values() for w in f.wires.values() if w.state in states]

    def legacy_fakes(self) -> list[str]:
        return [k for k, f in self.fakes.items() if not f.modern]

    def pending_questions(self) -> list[tuple[FakeUpstream, Question]]:
        return [(f, q) for f in self.fakes.values() for q in f.questions.values() if q.state == "pending"]

    # -- hosts ---------------------------------------------------------------------------------------

    @precondition(lambda self: len(self.hosts) < MAX_HOSTS)
    @rule(caps=st.sampled_from(sorted(CAPS)))
    def host_connects(self, caps: str) -> None:
        self.hosts[max(self.hosts) + 1] = caps

    @precondition(lambda self: self.live_hosts())
    @rule(
        data=st.data(),
        rid=st.sampled_from(IDS),
        upstream=st.sampled_from(ROUTES),
        timeout=st.sampled_from(TIMEOUTS),
        token=st.sampled_from(["none", "str", "int"]),
        task=st.booleans(),
    )
    def host_sends(
        self,
        data: st.DataObject,
        rid: Any,
        upstream: str,
        timeout: float | None,
        token: str,
        task: bool,
        now_form: bool = False,
    ) -> None:
        host = data.draw(st.sampled_from(self.live_hosts()), label="host")
        serial = next(self.serials)
        progress = {"none": None, "str": f"tok-{host}-{serial}", "int": serial}[token]
        meta: dict[str, Any] = {
            "traceparent": f"00-{serial}",
            "dev.mcpx/session": "s",
            "io.modelcontextprotocol/clientInfo": {"name": "host", "version": "1"},
        }
        if progress is not None:
            meta["progressToken"] = progress
        params: dict[str, Any] = {
            "name": "echo",
            "arguments": {"host": host, "rid": rid, "serial": serial},
            "_meta": meta,
        }
        if task:
            params["task"] = {}

        def send() -> None:
            common: dict[str, Any] = {
                "upstream": upstream,
                "host_capabilities": CAPS[self.hosts[host]],
                "now": self.now,
            }
            if now_form:  # the relay lane's form: its bytes handed back, or nothing done
                sent = self.router.host_request_now(host, rid, "tools/call", params, **common)
                if sent is not None:
                    self.upstream_receives(self.fakes[upstream], sent[1], sent[0])
                    return
                assert self.router.in_flight == before_send, "host_request_now did something and said not"
            self.router.host_request(
                host, rid, "tools/call", params, progress_token=progress, timeout=timeout, **common
            )

        before_send = self.router.in_flight
        if (host, rid) in self.open or upstream not in self.fakes:
            before = self.router.in_flight
            with pytest.raises(LocalProtocolError):  # a duplicate in flight, or a lost upstream: misuse
                send()
            assert self.router.next_actions() == [] and self.router.in_flight == before
            return
        call = Call(
            host=host,
            rid=rid,
            serial=serial,
            upstream=upstream,
            token=progress,
            timeout=timeout,
            caps=self.hosts[host],
            since=self.now,
        )
        self.calls[serial] = call
        self.open[(host, rid)] = call
        before_send = self.router.in_flight
        send()
        self.step()

    @precondition(lambda self: self.live_hosts())
    @rule(data=st.data(), rid=st.sampled_from(IDS), upstream=st.sampled_from(ROUTES))
    def host_sends_plainly(self, data: st.DataObject, rid: Any, upstream: str) -> None:
        """The commonest request of all: no token, the configured timeout."""
        self.host_sends(data=data, rid=rid, upstream=upstream, timeout=CALL_TIMEOUT, token="none", task=False)

    @precondition(lambda self: self.live_hosts())
    @rule(data=st.data(), rid=st.sampled_from(IDS), upstream=st.sampled_from(ROUTES))
    def host_sends_now(self, data: st.DataObject, rid: Any, upstream: str) -> None:
        """The relay lane's call: ``host_request_now`` (no token, no timeout of the router's)."""
        self.host_sends(
            data=data, rid=rid, upstream=upstream, timeout=None, token="none", task=False, now_form=True
        )

    @rule()
    def answers_taken_or_drained(self) -> None:
        """From now on upstream answers go through ``take_answer`` (the relay lane's), or ``upstream_data``."""
        self.take_answers = not self.take_answers

    @precondition(lambda self: self.open)
    @rule(data=st.data())
    def host_cancels(self, data: st.DataObject) -> None:
        call = data.draw(st.sampled_from(list(self.open.values())), label="call")
        del self.open[(call.host, call.rid)]
        call.state = "cancelled"
        self.router.host_cancelled(call.host, call.rid, "the user pressed stop")
        self.step()
        assert all(self.asks[i].state != "open" for i in call.asks), (
            "a cancelled call's questions are withdrawn"
        )

    @precondition(lambda self: len(self.live_hosts()) > 1)
    @rule(data=st.data())
    def host_closes(self, data: st.DataObject) -> None:
        host = data.draw(st.sampled_from(self.live_hosts()), label="host")
        self.closed.add(host)
        for key, call in list(self.open.items()):
            if call.host == host:
                del self.open[key]
                call.state = "dropped"
                for ask_id in list(call.asks):
                    self.asks[ask_id].state = "dropped"
                    self.settle(self.asks[ask_id])
        self.router.host_closed(host, self.now)
        self.step()

    @precondition(lambda self: self.open_asks())
    @rule(data=st.data(), wrong=st.sampled_from([None, None, "missing", "extra", "other host"]))
    def host_answers(self, data: st.DataObject, wrong: str | None) -> None:
        """The host answers a question; perhaps first wrongly, which is misuse and changes nothing."""
        ask = data.draw(st.sampled_from(self.open_asks()), label="question")
        if wrong is not None:
            self.misanswer(ask, wrong)
        self.host_answers_all(ask)

    @precondition(lambda self: self.open_asks())
    @rule(data=st.data())
    def host_refuses(self, data: st.DataObject) -> None:
        ask = data.draw(st.sampled_from(self.open_asks()), label="question")
        call = ask.call
        if ask.question is not None:
            self.expect_response[(call.upstream, ask.question)] = lambda frame: frame.get("error") == REFUSAL
        else:  # a round cannot be retried without its answers: the call ends with the refusal
            self.expect_answer[call.serial] = lambda answer: answer.error == REFUSAL
        ask.state = "refused"
        self.settle(ask)
        self.router.host_refused(call.host, ask.ask_id, REFUSAL, now=self.now)
        self.step()

    def misanswer(self, ask: Ask, how: str) -> None:
        host = ask.call.host
        answers = {key: host_answer(method, host) for key, method in ask.methods.items()}
        if how == "missing":
            answers.popitem()
        elif how == "extra":
            answers["not-asked"] = {"roots": []}
        else:
            host = next(h for h in self.hosts if h != host)
        before = self.router.questions_out
        with pytest.raises(LocalProtocolError):
            self.router.host_answered(host, ask.ask_id, answers, now=self.now)
        assert self.router.next_actions() == [] and self.router.questions_out == before

    # -- upstreams ------------------------------------------------------------------------------------

    @precondition(lambda self: self.wires("pending"))
    @rule(
        data=st.data(),
        kind=st.sampled_from(["complete", "complete", "error", "task", "round", "round", "bad"]),
    )
    def upstream_answers(self, data: st.DataObject, kind: str, late: bool = False) -> None:
        """Any pending request, in any order; ``late``: at its call's deadline, the timer not handled yet."""
        fake, wire = data.draw(st.sampled_from(self.wires("pending")), label="request")
        call = self.calls[wire.serial]
        self.be_late(call, late)
        if kind in ("round", "bad") and not fake.modern:
            kind = "complete"
        if kind == "complete":
            sent, relayed = result_for(fake, call)
            self.expect_answer[call.serial] = lambda answer: answer.result == relayed
        elif kind == "error":
            sent = None
            error = {"code": -32000, "message": f"no {call.serial}", "data": {"serial": call.serial}}
            self.expect_answer[call.serial] = lambda answer: answer.error == error
        elif kind == "task":
            sent = {"resultType": "task", "taskId": f"t{call.serial}", "status": "working", "ttl": 60000}
            if fake.modern and "extensions" in CAPS[call.caps]:  # handed over whole: the driver follows it
                self.expect_answer[call.serial] = lambda answer: answer.result == sent
            else:
                self.expect_answer[call.serial] = error_like(-32603, "unknown resultType")
        elif kind == "bad":
            call.rounds += 1
            sent = {"resultType": "input_required", "inputRequests": {"x": {"params": {}}}}
            self.expect_answer[call.serial] = (
                error_like(-32603, f"more than {MAX_ROUNDS} times in one call")
                if call.rounds > MAX_ROUNDS
                else error_like(-32602, "names no method")
            )
        else:
            sent = self.a_round(data, fake, call)
        wire.state = "input_required" if kind in ("round", "bad") else "answered"
        if sent is None:
            self.feed(fake, {"jsonrpc": "2.0", "id": wire.wire_id, "error": error})
        else:
            self.feed(fake, {"jsonrpc": "2.0", "id": wire.wire_id, "result": sent})
        self.step()

    @precondition(lambda self: self.wires("pending"))
    @rule(data=st.data(), late=st.sampled_from([False, False, False, True]))
    def upstream_completes(self, data: st.DataObject, late: bool) -> None:
        """The commonest answer of all; to a 2026-07-28 request, as often a round, perhaps after a deadline."""
        kind = data.draw(st.sampled_from(["complete", "round"]), label="kind")
        self.upstream_answers(data=data, kind=kind, late=late)

    def a_round(self, data: st.DataObject, fake: FakeUpstream, call: Call) -> dict[str, Any]:
        """An input_required result for ``call``, and what the router must do with it."""
        call.rounds += 1
        keys = ["e"]
        if data.draw(st.booleans(), label="roots"):
            keys.append("r")
        if "sampling" in CAPS[call.caps] and data.draw(st.booleans(), label="sampling"):
            keys.append("s")
        if data.draw(st.booleans(), label="another"):
            keys.append("e2")
        if data.draw(st.booleans(), label="only roots") and "r" in keys:
            keys = ["r"]
        method = {
            "e": "elicitation/create",
            "e2": "elicitation/create",
            "r": "roots/list",
            "s": "sampling/createMessage",
        }
        requests = {
            key: {"method": method[key], "params": question_params(method[key], f"{key}{call.serial}")}
            for key in keys
        }
        state = data.draw(st.sampled_from([None, f"state/{call.serial}/{call.rounds}=="]), label="state")
        sent: dict[str, Any] = {"resultType": "input_required", "inputRequests": requests}
        if state is not None:
            sent["requestState"] = state
        own = {key: {"roots": []} for key in keys if key == "r" and not call.roots}
        asked = {key: item for key, item in requests.items() if key not in own}
        if call.rounds > MAX_ROUNDS:
            self.expect_answer[call.serial] = error_like(-32603, f"more than {MAX_ROUNDS} times in one call")
        elif not asked:  # mcpx answers it all: the retry goes out at once
            self.expect_retry[call.serial] = (own, state)
        elif len(asked) > MAX_QUESTIONS:
            self.expect_answer[call.serial] = error_like(-32603, "questions at once")
        elif call.overdue(self.now):
            self.expect_answer[call.serial] = timed_out(call.timeout or 0.0)
        else:
            self.expect_ask.append((call.host, call.rid, asked, None, own, state))
        return sent

    @precondition(lambda self: self.wires("cancelled", "answered", "input_required"))
    @rule(data=st.data())
    def upstream_answers_late(self, data: st.DataObject) -> None:
        """An answer to a request cancelled or answered already: nobody hears of it."""
        fake, wire = data.draw(st.sampled_from(self.wires("cancelled", "answered", "input_required")))
        sent, _ = result_for(fake, self.calls[wire.serial])
        self.feed(fake, {"jsonrpc": "2.0", "id": wire.wire_id, "result": sent})
        assert self.step() == []

    @precondition(lambda self: [w for _, w in self.wires("pending", "cancelled", "answered") if w.token])
    @rule(data=st.data())
    def upstream_reports_progress(self, data: st.DataObject) -> None:
        choices = [
            (f, w) for f, w in self.wires("pending", "cancelled", "answered", "input_required") if w.token
        ]
        fake, wire = data.draw(st.sampled_from(choices), label="request")
        call = self.calls[wire.serial]
        progress = fake.progress[wire.token] = fake.progress.get(wire.token, 0) + 1
        message = f"serial {call.serial}"
        if call.state == "open":  # to its host, under the host's own token
            params = {"progressToken": call.token, "progress": progress, "total": 100, "message": message}
            self.expect_note.append(
                NotifyHost(
                    host=call.host, request_id=call.rid, method="notifications/progress", params=params
                )
            )
        note = {"progressToken": wire.token, "progress": progress, "total": 100, "message": message}
        self.feed(fake, {"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
        self.step()

    @precondition(lambda self: self.fakes)
    @rule(data=st.data(), log=st.booleans())
    def upstream_notifies(self, data: st.DataObject, log: bool) -> None:
        """A log message reaches every host with a call on the upstream; a list change only the caller."""
        key = data.draw(st.sampled_from(sorted(self.fakes)), label="upstream")
        if log:
            method, params = (
                "notifications/message",
                {"level": "info", "logger": key, "data": {"n": self.now}},
            )
            for host in dict.fromkeys(c.host for c in self.calls_on(key)):
                self.expect_note.append(NotifyHost(host=host, request_id=None, method=method, params=params))
        else:
            method, params = "notifications/tools/list_changed", {}
        self.expect_heard.append(UpstreamNotification(upstream=key, method=method, params=params))
        self.feed(self.fakes[key], {"jsonrpc": "2.0", "method": method, "params": params})
        self.step()

    @precondition(lambda self: self.legacy_fakes())
    @rule(
        data=st.data(), method=st.sampled_from(QUESTION_METHODS), late=st.sampled_from([False, False, True])
    )
    def upstream_asks(self, data: st.DataObject, method: str, late: bool) -> None:
        """A legacy server request: asked of a host only when exactly one call runs on the connection.

        ``late``: it arrives at the deadline of a call on the connection, before the timer was handled.
        """
        busy = [key for key in self.legacy_fakes() if self.calls_on(key)]  # rather one with calls on it
        key = data.draw(st.sampled_from(busy or self.legacy_fakes()), label="upstream")
        fake = self.fakes[key]
        if self.calls_on(key):
            self.be_late(self.calls_on(key)[0], late)
        qid = f"q{next(fake.qids)}"
        params = question_params(method, f"{key}/{qid}")
        fake.questions[qid] = Question(qid=qid, method=method, params=params)
        on = self.calls_on(key)
        if not on:  # no call of the router's on it: one of the caller's own requests asks, if any
            self.expect_caller.append((key, qid))
            fake.questions[qid].state = "caller"
        elif len(on) != 1:
            self.expect_response[(key, qid)] = response_error(
                f"cannot tell which of its callers {method} is for"
            )
        elif method == "roots/list" and not on[0].roots:
            self.expect_response[(key, qid)] = lambda frame: frame.get("result") == {"roots": []}
        elif on[0].overdue(self.now):  # the driver is late: the call times out rather than ask
            self.expect_response[(key, qid)] = response_error("timed out")
            self.expect_answer[on[0].serial] = timed_out(on[0].timeout or 0.0)
        elif len(on[0].asks) >= MAX_QUESTIONS:
            self.expect_response[(key, qid)] = response_error("questions out already")
        else:
            self.expect_ask.append(
                (on[0].host, on[0].rid, {method: {"method": method, "params": params}}, qid, {}, None)
            )
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": qid, "method": method}
        if params:
            request["params"] = params
        self.feed(fake, request)
        self.step()

    @precondition(lambda self: self.pending_questions())
    @rule(data=st.data())
    def upstream_withdraws_question(self, data: st.DataObject) -> None:
        fake, question = data.draw(st.sampled_from(self.pending_questions()), label="question")
        question.state = "cancelled"
        ask = self.ask_of_question[(fake.key, question.qid)]
        self.may_withdraw.add(ask.ask_id)
        self.feed(
            fake,
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": question.qid}},
        )
        self.step()
        assert ask.state == "withdrawn", "the host is told the question is no longer wanted"

    @precondition(lambda self: self.fakes)
    @rule(data=st.data())
    def upstream_crashes(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.fakes)), label="upstream")
        reason = f"server {key!r} exited"
        for call in self.calls_on(key):
            self.expect_answer[call.serial] = lambda answer: (
                answer.error == {"code": -32603, "message": reason}
            )
        del self.fakes[key]  # anything sent to it now fails the drain
        self.router.upstream_lost(key, reason, self.now)
        self.step()
        assert key not in self.router.upstreams

    @precondition(lambda self: len(self.fakes) < len(UPSTREAMS))
    @rule(data=st.data())
    def upstream_comes_back(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(set(UPSTREAMS) - set(self.fakes))), label="upstream")
        self.fakes[key] = FakeUpstream(key)
        self.router.add_upstream(key, self.fakes[key].session)
        assert self.step() == []

    # -- time -----------------------------------------------------------------------------------------

    @rule(dt=st.sampled_from(STEPS), late=st.sampled_from([False, False, False, True]))
    def time_passes(self, dt: float, late: bool) -> None:
        self.advance(dt, late=late)

    def be_late(self, call: Call, late: bool) -> None:
        """The clock reaches ``call``'s deadline, and the driver has not handled its timer yet."""
        deadline = call.deadline()
        if late and deadline is not None and deadline > self.now:
            self.now = deadline

    def advance(self, dt: float, *, late: bool) -> None:
        """Move the clock; on time, every deadline on the way is handled when it falls due."""
        target = self.now + dt
        if not late:
            while (timer := self.router.get_timer()) is not None and timer <= target:
                self.now = max(self.now, timer)
                for call in self.open.values():
                    if call.overdue(self.now):
                        assert not call.asks, "a call with a question out has no deadline"
                        self.expect_answer[call.serial] = timed_out(call.timeout or 0.0)
                self.router.handle_timer(self.now)
                self.step()
                after = self.router.get_timer()
                assert after is None or after > self.now, f"timer {after} not after {self.now}"
        self.now = target

    # -- invariants -----------------------------------------------------------------------------------

    @invariant()
    def the_router_agrees_with_the_model(self) -> None:
        assert self.router.in_flight == len(self.open)
        assert self.router.questions_out == len(self.open_asks())
        deadlines = [d for c in self.open.values() if (d := c.deadline()) is not None]
        assert self.router.get_timer() == (min(deadlines) if deadlines else None)

    @invariant()
    def every_upstream_request_has_a_waiter_and_every_call_a_request(self) -> None:
        for key, fake in self.fakes.items():
            pending = [w.serial for w in fake.pending()]
            assert len(pending) == len(set(pending)), f"{key}: two attempts of one call pending"
            on = self.calls_on(key)
            in_round = {c.serial for c in on for i in c.asks if self.asks[i].question is None}
            assert set(pending) == {c.serial for c in on} - in_round, f"{key}: requests without a waiter"
            asked = {
                a.question for a in self.open_asks() if a.question is not None and a.call.upstream == key
            }
            assert {q.qid for q in fake.questions.values() if q.state == "pending"} == asked
            assert fake.session.in_flight == len(on) == self.router.calls_on(key)

    @invariant()
    def questions_out_belong_to_calls_in_flight(self) -> None:
        for ask in self.open_asks():
            assert ask.call.state == "open" and ask.call.host not in self.closed
            assert ask.ask_id in ask.call.asks and ask.call.since is None  # its clock stands still

    def teardown(self) -> None:
        # Everybody answers everything, until nothing is left to answer; then the clock runs out.
        for _ in range(4 * MAX_ROUNDS + 4):
            asks = self.open_asks()
            pending = self.wires("pending")
            if not asks and not pending:
                break
            for ask in asks:
                if ask.state == "open":
                    self.host_answers_all(ask)
            for fake, wire in self.wires("pending"):
                if fake.key in self.fakes and wire.state == "pending":
                    call = self.calls[wire.serial]
                    sent, relayed = result_for(fake, call)
                    self.expect_answer[call.serial] = lambda answer, relayed=relayed: answer.result == relayed
                    wire.state = "answered"
                    self.feed(fake, {"jsonrpc": "2.0", "id": wire.wire_id, "result": sent})
                    self.step()
        self.advance(10_000.0, late=False)
        assert self.open == {}, f"calls never answered: {list(self.open)}"
        assert self.open_asks() == [], "questions never settled"
        assert [w for _, w in self.wires("pending")] == []
        assert self.pending_questions() == []
        assert self.router.idle and self.router.in_flight == 0 and self.router.questions_out == 0
        assert self.router.get_timer() is None

    def host_answers_all(self, ask: Ask) -> None:
        call = ask.call
        answers = {key: host_answer(method, call.host) for key, method in ask.methods.items()}
        if ask.question is not None:
            (answer,) = answers.values()
            self.expect_response[(call.upstream, ask.question)] = lambda frame: frame.get("result") == answer
        else:
            self.expect_retry[call.serial] = ({**ask.own, **answers}, ask.request_state)
        ask.state = "answered"
        self.settle(ask)
        self.router.host_answered(call.host, ask.ask_id, answers, now=self.now)
        self.step()


RouterMachine.TestCase.settings = settings(stateful_step_count=100)
test_router_machine = RouterMachine.TestCase
