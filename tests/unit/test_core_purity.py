"""mcpx.core stays pure: no I/O, no clock, no randomness, no threads, no global logging.

Nor the process's own world (``os``, ``sys``): environment, arguments and standard streams
are the driver's to read and pass in.
"""

from __future__ import annotations

import ast
import collections.abc
import subprocess
import sys
import typing
from pathlib import Path

import mcpx.core

FORBIDDEN = frozenset(
    {
        "asyncio",
        "trio",
        "anyio",
        "socket",
        "subprocess",
        "threading",
        "time",
        "logging",
        "selectors",
        "random",
        "secrets",
    }
)
# A core module's own imports may not reach the process's world either.  Only its own: the
# interpreter loads os and sys before anything, and orjson imports uuid for its own use.
FORBIDDEN_DIRECT = FORBIDDEN | {"os", "sys", "uuid"}
CORE = Path(mcpx.core.__file__).parent


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_no_core_module_imports_io_clock_or_threads() -> None:
    offenders = {
        str(path.relative_to(CORE.parent.parent)): sorted(_imports(path) & FORBIDDEN_DIRECT)
        for path in sorted(CORE.rglob("*.py"))
        if _imports(path) & FORBIDDEN_DIRECT
    }
    assert offenders == {}, f"mcpx/core must stay sans-IO; these modules import I/O or clocks: {offenders}"


def test_importing_the_core_loads_nothing_forbidden() -> None:
    """Transitively too: what mcpx.core pulls in beyond a bare interpreter."""
    probe = (
        "import sys; base = set(sys.modules); import mcpx.core; "
        "print(' '.join(sorted({m.split('.')[0] for m in set(sys.modules) - base})))"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert loaded & FORBIDDEN == set(), f"importing mcpx.core loads {sorted(loaded & FORBIDDEN)}"


def test_the_purity_check_would_catch_an_offender(tmp_path: Path) -> None:
    offender = tmp_path / "bad.py"
    offender.write_text(
        "import time\nfrom asyncio import sleep\nimport os.path\nfrom secrets import token_bytes\n"
    )
    assert _imports(offender) & FORBIDDEN_DIRECT == {"time", "asyncio", "os", "secrets"}


# The two sides of the core (machines wrapping machines, each importing only what it stands on;
# spec/client.md's table of layers).  What both HTTP sides share is in http_wire.py.
SERVER_SIDE = frozenset(
    {
        *("server_session", "server_base", "server_output", "server_questions", "server_tasks"),
        *("server_methods", "server_judging", "stdio"),
        *("http_server", "http_base", "http_sessions", "http_streamable", "http_legacy_sse", "http_reading"),
    }
)
CLIENT_SIDE = frozenset(
    {
        *("client_session", "client_session_base", "client_events", "client_lists"),
        *("http_client", "http_client_actions", "http_client_base"),
        *("sse_client", "sse_client_actions", "sse_client_base"),
        *("probe", "probe_base", "probe_events", "probe_cache", "probe_judging", "probe_reading"),
    }
)


def _core_imports(module: str) -> set[str]:
    """The core modules ``module`` imports by relative name (``from .x import …``)."""
    tree = ast.parse((CORE / f"{module}.py").read_text())
    return {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
    }


def test_the_client_side_of_the_core_stands_on_nothing_of_the_server_side() -> None:
    """No arrow, direct or through another module, from a client machine or binding into the server's."""
    reached: dict[str, set[str]] = {}
    for start in sorted(CLIENT_SIDE):
        seen: set[str] = set()
        todo = [start]
        while todo:
            for imported in _core_imports(todo.pop()) - seen:
                seen.add(imported)
                todo.append(imported)
        reached[start] = seen & SERVER_SIDE
    assert reached == {name: set() for name in CLIENT_SIDE}, reached


def _callables_in(annotation: object) -> bool:
    """Whether a type annotation admits a callable anywhere in it (``X | Callable[...]``, ``Mapping[str, Callable]``)."""
    if annotation is collections.abc.Callable or typing.get_origin(annotation) is collections.abc.Callable:
        return True
    return any(_callables_in(arg) for arg in typing.get_args(annotation))


def test_no_core_config_takes_a_callable() -> None:
    """What a machine wants done is an action its driver carries out; what it needs to know is data.

    A callable in a configuration would be the application's code run
    inside ``receive_data``/``handle_timer``.
    """
    configs = [name for name in mcpx.core.__all__ if name.endswith("Config")]
    assert configs, "mcpx.core exports no configuration: the check is looking in the wrong place"
    taking_code = {
        name: [
            field
            for field, hint in typing.get_type_hints(getattr(mcpx.core, name)).items()
            if _callables_in(hint)
        ]
        for name in configs
    }
    assert {name: fields for name, fields in taking_code.items() if fields} == {}


def test_no_machine_is_made_with_a_callable() -> None:
    """Nor is a machine given code when it is made: a session id, like a time, comes from data (a key)."""
    machines = [name for name in mcpx.core.__all__ if hasattr(getattr(mcpx.core, name), "next_actions")]
    assert {"ServerSession", "HttpServer", "ClientSession", "Pool", "Router"} <= set(machines)
    taking_code = {
        name: [
            parameter
            for parameter, hint in typing.get_type_hints(getattr(mcpx.core, name).__init__).items()
            if _callables_in(hint)
        ]
        for name in machines
    }
    assert {name: params for name, params in taking_code.items() if params} == {}


def test_the_callable_check_sees_a_callable_field() -> None:
    assert _callables_in(collections.abc.Callable[[str], None] | None)
    assert _callables_in(dict[str, collections.abc.Callable[[], int]])
    assert not _callables_in(dict[str, typing.Mapping[str, str]] | None)


def test_the_sides_are_named_as_the_modules_are() -> None:
    """The two sets above name real modules, so the check above looks at something."""
    assert {path.stem for path in CORE.glob("*.py")} >= SERVER_SIDE | CLIENT_SIDE


def _private_core_imports(path: Path) -> list[str]:
    """Imports in ``path`` that reach a private module of the core (``mcpx.core._x``, ``..core._x``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [f"{module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if "core" in parts[:-1] and parts[parts.index("core") + 1].startswith("_"):
                found.append(f"{path.name}:{node.lineno} {name}")
    return found


def test_nothing_outside_the_core_imports_a_private_module_of_it() -> None:
    """The core's face is ``mcpx.core`` and its named submodules; its underscored modules are its own."""
    root = CORE.parent.parent
    outside = [
        path
        for folder in ("mcpx", "tests", "benchmarks", "scripts")
        for path in sorted((root / folder).rglob("*.py"))
        if CORE not in path.parents
    ]
    assert len(outside) > 100, "the scan found too few files: it is looking in the wrong place"
    offenders = [hit for path in outside for hit in _private_core_imports(path)]
    assert offenders == []


def test_the_private_import_check_sees_one(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from mcpx.core._pool import Pool\nfrom ..core import _upstream_auth\n"
        "import mcpx.core._x\nfrom mcpx.core.pool import Pool\nfrom ..core import Router\n"
    )
    assert [hit.split(" ")[1] for hit in _private_core_imports(sample)] == [
        "mcpx.core._pool.Pool",
        "core._upstream_auth",
        "mcpx.core._x",
    ]
