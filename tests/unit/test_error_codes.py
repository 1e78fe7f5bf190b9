"""Every JSON-RPC error code outside the core is a name, and each name means what the core's does.

``mcpx/core/errors.py`` defines the codes once (JSON-RPC 2.0 §5.1 and
the MCP revisions' own, e.g. 2026-07-28's ``HEADER_MISMATCH``).  Code
outside the core that writes ``-32603`` where it means ``INTERNAL_ERROR``
hides which error it means from a reader and from a search.  A module
that must not import the core (the shim starts fast on the standard
library alone) names its own copy, as the core spells it, and this test
holds the copy to the core's value.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mcpx
from mcpx.core import errors

PACKAGE = Path(mcpx.__file__).parent
CODES = range(-32768, -31999)  # JSON-RPC 2.0 §5.1: the reserved range, where every MCP code lies


def _code(node: ast.AST) -> int | None:
    """The integer a ``-<literal>`` expression in the reserved range stands for."""
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
        and -node.operand.value in CODES
    ):
        return -node.operand.value
    return None


def _outside_the_core() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if p.relative_to(PACKAGE).parts[0] != "core"]


def test_no_module_outside_the_core_writes_an_error_code_as_a_number() -> None:
    found = []
    for path in _outside_the_core():
        tree = ast.parse(path.read_text())
        named = {  # ``NAME = -32603`` at the top of a module: its own copy of a core name
            id(stmt.value)
            for stmt in tree.body
            if isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        }
        found += [
            f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {_code(node)}"
            for node in ast.walk(tree)
            if _code(node) is not None and id(node) not in named
        ]
    assert found == [], "use the names of mcpx.core (INTERNAL_ERROR, INVALID_PARAMS, ...):\n" + "\n".join(
        found
    )


def test_a_modules_own_copy_of_a_code_is_the_cores_name_and_value() -> None:
    copies = {}
    for path in _outside_the_core():
        for stmt in ast.parse(path.read_text()).body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                code = _code(stmt.value)
                if code is not None:
                    copies[f"{path.relative_to(PACKAGE.parent)}: {stmt.targets[0].id}"] = code
    assert copies, "the shim's INTERNAL_ERROR is such a copy: the scan finds none, so it is broken"
    wrong = {
        where: code
        for where, code in copies.items()
        if getattr(errors, where.rsplit(": ", 1)[1], None) != code
    }
    assert wrong == {}, f"named as in mcpx.core but not its value (or no such name there): {wrong}"
