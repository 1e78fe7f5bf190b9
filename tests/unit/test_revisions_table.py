"""Every row of ``mcpx.core.revisions`` checked against the official MCP schemas.

The table is hand-written; these tests are what keeps it honest.  Each test is
parametrized by revision (and by row where that helps), and each assertion
names the row, the revision and what the schema says, so a failure reads as a
correction to make in ``mcpx/core/revisions.py``.

The schemas come from ``$MCPX_SCHEMAS`` or ``../shared/mcp-schemas`` and are
never copied into the repository; without them every test here is skipped
(see ``tests/unit/schema_support.py``).

Two facts in the table come from the specification's prose rather than from
any ``schema.json``; they are listed in ``DOCS_ONLY_META_KEYS`` and
``DOCS_ONLY_ERROR_CODES`` with their source, and the tests check that the
schemas really are silent about them (so the lists cannot go stale unnoticed).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from mcpx.core.revisions import (
    CACHEABLE,
    ERROR_CODES,
    EXTENSION_METHODS,
    META_KEYS,
    METHODS,
    REVISIONS,
    SCHEMA_NAMES,
    SHAPES,
    TASKS_EXTENSION,
    UNION_SHAPES,
    FieldRule,
    MethodRule,
    Revision,
    Sender,
)
from tests.conftest import schemas_dir
from tests.unit.schema_support import EXT_TASKS_DIR, Json, Schema, load_schema, skip_reason

R26 = Revision.V2026_07_28
REVISION_IDS = [rev.value for rev in REVISIONS]


def schema(rev: Revision) -> Schema:
    return load_schema(rev.value)


def _fmt(names: set[str] | frozenset[str]) -> str:
    return ", ".join(sorted(names)) if names else "(none)"


def _span(rule: object) -> str:
    since = getattr(rule, "since", None)
    removed = getattr(rule, "removed_in", None)
    return f"since {since}" + (f", removed in {removed}" if removed else "")


# ---------------------------------------------------------------------------
# Where the table's inline shapes live in the schemas
# ---------------------------------------------------------------------------

INLINE_LOCATIONS: dict[str, tuple[tuple[str, str], ...]] = {
    # Shapes mapped to () in SCHEMA_NAMES: objects with no definition of their
    # own, found as a property of a parent definition.  Where several parents
    # use the shape, each location is checked on its own.
    "ListChangedCapability": (("ServerCapabilities", "prompts"), ("ServerCapabilities", "tools")),
    "ResourcesCapability": (("ServerCapabilities", "resources"),),
    "ServerTasksCapability": (("ServerCapabilities", "tasks"),),
    "RootsCapability": (("ClientCapabilities", "roots"),),
    "SamplingCapability": (("ClientCapabilities", "sampling"),),
    "ElicitationCapability": (("ClientCapabilities", "elicitation"),),
    "Completion": (("CompleteResult", "completion"),),
    "ListChangedNotificationParams": (
        ("ToolListChangedNotification", "params"),
        ("PromptListChangedNotification", "params"),
        ("ResourceListChangedNotification", "params"),
    ),
}

INLINE_BEFORE_NAMED: dict[str, tuple[str, str]] = {
    # Shapes that are named definitions in newer schemas but inline objects in
    # older ones: where to look in a revision that lacks the definition.
    "ProgressNotificationParams": ("ProgressNotification", "params"),
    "LoggingMessageNotificationParams": ("LoggingMessageNotification", "params"),
    "ResourceUpdatedNotificationParams": ("ResourceUpdatedNotification", "params"),
    "CancelledNotificationParams": ("CancelledNotification", "params"),
    "SubscriptionsAcknowledgedNotificationParams": ("SubscriptionsAcknowledgedNotification", "params"),
    # 2024-11-05 has no Annotations definition: each content type inlines it.
    "Annotations": ("TextContent", "annotations"),
}

DOCS_ONLY_META_KEYS: dict[str, str] = {
    # key -> where the revision span comes from instead of a schema.json
    "io.modelcontextprotocol/model-immediate-response": (
        "2025-11-25 docs basic/utilities/tasks (CreateTaskResult._meta); no schema.json names it"
    ),
}

DOCS_ONLY_ERROR_CODES: dict[int, str] = {
    -32002: (
        "resource not found, 2024-11-05 … 2025-11-25: the server/resources page's error handling and a comment in the "
        "2026-07-28 schema.ts; no schema.json declares it as an error code const"
    ),
}

JSON_RPC_CODES = frozenset({-32700, -32600, -32601, -32602, -32603})
"""Standard JSON-RPC codes: valid in every revision, deliberately not in ERROR_CODES."""

MESSAGE_UNIONS: tuple[tuple[str, Sender, bool], ...] = (
    ("ClientRequest", Sender.CLIENT, False),
    ("ServerRequest", Sender.SERVER, False),
    ("ClientNotification", Sender.CLIENT, True),
    ("ServerNotification", Sender.SERVER, True),
)

META_KIND_DEFINITION_SUFFIX = {
    "request": "RequestMetaObject",
    "result": "ResultMetaObject",
    "notification": "NotificationMetaObject",
}


def _table_methods(rev: Revision, sender: Sender, notification: bool) -> dict[str, MethodRule]:
    return {
        m.method: m
        for m in METHODS
        if m.sender is sender and m.notification is notification and m.defined_in(rev)
    }


# ---------------------------------------------------------------------------
# The revisions themselves
# ---------------------------------------------------------------------------


def test_revisions_are_the_dated_schema_directories() -> None:
    root = schemas_dir()
    if not root.is_dir():
        pytest.skip(skip_reason(root))
    dated = {p.name for p in root.iterdir() if p.is_dir() and re.fullmatch(r"\d{4}-\d{2}-\d{2}", p.name)}
    table = {rev.value for rev in REVISIONS}
    assert dated == table, (
        f"Revision lists {_fmt(table)}; {root} has schemas for {_fmt(dated)} "
        f"(not in the table: {_fmt(dated - table)}; no schema: {_fmt(table - dated)})"
    )
    in_order = sorted(REVISIONS, key=lambda rev: rev.value)
    assert list(REVISIONS) == in_order, "REVISIONS is not in release order"


@pytest.mark.parametrize("rev", REVISIONS, ids=REVISION_IDS)
def test_schema_dialect(rev: Revision) -> None:
    # draft-07 `definitions` up to 2025-06-18, 2020-12 `$defs` from 2025-11-25 (each schema.json).
    s = schema(rev)
    expected = "definitions" if rev <= Revision.V2025_06_18 else "$defs"
    assert s.container == expected, (
        f"{rev} schema keeps its definitions under {s.container!r}, not {expected!r}"
    )


# ---------------------------------------------------------------------------
# Methods and notifications
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("union,sender,notification", MESSAGE_UNIONS, ids=[u[0] for u in MESSAGE_UNIONS])
@pytest.mark.parametrize("rev", REVISIONS, ids=REVISION_IDS)
def test_methods_match_message_unions(rev: Revision, union: str, sender: Sender, notification: bool) -> None:
    s = schema(rev)
    in_schema = s.union_methods(union)
    in_table = _table_methods(rev, sender, notification)
    problems = [
        f"METHODS row {m!r} (sender {sender.value}, {_span(in_table[m])}): table says defined in {rev}, "
        f"but {rev} {union} has no member with method {m!r}"
        for m in sorted(set(in_table) - in_schema)
    ]
    for m in sorted(in_schema - set(in_table)):
        rule = next(
            (r for r in METHODS if r.method == m and r.sender is sender and r.notification is notification),
            None,
        )
        said = f"row says {_span(rule)}" if rule else "there is no such row"
        problems.append(f"{rev} {union} defines {m!r} (sender {sender.value}) but METHODS {said}")
    schema_has_union = s.has(union)
    assert not problems, (
        f"{rev} {union} ({'present' if schema_has_union else 'absent from the schema'}) "
        f"lists {_fmt(in_schema)}:\n  " + "\n  ".join(problems)
    )


@pytest.mark.parametrize("rev", REVISIONS, ids=REVISION_IDS)
def test_input_request_methods(rev: Revision) -> None:
    s = schema(rev)
    in_schema = s.union_methods("InputRequest")
    in_table = {
        m.method
        for m in METHODS
        if m.input_request_from is not None and m.input_request_from <= rev and not m.notification
    }
    problems = [
        f"METHODS row {m!r} says input_request_from <= {rev}, but {rev} InputRequest has no member "
        f"with that method (InputRequest lists {_fmt(in_schema)})"
        for m in sorted(in_table - in_schema)
    ]
    problems += [
        f"{rev} InputRequest has a member with method {m!r}, but no METHODS row has "
        f"input_request_from <= {rev} for it"
        for m in sorted(in_schema - in_table)
    ]
    assert not problems, "\n".join(problems)


def test_input_request_rows_are_server_requests_removed_from_the_wire() -> None:
    for m in METHODS:
        if m.input_request_from is None:
            continue
        assert m.sender is Sender.SERVER and not m.notification, (
            f"METHODS row {m.method!r}: input_request_from is only meaningful for server->client requests"
        )
        assert m.removed_for(m.input_request_from), (
            f"METHODS row {m.method!r}: input-request-only from {m.input_request_from} but still "
            f"defined on the wire there ({_span(m)})"
        )


def test_extension_methods_are_in_the_tasks_extension_schema() -> None:
    ext = load_schema(EXT_TASKS_DIR)
    newest = schema(R26)
    defined = set().union(*(ext.method_consts(node) for node in ext.defs.values()))
    # The extension schema repeats the core input-request definitions it
    # refers to; only methods the core 2026-07-28 schema lacks are its own.
    core = set().union(*(newest.method_consts(node) for node in newest.defs.values()))
    own = defined - core
    table = EXTENSION_METHODS[TASKS_EXTENSION]
    assert table == own, (
        f"EXTENSION_METHODS[{TASKS_EXTENSION!r}] is {_fmt(table)}; the ext-tasks 2026-07-28 schema "
        f"defines {_fmt(own)} beyond the core schema (missing from the table: {_fmt(own - table)}; "
        f"not in the extension schema: {_fmt(table - own)})"
    )
    assert set(EXTENSION_METHODS) == {TASKS_EXTENSION}, (
        "EXTENSION_METHODS names an extension this test has no schema for: "
        f"{_fmt(set(EXTENSION_METHODS) - {TASKS_EXTENSION})}"
    )


RESULT_ALIASES: dict[str, str] = {
    # schema result definition -> the row's result, where mcpx deliberately
    # uses a more general name.  2025-11-25's tasks/result answers with
    # GetTaskPayloadResult, "the result type of the original request"; its
    # definition is Result's, and mcpx relays it unchanged as a plain Result.
    # test_result_aliases_are_structurally_equal keeps this honest.
    "GetTaskPayloadResult": "Result",
}


def _request_union(rule: MethodRule, rev: Revision) -> str | None:
    if rule.defined_in(rev):
        return "ClientRequest" if rule.sender is Sender.CLIENT else "ServerRequest"
    if rule.input_request_from is not None and rule.input_request_from <= rev:
        return "InputRequest"
    return None


@pytest.mark.parametrize("rev", REVISIONS, ids=REVISION_IDS)
def test_method_results_match_schema(rev: Revision) -> None:
    # The schema pairs FooRequest with FooResult; a request without a
    # dedicated result definition (ping, resources/subscribe, …) answers
    # with EmptyResult.
    s = schema(rev)
    problems: list[str] = []
    for m in METHODS:
        union = _request_union(m, rev)
        if m.notification or union is None:
            continue
        request = s.union_request_definitions(union).get(m.method)
        if request is None:
            continue  # reported by the union tests
        derived = request.removesuffix("Request") + "Result"
        expected = derived if s.has(derived) else "EmptyResult"
        expected_row = RESULT_ALIASES.get(expected, expected)
        names = SCHEMA_NAMES.get(m.result or "", (m.result,))
        if m.result != expected_row and expected not in names:
            problems.append(
                f"METHODS row {m.method!r} ({m.sender.value}) result={m.result!r}: {rev} answers "
                f"{request} with {expected}"
                + ("" if s.has(derived) else f" (there is no {derived} definition)")
            )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("rev", REVISIONS, ids=REVISION_IDS)
def test_result_aliases_are_structurally_equal(rev: Revision) -> None:
    s = schema(rev)
    for schema_name, row_name in RESULT_ALIASES.items():
        if not s.has(schema_name):
            continue
        assert s.def_properties(schema_name) == s.def_properties(row_name), (
            f"{rev} {schema_name} has properties {_fmt(s.def_properties(schema_name))}, no longer those of "
            f"{row_name} ({_fmt(s.def_properties(row_name))}): RESULT_ALIASES must go and the rows naming "
            f"{row_name} for it must name {schema_name}"
        )


# ---------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------


def _shape_nodes(shape: str, s: Schema) -> list[tuple[str, Json | None]]:
    """(where, object schema) for every place ``shape`` lives in schema ``s``; ``None`` if absent."""
    names = SCHEMA_NAMES.get(shape, (shape,))
    if names == ():
        return [
            (f"{parent}.properties.{prop}", s.inline(parent, prop))
            for parent, prop in INLINE_LOCATIONS[shape]
        ]
    present = [n for n in names if s.has(n)]
    if present:
        return [(n, s.defs[n]) for n in present]
    if shape in INLINE_BEFORE_NAMED:
        parent, prop = INLINE_BEFORE_NAMED[shape]
        where = f"{parent}.properties.{prop} (inline; no {' / '.join(names)} definition)"
        return [(where, s.inline(parent, prop))]
    return [(f"{' / '.join(names)} (absent)", None)]


def _locations(shape: str, s: Schema) -> list[tuple[str, set[str]]]:
    """(where, property names) for ``shape`` in ``s``: several definitions of one shape are merged,
    several inline places are kept apart.  An empty set means the schema does not define it there."""
    nodes = _shape_nodes(shape, s)
    if SCHEMA_NAMES.get(shape, (shape,)) == ():
        return [(where, s.properties(node)) for where, node in nodes]
    return [(" + ".join(where for where, _ in nodes), set().union(*(s.properties(n) for _, n in nodes)))]


SHAPE_CASES = [(shape, rev) for shape in SHAPES for rev in REVISIONS]


def test_every_inline_shape_has_a_location() -> None:
    inline = {shape for shape, names in SCHEMA_NAMES.items() if names == ()}
    assert inline == set(INLINE_LOCATIONS), (
        "INLINE_LOCATIONS in this test must name where every shape mapped to () lives: "
        f"missing {_fmt(inline - set(INLINE_LOCATIONS))}, stale {_fmt(set(INLINE_LOCATIONS) - inline)}"
    )
    for shape in SCHEMA_NAMES:
        assert shape in SHAPES, f"SCHEMA_NAMES maps {shape!r}, which is not a key of SHAPES"


def test_inline_locations_agree_with_the_fields_that_point_at_them() -> None:
    # ServerCapabilities.prompts has shape="ListChangedCapability", so
    # ListChangedCapability must be looked for at ServerCapabilities.prompts.
    pointed: dict[str, set[tuple[str, str]]] = {}
    for parent, fields in SHAPES.items():
        for name, rule in fields.items():
            if rule.shape in INLINE_LOCATIONS:
                pointed.setdefault(rule.shape, set()).add((parent, name))
    for shape, where in pointed.items():
        assert where <= set(INLINE_LOCATIONS[shape]), (
            f"SHAPES fields {sorted(where)} hold {shape!r}, but the test looks for it only at "
            f"{sorted(INLINE_LOCATIONS[shape])}"
        )


@pytest.mark.parametrize("shape,rev", SHAPE_CASES, ids=[f"{sh}-{rev.value}" for sh, rev in SHAPE_CASES])
def test_shape_fields_match_schema(shape: str, rev: Revision) -> None:
    s = schema(rev)
    rules = SHAPES[shape]
    table = {name for name, rule in rules.items() if rule.defined_in(rev)}
    problems: list[str] = []
    for where, props in _locations(shape, s):
        for name in sorted(table - props):
            problems.append(
                f"SHAPES[{shape!r}][{name!r}] ({_span(rules[name])}): table says the field exists in {rev}, "
                f"but {rev} {where} has no such property"
            )
        for name in sorted(props - table):
            said = f"the row says {_span(rules[name])}" if name in rules else "there is no such row"
            problems.append(f"{rev} {where} has property {name!r}, but {said} in SHAPES[{shape!r}]")
        if problems:
            problems.append(f"({rev} {where} properties: {_fmt(props)})")
    assert not problems, "\n".join(problems)


def _expected_targets(target: str, rev: Revision) -> set[str] | None:
    """Definition names a field holding ``target`` should point at in ``rev``, if checkable."""
    if target in UNION_SHAPES:
        return {v.shape for v in UNION_SHAPES[target].variants.values() if v.defined_in(rev)}
    names = SCHEMA_NAMES.get(target, (target,))
    return set(names) if names else None


DEFINITION_TO_SHAPE: dict[str, str] = {
    **{name: shape for shape in SHAPES for name in SCHEMA_NAMES.get(shape, (shape,))},
    **{v.shape: union for union, u in UNION_SHAPES.items() for v in u.variants.values()},
    **{union: union for union in UNION_SHAPES},
}
"""Schema definition name -> the table's shape for it."""


