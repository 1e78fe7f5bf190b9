"""The five MCP revisions as data: one table that everything else consults.

Everything in mcpx that depends on "which revision is the peer on" asks this
module, never a string comparison of its own:

* ``Revision`` — the five released revisions, ordered oldest to newest, each
  with its era (legacy: negotiated once with ``initialize``; modern: restated
  in ``_meta`` on every request).
* ``METHODS`` — every JSON-RPC method and notification, who sends it, the
  revision that introduced it and the one that removed it (from the
  ``ClientRequest``/``ServerRequest``/… unions of each revision's schema).
* ``SHAPES`` — for every object mcpx sends or relays, which fields exist in
  which revision, and what type each nested field holds.  ``downgrade`` walks
  results with it; capability declarations are cut to a revision with it.
* ``META_KEYS`` — the reserved ``_meta`` keys and the revisions that define
  them.
* ``ERROR_CODES`` — which revisions may receive which MCP-specific code.
* ``CACHEABLE`` — the 2026-07-28 results that must carry ``ttlMs`` and
  ``cacheScope`` and mcpx's choice of scope for each (2026-07-28
  server/utilities/caching).

``tests/unit/test_revisions_table.py`` checks every row here against the
official ``schema.json`` of each revision, and ``spec/revisions.md`` is
generated from this table (``python scripts/revisions_doc.py``) with a drift
check in the tests.  Nothing here does I/O.

This file is a little over 700 lines on purpose: it is data, one table, and
``SHAPES`` alone (every object and field of five schemas) is a third of it;
the table is checked against the schemas as one, and read as one.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

__all__ = [
    "CACHEABLE",
    "ERROR_CODES",
    "EXTENSION_METHODS",
    "LEGACY_REVISIONS",
    "LOG_LEVELS",
    "META_KEYS",
    "METHODS",
    "MODERN_REVISIONS",
    "NEWEST",
    "OLDEST",
    "REVISIONS",
    "SHAPES",
    "TASKS_EXTENSION",
    "UNION_SHAPES",
    "Cacheable",
    "Era",
    "FieldRule",
    "MetaKey",
    "MethodRule",
    "Revision",
    "Sender",
    "UnionShape",
    "UnionVariant",
    "method_rule",
    "parse_revision",
]


class Era(enum.Enum):
    """How a revision agrees on a version: once per connection, or per request."""

    LEGACY = "legacy"
    MODERN = "modern"

    # Members are singletons compared by identity; hash them so, in C (Enum's
    # own __hash__ is a Python function).
    __hash__ = object.__hash__


class Revision(enum.StrEnum):
    """A released MCP revision.  Compares by release order, not by spelling."""

    V2024_11_05 = "2024-11-05"
    V2025_03_26 = "2025-03-26"
    V2025_06_18 = "2025-06-18"
    V2025_11_25 = "2025-11-25"
    V2026_07_28 = "2026-07-28"

    @property
    def order(self) -> int:
        """Position in release order, 0 for the oldest."""
        return _ORDER[self]

    @property
    def era(self) -> Era:
        return Era.MODERN if self is Revision.V2026_07_28 else Era.LEGACY

    @property
    def is_modern(self) -> bool:
        return self is Revision.V2026_07_28

    # Ordering by release, so that no caller depends on the spelling of a date.
    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Revision):
            return NotImplemented
        return _ORDER[self] < _ORDER[other]

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Revision):
            return NotImplemented
        return _ORDER[self] <= _ORDER[other]

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Revision):
            return NotImplemented
        return _ORDER[self] > _ORDER[other]

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Revision):
            return NotImplemented
        return _ORDER[self] >= _ORDER[other]

    # Defining the comparisons would otherwise drop the inherited hash; take
    # str's directly (no Python-level call on every dict lookup).
    __hash__ = str.__hash__


R24: Final = Revision.V2024_11_05
R25A: Final = Revision.V2025_03_26
R25B: Final = Revision.V2025_06_18
R25C: Final = Revision.V2025_11_25
R26: Final = Revision.V2026_07_28

REVISIONS: Final[tuple[Revision, ...]] = (R24, R25A, R25B, R25C, R26)
"""Every revision mcpx speaks, oldest first."""
_ORDER: Final[dict[Revision, int]] = {rev: i for i, rev in enumerate(REVISIONS)}
LEGACY_REVISIONS: Final[tuple[Revision, ...]] = tuple(r for r in REVISIONS if r.era is Era.LEGACY)
MODERN_REVISIONS: Final[tuple[Revision, ...]] = tuple(r for r in REVISIONS if r.era is Era.MODERN)
NEWEST: Final = REVISIONS[-1]
OLDEST: Final = REVISIONS[0]

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"

LOG_LEVELS: Final[tuple[str, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
"""RFC 5424 severities in increasing order, identical in every revision."""


def parse_revision(value: str) -> Revision:
    """The revision spelled ``value``; ``ValueError`` naming the valid ones otherwise."""
    try:
        return Revision(value)
    except ValueError:
        valid = ", ".join(REVISIONS)
        raise ValueError(f"unknown MCP revision {value!r}; valid revisions are {valid}") from None


def _span(since: Revision, removed_in: Revision | None, rev: Revision) -> bool:
    return since <= rev and (removed_in is None or rev < removed_in)


# --------------------------------------------------------------------------
# Methods and notifications (each revision's schema; spec/revisions.md)
# --------------------------------------------------------------------------


class Sender(enum.Enum):
    CLIENT = "client"
    SERVER = "server"

    __hash__ = object.__hash__  # as Era's: _METHOD_INDEX is keyed by it


@dataclass(frozen=True, slots=True, kw_only=True)
class MethodRule:
    """One JSON-RPC method or notification in one direction.

    ``since``/``removed_in`` bound the revisions whose schema defines it as a
    message on the wire.  ``input_request_from`` marks the server-to-client
    requests that 2026-07-28 keeps only as entries of ``inputRequests``.
    ``result`` names the schema definition of a request's result; where it is
    a key of ``SHAPES``, ``downgrade`` cuts results with it (others pass as they are).
    """

    method: str
    sender: Sender
    notification: bool = False
    since: Revision = R24
    removed_in: Revision | None = None
    input_request_from: Revision | None = None
    result: str | None = None
    replacement: str | None = None

    def defined_in(self, rev: Revision) -> bool:
        """Whether ``rev``'s schema defines this message on the wire."""
        return _span(self.since, self.removed_in, rev)

    def removed_for(self, rev: Revision) -> bool:
        """Whether ``rev`` (or an earlier revision) removed this message."""
        return self.removed_in is not None and rev >= self.removed_in

    def introduced_after(self, rev: Revision) -> bool:
        return rev < self.since


