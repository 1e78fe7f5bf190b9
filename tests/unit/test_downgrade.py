"""downgrade(): built once in the newest shape, cut to a revision at the edge, never edited."""

from __future__ import annotations

import copy
from typing import Any

from mcpx.core import Revision
from mcpx.core.downgrade import Ages, downgrade, downgrade_error, envelope

R24, R25A, R25B, R25C, R26 = list(Revision)

CALL: dict[str, Any] = {
    "content": [
        {"type": "text", "text": "hello", "_meta": {"x": 1}},
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "demo://readme", "name": "readme", "description": "the readme"},
    ],
    "structuredContent": {"n": 1},
    "isError": False,
    "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t"}, "vendor/key": 1},
}


def test_newest_revision_gets_the_same_object_when_nothing_changes() -> None:
    result = {
        "content": [{"type": "text", "text": "x"}],
        "structuredContent": [1, 2],
        "resultType": "complete",
    }
    assert downgrade(result, "CallToolResult", R26) is result
    tools = {
        "tools": [{"name": "t", "inputSchema": {"type": "object"}, "title": "T", "icons": [{"src": "a"}]}]
    }
    assert downgrade(tools, "ListToolsResult", R26) is tools
    assert downgrade(tools, "ListToolsResult", R25C) is tools


def test_downgrade_never_edits_its_input() -> None:
    original = copy.deepcopy(CALL)
    for rev in Revision:
        downgrade(CALL, "CallToolResult", rev)
    assert original == CALL


def test_untouched_subtrees_are_shared() -> None:
    result = {
        "content": [{"type": "text", "text": "x"}],
        "structuredContent": {"a": 1},
        "extra": {"big": [1]},
    }
    out = downgrade(result, "CallToolResult", R25A)
    assert out is not result and "structuredContent" not in out
    assert out["content"] is result["content"]  # unchanged: shared, not copied
    assert out["extra"] is result["extra"]  # unknown fields are carried as they are


def test_2024_11_05_call_result() -> None:
    out = downgrade(CALL, "CallToolResult", R24)
    assert "structuredContent" not in out
    kinds = [b["type"] for b in out["content"]]
    assert kinds == ["text", "resource", "text"]
    assert "_meta" not in out["content"][0]  # content _meta arrived in 2025-06-18
    assert out["content"][1]["resource"] == {
        "uri": "urn:mcpx:inline-audio:audio/wav",
        "mimeType": "audio/wav",
        "blob": "AAAA",
    }
    assert "demo://readme" in out["content"][2]["text"] and "the readme" in out["content"][2]["text"]
    assert out["_meta"] == {"vendor/key": 1}  # related-task is 2025-11-25 only


def test_structured_content_is_kept_as_text_when_it_cannot_be_carried() -> None:
    only_structured = {"content": [], "structuredContent": {"a": 1}}
    out = downgrade(only_structured, "CallToolResult", R25A)
    assert out == {"content": [{"type": "text", "text": '{"a":1}'}]}
    array = {"content": [], "structuredContent": [1, 2]}
    assert downgrade(array, "CallToolResult", R25C) == {"content": [{"type": "text", "text": "[1,2]"}]}
    assert downgrade(array, "CallToolResult", R26) is array


def test_2025_11_25_keeps_related_task_and_execution_but_2026_drops_them() -> None:
    assert downgrade(CALL, "CallToolResult", R25C)["_meta"] == CALL["_meta"]
    tool = {"name": "t", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}
    assert downgrade(tool, "Tool", R25C) is tool
    assert "execution" not in downgrade(tool, "Tool", R26)
    assert "execution" not in downgrade(tool, "Tool", R25B)


def test_tool_fields_per_revision() -> None:
    tool = {
        "name": "t",
        "title": "T",
        "inputSchema": {"type": "object", "additionalProperties": False},
        "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
        "icons": [{"src": "https://x/i.png"}],
        "_meta": {"k": 1},
    }
    assert set(downgrade(tool, "Tool", R24)) == {"name", "inputSchema"}
    assert set(downgrade(tool, "Tool", R25A)) == {"name", "inputSchema", "annotations"}
    assert set(downgrade(tool, "Tool", R25B)) == {
        "name",
        "title",
        "inputSchema",
        "outputSchema",
        "annotations",
        "_meta",
    }
    assert downgrade(tool, "Tool", R25B)["inputSchema"] is tool["inputSchema"]  # a JSON Schema is data


def test_non_object_output_schema_is_dropped_where_the_revision_requires_an_object() -> None:
    tool = {"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"type": "array"}}
    assert "outputSchema" not in downgrade(tool, "Tool", R25B)
    assert "outputSchema" not in downgrade(tool, "Tool", R25C)
    assert downgrade(tool, "Tool", R26) is tool


def test_lenient_keeps_extra_fields_but_still_rewrites_unparseable_blocks() -> None:
    out = downgrade(CALL, "CallToolResult", R24, strict=False)
    assert out["structuredContent"] == {"n": 1}
    assert [b["type"] for b in out["content"]] == ["text", "resource", "text"]


def test_progress_message_is_2025_03_26_and_later() -> None:
    params = {"progressToken": 1, "progress": 2, "message": "half"}
    assert "message" not in downgrade(params, "ProgressNotificationParams", R24)
    assert downgrade(params, "ProgressNotificationParams", R25A) is params
    assert downgrade(params, "ProgressNotificationParams", R24, strict=False) is params


def test_capabilities_per_revision() -> None:
    caps = {
        "tools": {"listChanged": True},
        "logging": {},
        "completions": {},
        "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }
    assert set(downgrade(caps, "ServerCapabilities", R24)) == {"tools", "logging"}
    assert set(downgrade(caps, "ServerCapabilities", R25A)) == {"tools", "logging", "completions"}
    assert set(downgrade(caps, "ServerCapabilities", R25C)) == {"tools", "logging", "completions", "tasks"}
    assert set(downgrade(caps, "ServerCapabilities", R26)) == {
        "tools",
        "logging",
        "completions",
        "extensions",
    }


def test_envelope_adds_what_2026_requires() -> None:
    info = {"name": "mcpx", "version": "1"}
    listed = envelope({"tools": []}, "tools/list", info, Ages(list_ms=5000, read_ms=0))
    assert listed == {
        "tools": [],
        "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": info},
        "ttlMs": 5000,
        "cacheScope": "public",
    }
    read = envelope({"contents": []}, "resources/read", info, Ages())
    assert read["cacheScope"] == "private" and read["ttlMs"] == 0
    call = envelope({"content": []}, "tools/call", info, Ages())
    assert "ttlMs" not in call and "cacheScope" not in call
    asking = envelope({"resultType": "input_required", "inputRequests": {}}, "tools/call", info, Ages())
    assert asking["resultType"] == "input_required" and "ttlMs" not in asking


def test_error_codes_a_revision_lacks_become_invalid_params() -> None:
    assert downgrade_error(-32002, {"uri": "x"}, R25C) == (-32002, {"uri": "x"})
    assert downgrade_error(-32002, {"uri": "x"}, R26) == (-32602, {"uri": "x"})
    assert downgrade_error(-32022, None, R26) == (-32022, None)
    assert downgrade_error(-32022, None, R25B) == (-32602, None)
    assert downgrade_error(-32601, None, R24) == (-32601, None)
