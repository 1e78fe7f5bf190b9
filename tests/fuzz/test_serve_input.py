"""``mcpx serve`` under malformed input: whatever a host writes, it is answered in JSON-RPC and the process goes on.

A black box over the real process, driven as an MCP host drives it:
``python -m mcpx serve --state DIR`` with pipes, bytes written to its stdin,
lines read from its stdout.  Nothing here knows how the shim reaches the
daemon.  One daemon serves the module: the first ``mcpx serve`` starts it on
demand (HOME in a temporary directory, so no user configuration is read;
port 0; its upstream is the built-in default, mcpx's demo server as
``demo``).  Each host speaks one era:

* legacy: ``initialize`` + ``notifications/initialized`` at 2025-06-18 or
  2025-11-25 (and 2025-03-26, the one revision with JSON-RPC batches);
* 2026-07-28: no handshake, and ``_meta`` with protocolVersion,
  clientCapabilities and clientInfo on every request;

on each of the daemon's event loops (asyncio, uvloop, trio), in one of
the shim's modes: the host's pipes handed to the daemon (``fds``, the default) or relayed by the shim (``lines``, ``MCPX_SERVE_RELAY=1``).  As
a host keeps one server process for its session, one ``mcpx serve`` per era
and mode takes every batch of bad input in turn, and must still end cleanly
when the module is done.

Checked throughout: every line on stdout is one JSON-RPC message (or, on
2025-03-26, an array of them); each request is answered exactly once, one
whose id cannot be used with ``"id": null``; after each batch of bad input
a ``tools/call`` of ``mcpx_servers`` is answered with a result naming
``demo``; neither stderr nor the daemon's log ever shows a traceback; end of
input ends the process with exit code 0.  Waits are for a line or for the
exit, bounded by ``WAIT``; only a failing test waits that long.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ._examples import tick
from ._mcp import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MODERN,
    PARSE_ERROR,
    any_ids,
    id_key,
    initialize,
    json_values,
    notification,
    to_line,
)
from ._serve_host import Daemon, Host

LEGACY = ("2025-06-18", "2025-11-25")
ERAS = (*LEGACY, MODERN)
BATCHES = "2025-03-26"  # the one revision that defines JSON-RPC batches
MODES = ("fds", "lines")
NULL_CODES = (PARSE_ERROR, INVALID_REQUEST)  # what a message whose id cannot be used may be answered with
# Every property example is a few round trips to a real process: a tenth of the profile's count.
EXAMPLES = settings(max_examples=max(10, settings.default.max_examples // 10), deadline=None)


# ----------------------------------------------------------------------------
# Fixtures: one daemon and one host per era and mode, for the module
# ----------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["asyncio", "uvloop", "trio"])
def daemon(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """The daemon of every test here, on each of its event loops in turn (``MCPX_LOOP``)."""
    shared = Daemon(tmp_path_factory.mktemp("serve-input"), MCPX_LOOP=request.param)
    yield shared
    shared.stop()


@pytest.fixture(scope="module")
def hosts(daemon: Daemon) -> Iterator[Callable[[str, str], Host]]:
    """The module's host of each era and mode; each must end cleanly when the module is done.

    The first starts the daemon (two at once would race to); the others then
    start side by side, and shake hands once all are spawned.
    """
    opened = {(LEGACY[0], "fds"): Host(daemon, LEGACY[0], "fds")}
    later = [(era, mode) for era in (BATCHES, *ERAS) for mode in MODES if (era, mode) not in opened]
    try:
        asked = daemon.env["MCPX_LOOP"]
        running = json.loads((daemon.state / "daemon.json").read_bytes()).get("loop")
        assert running == asked, f"the daemon runs on {running}, not on {asked} as asked"
        for era, mode in later:
            opened[era, mode] = Host(daemon, era, mode, handshake=False)
        for era, mode in later:
            if era != MODERN:
                opened[era, mode].handshake(era)
    except BaseException:
        for each in opened.values():
            each.kill()
        raise
    yield lambda era, mode: opened[era, mode]
    problems = []
    for (era, mode), each in opened.items():
        try:
            _, after = each.end()
            assert after == [], f"replies nobody asked for: {after[:3]}"
        except AssertionError as exc:
            problems.append(f"{era}/{mode}: {exc}")
        finally:
            each.kill()
    assert not problems, problems


def _pairs(eras: tuple[str, ...] = ERAS) -> list[Any]:
    return [pytest.param(era, mode, id=f"{era}-{mode}") for era in eras for mode in MODES]


# ----------------------------------------------------------------------------
# Ids of every JSON type
# ----------------------------------------------------------------------------

# Ids a request may carry (MCP: "a string or integer"): each is answered under exactly that id.
GOOD_IDS: list[Any] = [
    0,
    1,
    -1,
    -7,
    2**31,
    2**53 + 1,  # not a double
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    "",
    "0",
    "1",
    "null",
    "true",
    "[]",
    "{}",
    " ",
    "\t\r",
    "\n",  # escaped on the wire: the line stays one line
    "\u2028\u2029",
    "\x00\x1f\x7f",
    '"\\/',
    "ü€😀",
    "\ufeff",
    "x" * 10_000,
]
# Not ids: a precise -32600 with "id": null (JSON-RPC 2.0 §5: the id could not be used).
NOT_IDS: list[Any] = [
    None,
    True,
    False,
    0.5,
    1.0,
    -0.0,
    1e300,
    -2.5e-300,
    [],
    [1],
    ["a", 1],
    {},
    {"id": 1},
    {"a": [None]},
]
# Integers a gateway may not hold (beyond 64 bits) and strings with lone surrogates: answered exactly
# under that id, or refused with "id": null.
EDGE_IDS: list[Any] = [2**64, -(2**63) - 1, 10**30, -(10**30), 10**400, "\ud800", "a\udfffb"]


def _same_id(a: Any, b: Any) -> bool:
    return id_key(a) is not None and id_key(a) == id_key(b)


def _check_id_reply(sent: Any, reply: Any, kind: str) -> None:
    assert isinstance(reply, dict), reply
    if kind == "good" or (kind == "edge" and reply["id"] is not None):
        assert _same_id(reply["id"], sent), f"id {sent!r} was answered as {reply!r}"
        assert "result" in reply, f"id {sent!r}: {reply!r}"
        names = [tool["name"] for tool in reply["result"]["tools"]]
        assert "mcpx_call" in names, reply
        return
    assert reply["id"] is None, f"a request with id {sent!r} was answered as {reply!r}"
    codes = (INVALID_REQUEST,) if kind == "bad" else NULL_CODES
    assert reply["error"]["code"] in codes, f"id {sent!r}: {reply!r}"
    assert reply["error"]["message"], reply


@pytest.mark.parametrize(("era", "mode"), _pairs())
def test_every_json_type_as_an_id(hosts: Callable[[str, str], Host], era: str, mode: str) -> None:
    """Each id, one request at a time: its own answer, or the precise refusal; then a valid request works."""
    host = hosts(era, mode)
    table = [(i, "good") for i in GOOD_IDS] + [(i, "bad") for i in NOT_IDS] + [(i, "edge") for i in EDGE_IDS]
    for sent, kind in table:
        host.send(host.request(sent, "tools/list"))
        (reply,) = host.replies(1)
        _check_id_reply(sent, reply, kind)
    assert host.exchange(b"", 0) == []


def _verdict(value: Any) -> str:
    """What a request with id ``value`` must get: ``good``, ``bad`` (not an id) or ``edge`` (either)."""
    if type(value) is int or type(value) is str:
        return "edge" if _unreadable(value) else "good"
    return "edge" if _unreadable(value) else "bad"


def _unreadable(value: Any) -> bool:
    """Whether ``value`` holds an integer beyond 64 bits or a lone surrogate: a gateway may refuse those."""
    if type(value) is int:
        return not -(2**63) <= value < 2**64
    if isinstance(value, str):
        return any("\ud800" <= c <= "\udfff" for c in value)
    if isinstance(value, list):
        return any(_unreadable(v) for v in value)
    if isinstance(value, dict):
        return any(_unreadable(k) or _unreadable(v) for k, v in value.items())
    return False


random_ids = st.lists(
    (any_ids | json_values | st.text(max_size=30)).filter(
        lambda v: not (isinstance(v, str) and v.startswith("mcpx-fuzz"))
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda v: json.dumps(v, sort_keys=True),
)


@pytest.mark.parametrize(("era", "mode"), _pairs())
def test_random_ids_in_one_write(hosts: Callable[[str, str], Host], era: str, mode: str) -> None:
    """A few requests with random ids in one write: usable ids answered under themselves, the rest with null."""
    host = hosts(era, mode)

    @EXAMPLES
    @given(ids=random_ids)
    def check(ids: list[Any]) -> None:
        tick()
        verdicts = [_verdict(i) for i in ids]
        replies = host.exchange(b"".join(to_line(host.request(i, "tools/list")) for i in ids), len(ids))
        answered = Counter(id_key(r["id"]) for r in replies if r["id"] is not None)
        for sent, verdict in zip(ids, verdicts, strict=True):
            key = id_key(sent)
            if verdict == "good":
                assert answered.pop(key, 0) == 1, (sent, replies)
            elif verdict == "edge" and key is not None:
                assert answered.pop(key, 0) <= 1, (sent, replies)
        assert not answered, f"answered under ids that were not sent: {answered}"
        for reply in replies:  # the rest: one refusal each for the ids that could not be used
            if reply["id"] is None:
                assert reply["error"]["code"] in NULL_CODES, reply
            else:
                assert "mcpx_call" in json.dumps(reply["result"]), reply

    check()


# ----------------------------------------------------------------------------
# Arrays and batches
# ----------------------------------------------------------------------------


def _batch_shapes(host: Host) -> list[tuple[str, list[Any]]]:
    return [
        ("empty", []),
        ("requests", [host.request("b-1", "tools/list"), host.request("b-2", "tools/list")]),
        ("garbage", [1, "x", None, {}, [], True]),
        ("mixed", [host.request("b-3", "tools/list"), 5]),
        ("notifications only", [notification("notifications/cancelled", {"requestId": "nothing"})]),
    ]


@pytest.mark.parametrize(("era", "mode"), _pairs((BATCHES, *ERAS)))
def test_arrays_are_batches_on_2025_03_26_only(
    hosts: Callable[[str, str], Host], era: str, mode: str
) -> None:
    """On 2025-03-26 an array is a batch, answered with one array; on other revisions it is one -32600."""
    host = hosts(era, mode)
    for shape, batch in _batch_shapes(host):
        answers_expected = era != BATCHES or shape != "notifications only"
        replies = host.exchange(to_line(batch), 1 if answers_expected else 0)
        if not answers_expected:
            assert replies == []
            continue
        (reply,) = replies
        if era != BATCHES or shape == "empty":  # JSON-RPC 2.0 §6: an empty array is one Invalid Request
            assert isinstance(reply, dict) and reply["id"] is None, (shape, reply)
            assert reply["error"]["code"] == INVALID_REQUEST, (shape, reply)
            continue
        assert isinstance(reply, list), (shape, reply)
        requests = [item for item in batch if isinstance(item, dict) and "method" in item]
        assert len(reply) == len(batch), (shape, reply)
        assert sorted(str(r["id"]) for r in reply if r["id"] is not None) == sorted(
            str(r["id"]) for r in requests
        ), (shape, reply)
        for item in reply:
            if item["id"] is None:
                assert item["error"]["code"] == INVALID_REQUEST, (shape, item)
            else:
                assert "mcpx_call" in json.dumps(item["result"]), (shape, item)


# ----------------------------------------------------------------------------
# 10,000 bad lines in one write
# ----------------------------------------------------------------------------

NOT_JSON = [
    b"hello",
    b'{"jsonrpc":',
    b"\xff\xfe",
    b"{'single': 1}",
    b'{"a":1}}',
    b"NaN",
    b"[1,",
    b"\x00",
    b"01",
]
NOT_OBJECTS = [b"1", b'"text"', b"null", b"true", b"-0.5e3", b"[]", b"[1,2]"]
NOT_JSONRPC = [
    b"{}",
    b'{"a":1}',
    b'{"jsonrpc":"1.0","id":"v%d","method":"tools/list"}',
    b'{"id":"j%d","method":"tools/list"}',
    b'{"jsonrpc":2.0,"id":"n%d","method":"tools/list"}',
    b'{"jsonrpc":"2.0","id":"e%d"}',
    b'{"jsonrpc":"2.0","id":"m%d","method":5}',
    b'{"jsonrpc":"2.0","id":"x%d","method":""}',
]
BLANK = [b"", b"   ", b"\t", b"\r"]  # no message: never answered


def _flood(count: int) -> tuple[bytes, int, set[str]]:
    """``count`` bad lines (every 7th ending in CRLF, a blank line every 100th): the bytes, the
    number that are not JSON, and the ids the JSON-RPC-like objects carry."""
    kinds = [*NOT_JSON, *NOT_OBJECTS, *NOT_JSONRPC]
    lines: list[bytes] = []
    ids: set[str] = set()
    not_json = 0
    for n in range(count):
        line = kinds[n % len(kinds)]
        if b"%d" in line:
            line = line.replace(b"%d", str(n).encode())
            ids.add(json.loads(line)["id"])
        not_json += line in NOT_JSON
        lines.append(line + (b"\r\n" if n % 7 == 0 else b"\n"))
        if n % 100 == 0:
            lines.append(BLANK[n // 100 % len(BLANK)] + b"\n")
    return b"".join(lines), not_json, ids


@pytest.mark.parametrize(("era", "mode"), _pairs())
def test_ten_thousand_bad_lines_in_one_write(hosts: Callable[[str, str], Host], era: str, mode: str) -> None:
    """Each bad line gets one error (not JSON: -32700, null id); blank lines none; then a request works."""
    host = hosts(era, mode)
    data, not_json, ids = _flood(10_000)
    replies = host.exchange(data, 10_000)
    codes = Counter(r["error"]["code"] for r in replies)
    assert codes == {PARSE_ERROR: not_json, INVALID_REQUEST: 10_000 - not_json}, codes
    named = Counter(r["id"] for r in replies if r["id"] is not None)
    assert set(named) <= ids and max(named.values(), default=1) == 1, named.most_common(3)
    assert all(r["id"] is None for r in replies if r["error"]["code"] == PARSE_ERROR)


def _an_object(line: bytes) -> bool:
    """Whether ``line`` is a JSON object: a notification or a response among those is answered by nothing."""
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


TOKENS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b":",
    b",",
    b"\\",
    b"\xff",
    b"\x00",
    b"\r",
    b" ",
    b"null",
    b"1e999",
    b"-",
]
junk_lines = st.lists(
    st.one_of(
        st.binary(max_size=24).map(lambda b: b.replace(b"\n", b"")),
        st.lists(st.sampled_from(TOKENS), max_size=12).map(b"".join),
        json_values.map(lambda v: to_line(v)[:-1]),
    ).filter(lambda line: not _an_object(line)),
    min_size=1,
    max_size=8,
)


@pytest.mark.parametrize(("era", "mode"), _pairs())
def test_random_junk_lines(hosts: Callable[[str, str], Host], era: str, mode: str) -> None:
    """Random bytes and JSON that is not an object, a line each: one null-id error per line that is not blank."""
    host = hosts(era, mode)

    @EXAMPLES
    @given(lines=junk_lines)
    def check(lines: list[bytes]) -> None:
        tick()
        expected = sum(1 for line in lines if line.strip())
        for reply in host.exchange(b"".join(line + b"\n" for line in lines), expected):
            assert reply["id"] is None and reply["error"]["code"] in NULL_CODES, (lines, reply)

    check()


@pytest.mark.parametrize(
    ("era", "mode"),
    [
        pytest.param(LEGACY[0], "fds", id="2025-06-18-fds"),
        pytest.param(LEGACY[1], "lines", id="2025-11-25-lines"),
    ],
)
def test_garbage_before_the_handshake(daemon: Daemon, era: str, mode: str) -> None:
    """A legacy host that writes junk before ``initialize`` still gets its session and its answers."""
    with Host(daemon, era, mode, handshake=False) as host:
        junk = b"".join(
            line + b"\n" for line in [*NOT_JSON, *NOT_OBJECTS, b"{}", b'{"jsonrpc":"2.0","id":7}']
        )
        host.write(
            junk + to_line(initialize("init", era)) + to_line(notification("notifications/initialized"))
        )
        replies = host.replies(len(NOT_JSON) + len(NOT_OBJECTS) + 3)
        (init,) = [r for r in replies if r["id"] == "init"]
        assert init["result"]["protocolVersion"] == era, init
        errors = Counter(r["error"]["code"] for r in replies if r is not init)
        assert errors == {PARSE_ERROR: len(NOT_JSON), INVALID_REQUEST: len(NOT_OBJECTS) + 2}, replies
        (reply,) = host.exchange(to_line(host.request("after", "tools/list")), 1)
        assert reply["id"] == "after" and "mcpx_call" in json.dumps(reply["result"]), reply
        _, after = host.end()
        assert after == []


# ----------------------------------------------------------------------------
# The line cap
# ----------------------------------------------------------------------------


def _padded(host: Host, request_id: str, size: int, eol: bytes = b"\n") -> bytes:
    """A ``tools/list`` request of exactly ``size`` bytes before its newline."""
    bare = to_line(host.request(request_id, "tools/list", {"pad": ""}))[:-1]
    assert len(bare) <= size
    cut = bare.index(b'"pad":""') + len(b'"pad":"')
    return bare[:cut] + b"x" * (size - len(bare)) + bare[cut:] + eol


@pytest.fixture(scope="module")
def shown(daemon: Daemon) -> dict[str, Any]:
    """The settings of the module's environment, as ``mcpx settings --json`` shows them."""
    return daemon.settings_shown()