def _req(method: str, sender: Sender = Sender.CLIENT, **kw: object) -> MethodRule:
    return MethodRule(method=method, sender=sender, **kw)  # type: ignore[arg-type]


def _note(method: str, sender: Sender, **kw: object) -> MethodRule:
    return MethodRule(method=method, sender=sender, notification=True, **kw)  # type: ignore[arg-type]


_C, _S = Sender.CLIENT, Sender.SERVER

METHODS: Final[tuple[MethodRule, ...]] = (
    # Client -> server requests.
    _req("initialize", removed_in=R26, result="InitializeResult", replacement="server/discover"),
    _req("ping", removed_in=R26, result="EmptyResult"),
    _req("server/discover", since=R26, result="DiscoverResult"),
    _req("tools/list", result="ListToolsResult"),
    _req("tools/call", result="CallToolResult"),
    _req("prompts/list", result="ListPromptsResult"),
    _req("prompts/get", result="GetPromptResult"),
    _req("resources/list", result="ListResourcesResult"),
    _req("resources/templates/list", result="ListResourceTemplatesResult"),
    _req("resources/read", result="ReadResourceResult"),
    _req(
        "resources/subscribe",
        removed_in=R26,
        result="EmptyResult",
        replacement="subscriptions/listen with resourceSubscriptions",
    ),
    _req(
        "resources/unsubscribe",
        removed_in=R26,
        result="EmptyResult",
        replacement="closing the subscriptions/listen stream",
    ),
    _req("subscriptions/listen", since=R26, result="SubscriptionsListenResult"),
    _req(
        "logging/setLevel",
        removed_in=R26,
        result="EmptyResult",
        replacement="_meta io.modelcontextprotocol/logLevel on each request",
    ),
    _req("completion/complete", result="CompleteResult"),
    _req("tasks/get", since=R25C, removed_in=R26, result="GetTaskResult"),
    _req("tasks/result", since=R25C, removed_in=R26, result="Result"),
    _req("tasks/cancel", since=R25C, removed_in=R26, result="CancelTaskResult"),
    _req("tasks/list", since=R25C, removed_in=R26, result="ListTasksResult"),
    # Server -> client requests.
    _req("ping", _S, removed_in=R26, result="EmptyResult"),
    _req("sampling/createMessage", _S, removed_in=R26, input_request_from=R26, result="CreateMessageResult"),
    _req("roots/list", _S, removed_in=R26, input_request_from=R26, result="ListRootsResult"),
    _req("elicitation/create", _S, since=R25B, removed_in=R26, input_request_from=R26, result="ElicitResult"),
    _req("tasks/get", _S, since=R25C, removed_in=R26, result="GetTaskResult"),
    _req("tasks/result", _S, since=R25C, removed_in=R26, result="Result"),
    _req("tasks/cancel", _S, since=R25C, removed_in=R26, result="CancelTaskResult"),
    _req("tasks/list", _S, since=R25C, removed_in=R26, result="ListTasksResult"),
    # Client -> server notifications.
    _note("notifications/initialized", _C, removed_in=R26),
    _note("notifications/cancelled", _C),
    _note("notifications/progress", _C, removed_in=R26),
    _note("notifications/roots/list_changed", _C, removed_in=R26),
    _note("notifications/tasks/status", _C, since=R25C, removed_in=R26),
    # Server -> client notifications.
    _note("notifications/cancelled", _S),
    _note("notifications/progress", _S),
    _note("notifications/message", _S),
    _note("notifications/tools/list_changed", _S),
    _note("notifications/prompts/list_changed", _S),
    _note("notifications/resources/list_changed", _S),
    _note("notifications/resources/updated", _S),
    _note("notifications/elicitation/complete", _S, since=R25C, removed_in=R26),
    _note("notifications/tasks/status", _S, since=R25C, removed_in=R26),
    _note("notifications/subscriptions/acknowledged", _S, since=R26),
)

