"""A tool's arguments given as text (``mcpx call --arg k=v``), typed by the tool's input schema.

A person writes every argument as text.  What the tool receives must be
what its ``inputSchema`` asks for (MCP 2025-06-18 server/tools: the
arguments conform to the tool's input schema): ``--arg message=42`` to a
``string`` parameter is the string ``"42"``, to an ``integer`` one the
number 42.  The rules, per parameter (``properties[k]`` of the schema):

* its ``type`` (or the types of its ``anyOf``/``oneOf`` members) is
  ``string`` alone: the text, as it is;
* it names other types: the text read as JSON when that gives a value of
  one of them (``42`` for ``integer``, ``true`` for ``boolean``, ``[1, 2]``
  for ``array``), else the text as it is (a ``string`` among them takes
  it; otherwise the server's own error says what it wanted);
* no schema, no such property, or no type: the text read as JSON when it
  parses, else the text (what ``mcpx call`` always did).

An explicit JSON value is ``--arg k:=JSON``; the CLI parses it itself and
sends it among the ``arguments``, which are never retyped.
spec/gateway.md §8 (``/v1/call``'s ``args``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["input_schema_of", "needs_schema", "typed_arguments"]

_FITS: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


def _never(value: Any) -> bool:  # a type JSON Schema does not define: nothing fits it
    return False


def input_schema_of(tools: Any, name: str) -> Mapping[str, Any] | None:
    """The ``inputSchema`` of tool ``name`` in a ``tools/list`` result's ``tools``, if it has one."""
    if not isinstance(tools, list):
        return None
    for tool in tools:
        if isinstance(tool, Mapping) and tool.get("name") == name:
            schema = tool.get("inputSchema")
            return schema if isinstance(schema, Mapping) else None
    return None


def needs_schema(texts: Mapping[str, str]) -> bool:
    """Whether the schema could change what ``texts`` become: some text reads as JSON (``42``, ``true``).

    A text that is no JSON is the text whatever the schema says, so a call
    whose texts are all such (``text=hello``) need not look the schema up.
    """
    for text in texts.values():
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        return True
    return False


def typed_arguments(texts: Mapping[str, str], schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """``texts`` (parameter -> text) as the values ``schema`` asks for (see the module docstring)."""
    properties = schema.get("properties") if schema is not None else None
    if not isinstance(properties, Mapping):
        properties = {}
    return {key: _typed(text, _types(properties.get(key))) for key, text in texts.items()}


def _types(prop: Any) -> set[str]:
    """The JSON types a parameter's schema names (``type``, or its ``anyOf``/``oneOf`` members')."""
    if not isinstance(prop, Mapping):
        return set()
    found = prop.get("type")
    if isinstance(found, str):
        return {found}
    if isinstance(found, list):
        return {t for t in found if isinstance(t, str)}
    union: set[str] = set()
    for key in ("anyOf", "oneOf"):
        members = prop.get(key)
        if isinstance(members, list):
            for member in members:
                union |= _types(member)
    return union


def _typed(text: str, types: set[str]) -> Any:
    if types == {"string"}:
        return text
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    if not types or any(_FITS.get(t, _never)(value) for t in types):
        return value
    return text
