"""Properties of the gateway's surface (``mcpx.core.gateway``).

* ``mcpx://`` is a bijection: any namespace and any URI — arbitrary text,
  lone surrogates included — come back from ``parse_mcpx_uri`` exactly, the
  URI is printable ASCII with no whitespace and a valid RFC 3986 URI, and
  re-encoding what was parsed gives the same text (spec/gateway.md §1,
  "Resources and templates").
* A host's RFC 6570 expansion of a gateway template parses back to the
  literal text and the values; ``template_matches`` agrees with a regular
  expression oracle on every template and string.
* ``rewrite_result_uris`` never loses, adds, reorders or edits a content
  block beyond its URI, never touches the input, and every URI it writes
  parses back to the original (spec/gateway.md §1, "URIs inside results").
* Cursors: any edit of a valid cursor's text, any other value, and a cursor
  under another key are ``-32602``, never a page; pages cover every item
  exactly once whatever the page size.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from mcpx.core import INVALID_PARAMS
from mcpx.core.gateway import (
    GatewayError,
    GatewaySurface,
    Page,
    UpstreamCatalog,
)
from mcpx.core.gateway_uris import (
    mcpx_uri,
    mcpx_uri_template,
    parse_mcpx_uri,
    rewrite_result_uris,
    template_matches,
)

from ._examples import tick

ANY_TEXT = st.text(st.characters(exclude_categories=()))  # surrogates too
URI_ISH = st.one_of(
    ANY_TEXT,
    st.text(alphabet="abc:/?#[]@!$&'()*+,;=%-._~ é{}", max_size=30),
    st.sampled_from(
        ["file:///tmp/a b", "/abs/doc", "https://x/y?q=1#f", "..", ".", "", "%", "%2F", "mcpx://a/b"]
    ),
)

# RFC 3986 §3 (absolute URI with an authority), as a regular expression.
_PCT = r"%[0-9A-Fa-f]{2}"
_UNRESERVED = r"[A-Za-z0-9\-._~]"
_SUB_DELIMS = r"[!$&'()*+,;=]"
_RFC3986 = re.compile(
    rf"[A-Za-z][A-Za-z0-9+\-.]*://(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS})*"
    rf"(?:/(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|[:@])*)*\Z"
)


# ----------------------------------------------------------------------------
# mcpx:// round trip
# ----------------------------------------------------------------------------


@given(namespace=ANY_TEXT, uri=URI_ISH)
def test_mcpx_uri_round_trip_is_the_identity(namespace: str, uri: str) -> None:
    tick()
    encoded = mcpx_uri(namespace, uri)
    assert parse_mcpx_uri(encoded) == (namespace, uri)
    assert encoded.isascii() and encoded.isprintable() and not any(c.isspace() for c in encoded)
    assert _RFC3986.match(encoded), encoded
    assert mcpx_uri(*parse_mcpx_uri(encoded)) == encoded
    # Hex case is the host's to normalise (RFC 3986 §2.1): either case reads the same.
    lowered = re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), encoded)
    assert parse_mcpx_uri(lowered) == (namespace, uri)
    # One path segment: no "/" past the authority, so no dot-segment normalisation applies.
    assert "/" not in encoded[len("mcpx://") :].split("/", 1)[1]


@given(text=ANY_TEXT)
def test_parse_refuses_or_reads_any_text_without_crashing(text: str) -> None:
    tick()
    candidate = "mcpx://" + text
    try:
        namespace, uri = parse_mcpx_uri(candidate)
    except ValueError:
        return
    assert parse_mcpx_uri(mcpx_uri(namespace, uri)) == (namespace, uri)


# ----------------------------------------------------------------------------
# Templates
# ----------------------------------------------------------------------------

_VARNAME = st.text(alphabet="abcxyz_0", min_size=1, max_size=4)
_OPERATORS = st.sampled_from(["", "+", "#", ".", "/", ";", "?", "&"])
_LITERAL = st.text(alphabet="ab:/.%-~ é?#'", max_size=6)


@st.composite
def level1_templates(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """Alternating literals and ``{var}`` names: ``literals`` has one more entry than ``names``."""
    names = draw(st.lists(_VARNAME, max_size=3))
    literals = [draw(_LITERAL.filter(lambda s: "{" not in s and "}" not in s)) for _ in range(len(names) + 1)]
    return literals, names


def _expand_level1(value: str) -> str:
    """RFC 6570 simple string expansion: everything but unreserved percent-encoded (uppercase)."""
    unreserved = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    return "".join(
        chr(b) if chr(b) in unreserved else f"%{b:02X}" for b in value.encode("utf-8", "surrogatepass")
    )


@given(shape=level1_templates(), values=st.lists(ANY_TEXT, min_size=3, max_size=3), namespace=ANY_TEXT)
def test_a_host_expansion_of_a_gateway_template_parses_to_the_literals_and_values(
    shape: tuple[list[str], list[str]], values: list[str], namespace: str
) -> None:
    tick()
    literals, names = shape
    template = literals[0] + "".join(f"{{{n}}}{lit}" for n, lit in zip(names, literals[1:], strict=True))
    gateway = mcpx_uri_template(namespace, template)
    expanded = gateway
    for name, value in zip(names, values, strict=False):
        expanded = expanded.replace(f"{{{name}}}", _expand_level1(value), 1)
    assert parse_mcpx_uri(expanded) == (
        namespace,
        literals[0] + "".join(v + lit for v, lit in zip(values, literals[1:], strict=False)),
    )
    # What the upstream would have expanded falls under its own template.
    upstream = literals[0] + "".join(
        _expand_level1(v) + lit for v, lit in zip(values, literals[1:], strict=False)
    )
    assert template_matches(template, upstream)


_EXCLUDED = {"": "/?#", ".": "/?#", ";": "/?#", "/": "?#", "?": "#", "&": "#", "+": "", "#": ""}


def _oracle(template: str, uri: str) -> bool:
    pattern = ""
    last = 0
    for match in re.finditer(r"\{[^{}]*\}", template):
        pattern += re.escape(template[last : match.start()])
        excluded = _EXCLUDED.get(match.group()[1:2], "/?#")
        pattern += f"[^{re.escape(excluded)}]*" if excluded else ".*"
        last = match.end()
    pattern += re.escape(template[last:])
    return re.fullmatch(pattern, uri, re.DOTALL) is not None


@st.composite
def templates(draw: st.DrawFn) -> str:
    parts = draw(
        st.lists(
            st.one_of(
                st.text(alphabet="ab/?#.", max_size=3),
                st.builds(lambda op, n: f"{{{op}{n}}}", _OPERATORS, _VARNAME),
            ),
            max_size=5,
        )
    )
    return "".join(parts)


@given(template=templates(), uri=st.text(alphabet="ab/?#.x", max_size=10))
def test_template_matching_agrees_with_a_regex_oracle(template: str, uri: str) -> None:
    tick()
    assert template_matches(template, uri) is _oracle(template, uri)


# ----------------------------------------------------------------------------
# Rewriting URIs in results
# ----------------------------------------------------------------------------

_BLOCKS = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=5)),
    st.just({"type": "image", "data": "AA==", "mimeType": "image/png"}),
    st.just({"type": "audio", "data": "AA==", "mimeType": "audio/wav"}),
    st.builds(lambda u, n: {"type": "resource_link", "uri": u, "name": n}, URI_ISH, st.text(max_size=3)),
    st.builds(lambda u: {"type": "resource", "resource": {"uri": u, "text": "x"}}, URI_ISH),
    st.builds(
        lambda u: {
            "type": "resource",
            "resource": {"uri": u, "blob": "AA=="},
            "annotations": {"priority": 0.5},
        },
        URI_ISH,
    ),
    st.builds(lambda u: {"type": "future-kind", "uri": u}, URI_ISH),
    st.just({"type": "resource", "resource": "not an object"}),
    st.just("not a block"),
)


def _uri_of(block: Any) -> str | None:
    if not isinstance(block, dict):
        return None
    if block.get("type") == "resource_link":
        return block["uri"]  # type: ignore[no-any-return]
    if block.get("type") == "resource" and isinstance(block.get("resource"), dict):
        return block["resource"]["uri"]  # type: ignore[no-any-return]
    return None


def _without_uri(block: Any) -> Any:
    if _uri_of(block) is None:
        return block
    if block["type"] == "resource_link":
        return {k: v for k, v in block.items() if k != "uri"}
    return {**block, "resource": {k: v for k, v in block["resource"].items() if k != "uri"}}


def _check_blocks(before: list[Any], after: list[Any], namespace: str) -> None:
    assert len(after) == len(before)
    for old, new in zip(before, after, strict=True):
        assert _without_uri(new) == _without_uri(old)
        uri = _uri_of(old)
        if uri is None:
            assert new is old
        else:
            assert parse_mcpx_uri(_uri_of(new) or "") == (namespace, uri)


@given(
    namespace=ANY_TEXT,
    content=st.lists(_BLOCKS, max_size=8),
    messages=st.lists(st.tuples(st.sampled_from(["user", "assistant"]), _BLOCKS), max_size=4),
    contents=st.lists(st.builds(lambda u: {"uri": u, "text": "t"}, URI_ISH), max_size=4),
    structured=st.dictionaries(st.sampled_from(["uri", "type"]), URI_ISH, max_size=2),
)
def test_rewriting_never_loses_adds_or_edits_blocks(
    namespace: str,
    content: list[Any],
    messages: list[tuple[str, Any]],
    contents: list[dict[str, Any]],
    structured: dict[str, Any],
) -> None:
    tick()
    result: dict[str, Any] = {
        "content": content,
        "structuredContent": structured,
        "messages": [{"role": role, "content": block} for role, block in messages],
        "contents": contents,
        "isError": False,
    }
    before = copy.deepcopy(result)
    out = rewrite_result_uris(result, namespace)
    assert result == before
    assert set(out) == set(result)
    assert out["structuredContent"] is structured and out["isError"] is False
    _check_blocks(content, out["content"], namespace)
    _check_blocks(
        [m["content"] for m in result["messages"]], [m["content"] for m in out["messages"]], namespace
    )
    assert [m["role"] for m in out["messages"]] == [role for role, _ in messages]
    assert [parse_mcpx_uri(c["uri"]) for c in out["contents"]] == [(namespace, c["uri"]) for c in contents]
    assert [c["text"] for c in out["contents"]] == ["t"] * len(contents)


# ----------------------------------------------------------------------------
# Cursors
# ----------------------------------------------------------------------------

_KEY = b"fuzz-key-" + b"0" * 23


def _surface(n: int, page_size: int, key: bytes = _KEY) -> GatewaySurface:
    catalog = UpstreamCatalog(
        name="many",
        tools=[{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(n)],
        resources=[{"uri": f"u:{i}", "name": str(i)} for i in range(n)],
    )
    return GatewaySurface([catalog], cursor_key=key, passthrough=("many",), page_size=page_size)


def _pages(surface: GatewaySurface) -> list[Page]:
    pages: list[Page] = []
    cursor: str | None = None
    while True:
        page = surface.list_tools(cursor)
        assert isinstance(page, Page)
        pages.append(page)
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


@given(n=st.integers(0, 30), page_size=st.integers(1, 12))
def test_pages_cover_every_item_exactly_once(n: int, page_size: int) -> None:
    tick()
    surface = _surface(n, page_size)
    names = [item["name"] for page in _pages(surface) for item in page.items]
    whole = surface.list_tools()
    assert isinstance(whole, Page)
    assert names == [f"t{i}" for i in range(n)] + [
        "mcpx_call",
        "mcpx_servers",
        "mcpx_search",
        "mcpx_describe",
    ]


def _assert_refused(value: object) -> None:
    assert isinstance(value, GatewayError), value
    assert value.code == INVALID_PARAMS
    assert "without a cursor" in value.message


@st.composite
def tampered(draw: st.DrawFn, cursor: str) -> str:
    kind = draw(st.sampled_from(["replace", "delete", "insert", "truncate", "append", "swap"]))
    pos = draw(st.integers(0, len(cursor) - 1))
    char = draw(st.characters(exclude_categories=()) | st.sampled_from(list("AZaz09-_.=")))
    if kind == "replace":
        return cursor[:pos] + char + cursor[pos + 1 :]
    if kind == "delete":
        return cursor[:pos] + cursor[pos + 1 :]
    if kind == "insert":
        return cursor[:pos] + char + cursor[pos:]
    if kind == "truncate":
        return cursor[:pos]
    if kind == "append":
        return cursor + char
    other = draw(st.integers(0, len(cursor) - 1))
    chars = list(cursor)
    chars[pos], chars[other] = chars[other], chars[pos]
    return "".join(chars)


@given(data=st.data(), n=st.integers(4, 30), page_size=st.integers(1, 3))
def test_a_tampered_cursor_is_never_accepted(data: st.DataObject, n: int, page_size: int) -> None:
    tick()
    surface = _surface(n, page_size)
    cursors = [p.next_cursor for p in _pages(surface) if p.next_cursor is not None]
    cursor = data.draw(st.sampled_from(cursors))
    bad = data.draw(tampered(cursor))
    assume(bad != cursor)
    _assert_refused(surface.list_tools(bad))
    _assert_refused(surface.list_resources(cursor))  # right key, wrong list
    _assert_refused(_surface(n, page_size, key=b"another-key-" + b"1" * 20).list_tools(cursor))


@given(
    value=st.one_of(
        ANY_TEXT,
        st.integers(),
        st.floats(),
        st.booleans(),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        st.binary(max_size=8),
    )
)
def test_any_other_cursor_value_is_invalid_params(value: object) -> None:
    tick()
    _assert_refused(_surface(10, 3).list_tools(value))