def _fields_in_schema(s: Schema, rev: Revision) -> Iterator[tuple[str, str, FieldRule, str, Json]]:
    """(shape, field, rule, where, property schema) for every field the table and ``s`` both have."""
    for shape, fields in SHAPES.items():
        for where, node in _shape_nodes(shape, s):
            for name, rule in fields.items():
                prop = s.property_schema(node, name) if node is not None else None
                if rule.defined_in(rev) and prop is not None:
                    yield shape, name, rule, where, prop


@pytest.mark.parametrize("rev", REVISIONS, ids=REVISION_IDS)
def test_nested_shapes_match_schema_refs(rev: Revision) -> None:
    s = schema(rev)
    problems: list[str] = []
    for shape, name, rule, where, prop in _fields_in_schema(s, rev):
        checks: list[tuple[str, str, object]] = []
        if rule.shape:
            checks.append(("shape", rule.shape, prop))
        if rule.items:
            checks.append(("items", rule.items, prop.get("items")))
        if rule.values:
            checks.append(("values", rule.values, prop.get("additionalProperties")))
        for kind, target, node in checks:
            expected = _expected_targets(target, rev)
            if expected is None or not any(s.has(n) for n in expected):
                continue  # an inline shape (checked through INLINE_LOCATIONS) or 2024's inline Annotations
            expected = {n for n in expected if s.has(n)}
            got = s.referenced(node)
            if got != expected:
                problems.append(
                    f"SHAPES[{shape!r}][{name!r}] {kind}={target!r}: in {rev} {where}.{name} should point at "
                    f"{_fmt(expected)}, but the schema points at {_fmt(got)}"
                )
        if not (rule.shape or rule.items or rule.values or rule.opaque):
            refs = (
                s.referenced(prop)
                | s.referenced(prop.get("items"))
                | s.referenced(prop.get("additionalProperties"))
            )
            modelled = {DEFINITION_TO_SHAPE[r] for r in refs if r in DEFINITION_TO_SHAPE}
            if modelled:
                problems.append(
                    f"SHAPES[{shape!r}][{name!r}] has no shape/items/values, but {rev} {where}.{name} is "
                    f"typed with {_fmt(refs)}, which the table models as {_fmt(modelled)}"
                )
        if rule.meta and rev is R26:
            got = s.referenced(prop)
            if rule.meta == "object":
                ok = got == {"MetaObject"}
            else:
                suffix = META_KIND_DEFINITION_SUFFIX[rule.meta]
                ok = len(got) == 1 and next(iter(got)).endswith(suffix)
            if not ok:
                problems.append(
                    f"SHAPES[{shape!r}][{name!r}] meta={rule.meta!r}: {rev} {where}.{name} is {_fmt(got)}"
                )
    assert not problems, "\n".join(problems)


