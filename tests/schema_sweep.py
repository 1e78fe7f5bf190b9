"""The strict schema sweep: every frame mcpx sends, checked against the peer's revision.

A frame is validated against the official ``schema.json`` of the revision the
peer speaks, in strict mode: wherever the schema leaves an object open by
omission (no ``additionalProperties``), the sweep closes it, so a property the
revision never defined is a failure (spec/server-obligations.md, "Every
revision").  Objects the schema opens on purpose (``additionalProperties: {}``,
``_meta``, ``experimental``) stay open, and JSON Schema documents carried as
data (``inputSchema``, ``outputSchema``, ``requestedSchema``) are not MCP
objects and are not tightened; nor is ``_meta``, whose keys every revision
leaves to the sender.  The members of an ``allOf`` are left as written, since
closing one member would reject the other member's properties.  Validation
never fills in defaults (``use_default=False``), so it cannot change what it
checks.

Which definition a frame is checked against is decided here, from the method
of the request it answers, independently of mcpx's own revision table.

One reading is recorded rather than enforced: JSON-RPC 2.0 §5 says an error
for a request whose id could not be read carries ``"id": null``; the MCP
schemas allow no null id (2025-11-25 and later make ``id`` optional instead).
mcpx follows JSON-RPC, so such frames are validated with the ``id`` member set
aside and counted as ``id-null`` exemptions (spec/revision-conflicts.md).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastjsonschema

RESULT_DEFINITIONS = {
    "initialize": "InitializeResult",
    "ping": "EmptyResult",
    "server/discover": "DiscoverResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "logging/setLevel": "EmptyResult",
    "completion/complete": "CompleteResult",
    "subscriptions/listen": "SubscriptionsListenResult",
    "tasks/list": "ListTasksResult",
    "tasks/get": "GetTaskResult",
    "tasks/cancel": "CancelTaskResult",
    "tasks/result": "GetTaskPayloadResult",
}
"""The result definition for each request method, as the schemas name them."""

CLIENT_RESULT_DEFINITIONS = {
    "ping": "EmptyResult",
    "roots/list": "ListRootsResult",
    "sampling/createMessage": "CreateMessageResult",
    "elicitation/create": "ElicitResult",
}
"""The result definition for each request a server may send a client."""

TASKS_EXTENSION_SCHEMA = "ext-tasks/2026-07-28"
"""Frames of the 2026-07-28 tasks extension are checked against its own schema."""

EXTENSION_RESULTS = {
    "tasks/get": "GetTaskResult",
    "tasks/update": "UpdateTaskResult",
    "tasks/cancel": "CancelTaskResult",
}

OPAQUE_PROPERTIES = frozenset({"inputSchema", "outputSchema", "requestedSchema", "_meta"})


def _tighten(node: Any, *, in_all_of: bool = False) -> Any:
    if isinstance(node, list):
        return [_tighten(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {
                name: (schema if name in OPAQUE_PROPERTIES else _tighten(schema))
                for name, schema in value.items()
            }
        elif key == "allOf" and isinstance(value, list):
            out[key] = [_tighten(item, in_all_of=True) for item in value]
        else:
            out[key] = _tighten(value)
    if "properties" in out and "additionalProperties" not in out and not in_all_of:
        out["additionalProperties"] = False
    return out


_PLAIN_KEYS = frozenset(
    {"type", "properties", "required", "description", "additionalProperties", "propertyNames", "$schema"}
)


def _plain(node: Any, defs: dict[str, Any], defs_key: str) -> dict[str, Any] | None:
    """``node`` (after following a reference) as a plain object schema, or ``None``."""
    if isinstance(node, dict) and set(node) == {"$ref"}:
        node = _merge_refs(defs[node["$ref"].removeprefix(f"#/{defs_key}/")], defs, defs_key)
    if not isinstance(node, dict) or set(node) - _PLAIN_KEYS:
        return None
    return node


def _combine(parts: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
    for part in parts:
        out["properties"].update(part.get("properties", {}))
        out["required"].extend(r for r in part.get("required", []) if r not in out["required"])
        if part.get("additionalProperties") not in (None, False):
            out["additionalProperties"] = part["additionalProperties"]  # opened on purpose: stays open
    return out


def _merge_refs(schema: Any, defs: dict[str, Any], defs_key: str) -> Any:
    """An ``allOf`` of plain objects (and at most one ``anyOf`` of them), as one object or union.

    2025-11-25 writes ``GetTaskResult`` as ``allOf: [Result, Task]`` and the
    tasks extension as ``allOf: [Result, anyOf: [WorkingTask, …]]``; closing
    each member separately would make every combination fail, so members are
    merged first and the union is what gets closed.
    """
    if (
        not isinstance(schema, dict)
        or "allOf" not in schema
        or set(schema) - {"allOf", "description", "$schema"}
    ):
        return schema
    bases: list[dict[str, Any]] = []
    alternatives: list[dict[str, Any]] | None = None
    for member in schema["allOf"]:
        if isinstance(member, dict) and "anyOf" in member and set(member) <= {"anyOf", "description"}:
            if alternatives is not None:
                return schema
            found = [_plain(alt, defs, defs_key) for alt in member["anyOf"]]
            if any(alt is None for alt in found):
                return schema
            alternatives = [alt for alt in found if alt is not None]
            continue
        plain = _plain(member, defs, defs_key)
        if plain is None:
            return schema
        bases.append(plain)
    if alternatives is None:
        return _combine(bases)
    return {"anyOf": [_combine([*bases, alt]) for alt in alternatives]}


def _merge_tree(node: Any, defs: dict[str, Any], defs_key: str) -> Any:
    """``_merge_refs`` wherever it applies, at any depth."""
    if isinstance(node, list):
        return [_merge_tree(item, defs, defs_key) for item in node]
    if not isinstance(node, dict):
        return node
    node = _merge_refs(node, defs, defs_key)
    return {key: _merge_tree(value, defs, defs_key) for key, value in node.items()}


class SchemaSweep:
    """Validates frames mcpx sent; counts them per revision."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.counts: Counter[str] = Counter()
        self.exemptions: Counter[str] = Counter()
        self.violations: Counter[str] = Counter()
        self._docs: dict[str, dict[str, Any]] = {}
        self._validators: dict[tuple[str, str], Callable[[Any], Any]] = {}

    # -- schema access -------------------------------------------------------

    def _doc(self, revision: str) -> dict[str, Any]:
        if revision not in self._docs:
            raw = json.loads((self.root / revision / "schema.json").read_text())
            defs_key = "$defs" if "$defs" in raw else "definitions"
            # _meta objects are open by design in every revision (their key
            # naming rules are not an allow-list), so *MetaObject stays as written.
            raw_defs = raw[defs_key]
            merged = {name: _merge_tree(schema, raw_defs, defs_key) for name, schema in raw_defs.items()}
            defs = {
                name: (schema if name.endswith("MetaObject") else _tighten(schema))
                for name, schema in merged.items()
            }
            if "Result" in defs:
                # EmptyResult is Result, which the schema leaves open on purpose
                # (every result extends it).  An empty result must be empty.
                empty = copy.deepcopy(defs["Result"])
                empty.pop("additionalProperties", None)
                empty["additionalProperties"] = False
                defs["EmptyResult"] = empty
            self._docs[revision] = {"$schema": raw.get("$schema"), "key": defs_key, "defs": defs}
        return self._docs[revision]

    def definitions(self, revision: str) -> dict[str, Any]:
        return self._doc(revision)["defs"]  # type: ignore[no-any-return]

    def _validator(self, revision: str, name: str) -> Callable[[Any], Any]:
        key = (revision, name)
        if key not in self._validators:
            doc = self._doc(revision)
            schema = {
                "$schema": doc["$schema"],
                doc["key"]: doc["defs"],
                "$ref": f"#/{doc['key']}/{name}",
            }
            self._validators[key] = fastjsonschema.compile(schema, use_default=False)
        return self._validators[key]

    def _check(self, revision: str, name: str, value: Any, frame: dict[str, Any]) -> None:
        try:
            self._validator(revision, name)(copy.deepcopy(value))
        except fastjsonschema.JsonSchemaException as exc:
            self.violations[revision] += 1
            raise AssertionError(
                f"strict schema violation for MCP {revision} ({name}): {exc.message}\nframe: {json.dumps(frame)}"
            ) from None

    def _union_member(self, revision: str, union: str, method: str) -> str | None:
        defs = self.definitions(revision)
        node = defs.get(union)
        if node is None:
            return None
        members = node.get("anyOf", [node] if "$ref" in node else [])
        for member in members:
            name = member["$ref"].rsplit("/", 1)[-1]
            const = defs[name].get("properties", {}).get("method", {}).get("const")
            if const == method:
                return name
        return None

    # -- frames --------------------------------------------------------------

    def validate_sent(self, frame: dict[str, Any], revision: str, method: str | None) -> None:
        """Check one frame mcpx sent to a peer on ``revision``.

        ``method`` is the method of the request a response answers (``None``
        for notifications and server requests, whose method is in the frame).
        """
        defs = self.definitions(revision)
        if revision == "2026-07-28" and self._extension_frame(frame, method):
            return
        if "method" in frame:
            union = "ServerRequest" if "id" in frame else "ServerNotification"
            name = self._union_member(revision, union, frame["method"])
            if name is None:
                raise AssertionError(f"MCP {revision} defines no server {union} {frame['method']!r}: {frame}")
            frame = self._inherited_meta(revision, name, frame)
            if "jsonrpc" in defs[name].get("properties", {}):
                self._check(revision, name, frame, frame)
            else:  # older schemas describe the message without its JSON-RPC envelope
                envelope = "JSONRPCRequest" if "id" in frame else "JSONRPCNotification"
                self._check(revision, envelope, frame, frame)
                bare = {k: v for k, v in frame.items() if k not in ("jsonrpc", "id")}
                self._check(revision, name, bare, frame)
        elif "error" in frame:
            name = "JSONRPCErrorResponse" if "JSONRPCErrorResponse" in defs else "JSONRPCError"
            if frame.get("id") is None:
                self.exemptions[revision] += 1
                frame_checked = {k: v for k, v in frame.items() if k != "id"}
                if name == "JSONRPCError":
                    frame_checked["id"] = 0  # the schema's id is required; the null is the exemption
                self._check(revision, name, frame_checked, frame)
            else:
                self._check(revision, name, frame, frame)
        else:
            envelope = "JSONRPCResultResponse" if "JSONRPCResultResponse" in defs else "JSONRPCResponse"
            self._check(revision, envelope, frame, frame)
            if method is None:
                raise AssertionError(f"a response nobody asked for: {frame}")
            result_def = RESULT_DEFINITIONS.get(method)
            if isinstance(frame["result"], dict) and frame["result"].get("resultType") == "input_required":
                result_def = "InputRequiredResult"
            if result_def is None:
                raise AssertionError(f"the sweep has no result definition for {method!r}")
            if revision == "2025-11-25" and method == "tools/call" and "task" in frame["result"]:
                result_def = "CreateTaskResult"
            if result_def not in defs:
                raise AssertionError(f"MCP {revision} has no {result_def} for {method}: {frame}")
            self._check(revision, result_def, frame["result"], frame)
        self.counts[revision] += 1

    def validate_client_sent(self, frame: dict[str, Any], revision: str, method: str | None) -> None:
        """Check one frame mcpx's client sent to a server on ``revision``; counted as ``client <revision>``.

        ``method`` is the method of the server request a response answers.  A
        request for a method the revision does not define is mcpx's generic
        request (``Client.request``, spec/client.md §2) carrying an extension
        method: it is counted as an exemption, not checked, since no schema
        describes it.
        """
        defs = self.definitions(revision)
        key = f"client {revision}"
        if revision == "2026-07-28" and "method" not in frame:
            # 2026-07-28 has no server requests: an answer to one (spec.lenient) has no schema.
            self.exemptions[key] += 1
            return
        if "method" in frame:
            union = "ClientRequest" if "id" in frame else "ClientNotification"
            name = self._union_member(revision, union, frame["method"])
            if name is None:
                self.exemptions[key] += 1
                return
            frame = self._inherited_meta(revision, name, frame)
            if "jsonrpc" in defs[name].get("properties", {}):
                self._check(revision, name, frame, frame)
            else:
                envelope = "JSONRPCRequest" if "id" in frame else "JSONRPCNotification"
                self._check(revision, envelope, frame, frame)
                self._check(
                    revision, name, {k: v for k, v in frame.items() if k not in ("jsonrpc", "id")}, frame
                )
        elif "error" in frame:
            name = "JSONRPCErrorResponse" if "JSONRPCErrorResponse" in defs else "JSONRPCError"
            self._check(revision, name, frame, frame)
        else:
            envelope = "JSONRPCResultResponse" if "JSONRPCResultResponse" in defs else "JSONRPCResponse"
            self._check(revision, envelope, frame, frame)
            result_def = CLIENT_RESULT_DEFINITIONS.get(method or "")
            if result_def is None or result_def not in defs:
                raise AssertionError(f"MCP {revision} defines no client result for {method!r}: {frame}")
            self._check(revision, result_def, frame["result"], frame)
        self.counts[key] += 1

    def _inherited_meta(self, revision: str, name: str, frame: dict[str, Any]) -> dict[str, Any]:
        """Check ``params._meta`` against the base message when ``name`` does not list it; the frame without it.

        The 2024-11-05 … 2025-06-18 schemas declare ``params._meta`` (with
        ``progressToken``) on the base ``Request`` and ``Notification`` only,
        and each message's own ``params`` leaves it out; every revision's
        Progress page has the sender put its token there.  So ``_meta`` is
        judged by the base definition it is inherited from, and the rest of
        the frame by the message's own.
        """
        params = frame.get("params")
        if not isinstance(params, dict) or "_meta" not in params:
            return frame
        defs = self.definitions(revision)
        own = defs[name].get("properties", {}).get("params", {})
        while "$ref" in own:  # 2025-11-25 and later name their params (…RequestParams)
            own = defs[own["$ref"].rsplit("/", 1)[-1]]
        if "_meta" in own.get("properties", {}) or "allOf" in own:
            return frame
        base = "Request" if "id" in frame else "Notification"
        self._check(revision, base, {"method": frame["method"], "params": {"_meta": params["_meta"]}}, frame)
        return {**frame, "params": {k: v for k, v in params.items() if k != "_meta"}}

    def _extension_frame(self, frame: dict[str, Any], method: str | None) -> bool:
        """A tasks-extension frame to a 2026-07-28 peer: checked against ext-tasks; else ``False``."""
        ext = TASKS_EXTENSION_SCHEMA
        if frame.get("method") == "notifications/tasks":
            self._check(ext, "TaskStatusNotification", frame, frame)
        elif frame.get("method") == "notifications/subscriptions/acknowledged" and "taskIds" in (
            frame.get("params", {}).get("notifications") or {}
        ):
            # The extension adds taskIds to the acknowledgement: the core
            # frame without it, and the extension's part on its own.
            notifications = dict(frame["params"]["notifications"])
            self._check(
                ext,
                "TaskSubscriptionAcknowledgedNotifications",
                {"taskIds": notifications.pop("taskIds")},
                frame,
            )
            core = {**frame, "params": {**frame["params"], "notifications": notifications}}
            self._check("2026-07-28", "SubscriptionsAcknowledgedNotification", core, frame)
        elif "result" in frame and method in EXTENSION_RESULTS:
            self._check("2026-07-28", "JSONRPCResultResponse", frame, frame)
            self._check(ext, EXTENSION_RESULTS[method], frame["result"], frame)
        elif (
            "result" in frame
            and isinstance(frame["result"], dict)
            and frame["result"].get("resultType") == "task"
        ):
            self._check("2026-07-28", "JSONRPCResultResponse", frame, frame)
            self._check(ext, "CreateTaskResult", frame["result"], frame)
        else:
            return False
        self.counts[ext] += 1
        return True
