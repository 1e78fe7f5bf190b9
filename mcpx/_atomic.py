"""Replacing a small file whole: the one way mcpx writes its state files.

The data goes to a new temporary file in the same directory, created
``0600`` with ``O_EXCL`` (so the mode given is its mode from its first byte,
and nothing that already stands at that name is followed or reused), is
flushed to disk, and is renamed over the target (``os.replace``): a reader
sees the old file or the new one, never half of either.  Standard library
only, and none of ``tempfile``/``shutil``, which a daemon would otherwise
carry (with the compression modules ``shutil`` imports) for its whole life.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["replace_file"]

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def replace_file(target: Path, data: bytes, *, sync_directory: bool = False) -> None:
    """Replace ``target`` with ``data``, readable by its owner only; ``sync_directory`` makes the rename durable too."""
    temp = target.parent / f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(temp, _FLAGS, 0o600)
    try:
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, 0o600)  # what a strict umask took from the owner, back; never more
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if sync_directory and hasattr(os, "O_DIRECTORY"):  # where the platform can make a rename durable
        with contextlib.suppress(OSError):
            dir_fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