def test_field_references_name_known_shapes() -> None:
    known = set(SHAPES) | set(UNION_SHAPES)
    for shape, fields in SHAPES.items():
        for name, rule in fields.items():
            for kind in ("shape", "items", "values"):
                target = getattr(rule, kind)
                assert target is None or target in known, (
                    f"SHAPES[{shape!r}][{name!r}] {kind}={target!r} names no shape in SHAPES/UNION_SHAPES"
                )
            assert isinstance(rule, FieldRule)
            assert rule.meta in (None, "object", *META_KIND_DEFINITION_SUFFIX), (
                f"SHAPES[{shape!r}][{name!r}] meta={rule.meta!r} is not a known _meta kind"
            )


# ---------------------------------------------------------------------------
# Union shapes (content blocks)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("rev", REVISIONS, ids=REVISION_IDS)
def test_content_block_variants(rev: Revision) -> None:
    s = schema(rev)
    union = UNION_SHAPES["ContentBlock"]
    problems: list[str] = []
    for tag, variant in union.variants.items():
        defined = s.has(variant.shape)
        if variant.defined_in(rev) != defined:
            problems.append(
                f"UNION_SHAPES['ContentBlock'][{tag!r}] ({variant.shape}, {_span(variant)}): table says "
                f"{'defined' if variant.defined_in(rev) else 'not defined'} in {rev}, but the schema "
                f"{'defines' if defined else 'has no'} {variant.shape}"
            )
        if defined:
            node = s.resolve(s.defs[variant.shape]).get("properties", {}).get(union.discriminator, {})
            const = node.get("const", (node.get("enum") or [None])[0])
            if const != tag:
                problems.append(
                    f"UNION_SHAPES['ContentBlock'][{tag!r}]: {rev} {variant.shape}.{union.discriminator} "
                    f"is {const!r}"
                )
    if s.has("ContentBlock"):
        members = s.referenced({"$ref": f"#/{s.container}/ContentBlock"})
        table = {v.shape for v in union.variants.values() if v.defined_in(rev)}
        if members != table:
            problems.append(
                f"UNION_SHAPES['ContentBlock'] at {rev} has {_fmt(table)}; the schema's ContentBlock "
                f"is {_fmt(members)}"
            )
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------
# Reserved _meta keys
# ---------------------------------------------------------------------------


