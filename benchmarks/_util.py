"""Helpers shared by the benchmark scripts: machine facts and the JSON results file."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=HERE.parent, capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        return ""


def machine() -> dict[str, Any]:
    """What the figures were measured on, including which mcpx (commit, and a digest of local edits)."""
    commit = _git("rev-parse", "--short", "HEAD")
    diff = _git("diff", "HEAD", "--", "mcpx")
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "mcpx_commit": commit or None,
        "mcpx_uncommitted_diff_sha1": hashlib.sha1(diff.encode()).hexdigest()[:12] if diff else None,
        "loadavg_at_start": load_average(),
    }


def load_average() -> list[float] | None:
    """The 1/5/15-minute load averages: other work on the machine skews absolute figures."""
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def now_iso() -> str:
    return dt.datetime.now().astimezone().isoformat(timespec="seconds")


def write_results(name: str, payload: dict[str, Any]) -> Path:
    """Write ``payload`` to ``benchmarks/results/<name>-<timestamp>.json``; return the path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"{name}-{stamp}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path