@pytest.fixture(scope="module")
def max_line(shown: dict[str, Any]) -> int:
    """The longest line ``mcpx serve`` takes: ``transport.maxLine``."""
    return int(shown["transport.maxLine"]["value"])


@pytest.fixture(scope="module")
def drain(shown: dict[str, Any]) -> float:
    """How long requests in flight get after the end of input: ``transport.stdioDrain``."""
    return float(shown["transport.stdioDrain"]["value"])


@pytest.mark.parametrize(("era", "mode"), _pairs())
def test_a_line_at_the_cap_and_one_byte_over(
    hosts: Callable[[str, str], Host], max_line: int, era: str, mode: str
) -> None:
    """A request exactly at ``transport.maxLine`` is served; one byte more is one error with a null id."""
    host = hosts(era, mode)
    data = _padded(host, "at-cap", max_line) + _padded(host, "over-cap", max_line + 1)
    at_cap, over = sorted(host.exchange(data, 2), key=lambda r: r["id"] is None)
    assert at_cap["id"] == "at-cap" and "mcpx_call" in json.dumps(at_cap["result"]), at_cap
    assert over["id"] is None and over["error"]["code"] in NULL_CODES, over


# ----------------------------------------------------------------------------
# Nesting deeper than a parser goes
# ----------------------------------------------------------------------------

