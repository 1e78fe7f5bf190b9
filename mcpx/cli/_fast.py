"""``mcpx call SERVER TOOL`` without typer: argv, the configuration, ``POST /v1/call``, the result.

``mcpx.cli.main`` runs ``call`` before the typer app (mcpx/cli/_entry.py).
It needs the standard library, orjson and ``mcpx.config``, so a call through
a running daemon costs an interpreter start and one request rather than
the import of typer and every protocol machine (mcpx.core).  It reads::

    mcpx call SERVER TOOL [--arg K=V | --arg K:=JSON]... [--json-args JSON] [--json]
                          [--timeout SECONDS] [--state DIR] [--daemon http://HOST:PORT]

with the options anywhere, each as ``--name value`` or ``--name=value``.
Everything else returns ``None`` before anything is printed or sent, and
the typer app then runs the command as it always has, in its own words:
``--help``, any other option, an option value starting with ``-`` (typer
might read it either way), ``--`` or a URL (the direct forms), arguments
typer refuses, a configuration with a problem, an ssh:// endpoint, no
daemon running, and a stdout or stderr whose encoding is not UTF-8 (click
re-encodes for some).  Those are rare, or slow anyway.

Once it has a daemon to ask, it answers in full, from code the typer
command shares (mcpx/cli/_v1.py): the same request, the same output
(JSON when stdout is not a terminal or with ``--json``, text otherwise;
progress on stderr when it is a terminal), the same messages and exit
codes (1 for a tool error or an upstream's, 2 when the daemon refuses the
call or cannot be reached).  Messages go through ``click.echo``, imported
only then, as typer's do: it drops terminal escapes from a message when
stderr is not a terminal.  Exit codes for what typer catches around every
command are typer's: 130 on Ctrl-C, 1 when stdout is a closed pipe.
"""

from __future__ import annotations

import codecs
import errno
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..config import ConfigError, load_config
from ..gateway._state import daemon_info
from ._settings import collect_flags
from ._v1 import Daemon, DaemonError, call_body, one_line, refusal, result_lines

__all__ = ["call", "call_arguments"]

_VALUED = frozenset({"--arg", "--json-args", "--timeout", "--state", "--daemon"})


def call_arguments(args: Sequence[str], json_arguments: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    """The tool's arguments from ``--arg`` and ``--json-args``: (JSON values, texts to be typed).

    ``--arg k=v`` gives the text ``v``, which whoever knows the tool's input
    schema types (the daemon for ``/v1/call``'s ``args``:
    mcpx/gateway/_arguments.py); ``--arg k:=JSON`` gives a JSON value, as
    ``--json-args`` does, and a later ``--arg`` wins over an earlier one and
    over ``--json-args``.  ``ValueError`` with the message for the user
    when any of them is malformed.
    """
    arguments: dict[str, Any] = {}
    if json_arguments is not None:
        try:
            parsed = orjson.loads(json_arguments)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"--json-args is not JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise ValueError("--json-args must be a JSON object")
        arguments.update(parsed)
    texts: dict[str, str] = {}
    for text in args:
        key, sep, value = text.partition("=")
        explicit = key.endswith(":")
        key = key.removesuffix(":")
        if not sep or not key:
            raise ValueError(f"--arg takes key=value (or key:=JSON), not {text!r}")
        if explicit:
            try:
                arguments[key] = orjson.loads(value)
            except orjson.JSONDecodeError:
                raise ValueError(f"--arg {key}:= takes a JSON value, not {value!r}") from None
            texts.pop(key, None)
        else:
            texts[key] = value
            arguments.pop(key, None)
    return arguments, texts


@dataclass(slots=True)
class _Argv:
    targets: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)  # the last of each other valued option
    as_json: bool = False


def _read(args: Sequence[str]) -> _Argv | None:
    """``args`` (after ``call``) as click would read them, or ``None`` when they are not the plain form."""
    out = _Argv()
    rest = iter(args)
    for token in rest:
        if not token.startswith("-"):
            out.targets.append(token)
            continue
        if token == "--json":
            out.as_json = True
            continue
        name, sep, value = token.partition("=")
        if name not in _VALUED:
            return None
        if not sep:
            following = next(rest, None)
            if following is None:
                return None
            value = following
        if value.startswith("-"):
            return None
        if name == "--arg":
            out.args.append(value)
        else:
            out.values[name] = value
    return out


def _utf8(stream: Any) -> bool:
    encoding = getattr(stream, "encoding", None)
    if not isinstance(encoding, str):
        return False
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def _say(message: str, code: int) -> int:
    """``message`` on stderr as typer's commands print it (mcpx/cli/_gateway.py ``_fail``); ``code``."""
    from click import echo

    echo(one_line(message), err=True)
    return code


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()  # as click.echo does, so stdout and stderr interleave as they did


def call(args: Sequence[str]) -> int | None:
    """``mcpx call`` with ``args`` (argv after ``call``): its exit code, or ``None`` for the typer app to run it."""
    try:
        return _call(args)
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        devnull = os.open(os.devnull, os.O_WRONLY)  # nothing more can be said; at exit, flush into nothing
        os.dup2(devnull, sys.stdout.fileno())
        os.dup2(devnull, sys.stderr.fileno())
        return 1


def _call(args: Sequence[str]) -> int | None:
    argv = _read(args)
    if argv is None or len(argv.targets) != 2 or not (_utf8(sys.stdout) and _utf8(sys.stderr)):
        return None
    if any(t.startswith(("http://", "https://")) for t in argv.targets):
        return None  # `mcpx call TOOL URL`: the direct form
    try:
        arguments, texts = call_arguments(argv.args, argv.values.get("--json-args"))
        timeout = float(argv.values["--timeout"]) if "--timeout" in argv.values else None
    except ValueError:
        return None
    given = argv.values.get("--state")
    state = given if given is not None else os.environ.get("MCPX_STATE") or None  # click's envvar rule
    daemon = _daemon(state, argv.values.get("--daemon"))
    if daemon is None:
        return None

    server, tool = argv.targets
    body = call_body(server, tool, arguments, timeout, texts)
    try:
        if sys.stderr.isatty():  # a person is watching: show the upstream's progress there
            status, answer = daemon.call_showing_progress(body, f"{server}/{tool}")
        else:
            status, answer = daemon.request("POST", "/v1/call", body)
    except DaemonError as exc:
        return _say(str(exc), 2)
    refused = refusal(status, answer)
    if refused is not None:
        return _say(*refused)
    result = answer["result"]
    if argv.as_json or not sys.stdout.isatty():
        _print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    else:
        for line in result_lines(result):
            _print(line)
    return 1 if result.get("isError") else 0


def _daemon(state: str | None, endpoint_flag: str | None) -> Daemon | None:
    """The daemon the typer command would ask (``_gateway._target``), or ``None`` to leave it to typer."""
    try:
        flags, origins = collect_flags(
            [], {"state.dir": ("--state", state), "daemon.endpoint": ("--daemon", endpoint_flag)}
        )
        settings = load_config(None, flags=flags, flag_origins=origins).settings
    except (ConfigError, ValueError):
        return None
    endpoint = settings.value("daemon.endpoint")
    if endpoint is not None:
        return Daemon(endpoint.base_url, remote=True) if endpoint.scheme == "http" else None
    info = daemon_info(str(settings.value("state.dir")))
    return None if info is None else Daemon(str(info["url"]))
