"""``mcpx://`` URIs: how the gateway names an upstream's resources, and the URIs inside results.

In gateway mode every upstream resource is offered as
``mcpx://<namespace>/<percent-encoded upstream URI>`` and every template as
the same form with its ``{expressions}`` kept; results that came through
the gateway have their resource URIs rewritten to such URIs, so that a host
can read what it was shown (spec/gateway.md §1, "URIs inside results").
Encoding follows RFC 3986 (unreserved characters and sub-delimiters kept,
every other byte of the UTF-8 text percent-encoded), templates RFC 6570.
Pure functions of their arguments; ``GatewaySurface`` (``gateway.py``)
uses them to build its lists and route reads.

* ``mcpx_uri(namespace, uri)`` / ``parse_mcpx_uri(uri)``: the two
  directions, with ``McpxUriError`` (a ``ValueError`` whose message says
  what is wrong) for a string mcpx could not have issued;
* ``mcpx_uri_template(namespace, template)`` and ``template_matches``:
  the same for templates, with bounded work (``_MAX_TEMPLATE_MATCH``);
* ``rewrite_result_uris(result, namespace)``: a result's resource URIs
  (links, embedded resources, ``resources/read`` contents, prompt
  messages) as ``mcpx://`` ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "McpxUriError",
    "mcpx_uri",
    "mcpx_uri_template",
    "parse_mcpx_uri",
    "rewrite_result_uris",
    "template_matches",
]

_MAX_TEMPLATE_MATCH: Final = 8192  # bounded work: longer URIs or templates never match a template


def _clip(text: str, limit: int = 200) -> str:
    """``text``, cut to ``limit`` characters for a message."""
    return text if len(text) <= limit else text[:limit] + "…"


class McpxUriError(ValueError):
    """A string that is not an ``mcpx://`` URI mcpx could have issued; the message says why."""


_UNRESERVED: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SUB_DELIMS: Final = frozenset(b"!$&'()*+,;=")
_HOST_TABLE: Final = tuple(chr(b) if b in _UNRESERVED | _SUB_DELIMS else f"%{b:02X}" for b in range(256))
_PATH_TABLE: Final = tuple(
    chr(b) if b in _UNRESERVED | _SUB_DELIMS | frozenset(b":@") else f"%{b:02X}" for b in range(256)
)
# Template literals (RFC 6570 §2.1) exclude "'", and the official schemas' ``format:
# uri-template`` as fastjsonschema checks it accepts only lowercase hex; either case
# is the same octet (RFC 3986 §2.1), and ``parse_mcpx_uri`` reads both.
_TEMPLATE_HOST_TABLE: Final = tuple(
    chr(b) if b in (_UNRESERVED | _SUB_DELIMS) - {ord("'")} else f"%{b:02x}" for b in range(256)
)
_TEMPLATE_PATH_TABLE: Final = tuple(
    chr(b) if b in (_UNRESERVED | _SUB_DELIMS | frozenset(b":@")) - {ord("'")} else f"%{b:02x}"
    for b in range(256)
)
_HEXDIGITS: Final = frozenset("0123456789abcdefABCDEF")
_SCHEME: Final = "mcpx://"


def _encode(text: str, table: tuple[str, ...]) -> str:
    return "".join(map(table.__getitem__, text.encode("utf-8", "surrogatepass")))


def _decode(text: str, what: str) -> str:
    if "%" not in text:
        return text
    out = bytearray()
    i, end = 0, len(text)
    while i < end:
        pct = text.find("%", i)
        if pct < 0:
            out += text[i:].encode("utf-8", "surrogatepass")
            break
        out += text[i:pct].encode("utf-8", "surrogatepass")
        escape = text[pct + 1 : pct + 3]
        if len(escape) != 2 or not _HEXDIGITS.issuperset(escape):
            raise McpxUriError(
                f"the {what} has a '%' at offset {pct} that is not followed by two hex digits; "
                "use the mcpx:// URI exactly as resources/list or a result gave it"
            )
        out.append(int(escape, 16))
        i = pct + 3
    try:
        return out.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise McpxUriError(
            f"the {what}'s percent-encoded bytes are not UTF-8; "
            "use the mcpx:// URI exactly as resources/list or a result gave it"
        ) from None