_METHOD_INDEX: Final[dict[tuple[Sender, bool, str], MethodRule]] = {
    (m.sender, m.notification, m.method): m for m in METHODS
}

EXTENSION_METHODS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        # ext-tasks, 2026-07-28: server-directed tasks; tasks/result and
        # tasks/list stay removed (the extension asks for -32601).
        TASKS_EXTENSION: frozenset({"tasks/get", "tasks/update", "tasks/cancel", "notifications/tasks"}),
    }
)
"""Methods an extension defines at the modern revision, by extension id."""


def method_rule(method: str, *, sender: Sender, notification: bool = False) -> MethodRule | None:
    """The rule for ``method`` sent by ``sender``, or ``None`` if no revision defines it."""
    return _METHOD_INDEX.get((sender, notification, method))


# --------------------------------------------------------------------------
# Shapes: which fields exist in which revision (each revision's schema)
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldRule:
    """One field of one object shape.

    ``shape`` names the shape of an object value, ``items`` the shape of each
    element of a list value, ``values`` the shape of each value of a map.
    ``meta`` marks a ``_meta`` object and says which reserved keys may appear
    in it ("request", "result" or "notification").  ``opaque`` marks a field
    whose value is not an MCP object (a JSON Schema, arguments, free data):
    nothing inside it is cut.
    """

    since: Revision = R24
    removed_in: Revision | None = None
    shape: str | None = None
    items: str | None = None
    values: str | None = None
    meta: str | None = None
    opaque: bool = False

    def defined_in(self, rev: Revision) -> bool:
        return _span(self.since, self.removed_in, rev)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnionVariant:
    shape: str
    since: Revision = R24
    removed_in: Revision | None = None

    def defined_in(self, rev: Revision) -> bool:
        return _span(self.since, self.removed_in, rev)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnionShape:
    """A shape chosen by the value of one discriminating field (``type``)."""

    discriminator: str
    variants: Mapping[str, UnionVariant]


def _f(since: Revision = R24, removed_in: Revision | None = None, **kw: object) -> FieldRule:
    return FieldRule(since=since, removed_in=removed_in, **kw)  # type: ignore[arg-type]


_META_RESULT = _f(meta="result")
_META_PLAIN = _f(R25B, meta="object")
_ICONS = _f(R25C, items="Icon")
_TITLE = _f(R25B)
# The 2026-07-28 result envelope and cache hints.
_RESULT_TYPE = _f(R26)
_TTL = _f(R26)
_SCOPE = _f(R26)

