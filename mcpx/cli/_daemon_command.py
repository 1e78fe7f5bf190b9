"""``mcpx daemon``'s body, without typer: shared by the typer command and the fast path.

``mcpx serve`` starts the daemon as ``mcpx daemon --state DIR``, and a
daemon lives for hours: importing typer (and the pydantic it coerces
options with) would cost it megabytes for its whole life.  So the fast path
(mcpx/cli/_entry.py ``FAST_PATHS``) reads the daemon's few options itself
and runs this; the typer command (``mcpx daemon --help`` and every form the
fast path leaves to it) runs the same function, so what a user sees is the
same either way.  spec/gateway.md §8.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Mapping, Sequence

from ._settings import collect_flags

__all__ = ["DEFAULT_LOOP", "LOOPS", "OPTIONS", "daemon", "run"]

LOOPS = ("asyncio", "uvloop", "trio")
OPTIONS: Mapping[str, str] = {  # the option -> the setting it sets ("" for --loop, which is no setting)
    "--port": "transport.port",
    "--address": "transport.address",
    "--passthrough": "mcp.passthrough",
    "--mcp-spec": "spec.first",
    "--state": "state.dir",
    "--config": "",
    "--loop": "",
}


# The daemon's event loop when none is named.  uvloop, measured side by side, costs the daemon
# the same per routed call (its work is Python, not the loop's; spec/gateway.md §8):
# ``--loop uvloop`` if wanted.
DEFAULT_LOOP = "asyncio"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(config: str | None, named: Mapping[str, str | None], loop: str) -> int:
    """Load the configuration (``named``: option -> value) and serve on ``loop`` until interrupted; the exit code."""
    from ..config import ConfigError, load_config
    from ..gateway import run_daemon

    if loop not in LOOPS:
        _say(
            "Usage: mcpx daemon [OPTIONS]\nTry 'mcpx daemon --help' for help.\n\n"
            "Error: Invalid value: --loop must be asyncio, uvloop or trio"
        )
        return 2
    try:
        flags, origins = collect_flags(
            [], {OPTIONS[option]: (option, value) for option, value in named.items() if OPTIONS[option]}
        )
        loaded = load_config(config, flags=flags, flag_origins=origins)
    except (ConfigError, ValueError) as exc:
        _say(f"mcpx: {exc}")
        return 2
    for warning in loaded.warnings:
        _say(f"mcpx: warning: {warning}")
    running = _running_daemon(loaded.settings.value("state.dir"))
    if running is not None:
        _say(running)
        return 2
    if not loaded.found:
        _say(
            f"mcpx: no configuration file at {loaded.path}; serving the built-in default: "
            "mcpx's demo server as 'demo'"
        )

    def ready(urls: list[str]) -> None:
        for url in urls:
            _say(f"mcpx: daemon serving MCP at {url}")
        base = next((u.rsplit("/", 1)[0] for u in urls if u.startswith("http")), None)
        if base:
            _say(f"mcpx: ops API at {base}/v1 (try `mcpx servers`)")

    try:
        run_daemon(loaded, loop=loop, ready=ready)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            address = loaded.settings.value("transport.address")
            port = loaded.settings.value("transport.port")
            _say(
                f"mcpx: the daemon could not start: {address}:{port} is in use by another program; "
                "pick another port with --port N (or MCPX_TRANSPORT_PORT; 0 picks a free one)"
            )
        else:
            _say(f"mcpx: the daemon could not start: {exc}")
        return 2
    except ValueError as exc:
        _say(f"mcpx: the daemon could not start: {exc}")
        return 2
    except KeyboardInterrupt:
        pass
    return 0


def _running_daemon(state: object) -> str | None:
    """What to say when a daemon already serves ``state`` (one per state directory), else ``None``."""
    from ..gateway._state import daemon_info

    info = daemon_info(os.path.expanduser(str(state)))
    if info is None:
        return None
    return (
        f"mcpx: a daemon is already running for {state} (pid {info.get('pid')}, MCP at {info.get('mcp')}); "
        "stop it with `mcpx stop`, or start another with its own --state DIR (and --port N)"
    )


def daemon(argv: Sequence[str]) -> int | None:
    """The fast path: ``mcpx daemon`` with the options above only, each ``--name value`` or ``--name=value``.

    Anything else (``--help``, another option or argument, an option given
    twice, a value that starts with ``-``) is ``None``: the typer command
    runs it, in its own words.
    """
    named: dict[str, str | None] = {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        option, sep, value = arg.partition("=")
        if option not in OPTIONS or option in named:
            return None
        if not sep:
            if not args:
                return None
            value = args.pop(0)
        if value.startswith("-"):
            return None
        named[option] = value
    loop = named.pop("--loop", None) or os.environ.get("MCPX_LOOP") or DEFAULT_LOOP
    if loop not in LOOPS:
        return None  # typer says what is wrong with it
    return run(named.pop("--config", None), named, loop)
