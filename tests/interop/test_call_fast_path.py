"""``mcpx call`` through a running daemon takes the fast path, and answers exactly as the typer command does.

The fast path (mcpx/cli/_fast.py) is pinned by what it imports, not by how
long it takes: ``mcpx call SERVER TOOL`` must not import typer, anyio, h11
or any of ``mcpx.core``, ``mcpx.client`` and ``mcpx.drivers``, which were
most of the command's time (click only to print a message, and a plain
call prints none).  Each case below
runs twice — as ``python -m mcpx`` (``mcpx.cli.main``, fast path first) and
through the typer app directly — and the exit code, stdout and stderr must
be the same; the cases the fast path leaves to typer are checked to have
gone there.  The progress drawn on a terminal is
tests/interop/test_call_progress.py's, which runs through the fast path.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from ._daemon_process import ROOT, DaemonProcess

pytestmark = pytest.mark.timeout(120)

HEAVY = ("typer", "rich", "anyio", "h11", "mcpx.core", "mcpx.client", "mcpx.drivers", "mcpx.server")
FAST = ("-m", "mcpx")
TYPER = ("-c", "from mcpx.cli import app; app(prog_name='python -m mcpx')")


@dataclass(frozen=True, slots=True)
class Run:
    returncode: int
    stdout: bytes
    stderr: bytes  # without -X importtime's lines
    imported: frozenset[str]

    def heavy(self) -> list[str]:
        return sorted(m for m in self.imported if m.startswith(HEAVY))


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    running = DaemonProcess(tmp_path_factory.mktemp("fast"))
    yield running
    running.close()


def mcpx(daemon: DaemonProcess, entry: tuple[str, ...], *args: str, **env: str) -> Run:
    """``mcpx ARGS`` (stdout and stderr pipes) under ``-X importtime``, to see what it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *entry, *args],
        env={**daemon.env, **env},
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    imported: set[str] = set()
    said: list[bytes] = []
    for line in done.stderr.splitlines(keepends=True):
        if line.startswith(b"import time:"):
            name = line.split(b"|")[-1].strip().decode()
            if name != "package":  # the header line
                imported.add(name)
        else:
            said.append(line)
    return Run(done.returncode, done.stdout, b"".join(said), frozenset(imported))


def test_a_plain_call_imports_neither_typer_nor_the_protocol_machines(daemon: DaemonProcess) -> None:
    ran = mcpx(daemon, FAST, "call", "demo", "echo", "--arg", "text=hi")
    assert ran.returncode == 0, ran.stderr
    assert orjson.loads(ran.stdout)["content"] == [{"type": "text", "text": "hi"}]
    assert ran.heavy() == []
    assert not any(m.startswith("click") for m in ran.imported)  # imported only to print a message
    assert {"mcpx.cli._fast", "mcpx.config", "orjson", "http.client"} <= ran.imported
    assert "mcpx.cli._main" not in ran.imported and "mcpx.cli._gateway" not in ran.imported


def test_the_typer_entry_of_these_tests_is_the_typer_command(daemon: DaemonProcess) -> None:
    ran = mcpx(daemon, TYPER, "call", "demo", "echo", "--arg", "text=hi")
    assert ran.returncode == 0, ran.stderr
    assert "typer" in ran.imported and "mcpx.cli._fast" in ran.imported  # for call_arguments only
    assert "mcpx.core" in ran.imported


@pytest.mark.parametrize("entry", [FAST, TYPER], ids=["fast", "typer"])
def test_an_argument_is_typed_by_the_tools_input_schema(
    daemon: DaemonProcess, entry: tuple[str, ...]
) -> None:
    """``--arg text=42`` to echo's string parameter is the text "42"; add's numbers are numbers; ``:=`` is JSON."""
    ran = mcpx(daemon, entry, "call", "demo", "echo", "--arg", "text=42", "--json")
    assert ran.returncode == 0, ran.stderr
    assert orjson.loads(ran.stdout)["content"] == [{"type": "text", "text": "42"}]
    ran = mcpx(daemon, entry, "call", "demo", "add", "--arg", "a=2", "--arg", "b=3.5", "--json")
    assert ran.returncode == 0 and orjson.loads(ran.stdout)["content"][0]["text"] == "5.5", ran
    ran = mcpx(daemon, entry, "call", "demo", "echo", "--arg", "text:=42", "--json")  # a number, as asked
    assert ran.returncode == 1 and orjson.loads(ran.stdout)["isError"] is True, ran  # the tool refuses it


