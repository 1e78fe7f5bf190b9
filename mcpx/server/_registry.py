"""What a server keeps of each registration: tools, prompts, resources, templates and completers.

A tool keeps its definition (the input schema built from its signature, or
given), a validator compiled once when first needed, and how its function
is called; a resource template its URI pattern as a regular expression.
Arguments that certainly satisfy a tool's schema skip the validator
(``_plain_arguments``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._content import to_call_result
from ._context import Outcome, _outcome


@dataclass(slots=True, kw_only=True)
class _Tool:
    name: str
    fn: Callable[..., Any]
    definition: dict[str, Any]
    context_param: str | None
    is_async: bool
    structured: bool
    validate: bool
    validator: Callable[[Any], Any] | None = None
    validator_ready: bool = False
    # For a plain input schema (see _plain_arguments): the required names, and each typed
    # property with the exact Python types that satisfy it; arguments that pass are valid
    # without the validator.  None: every call goes to the validator.
    plain: tuple[tuple[str, ...], tuple[tuple[str, tuple[type, ...]], ...]] | None = None
    finish: Callable[[Any], Outcome] = field(init=False)
    """What every call of this tool turns its return value into (built once: it depends on the tool only)."""

    def __post_init__(self) -> None:
        structured = self.structured

        def finish(value: Any) -> Outcome:
            if (
                type(value) is str and not structured
            ):  # to_call_result's first case, in line: the usual return
                return _outcome({"content": [{"type": "text", "text": value}]})
            return _outcome(to_call_result(value, structured=structured))

        self.finish = finish

    def check(self, arguments: Mapping[str, Any]) -> str | None:
        """Why ``arguments`` fail the input schema, or ``None``."""
        if not self.validate:
            return None
        import fastjsonschema  # here: a server whose tools are never called (the daemon's) never loads it

        if not self.validator_ready:
            self.validator_ready = True
            schema = self.definition["inputSchema"]
            try:
                self.validator = fastjsonschema.compile(schema, use_default=False)
            except Exception:  # a dialect fastjsonschema cannot compile: the tool validates itself
                self.validator = None
            self.plain = _plain_arguments(schema) if self.validator is not None else None
        if self.validator is None:
            return None
        plain = self.plain
        if plain is not None and type(arguments) is dict:
            # The usual call of a tool registered as a function: every required argument there,
            # each typed one of exactly a type its schema accepts.  What the validator would say.
            required, typed = plain
            for name in required:
                if name not in arguments:
                    break
            else:
                for name, types_ in typed:
                    if name in arguments and type(arguments[name]) not in types_:
                        break
                else:
                    return None
        try:
            self.validator(arguments)
        except fastjsonschema.JsonSchemaException as exc:
            return str(getattr(exc, "message", exc))
        return None


# JSON Schema types, and the Python types of decoded JSON that certainly satisfy each
# (bool is not an integer or a number in JSON Schema; a float may or may not be an integer).
_PLAIN_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "null": (type(None),),
}


_PLAIN_SCHEMA_KEYS = frozenset({"type", "properties", "required"})


_PLAIN_PROPERTY_KEYS = frozenset({"type", "default", "title", "description"})  # annotations but "type"


def _plain_arguments(
    schema: Any,
) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[type, ...]], ...]] | None:
    """``_Tool.plain`` for ``schema``, or ``None`` when it is not that plain.

    Plain: ``{"type": "object", "properties": ..., "required": [...]}`` and
    nothing else, each property ``{}`` or one primitive ``type`` (with
    ``default``, ``title``, ``description`` at most, which validate nothing):
    what ``schema_for_signature`` writes for ``str``/``int``/``float``/``bool``
    parameters.  Arguments that are a dict with every required name, and whose
    typed values have one of the listed exact types, are valid under it; for
    anything else the validator decides (and words the error).
    """
    if (
        not isinstance(schema, dict)
        or schema.get("type") != "object"
        or not _PLAIN_SCHEMA_KEYS.issuperset(schema)
    ):
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    if not all(isinstance(name, str) for name in required):
        return None
    typed: list[tuple[str, tuple[type, ...]]] = []
    for name, prop in properties.items():
        if not isinstance(prop, dict) or not _PLAIN_PROPERTY_KEYS.issuperset(prop):
            return None
        if "type" in prop:
            kind = prop["type"]
            if not isinstance(kind, str) or kind not in _PLAIN_TYPES:
                return None
            typed.append((name, _PLAIN_TYPES[kind]))  # without a type, a property takes anything
    return tuple(required), tuple(typed)


@dataclass(slots=True, kw_only=True)
class _Prompt:
    name: str
    fn: Callable[..., Any]
    definition: dict[str, Any]
    context_param: str | None
    is_async: bool
    required: tuple[str, ...]


@dataclass(slots=True, kw_only=True)
class _Readable:
    """A resource (``pattern`` is None) or a resource template."""

    key: str  # the URI, or the URI template
    pattern: re.Pattern[str] | None
    fn: Callable[..., Any]
    definition: dict[str, Any]
    context_param: str | None
    is_async: bool
    mime_type: str | None


@dataclass(slots=True, kw_only=True)
class _Completer:
    fn: Callable[..., Any]
    is_async: bool


_TEMPLATE_VAR = re.compile(r"\{([+#]?)([A-Za-z0-9_]+)\}")


def _template_regex(uri_template: str) -> re.Pattern[str]:
    """RFC 6570 level 1 and 2: ``{var}`` matches one segment, ``{+var}`` the rest."""
    out = []
    pos = 0
    for match in _TEMPLATE_VAR.finditer(uri_template):
        out.append(re.escape(uri_template[pos : match.start()]))
        operator, name = match.groups()
        out.append(f"(?P<{name}>.+)" if operator else f"(?P<{name}>[^/?#]+)")
        pos = match.end()
    out.append(re.escape(uri_template[pos:]))
    return re.compile("".join(out) + r"\Z")


def _clean(definition: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in definition.items() if v is not None}