SHAPES: Final[Mapping[str, Mapping[str, FieldRule]]] = MappingProxyType(
    {
        # -- common building blocks --------------------------------------
        "Implementation": {
            "name": _f(),
            "version": _f(),
            "title": _TITLE,
            "description": _f(R25C),
            "icons": _ICONS,
            "websiteUrl": _f(R25C),
        },
        "Icon": {"src": _f(R25C), "mimeType": _f(R25C), "sizes": _f(R25C), "theme": _f(R25C)},
        "Annotations": {"audience": _f(), "priority": _f(), "lastModified": _f(R25B)},
        "TextContent": {
            "type": _f(),
            "text": _f(),
            "annotations": _f(shape="Annotations"),
            "_meta": _META_PLAIN,
        },
        "ImageContent": {
            "type": _f(),
            "data": _f(),
            "mimeType": _f(),
            "annotations": _f(shape="Annotations"),
            "_meta": _META_PLAIN,
        },
        "AudioContent": {
            "type": _f(R25A),
            "data": _f(R25A),
            "mimeType": _f(R25A),
            "annotations": _f(R25A, shape="Annotations"),
            "_meta": _META_PLAIN,
        },
        "EmbeddedResource": {
            "type": _f(),
            "resource": _f(shape="ResourceContents"),
            "annotations": _f(shape="Annotations"),
            "_meta": _META_PLAIN,
        },
        "ResourceLink": {
            "type": _f(R25B),
            "uri": _f(R25B),
            "name": _f(R25B),
            "title": _f(R25B),
            "description": _f(R25B),
            "mimeType": _f(R25B),
            "size": _f(R25B),
            "annotations": _f(R25B, shape="Annotations"),
            "icons": _ICONS,
            "_meta": _f(R25B, meta="object"),
        },
        "ResourceContents": {
            "uri": _f(),
            "mimeType": _f(),
            "text": _f(),
            "blob": _f(),
            "_meta": _META_PLAIN,
        },
        # -- tools ---------------------------------------------------------
        "Tool": {
            "name": _f(),
            "title": _TITLE,
            "description": _f(),
            "inputSchema": _f(opaque=True),
            "outputSchema": _f(R25B, opaque=True),
            "annotations": _f(R25A, shape="ToolAnnotations"),
            "execution": _f(R25C, R26, shape="ToolExecution"),
            "icons": _ICONS,
            "_meta": _f(R25B, meta="object"),
        },
        "ToolAnnotations": {
            "title": _f(R25A),
            "readOnlyHint": _f(R25A),
            "destructiveHint": _f(R25A),
            "idempotentHint": _f(R25A),
            "openWorldHint": _f(R25A),
        },
        "ToolExecution": {"taskSupport": _f(R25C, R26)},
        "ListToolsResult": {
            "tools": _f(items="Tool"),
            "nextCursor": _f(),
            "_meta": _META_RESULT,
            "resultType": _RESULT_TYPE,
            "ttlMs": _TTL,
            "cacheScope": _SCOPE,
        },
        "CallToolResult": {
            "content": _f(items="ContentBlock"),
            "structuredContent": _f(R25B, opaque=True),
            "isError": _f(),
            "_meta": _META_RESULT,
            "resultType": _RESULT_TYPE,
        },
        # -- prompts -------------------------------------------------------
        "Prompt": {
            "name": _f(),
            "title": _TITLE,
            "description": _f(),
            "arguments": _f(items="PromptArgument"),
            "icons": _ICONS,
            "_meta": _f(R25B, meta="object"),
        },
        "PromptArgument": {"name": _f(), "title": _TITLE, "description": _f(), "required": _f()},
        "PromptMessage": {"role": _f(), "content": _f(shape="ContentBlock")},
        "ListPromptsResult": {
            "prompts": _f(items="Prompt"),
            "nextCursor": _f(),
            "_meta": _META_RESULT,
            "resultType": _RESULT_TYPE,
            "ttlMs": _TTL,
            "cacheScope": _SCOPE,
        },
        "GetPromptResult": {
            "description": _f(),
            "messages": _f(items="PromptMessage"),
            "_meta": _META_RESULT,
            "resultType": _RESULT_TYPE,
        },
        # -- resources -----------------------------------------------------
        "Resource": {
            "uri": _f(),
            "name": _f(),
            "title": _TITLE,
            "description": _f(),
            "mimeType": _f(),
            "size": _f(),
            "annotations": _f(shape="Annotations"),
            "icons": _ICONS,
            "_meta": _f(R25B, meta="object"),
        },
        "ResourceTemplate": {
            "uriTemplate": _f(),
            "name": _f(),
            "title": _TITLE,
            "description": _f(),
            "mimeType": _f(),
            "annotations": _f(shape="Annotations"),
            "icons": _ICONS,
            "_meta": _f(R25B, meta="object"),
        },
        "ListResourcesResult": {
            "resources": _f(items="Resource"),
            "nextCursor": _f(),
            "_meta": _META_RESULT,
            "resultType": _RESULT_TYPE,
            "ttlMs": _TTL,
            "cacheScope": _SCOPE,
        },
        "ListResourceTemplatesResult": {
            "resourceTemplates": _f(items="ResourceTemplate"),
            "nextCursor": _f(),
            "_meta": _META_RESULT,
            "resultType": _RESULT_TYPE,
            "ttlMs": _TTL,
            "cacheScope": _SCOPE,
        },
        "ReadResourceResult": {
            "contents": _f(items="ResourceContents"),
            "_meta": _META_RESULT,
            "resultType": _RESULT_TYPE,
            "ttlMs": _TTL,
            "cacheScope": _SCOPE,
        },
        # -- completion ----------------------------------------------------
        "CompleteResult": {
            "completion": _f(shape="Completion"),
            "_meta": _META_RESULT,
            "resultType": _RESULT_TYPE,
        },
        "Completion": {"values": _f(), "total": _f(), "hasMore": _f()},
        # -- lifecycle -----------------------------------------------------
        "InitializeResult": {
            "protocolVersion": _f(removed_in=R26),
            "capabilities": _f(removed_in=R26, shape="ServerCapabilities"),
            "serverInfo": _f(removed_in=R26, shape="Implementation"),
            "instructions": _f(removed_in=R26),
            "_meta": _f(removed_in=R26, meta="result"),
        },
        "DiscoverResult": {
            "supportedVersions": _f(R26),
            "capabilities": _f(R26, shape="ServerCapabilities"),
            "instructions": _f(R26),
            "_meta": _f(R26, meta="result"),
            "resultType": _RESULT_TYPE,
            "ttlMs": _TTL,
            "cacheScope": _SCOPE,
        },
        "EmptyResult": {"_meta": _META_RESULT, "resultType": _RESULT_TYPE},
        "SubscriptionsListenResult": {
            "_meta": _f(R26, meta="result"),
            "resultType": _RESULT_TYPE,
        },
        # -- capabilities --------------------------------------------------
        "ServerCapabilities": {
            "experimental": _f(opaque=True),
            "logging": _f(opaque=True),
            "completions": _f(R25A, opaque=True),
            "prompts": _f(shape="ListChangedCapability"),
            "resources": _f(shape="ResourcesCapability"),
            "tools": _f(shape="ListChangedCapability"),
            "tasks": _f(R25C, R26, shape="ServerTasksCapability"),
            "extensions": _f(R26, opaque=True),
        },
        "ListChangedCapability": {"listChanged": _f()},
        "ResourcesCapability": {"subscribe": _f(), "listChanged": _f()},
        "ServerTasksCapability": {
            "list": _f(R25C, R26, opaque=True),
            "cancel": _f(R25C, R26, opaque=True),
            "requests": _f(R25C, R26, opaque=True),
        },
        "ClientCapabilities": {
            "experimental": _f(opaque=True),
            "roots": _f(shape="RootsCapability"),
            "sampling": _f(shape="SamplingCapability"),
            "elicitation": _f(R25B, shape="ElicitationCapability"),
            "tasks": _f(R25C, R26, opaque=True),
            "extensions": _f(R26, opaque=True),
        },
        "RootsCapability": {"listChanged": _f(removed_in=R26)},
        "SamplingCapability": {"context": _f(R25C, opaque=True), "tools": _f(R25C, opaque=True)},
        "ElicitationCapability": {"form": _f(R25C, opaque=True), "url": _f(R25C, opaque=True)},
        # -- notifications' params ---------------------------------------
        "ProgressNotificationParams": {
            "progressToken": _f(),
            "progress": _f(),
            "total": _f(),
            "message": _f(R25A),
            "_meta": _f(R25C, meta="notification"),
        },
        "LoggingMessageNotificationParams": {
            "level": _f(),
            "logger": _f(),
            "data": _f(opaque=True),
            "_meta": _f(R25C, meta="notification"),
        },
        "ResourceUpdatedNotificationParams": {
            "uri": _f(),
            "_meta": _f(R25C, meta="notification"),
        },
        "CancelledNotificationParams": {
            "requestId": _f(),
            "reason": _f(),
            "_meta": _f(R25C, meta="notification"),
        },
        "ListChangedNotificationParams": {"_meta": _f(meta="notification")},
        "SubscriptionsAcknowledgedNotificationParams": {
            "notifications": _f(R26, opaque=True),
            "_meta": _f(R26, meta="notification"),
        },
    }
)

