"""The era cache's file, ``<state>/upstream-eras.json``: read tolerantly, written owner-only and atomically.

The cache itself is pure (``mcpx.core._probe.EraCache``); this is the only
part that touches the disk (spec/era-probe.md "The cache").

* ``load_era_cache`` never fails: a missing, unreadable or corrupt file is an
  empty cache (the next probe of each server costs one round trip, nothing
  worse), and a bad entry is skipped on its own.
* ``save_era_cache`` writes a temporary file in the same directory, created
  with mode 0o600, flushes it to disk and renames it over the old one
  (``os.replace``), so a reader sees the old file or the new one, never half
  of either, and no other user can read it.  The state directory is created
  0o700 when missing.  Two processes saving at once: the last rename wins,
  and both files were whole.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from ..core._probe import EraCache

__all__ = ["era_cache_path", "load_era_cache", "save_era_cache"]


def era_cache_path(state_dir: str | os.PathLike[str]) -> Path:
    """Where the cache of ``state_dir`` lives."""
    return Path(state_dir) / EraCache.FILE_NAME


def load_era_cache(path: str | os.PathLike[str], *, max_entries: int = 512) -> EraCache:
    """The cache stored at ``path``; an empty one if there is none or it cannot be read."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return EraCache(max_entries=max_entries)
    return EraCache.from_bytes(data, max_entries=max_entries)


def save_era_cache(path: str | os.PathLike[str], cache: EraCache) -> None:
    """Replace the file at ``path`` with ``cache``, atomically, readable by its owner only."""
    target = Path(path)
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)  # mkstemp already uses 0o600; say so rather than rely on it
        with os.fdopen(fd, "wb") as out:
            out.write(cache.to_bytes())
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable where the platform allows
        with contextlib.suppress(OSError):
            dir_fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
