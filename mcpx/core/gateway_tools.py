"""The gateway's own tools: their definitions, and how a call of one is checked.

In gateway mode the tool list is fixed (spec/gateway.md §1): ``mcpx_call``
(forward one call, its result verbatim), ``mcpx_servers``, ``mcpx_search``
and ``mcpx_describe``.  This module holds their definitions as the 2025-11-25
and 2026-07-28 server/tools pages describe a ``Tool`` (``inputSchema``,
``outputSchema``, ``annotations``, ``execution``), the argument check every
call to one goes through (``_check_arguments``, by the rules read from
those schemas once), the JSON text that accompanies their structured
results, and the capabilities a host's are narrowed onto
(``narrowed_capabilities``).  ``GatewaySurface`` (``gateway.py``) answers
the calls.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import orjson

__all__ = ["GATEWAY_TOOL_NAMES", "gateway_tools", "narrowed_capabilities"]

GATEWAY_TOOL_NAMES: Final = ("mcpx_call", "mcpx_servers", "mcpx_search", "mcpx_describe")
_SEARCH_LIMIT: Final = 20
_SEARCH_LIMIT_MAX: Final = 100


_SERVER_ARG: Final = {
    "type": "string",
    "description": "The upstream server's name, as mcpx_servers lists it.",
}
_TOOL_ARG: Final = {
    "type": "string",
    "description": "The tool's name on that server, exactly as the server lists it (no prefix).",
}
_JSON_TEXT_NOTE: Final = "The same JSON is also given as text."

_TOOLS: Final[tuple[Mapping[str, Any], ...]] = (
    {
        "name": "mcpx_call",
        "title": "Call an upstream tool",
        "description": (
            "Call one tool on one of mcpx's upstream servers and return its result exactly as the server "
            "answered it: every content block, structuredContent, isError and _meta. Find the server and "
            "tool with mcpx_search (or mcpx_servers), and the arguments the tool takes with mcpx_describe."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "server": _SERVER_ARG,
                "tool": _TOOL_ARG,
                "arguments": {
                    "type": "object",
                    "description": "The tool's arguments, as its inputSchema describes (mcpx_describe shows it).",
                },
            },
            "required": ["server", "tool"],
            "additionalProperties": False,
        },
        "annotations": {"title": "Call an upstream tool", "openWorldHint": True},
        # Of mcpx's own tools mcpx_call declares task support (2025-11-25
        # only; downgrade removes it elsewhere; spec/gateway.md §1, §6).
        "execution": {"taskSupport": "optional"},
    },
    {
        "name": "mcpx_servers",
        "title": "List upstream servers",
        "description": (
            "List mcpx's upstream servers: each one's name, status (ready; starting: its tools are listed once "
            "it is up; failed, with why in detail; not started), MCP era and revision, whether it is passed "
            "through under its own names, and how many tools, prompts, resources and resource templates it "
            "offers; and which names several passed-through servers offer, with the aliases each is offered "
            f"under instead. {_JSON_TEXT_NOTE}"
        ),
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
        "outputSchema": {
            "type": "object",
            "properties": {
                "servers": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "status": {"type": "string"},
                            "detail": {"type": "string"},
                            "era": {"type": ["string", "null"], "enum": ["legacy", "modern", None]},
                            "revision": {"type": ["string", "null"]},
                            "passthrough": {"type": "boolean"},
                            "tools": {"type": "integer"},
                            "prompts": {"type": "integer"},
                            "resources": {"type": "integer"},
                            "resourceTemplates": {"type": "integer"},
                            "capabilities": {"type": "object"},
                        },
                        "required": ["name", "status", "era", "revision", "passthrough", "tools"],
                    },
                },
                "collisions": {
                    "type": "array",
                    "description": (
                        "Names or URIs several passed-through servers offer, and what each is offered as."
                    ),
                    "items": {
                        "type": "object",
                        "properties": {
                            "kind": {
                                "type": "string",
                                "enum": ["tool", "prompt", "resource", "resourceTemplate"],
                            },
                            "name": {"type": "string"},
                            "servers": {"type": "array", "items": {"type": "string"}},
                            "offered": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {"server": {"type": "string"}, "as": {"type": "string"}},
                                    "required": ["server", "as"],
                                },
                            },
                        },
                        "required": ["kind", "name", "servers", "offered"],
                    },
                },
            },
            "required": ["servers"],
        },
        "annotations": {"title": "List upstream servers", "readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "mcpx_search",
        "title": "Search upstream tools",
        "description": (
            "Search the tools of every upstream server by words in their names, titles and descriptions. "
            "Every word must appear; best matches (words in the name) first. An empty query lists all tools. "
            f"Call a tool found here with mcpx_call; mcpx_describe shows its arguments. {_JSON_TEXT_NOTE}"
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for, e.g. 'read file'."},
                "server": {"type": "string", "description": "Only search this server's tools."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": _SEARCH_LIMIT_MAX,
                    "description": f"At most this many tools (default {_SEARCH_LIMIT}).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "total": {"type": "integer"},
                "tools": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "server": {"type": "string"},
                            "name": {"type": "string"},
                            "title": {"type": "string"},
                            "description": {"type": "string"},
                        },
                        "required": ["server", "name"],
                    },
                },
            },
            "required": ["query", "total", "tools"],
        },
        "annotations": {"title": "Search upstream tools", "readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "mcpx_describe",
        "title": "Describe an upstream tool",
        "description": (
            "Show one upstream tool's full definition as its server lists it, including the inputSchema "
            f"its arguments must follow in mcpx_call. {_JSON_TEXT_NOTE}"
        ),
        "inputSchema": {
            "type": "object",
            "properties": {"server": _SERVER_ARG, "tool": _TOOL_ARG},
            "required": ["server", "tool"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"server": {"type": "string"}, "tool": {"type": "object"}},
            "required": ["server", "tool"],
        },
        "annotations": {"title": "Describe an upstream tool", "readOnlyHint": True, "openWorldHint": False},
    },
)
_TOOLS_BY_NAME: Final = {tool["name"]: tool for tool in _TOOLS}


def narrowed_capabilities(own: Mapping[str, Any], host: Mapping[str, Any]) -> dict[str, Any]:
    """What mcpx declares to an upstream for one host's call: its own capabilities, narrowed by the host's.

    What the upstream hears is the host's declaration (spec/gateway.md §2):
    mcpx never declares a capability its host did not, so an upstream that
    needs sampling refuses (-32021) instead of asking what nobody can answer.
    Elicitation keeps the modes both declare (``{}`` declares forms, as every
    revision reads it); sampling and the rest keep the host's own
    sub-capabilities, since mcpx relays the question as asked.  Roots stay
    declared (empty): mcpx answers ``roots/list`` itself for a host that
    declared none.  Extensions keep only those both declare (the tasks
    extension: mcpx follows an upstream task).
    """
    out: dict[str, Any] = {}
    for name, mine in own.items():
        theirs = host.get(name)
        if name == "roots":
            out[name] = {}  # the host's roots, or mcpx's own; mcpx relays no roots/list_changed
        elif not isinstance(theirs, Mapping) or not isinstance(mine, Mapping):
            continue
        elif name == "extensions":
            # Only extensions both declare: mcpx must understand what comes back (a task it follows).
            both = {ext: dict(theirs[ext]) for ext in mine if isinstance(theirs.get(ext), Mapping)}
            if both:
                out[name] = both
        elif name == "elicitation":
            modes = ({"form", "url"} & set(theirs)) or {"form"}
            kept = {
                mode: dict(theirs[mode]) if isinstance(theirs.get(mode), Mapping) else {} for mode in modes
            }
            narrowed = {mode: value for mode, value in kept.items() if mode in mine or not mine}
            if narrowed:
                out[name] = narrowed
        else:
            out[name] = dict(theirs)
    return out


def gateway_tools() -> tuple[Mapping[str, Any], ...]:
    """The gateway's own tool definitions, in the newest shape (``downgrade`` spells them for a peer)."""
    return _TOOLS


