"""What mcpx remembers of an era probe, per server configuration (spec/era-probe.md, the cache).

``EraCache`` maps a server's configuration — its command, arguments,
environment and working directory, or its normalised URL — to the era and
revision a probe found and when (wall-clock seconds: the file outlives the
process).  A cached era is tried first, and a failure on it starts the
probe afresh (``STALE``).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import orjson

from .probe_events import ERAS, EraName, ProbeDone, ProbeFailed, _check_era
from .revisions import REVISIONS, Revision

_KEY_FIELDS_STDIO: Final = ("command", "args", "env", "cwd")


_HEX64: Final = re.compile(r"[0-9a-f]{64}")


_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True, kw_only=True)
class EraEntry:
    """What the cache remembers of a probe: the era, the revision, and when (wall-clock seconds)."""

    era: EraName
    revision: Revision | None
    at: float

    def __post_init__(self) -> None:
        _check_era(self.era, self.revision)
        if isinstance(self.at, bool) or not isinstance(self.at, int | float) or not math.isfinite(self.at):
            raise ValueError("at is a finite number of seconds")

    @classmethod
    def from_outcome(cls, done: ProbeDone, now: float) -> EraEntry:
        return cls(era=done.era, revision=done.revision, at=now)

    def to_obj(self) -> dict[str, Any]:
        return {
            "era": self.era,
            "revision": None if self.revision is None else str(self.revision),
            "at": self.at,
        }

    @classmethod
    def from_obj(cls, obj: Any) -> EraEntry | None:
        """The entry ``obj`` describes, or ``None`` if it describes none."""
        if not isinstance(obj, dict):
            return None
        era, revision, at = obj.get("era"), obj.get("revision"), obj.get("at")
        if era not in ERAS or (revision is not None and revision not in {str(r) for r in REVISIONS}):
            return None
        if isinstance(at, bool) or not isinstance(at, int | float):
            return None
        try:
            return cls(era=era, revision=None if revision is None else Revision(revision), at=at)
        except (ValueError, TypeError):
            return None


class EraCache:
    """The era of each server configuration, in memory and as the bytes of ``upstream-eras.json``.

    Keys are ``EraCache.key(config)``: a SHA-256 of what identifies a server
    (see ``key``), so the file names no command, URL or secret.  The cache is
    bounded: past ``max_entries`` the oldest entries go.
    """

    FILE_NAME: Final = "upstream-eras.json"
    FORMAT: Final = 1

    def __init__(self, *, max_entries: int = 512) -> None:
        if max_entries < 1:
            raise ValueError("max_entries is at least 1")
        self.max_entries = max_entries
        self._entries: dict[str, EraEntry] = {}

    @staticmethod
    def key(config: Mapping[str, Any]) -> str:
        """A stable digest of what identifies a server.

        stdio: ``command``, ``args``, ``env`` and ``cwd`` (env is part of it
        because it can change what a server is; only the digest is ever
        stored).  HTTP: ``url`` with scheme and host lower-cased, a default
        port, user info and fragment dropped, and ``transport`` when the
        configuration forces one.  Auth settings (``auth``, ``headers``) and
        everything else are left out: credentials do not change a server's
        era, and a rotated token should not cost a probe.  ``ValueError`` when
        ``config`` names neither a command nor a URL.
        """
        identity: dict[str, Any]
        url = config.get("url")
        command = config.get("command")
        if isinstance(url, str) and url:
            identity = {"kind": "http", "url": _normal_url(url)}
            transport = config.get("transport")
            if isinstance(transport, str):
                identity["transport"] = transport
        elif isinstance(command, str) and command:
            args = config.get("args") or []
            env = config.get("env") or {}
            cwd = config.get("cwd")
            if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
                raise ValueError("args is a list of strings")
            if not isinstance(env, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in env.items()
            ):
                raise ValueError("env maps strings to strings")
            if cwd is not None and not isinstance(cwd, str):
                raise ValueError("cwd is a string")
            identity = {"kind": "stdio", "command": command, "args": list(args), "env": dict(env), "cwd": cwd}
        else:
            raise ValueError("a server configuration names a command or a url")
        canonical = orjson.dumps({"v": 1, **identity}, option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(canonical).hexdigest()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def items(self) -> list[tuple[str, EraEntry]]:
        return sorted(self._entries.items())

    def get(self, key: str) -> EraEntry | None:
        return self._entries.get(key)

    def put(self, key: str, outcome: ProbeDone | EraEntry, now: float) -> EraEntry:
        """Remember ``outcome`` for ``key`` as of ``now`` (wall-clock); returns the entry stored."""
        if not _HEX64.fullmatch(key):
            raise ValueError("a key is what EraCache.key returns")
        entry = EraEntry(era=outcome.era, revision=outcome.revision, at=now)
        self._entries[key] = entry
        if len(self._entries) > self.max_entries:
            oldest = sorted(self._entries.items(), key=lambda kv: (kv[1].at, kv[0]))
            for old, _ in oldest[: len(self._entries) - self.max_entries]:
                del self._entries[old]
        return entry

    def invalidate(self, key: str) -> bool:
        """Forget ``key`` (its era stopped working); whether there was an entry."""
        return self._entries.pop(key, None) is not None

    def record(self, key: str, outcome: ProbeDone | ProbeFailed, now: float) -> None:
        """What to do with a probe's outcome: remember a success, forget the entry of a failure."""
        if isinstance(outcome, ProbeDone):
            self.put(key, outcome, now)
        else:
            self.invalidate(key)

    def to_bytes(self) -> bytes:
        doc = {"format": self.FORMAT, "eras": {k: e.to_obj() for k, e in self.items()}}
        return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"

    @classmethod
    def from_bytes(cls, data: bytes, *, max_entries: int = 512) -> EraCache:
        """The cache ``data`` holds.  Never raises: corrupt data gives an empty cache, a bad entry is skipped."""
        cache = cls(max_entries=max_entries)
        try:
            doc = orjson.loads(data)
        except (orjson.JSONDecodeError, TypeError):
            return cache
        if (
            not isinstance(doc, dict)
            or doc.get("format") != cls.FORMAT
            or not isinstance(doc.get("eras"), dict)
        ):
            return cache
        for key, obj in doc["eras"].items():
            entry = EraEntry.from_obj(obj)
            if entry is not None and isinstance(key, str) and _HEX64.fullmatch(key):
                cache.put(key, entry, entry.at)
        return cache


def _normal_url(url: str) -> str:
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"  # IPv6 literal
    port = parts.port
    netloc = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
