"""Results are built once, in the newest shape, and spelled down at the edge.

``downgrade(value, shape, revision)`` returns ``value`` as a peer on
``revision`` may receive it (spec/messages.md §3):

* A field the revision's schema does not define is dropped (``SHAPES`` in
  ``revisions`` says which), recursively through every nested object, list
  and content block.  A reserved ``_meta`` key the revision does not define
  is dropped too; other ``_meta`` keys are the sender's business and stay.
* A content block the revision cannot parse is rewritten into one it can:
  ``audio`` before 2025-03-26 becomes an embedded resource carrying the same
  bytes; ``resource_link`` before 2025-06-18 becomes a text block naming the
  link.  ``structuredContent`` that a revision cannot carry (none before
  2025-06-18, only objects before 2026-07-28) is dropped, and when no text
  block carries it already its JSON is appended as one, so nothing the tool
  said is lost.  An ``outputSchema`` that is not an object schema is dropped
  for 2025-06-18 and 2025-11-25, whose schemas require ``type: "object"``.
* Copy on write: nothing is ever edited in place.  When nothing needs to
  change the very same object comes back (for the newest revision that is
  the common case and costs one table lookup); otherwise a copy that shares
  every untouched subtree.  A stored result handed out more than once is
  therefore never downgraded for whoever reads it next.

For a revision that ``spec.lenient`` names (``strict=False``) only what the
peer could not parse at all is rewritten (unknown content-block types); extra
fields are left in place.

``envelope`` adds what 2026-07-28 requires of every result: ``resultType``,
``_meta["io.modelcontextprotocol/serverInfo"]``, and on cacheable results
``ttlMs`` + ``cacheScope``.  ``downgrade_error`` maps an MCP-specific error code
a revision does not define onto one it does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

import orjson

from .errors import INVALID_PARAMS
from .revisions import (
    CACHEABLE,
    ERROR_CODES,
    META_KEYS,
    META_SERVER_INFO,
    REVISIONS,
    SHAPES,
    UNION_SHAPES,
    FieldRule,
    Revision,
)

__all__ = ["Ages", "downgrade", "downgrade_error", "envelope"]

R25A: Final = Revision.V2025_03_26
R25B: Final = Revision.V2025_06_18
R26: Final = Revision.V2026_07_28


# --------------------------------------------------------------------------
# Plans: per (shape, revision), computed once from the table.
# --------------------------------------------------------------------------


# A list of union members (content blocks) walked at one revision: the union's
# discriminator, and for each tag the fields that matter in that variant.  A
# member holding none of its tag's fields is left as it is without a call.
_Quiet = tuple[str, dict[str, frozenset[str]]]


@dataclass(frozen=True, slots=True)
class _Plan:
    drop: frozenset[str]  # fields this revision does not define
    # Fields whose contents may need work: (name, rule, the reserved keys a _meta
    # field loses or None, the quiet test for a list of union members or None).
    walk: tuple[tuple[str, FieldRule, frozenset[str] | None, _Quiet | None], ...]
    untouched: bool  # nothing in this shape or below can change at this revision
    # Every field whose presence can make a difference (drop, walk and the
    # special rules' fields): an object holding none of them comes back as it is.
    touch: frozenset[str]
    special: bool = False  # a shape in _SPECIAL: its own rule runs after the walk (strict only)


def _meta_keys_dropped(where: str, rev: Revision) -> frozenset[str]:
    return frozenset(
        mk.key
        for mk in META_KEYS.values()
        if (where == "object" or where in mk.where) and not mk.defined_in(rev)
    )


def _build_plans() -> dict[tuple[str, Revision], _Plan]:
    plans: dict[tuple[str, Revision], _Plan] = {}

    def untouched_union(name: str, rev: Revision, seen: set[str]) -> bool:
        union = UNION_SHAPES[name]
        return all(v.defined_in(rev) and untouched_shape(v.shape, rev, seen) for v in union.variants.values())

    def untouched_field(rule: FieldRule, rev: Revision, seen: set[str]) -> bool:
        if rule.opaque:
            return True
        if rule.meta is not None:
            return not _meta_keys_dropped(rule.meta, rev)
        child = rule.shape or rule.items or rule.values
        if child is None:
            return True
        if child in UNION_SHAPES:
            return untouched_union(child, rev, seen)
        return untouched_shape(child, rev, seen)

    def untouched_shape(name: str, rev: Revision, seen: set[str]) -> bool:
        if name in seen:
            return True
        seen = seen | {name}
        fields = SHAPES[name]
        return all(rule.defined_in(rev) and untouched_field(rule, rev, seen) for rule in fields.values())

    for name, fields in SHAPES.items():
        for rev in REVISIONS:
            drop = frozenset(k for k, rule in fields.items() if not rule.defined_in(rev))
            walk = tuple(
                (k, rule, None if rule.meta is None else _meta_keys_dropped(rule.meta, rev), None)
                for k, rule in fields.items()
                if rule.defined_in(rev) and not untouched_field(rule, rev, {name})
            )
            touch = drop | {k for k, _, _, _ in walk} | _SPECIAL.get(name, frozenset())
            plans[(name, rev)] = _Plan(
                drop=drop, walk=walk, untouched=not drop and not walk, touch=touch, special=name in _SPECIAL
            )
    return plans


def _with_quiet(plans: dict[tuple[str, Revision], _Plan]) -> dict[tuple[str, Revision], _Plan]:
    """``plans`` whose walked lists of union members carry their quiet test (it needs the plans first)."""

    def quiet(rule: FieldRule, rev: Revision) -> _Quiet | None:
        if rule.items is None or rule.items not in UNION_SHAPES:
            return None
        tags = _QUIET[(rule.items, rev)]
        return (UNION_SHAPES[rule.items].discriminator, tags)

    return {
        (name, rev): replace(plan, walk=tuple((k, rule, m, quiet(rule, rev)) for k, rule, m, _ in plan.walk))
        for (name, rev), plan in plans.items()
    }


# Shapes with rules beyond dropping fields, and the fields those rules read:
# their plans never report untouched when the special case can apply.
_SPECIAL: Final[dict[str, frozenset[str]]] = {
    "CallToolResult": frozenset({"structuredContent"}),
    "Tool": frozenset({"outputSchema"}),
}


_BASE_PLANS: Final = _build_plans()  # _PLANS, below, adds what needs _QUIET
_UNIONS: Final = dict(UNION_SHAPES)
_CACHEABLE: Final = dict(CACHEABLE)  # a dict's get, not a mapping proxy's: envelope runs per result
# (union, revision) -> {tag: the variant's shape, or None when the revision
# lacks the variant and the block must be converted}.
_VARIANTS: Final[dict[tuple[str, Revision], dict[str, str | None]]] = {
    (name, rev): {
        tag: (variant.shape if variant.defined_in(rev) else None) for tag, variant in union.variants.items()
    }
    for name, union in UNION_SHAPES.items()
    for rev in REVISIONS
}
# (union, revision) -> {tag: the fields that matter in that variant}: a block
# holding none of them is left as it is without a call (a list of content
# blocks is walked on every tools/call result).
_QUIET: Final[dict[tuple[str, Revision], dict[str, frozenset[str]]]] = {
    (name, rev): {
        tag: _BASE_PLANS[(shape, rev)].touch for tag, shape in variants.items() if shape is not None
    }
    for (name, rev), variants in _VARIANTS.items()
}
_PLANS: Final = _with_quiet(_BASE_PLANS)


# --------------------------------------------------------------------------
# The walk
# --------------------------------------------------------------------------


def downgrade(value: Mapping[str, Any], shape: str, revision: Revision, *, strict: bool = True) -> Any:
    """``value`` (a ``shape`` in the newest spelling) as ``revision`` may receive it.

    Returns ``value`` itself when nothing needs to change, otherwise a
    copy-on-write copy.  Unknown shapes are returned unchanged.
    """
    plan = _PLANS.get((shape, revision))  # a result's shape, as a rule: one lookup
    if plan is None:
        return _union(value, shape, revision, strict) if shape in _UNIONS else value
    return _object(value, shape, revision, strict, plan)


def _object(value: Any, shape: str, rev: Revision, strict: bool, plan: _Plan | None = None) -> Any:
    if not isinstance(value, dict):
        return value
    if plan is None:
        plan = _PLANS[(shape, rev)]
    if plan.touch.isdisjoint(value):
        return value  # nothing here is dropped, walked or rewritten: the common case, one set operation
    out: dict[str, Any] | None = None
    if strict and not plan.drop.isdisjoint(value):
        out = {k: v for k, v in value.items() if k not in plan.drop}
    for key, rule, meta_drop, quiet in plan.walk:
        if key not in value:
            continue
        old = value[key]
        if meta_drop is not None:  # a _meta object, in line (_meta): every result carries one at 2026-07-28
            if not strict or not isinstance(old, dict) or meta_drop.isdisjoint(old):
                continue
            new = {k: v for k, v in old.items() if k not in meta_drop}
        elif quiet is not None and type(old) is list:
            # A tools/call result's content blocks: as a rule none holds a field its variant's
            # plan touches, and the list is left as it is without a call per block (what
            # _field would decide).
            discriminator, tags = quiet
            for item in old:
                if type(item) is not dict:
                    break
                tag = item.get(discriminator)
                if type(tag) is not str:
                    break
                touch = tags.get(tag)
                if touch is None or not touch.isdisjoint(item):
                    break
            else:
                continue
            new = _field(old, rule, rev, strict)
        else:
            new = _field(old, rule, rev, strict)
        if new is not old:
            if out is None:
                out = dict(value)
            out[key] = new
    if strict and plan.special:
        if shape == "CallToolResult":
            if "structuredContent" in value:
                out = _call_tool_result(value, out, rev)
        else:
            out = _tool(value, out, rev)
    return value if out is None else out


def _field(value: Any, rule: FieldRule, rev: Revision, strict: bool) -> Any:
    # (A _meta field never comes here: _object drops its reserved keys in line.)
    if rule.shape is not None:
        return _dispatch(value, rule.shape, rev, strict)
    if rule.items is not None:
        if not isinstance(value, list):
            return value
        shape = rule.items
        quiet = _QUIET.get((shape, rev))
        discriminator = _UNIONS[shape].discriminator if quiet is not None else ""
        for i, item in enumerate(value):
            if quiet is not None and isinstance(item, dict):
                tag = item.get(discriminator)
                if type(tag) is str:
                    touch = quiet.get(tag)
                    if touch is not None and touch.isdisjoint(item):
                        continue  # what _union would decide, without the calls
            new = _dispatch(item, shape, rev, strict)
            if new is not item:  # copy on write: the first change makes the new list
                items = value[:i]
                items.append(new)
                items.extend(_dispatch(rest, shape, rev, strict) for rest in value[i + 1 :])
                return items
        return value
    if rule.values is not None and isinstance(value, dict):
        out = {k: _dispatch(v, rule.values, rev, strict) for k, v in value.items()}
        return out if any(out[k] is not value[k] for k in value) else value
    return value


def _dispatch(value: Any, shape: str, rev: Revision, strict: bool) -> Any:
    if shape in _UNIONS:
        return _union(value, shape, rev, strict)
    return _object(value, shape, rev, strict)


def _union(value: Any, shape: str, rev: Revision, strict: bool) -> Any:
    if not isinstance(value, dict):
        return value
    tag = value.get(_UNIONS[shape].discriminator)
    variants = _VARIANTS[(shape, rev)]
    if not isinstance(tag, str) or tag not in variants:
        return value  # a block type no revision defines: carried as it came
    variant_shape = variants[tag]
    if variant_shape is None:
        converted = _convert_block(value, rev)
        return _union(converted, shape, rev, strict)
    return _object(value, variant_shape, rev, strict)


def _convert_block(block: Mapping[str, Any], rev: Revision) -> dict[str, Any]:
    """A content block ``rev`` cannot parse, as one it can (same information)."""
    kind = block.get("type")
    if kind == "audio" and rev < R25A:
        mime = block.get("mimeType") or "application/octet-stream"
        return {
            "type": "resource",
            "resource": {
                "uri": f"urn:mcpx:inline-audio:{mime}",
                "mimeType": mime,
                "blob": block.get("data", ""),
            },
        }
    if kind == "resource_link" and rev < R25B:
        name = block.get("title") or block.get("name") or block.get("uri", "")
        text = f"Resource link: {name} <{block.get('uri', '')}>"
        if block.get("description"):
            text += f" — {block['description']}"
        if block.get("mimeType"):
            text += f" ({block['mimeType']})"
        return {"type": "text", "text": text}
    raise AssertionError(f"no conversion for content block {kind!r} at {rev}")  # pragma: no cover


def _structured_allowed(value: Any, rev: Revision) -> bool:
    if rev < R25B:
        return False
    if rev < R26:
        return isinstance(value, dict)
    return True


def _call_tool_result(original: Mapping[str, Any], out: dict[str, Any] | None, rev: Revision) -> Any:
    if "structuredContent" not in original:
        return out
    structured = original["structuredContent"]
    if _structured_allowed(structured, rev):
        return out
    current = out if out is not None else dict(original)
    current.pop("structuredContent", None)
    content = current.get("content")
    blocks = list(content) if isinstance(content, list) else []
    if not any(isinstance(b, dict) and b.get("type") == "text" for b in blocks):
        blocks.append({"type": "text", "text": orjson.dumps(structured).decode()})
        current["content"] = blocks
    return current


def _tool(original: Mapping[str, Any], out: dict[str, Any] | None, rev: Revision) -> Any:
    schema = original.get("outputSchema")
    if schema is None or rev >= R26 or rev < R25B:
        return out
    if isinstance(schema, dict) and schema.get("type") == "object":
        return out
    current = out if out is not None else dict(original)
    current.pop("outputSchema", None)
    return current


# --------------------------------------------------------------------------
# The 2026-07-28 envelope and error codes
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Ages:
    """``protoMessages.listMaxAge`` / ``readMaxAge`` in milliseconds."""

    list_ms: int = 60_000
    read_ms: int = 0


def envelope(
    result: Mapping[str, Any],
    method: str,
    server_info: Mapping[str, Any],
    ages: Ages,
) -> dict[str, Any]:
    """``result`` with the fields 2026-07-28 requires (a new dict; the input is untouched).

    ``resultType`` defaults to ``"complete"``; only a complete result carries
    cache hints, and an ``input_required`` result carries none (2026-07-28
    server/utilities/caching).
    """
    out = dict(result)
    result_type = out.setdefault("resultType", "complete")
    meta = out.get("_meta")
    if isinstance(meta, dict):
        meta = dict(meta)
        meta.setdefault(META_SERVER_INFO, server_info)
    else:
        meta = {META_SERVER_INFO: server_info}
    out["_meta"] = meta
    cache = _CACHEABLE.get(method)
    if cache is not None and result_type == "complete":
        out.setdefault("ttlMs", ages.list_ms if cache.age == "list" else ages.read_ms)
        out.setdefault("cacheScope", cache.scope)
    return out


def downgrade_error(code: int, data: Any, rev: Revision) -> tuple[int, Any]:
    """An MCP-specific code ``rev`` does not define becomes ``-32602`` (data kept).

    The main case is ``-32002`` (resource not found), which 2026-07-28 replaced
    with ``-32602`` carrying ``data.uri`` (2026-07-28 changelog; spec/messages.md
    §3).
    """
    span = ERROR_CODES.get(code)
    if span is None:
        return code, data
    since, removed_in = span
    if since <= rev and (removed_in is None or rev < removed_in):
        return code, data
    return INVALID_PARAMS, data
