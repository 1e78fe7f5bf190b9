"""``spec/revisions.md`` is generated from the revision table and must not drift from it.

The document is rendered by ``mcpx.core.revisions_doc`` (generated artefacts
are checked, not edited by hand).  When this test fails, regenerate:

    python scripts/revisions_doc.py > spec/revisions.md
"""

from __future__ import annotations

import ast
import difflib
import subprocess
import sys
from pathlib import Path

import pytest

from mcpx.core import revisions_doc

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "spec" / "revisions.md"
REGENERATE = "python scripts/revisions_doc.py > spec/revisions.md"


def test_command_constant_is_the_documented_one() -> None:
    assert revisions_doc.COMMAND == REGENERATE


def test_spec_revisions_md_is_up_to_date() -> None:
    expected = revisions_doc.render()
    assert DOC.is_file(), f"{DOC} is missing; generate it with:\n    {REGENERATE}"
    actual = DOC.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                actual.splitlines(keepends=True),
                expected.splitlines(keepends=True),
                fromfile="spec/revisions.md (on disk)",
                tofile="spec/revisions.md (from mcpx/core/revisions.py)",
                n=1,
            )
        )
        shown = "".join(diff.splitlines(keepends=True)[:60])
        pytest.fail(
            "spec/revisions.md is out of date with mcpx/core/revisions.py; regenerate it with:\n"
            f"    {REGENERATE}\n(run from the repository root)\n\n{shown}",
            pytrace=False,
        )


def test_render_is_deterministic() -> None:
    first = revisions_doc.render()
    assert first == revisions_doc.render()
    assert first.endswith("\n") and not first.endswith("\n\n")


def test_the_script_writes_render_to_stdout() -> None:
    written = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "revisions_doc.py")],
        capture_output=True,
        check=True,
        cwd=ROOT,
    ).stdout
    assert written == revisions_doc.render().encode("utf-8")


def test_generator_imports_only_the_table_and_the_stdlib() -> None:
    tree = ast.parse(Path(revisions_doc.__file__).read_text(encoding="utf-8"))
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
    allowed_mcpx = {"mcpx.core.revisions"}
    for module in sorted(modules):
        top = module.split(".")[0]
        assert module in allowed_mcpx or module == "__future__" or top in sys.stdlib_module_names, (
            f"mcpx/core/revisions_doc.py imports {module}; it may import only mcpx.core.revisions "
            "and the standard library"
        )