def _mentions(s: Schema, key: str) -> bool:
    """Whether schema ``s`` mentions ``key`` as a reserved ``_meta`` key."""
    if "/" in key:  # prefixed keys are named in definitions or descriptions
        return key in s.text
    return key in s.meta_properties()  # bare keys: only as a _meta property


META_CASES = [(key, rev) for key in META_KEYS for rev in REVISIONS]


@pytest.mark.parametrize("key,rev", META_CASES, ids=[f"{k}-{rev.value}" for k, rev in META_CASES])
def test_meta_key_span(key: str, rev: Revision) -> None:
    s = schema(rev)
    row = META_KEYS[key]
    mentioned = _mentions(s, key)
    if key in DOCS_ONLY_META_KEYS:
        assert not mentioned, (
            f"{rev} schema now mentions {key!r}: drop it from DOCS_ONLY_META_KEYS and check its span "
            f"({_span(row)}) against the schemas"
        )
        return
    assert row.defined_in(rev) == mentioned, (
        f"META_KEYS[{key!r}] ({_span(row)}): table says {'defined' if row.defined_in(rev) else 'absent'} "
        f"in {rev}, but the {rev} schema {'mentions' if mentioned else 'does not mention'} it"
    )


def test_meta_keys_in_2026_meta_objects() -> None:
    s = schema(R26)
    meta_defs = {
        kind: {n: s.def_properties(n) for n in s.defs if n.endswith(suffix)}
        for kind, suffix in META_KIND_DEFINITION_SUFFIX.items()
    }
    problems: list[str] = []
    for key, row in META_KEYS.items():
        if not row.defined_in(R26):
            continue
        for kind in sorted(row.where):
            holders = {n for n, props in meta_defs[kind].items() if key in props}
            if not holders:
                problems.append(
                    f"META_KEYS[{key!r}] where includes {kind!r}, but no 2026-07-28 "
                    f"*{META_KIND_DEFINITION_SUFFIX[kind]} ({_fmt(set(meta_defs[kind]))}) has it"
                )
    for kind, defs in meta_defs.items():
        for name, props in defs.items():
            for key in sorted(props):
                row = META_KEYS.get(key)
                if row is None or not row.defined_in(R26) or kind not in row.where:
                    problems.append(
                        f"2026-07-28 {name} has {key!r}, but META_KEYS "
                        + (
                            "has no such row"
                            if row is None
                            else f"says {_span(row)}, where {_fmt(row.where)}"
                        )
                    )
    assert not problems, "\n".join(problems)


