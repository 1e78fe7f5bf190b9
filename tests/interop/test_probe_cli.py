"""``mcpx probe`` against real servers over stdio: the era, the revision, and the cache.

mcpx's demo server restricted to legacy revisions, to 2026-07-28, or speaking
both, and the official Python SDK's server: the probe must name the right era
each time, and a second probe must start from the cached answer.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = [sys.executable, "-m", "mcpx", "demo"]
SDK = [sys.executable, str(ROOT / "tests" / "interop" / "sdk_pinned_server.py")]

pytestmark = pytest.mark.timeout(90)


def probe(state: Path, *server: str) -> tuple[int, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "mcpx", "probe", "--state", str(state), "--", *server],
        check=False,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    return done.returncode, orjson.loads(done.stdout) if done.stdout.strip() else done.stderr


@pytest.mark.parametrize(
    ("server", "era", "revision"),
    [
        ([*DEMO, "--revisions", "2025-06-18,2025-11-25"], "legacy", "2025-11-25"),
        ([*DEMO, "--revisions", "2024-11-05"], "legacy", "2024-11-05"),
        ([*DEMO, "--revisions", "2026-07-28"], "modern", "2026-07-28"),
        (DEMO, "modern", "2026-07-28"),  # both eras: modern first
        # The official Python SDK's server, pinned to each era and left dual.
        ([*SDK, "legacy"], "legacy", "2025-11-25"),
        ([*SDK, "modern"], "modern", "2026-07-28"),
        ([*SDK, "dual"], "modern", "2026-07-28"),  # both eras: modern first
    ],
    ids=["legacy-only", "2024-11-05-only", "modern-only", "dual", "sdk-legacy", "sdk-modern", "sdk-dual"],
)
def test_probe_names_the_era_and_the_second_probe_starts_from_the_cache(
    tmp_path: Path, server: list[str], era: str, revision: str
) -> None:
    code, first = probe(tmp_path, *server)
    assert code == 0, first
    assert (first["era"], first["revision"]) == (era, revision), first
    assert first["cache"] == "none" and first["trace"][0].startswith("start")
    cache = tmp_path / "upstream-eras.json"
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o600
    code, second = probe(tmp_path, *server)
    assert code == 0 and second["cache"] == "confirmed", second
    assert (second["era"], second["revision"]) == (first["era"], first["revision"])
    if first["era"] == "legacy":
        assert "server/discover" not in " ".join(second["trace"])  # straight to initialize


@pytest.mark.parametrize(("era", "legacy_works"), [("legacy", True), ("modern", False), ("dual", True)])
def test_the_pinned_sdk_servers_are_what_their_names_say(era: str, legacy_works: bool) -> None:
    """A handshake call tells the dual server from the modern-only one, which the probe cannot."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcpx",
            "call",
            "echo",
            "--arg",
            "text=hi",
            "--mcp-spec",
            "2025-11-25",
            "--",
            *SDK,
            era,
        ],
        check=False,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    assert (done.returncode == 0) is legacy_works, done.stderr
    if legacy_works:
        assert b"hi" in done.stdout


def test_a_server_that_is_not_mcp_fails_with_a_reason(tmp_path: Path) -> None:
    code, outcome = probe(tmp_path, sys.executable, "-c", "import sys; sys.stdin.read(); print('hello')")
    assert code == 1 and outcome["era"] is None and outcome["error"]