# (name, argv after `call`, extra environment, whether the fast path answers it)
CASES: list[tuple[str, list[str], dict[str, str], bool]] = [
    ("text", ["demo", "echo", "--arg", "text=hi"], {}, True),
    ("text-like-a-number", ["demo", "echo", "--arg", "text=42"], {}, True),
    ("explicit-json", ["demo", "add", "--arg", "a:=1", "--arg", "b:=2"], {}, True),
    ("json-and-equals", ["--json", "demo", "echo", "--arg=text=hé ✓"], {}, True),
    ("json-args-under-arg", ["--json-args", '{"a": 1, "b": 2}', "demo", "add", "--arg", "b=5"], {}, True),
    ("repeated-options", ["demo", "echo", "--arg", "text=a", "--arg", "text=b", "--timeout", "30"], {}, True),
    ("structured-content", ["demo", "weather", "--arg", "city=Oslo"], {}, True),
    ("tool-error-exits-1", ["demo", "fail"], {}, True),
    ("upstream-error-exits-1", ["demo", "no_such_tool"], {}, True),
    ("unknown-server-exits-2", ["nope", "echo"], {}, True),
    ("call-timeout", ["demo", "sleep", "--arg", "seconds=5", "--timeout", "0.2"], {}, True),
    (
        "endpoint-flag",
        ["demo", "echo", "--arg", "text=e", "--daemon", "{base}", "--state", "{none}"],
        {},
        True,
    ),
    (
        "endpoint-env",
        ["demo", "echo", "--arg", "text=e"],
        {"MCPX_DAEMON": "{base}", "MCPX_STATE": "{none}"},
        True,
    ),
    ("endpoint-refused", ["demo", "echo", "--daemon", "http://127.0.0.1:1"], {}, True),
    ("no-daemon", ["demo", "echo", "--state", "{none}"], {}, False),
    ("no-daemon-env", ["demo", "echo"], {"MCPX_STATE": "{none}"}, False),
    ("bad-argument", ["demo", "echo", "--arg", "text"], {}, False),
    ("bad-json-args", ["demo", "echo", "--json-args", "[1]"], {}, False),
    ("bad-timeout", ["demo", "echo", "--timeout", "soon"], {}, False),
    ("bad-setting", ["demo", "echo"], {"MCPX_POOL_CALL_TIMEOUT": "never"}, False),
    ("ssh-endpoint-refused", ["demo", "echo", "--daemon", "ssh://-oProxyCommand=x"], {}, False),
    ("one-target", ["demo"], {}, False),
    ("help", ["--help"], {}, False),
    ("unknown-option", ["demo", "echo", "--verbose"], {}, False),
    ("value-like-an-option", ["demo", "echo", "--arg", "-x=1"], {}, False),
    ("not-utf8", ["demo", "echo", "--arg", "text=hi"], {"PYTHONIOENCODING": "latin-1"}, False),
]


@pytest.mark.parametrize(("args", "env", "fast"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_fast_path_answers_as_the_typer_command_does(
    daemon: DaemonProcess, tmp_path: Path, args: list[str], env: dict[str, str], fast: bool
) -> None:
    def fill(text: str) -> str:
        return text.replace("{base}", daemon.base).replace("{none}", str(tmp_path / "no-daemon-here"))

    args = [fill(a) for a in args]
    env = {k: fill(v) for k, v in env.items()}
    quick = mcpx(daemon, FAST, "call", *args, **env)
    typer = mcpx(daemon, TYPER, "call", *args, **env)
    assert (quick.returncode, quick.stdout, quick.stderr) == (typer.returncode, typer.stdout, typer.stderr)
    assert (quick.heavy() == []) is fast, quick.heavy()