def test_related_task_is_a_2025_11_25_key_only() -> None:
    key = "io.modelcontextprotocol/related-task"
    assert key in META_KEYS, f"META_KEYS has no {key!r} row"
    assert key in schema(Revision.V2025_11_25).text, f"2025-11-25 schema.json does not mention {key!r}"
    assert key not in schema(R26).text, f"2026-07-28 core schema.json mentions {key!r}"
    row = META_KEYS[key]
    assert row.defined_in(Revision.V2025_11_25) and not row.defined_in(R26), (
        f"META_KEYS[{key!r}] says {_span(row)}; the schemas define it in 2025-11-25 and not 2026-07-28"
    )


# ---------------------------------------------------------------------------
# Error codes
# ---------------------------------------------------------------------------


def _code_span(code: int) -> str:
    since, removed = ERROR_CODES[code]
    return f"since {since}" + (f", removed in {removed}" if removed else "")


def _code_defined(code: int, rev: Revision) -> bool:
    since, removed = ERROR_CODES[code]
    return since <= rev and (removed is None or rev < removed)


def test_2026_error_codes_are_declared_by_2026_error_definitions() -> None:
    declared = schema(R26).error_code_consts()
    for code, (since, _removed) in ERROR_CODES.items():
        if since is not R26:
            continue
        holders = {n for n in declared.get(code, set()) if n.endswith("Error")}
        assert holders, (
            f"ERROR_CODES[{code}] ({_code_span(code)}) is a 2026-07-28 code, but no 2026-07-28 *Error "
            f"definition declares code const {code} (declared: "
            + ", ".join(f"{c} in {_fmt(n)}" for c, n in sorted(declared.items()))
            + ")"
        )


