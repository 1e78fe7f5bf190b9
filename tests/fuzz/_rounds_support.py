"""Pieces of tests/fuzz/test_rounds.py: ``requestState`` mutations, question templates, wire helpers.

A mutation is plain data (a tuple naming what to do and with what), so a
failing example prints as something a person can replay by hand; ``apply``
turns it into the candidate state, the ``verify`` arguments and the
``StateError.kind`` it must earn (``None`` where the kind is not predictable).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import strategies as st

from mcpx.core.rounds import Question, StatePayload, StateSigner, binding_of

# ----------------------------------------------------------------------------
# base64url and states
# ----------------------------------------------------------------------------

B64URL = string.ascii_letters + string.digits + "-_"
# Characters outside the base64url alphabet a state could meet on the way: the
# standard alphabet, padding, the separator, whitespace, NUL, percent-encoding,
# non-ASCII (Latin-1, BMP, astral, a combining mark, a lone surrogate).
OUTSIDE = [
    "+",
    "/",
    "=",
    ".",
    " ",
    "\n",
    "\t",
    "\x00",
    "%",
    "ü",
    "é",
    "€",
    "\u2028",
    "😀",
    "\u0301",
    "\ud800",
]
CHARS = st.sampled_from(list(B64URL)) | st.sampled_from(OUTSIDE)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mac_for(key: bytes, payload_b64: str) -> str:
    """The MAC ``StateSigner`` puts after the dot, computed here independently."""
    return b64(hmac.new(key, payload_b64.encode("ascii"), hashlib.sha256).digest())


def signed_with(key: bytes, payload_b64: str) -> str:
    return f"{payload_b64}.{mac_for(key, payload_b64)}"


def shape_kind(candidate: Any) -> str:
    """What a string that is not the genuine state earns by its shape: one dot or not."""
    if not isinstance(candidate, str) or candidate.count(".") != 1:
        return "malformed"
    return "tampered"


@dataclass(frozen=True)
class Case:
    """One genuine state and everything needed to verify it."""

    key: bytes
    payload: StatePayload
    method: str
    params: dict[str, Any]
    now: float  # a time before expiry
    other: StatePayload  # a second payload for splicing (signed with the same key)
    other_key: bytes

    @property
    def signer(self) -> StateSigner:
        return StateSigner(self.key)

    @property
    def binding(self) -> str:
        return binding_of(self.method, self.params)

    @property
    def state(self) -> str:
        return self.signer.sign(self.payload)


# ----------------------------------------------------------------------------
# Strategies for a genuine case
# ----------------------------------------------------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_SMALL_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)
METHODS = ["tools/call", "prompts/get", "resources/read", "completion/complete", "tools/list"]
IGNORED_IN_BINDING = ("_meta", "inputResponses", "requestState")
_PARAMS = st.dictionaries(_TEXT.filter(lambda k: k not in IGNORED_IN_BINDING), _SMALL_JSON, max_size=4)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    key = draw(st.binary(min_size=16, max_size=48))
    other_key = draw(st.binary(min_size=16, max_size=48).filter(lambda k: k != key))
    method = draw(st.sampled_from(METHODS))
    params = draw(_PARAMS)
    binding = binding_of(method, params)
    expires = draw(st.integers(min_value=1, max_value=2**40)) + draw(st.sampled_from([0.0, 0.5, 0.125]))
    now = draw(st.floats(min_value=0.0, max_value=expires, exclude_max=True))
    call = draw(st.sampled_from(["fz-1", "a1b2c3d4e5f6-17"]) | _TEXT)
    payload = StatePayload(
        call=call, binding=binding, expires=expires, round=draw(st.integers(min_value=0, max_value=2**31))
    )
    other = StatePayload(
        call=draw(st.sampled_from([call, call + "x", "fz-2"])),
        binding=draw(st.sampled_from([binding, binding_of("tools/call", {})])),
        expires=draw(st.sampled_from([expires, expires + 1, expires * 2])),
        round=draw(st.sampled_from([payload.round, payload.round + 1])),
    )
    return Case(
        key=key, payload=payload, method=method, params=params, now=now, other=other, other_key=other_key
    )


# ----------------------------------------------------------------------------
# Mutations
# ----------------------------------------------------------------------------

_POS = st.integers(min_value=0, max_value=10**6)
# ("field", name, value): a field of the decoded payload set to value (or
# removed), re-encoded, and sent with the original MAC.
_FIELD_VALUES: list[Any] = [
    None,
    0,
    1,
    -1,
    2,
    1.5,
    "1",
    "",
    "x",
    True,
    False,
    [],
    {},
    [1],
    {"c": "x"},
    2**63,
    1e308,
]
_FIELDS = ["v", "c", "b", "e", "r", "x", "V", "_"]
# Bodies signed with the right key that still must be refused as malformed.
SIGNED_MALFORMED = [
    "",
    "A",
    "AB",
    b64(b"[1]"),
    b64(b'"x"'),
    b64(b"null"),
    b64(b"\xff\xfe"),
    b64(b"{}"),
    b64(b"{"),
    "e30!",  # "{}" plus a character outside the alphabet
    b64(orjson.dumps({"v": 2, "c": "c", "b": "b", "e": 9e9, "r": 1})),
    b64(orjson.dumps({"v": 0, "c": "c", "b": "b", "e": 9e9, "r": 1})),
    b64(orjson.dumps({"v": "1", "c": "c", "b": "b", "e": 9e9, "r": 1})),
    b64(orjson.dumps({"c": "c", "b": "b", "e": 9e9, "r": 1})),
    b64(orjson.dumps({"v": 1, "b": "b", "e": 9e9, "r": 1})),
    b64(orjson.dumps({"v": 1, "c": "c", "e": 9e9, "r": 1})),
    b64(orjson.dumps({"v": 1, "c": "c", "b": "b", "r": 1})),
    b64(orjson.dumps({"v": 1, "c": "c", "b": "b", "e": 9e9})),
    b64(orjson.dumps({"v": 1, "c": "c", "b": "b", "e": None, "r": 1})),
    b64(orjson.dumps({"v": 1, "c": "c", "b": "b", "e": "soon", "r": 1})),
    b64(orjson.dumps({"v": 1, "c": "c", "b": "b", "e": 9e9, "r": "x"})),
    b64(orjson.dumps({"v": 1, "c": "c", "b": "b", "e": 9e9, "r": None})),
    b64(orjson.dumps({"v": 1, "c": "c", "b": "b", "e": [], "r": 1})),
    b64(b'{"v":1,"c":"c","b":"b","e":1e400,"r":1}'),  # orjson refuses the overflow
]
NOT_STRINGS: list[Any] = [None, 0, 1.5, True, [], {}, ["a.b"], {"state": "a.b"}, b"a.b"]

MUTATIONS = st.one_of(
    st.tuples(st.just("replace"), _POS, CHARS, st.booleans()),
    st.tuples(st.just("insert"), _POS, CHARS, st.booleans()),
    st.tuples(st.just("delete"), _POS, st.integers(min_value=1, max_value=5), st.booleans()),
    st.tuples(st.just("truncate"), _POS, st.booleans()),
    st.tuples(st.just("append"), st.text(CHARS, min_size=1, max_size=4), st.booleans()),
    st.tuples(st.just("prepend"), st.text(CHARS, min_size=1, max_size=4), st.booleans()),
    st.tuples(st.just("dot"), st.sampled_from(["swap", "drop", "double", "move", "lead", "trail"]), _POS),
    st.tuples(st.just("field"), st.sampled_from(_FIELDS), st.sampled_from(_FIELD_VALUES)),
    st.tuples(st.just("drop-field"), st.sampled_from(["v", "c", "b", "e", "r"])),
    st.tuples(st.just("re-encode"), st.sampled_from(["sorted", "spaced", "padded", "standard", "reversed"])),
    st.tuples(st.just("shift"), st.sampled_from(["c", "b", "e", "r"]), st.sampled_from([-1, 1])),
    st.tuples(st.just("splice"), st.sampled_from(["other-mac", "other-payload"])),
    st.tuples(st.just("foreign-key"), st.sampled_from(["same-payload", "edited-payload"])),
    st.tuples(st.just("binding"), st.sampled_from(["method", "add", "drop", "change", "nest"])),
    st.tuples(st.just("expired"), st.sampled_from([0.0, 0.001, 1.0, 1e6])),
    st.tuples(st.just("signed-malformed"), st.sampled_from(SIGNED_MALFORMED)),
    st.tuples(st.just("not-a-string"), st.sampled_from(NOT_STRINGS)),
    st.tuples(st.just("twice"), _POS, CHARS, _POS),
)


@dataclass(frozen=True)
class Attempt:
    """What one mutation makes: verify ``state`` with these arguments; it must raise ``kind``."""

    state: Any
    binding: str
    now: float
    kind: str | None


def _late(case: Case, late: bool) -> float:
    return case.payload.expires + 1.0 if late else case.now


def _body(case: Case) -> dict[str, Any]:
    payload_b64 = case.state.split(".")[0]
    body = orjson.loads(unb64(payload_b64))
    assert isinstance(body, dict)
    return body


def _with_original_mac(case: Case, payload_b64: str) -> str:
    return f"{payload_b64}.{case.state.split('.')[1]}"


def _other_binding(case: Case, how: str) -> str:
    method, params = case.method, dict(case.params)
    if how == "method":
        method = next(m for m in METHODS if m != method)
    elif how == "add":
        params["zz-added"] = 1 if params.get("zz-added") != 1 else 2
    elif how == "drop" and params:
        params.pop(next(iter(params)))
    elif how == "nest":
        params = {"arguments": params} if params != {"arguments": params} else {}
    else:  # change one value (or add one when there is none)
        name = next(iter(params), "name")
        params[name] = ["changed", params.get(name)]
    return binding_of(method, params)


def apply(case: Case, mutation: tuple[Any, ...]) -> Attempt | None:
    """The attempt ``mutation`` makes of ``case``; ``None`` when it would not change anything."""
    state = case.state
    kind = mutation[0]
    n = len(state)
    if kind in ("replace", "insert", "delete", "truncate", "append", "prepend", "twice"):
        if kind == "replace":
            _, pos, ch, late = mutation
            i = pos % n
            candidate = state[:i] + ch + state[i + 1 :]
        elif kind == "insert":
            _, pos, ch, late = mutation
            i = pos % (n + 1)
            candidate = state[:i] + ch + state[i:]
        elif kind == "delete":
            _, pos, size, late = mutation
            i = pos % n
            candidate = state[:i] + state[i + size :]
        elif kind == "truncate":
            _, pos, late = mutation
            candidate = state[: pos % n]
        elif kind == "append":
            _, text, late = mutation
            candidate = state + text
        elif kind == "prepend":
            _, text, late = mutation
            candidate = text + state
        else:  # two edits: a replacement and a deletion
            _, pos, ch, pos2 = mutation
            i = pos % n
            candidate = state[:i] + ch + state[i + 1 :]
            j = pos2 % len(candidate)
            candidate = candidate[:j] + candidate[j + 1 :]
            late = False
        if candidate == state:
            return None
        # A broken state is refused for what it is, whatever the clock says.
        return Attempt(candidate, case.binding, _late(case, late), shape_kind(candidate))
    if kind == "dot":
        _, how, pos = mutation
        payload_b64, mac = state.split(".")
        if how == "swap":
            candidate = f"{mac}.{payload_b64}"
        elif how == "drop":
            candidate = payload_b64 + mac
        elif how == "double":
            candidate = f"{payload_b64}..{mac}"
        elif how == "lead":
            candidate = "." + state
        elif how == "trail":
            candidate = state + "."
        else:  # the dot moved elsewhere
            joined = payload_b64 + mac
            i = pos % (len(joined) + 1)
            candidate = joined[:i] + "." + joined[i:]
        if candidate == state:
            return None
        return Attempt(candidate, case.binding, case.now, shape_kind(candidate))
    if kind in ("field", "drop-field", "re-encode", "shift"):
        body = _body(case)
        if kind == "field":
            _, name, value = mutation
            if name in body and type(body[name]) is type(value) and body[name] == value:
                return None
            body[name] = value
            payload_b64 = b64(orjson.dumps(body))
        elif kind == "drop-field":
            body.pop(mutation[1])
            payload_b64 = b64(orjson.dumps(body))
        elif kind == "shift":
            _, name, delta = mutation
            value = body[name]
            if isinstance(value, str):
                body[name] = value + "0" if delta > 0 else value[:-1]
            else:
                body[name] = value + delta
            payload_b64 = b64(orjson.dumps(body))
        else:
            how = mutation[1]
            raw = orjson.dumps(body)
            if how == "sorted":
                raw = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
            elif how == "spaced":
                raw = json.dumps(body, ensure_ascii=False).encode()
            elif how == "reversed":
                raw = orjson.dumps(dict(reversed(list(body.items()))))
            payload_b64 = b64(raw)
            if how == "padded":
                payload_b64 += "=" * (-len(payload_b64) % 4) or "=="
            elif how == "standard":
                payload_b64 = base64.b64encode(raw).rstrip(b"=").decode("ascii")
        candidate = _with_original_mac(case, payload_b64)
        if candidate == state:
            return None
        return Attempt(candidate, case.binding, case.now, "tampered")
    if kind == "splice":
        other = StateSigner(case.key).sign(case.other)
        if other == state:
            return None
        mine, theirs = state.split("."), other.split(".")
        candidate = f"{mine[0]}.{theirs[1]}" if mutation[1] == "other-mac" else f"{theirs[0]}.{mine[1]}"
        if candidate in (state, other):
            return None
        return Attempt(candidate, case.binding, case.now, "tampered")
    if kind == "foreign-key":
        payload = case.payload
        if mutation[1] == "edited-payload":
            payload = StatePayload(
                call=payload.call + "x", binding=payload.binding, expires=payload.expires, round=payload.round
            )
        return Attempt(StateSigner(case.other_key).sign(payload), case.binding, case.now, "tampered")
    if kind == "binding":
        other = _other_binding(case, mutation[1])
        if other == case.binding:
            return None
        return Attempt(state, other, case.now, "foreign")
    if kind == "expired":
        return Attempt(state, case.binding, case.payload.expires + mutation[1], "expired")
    if kind == "signed-malformed":
        return Attempt(signed_with(case.key, mutation[1]), case.binding, case.now, "malformed")
    if kind == "not-a-string":
        return Attempt(mutation[1], case.binding, case.now, "malformed")
    raise AssertionError(f"unknown mutation {mutation!r}")


# ----------------------------------------------------------------------------
# The state machine's vocabulary
# ----------------------------------------------------------------------------

PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
MODERN = "2026-07-28"
LEGACY_VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
CALL_METHODS = ["tools/call", "prompts/get", "resources/read", "completion/complete"]
KEYS = ["a", "b", "c", "ü"]

_FORM = {
    "message": "Your name?",
    "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}},
}
TEMPLATES: dict[str, tuple[str, dict[str, Any]]] = {
    "form": ("elicitation/create", _FORM),
    "form-mode": ("elicitation/create", {"mode": "form", **_FORM}),
    "url": (
        "elicitation/create",
        {"mode": "url", "message": "Sign in", "url": "https://example.com/x", "elicitationId": "e1"},
    ),
    "sample": ("sampling/createMessage", {"messages": [], "maxTokens": 5}),
    "sample-tools": ("sampling/createMessage", {"messages": [], "maxTokens": 5, "tools": []}),
    "sample-context": (
        "sampling/createMessage",
        {"messages": [], "maxTokens": 5, "includeContext": "thisServer"},
    ),
    "roots": ("roots/list", {}),
}


def question(key: str, template: str) -> Question:
    method, params = TEMPLATES[template]
    return Question(key=key, method=method, params=params)


QUESTIONS = st.lists(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(sorted(TEMPLATES))),
    min_size=1,
    max_size=3,
    unique_by=lambda pair: pair[0],
)

_ELICITATION = st.sampled_from([{}, {"form": {}}, {"url": {}}, {"form": {}, "url": {}}, True])
_SAMPLING = st.sampled_from([{}, {"tools": {}}, {"context": {}}, {"tools": {}, "context": {}}])
EVERYTHING = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}, "context": {}},
    "roots": {"listChanged": True},
}
# Mostly a client that declares everything (so questions go out), else any subset.
CLIENT_CAPS = st.one_of(
    st.just(EVERYTHING),
    st.just(EVERYTHING),
    st.fixed_dictionaries(
        {},
        optional={
            "elicitation": _ELICITATION,
            "sampling": _SAMPLING,
            "roots": st.just({"listChanged": True}),
        },
    ),
)

ANSWER_VALUES = st.sampled_from(
    [
        {"action": "accept", "content": {"n": "Ada"}},
        {"action": "decline"},
        {"roots": []},
        {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"},
        {},
    ]
)
AHEAD = st.none() | st.dictionaries(st.sampled_from([*KEYS, "zz"]), ANSWER_VALUES, min_size=1, max_size=3)


def call_params(method: str, n: int) -> dict[str, Any]:
    """Parameters unique to call ``n``, so no two calls share a binding."""
    if method == "tools/call":
        return {"name": "t", "arguments": {"n": n}}
    if method == "prompts/get":
        return {"name": "p", "arguments": {"n": str(n)}}
    if method == "resources/read":
        return {"uri": f"file:///{n}"}
    return {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": str(n)}}


def final_result(method: str) -> dict[str, Any]:
    if method == "tools/call":
        return {"content": [{"type": "text", "text": "done"}]}
    if method == "prompts/get":
        return {"messages": []}
    if method == "resources/read":
        return {"contents": []}
    return {"completion": {"values": []}}


def wire(obj: Any) -> Any:
    """``obj`` as a transport would hand it over: serialised and read back."""
    return orjson.loads(orjson.dumps(obj))


def expected_question_params(q: Question, legacy_revision: str) -> Mapping[str, Any]:
    """What a legacy server request carries: 2025-06-18 and older know no ``mode``."""
    params = dict(q.params)
    if q.method == "elicitation/create" and legacy_revision < "2025-11-25":
        params.pop("mode", None)
    return params
