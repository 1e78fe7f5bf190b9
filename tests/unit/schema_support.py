"""Read-only access to the official MCP ``schema.json`` files for the unit tests.

The schemas are never copied into the repository: they are found through
``tests.conftest.schemas_dir()`` (``$MCPX_SCHEMAS``, else
``../shared/mcp-schemas`` next to the checkout).  A test that needs a schema
which is not there is *skipped* with a reason naming the path that was tried,
because a bare CI checkout may not have them.

Both dialects are handled: draft-07 files keep their definitions under
``definitions``, the 2020-12 files (2025-11-25, 2026-07-28, the tasks
extension) under ``$defs``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import schemas_dir

Json = Any

EXT_TASKS_DIR = "ext-tasks/2026-07-28"
"""The tasks extension's schema, relative to the schemas directory."""


def schema_path(relative: str) -> Path:
    return schemas_dir() / relative / "schema.json"


def skip_reason(path: Path) -> str:
    return (
        f"official MCP schemas not found at {path}: set MCPX_SCHEMAS to the "
        "mcp-schemas directory (default: ../shared/mcp-schemas relative to the repository) "
        "to check the revision table against it"
    )


class Schema:
    """One ``schema.json``: its definitions, its raw text, and a few walkers."""

    def __init__(self, label: str, text: str) -> None:
        self.label = label
        self.text = text
        doc = json.loads(text)
        self.container = "$defs" if "$defs" in doc else "definitions"
        self.defs: dict[str, Json] = doc[self.container]

    # -- references ------------------------------------------------------

    def ref_name(self, ref: str) -> str:
        prefix = f"#/{self.container}/"
        assert ref.startswith(prefix), f"{self.label}: unexpected $ref {ref!r}"
        return ref[len(prefix) :]

    def has(self, name: str) -> bool:
        return name in self.defs

    def resolve(self, node: Json) -> Json:
        """``node`` with any chain of ``$ref`` followed (siblings of a ``$ref`` are dropped)."""
        seen: set[str] = set()
        while isinstance(node, dict) and "$ref" in node and "properties" not in node:
            name = self.ref_name(node["$ref"])
            assert name not in seen, f"{self.label}: $ref cycle through {name}"
            seen.add(name)
            node = self.defs[name]
        return node

    # -- object properties -----------------------------------------------

    def properties(self, node: Json) -> set[str]:
        """Property names of an object schema, through ``$ref`` and ``allOf``."""
        if not isinstance(node, dict):
            return set()
        names: set[str] = set(node.get("properties", {}))
        if "$ref" in node:
            names |= self.properties(self.defs[self.ref_name(node["$ref"])])
        for sub in node.get("allOf", []):
            names |= self.properties(sub)
        return names

    def def_properties(self, name: str) -> set[str]:
        return self.properties(self.defs[name])

    def property_schema(self, node: Json, prop: str) -> Json | None:
        """The schema of property ``prop`` of object schema ``node``, through ``$ref`` and ``allOf``."""
        if not isinstance(node, dict):
            return None
        found = node.get("properties", {}).get(prop)
        if found is not None:
            return found
        if "$ref" in node:
            found = self.property_schema(self.defs[self.ref_name(node["$ref"])], prop)
        for sub in node.get("allOf", []):
            found = found if found is not None else self.property_schema(sub, prop)
        return found

    def inline(self, parent: str, prop: str) -> Json | None:
        """The (resolved) schema of property ``prop`` of definition ``parent``, if both exist."""
        if parent not in self.defs:
            return None
        found = self.property_schema(self.defs[parent], prop)
        return None if found is None else self.resolve(found)

    def required(self, name: str) -> set[str]:
        node = self.resolve(self.defs[name])
        found: set[str] = set(node.get("required", []))
        for sub in node.get("allOf", []):
            found |= set(self.resolve(sub).get("required", []))
        return found

    # -- methods -----------------------------------------------------------

    def method_consts(self, node: Json, _seen: frozenset[str] = frozenset()) -> set[str]:
        """Every ``properties.method.const`` reachable through ``$ref``/``anyOf``/``oneOf``/``allOf``."""
        if not isinstance(node, dict):
            return set()
        found: set[str] = set()
        method = node.get("properties", {}).get("method")
        if isinstance(method, dict):
            if "const" in method:
                found.add(method["const"])
            elif len(method.get("enum", ())) == 1:
                found.add(method["enum"][0])
        if "$ref" in node:
            name = self.ref_name(node["$ref"])
            if name not in _seen:
                found |= self.method_consts(self.defs[name], _seen | {name})
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key, []):
                found |= self.method_consts(sub, _seen)
        return found

    def union_methods(self, name: str) -> set[str]:
        """Methods of a message union (``ClientRequest`` …); empty if the schema has no such union.

        The union may be an ``anyOf`` of ``$ref``s or, when it has one member
        (2026-07-28 ``ClientNotification``), that member itself.
        """
        if name not in self.defs:
            return set()
        return self.method_consts(self.defs[name], frozenset({name}))

    def union_request_definitions(self, name: str) -> dict[str, str]:
        """Method → name of the member definition, for a union of ``$ref``s (``ClientRequest`` …)."""
        if name not in self.defs:
            return {}
        node = self.defs[name]
        members = [m["$ref"] for m in node.get("anyOf", []) if "$ref" in m]
        found: dict[str, str] = {}
        for ref in members:
            member = self.ref_name(ref)
            for method in self.method_consts(self.defs[member], frozenset({member})):
                found[method] = member
        return found

    # -- what a property points at ---------------------------------------

    def referenced(self, node: Json) -> set[str]:
        """Definition names a property schema points at, with pure ``anyOf`` unions expanded."""
        if not isinstance(node, dict):
            return set()
        names: set[str] = set()
        if "$ref" in node:
            name = self.ref_name(node["$ref"])
            target = self.defs[name]
            if isinstance(target, dict) and "properties" not in target and "anyOf" in target:
                names |= self.referenced(target)
            else:
                names.add(name)
        for key in ("anyOf", "oneOf"):
            for sub in node.get(key, []):
                names |= self.referenced(sub)
        return names

    # -- walking -----------------------------------------------------------

    def walk(self) -> Iterator[tuple[str, Json]]:
        """Every dict node of every definition, with the definition's name."""
        for name, root in self.defs.items():
            stack: list[Json] = [root]
            while stack:
                node = stack.pop()
                if isinstance(node, dict):
                    yield name, node
                    stack.extend(node.values())
                elif isinstance(node, list):
                    stack.extend(node)

    def error_code_consts(self) -> dict[int, set[str]]:
        """Integer ``code`` consts (error definitions) → the definitions that declare them."""
        codes: dict[int, set[str]] = {}
        for name, node in self.walk():
            code = node.get("properties", {}).get("code")
            if isinstance(code, dict) and isinstance(code.get("const"), int):
                codes.setdefault(code["const"], set()).add(name)
        return codes

    def meta_properties(self) -> set[str]:
        """Property names of every ``_meta`` object anywhere in the schema."""
        keys: set[str] = set()
        for _, node in self.walk():
            meta = node.get("properties", {}).get("_meta")
            if isinstance(meta, dict):
                keys |= self.properties(meta)
        return keys


@functools.cache
def _load(relative: str) -> Schema | None:
    path = schema_path(relative)
    if not path.is_file():
        return None
    return Schema(relative, path.read_text(encoding="utf-8"))


def load_schema(relative: str) -> Schema:
    """The schema in ``<schemas_dir>/<relative>/schema.json``; skips the test if it is missing."""
    schema = _load(relative)
    if schema is None:
        pytest.skip(skip_reason(schema_path(relative)))
    return schema
