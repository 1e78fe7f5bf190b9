"""The client-leg judge (scripts/client_leg.py): auth/* is reported, everything else must pass."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("client_leg", ROOT / "scripts" / "client_leg.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def write(root: Path, scenario: str, *statuses: str) -> None:
    folder = root / f"{scenario}-2026-11-30T09-11-57-477Z"
    folder.mkdir(parents=True)
    checks = [{"id": f"c{i}", "status": s} for i, s in enumerate(statuses)]
    (folder / "checks.json").write_text(json.dumps(checks))


def test_auth_failures_are_not_judged_and_every_other_scenario_must_pass(tmp_path: Path) -> None:
    judge = load()
    write(tmp_path / "all", "tools_call", "SUCCESS")
    write(tmp_path / "all", "auth/metadata-default", "FAILURE")
    ok, lines = judge.judge([judge.read_leg(tmp_path, "all")])
    assert ok and "1/1 non-auth scenarios passed" in lines[0] and "1 auth/* scenarios not judged" in lines[0]


def test_a_warning_a_failure_or_only_skips_fail_the_leg(tmp_path: Path) -> None:
    judge = load()
    write(tmp_path / "all", "warned", "SUCCESS", "WARNING")
    write(tmp_path / "all", "failed", "SUCCESS", "FAILURE")
    write(tmp_path / "all", "skipped", "SKIPPED")
    ok, lines = judge.judge([judge.read_leg(tmp_path, "all")])
    assert not ok
    assert sorted(line.split()[1].rstrip(":") for line in lines[1:]) == ["failed", "skipped", "warned"]


def test_a_solo_rerun_replaces_the_concurrent_result_and_a_missing_leg_fails(tmp_path: Path) -> None:
    judge = load()
    write(tmp_path / "2025-11-25", "sse-retry", "FAILURE")
    write(tmp_path / "2025-11-25-solo", "sse-retry", "SUCCESS")
    ok, _ = judge.judge([judge.read_leg(tmp_path, "2025-11-25")])
    assert ok
    ok, lines = judge.judge([judge.read_leg(tmp_path, "2026-07-28")])
    assert not ok and "no results" in lines[0]
