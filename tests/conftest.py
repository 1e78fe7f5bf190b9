"""Shared test configuration: hypothesis profiles and the schema directory."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent

settings.register_profile("default", max_examples=200, deadline=None)
settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("MCPX_FUZZ_EXAMPLES", "3000")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# The suite starts mcpx in a subprocess hundreds of times (daemons, shims, demo servers, the
# pool's restarts).  Where the environment forbids writing bytecode, each of those would compile
# mcpx from source again (about half a second of CPU): they share a bytecode cache outside the
# repository instead, as an installed mcpx has one.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
    os.environ.setdefault(
        "PYTHONPYCACHEPREFIX",
        str(Path(tempfile.gettempdir()) / f"mcpx-tests-pycache-{getattr(os, 'getuid', lambda: 0)()}"),
    )


def schemas_dir() -> Path:
    """The official MCP schemas: ``$MCPX_SCHEMAS``, else ``../shared/mcp-schemas``."""
    configured = os.environ.get("MCPX_SCHEMAS")
    return Path(configured) if configured else ROOT.parent / "shared" / "mcp-schemas"


def pytest_sessionstart(session: pytest.Session) -> None:
    """With ``CI=true`` the official schemas are required: their absence fails the run at once.

    Locally, a test that needs them skips, naming the path it tried, and the
    sweep's summary says NOT RUN.
    """
    root = schemas_dir()
    if os.environ.get("CI", "").lower() == "true" and not (root / "2026-07-28" / "schema.json").is_file():
        raise pytest.UsageError(
            f"CI=true, and the official MCP schemas are not at {root}: set MCPX_SCHEMAS to the "
            "mcp-schemas directory (the strict schema tests and the sweep need them)"
        )


@pytest.fixture(autouse=True, scope="session")
def _sweep_client_frames() -> object:
    """Every frame mcpx's client core sends, in any test, goes through the strict sweep."""
    from tests.conformance.sweep import sweep_client_frames

    undo = sweep_client_frames()
    yield
    undo()


# -- the strict schema sweep's report (aggregated across xdist workers) -------

_SWEEP_TOTALS: dict[str, dict[str, int]] = {"counts": {}, "exemptions": {}, "violations": {}}
_SWEEP_DISABLED: list[str] = []


def _sweep_state() -> dict[str, object] | None:
    import sys

    module = sys.modules.get("tests.conformance.sweep")
    if module is None:
        return None
    sweep = module.SWEEP
    return {
        "counts": dict(sweep.counts),
        "exemptions": dict(sweep.exemptions),
        "violations": dict(sweep.violations),
        "disabled": getattr(sweep, "reason", None),
    }


def _merge(state: dict[str, object] | None) -> None:
    if not state:
        return
    for key in ("counts", "exemptions", "violations"):
        for rev, n in state[key].items():  # type: ignore[attr-defined]
            _SWEEP_TOTALS[key][rev] = _SWEEP_TOTALS[key].get(rev, 0) + n
    if state.get("disabled"):
        _SWEEP_DISABLED.append(str(state["disabled"]))


def pytest_sessionfinish(session, exitstatus):  # type: ignore[no-untyped-def]
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["mcpx_sweep"] = _sweep_state()
    else:
        _merge(_sweep_state())


def pytest_testnodedown(node, error):  # type: ignore[no-untyped-def]
    _merge(getattr(node, "workeroutput", {}).get("mcpx_sweep"))


def pytest_terminal_summary(terminalreporter):  # type: ignore[no-untyped-def]
    counts = _SWEEP_TOTALS["counts"]
    if _SWEEP_DISABLED:
        terminalreporter.write_line(f"schema sweep: NOT RUN — {_SWEEP_DISABLED[0]}")
        return
    if not counts:
        return
    revisions = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28", "ext-tasks/2026-07-28")
    parts = ", ".join(f"{rev}: {counts.get(rev, 0)}" for rev in revisions)
    client = ", ".join(f"{rev}: {counts.get('client ' + rev, 0)}" for rev in revisions[:5])
    parts = f"server frames {parts}; client frames {client}"
    exemptions = _SWEEP_TOTALS["exemptions"]
    exempt = sum(n for key, n in exemptions.items() if not key.startswith("client "))
    generic = sum(n for key, n in exemptions.items() if key.startswith("client "))
    violations = sum(_SWEEP_TOTALS["violations"].values())
    terminalreporter.write_line(
        f"schema sweep: {sum(counts.values())} frames validated in strict mode, {violations} violations "
        f"({parts}); "
        f"{exempt} id-null error frames checked with the JSON-RPC 2.0 reading; "
        f"{generic} client frames no schema describes (generic requests, lenient answers) not checked"
    )