DEEP_LINES = [b"[" * 100_000, b"[" * 2000 + b"]" * 2000, b'{"a":' * 2000 + b"1" + b"}" * 2000]


def _deep_lines(host: Host) -> None:
    replies = host.exchange(b"".join(line + b"\n" for line in DEEP_LINES), len(DEEP_LINES))
    for reply in replies:
        assert reply["id"] is None and reply["error"]["code"] in NULL_CODES, reply


@pytest.mark.parametrize("era", ERAS)
def test_lines_nested_too_deep_to_parse(hosts: Callable[[str, str], Host], era: str) -> None:
    """100,000 ``[`` and 2,000 levels of arrays and objects: each one error with a null id; the host goes on."""
    _deep_lines(hosts(era, "fds"))


def test_lines_nested_too_deep_to_parse_when_the_shim_relays(daemon: Daemon) -> None:
    with Host(daemon, MODERN, "lines") as host:
        _deep_lines(host)
        _, after = host.end()
        assert after == []


@pytest.mark.parametrize("era", ERAS)
def test_arguments_nested_deeper_than_the_gateway_writes(hosts: Callable[[str, str], Host], era: str) -> None:
    host = hosts(era, "fds")
    nested: Any = "bottom"
    for _ in range(300):
        nested = [nested]
    (reply,) = host.exchange(to_line(host.call("deep", "echo", text="hi", nested=nested)), 1)
    assert reply["id"] == "deep", reply
    assert "result" in reply or reply["error"]["code"] == INVALID_PARAMS, reply
    assert reply.get("error", {}).get("code") != INTERNAL_ERROR, reply


