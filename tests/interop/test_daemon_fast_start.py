"""``mcpx daemon`` without typer: the daemon ``mcpx serve`` starts carries no CLI framework for its life.

mcpx/cli/_daemon_command.py: the fast path reads the daemon's own options
and runs the same body as the typer command.  A user checks three things:
the daemon starts and says where it serves, it did not import typer or the
pydantic typer coerces options with, nor what it needs only off its path
(megabytes held for hours), and what the fast path leaves to typer (``--help``, a wrong option, a wrong loop) is
answered by typer as before.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.interop._daemon_process import ROOT

# What a daemon would carry for hours for nothing: the CLI framework and what it coerces options
# with, and the standard library's temporary files (with the compression modules ``shutil``
# brings) and ``difflib`` (a misspelt setting's suggestion), which mcpx needs only off that path.
HEAVY = ("typer", "pydantic", "pydantic_core", "fastjsonschema", "tempfile", "shutil", "difflib")


def _env(root: Path) -> dict[str, str]:
    env = {**os.environ, "HOME": str(root), "MCPX_STATE": str(root / "state"), "MCPX_TRANSPORT_PORT": "0"}
    env.pop("MCPX_CONFIG", None)
    env.pop("MCPX_LOOP", None)
    return env


def _imported(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def _serve_once(root: Path, *args: str) -> tuple[str, str]:
    """Start ``mcpx daemon`` (import times on), wait until it serves, stop it: its stderr and daemon.json."""
    state = root / "state"
    argv = [sys.executable, "-X", "importtime", "-m", "mcpx", "daemon", "--state", str(state), *args]
    process = subprocess.Popen(
        argv, env=_env(root), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    lines: list[str] = []
    info: list[str] = []
    serving = threading.Event()

    def read() -> None:  # the daemon says where its ops API is once it serves
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if line.startswith("mcpx: ops API at "):
                info.append((state / "daemon.json").read_text())  # written before it says so
                serving.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert serving.wait(30), "".join(lines)[-2000:]
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        reader.join(10)
    return "".join(lines), info[0]


def test_the_daemon_as_mcpx_serve_starts_it_imports_no_cli_framework(tmp_path: Path) -> None:
    stderr, info = _serve_once(tmp_path)
    messages = [line for line in stderr.splitlines() if not line.startswith("import time:")]
    assert any(line.startswith("mcpx: daemon serving MCP at http://127.0.0.1:") for line in messages), (
        messages
    )
    assert any("serving the built-in default" in line for line in messages), messages
    assert not [name for name in _imported(stderr) if name.split(".")[0] in HEAVY]
    assert "mcpx.cli._daemon_command" in _imported(stderr)
    # No loop named: asyncio (spec/gateway.md §8), and daemon.json says so.
    assert '"loop":"asyncio"' in info, info
    assert "uvloop" not in _imported(stderr)


def test_a_named_loop_is_the_one_the_daemon_runs(tmp_path: Path) -> None:
    stderr, info = _serve_once(tmp_path, "--loop", "uvloop")
    assert '"loop":"uvloop"' in info, info
    assert "uvloop" in _imported(stderr), "asked for uvloop, it must run on it"


def test_what_the_fast_path_leaves_to_typer_typer_answers(tmp_path: Path) -> None:
    def daemon(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mcpx", "daemon", *args],
            check=False,
            env={**_env(tmp_path), **env},
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )

    helped = daemon("--help")
    assert helped.returncode == 0 and "Serve the gateway" in helped.stdout
    wrong = daemon("--no-such-option")
    assert wrong.returncode == 2 and "No such option" in wrong.stderr
    for bad in (daemon("--loop", "nope"), daemon(MCPX_LOOP="nope")):
        assert bad.returncode == 2 and "--loop must be asyncio, uvloop or trio" in bad.stderr
    assert not (tmp_path / "state" / "daemon.json").exists()  # none of them started a daemon
