"""What the daemon and its stdio shim share outside any protocol: ``daemon.json`` and the in-flight mirror.

Both sides import this module, so it needs the standard library only: the
shim (``mcpx serve``) must start fast, before any of mcpx's machinery is
imported.

``daemon.json`` (written by the daemon once it listens, 0600, removed when it
stops) names the daemon's pid, its HTTP URLs, its unix socket for HTTP
(``unix``) and the socket a shim hands a host's stdio to (``serve``).

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
from pathlib import Path
from typing import Any

__all__ = [
    "DAEMON_FILE",
    "MIRROR_SIZE",
    "SERVE_SOCKET",
    "SLOT",
    "InflightMirror",
    "daemon_info",
    "encode_id",
    "read_mirror",
]

DAEMON_FILE = "daemon.json"
SERVE_SOCKET = "serve.sock"
SLOT = 64
SLOTS = 1024
MIRROR_SIZE = SLOT * SLOTS


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