@pytest.mark.parametrize("rev", REVISIONS, ids=REVISION_IDS)
def test_error_code_spans(rev: Revision) -> None:
    declared = schema(rev).error_code_consts()
    mcp_codes = {c for c in declared if c not in JSON_RPC_CODES}
    problems: list[str] = []
    for code in sorted(mcp_codes - set(ERROR_CODES)):
        problems.append(
            f"{rev} declares error code {code} in {_fmt(declared[code])}, but ERROR_CODES has no row"
        )
    for code in sorted(ERROR_CODES):
        in_schema = code in mcp_codes
        if code in DOCS_ONLY_ERROR_CODES:
            if in_schema:
                problems.append(
                    f"{rev} now declares {code} ({_fmt(declared[code])}): drop it from DOCS_ONLY_ERROR_CODES"
                )
            continue
        if _code_defined(code, rev) != in_schema:
            problems.append(
                f"ERROR_CODES[{code}] ({_code_span(code)}): table says "
                f"{'defined' if _code_defined(code, rev) else 'not defined'} in {rev}, but the schema "
                + (f"declares it in {_fmt(declared[code])}" if in_schema else "declares no such code")
            )
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------
# Cacheable results
# ---------------------------------------------------------------------------


def _client_rule(method: str) -> MethodRule:
    rule = next((m for m in METHODS if m.method == method and m.sender is Sender.CLIENT), None)
    assert rule is not None and not rule.notification, f"CACHEABLE[{method!r}] has no client request row"
    return rule