UNION_SHAPES: Final[Mapping[str, UnionShape]] = MappingProxyType(
    {
        "ContentBlock": UnionShape(
            discriminator="type",
            variants={
                "text": UnionVariant(shape="TextContent"),
                "image": UnionVariant(shape="ImageContent"),
                "audio": UnionVariant(shape="AudioContent", since=R25A),
                "resource": UnionVariant(shape="EmbeddedResource"),
                "resource_link": UnionVariant(shape="ResourceLink", since=R25B),
            },
        ),
    }
)

SCHEMA_NAMES: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        # Shapes whose schema definition has another name, or is the union of
        # several definitions; every other shape is named as in the schema.
        "ResourceContents": ("TextResourceContents", "BlobResourceContents"),
        "ListChangedCapability": (),
        "ResourcesCapability": (),
        "ServerTasksCapability": (),
        "RootsCapability": (),
        "SamplingCapability": (),
        "ElicitationCapability": (),
        "Completion": (),
        "ListChangedNotificationParams": (),
    }
)
"""How a shape maps onto ``schema.json`` definitions, for the schema test."""


# --------------------------------------------------------------------------
# Reserved _meta keys (each revision's schema and basic/index)
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaKey:
    key: str
    where: frozenset[str]
    since: Revision
    removed_in: Revision | None = None

    def defined_in(self, rev: Revision) -> bool:
        return _span(self.since, self.removed_in, rev)


