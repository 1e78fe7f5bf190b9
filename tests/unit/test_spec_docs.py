"""spec/ names tests as evidence; a renamed or deleted test must not leave a dangling claim."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_test_named_in_spec_exists() -> None:
    missing = []
    seen = 0
    for doc in sorted((ROOT / "spec").glob("*.md")):
        for file, name in REFERENCE.findall(doc.read_text()):
            seen += 1
            path = ROOT / file
            if not path.is_file() or name not in _defined_tests(path):
                missing.append(f"{doc.name}: {file}::{name}")
    assert seen > 20, "spec/ should cite its evidence"
    assert missing == [], "spec/ cites tests that do not exist:\n" + "\n".join(missing)


def _actions_and_events() -> set[str]:
    """What ``mcpx.core`` exports that a machine gives or takes: neither a machine, a configuration nor an error."""
    import inspect

    import mcpx.core

    names = set()
    for name in mcpx.core.__all__:
        value = getattr(mcpx.core, name)
        if not inspect.isclass(value) or issubclass(value, Exception) or hasattr(value, "next_actions"):
            continue
        if name.endswith("Config") or name in {"Revision", "ToolHints", "RoundTable", "TaskStore"}:
            continue
        names.add(name)
    return names


def test_every_action_and_event_of_the_core_is_in_the_vocabulary() -> None:
    """spec/machines.md is the one list of the words the machines use: it names each of them."""
    vocabulary = _actions_and_events()
    assert {"Send", "SendBytes", "SendUpstream", "Granted", "ProbeDone", "Completed"} <= vocabulary
    page = (ROOT / "spec" / "machines.md").read_text()
    named = set(re.findall(r"`(\w+)`", page))
    assert sorted(vocabulary - named) == []
