"""What the daemon and its stdio shim share outside any protocol: ``daemon.json`` and the in-flight mirror.

Both sides import this module, so it needs the standard library only: the
shim (``mcpx serve``) must start fast, before any of mcpx's machinery is
imported.

``daemon.json`` (written by the daemon once it listens, 0600, removed when it
stops) names the daemon's pid, its HTTP URLs, its unix socket for HTTP
(``unix``) and the socket a shim hands a host's stdio to (``serve``).  It
also says what the daemon was started with (``started_with``): the
configuration file (its path, ``(mtime_ns, size)`` and SHA-256 when read),
the value of every setting that shapes what a host is served
(``HOST_SETTINGS``), and the configured servers' names.  A shim compares its
own configuration with that (``differences``) before it hands a host over,
so a host is never silently served by a daemon of another configuration
(spec/gateway.md §9).  The common case costs a ``stat`` already made and a
few string comparisons: the file is hashed only when its stamp differs.

The **in-flight mirror** is how a shim answers the requests its host had in
flight when the daemon died, at no cost per call over the socket: the shim
creates a small shared memory file and hands it to the daemon with the host's
pipes; the daemon writes each request id into a slot while the request runs
and clears the slot when it has been answered.  Nothing crosses a process
boundary per call (a store into shared memory); the shim reads the slots only
once the daemon's socket has closed.  A slot is ``SLOT`` bytes: a length byte,
then the JSON of the id.  The length is written last and cleared first, so a
daemon killed halfway through leaves a slot either whole or free.  An id too
long for a slot, or one that finds every slot taken, is reported on the
socket instead (``{"add": id}`` / ``{"done": id}``), which costs a write but
never loses the id.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import Config, Setting

__all__ = [
    "DAEMON_FILE",
    "HOST_SETTINGS",
    "MIRROR_SIZE",
    "SERVE_SOCKET",
    "SLOT",
    "InflightMirror",
    "daemon_info",
    "differences",
    "encode_id",
    "read_mirror",
    "refusal",
    "started_with",
]

DAEMON_FILE = "daemon.json"
SERVE_SOCKET = "serve.sock"
SLOT = 64
SLOTS = 1024
MIRROR_SIZE = SLOT * SLOTS


# The settings that shape what a host handed over on serve.sock is served (spec/configuration.md).
# Not here: state.dir (the same by construction: it is how the shim found the daemon),
# daemon.endpoint (the CLI's, not the daemon's), the HTTP listener's (transport.address, port,
# allowedOrigins, allowedHosts, sseKeepAlive, ssePollAfter, maxBody, requestTimeout: a stdio
# host never meets them), and mcp.passthrough, which each host chooses for itself (the hello).
HOST_SETTINGS = (
    "spec.precedence",
    "spec.first",
    "spec.lenient",
    "proto.askTimeout",
    "proto.askRounds",
    "proto.stateTTL",
    "pool.callTimeout",
    "pool.idleTimeout",
    "pool.drain",
    "pool.startTimeout",
    "pool.backoff",
    "pool.maxSpawnsPerMinute",
    "pool.spare",
    "transport.stdioDrain",
    "transport.maxLine",
)


def _digest(text: str) -> str:
    import hashlib  # only when a stamp differs (or in the daemon): OpenSSL costs a shim ~3 ms

    return hashlib.sha256(text.encode()).hexdigest()


def _real(path: str | None) -> str | None:
    return None if path is None else os.path.realpath(path)


def started_with(config: Config) -> dict[str, Any]:
    """What ``daemon.json`` records of the configuration a daemon was started with (``differences`` reads it)."""
    return {
        "config": {
            "path": _real(config.path),
            "found": config.found,
            "stamp": list(config.stamp) if config.stamp is not None else None,
            "sha256": _digest(config.text) if config.text is not None else None,
        },
        "settings": {key: config.settings[key].text() for key in HOST_SETTINGS},
        "servers": list(config.servers),
    }


def differences(info: dict[str, Any], config: Config) -> list[str]:
    """How ``config`` (a shim's) differs from what the daemon of ``info`` was started with; ``[]``: it does not.

    Each entry names one difference in words for the user.  A setting counts
    only where ``config`` was given it (the file, the environment or a flag)
    and its value is not the daemon's: a default asks for nothing.  A
    daemon that records nothing (an older mcpx) is not second-guessed.
    """
    recorded = info.get("started_with")
    if not isinstance(recorded, dict):
        return []
    found: list[str] = []
    theirs = recorded.get("config") or {}
    path = _real(config.path)
    if not theirs.get("found") and not config.found:
        pass  # both the built-in default, wherever each looked for a file
    elif theirs.get("path") != path:
        found.append(
            f"the daemon was started with the configuration file {theirs.get('path')}"
            f"{'' if theirs.get('found') else ' (not there: the built-in default)'}; "
            f"this serve reads {path}{'' if config.found else ' (not there: the built-in default)'}"
        )
    elif bool(theirs.get("found")) != config.found or (
        config.text is not None
        and theirs.get("stamp") != list(config.stamp or ())
        and theirs.get("sha256") != _digest(config.text)
    ):
        found.append(
            f"{path} has changed since the daemon (pid {info.get('pid')}) read it, "
            "and a daemon reads its configuration only when it starts"
        )
    settings = recorded.get("settings") or {}
    for setting in _given(config, settings):
        shown = setting.text()
        if shown != settings[setting.key]:
            found.append(
                f"{setting.key} is {shown} here (from {setting.origin}); the daemon's is {settings[setting.key]}"
            )
    return found


def _given(config: Config, recorded: dict[str, Any]) -> Iterator[Setting]:
    """The settings ``config`` was given (not defaults, none computed) that the daemon recorded."""
    return (s for s in config.settings.given() if s.key in recorded)


def refusal(info: dict[str, Any], found: list[str], state: str | os.PathLike[str], config: Config) -> str:
    """The message of a serve refused for ``found`` (``differences``): what differs, and the ways on."""
    again = "mcpx serve" + (f" --config {config.path}" if config.found else "")
    listed = "".join(f"\n  - {line}" for line in found)
    return (
        f"mcpx: not served: the daemon running for {state} (pid {info.get('pid')}) does not have this "
        f"serve's configuration:{listed}\n"
        f"Either stop it (`mcpx stop --state {state}`): the next `mcpx serve` starts a daemon with this "
        "configuration (and the hosts of the old one, reconnecting, are served by it); or give this "
        f"configuration a daemon of its own: `{again} --state DIR` (or MCPX_STATE=DIR) in the host's "
        "server entry."
    )


def daemon_info(state_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``<state>/daemon.json`` of a daemon that is still running, else ``None``."""
    path = Path(state_dir) / DAEMON_FILE
    try:
        info = json.loads(path.read_bytes())
        os.kill(int(info["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if isinstance(info, dict) and info.get("url") else None


def encode_id(request_id: Any) -> bytes:
    """A request id as the mirror stores it: compact JSON (the host's own value, whatever its type)."""
    if type(request_id) is int:  # the common case, on every call: no JSON encoder needed
        return str(request_id).encode()
    return json.dumps(request_id, separators=(",", ":"), ensure_ascii=False).encode()


class InflightMirror:
    """The daemon's side of the mirror: ``add`` when a request starts running, ``done`` when it is answered.

    Either returns ``False`` when the id could not be mirrored (too long, or no
    slot free); the caller then reports it on the socket.
    """

    def __init__(self, fd: int) -> None:
        os.ftruncate(fd, MIRROR_SIZE)
        self._map = mmap.mmap(fd, MIRROR_SIZE)
        self._free = list(range(SLOTS - 1, -1, -1))
        # The host's id (an int or a string, as the session accepts) -> its slot, or its slots
        # when the host reused an id whose answer is not written yet.
        self._slots: dict[Any, int | list[int]] = {}

    def add(self, request_id: Any) -> bool:
        data = b"%d" % request_id if type(request_id) is int else encode_id(request_id)
        if len(data) >= SLOT or not self._free:
            return False
        slot = self._free.pop()
        base = slot * SLOT
        self._map[base + 1 : base + 1 + len(data)] = data
        self._map[base] = len(data)  # last: the slot is whole once this is set
        held = self._slots.get(request_id)
        if held is None:
            self._slots[request_id] = slot
        elif isinstance(held, int):
            self._slots[request_id] = [held, slot]
        else:
            held.append(slot)
        return True

    def done(self, request_id: Any) -> bool:
        held = self._slots.get(request_id)
        if held is None:
            return False
        if isinstance(held, int):
            slot = held
            del self._slots[request_id]
        else:
            slot = held.pop()
            if len(held) == 1:
                self._slots[request_id] = held[0]
        self._map[slot * SLOT] = 0  # first: a free slot is never read as an id
        self._free.append(slot)
        return True

    def close(self) -> None:
        self._map.close()


def read_mirror(fd: int) -> list[Any]:
    """The shim's side: every id the mirror holds (the requests the daemon had running), and clear it."""
    with mmap.mmap(fd, MIRROR_SIZE) as view:
        ids: list[Any] = []
        for base in range(0, MIRROR_SIZE, SLOT):
            length = view[base]
            if length:
                with contextlib.suppress(ValueError):  # cannot happen for a whole slot
                    ids.append(json.loads(bytes(view[base + 1 : base + 1 + length])))
        view[:] = bytes(MIRROR_SIZE)
        return ids
