"""The fast path's pure parts: which argv it reads (and which it leaves to typer), and what it imports.

``mcpx call``'s fast path (mcpx/cli/_fast.py) must decline, before doing
anything, every argv it does not read exactly as click would; what it
imports is pinned here for ``mcpx.cli`` and ``mcpx.config`` and, for a whole
call, in tests/interop/test_call_fast_path.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mcpx.cli._entry import FAST_PATHS
from mcpx.cli._fast import _read, call_arguments
from mcpx.config import SETTINGS, resolve_settings
from mcpx.core.framing import DEFAULT_MAX_LINE
from mcpx.core.revisions import REVISIONS
from mcpx.gateway._arguments import input_schema_of, needs_schema, typed_arguments


def imported_after(code: str) -> list[str]:
    """The modules of typer, anyio and mcpx.core a fresh interpreter holds after running ``code``."""
    heavy = "sorted(m for m in sys.modules if m.startswith(('typer', 'anyio', 'mcpx.core')))"
    probe = f"{code}\nimport json, sys; print(json.dumps({heavy}))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    found: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_importing_the_command_line_package_loads_neither_typer_nor_the_core() -> None:
    assert imported_after("import mcpx.cli, mcpx.config") == []


def test_reading_the_settings_that_find_a_daemon_does_not_load_the_core(tmp_path: Path) -> None:
    code = (
        "from mcpx.config import load_config\n"
        f"s = load_config(None, environ={{'HOME': {str(tmp_path)!r}, 'MCPX_DAEMON': 'http://127.0.0.1:9'}}).settings\n"
        "assert s.value('state.dir').endswith('/.local/state/mcpx') and str(s.value('daemon.endpoint'))\n"
    )
    assert imported_after(code) == []
    assert "mcpx.core" in imported_after(code + "s.value('spec.precedence')")  # read: computed from the core


def test_defaults_computed_from_the_core_are_the_cores() -> None:
    settings = resolve_settings()
    assert settings.value("spec.precedence") == tuple(reversed(REVISIONS))
    assert settings.value("transport.maxLine") == DEFAULT_MAX_LINE
    by_key = {s.key: s for s in SETTINGS}
    assert by_key["spec.precedence"].default == tuple(reversed(REVISIONS))
    assert by_key["transport.maxLine"].default == DEFAULT_MAX_LINE
    assert "2026-07-28" in by_key["spec.first"].allowed  # the revision kinds' text, built when asked for
    assert [k for k, _ in settings.items()] == [s.key for s in SETTINGS]


def test_every_fast_path_names_a_function() -> None:
    for where in FAST_PATHS.values():
        module, _, name = where.partition(":")
        assert callable(getattr(__import__(module, fromlist=[name]), name)), where


@pytest.mark.parametrize(
    ("argv", "targets", "args", "values", "as_json"),
    [
        (["demo", "echo"], ["demo", "echo"], [], {}, False),
        (["--json", "demo", "--arg", "a=1", "echo", "--arg=b=2"], ["demo", "echo"], ["a=1", "b=2"], {}, True),
        (["s", "t", "--timeout", "1", "--timeout=2"], ["s", "t"], [], {"--timeout": "2"}, False),
        (
            ["s", "t", "--state=", "--daemon", "http://h:1"],
            ["s", "t"],
            [],
            {"--state": "", "--daemon": "http://h:1"},
            False,
        ),
        (["s", "t", "--json-args", '{"a": "-"}'], ["s", "t"], [], {"--json-args": '{"a": "-"}'}, False),
    ],
)
def test_the_plain_form_is_read_as_click_reads_it(
    argv: list[str], targets: list[str], args: list[str], values: dict[str, str], as_json: bool
) -> None:
    read = _read(argv)
    assert read is not None
    assert (read.targets, read.args, read.values, read.as_json) == (targets, args, values, as_json)


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "echo", "--help"],
        ["demo", "echo", "-h"],
        ["echo", "--", "python", "-m", "srv"],
        ["demo", "echo", "--mcp-spec", "2025-06-18"],
        ["demo", "echo", "--loop", "trio"],
        ["demo", "echo", "--json=true"],
        ["demo", "echo", "--arg"],
        ["demo", "echo", "--arg", "-x=1"],
        ["demo", "echo", "--timeout", "-1"],
        ["demo", "echo", "--state", "--json"],
        ["demo", "-"],
    ],
)
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert _read(argv) is None


def test_arguments_are_built_as_the_typer_command_builds_them() -> None:
    """``k=v`` is a text for the tool's schema to type, ``k:=JSON`` a value; the last of a key wins."""
    assert call_arguments(["a=1", "b=x", 'c:={"d": [true]}', "a=2"], None) == (
        {"c": {"d": [True]}},
        {"a": "2", "b": "x"},
    )
    assert call_arguments(["b=5"], '{"a": 1, "b": 2}') == ({"a": 1}, {"b": "5"})
    assert call_arguments(["b:=5", "a=x", "a:=null"], '{"b": 2}') == ({"b": 5, "a": None}, {})
    assert call_arguments(["t=a=b"], None) == ({}, {"t": "a=b"})
    for bad, message in [
        ((["text"], None), "--arg takes key=value (or key:=JSON), not 'text'"),
        ((["=v"], None), "--arg takes key=value (or key:=JSON), not '=v'"),
        ((["n:=forty"], None), "--arg n:= takes a JSON value, not 'forty'"),
        (([], "[1]"), "--json-args must be a JSON object"),
        (([], "{"), "--json-args is not JSON"),
    ]:
        with pytest.raises(
            ValueError, match="^" + message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")
        ):
            call_arguments(*bad)


def test_texts_are_typed_by_the_tools_input_schema() -> None:
    """``--arg message=42`` to a string parameter is ``"42"``; to an integer one, 42."""
    schema = {
        "type": "object",
        "properties": {
            "message": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "flag": {"type": "boolean"},
            "tags": {"type": "array"},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "either": {"type": ["integer", "string"]},
            "free": {},
        },
    }
    texts = {
        "message": "42",
        "count": "7",
        "ratio": "0.5",
        "flag": "true",
        "tags": '["a", 1]',
        "maybe": "null",
        "either": "abc",
        "free": "[1]",
        "unknown": "true",
    }
    assert typed_arguments(texts, schema) == {
        "message": "42",
        "count": 7,
        "ratio": 0.5,
        "flag": True,
        "tags": ["a", 1],
        "maybe": None,
        "either": "abc",
        "free": [1],
        "unknown": True,
    }
    # What does not fit the schema stays text, for the server to say what it wanted.
    assert typed_arguments({"count": "seven", "flag": "1"}, schema) == {"count": "seven", "flag": "1"}
    assert typed_arguments({"x": "1", "y": "hi"}, None) == {"x": 1, "y": "hi"}  # no schema: JSON if it parses
    # Only a text that reads as JSON can come out otherwise: only then is the schema looked up.
    assert not needs_schema({"message": "hello", "path": "/tmp/x"}) and needs_schema({"a": "hi", "n": "42"})
    tools = [{"name": "other"}, {"name": "echo", "inputSchema": schema}]
    assert input_schema_of(tools, "echo") is schema and input_schema_of(tools, "nope") is None