def _check_arguments(tool: str, arguments: Mapping[str, Any]) -> str | None:
    """What is wrong with ``arguments`` for the gateway tool ``tool`` (its inputSchema, by hand)."""
    properties, required, typed = _ARGUMENT_RULES[tool]
    if not properties.keys() >= arguments.keys():
        unknown = sorted(set(arguments) - set(properties))
        valid = ", ".join(properties) or "none"
        return f"unknown argument {unknown[0]!r}; {tool} takes: {valid}"
    for name in required:
        if arguments.get(name) is None:
            return f"missing {name!r}: {properties[name]['description']}"
    for name, expected, spec in typed:
        value = arguments.get(name)
        if value is None:
            continue  # optional and absent (null accepted as absent)
        if expected == "string" and not isinstance(value, str):
            return f"{name!r} must be a string"
        if expected == "object" and not isinstance(value, dict):
            return f"{name!r} must be an object (a JSON object, not a string holding one)"
        if expected == "integer":
            if not isinstance(value, int) or isinstance(value, bool):
                return f"{name!r} must be an integer"
            if not spec["minimum"] <= value <= spec["maximum"]:
                return f"{name!r} must be between {spec['minimum']} and {spec['maximum']}"
    return None


# Each gateway tool's inputSchema as ``_check_arguments`` reads it (every call to one is checked):
# its properties, the names it requires, and each property's name, type and schema, in order.
_ARGUMENT_RULES: Final = {
    name: (
        tool["inputSchema"]["properties"],
        tuple(tool["inputSchema"].get("required", ())),
        tuple((key, spec["type"], spec) for key, spec in tool["inputSchema"]["properties"].items()),
    )
    for name, tool in _TOOLS_BY_NAME.items()
}


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):  # e.g. a lone surrogate from a lenient upstream parser
        return json.dumps(value, ensure_ascii=True, default=repr)


def _structured(value: Mapping[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": _json_text(value)}], "structuredContent": value}
