"""Questions a running call asks its client, in both eras: gates, signed state, parked calls.

One call can need an answer only its client has: a form filled in
(``elicitation/create``), a model's completion (``sampling/createMessage``),
the client's roots (``roots/list``).  The two eras ask differently (each
revision's client/elicitation, client/sampling and client/roots pages;
2026-07-28 basic/patterns/mrtr; spec/messages.md §5):

* **Legacy** peers are sent the question as a server request on a channel
  that can carry it (stdio, a legacy HTTP session's streams), and the call
  resumes with the answer.
* **2026-07-28** peers get ``resultType: "input_required"`` with
  ``inputRequests`` and a ``requestState``; the client asks its user and sends
  the same request again, with a new id, the answers in ``inputResponses`` and
  the state echoed.  Only ``tools/call``, ``prompts/get`` and
  ``resources/read`` may answer this way.

The call itself runs once: while a 2026-07-28 client is asking its user, the
call is *parked* here, keyed by a call id the state carries, and the retry
that brings the answers takes it over (spec/messages.md §5).

This module holds what both eras share and the session does not:

``question_refusal``
    Whether a question may be put to this client at all (spec/messages.md
    §5, the gates): declaring elicitation is not declaring sampling; form
    and URL elicitation are separate; ``sampling.tools`` and
    ``sampling.context`` gate the fields that need them; a revision that
    lacks the request never gets it.
``StateSigner``
    ``requestState`` = ``base64url(payload).base64url(HMAC-SHA256)`` under a
    key the caller supplies, carrying the call id, a binding (the method and a
    SHA-256 of the parameters without ``_meta``, ``inputResponses`` and
    ``requestState``), an expiry and the round count.  Tampered, expired and
    foreign states are refused; a state that verifies but was issued for
    another request is refused with a message that says so.
``RoundTable``
    The parked calls, their expiry (``proto.askTimeout``), and the state
    they were parked with.  Shared by every session of one server so a retry
    can arrive on any connection.

Time comes in as ``now``, the caller's monotonic clock, like every machine's.
A ``requestState``'s expiry is written and checked in wall-clock seconds, so
that replicas sharing a key agree on it: ``wall_offset`` (wall clock minus
``now``, given once) turns one into the other.  Keys and the instance id
come in from the caller.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from .revisions import Revision

__all__ = [
    "ASK_METHODS",
    "MRTR_METHODS",
    "ParkedCall",
    "Question",
    "RoundTable",
    "StateError",
    "StateSigner",
    "binding_of",
    "question_refusal",
]

MRTR_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The only requests a 2026-07-28 server may answer with ``input_required``."""

ASK_METHODS: Final = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})

_R25B: Final = Revision.V2025_06_18
_R25C: Final = Revision.V2025_11_25


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """One question: the key the client answers it under, and the request it stands for."""

    key: str
    method: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method not in ASK_METHODS:
            raise ValueError(f"a question is one of {sorted(ASK_METHODS)}, not {self.method!r}")
        if not self.key:
            raise ValueError("a question needs a non-empty key")

    def as_input_request(self) -> dict[str, Any]:
        """The question as a 2026-07-28 ``inputRequests`` entry."""
        params = dict(self.params)
        if self.method == "elicitation/create":
            params.pop("elicitationId", None)  # 2026-07-28 URL elicitation has no id
        return {"method": self.method, "params": params}


