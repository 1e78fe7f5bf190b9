"""Render ``spec/revisions.md``: the revision table of ``mcpx.core.revisions`` as prose and matrices.

``spec/revisions.md`` is generated, never edited by hand, and a test fails if
it drifts from the table (``tests/unit/test_revisions_doc.py``).  After
changing ``mcpx/core/revisions.py``, regenerate it with::

    python scripts/revisions_doc.py > spec/revisions.md

``tests/unit/test_revisions_doc.py`` fails while the file and ``render()``
disagree.  ``render()`` is pure and deterministic: it reads only the table,
iterates it in its own (insertion) order and sorts every set, so the same
table always gives byte-identical Markdown.  It does no I/O, as nothing in
the core does: ``scripts/revisions_doc.py`` writes it to standard output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from mcpx.core.revisions import (
    CACHEABLE,
    ERROR_CODES,
    EXTENSION_METHODS,
    META_KEYS,
    METHODS,
    NEWEST,
    OLDEST,
    REVISIONS,
    SHAPES,
    UNION_SHAPES,
    Era,
    FieldRule,
    MethodRule,
    Revision,
    Sender,
)

__all__ = ["COMMAND", "render"]

COMMAND: Final = "python scripts/revisions_doc.py > spec/revisions.md"
"""How to regenerate the document; quoted by the drift test when it fails."""

# Cell marks of the method matrices.
_YES: Final = "yes"
_NOT_YET: Final = "-"
_REMOVED: Final = "removed"
_INPUT: Final = "input request"
_EXT: Final = "extension"

_ERA_SHORT: Final[Mapping[Era, str]] = {
    Era.LEGACY: "version agreed once per connection by `initialize`",
    Era.MODERN: "version restated in every request's `_meta`, no handshake",
}

_ERA_LONG: Final[Mapping[Era, str]] = {
    Era.LEGACY: (
        "The client names a version in `initialize`; the server answers with that version if it "
        "speaks it, or else with one it does speak, and the client confirms with "
        "`notifications/initialized`.  The answer holds for the rest of the connection (the "
        "stdio process or the HTTP session)."
    ),
    Era.MODERN: (
        "There is no handshake and no session.  Every request carries "
        "`io.modelcontextprotocol/protocolVersion` and the client's capabilities in its `_meta`, "
        "and the server judges each request on its own; `server/discover` lists the versions a "
        "server speaks, and an unsupported version is refused with -32022."
    ),
}

_ERROR_NAMES: Final[Mapping[int, str]] = {
    -32002: "resource not found",
    -32042: "the client must first complete a URL-mode elicitation",
    -32020: "an HTTP header disagrees with the request body",
    -32021: "the request needs a client capability it did not declare",
    -32022: "the server does not speak the requested protocol version",
}

_SCOPE_MEANING: Final[Mapping[str, str]] = {
    "public": "the same for every caller, so shared caches may keep it",
    "private": "may hold the caller's own artefacts, so it is kept per authorization context",
}

_DIRECTIONS: Final[tuple[tuple[str, Sender, bool], ...]] = (
    ("Requests, client to server", Sender.CLIENT, False),
    ("Requests, server to client", Sender.SERVER, False),
    ("Notifications, client to server", Sender.CLIENT, True),
    ("Notifications, server to client", Sender.SERVER, True),
)


def _code(text: str) -> str:
    return f"`{text}`"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines.extend("| " + " | ".join(cell.replace("|", "\\|") or " " for cell in row) + " |" for row in rows)
    return lines


def _span(since: Revision, removed_in: Revision | None) -> str:
    if removed_in is None:
        return "every revision" if since is OLDEST else f"from {since}"
    last = REVISIONS[removed_in.order - 1]
    if since is last:
        return f"{since} only"
    start = "every revision" if since is OLDEST else f"from {since}"
    return f"{start} up to {last} (removed in {removed_in})"


# --------------------------------------------------------------------------
# Revisions
# --------------------------------------------------------------------------


_WAY: Final[Mapping[Sender, str]] = {Sender.CLIENT: "client to server", Sender.SERVER: "server to client"}


def _message_changes(rev: Revision) -> str:
    def listing(rules: Sequence[MethodRule], fate: Callable[[MethodRule], str]) -> str:
        # One entry per message; the two directions of a message share it
        # when they share a fate ("both ways").
        groups: dict[tuple[str, bool], dict[Sender, str]] = {}
        for rule in rules:
            groups.setdefault((rule.method, rule.notification), {})[rule.sender] = fate(rule)
        entries: list[str] = []
        for (method, _note), fates in groups.items():
            if len(fates) == 2 and len(set(fates.values())) == 1:
                entries.append(f"{_code(method)} (both ways{fates[Sender.CLIENT]})")
            else:
                entries += [f"{_code(method)} ({_WAY[sender]}{f})" for sender, f in fates.items()]
        return ", ".join(entries) if entries else "none"

    def fate(rule: MethodRule) -> str:
        if rule.input_request_from is rev:
            return ", now an input request"
        if _by_extension(rule.method, rule.sender, rule.notification, rev):
            return ", now in an extension"
        return ""

    if rev is OLDEST:
        count = sum(1 for m in METHODS if m.defined_in(rev))
        return f"the first release, with {count} requests and notifications counted per direction"
    added = listing([m for m in METHODS if m.since is rev], lambda _rule: "")
    removed = listing([m for m in METHODS if m.removed_in is rev], fate)
    return f"new messages: {added}; messages removed: {removed}"


def _revisions() -> list[str]:
    lines = ["## The revisions", ""]
    for rev in REVISIONS:
        lines.append(f"- **{rev}**: {rev.era.value} era, {_ERA_SHORT[rev.era]}; {_message_changes(rev)}.")
    lines.append("")
    for era in Era:
        members = ", ".join(str(rev) for rev in REVISIONS if rev.era is era)
        if members:
            lines += [f"**{era.value.capitalize()} era** ({members}).  {_ERA_LONG[era]}", ""]
    return lines


# --------------------------------------------------------------------------
# Methods
# --------------------------------------------------------------------------


def _extensions_of(method: str) -> list[str]:
    return sorted(ext for ext, methods in EXTENSION_METHODS.items() if method in methods)


def _by_extension(method: str, sender: Sender, notification: bool, rev: Revision) -> bool:
    # Extensions live in the modern era, where servers send no requests of
    # their own: an extension's requests go client to server and its
    # notifications server to client.
    if not rev.is_modern or not _extensions_of(method):
        return False
    return sender is (Sender.SERVER if notification else Sender.CLIENT)


def _cell(rule: MethodRule, rev: Revision) -> str:
    if rule.defined_in(rev):
        return _YES
    if rule.input_request_from is not None and rev >= rule.input_request_from:
        return _INPUT
    if _by_extension(rule.method, rule.sender, rule.notification, rev):
        return _EXT
    if rule.removed_for(rev):
        return _REMOVED
    return _NOT_YET


def _method_notes(rule: MethodRule) -> str:
    notes: list[str] = []
    if rule.replacement:
        notes.append(f"replaced by {rule.replacement}")
    exts = _extensions_of(rule.method)
    if exts and _by_extension(rule.method, rule.sender, rule.notification, NEWEST):
        notes.append("extension " + ", ".join(_code(e) for e in exts))
    return "; ".join(notes)


def _methods() -> list[str]:
    lines = [
        "## Methods and notifications",
        "",
        f"`{_YES}`: a JSON-RPC message of that direction in that revision. "
        f"`{_NOT_YET}`: not yet defined. `{_REMOVED}`: no longer defined. "
        f"`{_INPUT}`: no longer sent as a JSON-RPC request, only asked for as an entry of an "
        f"`input_required` result's `inputRequests`. "
        f"`{_EXT}`: defined only by the extension named in the last column, and only for peers "
        "that declare it.",
        "",
    ]
    header = ["Method", *(str(rev) for rev in REVISIONS), "Notes"]
    for title, sender, notification in _DIRECTIONS:
        rules = [m for m in METHODS if m.sender is sender and m.notification is notification]
        rows = [[_code(m.method), *(_cell(m, rev) for rev in REVISIONS), _method_notes(m)] for m in rules]
        known = {m.method for m in rules}
        for ext, methods in EXTENSION_METHODS.items():
            for method in sorted(methods - known):
                is_note = method.startswith("notifications/")
                if is_note is notification and _by_extension(method, sender, notification, NEWEST):
                    cells = [
                        _EXT if _by_extension(method, sender, notification, r) else _NOT_YET
                        for r in REVISIONS
                    ]
                    rows.append([_code(method), *cells, f"extension {_code(ext)}"])
        lines += [f"### {title}", "", *_table(header, rows), ""]
    return lines


# --------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------


def _field_label(name: str, rule: FieldRule) -> str:
    if rule.items:
        return f"`{name}` ({rule.items}[])"
    if rule.shape:
        return f"`{name}` ({rule.shape})"
    if rule.values:
        return f"`{name}` (map of {rule.values})"
    return _code(name)


def _shape_cells(fields: Mapping[str, FieldRule]) -> list[str]:
    cells: list[str] = []
    existed = False
    for rev in REVISIONS:
        present = [n for n, r in fields.items() if r.defined_in(rev)]
        if not existed:
            cells.append(", ".join(_field_label(n, fields[n]) for n in present))
            existed = bool(present)
            continue
        gained = [_field_label(n, r) for n, r in fields.items() if r.since is rev]
        lost = [_code(n) for n, r in fields.items() if r.removed_in is rev]
        parts = [f"+{g}" for g in gained] + [f"−{x}" for x in lost]
        cells.append(", ".join(parts))
        existed = bool(present)
    return cells


def _shapes() -> list[str]:
    lines = [
        "## Fields per revision",
        "",
        "The first filled cell of a row lists the fields the shape has when it first appears; "
        "later cells list what a revision adds (+) or takes away (−).  A name in brackets is the "
        "shape of the field's value (`[]`: a list of them).  mcpx builds every object in the "
        "newest spelling and cuts it down to the peer's revision with this table.",
        "",
    ]
    header = ["Shape", *(str(rev) for rev in REVISIONS)]
    results = [name for name in SHAPES if name.endswith("Result")]
    objects = [name for name in SHAPES if not name.endswith("Result")]
    for title, names in (("Results", results), ("Other objects", objects)):
        rows = [[f"**{name}**", *_shape_cells(SHAPES[name])] for name in names]
        lines += [f"### {title}", "", *_table(header, rows), ""]
    for union_name, union in UNION_SHAPES.items():
        lines += [
            f"### {union_name} variants, chosen by `{union.discriminator}`",
            "",
            *_table(
                [union.discriminator, "Shape", "Revisions"],
                ([_code(tag), v.shape, _span(v.since, v.removed_in)] for tag, v in union.variants.items()),
            ),
            "",
        ]
    return lines


# --------------------------------------------------------------------------
# _meta keys, error codes, caching
# --------------------------------------------------------------------------


def _meta_keys() -> list[str]:
    rows = [
        [_code(mk.key), ", ".join(sorted(mk.where)), _span(mk.since, mk.removed_in)]
        for mk in META_KEYS.values()
    ]
    return [
        "## Reserved `_meta` keys",
        "",
        "Keys the protocol itself reads in a message's `_meta`, by the kind of message that may "
        "carry them.  When mcpx cuts a message down to an older revision under its strict "
        "policy, it drops the reserved keys that revision does not define; other `_meta` keys "
        "belong to the sender and pass through.",
        "",
        *_table(["Key", "Carried by", "Revisions"], rows),
        "",
    ]


def _error_codes() -> list[str]:
    rows = [
        [_code(str(code)), _ERROR_NAMES.get(code, "(undescribed)"), _span(since, removed)]
        for code, (since, removed) in ERROR_CODES.items()
    ]
    return [
        "## Error codes",
        "",
        "The JSON-RPC codes -32700 and -32600 to -32603 mean the same in every revision.  The "
        "MCP-specific codes below exist only in some revisions:",
        "",
        *_table(["Code", "Meaning", "Revisions"], rows),
        "",
    ]


def _result_of(method: str) -> str:
    for rule in METHODS:
        if rule.method == method and rule.sender is Sender.CLIENT and not rule.notification and rule.result:
            return rule.result
    return "?"


def _cacheable() -> list[str]:
    modern = ", ".join(str(rev) for rev in REVISIONS if rev.is_modern)
    rows = [
        [_code(method), _result_of(method), f"`{c.scope}`: {_SCOPE_MEANING.get(c.scope, c.scope)}", c.age]
        for method, c in CACHEABLE.items()
    ]
    return [
        "## Cacheable results",
        "",
        f"From {modern}, these results must carry `ttlMs` and `cacheScope`.  The scope is the one "
        "mcpx puts on its own answers; the last column names the configured maximum age "
        "(`list` or `read`) that sets `ttlMs`.",
        "",
        *_table(["Method", "Result", "Scope chosen by mcpx", "Max age"], rows),
        "",
    ]


# --------------------------------------------------------------------------
# The document
# --------------------------------------------------------------------------


def render() -> str:
    """The whole of ``spec/revisions.md`` as a string, ending in one newline."""
    lines = [
        "<!-- Generated from mcpx/core/revisions.py; do not edit by hand. -->",
        f"<!-- Regenerate with: {COMMAND} -->",
        "",
        "# MCP revisions as mcpx sees them",
        "",
        f"mcpx speaks {len(REVISIONS)} MCP revisions, {OLDEST} to {NEWEST}, on both sides of a "
        "connection.  Everything below is read from one table, `mcpx/core/revisions.py`, which "
        "the tests check row by row against the official schema of each revision.",
        "",
        *_revisions(),
        *_methods(),
        *_shapes(),
        *_meta_keys(),
        *_error_codes(),
        *_cacheable(),
    ]
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"