def _mk(key: str, where: Iterable[str], since: Revision, removed_in: Revision | None = None) -> MetaKey:
    return MetaKey(key=key, where=frozenset(where), since=since, removed_in=removed_in)


_P = "io.modelcontextprotocol/"
META_KEYS: Final[Mapping[str, MetaKey]] = MappingProxyType(
    {
        mk.key: mk
        for mk in (
            _mk("progressToken", {"request"}, R24),
            _mk(_P + "related-task", {"request", "result", "notification"}, R25C, R26),
            _mk(_P + "model-immediate-response", {"result"}, R25C, R26),
            _mk(_P + "protocolVersion", {"request"}, R26),
            _mk(_P + "clientCapabilities", {"request"}, R26),
            _mk(_P + "clientInfo", {"request"}, R26),
            _mk(_P + "logLevel", {"request"}, R26),
            _mk(_P + "serverInfo", {"result"}, R26),
            _mk(_P + "subscriptionId", {"notification", "result"}, R26),
        )
    }
)

META_PROTOCOL_VERSION: Final = _P + "protocolVersion"
META_CLIENT_CAPABILITIES: Final = _P + "clientCapabilities"
META_CLIENT_INFO: Final = _P + "clientInfo"
META_LOG_LEVEL: Final = _P + "logLevel"
META_SERVER_INFO: Final = _P + "serverInfo"
META_SUBSCRIPTION_ID: Final = _P + "subscriptionId"
META_RELATED_TASK: Final = _P + "related-task"


# --------------------------------------------------------------------------
# Error codes (each revision's schema; 2026-07-28 basic/index) and cacheable
# results (2026-07-28 server/utilities/caching)
# --------------------------------------------------------------------------

ERROR_CODES: Final[Mapping[int, tuple[Revision, Revision | None]]] = MappingProxyType(
    {
        -32002: (R24, R26),  # resource not found; 2026-07-28 uses -32602 + data.uri
        -32042: (R25C, R26),  # URL elicitation required
        -32020: (R26, None),  # header mismatch
        -32021: (R26, None),  # missing required client capability
        -32022: (R26, None),  # unsupported protocol version
    }
)
"""MCP-specific error codes: (first revision, removing revision).  The JSON-RPC
codes -32700 … -32603 are valid in every revision and are not listed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Cacheable:
    scope: str  # "public" or "private"
    age: str  # "list" or "read": which configured max age applies


CACHEABLE: Final[Mapping[str, Cacheable]] = MappingProxyType(
    {
        # public: follows configuration, not the caller; private: may include
        # the caller's own session artefacts (2026-07-28 server/utilities/caching
        # says what each scope allows).
        "server/discover": Cacheable(scope="public", age="list"),
        "tools/list": Cacheable(scope="public", age="list"),
        "prompts/list": Cacheable(scope="public", age="list"),
        "resources/templates/list": Cacheable(scope="public", age="list"),
        "resources/list": Cacheable(scope="private", age="list"),
        "resources/read": Cacheable(scope="private", age="read"),
    }
)