def question_refusal(question: Question, revision: Revision, caps: Mapping[str, Any]) -> str | None:
    """Why ``question`` may not be put to a client on ``revision`` declaring ``caps``; ``None`` if it may."""
    method, params = question.method, question.params
    if method == "elicitation/create":
        if revision < _R25B:
            return f"MCP {revision} has no elicitation; the client cannot be asked for input"
        declared = caps.get("elicitation")
        if not isinstance(declared, dict):
            return "the client did not declare the elicitation capability"
        mode = params.get("mode", "form")
        if revision < _R25C:
            return (
                None if mode == "form" else f"URL elicitation needs MCP 2025-11-25 or later, not {revision}"
            )
        offers_form = "form" in declared or not ({"form", "url"} & set(declared))
        if mode == "url":
            return (
                None if "url" in declared else "the client did not declare URL elicitation (elicitation.url)"
            )
        return (
            None if offers_form else "the client declared only URL elicitation, not forms (elicitation.form)"
        )
    if method == "sampling/createMessage":
        declared = caps.get("sampling")
        if not isinstance(declared, dict):
            return "the client did not declare the sampling capability"
        if ("tools" in params or "toolChoice" in params) and (revision < _R25C or "tools" not in declared):
            return "sampling with tools needs the client's sampling.tools capability"
        context = params.get("includeContext")
        if context in ("thisServer", "allServers") and revision >= _R25C and "context" not in declared:
            return f"includeContext {context!r} needs the client's sampling.context capability"
        return None
    if not isinstance(caps.get("roots"), dict):
        return "the client did not declare the roots capability"
    return None


def required_capability(question: Question) -> dict[str, Any]:
    """The ``ClientCapabilities`` fragment a question needs (for -32021's ``requiredCapabilities``)."""
    if question.method == "elicitation/create":
        mode = question.params.get("mode", "form")
        return {"elicitation": {mode: {}}}
    if question.method == "sampling/createMessage":
        if "tools" in question.params or "toolChoice" in question.params:
            return {"sampling": {"tools": {}}}
        return {"sampling": {}}
    return {"roots": {}}


def binding_of(method: str, params: Mapping[str, Any]) -> str:
    """SHA-256 over the method and the parameters that identify the request.

    ``_meta``, ``inputResponses`` and ``requestState`` change between a
    request and its retries, so they are left out; keys are sorted so the
    same parameters always hash alike.
    """
    core = {k: v for k, v in params.items() if k not in ("_meta", "inputResponses", "requestState")}
    digest = hashlib.sha256(method.encode() + b"\0" + orjson.dumps(core, option=orjson.OPT_SORT_KEYS))
    return digest.hexdigest()


