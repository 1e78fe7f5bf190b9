"""With ``CI=true`` a missing schema directory fails the test run; locally the schema tests skip, saying where they looked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
A_SCHEMA_TEST = "tests/unit/test_revisions_table.py"  # it reads every official schema


def _pytest(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER")}
    env["MCPX_SCHEMAS"] = str(tmp_path / "no-schemas-here")
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", A_SCHEMA_TEST],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_ci_fails_the_run_when_the_schemas_are_missing(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "true")
    assert done.returncode == 4, done.stdout + done.stderr  # a usage error: nothing ran
    assert "CI=true" in done.stderr and str(tmp_path / "no-schemas-here") in done.stderr, done.stderr


def test_locally_the_schema_tests_skip_naming_the_path(tmp_path: Path) -> None:
    done = _pytest(tmp_path, None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipped" in done.stdout and "NOT RUN" in done.stdout, done.stdout
