"""Published MCP servers, installed by the test run itself: npm's reference servers and PyPI's mcp-server-time.

Installed once per machine into a directory under the system's temporary
directory, keyed by the pinned versions (a lock keeps parallel workers from
installing twice), so a run after the first starts at once.  On a machine
without ``node`` and ``npm`` the tests that need them skip saying so, except
under CI, where a missing input is a failure.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

NPM_PACKAGES = (
    "@modelcontextprotocol/server-everything@2026.8.31",
    "@modelcontextprotocol/server-filesystem@2026.8.31",
    "@modelcontextprotocol/server-memory@2026.8.31",
    "@modelcontextprotocol/server-sequential-thinking@2026.8.31",
)
PYPI_PACKAGES = ("mcp-server-time==2026.10.19",)


@dataclass(frozen=True)
class Published:
    """Where the installed servers' commands are."""

    npm_bin: Path
    time_bin: Path

    def npm(self, name: str) -> str:
        """The command of an npm server (``mcp-server-memory``, …)."""
        return str(self.npm_bin / name)

    @property
    def time(self) -> str:
        return str(self.time_bin / "mcp-server-time")


def _need(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        message = f"{tool} is not installed: the published-server tests need node and npm"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def _install(root: Path) -> Published:
    npm = _need("npm")
    _need("node")
    npm_root, venv = root / "npm", root / "time-venv"
    done = root / "installed"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            npm_root.mkdir(exist_ok=True)
            subprocess.run(
                [
                    npm,
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--silent",
                    "--prefix",
                    str(npm_root),
                    *NPM_PACKAGES,
                ],
                check=True,
                timeout=600,
            )
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            subprocess.run(
                [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *PYPI_PACKAGES],
                check=True,
                timeout=600,
            )
            done.write_text("ok\n")
    return Published(npm_bin=npm_root / "node_modules" / ".bin", time_bin=venv / "bin")


@pytest.fixture(scope="session")
def published() -> Iterator[Published]:
    key = hashlib.sha256("\n".join(NPM_PACKAGES + PYPI_PACKAGES).encode()).hexdigest()[:16]
    root = Path(tempfile.gettempdir()) / f"mcpx-published-servers-{key}"
    root.mkdir(exist_ok=True)
    yield _install(root)
