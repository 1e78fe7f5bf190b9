"""JSON Schemas from Python signatures, for tools and prompts registered as functions.

Only what maps cleanly is supported: ``str``, ``int``, ``float``, ``bool``,
``list[T]``, ``dict[str, T]``, ``Literal[...]``, ``T | None``, ``Any`` and
parameters with defaults.  Anything else becomes an unconstrained property;
a tool that needs more passes ``input_schema=`` explicitly.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

__all__ = ["context_parameter", "schema_for_signature", "type_schema"]


def type_schema(annotation: Any) -> dict[str, Any]:
    """The JSON Schema for one annotation ({} when it cannot be expressed)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is str:
        return {"type": "string"}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if annotation is type(None):
        return {"type": "null"}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple):
        schema: dict[str, Any] = {"type": "array"}
        if args and origin is not tuple:
            item = type_schema(args[0])
            if item:
                schema["items"] = item
        return schema
    if origin is dict or annotation is dict:
        schema = {"type": "object"}
        if len(args) == 2:
            value = type_schema(args[1])
            if value:
                schema["additionalProperties"] = value
        return schema
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            return type_schema(members[0])
        options = [type_schema(a) for a in members]
        return {"anyOf": options} if all(options) else {}
    return {}


def context_parameter(fn: Callable[..., Any], context_type: type) -> str | None:
    """The name of ``fn``'s parameter that receives the request context, if any."""
    hints = _hints(fn)
    for name in inspect.signature(fn).parameters:
        hint = hints.get(name)
        members = (
            typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        )
        if context_type in members or (name == "ctx" and hint is None):
            return name
    return None


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: fall back to no hints
        return {}


def schema_for_signature(fn: Callable[..., Any], *, skip: str | None = None) -> dict[str, Any]:
    """An object schema with one property per parameter of ``fn`` (``skip`` excluded)."""
    hints = _hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        if name == skip or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        prop = dict(type_schema(hints.get(name, param.annotation)))
        if param.default is param.empty:
            required.append(name)
        elif param.default is not None:
            prop["default"] = param.default
        properties[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema
