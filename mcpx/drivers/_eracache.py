"""The era cache's file, ``<state>/upstream-eras.json``: read tolerantly, written owner-only and atomically.

The cache itself is pure (``mcpx.core.probe.EraCache``); this is the only
part that touches the disk (spec/era-probe.md "The cache").

* ``load_era_cache`` never fails: a missing, unreadable or corrupt file is an
  empty cache (the next probe of each server costs one round trip, nothing
  worse), and a bad entry is skipped on its own.
* ``save_era_cache`` writes a temporary file in the same directory, created
  with mode 0o600, flushes it to disk and renames it over the old one
  (``os.replace``), so a reader sees the old file or the new one, never half
  of either, and no other user can read it.  The state directory is created
  0o700 when missing.
* ``update_era_cache`` is how a result is recorded: it reads the file again,
  applies the change and saves it, holding an exclusive lock on
  ``<file>.lock`` throughout (``fcntl.flock``, where the platform has it),
  so probes that end at once (a daemon starting eight servers) each add
  their entry to what the others saved, rather than save the copy they read
  before their probe and lose the rest.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from .._atomic import replace_file
from ..core.probe import EraCache, ProbeDone, ProbeFailed

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks; the last save wins there
    fcntl = None  # type: ignore[assignment]

__all__ = ["era_cache_path", "load_era_cache", "record_outcome", "save_era_cache", "update_era_cache"]


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
    replace_file(target, cache.to_bytes(), sync_directory=True)


def update_era_cache(path: str | os.PathLike[str], change: Callable[[EraCache], bool]) -> None:
    """Read the file at ``path``, apply ``change`` and save it if ``change`` says it changed, under a lock.

    Other processes' entries saved meanwhile are kept: each update starts
    from the file as it is now, not from a copy read earlier.
    """
    target = Path(path)
    with _locked(target):
        cache = load_era_cache(target)
        if change(cache):
            save_era_cache(target, cache)


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[None]:
    """An exclusive lock on ``<target>.lock`` (created 0o600) while the block runs."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(f"{target}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held for a read and a write of a small file
        yield
    finally:
        os.close(fd)  # closing lets go of the lock


def record_outcome(
    path: str | os.PathLike[str], key: str, outcome: ProbeDone | ProbeFailed, now: float
) -> None:
    """A probe's outcome into the file at ``path`` (``EraCache.record``), kept beside every other entry."""

    def record(cache: EraCache) -> bool:
        cache.record(key, outcome, now)
        return True

    update_era_cache(path, record)