@pytest.mark.parametrize("method", sorted(CACHEABLE))
def test_cacheable_results_require_cache_hints(method: str) -> None:
    s = schema(R26)
    rule = _client_rule(method)
    assert rule.defined_in(R26), f"CACHEABLE[{method!r}]: the method row says {_span(rule)}"
    assert rule.result is not None and s.has(rule.result), (
        f"CACHEABLE[{method!r}]: result {rule.result!r} has no 2026-07-28 definition"
    )
    required = s.required(rule.result)
    assert {"ttlMs", "cacheScope"} <= required, (
        f"CACHEABLE[{method!r}]: 2026-07-28 {rule.result} requires {_fmt(required)}, not ttlMs and cacheScope"
    )
    scopes = s.resolve(s.defs[rule.result])["properties"]["cacheScope"].get("enum", [])
    assert CACHEABLE[method].scope in scopes, (
        f"CACHEABLE[{method!r}] scope {CACHEABLE[method].scope!r} is not one of the schema's {scopes}"
    )
    fields = SHAPES.get(rule.result, {})
    for name in ("ttlMs", "cacheScope"):
        assert name in fields and fields[name].defined_in(R26), (
            f"SHAPES[{rule.result!r}] lacks a 2026-07-28 {name!r} field though {method!r} is cacheable"
        )


def test_no_other_result_requires_cache_hints() -> None:
    s = schema(R26)
    cacheable_results = {_client_rule(m).result for m in CACHEABLE}
    requiring = {n for n in s.defs if {"ttlMs", "cacheScope"} & s.required(n)}
    requiring.discard("CacheableResult")  # the base the cacheable results extend
    extra = requiring - cacheable_results
    assert not extra, (
        f"2026-07-28 {_fmt(extra)} require ttlMs/cacheScope, but CACHEABLE has no method with that result"
    )
    for shape, fields in SHAPES.items():
        has_hints = any(n in fields and fields[n].defined_in(R26) for n in ("ttlMs", "cacheScope"))
        assert has_hints == (shape in cacheable_results), (
            f"SHAPES[{shape!r}] {'has' if has_hints else 'lacks'} ttlMs/cacheScope at 2026-07-28, but "
            f"{'no' if has_hints else 'a'} CACHEABLE method returns it"
        )