def mcpx_uri(namespace: str, uri: str) -> str:
    """``uri`` of the server ``namespace`` as mcpx offers it; ``parse_mcpx_uri`` inverts it for any strings."""
    return f"{_SCHEME}{_encode(namespace, _HOST_TABLE)}/{_encode(uri, _PATH_TABLE)}"


def parse_mcpx_uri(uri: str) -> tuple[str, str]:
    """``(namespace, upstream URI)`` for an ``mcpx://`` URI; ``McpxUriError`` saying why not.

    The scheme is matched without regard to case (RFC 3986 §3.1) and either
    hex case is accepted in escapes; everything after the first ``/`` past
    the authority is the upstream URI.
    """
    if not isinstance(uri, str):
        raise McpxUriError(f"a resource URI is a string, not {type(uri).__name__}")
    if uri[: len(_SCHEME)].lower() != _SCHEME:
        raise McpxUriError(f"{_clip(uri)!r} is not an mcpx:// URI")
    rest = uri[len(_SCHEME) :]
    slash = rest.find("/")
    if slash < 0:
        raise McpxUriError(
            f"{_clip(uri)!r} names a server but no resource: the form is "
            "mcpx://<server>/<percent-encoded upstream URI>, as resources/list gives it"
        )
    return _decode(rest[:slash], "server name"), _decode(rest[slash + 1 :], "resource URI")


_EXPRESSION: Final = re.compile(r"\{[^{}]*\}")


def mcpx_uri_template(namespace: str, template: str) -> str:
    """An upstream URI template as an ``mcpx://`` template: literal text encoded, expressions kept.

    Literals are encoded as in ``mcpx_uri`` but with lowercase hex and ``'``
    escaped, so the result is an RFC 6570 template the schemas' format check
    accepts; a URI a host expands from it parses back all the same.
    """
    parts: list[str] = []
    last = 0
    for match in _EXPRESSION.finditer(template):
        parts.append(_encode(template[last : match.start()], _TEMPLATE_PATH_TABLE))
        parts.append(match.group())
        last = match.end()
    parts.append(_encode(template[last:], _TEMPLATE_PATH_TABLE))
    return f"{_SCHEME}{_encode(namespace, _TEMPLATE_HOST_TABLE)}/{''.join(parts)}"


# What one expression may expand to, by operator: the characters it cannot
# produce (RFC 6570 §3.2; generous beyond level 1, see the module docstring).
_EXCLUDED_BY_OPERATOR: Final[Mapping[str, frozenset[str]]] = {
    "": frozenset("/?#"),
    ".": frozenset("/?#"),
    ";": frozenset("/?#"),
    "/": frozenset("?#"),
    "?": frozenset("#"),
    "&": frozenset("#"),
    "+": frozenset(),
    "#": frozenset(),
}
_Token = str | frozenset[str]  # a literal character, or a wildcard by what it excludes


def _template_tokens(template: str) -> list[_Token]:
    tokens: list[_Token] = []
    last = 0
    for match in _EXPRESSION.finditer(template):
        tokens.extend(template[last : match.start()])
        body = match.group()[1:-1]
        excluded = _EXCLUDED_BY_OPERATOR.get(body[:1], _EXCLUDED_BY_OPERATOR[""])
        if tokens and isinstance(tokens[-1], frozenset):  # adjacent expressions: one wider wildcard
            tokens[-1] = tokens[-1] & excluded
        else:
            tokens.append(excluded)
        last = match.end()
    tokens.extend(template[last:])
    return tokens