# ----------------------------------------------------------------------------
# End of input with requests in flight
# ----------------------------------------------------------------------------

SHORT, LONG = 0.1, 30.0  # seconds the demo's ``sleep`` takes: well within the drain, and far beyond it


@pytest.mark.parametrize(
    ("era", "mode"),
    [
        pytest.param(LEGACY[1], "lines", id="2025-11-25-lines"),
        pytest.param(MODERN, "fds", id=f"{MODERN}-fds"),
    ],
)
def test_end_of_input_with_requests_in_flight(daemon: Daemon, drain: float, era: str, mode: str) -> None:
    """Short calls in flight are answered; long ones do not hold the exit beyond the drain; exit code 0."""
    with Host(daemon, era, mode) as host:
        assert host.exchange(b"", 0) == []  # the host is up and the demo server started
        short = [f"short-{n}" for n in range(3)]
        long = [f"long-{n}" for n in range(3)]
        host.send(
            *(host.call(i, "sleep", seconds=SHORT) for i in short),
            *(host.call(i, "sleep", seconds=LONG) for i in long),
        )
        took, after = host.end(within=LONG)
        assert took < drain + 15, f"the end of input took {took:.1f} s; the drain is {drain} s"
        answered = Counter(r["id"] for r in after)
        assert set(answered) <= {*short, *long} and max(answered.values(), default=1) == 1, after
        for reply in after:
            if reply["id"] in short:
                assert reply["result"]["content"][0]["text"] == f"slept {SHORT}s", reply
        assert set(short) <= set(answered), f"short calls in flight went unanswered: {after}"