class StateError(Exception):
    """A ``requestState`` that cannot be accepted; ``message`` says why, for the client."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind  # malformed | tampered | expired | foreign | unknown-call | rounds


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True, kw_only=True)
class StatePayload:
    call: str
    binding: str
    expires: float
    round: int


class StateSigner:
    """Signs and verifies ``requestState`` with HMAC-SHA256 under ``key``."""

    VERSION: Final = 1

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("a requestState key needs at least 16 bytes")
        self._key = key

    def _mac(self, payload_b64: str) -> str:
        return _b64(hmac.new(self._key, payload_b64.encode("ascii"), hashlib.sha256).digest())

    def sign(self, payload: StatePayload) -> str:
        body = {
            "v": self.VERSION,
            "c": payload.call,
            "b": payload.binding,
            "e": payload.expires,
            "r": payload.round,
        }
        payload_b64 = _b64(orjson.dumps(body))
        return f"{payload_b64}.{self._mac(payload_b64)}"

    def verify(self, state: Any, *, binding: str, now: float) -> StatePayload:
        """The payload of a valid ``state`` for a request with ``binding``; ``StateError`` otherwise."""
        if not isinstance(state, str) or state.count(".") != 1:
            raise StateError("requestState is not a state this server issued", kind="malformed")
        payload_b64, mac = state.split(".")
        if not state.isascii() or not hmac.compare_digest(
            mac.encode("ascii"), self._mac(payload_b64).encode("ascii")
        ):
            raise StateError(
                "requestState failed its integrity check (it was altered or not issued here)", kind="tampered"
            )
        try:
            body = orjson.loads(_unb64(payload_b64))
            payload = StatePayload(
                call=str(body["c"]), binding=str(body["b"]), expires=float(body["e"]), round=int(body["r"])
            )
            if body.get("v") != self.VERSION:
                raise ValueError
        except (ValueError, KeyError, TypeError, binascii.Error, orjson.JSONDecodeError):
            raise StateError("requestState is not a state this server issued", kind="malformed") from None
        if now >= payload.expires:
            raise StateError("requestState has expired; call again without it", kind="expired")
        if not hmac.compare_digest(payload.binding.encode(), binding.encode()):
            raise StateError(
                "requestState was issued for a different request (its method or parameters differ); "
                "send it only with the request it came back for",
                kind="foreign",
            )
        return payload


@dataclass(slots=True)
class ParkedCall:
    """A call waiting for a 2026-07-28 client to come back with answers."""

    call_id: str
    token: int  # the call's token: the driver's handler still runs under it
    method: str
    binding: str
    ask_id: int
    questions: dict[str, Question]
    round: int
    expires: float  # proto.askTimeout: when the call is given up
    state: str
    answered: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # answers already in hand
    held: dict[str, Any] = field(default_factory=dict)  # answers sent ahead, for questions not yet asked


class RoundTable:
    """Parked calls, shared by every session of one server (a retry may come on any connection)."""

    def __init__(
        self,
        *,
        key: bytes,
        instance: str,
        state_ttl: float = 1800.0,
        ask_timeout: float = 600.0,
        max_rounds: int = 8,
        wall_offset: float = 0.0,
    ) -> None:
        self.signer = StateSigner(key)
        self.wall_offset = wall_offset
        self.instance = instance
        self.state_ttl = state_ttl
        self.ask_timeout = ask_timeout
        self.max_rounds = max_rounds
        self._ids: Iterator[int] = itertools.count(1)
        self._parked: dict[str, ParkedCall] = {}
        self._by_token: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self._parked)

    def park(
        self,
        *,
        token: int,
        method: str,
        params: Mapping[str, Any],
        ask_id: int,
        questions: list[Question],
        round: int,
        now: float,
    ) -> ParkedCall:
        """Park call ``token`` behind ``questions``; the returned record carries the state to send."""
        if round > self.max_rounds:
            raise StateError(
                f"the call asked for input more than {self.max_rounds} times (proto.askRounds); it was stopped",
                kind="rounds",
            )
        call_id = self._by_token.get(token) or f"{self.instance}-{next(self._ids)}"
        binding = binding_of(method, params)
        expires = now + self.wall_offset + self.state_ttl  # wall clock: another replica checks it
        state = self.signer.sign(StatePayload(call=call_id, binding=binding, expires=expires, round=round))
        parked = ParkedCall(
            call_id=call_id,
            token=token,
            method=method,
            binding=binding,
            ask_id=ask_id,
            questions={q.key: q for q in questions},
            round=round,
            expires=now + self.ask_timeout,
            state=state,
        )
        self._parked[call_id] = parked
        self._by_token[token] = call_id
        return parked

    def resume(self, state: Any, *, method: str, params: Mapping[str, Any], now: float) -> ParkedCall:
        """The parked call a retry's ``requestState`` names, taken off the table."""
        payload = self.signer.verify(state, binding=binding_of(method, params), now=now + self.wall_offset)
        parked = self._parked.get(payload.call)
        if parked is None:
            raise StateError(
                "requestState is valid but the call it resumes is no longer held here (it timed out, was "
                "cancelled, or ran on another server); call again without requestState",
                kind="unknown-call",
            )
        if parked.state != state:
            raise StateError(
                "requestState is from an earlier round of this call; send the latest one", kind="foreign"
            )
        del self._parked[payload.call]
        return parked

    def forget(self, token: int) -> ParkedCall | None:
        """Drop call ``token`` (finished or cancelled)."""
        call_id = self._by_token.pop(token, None)
        return self._parked.pop(call_id, None) if call_id is not None else None

    @property
    def holds_calls(self) -> bool:
        """Whether any call is parked (then the table has a timer)."""
        return bool(self._parked)

    def get_timer(self) -> float | None:
        return min((p.expires for p in self._parked.values()), default=None)

    def expire(self, now: float) -> list[ParkedCall]:
        """Calls whose client never came back within ``ask_timeout``: removed and returned."""
        gone = [p for p in self._parked.values() if now >= p.expires]
        for parked in gone:
            del self._parked[parked.call_id]
            self._by_token.pop(parked.token, None)
        return gone