def template_matches(template: str, uri: str) -> bool:
    """Whether ``uri`` falls under the URI template ``template`` (level 1, generous beyond).

    Linear in ``len(uri) * len(template)``; either longer than 8192
    characters never matches.
    """
    if "{" not in template:
        return template == uri
    if len(template) > _MAX_TEMPLATE_MATCH or len(uri) > _MAX_TEMPLATE_MATCH:
        return False
    tokens = _template_tokens(template)
    final = len(tokens)

    def closure(states: set[int]) -> set[int]:
        # A wildcard may match nothing: whoever stands on one also stands after it.
        # Adjacent wildcards are merged, so one step forward is enough.
        return states | {i + 1 for i in states if i < final and isinstance(tokens[i], frozenset)}

    states = closure({0})
    for char in uri:
        following: set[int] = set()
        for i in states:
            if i == final:
                continue
            token = tokens[i]
            if isinstance(token, frozenset):
                if char not in token:
                    following.add(i)
            elif token == char:
                following.add(i + 1)
        if not following:
            return False
        states = closure(following)
    return final in states


# ----------------------------------------------------------------------------
# URIs inside results
# ----------------------------------------------------------------------------


def rewrite_result_uris(result: Mapping[str, Any], namespace: str) -> Any:
    """``result`` with every resource URI it carries as an ``mcpx://`` URI of ``namespace``.

    Rewritten: ``resource_link`` blocks' ``uri`` and embedded ``resource``
    blocks' ``resource.uri`` in ``content`` (``CallToolResult``, a task's
    payload) and in ``messages[].content`` (``GetPromptResult``), and each
    ``contents[].uri`` (``ReadResourceResult``).  Nothing else is touched —
    ``structuredContent`` and ``_meta`` are the tool's own data — and no
    block is added, dropped or reordered.  Copy on write: the same object
    comes back when there was nothing to rewrite, and ``result`` is never
    edited.
    """
    if not isinstance(result, Mapping):
        return result
    if type(result) is dict and "messages" not in result and "contents" not in result:
        content = result.get("content")
        if type(content) is list:  # a tool's result: the usual one carries no resource block
            for block in content:
                if type(block) is not dict:
                    break
                kind = block.get("type")
                if kind in ("resource_link", "resource"):  # a tuple: any JSON value is compared, not hashed
                    break
            else:
                return result
    out: dict[str, Any] | None = None

    def put(key: str, value: Any) -> None:
        nonlocal out
        if out is None:
            out = dict(result)
        out[key] = value

    content = result.get("content")
    if isinstance(content, list):
        blocks = _rewrite_list(content, namespace, _rewrite_block)
        if blocks is not content:
            put("content", blocks)
    messages = result.get("messages")
    if isinstance(messages, list):
        rewritten = _rewrite_list(messages, namespace, _rewrite_message)
        if rewritten is not messages:
            put("messages", rewritten)
    contents = result.get("contents")
    if isinstance(contents, list):
        rewritten = _rewrite_list(contents, namespace, _rewrite_contents)
        if rewritten is not contents:
            put("contents", rewritten)
    return result if out is None else out


def _rewrite_list(items: list[Any], namespace: str, one: Any) -> list[Any]:
    new = [one(item, namespace) for item in items]
    return items if all(a is b for a, b in zip(new, items, strict=True)) else new


def _rewrite_contents(value: Any, namespace: str) -> Any:
    if isinstance(value, Mapping) and isinstance(value.get("uri"), str):
        return {**value, "uri": mcpx_uri(namespace, value["uri"])}
    return value


def _rewrite_block(block: Any, namespace: str) -> Any:
    if not isinstance(block, Mapping):
        return block
    kind = block.get("type")
    if kind == "resource_link":
        return _rewrite_contents(block, namespace)
    if kind == "resource":
        resource = block.get("resource")
        new = _rewrite_contents(resource, namespace)
        if new is not resource:
            return {**block, "resource": new}
    return block


def _rewrite_message(message: Any, namespace: str) -> Any:
    if not isinstance(message, Mapping):
        return message
    content = message.get("content")
    if isinstance(content, list):
        new: Any = _rewrite_list(content, namespace, _rewrite_block)
    else:
        new = _rewrite_block(content, namespace)
    return message if new is content else {**message, "content": new}