# ----------------------------------------------------------------------------
# The settings a user sets for stdio, through ``mcpx serve``
# ----------------------------------------------------------------------------

TUNED_MAX_LINE = 4096
TUNED_DRAIN = 10.0


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A daemon of its own, started by ``mcpx serve`` with ``MCPX_TRANSPORT_MAX_LINE`` and ``..._STDIO_DRAIN`` set."""
    custom = Daemon(
        tmp_path_factory.mktemp("serve-tuned"),
        MCPX_TRANSPORT_MAX_LINE=str(TUNED_MAX_LINE),
        MCPX_TRANSPORT_STDIO_DRAIN=f"{TUNED_DRAIN:g}s",
    )
    shown = custom.settings_shown()
    assert shown["transport.maxLine"] == {
        "value": TUNED_MAX_LINE,
        "source": "env",
        "origin": "MCPX_TRANSPORT_MAX_LINE",
    }
    assert shown["transport.stdioDrain"]["value"] == TUNED_DRAIN, shown["transport.stdioDrain"]
    yield custom
    custom.stop()


def test_transport_max_line_is_the_cap_mcpx_serve_applies(tuned: Daemon) -> None:
    with Host(tuned, MODERN, "fds") as host:
        data = _padded(host, "at-cap", TUNED_MAX_LINE) + _padded(host, "over-cap", TUNED_MAX_LINE + 1)
        at_cap, over = sorted(host.exchange(data, 2), key=lambda r: r["id"] is None)
        assert at_cap["id"] == "at-cap" and "result" in at_cap, at_cap
        assert over["id"] is None and over["error"]["code"] in NULL_CODES, over
        host.end()


def test_transport_stdio_drain_is_the_drain_mcpx_serve_applies(tuned: Daemon) -> None:
    with Host(tuned, MODERN, "fds") as host:
        assert host.exchange(b"", 0) == []
        host.send(host.call("in-flight", "sleep", seconds=3.0))
        _, after = host.end()
        assert [r["id"] for r in after] == ["in-flight"], after
        assert after[0]["result"]["content"][0]["text"] == "slept 3.0s", after
