"""Properties of the era probe and its cache, with a fake clock (spec/era-probe.md).

The oracle for a single answer to ``server/discover`` is the table in
spec/era-probe.md, written out again here as ``expected_after_discover``:
a DiscoverResult (read from ``supportedVersions``) or a recognised modern
error keeps the modern era; everything else goes to ``initialize``.
Checked:

* every kind of legacy answer, over stdio and over HTTP, whole or in pieces,
  leads to ``initialize`` — never keyed to one error code;
* every recognised modern error keeps the modern era (never ``initialize``);
* whatever a server (or a well-behaved driver reporting a badly-behaved
  server) does, the probe raises nothing, always has a timer armed while it
  waits, sends at most ``max_requests`` requests, and ends — within a bounded
  number of timer firings — in ``ProbeDone`` or ``ProbeFailed``; a cached
  entry is ``confirmed`` exactly when the era it named is the outcome;
* the cache's bytes round-trip, its keys ignore key order, and no bytes
  make ``from_bytes`` raise.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import orjson
from hypothesis import event, given
from hypothesis import strategies as st

from mcpx.core.probe import (
    CloseResponse,
    EraCache,
    EraEntry,
    EraProbe,
    HttpAnswered,
    HttpBody,
    HttpRequest,
    LineReceived,
    MessageReceived,
    OpenSse,
    ProbeAction,
    ProbeConfig,
    ProbeDone,
    ProbeFailed,
    Reconnect,
    SendMessage,
    TransportClosed,
)
from mcpx.core.revisions import REVISIONS, Revision

from ._examples import tick

CONFIG = ProbeConfig(client_info={"name": "fuzz", "version": "0"}, capabilities={"roots": {}})
MODERN = "2026-07-28"
LEGACY = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]  # newest first, as mcpx prefers
SPOKEN = {str(r) for r in REVISIONS}
ACTION_TYPES = (SendMessage, HttpRequest, OpenSse, CloseResponse, Reconnect, ProbeDone, ProbeFailed)

# ----------------------------------------------------------------------------
# Strategies
# ----------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
version_strings = st.sampled_from([*SPOKEN, "2099-01-01", "", "2026-07-28 ", "draft"])
version_lists = st.one_of(
    st.lists(version_strings, max_size=4),
    st.lists(st.one_of(version_strings, st.integers(), st.none()), max_size=3),
    json_values,
)
codes = st.one_of(
    st.sampled_from(
        [-32700, -32600, -32601, -32602, -32603, -32000, -32001, -32002, -32020, -32021, -32022, -32042]
    ),
    st.integers(min_value=-(2**40), max_value=2**40),
)
error_data = st.one_of(
    st.none(),
    json_values,
    st.fixed_dictionaries({"supported": version_lists}, optional={"requested": st.just(MODERN)}),
    st.fixed_dictionaries(
        {"requiredCapabilities": st.one_of(st.dictionaries(st.text(max_size=5), st.just({})), json_values)}
    ),
)
results = st.one_of(
    st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    st.fixed_dictionaries(
        {"supportedVersions": version_lists},
        optional={"capabilities": json_values, "protocolVersions": st.just([MODERN])},
    ),
)


@st.composite
def discover_answers(draw: st.DrawFn) -> tuple[str, Any, Any]:
    """``("result", result, None)`` or ``("error", code, data)``."""
    if draw(st.booleans()):
        return ("result", draw(results), None)
    return ("error", draw(codes), draw(error_data))


def _listed(value: Any) -> list[str] | None:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    return None


def expected_after_discover(kind: str, first: Any, data: Any) -> tuple[str, str | None]:
    """The table of spec/era-probe.md for one answer to ``server/discover`` as 2026-07-28.

    ``("modern", None)``, ``("initialize", offer)`` or ``("failed", None)``.
    """
    if kind == "result":
        listed = _listed(first.get("supportedVersions"))
        if listed is None:
            return ("initialize", LEGACY[0])
        if MODERN in listed:
            return ("modern", None)
    else:
        code = first
        listed = _listed(data.get("supported")) if isinstance(data, dict) else None
        if code == -32022 and listed is not None:
            pass  # the list decides, below; MODERN was tried already, so it cannot be retried
        elif code == -32020 or (
            code == -32021 and isinstance(data, dict) and isinstance(data.get("requiredCapabilities"), dict)
        ):
            return ("modern", None)
        else:
            return ("initialize", LEGACY[0])
    legacy = [v for v in LEGACY if v in listed]
    return ("initialize", legacy[0]) if legacy else ("failed", None)


def is_legacy_answer(answer: tuple[str, Any, Any]) -> bool:
    return expected_after_discover(*answer)[0] == "initialize"


modern_errors = st.one_of(
    st.tuples(st.just("error"), st.just(-32020), error_data),
    st.tuples(
        st.just("error"),
        st.just(-32021),
        st.fixed_dictionaries(
            {"requiredCapabilities": st.dictionaries(st.text(max_size=5), st.just({}), max_size=2)},
            optional={"other": json_values},
        ),
    ),
    st.tuples(
        st.just("error"),
        st.just(-32022),
        st.fixed_dictionaries(
            {
                "supported": st.lists(
                    st.sampled_from([MODERN, "2099-01-01", "draft", ""]), min_size=1, max_size=3
                )
            },
            optional={"requested": st.just(MODERN)},
        ),
    ),
)
"""Recognised modern errors that name no legacy revision: the probe must not fall back."""


def as_message(answer: tuple[str, Any, Any], request_id: Any) -> dict[str, Any]:
    kind, first, data = answer
    if kind == "result":
        return {"jsonrpc": "2.0", "id": request_id, "result": first}
    error: dict[str, Any] = {"code": first, "message": "from the fuzzer"}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def encoded(value: Any) -> bytes | None:
    try:
        return orjson.dumps(value)
    except TypeError:  # an integer beyond 64 bits
        return None


def wire(value: Any) -> bytes:
    """JSON text for any value here, huge integers included (orjson reads those back as floats)."""
    return json.dumps(value).encode()


def chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(c, 0), len(data)) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


# ----------------------------------------------------------------------------
# A checking driver
# ----------------------------------------------------------------------------


class Driver:
    """Runs a probe with a fake clock and checks the invariants after every input."""

    def __init__(self, transport: str, cached: EraEntry | None = None, config: ProbeConfig = CONFIG) -> None:
        self.probe = EraProbe(config, transport=transport, path="/mcp", sse_path="/sse", cached=cached)  # type: ignore[arg-type]
        self.config = config
        self.now = 0.0
        self.requests: list[Any] = []  # what was sent: messages (stdio) or HttpRequest/OpenSse
        self.open: dict[int, bool] = {}  # token -> head reported? (for the driver's contract)
        self.complete: set[int] = set()
        self.closed: set[int] = set()
        self.history: list[ProbeAction] = []
        self.probe.start(self.now)
        self.drain()

    def drain(self) -> list[ProbeAction]:
        actions = self.probe.next_actions()
        for action in actions:
            assert isinstance(action, ACTION_TYPES), action
            assert not any(isinstance(a, ProbeDone | ProbeFailed) for a in self.history), (
                "an action after the outcome"
            )
            if isinstance(action, SendMessage):
                message = action.message
                if "method" in message and "id" in message:
                    self.requests.append(message)
            elif isinstance(action, HttpRequest | OpenSse):
                assert action.token not in self.open
                self.open[action.token] = False
                if isinstance(action, OpenSse) or "id" in action.message:
                    self.requests.append(action)
            elif isinstance(action, CloseResponse):
                self.closed.add(action.token)
            self.history.append(action)
        self.check()
        return actions

    def check(self) -> None:
        outcome = self.probe.outcome
        if outcome is None:
            timer = self.probe.get_timer()
            assert timer is not None, "waiting without a timer"
            assert timer > self.now - 1e-9 or timer <= self.now  # a number
        else:
            assert self.probe.get_timer() is None
            assert self.history[-1] is outcome
            assert outcome.trace
        assert len(self.requests) <= self.config.max_requests

    # inputs -----------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.probe.handle_timer(self.now)
        self.drain()

    def fire(self) -> None:
        timer = self.probe.get_timer()
        if timer is not None:
            self.now = max(self.now, timer)
            self.probe.handle_timer(self.now)
            self.drain()

    def feed(self, event: Any) -> None:
        self.probe.receive(event, self.now)
        self.drain()

    def current_request_id(self) -> Any:
        last = self.requests[-1] if self.requests else None
        if isinstance(last, HttpRequest):
            return last.message["id"]
        if isinstance(last, dict):
            return last["id"]
        return None

    def current_token(self) -> int | None:
        last = self.requests[-1] if self.requests else None
        return last.token if isinstance(last, HttpRequest | OpenSse) else None

    def answer_http(
        self, token: int, status: int, headers: tuple[tuple[str, str], ...], body: bytes, cuts: list[int]
    ) -> None:
        """Report an answer as a correct driver would: head once, then the body in pieces, then its end."""
        pieces = chunks(body, cuts)
        whole = not cuts
        self.open[token] = True
        self.feed(
            HttpAnswered(
                token=token, status=status, headers=headers, body=body if whole else b"", complete=whole
            )
        )
        if whole:
            self.complete.add(token)
            return
        for piece in [*pieces, b""]:
            if token in self.closed:
                return
            self.feed(HttpBody(token=token, data=piece))
        self.complete.add(token)

    def finish(self) -> ProbeDone | ProbeFailed:
        """Let every deadline pass; the probe must end within a bounded number of firings."""
        for _ in range(self.config.max_requests + self.config.max_restarts + 2):
            if self.probe.outcome is not None:
                break
            self.fire()
        outcome = self.probe.outcome
        assert isinstance(outcome, ProbeDone | ProbeFailed), "the probe did not end"
        return outcome

    def next_method(self) -> str:
        last = self.requests[-1]
        if isinstance(last, OpenSse):
            return "GET"
        message = last.message if isinstance(last, HttpRequest) else last
        return str(message["method"])


# ----------------------------------------------------------------------------
# Properties: which way each answer goes
# ----------------------------------------------------------------------------


@given(answer=discover_answers().filter(is_legacy_answer), raw=st.booleans())
def test_every_legacy_answer_over_stdio_leads_to_initialize(answer: tuple[str, Any, Any], raw: bool) -> None:
    tick()
    d = Driver("stdio")
    message = as_message(answer, d.current_request_id())
    d.now += 0.5
    line = encoded(message)
    d.feed(LineReceived(line=line) if raw and line is not None else MessageReceived(message=message))
    assert d.next_method() == "initialize"
    assert d.requests[-1]["params"]["protocolVersion"] == expected_after_discover(*answer)[1]


@given(
    kind=st.sampled_from(["silence", "closed", "junk-then-silence", "null-id"]),
    junk=st.lists(st.binary(max_size=20) | json_values.map(wire), max_size=5),
)
def test_silence_junk_and_a_dead_process_lead_to_initialize(kind: str, junk: list[bytes]) -> None:
    tick()
    d = Driver("stdio")
    if kind == "closed":
        d.feed(TransportClosed(reason="exited"))
        assert isinstance(d.history[-2], Reconnect)
    elif kind == "null-id":
        d.feed(
            MessageReceived(message={"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}})
        )
    else:
        if kind == "junk-then-silence":
            for line in junk:
                d.feed(LineReceived(line=line))
                if d.probe.outcome is not None or d.next_method() != "server/discover":
                    return  # the junk happened to be an answer; other properties cover answers
        d.fire()
    assert d.next_method() == "initialize"


status_codes = st.integers(min_value=200, max_value=599).filter(lambda s: s not in (401, 403, 407))
content_types = st.sampled_from(
    [
        (),
        (("content-type", "application/json"),),
        (("content-type", "text/html"),),
        (("content-type", "text/plain"),),
    ]
)


@st.composite
def legacy_http_answers(draw: st.DrawFn, request_id: str) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    """A status, headers and body that a server which is not modern could send to a modern POST."""
    status = draw(status_codes)
    shape = draw(st.sampled_from(["html", "junk", "empty", "rpc", "json", "sse"]))
    if shape == "html":
        return (
            status,
            (("content-type", "text/html; charset=utf-8"),),
            b"<html><body>" + draw(st.binary(max_size=30)) + b"</body></html>",
        )
    if shape == "junk":
        return status, draw(content_types), draw(st.binary(max_size=60))
    if shape == "empty":
        return status, draw(content_types), b""
    if shape == "json":
        return status, (("content-type", "application/json"),), wire(draw(json_values))
    answer = draw(discover_answers().filter(is_legacy_answer))
    message = as_message(
        answer, draw(st.sampled_from([request_id, None])) if answer[0] == "error" else request_id
    )
    if shape == "rpc":
        return status, (("content-type", "application/json"),), wire(message)
    frames = b"event: message\ndata: " + wire(message) + b"\n\n"
    return status, (("content-type", "text/event-stream"),), b": prime\n\n" + frames


@given(data=st.data(), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=4))
def test_every_legacy_answer_over_http_leads_to_initialize(data: st.DataObject, cuts: list[int]) -> None:
    tick()
    d = Driver("http")
    token = d.current_token()
    assert token is not None
    status, headers, body = data.draw(legacy_http_answers(d.current_request_id()))
    d.answer_http(token, status, headers, body, cuts)
    assert d.next_method() == "initialize"
    request = d.requests[-1]
    assert isinstance(request, HttpRequest) and request.header("mcp-protocol-version") is None


@given(answer=modern_errors, transport=st.sampled_from(["stdio", "http"]))
def test_every_recognised_modern_error_keeps_the_modern_era(
    answer: tuple[str, Any, Any], transport: str
) -> None:
    tick()
    d = Driver(transport)
    message = as_message(answer, d.current_request_id())
    token = d.current_token()
    if token is None:
        d.feed(MessageReceived(message=message))
    else:
        d.answer_http(token, 400, (("content-type", "application/json"),), wire(message), [])
    expected, _ = expected_after_discover(*answer)
    outcome = d.probe.outcome
    assert not any(
        (isinstance(r, dict) and r.get("method") == "initialize")
        or (isinstance(r, HttpRequest) and r.message.get("method") == "initialize")
        for r in d.requests
    )
    if expected == "modern":
        assert isinstance(outcome, ProbeDone) and (outcome.era, outcome.revision) == (
            "modern",
            Revision.V2026_07_28,
        )
    else:
        assert isinstance(outcome, ProbeFailed)


@given(answer=discover_answers())
def test_one_answer_to_discover_follows_the_table(answer: tuple[str, Any, Any]) -> None:
    tick()
    d = Driver("stdio")
    d.feed(MessageReceived(message=as_message(answer, d.current_request_id())))
    expected, offer = expected_after_discover(*answer)
    outcome = d.probe.outcome
    if expected == "modern":
        assert isinstance(outcome, ProbeDone) and outcome.era == "modern"
    elif expected == "failed":
        assert isinstance(outcome, ProbeFailed)
    else:
        assert outcome is None and d.next_method() == "initialize"
        assert d.requests[-1]["params"]["protocolVersion"] == offer


# ----------------------------------------------------------------------------
# Properties: junk never breaks the machine
# ----------------------------------------------------------------------------

cached_entries = st.one_of(
    st.none(),
    st.builds(EraEntry, era=st.just("modern"), revision=st.just(Revision.V2026_07_28), at=st.just(1.0)),
    st.builds(
        EraEntry,
        era=st.just("legacy"),
        revision=st.sampled_from([r for r in REVISIONS if not r.is_modern]),
        at=st.just(1.0),
    ),
    st.builds(EraEntry, era=st.just("legacy-sse"), revision=st.none(), at=st.just(1.0)),
)


def _check_cache_verdict(d: Driver, cached: EraEntry | None, outcome: ProbeDone | ProbeFailed) -> None:
    era = outcome.era if isinstance(outcome, ProbeDone) else "failed"
    event(f"{d.probe.transport}: {era}, cache {outcome.cache}, {len(d.requests)} requests")
    if cached is None:
        assert outcome.cache == "none"
    elif isinstance(outcome, ProbeDone):
        assert outcome.cache == ("confirmed" if outcome.era == cached.era else "stale")
    else:
        assert outcome.cache == "stale"


@given(data=st.data(), cached=cached_entries, steps=st.integers(min_value=0, max_value=12))
def test_junk_over_stdio_never_raises_and_always_ends(
    data: st.DataObject, cached: EraEntry | None, steps: int
) -> None:
    tick()
    d = Driver("stdio", cached=cached)
    for _ in range(steps):
        if d.probe.outcome is not None:
            break
        move = data.draw(st.sampled_from(["answer", "json", "line", "time", "close", "late", "good"]))
        if move == "good":
            result = {"supportedVersions": [MODERN], "protocolVersion": data.draw(st.sampled_from(LEGACY))}
            d.feed(
                MessageReceived(message={"jsonrpc": "2.0", "id": d.current_request_id(), "result": result})
            )
        elif move == "answer":
            d.feed(MessageReceived(message=as_message(data.draw(discover_answers()), d.current_request_id())))
        elif move == "json":
            d.feed(MessageReceived(message=data.draw(json_values)))
        elif move == "line":
            d.feed(LineReceived(line=data.draw(st.binary(max_size=40))))
        elif move == "time":
            d.advance(data.draw(st.floats(min_value=0, max_value=8)))
        elif move == "close":
            d.feed(TransportClosed(reason=data.draw(st.text(max_size=10))))
        else:
            result = {"protocolVersion": data.draw(version_strings), "capabilities": data.draw(json_values)}
            d.feed(
                MessageReceived(message={"jsonrpc": "2.0", "id": d.current_request_id(), "result": result})
            )
    outcome = d.finish()
    _check_cache_verdict(d, cached, outcome)
    if isinstance(outcome, ProbeDone):
        assert outcome.era in ("modern", "legacy")
        assert outcome.revision is not None and str(outcome.revision) in SPOKEN


@st.composite
def any_http_answer(draw: st.DrawFn, request_id: Any) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    status = draw(
        st.sampled_from([200, 200, 202, 400, 404, 405, 401, 500]) | st.integers(min_value=100, max_value=599)
    )
    shape = draw(st.sampled_from(["legacy", "answer", "good", "init", "sse-endpoint", "junk"]))
    if shape == "good":
        result = {"supportedVersions": [MODERN], "capabilities": {}}
        return (
            status,
            (("content-type", "application/json"),),
            wire({"jsonrpc": "2.0", "id": request_id, "result": result}),
        )
    if shape == "legacy":
        _, headers, body = draw(legacy_http_answers(request_id))
        return status, headers, body
    if shape == "answer":
        message = wire(as_message(draw(discover_answers()), request_id))
        return status, draw(content_types), message
    if shape == "init":
        result = {"protocolVersion": draw(version_strings), "capabilities": {}}
        headers = (("content-type", "application/json"),)
        if draw(st.booleans()):
            headers = (*headers, ("mcp-session-id", draw(st.text(max_size=8))))
        return status, headers, wire({"jsonrpc": "2.0", "id": request_id, "result": result})
    if shape == "sse-endpoint":
        uri = draw(st.sampled_from(["/messages?session_id=1", "", " ", "http://[bad", "rel/path"]))
        event = draw(st.sampled_from(["endpoint", "message", "other"]))
        return status, (("content-type", "text/event-stream"),), f"event: {event}\ndata: {uri}\n\n".encode()
    return (
        status,
        tuple(draw(st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8)), max_size=3))),
        draw(st.binary(max_size=50)),
    )


@given(
    data=st.data(),
    cached=cached_entries,
    steps=st.integers(min_value=0, max_value=10),
)
def test_junk_over_http_never_raises_and_always_ends(
    data: st.DataObject, cached: EraEntry | None, steps: int
) -> None:
    tick()
    d = Driver("http", cached=cached)
    for _ in range(steps):
        if d.probe.outcome is not None:
            break
        move = data.draw(st.sampled_from(["answer", "answer", "time", "close", "stale-token"]))
        token = d.current_token()
        if move == "answer" and token is not None and not d.open.get(token, True):
            status, headers, body = data.draw(any_http_answer(d.current_request_id()))
            cuts = data.draw(st.lists(st.integers(min_value=0, max_value=200), max_size=3))
            d.answer_http(token, status, headers, body, cuts)
        elif move == "time":
            d.advance(data.draw(st.floats(min_value=0, max_value=8)))
        elif move == "close" and token is not None and token not in d.complete:
            d.feed(TransportClosed(reason="reset", token=token))
            d.complete.add(token)
        elif move == "stale-token":
            d.feed(HttpAnswered(token=10_000 + data.draw(st.integers(0, 5)), status=200, body=b"{}"))
    outcome = d.finish()
    _check_cache_verdict(d, cached, outcome)
    if isinstance(outcome, ProbeDone) and outcome.era == "legacy-sse":
        assert outcome.endpoint and outcome.sse_token not in d.closed
    # every answer the probe stopped reading was closed, and nothing it still reads is left behind
    for token, headed in d.open.items():
        finished = token in d.complete or token in d.closed or not headed
        keeps = isinstance(outcome, ProbeDone) and token == outcome.sse_token
        assert finished or keeps, f"answer {token} left open"


# ----------------------------------------------------------------------------
# Properties: the cache
# ----------------------------------------------------------------------------

configs = st.one_of(
    st.fixed_dictionaries(
        {"command": st.text(min_size=1, max_size=10)},
        optional={
            "args": st.lists(st.text(max_size=6), max_size=3),
            "env": st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
            "cwd": st.text(max_size=6),
            "auth": json_values,
        },
    ),
    st.fixed_dictionaries(
        {
            "url": st.sampled_from(
                ["http://localhost:3000/mcp", "https://EXAMPLE.com/mcp", "https://example.com:443/sse"]
            )
        },
        optional={"headers": json_values, "transport": st.sampled_from(["http", "sse"])},
    ),
)
entries = st.one_of(
    st.builds(EraEntry, era=st.just("modern"), revision=st.just(Revision.V2026_07_28), at=st.floats(0, 2e9)),
    st.builds(
        EraEntry,
        era=st.just("legacy"),
        revision=st.sampled_from([r for r in REVISIONS if not r.is_modern]),
        at=st.floats(0, 2e9),
    ),
    st.builds(EraEntry, era=st.just("legacy-sse"), revision=st.none(), at=st.floats(0, 2e9)),
)


@given(items=st.lists(st.tuples(configs, entries), max_size=8))
def test_the_cache_round_trips_through_bytes(items: list[tuple[dict[str, Any], EraEntry]]) -> None:
    tick()
    cache = EraCache()
    for config, entry in items:
        key = EraCache.key(config)
        assert key == EraCache.key(dict(reversed(list(config.items()))))  # key order does not matter
        cache.put(key, entry, entry.at)
    again = EraCache.from_bytes(cache.to_bytes())
    assert again.items() == cache.items()
    assert again.to_bytes() == cache.to_bytes()


@given(
    items=st.lists(st.tuples(configs, entries), min_size=1, max_size=4),
    garbage=st.binary(max_size=40),
    cut=st.integers(min_value=0, max_value=2000),
    flips=st.lists(st.tuples(st.integers(min_value=0, max_value=2000), st.integers(0, 255)), max_size=4),
)
def test_corrupt_cache_bytes_are_tolerated(
    items: list[tuple[dict[str, Any], EraEntry]], garbage: bytes, cut: int, flips: list[tuple[int, int]]
) -> None:
    tick()
    cache = EraCache()
    for config, entry in items:
        cache.put(EraCache.key(config), entry, entry.at)
    data = bytearray(cache.to_bytes())
    for at, value in flips:
        if data:
            data[at % len(data)] = value
    for candidate in (garbage, bytes(data), bytes(data[:cut]), bytes(data) + garbage):
        loaded = EraCache.from_bytes(candidate)
        for key, entry in loaded.items():
            assert len(key) == 64
            assert EraEntry(era=entry.era, revision=entry.revision, at=entry.at) == entry
