"""Content blocks and tool results, in the newest spelling.

Helpers build the content blocks every revision knows (``text``, ``image``,
``embedded``), and the newer ones (``audio``, ``resource_link``); the session
rewrites what a peer's revision cannot parse (``mcpx.core.downgrade``), so a
tool never needs to know which revision its caller speaks.

``ToolResult`` is the explicit form of a ``tools/call`` result; ``to_call_result``
turns whatever a tool function returned into one (rules in its docstring).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = [
    "ToolResult",
    "audio",
    "embedded",
    "image",
    "resource_link",
    "text",
    "to_call_result",
]

Block = dict[str, Any]


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


def text(value: str, *, annotations: Mapping[str, Any] | None = None) -> Block:
    block: Block = {"type": "text", "text": value}
    if annotations:
        block["annotations"] = dict(annotations)
    return block


def image(data: bytes | str, mime_type: str, *, annotations: Mapping[str, Any] | None = None) -> Block:
    """An image block; ``data`` is raw bytes or already base64 text."""
    block: Block = {"type": "image", "data": _b64(data), "mimeType": mime_type}
    if annotations:
        block["annotations"] = dict(annotations)
    return block


def audio(data: bytes | str, mime_type: str, *, annotations: Mapping[str, Any] | None = None) -> Block:
    """An audio block (2025-03-26 and later; older peers get an embedded resource)."""
    block: Block = {"type": "audio", "data": _b64(data), "mimeType": mime_type}
    if annotations:
        block["annotations"] = dict(annotations)
    return block


def embedded(
    uri: str,
    *,
    text: str | None = None,
    blob: bytes | str | None = None,
    mime_type: str | None = None,
    annotations: Mapping[str, Any] | None = None,
) -> Block:
    """An embedded resource with either ``text`` or ``blob`` contents."""
    if (text is None) == (blob is None):
        raise ValueError("an embedded resource has exactly one of text and blob")
    contents: dict[str, Any] = {"uri": uri}
    if mime_type:
        contents["mimeType"] = mime_type
    if text is not None:
        contents["text"] = text
    else:
        assert blob is not None
        contents["blob"] = _b64(blob)
    block: Block = {"type": "resource", "resource": contents}
    if annotations:
        block["annotations"] = dict(annotations)
    return block


def resource_link(
    uri: str,
    name: str,
    *,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
) -> Block:
    """A link to a resource (2025-06-18 and later; older peers get a text block)."""
    block: Block = {"type": "resource_link", "uri": uri, "name": name}
    if title:
        block["title"] = title
    if description:
        block["description"] = description
    if mime_type:
        block["mimeType"] = mime_type
    return block


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """A ``tools/call`` result spelled out: content, structured content, error flag."""

    content: Sequence[Block | str] = ()
    structured: Any = None
    is_error: bool = False
    meta: Mapping[str, Any] | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {"content": [_block(c) for c in self.content]}
        if self.structured is not None:
            result["structuredContent"] = self.structured
        if self.is_error:
            result["isError"] = True
        if self.meta:
            result["_meta"] = dict(self.meta)
        return result


def _block(item: Block | str) -> Block:
    return text(item) if isinstance(item, str) else dict(item)


def _is_block(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("type"), str)


def to_call_result(value: Any, *, structured: bool) -> dict[str, Any]:
    """Turn a tool function's return value into a ``CallToolResult``.

    * ``ToolResult`` → as spelled.
    * ``str`` → one text block.
    * a content block, or a list of blocks and strings → those blocks.
    * with ``structured`` (the tool declared an output schema), or a ``dict``
      → ``structuredContent`` plus its JSON as a text block, as the tools page
      of every revision with structured content recommends.
    * anything else JSON can carry → its JSON as a text block.
    """
    if isinstance(value, ToolResult):
        return value.to_dict()
    if isinstance(value, str) and not structured:
        return {"content": [{"type": "text", "text": value}]}  # text(value), in line: the common return
    if _is_block(value) and not structured:
        return {"content": [dict(value)]}
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, str) or _is_block(v) for v in value)
        and not structured
    ):
        return {"content": [_block(v) for v in value]}
    rendered = orjson.dumps(value).decode()
    if structured or isinstance(value, dict):
        return {"content": [text(rendered)], "structuredContent": value}
    return {"content": [text(rendered)]}
